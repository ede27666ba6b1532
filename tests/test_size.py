"""flagbench size on real objects, archives and executables built here by real compilers.

Oracles: GNU nm (binutils-multiarch reads every target) for the symbol list, the kernel's
bloat-o-meter (Debian's 6.1 copy, and the same with the upstream weak-symbol patch applied)
for --format=bom, readelf for the padding arithmetic.
"""
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from elf_util import run_verb
from flagbench import elf, size
from flagbench.toolchains import TARGETS

DATA = Path(__file__).parent / "data" / "size"
ORACLE = Path(__file__).parent.parent / ".cache" / "bloat-o-meter"
ALL = [("x86_64", "gcc"), ("x86_64", "clang"), ("aarch64", "gcc"), ("arm", "gcc"),
       ("riscv64", "gcc"), ("loongarch64", "clang"), ("hppa", "gcc"), ("hppa64", "gcc")]


def cc(tmp, target, compiler, source, out, flags=()):
    t = TARGETS[target]
    argv = t.compiler_argv(compiler) + list(t.base_cflags) + ["-O2", "-c", str(source), "-o", str(out)]
    subprocess.run(argv + list(flags), check=True, capture_output=True)
    return out


def nm_sized(path):
    """(name, letter, size) of `nm --size-sort`, lines as bloat-o-meter reads them."""
    out = subprocess.run(["nm", "--size-sort", str(path)], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        if not line or ":" in line:
            continue
        s, letter, name = line.split()
        rows.append((name, letter, int(s, 16)))
    return collections.Counter(rows)


def listed(path):
    """What flagbench's reader lists, as nm_sized counts it."""
    return collections.Counter(elf.sized_symbols(path))


def flagbench(*args):
    return subprocess.run([sys.executable, "-m", "flagbench", "size", *map(str, args)],
                          capture_output=True, text=True)


def oracle(tmp_path, *args, current=False):
    """Run bloat-o-meter; CURRENT applies upstream's weak-symbol commit to the 6.1 copy."""
    if not ORACLE.exists():
        pytest.skip(f"no {ORACLE} (the kernel's bloat-o-meter): scripts/install-deps extracts it "
                    "from linux-source-6.1")
    script = ORACLE
    if current:
        text = ORACLE.read_text()
        for a, b in (('"Function", "tT")', '"Function", "tTwW")'), ('"Data", "dDbB")', '"Data", "dDbBvV")'),
                     ('"Data", "dDbBrR")', '"Data", "dDbBrRvV")'),
                     ('"Function", "tTdDbBrR")', '"Function", "tTdDbBrRvVwW")')):
            assert a in text
            text = text.replace(a, b)
        script = tmp_path / "bloat-o-meter-current"
        script.write_text(text)
    out = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("target,compiler", ALL, ids=[f"{t}-{c}" for t, c in ALL])
def test_symbols_match_nm_on_every_target(tmp_path, target, compiler):
    obj = cc(tmp_path, target, compiler, DATA / "kinds.c", tmp_path / "kinds.o")
    want = nm_sized(obj)
    assert listed(obj) == want
    letters = {letter for _, letter, _ in want}
    assert {"T", "W", "V", "D", "d", "B", "b", "R", "r", "C"} <= letters, letters


def test_static_executable_archive_and_module(tmp_path):
    exe = tmp_path / "prog"
    (tmp_path / "main.c").write_text("#include <stdio.h>\nint main(void){puts(\"hi\");return 0;}\n")
    subprocess.run(["gcc", "-O2", "-static", str(tmp_path / "main.c"), "-o", str(exe)], check=True)
    objs = [cc(tmp_path, "x86_64", "gcc", DATA / f"{n}.c", tmp_path / f"{n}_with_a_long_member_name.o")
            for n in ("kinds", "funcs", "module")]
    gnu = tmp_path / "gnu.a"
    subprocess.run(["ar", "rcs", str(gnu), *map(str, objs)], check=True)
    bsd = tmp_path / "bsd.a"
    subprocess.run(["llvm-ar-19", "rcs", "--format=bsd", str(bsd), *map(str, objs)], check=True)
    ko = tmp_path / "demo.ko"
    subprocess.run(["ld", "-r", "-o", str(ko), str(objs[2])], check=True)
    for path in (exe, gnu, ko):
        assert listed(path) == nm_sized(path), path
    assert listed(bsd) == nm_sized(gnu)                 # same members, BSD names
    assert len(elf.open_input(str(gnu)).members) == 3
    assert "i" in {letter for _, letter, _ in nm_sized(exe)}  # glibc's ifuncs (memcpy...)
    assert sum(nm_sized(exe).values()) > 1000           # glibc's symbols, not just main


def pair(tmp_path, target="x86_64", compiler="gcc", source="kinds.c", old=("-O1",), new=("-O2",)):
    a = cc(tmp_path, target, compiler, DATA / source, tmp_path / f"old-{target}.o", old)
    b = cc(tmp_path, target, compiler, DATA / source, tmp_path / f"new-{target}.o", new)
    return a, b


@pytest.mark.parametrize("mode", ["", "-c", "-d", "-t"])
def test_bom_matches_bloat_o_meter_without_weak_symbols(tmp_path, mode):
    objs = []
    for flags in (("-O1",), ("-O2", "-funroll-loops")):
        tag = "x".join(f.strip("-") for f in flags)
        for src in ("funcs.c", "module.c"):
            objs.append(cc(tmp_path, "x86_64", "gcc", DATA / src, tmp_path / f"{src}.{tag}.o", flags))
    old, new = tmp_path / "old.a", tmp_path / "new.a"
    subprocess.run(["ar", "rcs", str(old), *map(str, objs[:2])], check=True)
    subprocess.run(["ar", "rcs", str(new), *map(str, objs[2:])], check=True)
    assert not any(t in "wWvV" for _, t, _ in nm_sized(old) + nm_sized(new))
    args = [mode] if mode else []
    for a, b in ((objs[0], objs[2]), (objs[1], objs[3]), (old, new)):
        want = oracle(tmp_path, *args, a, b)
        got = flagbench("--format=bom", *args, a, b)
        assert got.returncode == 0, got.stderr
        assert got.stdout == want
    assert "vermagic" not in got.stdout and "__mod_" not in got.stdout


@pytest.mark.parametrize("target,compiler", ALL, ids=[f"{t}-{c}" for t, c in ALL])
def test_bom_with_weak_symbols_on_every_target(tmp_path, target, compiler):
    a, b = pair(tmp_path, target, compiler, old=("-O1",), new=("-O2",))
    got = flagbench("--format=bom", a, b)
    assert got.returncode == 0, got.stderr
    assert got.stdout == oracle(tmp_path, a, b, current=True)
    # By hand from nm: the weak function and the weak object are in the table (6.1 drops them).
    old, new = nm_sized(a), nm_sized(b)
    weak = {n: s for n, t, s in new if t in "wWvV"}
    old_weak = {n: s for n, t, s in old if t in "wWvV"}
    assert set(weak) == {"weak_fn", "weak_data"}
    total_old = sum(s for _, t, s in old if t in size.DEFAULT_TYPES)
    total_new = sum(s for _, t, s in new if t in size.DEFAULT_TYPES)
    assert f"Total: Before={total_old}, After={total_new}," in got.stdout
    d = weak["weak_fn"] - old_weak["weak_fn"]
    if d:  # bloat-o-meter's row format
        assert "%-40s %7s %7s %+7d" % ("weak_fn", old_weak["weak_fn"], weak["weak_fn"], d) in got.stdout
    assert "weak_fn" not in oracle(tmp_path, a, b)


def readelf_padding(path):
    """Padding in .text from readelf alone: gaps after each function up to the next or the end."""
    sections = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    m = re.search(r"\]\s+\.text\s+PROGBITS\s+\w+\s+\w+\s+(\w+)", sections)
    text_size = int(m.group(1), 16)
    syms = subprocess.run(["readelf", "-sW", str(path)], capture_output=True, text=True).stdout
    ndx = re.search(r"\[\s*(\d+)\]\s+\.text\s", sections).group(1)
    funcs = sorted((int(p[1], 16), int(p[2])) for p in (line.split() for line in syms.splitlines())
                   if len(p) >= 8 and p[3] == "FUNC" and p[6] == ndx)
    ends = [v + s for v, s in funcs]
    starts = [v for v, _ in funcs][1:] + [text_size]
    return sum(nxt - end for end, nxt in zip(ends, starts)), len(funcs)


def test_padding_with_falign_functions_64(tmp_path):
    a = cc(tmp_path, "x86_64", "gcc", DATA / "funcs.c", tmp_path / "a.o")
    b = cc(tmp_path, "x86_64", "gcc", DATA / "funcs.c", tmp_path / "b.o", ["-falign-functions=64"])
    bom = flagbench("--format=bom", a, b).stdout
    assert bom == oracle(tmp_path, a, b)
    assert bom.rstrip().endswith("chg +0.00%")            # bloat-o-meter sees nothing
    out = flagbench("--format=json", a, b)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    pad_a, n = readelf_padding(a)
    pad_b, _ = readelf_padding(b)
    assert n == 21
    assert (j["padding"]["old"], j["padding"]["new"]) == (pad_a, pad_b)
    assert pad_b - pad_a > 20 * 16                        # 21 functions now 64-byte apart
    assert j["padding"]["delta"] == pad_b - pad_a
    assert j["code"]["delta"] == j["padding"]["delta"] + j["in_symbols"]["delta"]
    text = flagbench(a, b).stdout
    assert f"padding {pad_b - pad_a:+d}" in text
    # Footprint: size plus the gap after it, so footprints add up to the symbols plus padding.
    fns = [s for s in j["symbols"] if s["type"] in "tT"]
    assert all(s["footprint_new"] >= s["new"] for s in fns if s["new"])


def test_cold_code_is_shown_apart(tmp_path):
    a = cc(tmp_path, "x86_64", "gcc", DATA / "kinds.c", tmp_path / "a.o", ["-O2"])
    j = json.loads(flagbench("--format=json", a, a).stdout)
    cold = sum(s for n, t, s in nm_sized(a) if ".cold" in n)
    unlikely = subprocess.run(["readelf", "-SW", str(a)], capture_output=True, text=True).stdout
    m = re.search(r"\.text\.unlikely\s+PROGBITS\s+\w+\s+\w+\s+(\w+)", unlikely)
    assert cold > 0 and m
    assert j["cold"]["new"] == cold
    assert j["text_unlikely"]["new"] == int(m.group(1), 16)
    assert any(s["name"] == ".text.unlikely" for s in j["sections"])


def test_formats_and_filters(tmp_path):
    a, b = pair(tmp_path, old=("-O1",), new=("-O2",))
    j = json.loads(flagbench("--format=json", a, b).stdout)
    assert {"symbols", "sections", "padding", "total"} <= j.keys()
    assert all({"name", "type", "old", "new", "delta"} <= s.keys() for s in j["symbols"])
    assert all(s["delta"] == (s["new"] or 0) - (s["old"] or 0) for s in j["symbols"])
    funcs = json.loads(flagbench("--format=json", "--functions", a, b).stdout)
    assert funcs["symbols"] and all(s["type"] in "tTwW" for s in funcs["symbols"])
    data = json.loads(flagbench("--format=json", "--kind", "data", a, b).stdout)
    assert all(s["type"] in "dDbBvV" for s in data["symbols"])
    one = json.loads(flagbench("--format=json", "--top", "1", a, b).stdout)
    assert len(one["symbols"]) == 1
    assert abs(one["symbols"][0]["delta"]) == max(abs(s["delta"]) for s in j["symbols"])
    only = json.loads(flagbench("--format=json", "--match", "^get$", a, b).stdout)
    assert [s["name"] for s in only["symbols"]] in (["get"], [])
    csv = flagbench("--format=csv", a, b).stdout.splitlines()
    assert csv[0].startswith("kind,name,type,old,new,delta")
    assert len([r for r in csv if r.startswith("symbol,")]) == len(j["symbols"])
    md = flagbench("--format=md", a, b).stdout
    assert "| symbol | old | new | delta |" in md


def test_sections_of_equal_size_are_in_name_order_whatever_the_hash_seed(tmp_path):
    """Sections that tie on size come in name order: the same output under every PYTHONHASHSEED
    (the union of the two sides' names is a set, whose order the seed decides)."""
    names = [f"sec_{c}" for c in "hcfadgbe"]
    src = tmp_path / "same.c"
    src.write_text("".join(f'__attribute__((section("{n}"))) char {n}_data[16] = {{1}};\n' for n in names))
    obj = cc(tmp_path, "x86_64", "gcc", src, tmp_path / "same.o")
    outs = []
    for seed in ("0", "1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-m", "flagbench", "size", "--format=json", str(obj), str(obj)],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]
    tied = [s["name"] for s in json.loads(outs[0])["sections"] if s["name"].startswith("sec_")]
    assert tied == sorted(names)


def one_line_error(result, *words):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for w in words:
        assert w in result.stderr, result.stderr


def quick(*args):
    """`flagbench size ARGS` called in this process (elf_util.run_verb), as a CompletedProcess:
    the many bad-input cases below need no interpreter each."""
    rc, out, err = run_verb(("size", *args))
    return subprocess.CompletedProcess(args, rc, out, err)


def test_bad_inputs(tmp_path):
    good = cc(tmp_path, "x86_64", "gcc", DATA / "kinds.c", tmp_path / "good.o")
    data = good.read_bytes()
    one_line_error(quick(tmp_path / "nope.o", good), "nope.o", "no such file")
    (tmp_path / "text.o").write_text("just text\n")
    one_line_error(quick(tmp_path / "text.o", good), "text.o", "not an ELF")
    (tmp_path / "empty.o").write_bytes(b"")
    one_line_error(quick(tmp_path / "empty.o", good), "empty.o", "empty")
    for cut in (20, 60, len(data) // 2, len(data) - 8):
        (tmp_path / "cut.o").write_bytes(data[:cut])
        one_line_error(quick("--format=bom", tmp_path / "cut.o", good), "cut.o", "truncated")
        one_line_error(quick(tmp_path / "cut.o", good), "cut.o", "truncated")
    bad = bytearray(data)
    bad[5] = 7                                            # EI_DATA
    (tmp_path / "corrupt.o").write_bytes(bad)
    one_line_error(quick(tmp_path / "corrupt.o", good), "corrupt.o", "corrupt")
    shoff = int.from_bytes(data[0x28:0x30], "little")
    bad = bytearray(data)
    bad[0x3A:0x3C] = (17).to_bytes(2, "little")           # e_shentsize
    (tmp_path / "corrupt2.o").write_bytes(bad)
    one_line_error(quick(tmp_path / "corrupt2.o", good), "corrupt2.o", "corrupt")
    bad = bytearray(data)
    bad[shoff + 64 * 1:shoff + 64 * 1 + 4] = b"\xff\xff\xff\x7f"   # a section name offset
    (tmp_path / "corrupt3.o").write_bytes(bad)
    for fmt in ("bom", "text"):
        r = quick(f"--format={fmt}", tmp_path / "corrupt3.o", good)
        one_line_error(r, "corrupt3.o")
    stripped = tmp_path / "stripped.o"
    subprocess.run(["strip", "-o", str(stripped), str(good)], check=True)
    one_line_error(quick(stripped, good), "stripped.o", "no symbol table")
    one_line_error(quick("--format=bom", good, stripped), "stripped.o", "no symbol table")
    empty = tmp_path / "empty.a"
    empty.write_bytes(b"!<arch>\n")
    one_line_error(quick(empty, good), "empty.a", "empty archive")
    thin = tmp_path / "thin.a"
    subprocess.run(["ar", "rcsT", str(thin), str(good)], check=True)
    one_line_error(quick(thin, good), "thin.a", "thin archive")
    one_line_error(quick("--match", "(", good, good), "--match")
    # Different architectures: allowed, with one warning line.
    arm = cc(tmp_path, "aarch64", "gcc", DATA / "kinds.c", tmp_path / "arm.o")
    r = quick("--format=bom", good, arm)
    assert r.returncode == 0
    assert r.stderr.count("\n") == 1 and "warning" in r.stderr and "aarch64" in r.stderr


def test_archive_member_parsing_edge_cases(tmp_path):
    good = cc(tmp_path, "x86_64", "gcc", DATA / "kinds.c", tmp_path / "k.o")
    arch = tmp_path / "odd.a"
    # A non-ELF member (skipped, like nm does) next to an ELF one; odd sizes need the pad byte.
    (tmp_path / "README").write_text("odd")
    subprocess.run(["ar", "rc", str(arch), str(tmp_path / "README"), str(good)], check=True)
    assert listed(arch) == nm_sized(good)
    raw = arch.read_bytes()
    (tmp_path / "badhdr.a").write_bytes(raw[:66] + b"xx" + raw[68:])
    one_line_error(quick(tmp_path / "badhdr.a", good), "badhdr.a", "corrupt archive")
    (tmp_path / "short.a").write_bytes(raw[: len(raw) - 100])
    one_line_error(quick(tmp_path / "short.a", good), "short.a", "truncated")


SKIP_RULES_C = r"""
int __mod_table_x = 1;                      /* skipped: generated module symbol */
int __addressable_y = 2;                    /* skipped */
const char vermagic[] = "6.1 SMP";          /* skipped: exact name */
int vermagic_not = 3;                       /* kept: only the exact name is skipped */
int colon_var __asm__("a:b") = 4;           /* skipped: ':' in the nm line (clang quotes it) */
int __se_sys_open_like(int a) { return a + 1; }   /* skipped */
int __mod_not_a_prefix_elsewhere_x = 5;     /* skipped (prefix) */
int dots1 __asm__("d.1.22") = 6;            /* every '.' + digits goes: d */
int dots2 __asm__("d..3") = 7;              /* '.' not before a digit stays: d. */
int dots3 __asm__("d.4x.") = 8;             /* dx. */
int dots4 __asm__("d.x.5.y") = 9;           /* d.x.y */
int dots5 __asm__("d.") = 10;               /* d. (summed with d..3) */
"""
STATICS_C = r"""
int keep_me(int x) { static int counter; return counter += x; }   /* gcc: counter.0 -> counter */
int keep_too(int x) { static int counter; return counter -= x; }  /* counter.1: summed with it */
#ifdef MORE
int keep_three(int x) { static int counter; return counter ^= x; }
#endif
"""


def _bom_pair_archives(tmp_path):
    objs = []
    (tmp_path / "skip.c").write_text(SKIP_RULES_C)
    (tmp_path / "statics.c").write_text(STATICS_C)
    for flags in (("-O1",), ("-O2", "-funroll-loops", "-DMORE")):
        tag = "x".join(f.strip("-") for f in flags)
        for src, compiler in ((DATA / "funcs.c", "gcc"), (DATA / "module.c", "gcc"),
                              (tmp_path / "statics.c", "gcc"), (tmp_path / "skip.c", "clang")):
            objs.append(cc(tmp_path, "x86_64", compiler, src, tmp_path / f"{src.stem}.{tag}.o", flags))
    old, new = tmp_path / "old.a", tmp_path / "new.a"     # skip.o only in OLD: its symbols go
    subprocess.run(["ar", "rcs", str(old), *map(str, objs[:4])], check=True)
    subprocess.run(["ar", "rcs", str(new), *map(str, objs[4:7])], check=True)
    return old, new


@pytest.mark.parametrize("mode", [None, "c", "d", "t"])
def test_bom_skip_rules_and_forked_reader_match_bloat_o_meter(tmp_path, mode):
    """Skip rules and .NUMBER sums as bloat-o-meter applies them, read in one process or with
    the old file in a forked child (what large inputs get)."""
    from flagbench.elf._symtab import Summary
    from flagbench.size import measure, pair
    from flagbench.size.rules import BOM_TABLES, bom_text
    from flagbench.size.symbols import read_side
    from flagbench.size.table import bom_table
    old, new = _bom_pair_archives(tmp_path)
    names = {n for n, _, _ in nm_sized(old)}
    assert {"vermagic", "__mod_table_x", "vermagic_not"} <= names
    assert "a:b" in subprocess.run(["nm", str(old)], capture_output=True, text=True).stdout
    assert any(re.fullmatch(r"counter\.\d+", n) for n in names)
    want = oracle(tmp_path, *([f"-{mode}"] if mode else []), old, new)
    if mode != "t":
        assert "vermagic_not" in want and "counter " in want
    assert "a:b" not in want and "__mod_" not in want and "vermagic " not in want
    assert size.bom(str(old), str(new), mode) == want
    top = size.bom(str(old), str(new), mode, top=2)
    assert top.count("\n") <= len(BOM_TABLES[mode]) * (3 + 2)
    tables = BOM_TABLES[mode]
    for parallel in (False, True):
        a, b = pair.both(read_side, *measure.open_pair(str(old), str(new)), tables, False, parallel=parallel)
        made = [bom_table(label, Summary.loads(o), Summary.loads(n))
                for (label, _), o, n in zip(tables, a["tables"], b["tables"])]
        assert "".join(bom_text(t) for t in made) == want
        assert "".join(bom_text(t, 2) for t in made) == top


def test_c_table_applies_the_rules_as_rules_bom_name_does(tmp_path):
    """The C summary (skip, rename, sum) against the Python statement of the same rules, on
    objects with skipped, dotted and colliding names; no bloat-o-meter needed."""
    from flagbench.elf._symtab import Summary
    from flagbench.size.rules import BOM_TABLES, bom_name
    from flagbench.size.symbols import read_side
    old, _ = _bom_pair_archives(tmp_path)
    want = collections.Counter()
    for name, letter, size in elf.sized_symbols(old):
        if letter in BOM_TABLES[None][0][1] and bom_name(name) is not None:
            want[bom_name(name)] += size
    assert {"d", "d.", "dx.", "d.x.y", "counter"} <= want.keys() and "vermagic" not in want
    names, sizes = Summary.loads(read_side(elf.open_input(str(old)), BOM_TABLES[None])["tables"][0]).result()[:2]
    assert len(names) == len(set(names)) and dict(zip(names, sizes)) == dict(want)


def test_full_member_reader_agrees_with_the_sized_one_and_nm(tmp_path):
    """Read member by member with every listed symbol (what the padding needs) or only the sized
    ones: the sized symbols are the same, and nm's."""
    from flagbench.elf import tables
    old, _ = _bom_pair_archives(tmp_path)
    whole = listed(old)
    full = collections.Counter()
    with elf.open_input(str(old)) as inp:
        for t in tables.read_members(inp, full=True):
            assert len(t.names) == len(t.letters) == len(t.sizes) == len(t.values) == len(t.sections) == len(t.gaps)
            full.update((n, c, s) for n, c, s in zip(t.names, t.letters, t.sizes) if s)
    assert full == whole
    assert ("a:b", "D", 4) in whole                       # nm_sized drops ':' lines, as bom does
    assert collections.Counter(e for e in whole.elements() if ":" not in e[0]) == nm_sized(old)


def test_forked_reader_reports_the_old_files_error(tmp_path):
    from flagbench.elf._symtab import Summary
    from flagbench.errors import UserError
    from flagbench.size import measure, pair
    from flagbench.size.symbols import read_side
    good = cc(tmp_path, "x86_64", "gcc", DATA / "kinds.c", tmp_path / "good.o")
    stripped = tmp_path / "stripped.o"
    subprocess.run(["strip", "-o", str(stripped), str(good)], check=True)
    tables = size.BOM_TABLES[None]
    with pytest.raises(UserError, match="stripped.o: no symbol table"):
        pair.both(read_side, *measure.open_pair(str(stripped), str(good)), tables, False, parallel=True)
    a, b = pair.both(read_side, *measure.open_pair(str(good), str(good)), tables, False, parallel=True)
    names, sizes = Summary.loads(a["tables"][0]).result()[:2]
    assert a == b and dict(zip(names, sizes))["get"] > 0


def test_names_are_escaped_for_markdown_csv_and_the_terminal(tmp_path):
    """A symbol may be named anything: the md row must not split or carry HTML, a CSV cell must
    not be a formula, the text table must not send control characters to the terminal."""
    src = tmp_path / "names.c"
    src.write_text('int pipe_var __asm__("a|b<script>") = 1;\nint tick __asm__("x`y") = 2;\n'
                   'int formula __asm__("=cmd()") = 3;\nint esc __asm__("e\\033[31m") = 4;\n')
    (tmp_path / "empty.c").write_text("int keep = 0;\n")
    a = cc(tmp_path, "x86_64", "clang", tmp_path / "empty.c", tmp_path / "a.o")
    b = cc(tmp_path, "x86_64", "clang", src, tmp_path / "b.o")   # gas needs clang's quoted names
    md = flagbench("--format=md", a, b).stdout
    rows = [line for line in md.splitlines() if line.startswith("| ") and "|" in line[2:]]
    assert "| `a\\|b<script>` |" in md                  # inside a code span HTML is text
    assert md.count("<script>") == 1
    for row in rows:   # every table row keeps its 4 cells: no unescaped pipe inside one
        assert len(re.split(r"(?<!\\)\|", row)) == 6, row
    assert "`` x`y ``" in md
    csv_rows = flagbench("--format=csv", a, b).stdout.splitlines()
    assert any(r.startswith("symbol,'=cmd()") for r in csv_rows)
    assert not any(r.startswith("symbol,=") for r in csv_rows)
    text = flagbench(a, b).stdout
    assert "\x1b" not in text and "e\\x1b[31m" in text


def test_symbols_bloat_o_meter_skips_are_counted_apart(tmp_path):
    """':' names are in no table (bloat-o-meter's rule) but their code is in the sized symbols:
    the text says how much of it bloat-o-meter leaves out."""
    (tmp_path / "a.c").write_text("int plain(int x) { return x + 1; }\n")
    (tmp_path / "b.c").write_text('int plain(int x) { return x + 1; }\n'
                                  'int odd(int x) __asm__("ns:odd");\nint odd(int x) { return x * 3 + 7; }\n')
    a = cc(tmp_path, "x86_64", "clang", tmp_path / "a.c", tmp_path / "a.o")
    b = cc(tmp_path, "x86_64", "clang", tmp_path / "b.c", tmp_path / "b.o")
    odd = next(s for n, t, s in collections.Counter(elf.sized_symbols(b)) if n == "ns:odd")
    j = json.loads(flagbench("--format=json", a, b).stdout)
    assert all(s["name"] != "ns:odd" for s in j["symbols"])
    assert j["in_skipped_symbols"]["delta"] == odd
    assert j["in_symbols"]["delta"] >= odd
    text = flagbench(a, b).stdout
    assert f"(of which {odd:+d} in symbols bloat-o-meter skips)" in text


def test_not_a_regular_file_is_refused_without_blocking(tmp_path):
    import os
    good = cc(tmp_path, "x86_64", "gcc", DATA / "kinds.c", tmp_path / "good.o")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for fmt in ("bom", "text"):
        r = subprocess.run([sys.executable, "-m", "flagbench", "size", f"--format={fmt}", str(fifo), str(good)],
                           capture_output=True, text=True, timeout=60)
        one_line_error(r, "fifo", "not a regular file")
    one_line_error(flagbench(good, "/dev/null"), "/dev/null", "not a regular file")


def test_a_damaged_file_with_a_bad_machine_field_is_one_line(tmp_path):
    """The machines differ (a warning when both files are good), but the file is damaged too:
    the error alone, not a warning and then the error."""
    good = cc(tmp_path, "x86_64", "gcc", DATA / "kinds.c", tmp_path / "good.o")
    data = bytearray(good.read_bytes())
    data[18:20] = (0x7777).to_bytes(2, "little")                 # e_machine
    shoff = int.from_bytes(data[0x28:0x30], "little")
    data[shoff + 64:shoff + 64 + 4] = b"\xff\xff\xff\x7f"       # a section name offset
    (tmp_path / "bad.o").write_bytes(bytes(data))
    for args in (("--format=bom", tmp_path / "bad.o", good), (tmp_path / "bad.o", good), (good, tmp_path / "bad.o")):
        one_line_error(quick(*args), "bad.o")
    asm = subprocess.run([sys.executable, "-m", "flagbench", "asm", str(tmp_path / "bad.o"), str(good)],
                         capture_output=True, text=True)
    one_line_error(asm, "bad.o")


def test_archive_members_that_outgrow_a_huge_page_layout_match_bloat_o_meter(tmp_path):
    """Two members of 8,200 symbols each: the first's table (over 512 KB of arrays) is laid out on
    huge pages (_summary.c map_arrays), the second's names outgrow all three arrays, which move to
    malloc (array_realloc), the slot table rehashed. Every row must still be bloat-o-meter's."""
    archives = []
    for side in ("old", "new"):
        members = []
        for m in ("a", "b"):
            src = tmp_path / f"{m}-{side}.c"
            src.write_text("".join(f"int {m}_{i}[{1 + i % 3 + (4 if side == 'new' and i % 10 == 0 else 0)}];\n"
                                   for i in range(8200)))
            members.append(str(cc(tmp_path, "x86_64", "gcc", src, tmp_path / f"{m}-{side}.o")))
        archive = tmp_path / f"{side}.a"
        subprocess.run(["ar", "rcs", str(archive), *members], check=True)
        archives.append(archive)
    got = flagbench("--format=bom", *archives)
    assert got.returncode == 0, got.stderr
    assert got.stdout == oracle(tmp_path, *archives, current=True)
    assert "add/remove: 0/0 grow/shrink: 1640/0 " in got.stdout   # every tenth of both members'


def test_names_in_another_order_added_and_removed_match_bloat_o_meter(tmp_path):
    """The C table pairs OLD's names with NEW's by position first (two builds of one tree list
    them in one order): here NEW lists them backwards, drops some, adds others and grows a few,
    so the position guess is wrong for most names and every row must still be bloat-o-meter's."""
    def source(names, grow=()):
        return "".join(f"int v_{n}[{4 + n % 5 + (9 if n in grow else 0)}];\n"
                       f"__attribute__((noinline)) int f_{n}(int a) {{ return a * {n} + v_{n}[a & 3]"
                       + "".join(f" + v_{n}[(a >> {k}) & 3]" for k in range(1, 2 + (n % 3) + (8 if n in grow else 0)))
                       + "; }\n" for n in names)
    (tmp_path / "a.c").write_text(source(range(40)))
    (tmp_path / "b.c").write_text(source([n for n in reversed(range(46)) if n % 7 != 3], grow=(5, 11, 30)))
    a = cc(tmp_path, "x86_64", "gcc", tmp_path / "a.c", tmp_path / "a.o")
    b = cc(tmp_path, "x86_64", "gcc", tmp_path / "b.c", tmp_path / "b.o")
    got = flagbench("--format=bom", a, b)
    assert got.returncode == 0, got.stderr
    assert got.stdout == oracle(tmp_path, a, b, current=True)
    added = [n for n in range(40, 46) if n % 7 != 3]
    removed = [n for n in range(40) if n % 7 == 3]
    assert f"add/remove: {2 * len(added)}/{2 * len(removed)} " in got.stdout   # a v_ and an f_ each
    rows = [r.split() for r in got.stdout.splitlines()[2:-1]]
    text = flagbench(a, b).stdout.splitlines()       # the text format's table: the same rows
    assert [r.split()[:4] for r in text[2:2 + len(rows)]] == rows and text[2 + len(rows)].startswith("Total:")
