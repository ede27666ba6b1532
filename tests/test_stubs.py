"""Code no symbol covers: linker stubs the real linkers insert (hppa long-branch stubs, aarch64
veneers), counted against the linker's own map file and kept out of functions and padding."""
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import flagbench
from elf_util import code_maps

from flagbench.profile import STUBS, SymbolMap

CALLERS = r"""
int far1(int), far2(int), far3(int);
int first(int x) { return x + 1; }
int caller(int x) { return far1(x) + far2(x + 1) + far3(x + 2); }
int caller2(int x) { return far1(x * 3) + 1; }
int caller3(int x) { return far2(x) - far3(x); }
"""
CALLEES = r"""
int far1(int x) { return x * 7; }
int far2(int x) { return x - 3; }
int far3(int x) { return x ^ 5; }
"""
# 384 KB of NOPs between callers and callees: past the 256 KB reach of hppa's b,l.
FILLER = """\t.text
\t.globl filler
\t.type filler,@function
filler:
\t.fill 98304,4,0x08000240
\t.size filler, .-filler
"""


def _run(argv, **kw):
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True, **kw)


def hppa_link(tmp_path: Path, name: str, ld_flags=()) -> tuple[Path, str]:
    """caller objects, the filler, callees: linked by hppa-linux-gnu-ld with a map file."""
    d = tmp_path / name
    d.mkdir()
    (d / "callers.c").write_text(CALLERS)
    (d / "callees.c").write_text(CALLEES)
    (d / "filler.s").write_text(FILLER)
    for c in ("callers", "callees"):
        _run(["hppa-linux-gnu-gcc", "-O2", "-fno-inline", "-c", d / f"{c}.c", "-o", d / f"{c}.o"])
    _run(["hppa-linux-gnu-as", d / "filler.s", "-o", d / "filler.o"])
    prog = d / "prog"
    _run(["hppa-linux-gnu-ld", "-e", "first", "-Map", d / "prog.map", *ld_flags,
          d / "callers.o", d / "filler.o", d / "callees.o", "-o", prog])
    return prog, (d / "prog.map").read_text()


def map_stubs(map_text: str) -> list[tuple[int, int]]:
    """(address, size) of every stub section the linker's map lists ("linker stubs")."""
    found = re.findall(r"^ \S*\.stub\s+0x([0-9a-f]+)\s+0x([0-9a-f]+) linker stubs$", map_text, re.M)
    return [(int(a, 16), int(s, 16)) for a, s in found if int(s, 16)]


def nm_sizes(prog: Path, nm: str) -> dict[str, tuple[int, int]]:
    out = _run([nm, "-S", prog]).stdout
    return {p[3]: (int(p[0], 16), int(p[1], 16)) for p in (line.split() for line in out.splitlines()) if len(p) == 4}


def calls_into(prog: Path, objdump: str, ranges, call: str) -> int:
    """Call instructions objdump shows whose target address lies in one of RANGES."""
    n = 0
    for line in _run([objdump, "-d", "-w", "--no-show-raw-insn", prog]).stdout.splitlines():
        m = re.search(r"\t" + re.escape(call) + r"\s+([0-9a-f]+) <", line)
        if m and any(a <= int(m.group(1), 16) < a + s for a, s in ranges):
            n += 1
    return n


@pytest.mark.parametrize("placement", ["section start", "after a function"])
def test_hppa_long_branch_stubs_counted_like_the_linker(tmp_path, placement):
    # A stub group size smaller than one section puts each group's stubs right before it, that
    # is after the function before it (as in vmlinux); the default puts them at .text's start.
    flags = ["--stub-group-size=64"] if placement == "after a function" else []
    prog, map_text = hppa_link(tmp_path, "p", flags)
    stubs = map_stubs(map_text)
    stub_bytes = sum(s for _, s in stubs)
    assert stub_bytes, map_text
    # a 32-bit long-branch stub is `ldil L%f,r1; be,n R%f(sr4,r1)`: 8 bytes (bfd/elf32-hppa.c)
    n_stubs = stub_bytes // 8
    via = calls_into(prog, "hppa-linux-gnu-objdump", stubs, "b,l")
    assert via >= n_stubs

    r = flagbench("asm", prog, prog, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["unsized"]["old"]["stubs"] == n_stubs
    assert out["unsized"]["old"]["stub"] == stub_bytes
    assert out["total"]["old"]["calls"]["through_stubs"] == via
    # every function is its symbol: no more instructions than its size holds
    sizes = nm_sizes(prog, "hppa-linux-gnu-nm")
    for f in out["functions"]:
        assert f["mix"]["old"]["insns"] + f["mix"]["old"]["padding"] <= sizes[f["name"]][1] // 4, f
    assert _overruns(prog, "hppa-linux-gnu-objdump") == []   # as bench/kernel_long_calls.py on the kernel pair
    names = {f["name"] for f in out["functions"]}
    assert names == {"first", "caller", "caller2", "caller3", "filler", "far1", "far2", "far3"}
    # a call through a stub names the stub's target, decoded from its ldil/be,n pair
    r = flagbench("asm", prog, prog, "caller")
    assert [line.split()[1] for line in r.stdout.splitlines() if line.startswith("b,l <stub:")] == \
        ["<stub:far1>,rp", "<stub:far2>,rp", "<stub:far3>,rp"], r.stdout

    r = flagbench("size", prog, prog, "--format", "json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["stubs"]["old"] == n_stubs and s["stub_bytes"]["old"] == stub_bytes
    text = next(sec for sec in s["sections"] if sec["name"] == ".text")["old"]
    in_symbols = sum(size for _, size in sizes.values())
    assert s["padding"]["old"] + s["fill"]["old"] == text - in_symbols - stub_bytes   # 0: no function has padding
    assert s["other_unsized"]["old"] == 0
    for c, model in code_maps(prog):   # size's holes found in C, as the Python walk finds them
        assert c == model

    # executed instructions at a stub are the stubs', not the function's before them
    symbols = SymbolMap.of_elf(prog)
    for address, size in stubs:
        assert {symbols.name(a) for a in range(address, address + size, 4)} == {STUBS}


def test_hppa_default_vs_long_calls_in_asm_and_size(tmp_path):
    """-mlong-calls needs no stubs: asm and size say stubs N -> 0 and calls through them go."""
    prog, map_text = hppa_link(tmp_path, "default", ["--stub-group-size=64"])
    d = tmp_path / "long"
    d.mkdir()
    for c, text in (("callers", CALLERS), ("callees", CALLEES)):
        (d / f"{c}.c").write_text(text)
        _run(["hppa-linux-gnu-gcc", "-O2", "-fno-inline", "-mlong-calls", "-c", d / f"{c}.c", "-o", d / f"{c}.o"])
    (d / "filler.s").write_text(FILLER)
    _run(["hppa-linux-gnu-as", d / "filler.s", "-o", d / "filler.o"])
    libgcc = _run(["hppa-linux-gnu-gcc", "-print-libgcc-file-name"]).stdout.strip()   # $$dyncall
    _run(["hppa-linux-gnu-ld", "-e", "first", "-Map", d / "prog.map", d / "callers.o", d / "filler.o",
          d / "callees.o", libgcc, "-o", d / "prog"])
    assert not map_stubs((d / "prog.map").read_text())
    n_stubs = sum(s for _, s in map_stubs(map_text)) // 8
    r = flagbench("asm", prog, d / "prog")
    assert r.returncode == 0, r.stderr
    assert f"stubs: {n_stubs} -> 0 ({8 * n_stubs} -> 0 bytes)" in r.stdout
    assert re.search(r"^calls through stubs +[1-9]\d* +0 ", r.stdout, re.M), r.stdout
    r = flagbench("size", prog, d / "prog")
    assert f"linker stubs {-8 * n_stubs:+d} ({n_stubs} -> 0 stubs)" in r.stdout


def test_aarch64_veneers_are_stubs_not_functions(tmp_path):
    """aarch64 ld names its veneers (`__far1_veneer`): stubs, calls through them counted."""
    (tmp_path / "a.c").write_text(CALLERS)
    (tmp_path / "b.c").write_text("\n".join(f'__attribute__((section(".far"))) {line}'
                                            for line in CALLEES.strip().splitlines()))
    for c in ("a", "b"):
        _run(["aarch64-linux-gnu-gcc", "-O2", "-fno-inline", "-c", tmp_path / f"{c}.c", "-o", tmp_path / f"{c}.o"])
    prog = tmp_path / "prog"
    _run(["aarch64-linux-gnu-ld", "-e", "first", "--section-start=.far=0x20000000", "-Map", tmp_path / "map",
          tmp_path / "a.o", tmp_path / "b.o", "-o", prog])
    sizes = nm_sizes(prog, "aarch64-linux-gnu-nm")
    veneers = {n: v for n, v in sizes.items() if n.endswith("_veneer")}
    assert veneers
    via = calls_into(prog, "aarch64-linux-gnu-objdump", list(veneers.values()), "bl")
    r = flagbench("asm", prog, prog, "--format", "json")
    out = json.loads(r.stdout)
    assert out["unsized"]["old"]["stubs"] == len(veneers)
    assert out["total"]["old"]["calls"]["through_stubs"] == via > 0
    assert not any(f["name"].endswith("_veneer") for f in out["functions"])
    for c, model in code_maps(prog):
        assert c == model


def _overruns(path: Path, objdump: str) -> list[str]:
    """Functions flagbench gives more instruction lines than objdump (with addresses, a pass of
    its own) shows inside the function's symbol [value, value + size)."""
    import bisect
    from flagbench.asm.disasm import disassemble
    from flagbench.asm.padding import symbol_spans
    from flagbench.elf import Image
    d = disassemble(path)
    with Image(str(path)) as image:
        spans = symbol_spans(image, False, list(d.functions.values()))
    addrs = sorted(int(m.group(1), 16) for m in re.finditer(r"^ *([0-9a-f]+):\t",
                                                            _run([objdump, "-d", "--no-show-raw-insn", path]).stdout, re.M))
    return [name for name, (_, start, _, size) in spans.items()
            if size and sum(line != "..." for line in d.functions[name].lines)
            > bisect.bisect_left(addrs, start + size) - bisect.bisect_left(addrs, start)]


# The bundled hppa kernel pair (cases/kernel-long-calls) under the same checks: bench/kernel_long_calls.py
# (two cold hppa kernels: over `make test`'s budget on a fresh machine).


def test_x86_plt_entries_are_stubs(tmp_path):
    """A dynamically linked program's PLT: one stub per .rela.plt entry, calls to f@plt go through one."""
    (tmp_path / "p.c").write_text('int puts(const char *); int putchar(int);\n'
                                  'int main(void) { puts("x"); putchar(10); return puts("y"); }\n')
    prog = tmp_path / "p"
    _run(["gcc", "-O2", "-fno-builtin", tmp_path / "p.c", "-o", prog])
    relocs = _run(["readelf", "-rW", prog]).stdout
    plt_section = relocs.split("'.rela.plt'")[1].split("Relocation section")[0]
    entries = len(re.findall(r"^[0-9a-f]{8,}\s", plt_section, re.M))
    calls = len(re.findall(r"\tcall\s+[0-9a-f]+ <\w+@plt>", _run(["objdump", "-d", "-w", prog]).stdout))
    out = json.loads(flagbench("asm", prog, prog, "--format", "json").stdout)
    assert out["unsized"]["old"]["stubs"] == entries >= 2
    assert out["total"]["old"]["calls"]["through_stubs"] == calls >= 3
    assert not any("@plt" in f["name"] for f in out["functions"])
    for c, model in code_maps(prog):
        assert c == model
