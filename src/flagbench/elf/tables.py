"""Every member's sections and symbols as numpy columns: the symbol reader of `flagbench size`
and of the build stage's symbol checks.

Section headers, symbol tables and string tables of all members are gathered with one `preadv`
per table into numpy buffers (nothing else of the file is read, so memory follows the size of
the tables), viewed as structured arrays ('<' or '>' by EI_DATA, Elf32/Elf64 by EI_CLASS), and
nm's letter is one table lookup over all symbols at once (`symbols.symbol_letter` and
`sections.letter` give the rules; tests compare the result with GNU nm on every target).
Per-symbol Python objects (pyelftools) would be too slow here: an LLVM static archive has
2,500 members, 450k sections and 580k symbols.
"""
from __future__ import annotations

import os

from itertools import repeat

from flagbench.elf import sections
from flagbench.elf.constants import (COMMON_INDICES, EM_ARM, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHN_COMMON,
                                     SHN_LORESERVE, SHN_XINDEX, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SYMTAB,
                                     SHT_SYMTAB_SHNDX, STT_FUNC, STT_GNU_IFUNC)
from flagbench.elf.files import Input, Member, open_input
from flagbench.elf.sections import COFF_PREFIXES, cstring
from flagbench.elf.symbols import COMMON, SECTION_LETTERS, symbol_letter
from flagbench.errors import UserError


class Tables:
    """Sections and symbols of every member of an input, as numpy columns.

    Sections: one row per section header of each member that has a symbol table. Symbols: one
    row per symbol nm could list (defined, not a section or file symbol), sized or not.
    Symbol names are offsets into `strbuf` (all string tables, gathered), section names into
    `shstrbuf`; `*_stop` is the end of the row's table there.
    """

    def __init__(self, inp: Input, cols: dict):
        self.inp = inp
        self.__dict__.update(cols)

    def names(self, rows) -> list[str]:
        """Names of symbol ROWS."""
        starts = self.sym_name[rows].tolist()
        if not self.strbuf_ascii:
            buf = self.strbuf.tobytes()
            return [buf[s:buf.index(b"\0", s)].decode("utf-8", "surrogateescape") for s in starts]
        return string_slices(self.strtext, starts)

    def section_names(self, rows) -> list[str]:
        buf = self.shstrbuf
        return [_cstring(buf, s, e).decode("utf-8", "surrogateescape")
                for s, e in zip(self.sec_name[rows].tolist(), self.sec_name_stop[rows].tolist())]


def _cstring(buf, start: int, stop: int) -> bytes:
    """The NUL-terminated string at START of a numpy byte buffer, not reading past STOP."""
    return cstring(buf[start:stop].tobytes(), 0, stop - start)


_LETTER_TABLE = None


def _letter_table(np):
    """symbol_letter for every (section letter, binding, type), as one uint8 lookup table."""
    global _LETTER_TABLE
    if _LETTER_TABLE is None:
        table = np.zeros((256, 16, 16), np.uint8)
        for section in SECTION_LETTERS + COMMON:
            for bind in range(16):
                for stype in range(16):
                    letter = symbol_letter(section, bind, stype)
                    if letter is not None:
                        table[ord(section), bind, stype] = ord(letter)
        _LETTER_TABLE = table
    return _LETTER_TABLE


def read_chunks(inp: Input, full: bool = False, members: int = 128):
    """read_tables over runs of MEMBERS archive members at a time: the buffers of one run are
    freed before the next and malloc hands the same pages out again: read in one go, a large
    archive's tables would spend more time faulting fresh pages in than being read."""
    found = False
    for i in range(0, len(inp.members), members):
        part = Input(inp.path, inp.fd, inp.size, inp.kind, inp.members[i:i + members])
        t = read_tables(part, full, require=False)
        if t is not None:
            found = True
            yield t
    if not found:
        raise UserError(f"{inp.path}: no symbol table (stripped?)")


def read_tables(inp: Input, full: bool = True, require: bool = True) -> Tables | None:
    """All members' sections and symbols (members grouped by ELF class and byte order).

    FULL keeps what `size.measure` needs beyond names, letters and sizes (addresses, values,
    section names). Without REQUIRE, None when no member has a symbol table."""
    import numpy as np
    groups: dict[tuple[bool, bool], list[Member]] = {}
    for m in inp.members:
        groups.setdefault((m.is64, m.big), []).append(m)
    parts = [_read_group(np, inp, ms, full) for ms in groups.values()]
    parts = [p for p in parts if p is not None]
    if not parts:
        if not require:
            return None
        raise UserError(f"{inp.path}: no symbol table (stripped?)")
    if len(parts) == 1:
        cols = parts[0]
    else:  # rows of later groups point at later sections and later string bytes
        sec_off = str_off = shstr_off = 0
        cols = {k: [] for k in parts[0]}
        for p in parts:
            if full:
                p["sym_section"] = np.where(p["sym_section"] >= 0, p["sym_section"] + sec_off, -1)
            for k in ("sym_name", "sym_name_stop"):
                p[k] = p[k] + str_off
            for k in ("sec_name", "sec_name_stop"):
                p[k] = p[k] + shstr_off
            sec_off += len(p["sec_type"])
            str_off += len(p["strbuf"])
            shstr_off += len(p["shstrbuf"])
            for k, v in p.items():
                cols[k].append(v)
        cols = {k: np.concatenate(v) for k, v in cols.items()}
    strbuf = cols["strbuf"]
    try:  # one decode of all string tables; names are slices of it
        cols["strtext"] = str(memoryview(strbuf), "ascii")
        cols["strbuf_ascii"] = True
    except UnicodeDecodeError:
        cols["strbuf_ascii"] = False
    if not full:
        del cols["shstrbuf"]
    return Tables(inp, cols)


def _dtypes(np, is64: bool, big: bool):
    e = ">" if big else "<"
    word = e + ("u8" if is64 else "u4")
    shdr = np.dtype([("name", e + "u4"), ("type", e + "u4"), ("flags", word), ("addr", word),
                     ("offset", word), ("size", word), ("link", e + "u4"), ("info", e + "u4"),
                     ("align", word), ("entsize", word)])
    if is64:
        sym = np.dtype([("name", e + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", e + "u2"),
                        ("value", word), ("size", word)])
    else:
        sym = np.dtype([("name", e + "u4"), ("value", word), ("size", word), ("info", "u1"),
                        ("other", "u1"), ("shndx", e + "u2")])
    return shdr, sym


def _gather(np, inp: Input, offsets, sizes):
    """The byte ranges (OFFSETS[i], SIZES[i]) of the file, one after the other, in one array."""
    out = np.empty(int(sum(sizes)), np.uint8)
    view = memoryview(out)
    fd, pos = inp.fd, 0
    for off, n in zip(offsets, sizes):
        if n and os.preadv(fd, [view[pos:pos + n]], off) != n:
            raise UserError(f"{inp.path}: truncated file (wanted {n} bytes at {off})")
        pos += n
    return out


def _read_group(np, inp: Input, members: list[Member], full: bool) -> dict | None:
    shdr_t, sym_t = _dtypes(np, members[0].is64, members[0].big)
    nm = len(members)
    shnum = np.array([m.shnum for m in members], np.int64)
    moff = np.array([m.offset for m in members], np.int64)
    msize = np.array([m.size for m in members], np.int64)
    shstrndx = np.array([m.shstrndx for m in members], np.int64)
    sh = _gather(np, inp, (moff + [m.shoff for m in members]).tolist(),
                 (shnum * shdr_t.itemsize).tolist()).view(shdr_t)
    base = np.concatenate(([0], np.cumsum(shnum)[:-1]))
    sec_member = np.repeat(np.arange(nm), shnum)
    local = np.arange(len(sh)) - base[sec_member]
    sec_type = sh["type"].astype(np.uint32)
    sec_flags = sh["flags"].astype(np.uint64)
    sec_off = sh["offset"].astype(np.int64)
    sec_size = sh["size"].astype(np.int64)
    link = sh["link"].astype(np.int64)
    sh_name = sh["name"].astype(np.int64)
    sec_addr = sh["addr"].astype(np.uint64) if full else None
    del sh

    # Each member's symbol table (the first, as BFD), its string table and section names.
    rows = np.flatnonzero(sec_type == SHT_SYMTAB)
    has, first = np.unique(sec_member[rows], return_index=True)
    symtab_row = np.full(nm, -1, np.int64)
    symtab_row[has] = rows[first]
    has = has[sec_size[symtab_row[has]] >= sym_t.itemsize]
    if len(has) == 0:
        return None
    strtab_local = link[symtab_row[has]]
    _check_rows(members, has, strtab_local, shnum, "string table")
    strtab_row = base[has] + strtab_local
    shstr_row = base[has] + shstrndx[has]
    for what, r in (("symbol table", symtab_row[has]), ("string table", strtab_row),
                    ("section name table", shstr_row)):
        # fields above 2**63 turn negative as int64; compared one by one so no sum overflows
        bad = ((sec_off[r] < 0) | (sec_size[r] < 0) | (sec_off[r] > msize[has]) | (sec_size[r] > msize[has])
               | (sec_off[r] + sec_size[r] > msize[has]))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            m = members[has[k]]
            raise UserError(f"{m.name}: truncated ELF file ({what} at {sec_off[r][k]}+"
                            f"{sec_size[r][k]} past the end, size {m.size})")
    for what, r in (("string table", strtab_row), ("section name table", shstr_row)):
        bad = sec_type[r] != SHT_STRTAB
        if bad.any():
            m = members[has[int(np.flatnonzero(bad)[0])]]
            raise UserError(f"{m.name}: corrupt ELF (its {what} is not a string table)")
    counts = sec_size[symtab_row[has]] // sym_t.itemsize
    syms = _gather(np, inp, (moff[has] + sec_off[symtab_row[has]]).tolist(),
                   (counts * sym_t.itemsize).tolist()).view(sym_t)
    sym_member = np.repeat(has, counts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    shndx = syms["shndx"].astype(np.int64)
    if (shndx == SHN_XINDEX).any():
        _apply_xindex(np, inp, members, has, starts, counts, shndx)

    # Section letters from type and flags; names only for sections some symbol is defined in
    # that are not allocated or may carry a COFF name (not the thousands of COMDAT groups).
    in_table = np.zeros(nm, bool)
    in_table[has] = True
    keep_m = in_table[sec_member]
    shstr_size = np.zeros(nm, np.int64)
    shstr_size[has] = sec_size[shstr_row]
    shstrbuf = _gather(np, inp, (moff[has] + sec_off[shstr_row]).tolist(), shstr_size[has].tolist())
    shstr_base = np.concatenate(([0], np.cumsum(shstr_size)[:-1]))
    name_off = shstr_base[sec_member] + sh_name
    name_stop = (shstr_base + shstr_size)[sec_member]
    bad = keep_m & (name_off >= name_stop)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise UserError(f"{members[sec_member[r]].name}: corrupt ELF (section name offset past "
                        "the section name table)")
    write = (sec_flags & SHF_WRITE) != 0
    alloc = (sec_flags & SHF_ALLOC) != 0
    code = (sec_flags & SHF_EXECINSTR) != 0
    contents = sec_type != SHT_NOBITS
    letter = np.full(len(sec_type), ord("?"), np.uint8)
    letter[~write & contents] = ord("n")
    letter[~contents] = ord("b")
    letter[alloc & contents] = np.where(write[alloc & contents], ord("d"), ord("r"))
    letter[code] = ord("t")
    in_section = (shndx > 0) & (shndx < SHN_LORESERVE) & (shndx < shnum[sym_member])
    grow = np.where(in_section, base[sym_member] + shndx, 0)
    referenced = np.zeros(len(sec_type), bool)
    referenced[grow[in_section]] = True
    cand = np.flatnonzero(referenced & ((~alloc & contents & ~code) | alloc))
    cand = cand[~alloc[cand] | _starts_with_any(np, shstrbuf, name_off[cand], name_stop[cand],
                                                 COFF_PREFIXES)]
    for r in cand.tolist():
        name = _cstring(shstrbuf, int(name_off[r]), int(name_stop[r]))
        letter[r] = ord(sections.letter(int(sec_type[r]), int(sec_flags[r]), name))
    st_local = np.full(nm, -1, np.int64)
    st_local[has] = symtab_row[has] - base[has]
    str_local = np.full(nm, -1, np.int64)
    str_local[has] = strtab_local
    st_local, str_local = st_local[sec_member], str_local[sec_member]
    nosec = ((local == 0) | (local == st_local) | (local == str_local)
             | (local == shstrndx[sec_member]) | (sec_type == SHT_SYMTAB_SHNDX)
             | (((sec_type == SHT_REL) | (sec_type == SHT_RELA)) & (link == st_local) & ~alloc))
    letter[nosec | ~keep_m] = 0

    # Symbols: nm's letter by table lookup; row 0 of each table (the null symbol) dropped.
    info = syms["info"]
    sec_code = np.where(in_section, letter[grow], 0).astype(np.uint8)
    machine = np.array([m.machine for m in members])[sym_member]
    common = shndx == SHN_COMMON
    for em, indices in COMMON_INDICES.items():
        for idx in indices:
            common |= (machine == em) & (shndx == idx)
    sec_code[common] = ord(COMMON)
    sym_letter = _letter_table(np)[sec_code, info >> 4, info & 0xF]
    sym_letter[starts] = 0
    rows = np.flatnonzero(sym_letter)

    str_size = np.zeros(nm, np.int64)
    str_size[has] = sec_size[strtab_row]
    strbuf = _gather(np, inp, (moff[has] + sec_off[strtab_row]).tolist(), str_size[has].tolist())
    str_base = np.concatenate(([0], np.cumsum(str_size)[:-1]))
    str_stop = str_base + str_size
    member = sym_member[rows]
    sym_name = str_base[member] + syms["name"][rows].astype(np.int64)
    bad = sym_name >= str_stop[member]
    if bad.any():
        raise UserError(f"{members[member[np.flatnonzero(bad)[0]]].name}: corrupt ELF (symbol "
                        "name offset past the string table)")
    if len(strbuf) == 0 or strbuf[-1] != 0:   # a table not ending in NUL stops at the buffer end
        strbuf = np.append(strbuf, np.uint8(0))
    cols = dict(
        sec_member=sec_member, sec_name=name_off, sec_name_stop=name_stop, sec_type=sec_type,
        sec_flags=sec_flags, sec_size=sec_size, sec_letter=letter, shstrbuf=shstrbuf,
        sym_name=sym_name, sym_name_stop=str_stop[member], strbuf=strbuf,
        sym_size=syms["size"][rows].astype(np.uint64), sym_letter=sym_letter[rows])
    if full:
        value = syms["value"][rows].astype(np.uint64)
        stype = info[rows] & 0xF
        thumb = (machine[rows] == EM_ARM) & ((stype == STT_FUNC) | (stype == STT_GNU_IFUNC))
        value[thumb] &= ~np.uint64(1)
        cols.update(sec_addr=sec_addr, sym_value=value,
                    sym_section=np.where(common[rows], -1, grow[rows]))
    return cols


def _check_rows(members, has, local, shnum, what):
    bad = (local <= 0) | (local >= shnum[has])
    if bad.any():
        k = int(bad.nonzero()[0][0])
        m = members[has[k]]
        raise UserError(f"{m.name}: corrupt ELF ({what} is section {local[k]} of {m.shnum})")


def _apply_xindex(np, inp, members, has, starts, counts, shndx):
    """Real section indices from SHT_SYMTAB_SHNDX, for members with more than 0xff00 sections."""
    for k, mi in enumerate(has.tolist()):
        part = shndx[starts[k]:starts[k] + counts[k]]
        if not (part == SHN_XINDEX).any():
            continue
        m = members[mi]
        hdrs = sections.headers(inp, m)
        table = sections.xindex_table(inp, m, hdrs, sections.symtab_index(hdrs))
        if table is None:
            continue
        x = np.zeros(len(part), np.int64)
        n = min(len(table), len(part))
        x[:n] = table[:n]
        part[part == SHN_XINDEX] = x[part == SHN_XINDEX]


def _starts_with_any(np, buf, offsets, stops, prefixes) -> object:
    """Whether the string at each offset starts with one of PREFIXES (all of length 3)."""
    out = np.zeros(len(offsets), bool)
    ok = offsets + 3 <= stops
    idx = offsets[ok]
    b0, b1, b2 = buf[idx], buf[idx + 1], buf[idx + 2]
    hit = np.zeros(len(idx), bool)
    for p in prefixes:
        hit |= (b0 == p[0]) & (b1 == p[1]) & (b2 == p[2])
    out[ok] = hit
    return out


def string_slices(table: bytes | str, offsets: list[int]) -> list[str]:
    """The NUL-terminated names at OFFSETS of a string table (bytes, or str when already decoded
    from ASCII), decoded: for ASCII one decode, then slices found and cut by C loops."""
    if isinstance(table, str) or table.isascii():
        text = table if isinstance(table, str) else table.decode("ascii")
        if not text.endswith("\0"):
            text += "\0"
        ends = map(text.index, repeat("\0"), offsets)
        return list(map(text.__getitem__, map(slice, offsets, ends)))
    table += b"\0"
    return [table[o:table.index(b"\0", o)].decode("utf-8", "surrogateescape") for o in offsets]


def sized_symbols(source) -> list[tuple[str, str, int]]:
    """(name, nm letter, size) of every symbol `nm --size-sort` lists, in symbol-table order;
    SOURCE is a path (opened and closed here) or an open Input."""
    inp = open_input(str(source)) if not isinstance(source, Input) else source
    try:
        t = read_tables(inp, full=False)
        import numpy as np
        rows = np.flatnonzero(t.sym_size > 0)
        return list(zip(t.names(rows), t.sym_letter[rows].tobytes().decode("latin-1"), t.sym_size[rows].tolist()))
    finally:
        if inp is not source:
            inp.close()
