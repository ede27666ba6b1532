"""Fuzzing the ELF reader through `flagbench size` (every format) and `flagbench asm`: real
objects of several targets, damaged in their headers, section tables, symbol tables, string
tables and archive headers, a fixed seed and a bounded number of cases. Every case must end
with exit 0, or exit 2 and one line on stderr: never a traceback, never a hang.

The verbs are called in this process (`elf_util.run_verb`), so a case costs milliseconds for
`size`; `asm` runs objdump twice per case, so it gets every eighth case.
"""
from __future__ import annotations

import random
import struct
import subprocess

import pytest

from elf_util import Hang, Layout, objects, run_verb
from flagbench.elf.constants import SHT_STRTAB, SHT_SYMTAB

pytestmark = pytest.mark.slow   # 2,000 damaged files through the CLI

SEED = 20261123
CASES_PER_TARGET = 250        # x 7 targets + the archive: 2,000 cases
ASM_EVERY = 8
SIZE_FORMATS = ("bom", "text", "md", "json", "csv")
SPECIAL = (0, 1, 2, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, (1 << 63) - 1, (1 << 64) - 1)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-seeds")
    objs = objects(d)
    assert "x86_64" in objs
    arch = d / "two.a"
    subprocess.run(["ar", "rcs", str(arch), str(objs["x86_64"]), str(objs.get("aarch64", objs["x86_64"]))],
                   check=True)
    return {**objs, "archive": arch}


def _put(out: bytearray, at: int, fmt: str, value: int) -> None:
    size = struct.calcsize(fmt)
    if 0 <= at and at + size <= len(out):
        struct.pack_into(fmt, out, at, value & ((1 << (8 * size)) - 1))


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One damage: (what, the damaged bytes)."""
    out = bytearray(data)
    if data[:8] == b"!<arch>\n":
        kind = rng.choice(("ar-header", "ar-size", "ar-name", "member", "truncate"))
        heads = [i for i in range(8, len(data) - 60) if data[i + 58:i + 60] == b"`\n"]
        at = rng.choice(heads)
        if kind == "ar-header":
            out[at + rng.randrange(60)] = rng.randrange(256)
        elif kind == "ar-size":
            out[at + 48:at + 58] = str(rng.choice((0, 1, 59, 10**9, rng.randrange(10**4)))).encode().ljust(10)
        elif kind == "ar-name":
            out[at:at + 16] = rng.choice((b"/99999", b"#1/9999", b"//", b"/", b"#1/x")).ljust(16)
        elif kind == "member":   # an ELF header byte of a member
            out[at + 60 + rng.randrange(64)] = rng.randrange(256)
        else:
            del out[rng.randrange(8, len(out)):]
        return kind, bytes(out)
    lay = Layout(data)
    kind = rng.choice(("header", "shdr-byte", "shdr-field", "symtab", "strtab", "shstrtab", "truncate",
                       "shstrndx"))
    if kind == "header":
        out[rng.randrange(64 if lay.is64 else 52)] = rng.randrange(256)
    elif kind == "shdr-byte":
        out[lay.shoff + rng.randrange(lay.shnum * lay.shentsize)] = rng.randrange(256)
    elif kind == "shdr-field":
        field = rng.choice(sorted(lay.fields))
        index = rng.randrange(lay.shnum)
        at, fmt = lay.field_at(index, field)
        value = rng.choice(SPECIAL + (lay.shnum, lay.shnum + 1, index, rng.randrange(len(data) * 2)))
        _put(out, at, fmt, value)
        kind = f"section {index} {field}={value:#x}"
    elif kind in ("symtab", "strtab", "shstrtab"):
        index = {"symtab": lambda: lay.section(SHT_SYMTAB),
                 "strtab": lambda: lay.get(data, lay.section(SHT_SYMTAB), "link"),
                 "shstrtab": lambda: lay.shstrndx}[kind]()
        start, size = lay.get(data, index, "offset"), lay.get(data, index, "size")
        for _ in range(rng.randint(1, 8)):
            if size and lay.types[index] in (SHT_SYMTAB, SHT_STRTAB):
                out[start + rng.randrange(size)] = rng.choice((0, 0xFF, ord(":"), ord("|"), rng.randrange(256)))
    elif kind == "shstrndx":
        _put(out, lay.shstrndx_at, lay.e + "H", rng.choice((0, 1, lay.shnum - 1, lay.shnum, 0xFFFF, 0xFF00)))
    else:
        del out[rng.randrange(len(out)):]
    return kind, bytes(out)


@pytest.mark.parametrize("name", ["x86_64", "aarch64", "arm", "riscv64", "loongarch64", "hppa", "hppa64",
                                  "archive"])
def test_fuzzed_inputs_exit_0_or_one_line_exit_2(tmp_path, seeds, name):
    if name not in seeds:
        pytest.skip(f"no compiler for {name} here")
    seed = seeds[name]
    data = seed.read_bytes()
    rng = random.Random(f"{SEED}-{name}")
    bad = tmp_path / f"fuzz-{name}.o"
    failures = []
    for case in range(CASES_PER_TARGET):
        what, mutated = mutate(data, rng)
        bad.write_bytes(mutated)
        runs = [("size", f"--format={SIZE_FORMATS[case % len(SIZE_FORMATS)]}", bad, seed)]
        if case % ASM_EVERY == 0 and name != "archive":
            runs.append(("asm", seed, bad) if case % 2 else ("asm", bad, seed))
        for argv in runs:
            try:
                rc, _, err = run_verb(argv)
            except Hang as e:
                failures.append(f"case {case} ({what}): {e}")
                continue
            lines = err.strip().splitlines()
            if rc not in (0, 2) or "Traceback" in err or (rc == 2 and len(lines) != 1) or len(lines) > 1:
                failures.append(f"case {case} ({what}) {argv[0]} {argv[1]}: exit {rc}\n{err}")
        if len(failures) >= 3:
            break
    assert not failures, "\n".join(failures)
