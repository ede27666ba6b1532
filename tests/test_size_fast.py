"""The fast paths of `flagbench size` against the ones they replace, on real files built here.

The C reader (`_symtab.scan_pair`: both files on two threads) against the Python reader it
falls back to (`symbols.read_side`), the C blocks (`Summary.bom_text`, `text_block`) against
size.rules / size.render's Python tables, and `flagbench size OLD NEW` without argparse against
the parser's path: every format, byte for byte. Inputs: objects and archives of several
targets (GNU and BSD archives, extended section indices are in test_elf_reader), a static
executable (linked: its code outside symbols goes through asm.unsized), a shared library, and
names bloat-o-meter's rules skip or rename and names that are not ASCII.
"""
import re
import subprocess

import pytest

from elf_util import run_verb
from flagbench import size
from flagbench.size import measure, symbols
from flagbench.size.render import render
from flagbench.size.rules import CODE_LETTERS
from flagbench.toolchains import TARGETS

FORMATS = ("text", "md", "json", "csv")
TARGETS_HERE = [("x86_64", "gcc"), ("aarch64", "gcc"), ("arm", "gcc"), ("riscv64", "gcc"), ("hppa", "gcc")]
SOURCE = r"""
int counter_a = 1, table_b[40];
static int helper(int x) { static int counter; counter += x; return counter * 3; }
int plain(int x) { return helper(x) + 7; }
const char vermagic[] = "v";
int __mod_table_x[4];
__attribute__((weak)) int weak_fn(int y) { return y * %(k)d; }
int get(int i) { return table_b[i %% 40] + plain(i) + weak_fn(i); }
%(extra)s
"""


def _compile(tmp, target, compiler, name, k, extra=""):
    src = tmp / f"{name}.c"
    src.write_text(SOURCE % {"k": k, "extra": extra})
    t = TARGETS[target]
    out = tmp / f"{name}.o"
    subprocess.run(t.compiler_argv(compiler) + list(t.base_cflags) + ["-O2", "-c", str(src), "-o", str(out)],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(label, old, new) pairs: objects per target, GNU and BSD archives, static executables, shared libraries."""
    tmp = tmp_path_factory.mktemp("fast")
    out = []
    for target, compiler in TARGETS_HERE:
        extra = "int more(int z) { return z * z + get(z); }" + ("\nint café(int x) { return x + 1; }"
                                                                  if target == "x86_64" else "")
        try:
            a = _compile(tmp, target, compiler, f"old-{target}", 3)
            b = _compile(tmp, target, compiler, f"new-{target}", 5, extra)
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
        out.append((target, a, b))
    assert out and out[0][0] == "x86_64"
    x_old, x_new = out[0][1], out[0][2]
    for fmt in ("gnu", "bsd"):
        archives = []
        for side, obj in (("old", x_old), ("new", x_new)):
            arch = tmp / f"{side}-{fmt}.a"
            subprocess.run(["llvm-ar-19", "rcs", f"--format={fmt}", str(arch), str(obj),
                            *(str(o) for _, o, _ in out[1:2])], check=True)
            archives.append(arch)
        out.append((f"archive-{fmt}", *archives))
    # A large member, then a small one: the C reader's arrays for the second lie where the first's
    # were (its scratch rewinds between members), and its footprints must not carry the first's gaps.
    big = tmp / "big.c"
    big.write_text("".join(f"int big_{i}(int x) {{ return x * {i} + {i % 7}; }}\n" for i in range(60)))
    big_o = tmp / "big.o"
    subprocess.run(["gcc", "-O2", "-falign-functions=64", "-c", str(big), "-o", str(big_o)], check=True)
    archives = []
    for side, k in (("old", 1), ("new", 1000)):
        small = tmp / f"small-{side}.c"
        small.write_text(f"int g1(int x) {{ return x * 3 + {k}; }}\nint g2(int y) {{ return y * {k} - 2; }}\n")
        small_o = tmp / f"small-{side}.o"
        subprocess.run(["gcc", "-O2", "-c", str(small), "-o", str(small_o)], check=True)
        arch = tmp / f"members-{side}.a"
        subprocess.run(["ar", "rcs", str(arch), str(big_o), str(small_o)], check=True)
        archives.append(arch)
    out.append(("archive-members", *archives))
    for kind, flags in (("static", ["-static"]), ("shared", ["-shared", "-fPIC"])):
        made = []
        for side, k in (("old", 3), ("new", 9)):
            src = tmp / f"{kind}-{side}.c"
            src.write_text(SOURCE % {"k": k, "extra": "int main(void) { return get(2); }" if kind == "static" else ""})
            exe = tmp / f"{kind}-{side}"
            subprocess.run(["gcc", "-O2", *flags, str(src), "-o", str(exe)], check=True, capture_output=True)
            made.append(exe)
        out.append((kind, *made))
    return out


def _python_reader(monkeypatch):
    monkeypatch.setattr(measure, "read_pair", lambda *a, **k: None)


def test_c_reader_reads_what_the_python_reader_reads(pairs, monkeypatch):
    """Every format and bom mode, through the C reader and through the Python one: the same bytes."""
    fast = {}
    for label, old, new in pairs:
        assert symbols.read_pair(str(old), str(new), size.BOM_TABLES[None]) is not None, label
        for mode in (None, "c", "d", "t"):
            fast[label, "bom", mode] = size.bom(str(old), str(new), mode)
        comparison = size.compare(str(old), str(new))
        for fmt in FORMATS:
            fast[label, fmt, None] = render(comparison, fmt)
    _python_reader(monkeypatch)
    for (label, fmt, mode), text in fast.items():
        old, new = next((o, n) for lab, o, n in pairs if lab == label)
        slow = size.bom(str(old), str(new), mode) if fmt == "bom" else render(size.compare(str(old), str(new)), fmt)
        assert text == slow, (label, fmt, mode)
    assert "café" in fast["x86_64", "text", None] and "more" in fast["x86_64", "bom", None]


def test_a_large_linked_x86_file_reads_its_tables_from_the_mapping(tmp_path, monkeypatch):
    """A linked x86-64 file whose symbol and string tables are over 64 KB (a vmlinux's are a
    megabyte): the C reader takes them from the file's mapping, not a copy; every format and
    bom mode prints what the Python reader prints."""
    exes = []
    for side, grow in (("old", 0), ("new", 3)):
        src = tmp_path / f"{side}.s"
        src.write_text("".join(f".text\n.globl function_with_a_long_name_{i}\n.type function_with_a_long_name_{i},@function\n"
                               f".p2align 4\nfunction_with_a_long_name_{i}:\n.skip {1 + i % 7 + (grow if i % 500 == 0 else 0)}, 0x90\n"
                               f".size function_with_a_long_name_{i}, .-function_with_a_long_name_{i}\n"
                               for i in range(4000)) + ".globl _start\n_start:\nret\n")
        exe = tmp_path / side
        subprocess.run(["gcc", "-nostdlib", "-static", str(src), "-o", str(exe)], check=True, capture_output=True)
        exes.append(str(exe))
    from flagbench.elf import open_input
    from flagbench.elf.sections import SIZE, TYPE, headers
    with open_input(exes[0]) as inp:
        assert max(h[SIZE] for h in headers(inp, inp.members[0]) if h[TYPE] == 2) >= 64 << 10
    def every_output():
        return {**{fmt: render(size.compare(*exes), fmt) for fmt in FORMATS},
                **{f"bom-{mode}": size.bom(*exes, mode) for mode in (None, "c", "t")}}
    fast = every_output()
    assert "function_with_a_long_name_500" in fast["text"] and "function_with_a_long_name_500" in fast["bom-None"]
    _python_reader(monkeypatch)
    assert fast == every_output()


def test_c_blocks_print_what_the_python_tables_print(pairs):
    """bom_text and text_block (no filter, no --top) against the Python tables they stand in for,
    which a match-everything filter makes: the same bytes; a non-ASCII name leaves it to Python."""
    from flagbench.elf._symtab import Summary
    everything = re.compile("")
    for label, old, new in pairs:
        for mode in (None, "c"):
            assert size.bom(str(old), str(new), mode) == size.bom(str(old), str(new), mode, match=everything), label
        c, filtered = size.compare(str(old), str(new)), size.compare(str(old), str(new), match=everything)
        assert render(c, "text") == render(filtered, "text"), label
        a, b = c.summaries
        assert isinstance(a, Summary)
        if label == "x86_64":   # café: Python sorts and pads by code points
            assert a.bom_text(b, "Function") is None and a.text_block(b, CODE_LETTERS) is None
        elif label == "static":
            assert a.bom_text(b, "Function") is not None and a.text_block(b, CODE_LETTERS)[1:] == (c.table.total_old,
                                                                                   c.table.total_new)


def test_command_without_the_parser_prints_what_the_parser_path_prints(pairs):
    """`size [--format F] OLD NEW` skips argparse; --top larger than the table takes the parser's
    path (and the Python tables) and must print the same."""
    for label, old, new in pairs[:2] + pairs[-2:]:
        for fmt_args in ([], ["--format=bom"], ["--format", "json"], ["--format=md"]):
            quick = run_verb(["size", *fmt_args, str(old), str(new)])
            parsed = run_verb(["size", *fmt_args, "--top", "100000", str(old), str(new)])
            assert quick[0] == parsed[0] == 0 and quick == parsed, (label, fmt_args)


def test_one_allowed_cpu_or_many_the_pair_reads_alike(pairs):
    """The second side's thread starts off the CPU the first runs on (`_scan.c` start_elsewhere)
    when the process may use another: with one CPU allowed (taskset) there is none to give it,
    and both runs print what the in-process run prints."""
    import os
    import sys
    label, old, new = pairs[0]
    want = run_verb(["size", str(old), str(new)])
    assert want[0] == 0, want
    cpus = sorted(os.sched_getaffinity(0))
    for allowed in ({cpus[0]}, set(cpus)):
        got = subprocess.run(["taskset", "-c", ",".join(map(str, sorted(allowed))), sys.executable, "-m",
                              "flagbench", "size", str(old), str(new)], capture_output=True, text=True)
        assert (got.returncode, got.stdout, got.stderr) == want, (label, allowed)


# What `flagbench size OLD NEW` has no need of on its quick path (C reader, C tables): each of these
# was once imported there, and Python's start-up with the imports is most of the command's time.
NOT_IMPORTED = ("argparse", "re", "dataclasses", "enum", "typing", "collections", "__future__", "importlib.util",
                "flagbench.errors",
                "flagbench.textsafe", "flagbench.targets", "flagbench.elf.files", "flagbench.elf.tables",
                "flagbench.elf.symbols", "flagbench.size.pair", "flagbench.size.table", "flagbench.forked")


def test_the_quick_path_imports_only_what_it_needs(pairs):
    """The command as users run it (bin/flagbench, a fresh interpreter), in both quick formats:
    `-X importtime` names every module imported after start-up."""
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parent.parent / "bin" / "flagbench"
    _, old, new = pairs[-2]     # a static executable: its code outside symbols is classified too
    for fmt_args in ([], ["--format=bom"]):
        done = subprocess.run([sys.executable, "-X", "importtime", str(script), "size", *fmt_args, str(old), str(new)],
                              capture_output=True, text=True, check=True)
        imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert "flagbench.elf._symtab" in imported and "flagbench.size.measure" in imported
        assert not imported & set(NOT_IMPORTED), (fmt_args, sorted(imported & set(NOT_IMPORTED)))


def _symbol_letters(letters) -> bytes:
    """nm's letter (0: not listed) by st_info << 4 | section code, from symbols.symbol_letter itself:
    asked once per st_info with a probe section letter and once for common (the section's own
    letter only passes through it, upper-cased for a global). What _KINDS must give."""
    from flagbench.elf.symbols import symbol_letter
    LETTER_CODES, NO_SECTION, COMMON = letters.LETTER_CODES, letters.NO_SECTION, letters.COMMON
    table = []
    for info in range(256):
        probe, common = (symbol_letter("x", info >> 4, info & 0xF), symbol_letter(COMMON, info >> 4, info & 0xF))
        row = bytearray(16)
        for code, section in enumerate(LETTER_CODES):
            letter = (None if section == NO_SECTION else common if section == COMMON else
                      {"x": section, "X": section.upper()}.get(probe, probe))
            row[code] = ord(letter) if letter else 0
        table.append(bytes(row))
    return b"".join(table)


def test_the_written_out_letter_table_is_what_symbol_letter_gives():
    """`letters._SYMBOL_LETTERS` (written out: deriving it cost every start) against its derivation
    from `symbols.symbol_letter`, and the codes `symbols` re-exports."""
    from flagbench.elf import letters
    from flagbench.elf import symbols as elf_symbols
    assert letters._SYMBOL_LETTERS == _symbol_letters(letters) and len(letters._SYMBOL_LETTERS) == 4096
    assert letters.LETTER_CODES == elf_symbols.NO_SECTION + elf_symbols.SECTION_LETTERS + elf_symbols.COMMON
    # st_info 0x12 (STB_GLOBAL, STT_FUNC) in .text (code 1) is T; 0x03 (a section symbol) is not listed
    assert letters._SYMBOL_LETTERS[0x12 * 16 + 1] == ord("T") and not any(letters._SYMBOL_LETTERS[0x03 * 16:0x04 * 16])


def test_damaged_or_missing_input_is_the_python_readers_error(tmp_path, pairs):
    """What the C reader does not read (here a truncated file, a missing one, a stripped one) is
    read by the Python reader, whose one-line errors stand."""
    label, old, new = pairs[0]
    cut = tmp_path / "cut.o"
    cut.write_bytes(old.read_bytes()[:200])
    stripped = tmp_path / "stripped.o"
    subprocess.run(["strip", "-o", str(stripped), str(old)], check=True)
    for bad, message in ((cut, "truncated ELF file"), (tmp_path / "none.o", "no such file"),
                         (stripped, "no symbol table")):
        assert symbols.read_pair(str(bad), str(new), size.BOM_TABLES[None]) is None
        for fmt in ("bom", "text"):
            status, out, err = run_verb(["size", f"--format={fmt}", str(bad), str(new)])
            assert status == 2 and out == "" and message in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_extended_section_indices_read_alike(tmp_path, monkeypatch):
    """Over 0xff00 sections (symbols with SHN_XINDEX, their sections in SHT_SYMTAB_SHNDX): the C
    reader resolves them as the Python one does."""
    many = 0xFF00 + 300
    paths = []
    for side, grow in (("old", 0), ("new", 5)):
        src = tmp_path / f"{side}.s"
        with open(src, "w") as f:
            for i in range(many):
                n = 1 + i % 3 + (grow if i == many - 1 else 0)
                f.write(f'.section .text.f{i},"ax",@progbits\n.globl f{i}\n.type f{i},@function\n'
                        f"f{i}:\n.skip {n}, 0x90\n.size f{i}, {n}\n")
        out = tmp_path / f"{side}.o"
        subprocess.run(["as", "-o", str(out), str(src)], check=True)
        paths.append(str(out))
    assert symbols.read_pair(*paths, size.BOM_TABLES[None]) is not None
    fast = size.bom(*paths), render(size.compare(*paths), "text")
    assert f"f{many - 1}" in fast[0] and "+5" in fast[0]
    _python_reader(monkeypatch)
    assert fast == (size.bom(*paths), render(size.compare(*paths), "text"))


def test_sections_whose_name_decides_are_asked_of_python_from_the_reading_threads(tmp_path, monkeypatch):
    """A symbol in an unallocated section with contents takes its letter from the section's name
    (`letters.letter`, a Python callback the C reader calls from its threads, taking the GIL)."""
    paths = []
    for side in ("old", "new"):
        src = tmp_path / f"{side}.s"
        src.write_text(f'.section .note_x,"",@progbits\n.globl kept_{side}\n.type kept_{side},@object\n'
                       f"kept_{side}: .long 1\n.size kept_{side},4\n"
                       '.section .debug_y,"",@progbits\n.globl dbg\ndbg: .long 2\n.size dbg,4\n'
                       ".text\n.globl f\n.type f,@function\nf: ret\n.size f,1\n")
        subprocess.run(["as", "-o", str(tmp_path / f"{side}.o"), str(src)], check=True)
        paths.append(str(tmp_path / f"{side}.o"))
    nm = subprocess.run(["nm", paths[0]], capture_output=True, text=True, check=True).stdout
    assert "N dbg" in nm and "N kept_old" in nm
    assert symbols.read_pair(*paths, size.BOM_TABLES[None]) is not None
    fast = size.bom(*paths, types="nN"), render(size.compare(*paths, types="tTnN"), "text")
    assert "kept_new" in fast[0] and "kept_old" in fast[0] and "dbg" not in fast[0]
    _python_reader(monkeypatch)
    assert fast == (size.bom(*paths, types="nN"), render(size.compare(*paths, types="tTnN"), "text"))


def test_both_linked_sides_run_and_the_old_files_error_comes_first():
    """read_pair classifies the two linked files' code on two threads (`code_holes` lets go of
    the GIL): both jobs run, and when both fail the old file's error is the one raised, as when
    they ran one after the other."""
    from flagbench.errors import UserError
    from flagbench.size.pair import both_threaded
    ran = []

    def job(name, fail):
        ran.append(name)
        if fail:
            raise UserError(f"{name}: corrupt ELF")
    both_threaded(job, ("old", False), ("new", False))
    assert sorted(ran) == ["new", "old"]
    for fails, said in (((True, True), "old"), ((False, True), "new"), ((True, False), "old")):
        with pytest.raises(UserError, match=f"^{said}: corrupt ELF$"):
            both_threaded(job, ("old", fails[0]), ("new", fails[1]))
