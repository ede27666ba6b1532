"""Section headers of one member, the checks on them, and the section's nm letter.

The letter follows binutils 2.40 (bfd/syms.c decode_section_type, bfd/elf.c
_bfd_elf_make_section_from_shdr): code t, data d, read-only data r, no contents b, debug N,
other read-only n; a COFF name (.drectve, .edata, .idata, .pdata) wins over the flags.
"""
from __future__ import annotations

import struct
import sys
from array import array

from flagbench.elf.constants import (SHDR_FORMAT, SHDR_SIZE, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_NOBITS,
                                     SHT_STRTAB, SHT_SYMTAB, SHT_SYMTAB_SHNDX)
from flagbench.elf.files import Input, Member
from flagbench.errors import UserError

# Fields of a section header tuple
NAME, TYPE, FLAGS, ADDR, OFFSET, SIZE, LINK, INFO, ALIGN, ENTSIZE = range(10)


def headers(inp: Input, m: Member) -> list[tuple]:
    """Section headers of one member as tuples (fields named above)."""
    raw = inp.read(m.offset + m.shoff, m.shnum * SHDR_SIZE[m.is64])
    return list(struct.iter_unpack(m.order + SHDR_FORMAT[m.is64], raw))


def symtab_index(hdrs: list[tuple]) -> int | None:
    """The (first, as BFD) symbol table's section index, or None."""
    return next((i for i, h in enumerate(hdrs) if h[TYPE] == SHT_SYMTAB), None)


def table_range(m: Member, hdrs: list[tuple], index: int, what: str) -> tuple[int, int]:
    """(file offset, size) of section INDEX, which must exist and lie inside the member."""
    if not 0 < index < len(hdrs):
        raise UserError(f"{m.name}: corrupt ELF ({what} is section {index} of {len(hdrs)})")
    h = hdrs[index]
    offset, size = h[OFFSET], h[SIZE]
    if h[TYPE] == SHT_NOBITS:
        size = 0
    if offset + size > m.size:
        raise UserError(f"{m.name}: truncated ELF file ({what} at {offset}+{size} past the end, "
                        f"size {m.size})")
    return m.offset + offset, size


def names(inp: Input, m: Member, hdrs: list[tuple]) -> list[str]:
    """Every section's name, checked against the section name table."""
    off, size = table_range(m, hdrs, m.shstrndx, "section name table")
    if hdrs[m.shstrndx][TYPE] != SHT_STRTAB:
        raise UserError(f"{m.name}: corrupt ELF header (section name table index {m.shstrndx} is not a "
                        "string table)")
    table = inp.read(off, size)
    if any(h[NAME] >= size for h in hdrs[1:]):
        raise UserError(f"{m.name}: corrupt ELF (section name offset past the section name table)")
    return [cstring(table, h[NAME], size).decode("utf-8", "replace") for h in hdrs]


def cstring(buf, start: int, stop: int) -> bytes:
    """The NUL-terminated string at START, not reading past STOP."""
    end = buf.find(b"\0", start, stop)
    return buf[start:stop if end < 0 else end]


def letter(sh_type: int, sh_flags: int, name: bytes) -> str:
    """nm's lower-case letter for symbols in this section (bfd decode_section_type)."""
    coff = _coff_section_type(name)
    if coff:
        return coff
    contents = sh_type != SHT_NOBITS
    alloc = bool(sh_flags & SHF_ALLOC)
    readonly = not sh_flags & SHF_WRITE
    if sh_flags & SHF_EXECINSTR:
        return "t"
    if alloc and contents:             # SEC_LOAD, hence SEC_DATA
        return "r" if readonly else "d"
    if not contents:
        return "b"
    if not alloc and _is_debug_name(name):
        return "N"
    return "n" if readonly else "?"


# bfd/syms.c `stt`: these names win over the flags, for ELF too (prefix + one of ".$0-9" or end).
_COFF_TYPES = ((b".drectve", "i"), (b".edata", "e"), (b".idata", "i"), (b".pdata", "p"))
COFF_PREFIXES = (b".dr", b".ed", b".id", b".pd")   # cheap pre-filter for the vectorised path


def _coff_section_type(name: bytes) -> str | None:
    for prefix, kind in _COFF_TYPES:
        if name.startswith(prefix):
            rest = name[len(prefix):len(prefix) + 1]
            if rest == b"" or rest in b".$0123456789":
                return kind
    return None


def _is_debug_name(name: bytes) -> bool:
    return (name.startswith((b".debug", b".gnu.debuglto_.debug_", b".gnu.linkonce.wi.", b".zdebug",
                             b".line", b".stab")) or name == b".gdb_index")


def xindex_table(inp: Input, m: Member, hdrs: list[tuple], symtab: int) -> array | None:
    """The SHT_SYMTAB_SHNDX words of the symbol table, when there are more than 0xff00 sections."""
    for i, h in enumerate(hdrs):
        if h[TYPE] == SHT_SYMTAB_SHNDX and h[LINK] == symtab:
            off, size = table_range(m, hdrs, i, "extended section index table")
            words = array("I", inp.read(off, size - size % 4))
            if m.big != (sys.byteorder == "big"):
                words.byteswap()
            return words
    return None

