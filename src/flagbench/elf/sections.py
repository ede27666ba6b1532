"""Section headers of one member, the checks on them, and the section's nm letter.

`read_headers` is the one parser of section headers (one `pread`, one array per field) and
`table_range` / `string_table` the one bounds and type check of a section, for every reader in
`flagbench.elf`. `view` hands a member's symbol table to the C loops (`_symtab.c`).

The section's nm letter (`letter`) is in `letters`, re-exported here.
"""
from __future__ import annotations

import sys
from array import array
from collections import namedtuple

from flagbench.elf.constants import (EM_ARM, ET_REL, SHN_LORESERVE, SHT_NOBITS, SHT_STRTAB, SHT_SYMTAB,
                                     SHT_SYMTAB_SHNDX)
from flagbench.elf.files import Input, Member
from flagbench.elf.letters import COFF_PREFIXES, letter  # noqa: F401 - the section letter lives there
from flagbench.errors import UserError

# Fields of a section header tuple (`headers`)
NAME, TYPE, FLAGS, ADDR, OFFSET, SIZE, LINK, INFO, ALIGN, ENTSIZE = range(10)
_FIELDS = ("name", "type", "flags", "addr", "offset", "size", "link", "info", "align", "entsize")


class Headers:
    """Every section header of one member, one array per field (the `_FIELDS`); `raw` is the
    bytes they came from, as the C loops take them."""
    __slots__ = ("raw",) + _FIELDS

    def __init__(self, raw: bytes, m: Member):
        self.raw = raw
        if m.is64:   # 64 bytes: u32 name, type; u64 flags, addr, offset, size; u32 link, info; u64 align, entsize
            w, q = array("I", raw), array("Q", raw)
            cols = (w[0::16], w[1::16], q[1::8], q[2::8], q[3::8], q[4::8], w[10::16], w[11::16], q[6::8],
                    q[7::8])
        else:        # 40 bytes: ten u32 fields
            w = array("I", raw)
            cols = tuple(w[i::10] for i in range(10))
        if m.big != (sys.byteorder == "big"):
            for c in cols:
                c.byteswap()
        for field, col in zip(_FIELDS, cols):
            setattr(self, field, col)

    def __len__(self) -> int:
        return len(self.type)


def read_headers(inp: Input, m: Member) -> Headers:
    """M's section headers (their count and place were checked when M was opened)."""
    return Headers(inp.read(m.offset + m.shoff, m.shnum * (64 if m.is64 else 40)), m)


def headers(inp: Input, m: Member) -> list[tuple]:
    """Section headers of one member as tuples (fields named above)."""
    h = read_headers(inp, m)
    return list(zip(*(getattr(h, f) for f in _FIELDS)))


def symtab_index(hdrs: Headers) -> int | None:
    """The (first, as BFD) symbol table's section index, or None."""
    try:
        return hdrs.type.index(SHT_SYMTAB)
    except ValueError:
        return None


def table_range(m: Member, hdrs: Headers, index: int, what: str) -> tuple[int, int]:
    """(file offset, size) of section INDEX, which must exist and lie inside the member; a
    NOBITS section has no bytes."""
    if not 0 < index < len(hdrs):
        raise UserError(f"{m.name}: corrupt ELF ({what} is section {index} of {len(hdrs)})")
    offset, size = hdrs.offset[index], hdrs.size[index]
    if hdrs.type[index] == SHT_NOBITS:
        size = 0
    if offset + size > m.size:
        raise UserError(f"{m.name}: truncated ELF file ({what} at {offset}+{size} past the end, "
                        f"size {m.size})")
    return m.offset + offset, size


def string_table(inp: Input, m: Member, hdrs: Headers, index: int, what: str) -> bytes:
    """The bytes of section INDEX, which must be a string table inside the member."""
    off, size = table_range(m, hdrs, index, what)
    if hdrs.type[index] != SHT_STRTAB:
        raise UserError(f"{m.name}: corrupt ELF ({what}, section {index}, is not a string table)")
    return inp.read(off, size)


# One member's symbol table as the C loops take it (`_symtab.c`: struct elf): the section
# headers, symbol table, string table and section name table as bytes; XINDEX, the
# SHT_SYMTAB_SHNDX words in file order (empty without one); the ELF class and byte order; the
# section indices of the three tables; whether the member is relocatable; THUMB (ARM: a code
# symbol's bit 0 says Thumb, not the address).
View = namedtuple("View", "shdrs syms strtab shstr xindex is64 big symtab strtab_index shstrndx relocatable thumb")


def view(inp: Input, m: Member, hdrs: Headers, shstr: bytes, symtab: int) -> View:
    """The View of M's symbol table, section SYMTAB, and its string table, every range checked."""
    strtab = hdrs.link[symtab]
    off, size = table_range(m, hdrs, symtab, "symbol table")
    syms = inp.read(off, size)
    strings = string_table(inp, m, hdrs, strtab, "string table")
    return View(hdrs.raw, syms, strings, shstr, xindex_table(inp, m, hdrs, symtab), m.is64, m.big, symtab, strtab,
                m.shstrndx, m.etype == ET_REL, m.machine == EM_ARM)


def names(inp: Input, m: Member, hdrs: Headers, table: bytes | None = None) -> list[str]:
    """Every section's name, checked against the section name table (TABLE: its bytes, when read)."""
    if table is None:
        table = section_name_table(inp, m, hdrs)
    size = len(table)
    if any(n >= size for n in hdrs.name[1:]):
        raise UserError(f"{m.name}: corrupt ELF (section name offset past the section name table)")
    return [cstring(table, n, size).decode("utf-8", "replace") for n in hdrs.name]


def section_name_table(inp: Input, m: Member, hdrs: Headers) -> bytes:
    return string_table(inp, m, hdrs, m.shstrndx, "section name table")


def cstring(buf, start: int, stop: int) -> bytes:
    """The NUL-terminated string at START, not reading past STOP."""
    end = buf.find(b"\0", start, stop)
    return buf[start:stop if end < 0 else end]


def xindex_table(inp: Input, m: Member, hdrs: Headers, symtab: int) -> bytes:
    """The SHT_SYMTAB_SHNDX words of the symbol table (file order), when there are more than
    0xff00 sections; else empty."""
    if m.shnum < SHN_LORESERVE:
        return b""
    for i, (t, link) in enumerate(zip(hdrs.type, hdrs.link)):
        if t == SHT_SYMTAB_SHNDX and link == symtab:
            off, size = table_range(m, hdrs, i, "extended section index table")
            return inp.read(off, size - size % 4)
    return b""
