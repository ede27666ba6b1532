"""Real ELF inputs for the ELF reader's tests: small objects of several targets compiled here
with the real cross compilers (a target whose compiler is missing is left out), and byte-level
edits of their headers."""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from flagbench.toolchains import TARGETS

DATA = Path(__file__).parent / "data" / "size"
# (target, compiler): one of each ELF flavour: 64/32-bit, little/big-endian, RELA/REL
FLAVOURS = [("x86_64", "gcc"), ("aarch64", "gcc"), ("arm", "gcc"), ("riscv64", "gcc"),
            ("loongarch64", "clang"), ("hppa", "gcc"), ("hppa64", "gcc")]


def compile_object(target: str, compiler: str, source: Path, out: Path, flags=()) -> Path | None:
    """SOURCE compiled for TARGET at -O2, or None when that compiler is not installed here."""
    t = TARGETS[target]
    argv = t.compiler_argv(compiler) + list(t.base_cflags) + ["-O2", "-c", str(source), "-o", str(out)]
    if shutil.which(argv[0]) is None:
        return None
    r = subprocess.run(argv + list(flags), capture_output=True)
    return out if r.returncode == 0 else None


def objects(directory: Path, source: Path = DATA / "kinds.c") -> dict[str, Path]:
    """target -> an object of SOURCE, for every flavour whose compiler is here."""
    out = {}
    for target, compiler in FLAVOURS:
        obj = compile_object(target, compiler, source, directory / f"{target}.o")
        if obj is not None:
            out[target] = obj
    return out


class Layout:
    """Where the ELF header says things are (offsets into the file), for edits by field."""

    def __init__(self, data: bytes):
        self.is64, self.big = data[4] == 2, data[5] == 2
        e = ">" if self.big else "<"
        self.e = e
        if self.is64:
            self.shoff = struct.unpack_from(e + "Q", data, 0x28)[0]
            self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(e + "HHH", data, 0x3A)
            self.shstrndx_at = 0x3E
            self.fields = {"name": (0, "I"), "type": (4, "I"), "offset": (24, "Q"), "size": (32, "Q"),
                           "link": (40, "I"), "info": (44, "I"), "entsize": (56, "Q")}
        else:
            self.shoff = struct.unpack_from(e + "I", data, 0x20)[0]
            self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(e + "HHH", data, 0x2E)
            self.shstrndx_at = 0x32
            self.fields = {"name": (0, "I"), "type": (4, "I"), "offset": (16, "I"), "size": (20, "I"),
                           "link": (24, "I"), "info": (28, "I"), "entsize": (36, "I")}
        self.types = [struct.unpack_from(e + "I", data, self.shoff + i * self.shentsize + 4)[0]
                      for i in range(self.shnum)]

    def section(self, sh_type: int) -> int:
        return self.types.index(sh_type)

    def field_at(self, index: int, field: str) -> tuple[int, str]:
        off, code = self.fields[field]
        return self.shoff + index * self.shentsize + off, self.e + code

    def get(self, data: bytes, index: int, field: str) -> int:
        at, fmt = self.field_at(index, field)
        return struct.unpack_from(fmt, data, at)[0]


def with_field(data: bytes, index: int, field: str, value: int) -> bytes:
    """DATA with section INDEX's header FIELD set to VALUE."""
    lay = Layout(data)
    at, fmt = lay.field_at(index, field)
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def with_shstrndx(data: bytes, value: int) -> bytes:
    lay = Layout(data)
    out = bytearray(data)
    struct.pack_into(lay.e + "H", out, lay.shstrndx_at, value)
    return bytes(out)


class Hang(Exception):
    pass


def run_verb(argv, seconds: int = 20) -> tuple[int, str, str]:
    """flagbench.cli.main(ARGV) in this process: (exit status, stdout, stderr). A traceback is
    returned as stderr with status 99; a call still running after SECONDS raises Hang."""
    import contextlib
    import io
    import signal
    import traceback

    from flagbench.cli import main

    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):
        raise Hang(f"flagbench {' '.join(map(str, argv))}: still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main([str(a) for a in argv])
            except SystemExit as e:      # argparse
                rc = e.code
            except Hang:
                raise
            except BaseException:        # noqa: BLE001 - what the test reports
                return 99, out.getvalue(), traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def code_maps(path) -> list[tuple]:
    """Each member's code map of PATH both ways, as comparable values: `asm.unsized.of_member`
    (its holes found and counted in C, `_symtab.code_holes`) and its Python model
    (`code_map`'s walk), or the error each raised."""
    from flagbench import elf
    from flagbench.asm import unsized
    from flagbench.errors import UserError

    def plain(cmap):
        if cmap is None:
            return None
        return (sorted(cmap.totals().items()), sorted(cmap._counted.items()),
                [(p.section, p.start, p.end, p.kind, p.count, p.target) for p in cmap.pieces])

    out = []
    inp = elf.open_input(str(path))
    try:
        for m in inp.members:
            both = []
            for how in (unsized.of_member, unsized._of_member_in_python):
                try:
                    both.append(plain(how(inp, m)))
                except UserError as e:
                    both.append(("UserError", str(e)))
            out.append(tuple(both))
    finally:
        inp.close()
    return out



def size_sums(path) -> tuple:
    """PATH's code outside sized symbols summed as `flagbench size` reads it (`size.symbols.read_pair`,
    where the C reader sums a linked x86-64 member's itself), whether that C reader summed every
    linked member, and the sums of the Python model (`code_map`'s walk, its CodeMap's totals);
    the error each raised instead. For linked members (a relocatable one has its own sums)."""
    from flagbench import elf
    from flagbench.asm import unsized
    from flagbench.elf.constants import ET_REL
    from flagbench.errors import UserError
    from flagbench.size import symbols
    from flagbench.size.rules import DEFAULT_TYPES

    left = []
    python_walk = symbols._linked_unsized

    def recorded(p, offsets, u):
        left.extend(offsets)
        python_walk(p, offsets, u)
    symbols._linked_unsized = recorded
    try:
        sides = symbols.read_pair(str(path), str(path), (("Function", DEFAULT_TYPES),), True)
        fast = None if sides is None else sides[0]["unsized"]
    except UserError as e:
        fast = ("UserError", str(e))
    finally:
        symbols._linked_unsized = python_walk
    model = dict.fromkeys(fast if isinstance(fast, dict) else symbols.UNSIZED, 0)
    inp = elf.open_input(str(path))
    try:
        for m in inp.members:
            cmap = unsized._of_member_in_python(inp, m) if m.etype != ET_REL else None
            for kind, n in (cmap.totals() if cmap else {}).items():
                model[kind] += n
    except UserError as e:
        model = ("UserError", str(e))
    finally:
        inp.close()
    return fast, not left, model
