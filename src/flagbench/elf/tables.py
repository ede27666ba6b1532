"""Each member's nm-listed symbols as plain columns (lists): the symbol reader of `flagbench size`
and of the run stage's symbol checks.

Per member, the section headers, the symbol table and the two string tables are each read with
one `pread` and checked here (bounds, types); the loops over their entries run in C
(`_symtab.c`, which says why), fed with nm's rules as lookup tables built from
`symbols.symbol_letter` and `sections.letter`. Tests compare the result with GNU nm on every
target.
"""
from __future__ import annotations

import sys
from array import array

from flagbench.elf import _symtab, sections
from flagbench.elf.constants import (COMMON_INDICES, EM_ARM, ET_REL, SHN_COMMON, SHN_LORESERVE, SHT_NOBITS,
                                     SHT_STRTAB, SHT_SYMTAB)
from flagbench.elf.files import Input, Member, open_input
from flagbench.elf.symbols import COMMON, NO_SECTION, SECTION_LETTERS, symbol_letter
from flagbench.errors import UserError

# Section letter codes: index into LETTER_CODES; code 0 is "not a section nm lists symbols of",
# COMMON is last (the C code files reserved common indices under it).
LETTER_CODES = NO_SECTION + SECTION_LETTERS + COMMON
_CODE = {c: i for i, c in enumerate(LETTER_CODES)}
assert _CODE[COMMON] == 11 and len(LETTER_CODES) <= 16


def _symbol_letters() -> bytes:
    """nm's letter (0: not listed) by st_info << 4 | section code. symbol_letter is asked once
    per st_info with a probe section letter and once for common: the section's own letter only
    passes through it (upper-cased for a global), so each st_info's row of 16 codes is one of a
    handful, made once (this runs at every start of flagbench)."""
    rows: dict[tuple, bytes] = {}
    table = []
    for info in range(256):
        key = (symbol_letter("x", info >> 4, info & 0xF), symbol_letter(COMMON, info >> 4, info & 0xF))
        row = rows.get(key)
        if row is None:
            probe, common = key
            row = bytearray(16)
            for code, section in enumerate(LETTER_CODES):
                letter = (None if section == NO_SECTION else common if section == COMMON else
                          {"x": section, "X": section.upper()}.get(probe, probe))
                row[code] = ord(letter) if letter else 0
            row = rows[key] = bytes(row)
        table.append(row)
    return b"".join(table)


_SYMBOL_LETTERS = _symbol_letters()
# A section's letter code from flags & (WRITE|ALLOC|EXEC) | NOBITS << 3, where its name does not decide.
_BASE_CODES = bytes(_CODE[sections.letter(SHT_NOBITS if key >> 3 else 1, key & 7, b"")] for key in range(16))


def _name_code(sh_type: int, sh_flags: int, name: bytes) -> int:
    return _CODE[sections.letter(sh_type, sh_flags, name)]


class MemberTables:
    """The symbols nm lists of one member (defined, not section or file symbols), sized or not, in
    symbol-table order: `names`, `letters` (a str, one character per symbol), `sizes`; with FULL
    also `values` (Thumb bit cleared), `sections` (section index, -1 for common), `gaps` (the
    padding after each symbol in code), and `covered` / `padding` (the member's code bytes in
    sized symbols and in padding)."""
    __slots__ = ("member", "names", "letters", "sizes", "values", "sections", "gaps", "covered", "padding",
                 "_shdrs", "_shstr")

    def section_sizes(self, groups: tuple) -> tuple[dict[str, int], int, int, int, int]:
        """({group: bytes}, code, read-only data, data, no-contents bytes) of the allocated
        sections; GROUPS as `_symtab.section_sizes` takes them."""
        m = self.member
        try:
            return _symtab.section_sizes(self._shdrs, self._shstr, m.is64, m.big, groups)
        except ValueError as e:
            raise UserError(f"{m.name}: corrupt ELF ({e})") from None


def _columns(raw: bytes, m: Member) -> tuple:
    """(type, offset, size, link) of every section header, as arrays."""
    if m.is64:   # 64 bytes: u32 name, type; u64 flags, addr, offset, size; u32 link, ...
        w, q = array("I", raw), array("Q", raw)
        cols = w[1::16], q[3::8], q[4::8], w[10::16]
    else:        # 40 bytes: ten u32 fields
        w = array("I", raw)
        cols = w[1::10], w[4::10], w[5::10], w[6::10]
    if m.big != (sys.byteorder == "big"):
        for c in cols:
            c.byteswap()
    return cols


def _table(inp: Input, m: Member, off, size, index: int, what: str) -> bytes:
    o, n = off[index], size[index]
    if o > m.size or n > m.size or o + n > m.size:
        raise UserError(f"{m.name}: truncated ELF file ({what} at {o}+{n} past the end, size {m.size})")
    return inp.read(m.offset + o, n)


def read_member(inp: Input, m: Member, full: bool = True, sized_only: bool = False,
                summaries: tuple | None = None) -> MemberTables | None:
    """M's listed symbols (only the sized ones with SIZED_ONLY); None when M has no symbol table.
    With SUMMARIES (`_symtab.Summary` tables) the sized symbols go there instead, and only the
    member's code totals (and section sizes) are left here. Damaged tables are a UserError
    naming the member."""
    shdrs = inp.read(m.offset + m.shoff, m.shnum * (64 if m.is64 else 40))
    stype, offset, size, link = _columns(shdrs, m)
    try:
        symtab = stype.index(SHT_SYMTAB)
    except ValueError:
        return None
    if size[symtab] < (24 if m.is64 else 16):
        return None
    strtab = link[symtab]
    if not 0 < strtab < m.shnum:
        raise UserError(f"{m.name}: corrupt ELF (string table is section {strtab} of {m.shnum})")
    syms = _table(inp, m, offset, size, symtab, "symbol table")
    strbuf = _table(inp, m, offset, size, strtab, "string table")
    shstr = _table(inp, m, offset, size, m.shstrndx, "section name table")
    for what, i in (("string table", strtab), ("section name table", m.shstrndx)):
        if stype[i] != SHT_STRTAB:
            raise UserError(f"{m.name}: corrupt ELF (its {what} is not a string table)")
    xindex = None
    if m.shnum >= SHN_LORESERVE:   # section indices of 0xff00 and up live in SHT_SYMTAB_SHNDX
        xindex = sections.xindex_table(inp, m, sections.headers(inp, m), symtab)
    try:
        (names, letters, sizes, values, secs, gaps, covered, padding) = _symtab.symbols(
            shdrs, syms, strbuf, shstr, m.is64, m.big, (0, symtab, strtab, m.shstrndx),
            (SHN_COMMON, *COMMON_INDICES.get(m.machine, ())), _SYMBOL_LETTERS, _BASE_CODES, _name_code,
            xindex, sized_only, full, m.etype == ET_REL, m.machine == EM_ARM, summaries)
    except ValueError as e:
        raise UserError(f"{m.name}: corrupt ELF ({e})") from None
    t = MemberTables()
    t.member, t.names, t.letters, t.sizes = m, names, letters and letters.decode("latin-1"), sizes
    t.values, t.sections, t.gaps, t.covered, t.padding = values, secs, gaps, covered, padding
    t._shdrs, t._shstr = shdrs, shstr
    return t


def read_members(inp: Input, full: bool = True, sized_only: bool = False, summaries: tuple | None = None):
    """read_member over every member that has a symbol table; UserError when none has one."""
    found = False
    for m in inp.members:
        t = read_member(inp, m, full, sized_only, summaries)
        if t is not None:
            found = True
            yield t
    if not found:
        raise UserError(f"{inp.path}: no symbol table (stripped?)")


def sized_symbols(source) -> list[tuple[str, str, int]]:
    """(name, nm letter, size) of every symbol `nm --size-sort` lists, in symbol-table order;
    SOURCE is a path (opened and closed here) or an open Input."""
    inp = open_input(str(source)) if not isinstance(source, Input) else source
    try:
        out = []
        for t in read_members(inp, full=False, sized_only=True):
            out += zip(t.names, t.letters, t.sizes)
        return out
    finally:
        if inp is not source:
            inp.close()
