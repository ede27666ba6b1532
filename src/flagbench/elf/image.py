"""One ELF file as the disassembly stage and the link checks see it: named sections, every
symbol, and section contents read on demand (one `pread` per section asked for, cached), never
the whole file.

Section headers and their checks are in `sections`; symbols are decoded by the same C loop as
`tables` (`_symtab.entries`: one rule for SHN_XINDEX and the Thumb bit). Every index a header holds
(a symbol table's string table, a relocation table's symbol table and target section, a symbol's
section) is checked, so a damaged file is one UserError line.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from flagbench.elf import _symtab, sections
from flagbench.elf.constants import ET_REL, SHF_ALLOC, SHT_NOBITS, SHT_REL, SHT_RELA, STT_SECTION
from flagbench.elf.files import Input, Member, open_input
from flagbench.errors import UserError


@dataclass(slots=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int       # in the file
    size: int
    entsize: int
    link: int
    info: int


@dataclass(slots=True)
class Symbol:
    name: str         # a section symbol carries its section's name
    value: int
    size: int
    type: int
    shndx: int        # 0 when undefined, absolute or out of range


class Image:
    """An opened ELF file (not an archive). Use as a context manager, or call close(). Without
    SYMBOLS the symbol table is not read (`symbols` is then empty)."""

    def __init__(self, path: str, symbols: bool = True):
        self.input: Input = open_input(str(path), archives=False)
        try:
            m: Member = self.input.members[0]
            self.path, self.member = str(path), m
            self.machine, self.is64, self.big = m.machine, m.is64, m.big
            self.relocatable = m.etype == ET_REL
            hdrs = sections.read_headers(self.input, m)
            shstr = sections.section_name_table(self.input, m, hdrs)
            names = sections.names(self.input, m, hdrs, shstr)
            self.sections = [Section(*row) for row in zip(names, hdrs.type, hdrs.flags, hdrs.addr, hdrs.offset,
                                                          hdrs.size, hdrs.entsize, hdrs.link, hdrs.info)]
            self._hdrs = hdrs
            self._bytes: dict[int, bytes] = {}
            self.symtab = sections.symtab_index(hdrs)
            self.symbols = self._symbols(shstr) if symbols and self.symtab is not None else []
        except BaseException:
            self.input.close()
            raise

    def close(self) -> None:
        self.input.close()

    def __enter__(self) -> "Image":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def contents(self, index: int) -> bytes:
        """Section INDEX's bytes (empty for NOBITS), checked to lie inside the file."""
        if index not in self._bytes:
            off, size = sections.table_range(self.member, self._hdrs, index, f"section {index}")
            self._bytes[index] = self.input.read(off, size)
        return self._bytes[index]

    def _symbols(self, shstr: bytes) -> list[Symbol]:
        """Every entry of the symbol table, decoded by the one reader (`_symtab.entries`)."""
        view = sections.view(self.input, self.member, self._hdrs, shstr, self.symtab)
        try:
            names, values, sizes, infos, shndx = _symtab.entries(view)
        except ValueError as e:
            raise UserError(f"{self.path}: corrupt ELF ({e})") from None
        secs = self.sections
        return [Symbol(secs[x].name if n is None else n, v, size, info & 0xF, x)
                for n, v, size, info, x in zip(names, values, sizes, infos, shndx)]

    def relocations(self):
        """(target section index, RELA?, [(offset, symbol index, addend)]) per relocation table whose
        symbol table is ours and whose target section exists."""
        order = ">" if self.big else "<"
        for i, s in enumerate(self.sections):
            if s.type not in (SHT_RELA, SHT_REL) or s.link != self.symtab or not 0 < s.info < len(self.sections):
                continue
            rela = s.type == SHT_RELA
            fmt = order + (("QQq" if rela else "QQ") if self.is64 else ("IIi" if rela else "II"))
            raw = self.contents(i)
            step = struct.calcsize(fmt)
            raw = raw[:len(raw) - len(raw) % step]
            shift = 32 if self.is64 else 8
            yield s.info, [(e[0], e[1] >> shift, e[2] if rela else 0) for e in struct.iter_unpack(fmt, raw)]

    def address_range(self) -> tuple[int, int]:
        """Lowest and highest address of the loaded sections (executables)."""
        loaded = [s for s in self.sections if s.flags & SHF_ALLOC and s.addr]
        if not loaded:
            return (0, 0)
        return (min(s.addr for s in loaded), max(s.addr + s.size for s in loaded))

    def word_at(self, addr: int, size: int) -> int | None:
        """The SIZE-byte word at an address of an executable (a jump table entry)."""
        for i, sec in enumerate(self.sections):
            if sec.flags & SHF_ALLOC and sec.type != SHT_NOBITS and sec.addr <= addr <= sec.addr + sec.size - size:
                raw = self.contents(i)[addr - sec.addr: addr - sec.addr + size]
                return int.from_bytes(raw, "big" if self.big else "little") if len(raw) == size else None
        return None


def symbol_address(path, name: str) -> int | None:
    """Where NAME (a defined symbol) landed in a linked program, as nm prints it."""
    with Image(path) as image:
        for s in image.symbols:
            if s.name == name and s.shndx and s.type != STT_SECTION:
                return s.value
    return None
