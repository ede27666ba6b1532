"""ELF files and `ar` archives, read for `flagbench size`: sections, and symbols with GNU nm's type letter.

Why not pyelftools: it builds one Python object per section and per symbol. The speed goal of
`flagbench size` (5x faster than bloat-o-meter on two merged LLVM static archives: 2,300+ members,
450k sections and 580k symbols each, most sections COMDAT groups) rules that out. Here the
section headers and symbol tables of every member are numpy structured arrays (`np.frombuffer`
on the mmap'd file, '<' or '>' by EI_DATA, Elf32/Elf64 by EI_CLASS) concatenated across members,
and nm's letter is one table lookup over all symbols at once. Names are sliced out of the string
tables only for the symbols a caller keeps.

Small inputs (a vmlinux, a .ko, an object) take `sized_symbols_small`, a pure-Python walk with
`struct.iter_unpack`: numpy's import alone (80-150 ms here) is a third of bloat-o-meter's whole
run on a vmlinux pair. Both paths share `member_sections`' validation, `section_letter` and
`symbol_letter`, so they cannot disagree on a letter.

The type letter follows binutils 2.40 (bfd/syms.c bfd_decode_symclass, bfd/elf.c
_bfd_elf_make_section_from_shdr, bfd/elfcode.h elf_slurp_symbol_table, nm.c filter_symbols):
common C; undefined and absolute symbols dropped (`nm --size-sort` drops them); ifunc i; weak
V (object) or W; unique u; otherwise by section: code t, data d, read-only data r, no contents b,
debug N, other read-only n; global upper-case. STT_SECTION and STT_FILE symbols are debugging
symbols nm does not list. Size is st_size (for commons too).
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

from flagbench.errors import UserError

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_SYMTAB_SHNDX = 2, 3, 4, 8, 9, 18
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
STT_OBJECT, STT_SECTION, STT_FILE, STT_COMMON, STT_GNU_IFUNC = 1, 3, 4, 5, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
SHN_UNDEF, SHN_LORESERVE, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF2, 0xFFFF
EM_PARISC, EM_X86_64 = 15, 62
# Target-specific section indices BFD files under its common section.
COMMON_INDICES = {EM_X86_64: (0xFF02,), EM_PARISC: (0xFF00, 0xFF01)}  # LCOMMON; ANSI/HUGE common

# Letter 0 in a section's slot: BFD made no section of it (symbol table, string tables,
# relocations), so its symbols count as absolute and `nm --size-sort` drops them.
NO_SECTION = "\0"
COMMON = "C"

_SHDR = {  # struct formats without the byte-order character
    False: "IIIIIIIIII",   # name type flags addr offset size link info addralign entsize
    True: "IIQQQQIIQQ",
}
_SYM = {False: "IIIBBH", True: "IBBHQQ"}  # Elf32: name value size info other shndx
ELF_MAGIC = b"\x7fELF"
AR_MAGIC, THIN_MAGIC = b"!<arch>\n", b"!<thin>\n"


@dataclass
class Member:
    """One ELF image: the file itself, or one member of an archive."""
    name: str
    offset: int      # where the ELF image starts in the file
    size: int
    is64: bool
    big: bool
    machine: int
    etype: int
    shoff: int
    shnum: int
    shstrndx: int


@dataclass
class Input:
    """An opened input file: its bytes (mmap'd) and its ELF members."""
    path: str
    buf: mmap.mmap
    kind: str            # "archive", "relocatable", "executable", "shared object", "core"
    members: list[Member]

    @property
    def machine(self) -> tuple[int, bool]:
        return self.members[0].machine, self.members[0].is64

    def close(self) -> None:
        try:
            self.buf.close()
        except BufferError:  # a numpy view still alive; the mapping goes with it
            pass


def open_input(path: str) -> Input:
    """Map PATH and list its ELF members; UserError for anything that is not one we can read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as e:
        raise UserError(f"{path}: {e.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if os.path.isdir(path):
            raise UserError(f"{path}: is a directory, not an ELF file")
        if size == 0:
            raise UserError(f"{path}: empty file, not an ELF file or archive")
        buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    head = buf[:8]
    if head == AR_MAGIC:
        members = _archive_members(path, buf)
        if not members:
            raise UserError(f"{path}: empty archive (no ELF members)")
        return Input(path, buf, "archive", members)
    if head == THIN_MAGIC:
        raise UserError(f"{path}: thin archive (members are separate files); "
                        "pass a normal archive or the objects")
    if head[:4] != ELF_MAGIC:
        raise UserError(f"{path}: not an ELF file or ar archive")
    member = _elf_member(path, path, buf, 0, size)
    kind = {1: "relocatable", 2: "executable", 3: "shared object", 4: "core"}.get(member.etype, "ELF")
    return Input(path, buf, kind, [member])


def _archive_members(path: str, buf) -> list[Member]:
    """ELF members of an ar archive: GNU (`//` long names, `/N`) and BSD (`#1/len`) names."""
    members, longnames, pos, end = [], b"", 8, len(buf)
    while pos < end:
        if pos + 60 > end:
            if buf[pos:end].strip(b"\n") == b"":
                break
            raise UserError(f"{path}: truncated archive (member header at byte {pos})")
        header = buf[pos:pos + 60]
        if header[58:60] != b"`\n":
            raise UserError(f"{path}: corrupt archive (bad member header at byte {pos})")
        try:
            size = int(header[48:58])
        except ValueError:
            raise UserError(f"{path}: corrupt archive (bad member size at byte {pos})") from None
        data = pos + 60
        if size < 0 or data + size > end:
            raise UserError(f"{path}: truncated archive (member at byte {pos} runs past the end)")
        raw = header[:16].rstrip(b" ")
        name = raw.decode("utf-8", "replace")
        start, length = data, size
        if raw in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            name = None                                   # symbol index
        elif raw == b"//":
            longnames, name = buf[data:data + size], None  # GNU long-name table
        elif raw.startswith(b"#1/"):                      # BSD: name precedes the data
            try:
                n = int(raw[3:])
            except ValueError:
                raise UserError(f"{path}: corrupt archive (bad BSD name at byte {pos})") from None
            if n > size:
                raise UserError(f"{path}: corrupt archive (BSD name longer than member at byte {pos})")
            name = buf[data:data + n].rstrip(b"\0").decode("utf-8", "replace")
            start, length = data + n, size - n
        elif raw.startswith(b"/") and raw[1:].isdigit():  # GNU: offset into the `//` table
            off = int(raw[1:])
            stop = longnames.find(b"/\n", off)
            if off >= len(longnames) or stop < 0:
                raise UserError(f"{path}: corrupt archive (long name /{off} not in the name table)")
            name = longnames[off:stop].decode("utf-8", "replace")
        elif name.endswith("/"):
            name = name[:-1]
        if name is not None and buf[start:start + 4] == ELF_MAGIC:
            members.append(_elf_member(path, f"{path}({name})", buf, start, length))
        pos = data + size + (size & 1)
    return members


def _elf_member(path: str, label: str, buf, offset: int, size: int) -> Member:
    """Validate one ELF header; UserError naming LABEL and what is wrong."""
    if size < 52:
        raise UserError(f"{label}: truncated ELF file (no complete ELF header)")
    ident = buf[offset:offset + 16]
    cls, data = ident[4], ident[5]
    if cls not in (1, 2) or data not in (1, 2):
        raise UserError(f"{label}: corrupt ELF header (class {cls}, data encoding {data})")
    is64, big = cls == 2, data == 2
    e = ">" if big else "<"
    if is64:
        if size < 64:
            raise UserError(f"{label}: truncated ELF file (no complete ELF header)")
        h = struct.unpack_from(e + "HHIQQQIHHHHHH", buf, offset + 16)
    else:
        h = struct.unpack_from(e + "HHIIIIIHHHHHH", buf, offset + 16)
    etype, machine, shoff, shentsize, shnum, shstrndx = h[0], h[1], h[5], h[10], h[11], h[12]
    want = 64 if is64 else 40
    if shoff == 0:
        raise UserError(f"{label}: no section headers (no symbol table; stripped?)")
    if shentsize != want:
        raise UserError(f"{label}: corrupt ELF header (section header size {shentsize}, expected {want})")
    if shoff + want > size:
        raise UserError(f"{label}: truncated ELF file (section headers at {shoff} past the end, size {size})")
    if shnum == 0 or shstrndx == SHN_XINDEX:  # more than 0xff00 sections: counts live in section 0
        sh0 = struct.unpack_from(e + _SHDR[is64], buf, offset + shoff)
        shnum = shnum or sh0[5]
        shstrndx = sh0[6] if shstrndx == SHN_XINDEX else shstrndx
    if shoff + shnum * want > size:
        raise UserError(f"{label}: truncated ELF file ({shnum} section headers at {shoff} "
                        f"do not fit in {size} bytes)")
    if shstrndx >= shnum:
        raise UserError(f"{label}: corrupt ELF header (section name table index {shstrndx} of {shnum})")
    return Member(label, offset, size, is64, big, machine, etype, shoff, shnum, shstrndx)


def cstring(buf, start: int, stop: int) -> bytes:
    """The NUL-terminated string at START, not reading past STOP."""
    end = buf.find(b"\0", start, stop)
    return buf[start:stop if end < 0 else end]


def section_letter(sh_type: int, sh_flags: int, name: bytes) -> str:
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
    for prefix, letter in _COFF_TYPES:
        if name.startswith(prefix):
            rest = name[len(prefix):len(prefix) + 1]
            if rest == b"" or rest in b".$0123456789":
                return letter
    return None


def _is_debug_name(name: bytes) -> bool:
    return (name.startswith((b".debug", b".gnu.debuglto_.debug_", b".gnu.linkonce.wi.", b".zdebug",
                             b".line", b".stab")) or name == b".gdb_index")


def symbol_letter(section: str, bind: int, stype: int) -> str | None:
    """bfd_decode_symclass for a defined symbol in a section with letter SECTION (or COMMON).

    None: nm does not list it (section/file symbols, symbols BFD files as absolute).
    """
    if section == NO_SECTION or stype in (STT_SECTION, STT_FILE):
        return None
    if section == COMMON:
        return "C"
    if stype == STT_GNU_IFUNC:
        return "i"
    if bind == STB_WEAK:
        return "V" if stype in (STT_OBJECT, STT_COMMON) else "W"
    if bind == STB_GNU_UNIQUE:
        return "u"
    if bind not in (STB_LOCAL, STB_GLOBAL):
        return "?"
    return section.upper() if bind == STB_GLOBAL else section


def member_sections(inp: Input, m: Member) -> tuple[list[tuple], int | None]:
    """Section headers of one member as tuples, and the index of its symbol table (or None)."""
    fmt = (">" if m.big else "<") + _SHDR[m.is64]
    start = m.offset + m.shoff
    headers = list(struct.iter_unpack(fmt, inp.buf[start:start + m.shnum * (64 if m.is64 else 40)]))
    symtab = next((i for i, h in enumerate(headers) if h[1] == SHT_SYMTAB), None)
    return headers, symtab


def check_table(inp: Input, m: Member, headers, index: int, what: str) -> tuple[int, int]:
    """(file offset, size) of section INDEX, which must lie inside the member."""
    if index >= len(headers):
        raise UserError(f"{m.name}: corrupt ELF ({what} is section {index} of {len(headers)})")
    h = headers[index]
    offset, size = h[4], h[5]
    if offset + size > m.size:
        raise UserError(f"{m.name}: truncated ELF file ({what} at {offset}+{size} past the end, "
                        f"size {m.size})")
    return m.offset + offset, size


def non_sections(headers, symtab: int, shstrndx: int) -> set[int]:
    """Section indices BFD keeps no section for: a symbol there counts as absolute."""
    out = {0, symtab, shstrndx, headers[symtab][6]}
    for i, h in enumerate(headers):
        if h[1] == SHT_SYMTAB_SHNDX or (h[1] in (SHT_REL, SHT_RELA) and h[6] == symtab
                                        and not h[2] & SHF_ALLOC):
            out.add(i)
    return out


def sized_symbols_small(inp: Input) -> list[tuple[str, str, int]]:
    """(name, nm letter, size) of every symbol `nm --size-sort` lists, in pure Python."""
    out = []
    found = False
    for m in inp.members:
        headers, symtab = member_sections(inp, m)
        if symtab is None:
            continue
        found = True
        e = ">" if m.big else "<"
        sym_off, sym_size = check_table(inp, m, headers, symtab, "symbol table")
        str_off, str_size = check_table(inp, m, headers, headers[symtab][6], "string table")
        shstr_off, shstr_size = check_table(inp, m, headers, m.shstrndx, "section name table")
        skip = non_sections(headers, symtab, m.shstrndx)
        buf = inp.buf
        if any(h[0] >= shstr_size for h in headers):
            raise UserError(f"{m.name}: corrupt ELF (section name offset past the section name table)")
        letters = [NO_SECTION if i in skip else
                   section_letter(h[1], h[2], cstring(buf, shstr_off + h[0], shstr_off + shstr_size))
                   for i, h in enumerate(headers)]
        commons = COMMON_INDICES.get(m.machine, ())
        xindex = _xindex_table(inp, m, headers, symtab)
        entsize = 24 if m.is64 else 16
        sym_size -= sym_size % entsize
        raw = struct.iter_unpack(e + _SYM[m.is64], buf[sym_off:sym_off + sym_size])
        next(raw, None)   # symbol 0 is the null symbol
        str_end = str_off + str_size
        for i, fields in enumerate(raw, 1):
            if m.is64:
                name, info, _other, shndx, _value, size = fields
            else:
                name, _value, size, info, _other, shndx = fields
            if size == 0 or shndx == SHN_UNDEF:
                continue
            if shndx == SHN_XINDEX and xindex is not None:
                shndx = xindex[i] if i < len(xindex) else 0
            if shndx == SHN_COMMON or shndx in commons:
                section = COMMON
            elif shndx < len(letters) and shndx < SHN_LORESERVE:
                section = letters[shndx]
            else:
                continue
            letter = symbol_letter(section, info >> 4, info & 0xF)
            if letter is None:
                continue
            if name >= str_size:
                raise UserError(f"{m.name}: corrupt ELF (symbol name offset {name} past the "
                                f"string table, size {str_size})")
            out.append((cstring(buf, str_off + name, str_end).decode("utf-8", "surrogateescape"),
                        letter, size))
    if not found:
        raise UserError(f"{inp.path}: no symbol table (stripped?)")
    return out


def _xindex_table(inp: Input, m: Member, headers, symtab: int):
    """The SHT_SYMTAB_SHNDX words of the symbol table, when there are more than 0xff00 sections."""
    for i, h in enumerate(headers):
        if h[1] == SHT_SYMTAB_SHNDX and h[6] == symtab:
            off, size = check_table(inp, m, headers, i, "extended section index table")
            return struct.unpack_from(("<" if not m.big else ">") + "%dI" % (size // 4), inp.buf, off)
    return None


@dataclass
class Tables:
    """Sections and symbols of every member of an input, as numpy columns (see module docstring).

    Sections: one row per section header of each member that has a symbol table. Symbols: one
    row per symbol nm could list (defined, not a section or file symbol), sized or not.
    Name columns are file offsets into `inp.buf`; `*_stop` is the end of the string table.
    """
    inp: Input
    sec_member: object
    sec_name: object
    sec_name_stop: object
    sec_type: object
    sec_flags: object
    sec_addr: object
    sec_size: object
    sec_letter: object    # uint8 nm letter of the section, 0: no BFD section
    sym_name: object
    sym_name_base: object  # start of the symbol's string table
    sym_name_stop: object
    sym_value: object     # st_value, Thumb bit cleared
    sym_size: object
    sym_section: object   # row in the section columns; -1 for commons
    sym_letter: object    # uint8 nm letter

    def names(self, rows) -> list[str]:
        """Names of symbol ROWS (ascending), one string table at a time: ends found with numpy,
        an ASCII table decoded once and sliced."""
        import numpy as np
        buf, out = self.inp.buf, []
        starts, bases, stops = self.sym_name[rows], self.sym_name_base[rows], self.sym_name_stop[rows]
        cuts = np.concatenate(([0], np.flatnonzero(np.diff(bases)) + 1, [len(rows)]))
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            if a == b:
                continue
            base, stop = int(bases[a]), int(stops[a])
            table = buf[base:stop]
            nul = np.append(np.flatnonzero(np.frombuffer(table, np.uint8) == 0), len(table))
            local = starts[a:b] - base
            ends = nul[np.searchsorted(nul, local)]
            if table.isascii():
                text = table.decode("ascii")
                out.extend(map(text.__getitem__, map(slice, local.tolist(), ends.tolist())))
            else:
                out.extend(table[s:e].decode("utf-8", "surrogateescape")
                           for s, e in zip(local.tolist(), ends.tolist()))
        return out

    def section_names(self, rows) -> list[str]:
        buf = self.inp.buf
        return [cstring(buf, s, e).decode("utf-8", "surrogateescape")
                for s, e in zip(self.sec_name[rows].tolist(), self.sec_name_stop[rows].tolist())]


_LETTER_TABLE = None


def _letter_table(np):
    """symbol_letter for every (section letter, binding, type), as one uint8 lookup table."""
    global _LETTER_TABLE
    if _LETTER_TABLE is None:
        table = np.zeros((256, 16, 16), np.uint8)
        for section in "tdrbNn?iep" + COMMON:
            for bind in range(16):
                for stype in range(16):
                    letter = symbol_letter(section, bind, stype)
                    if letter is not None:
                        table[ord(section), bind, stype] = ord(letter)
        _LETTER_TABLE = table
    return _LETTER_TABLE


def read_tables(inp: Input) -> Tables:
    """All members' sections and symbols, vectorised (members grouped by ELF class and byte order)."""
    import numpy as np
    groups: dict[tuple[bool, bool], list[Member]] = {}
    for m in inp.members:
        groups.setdefault((m.is64, m.big), []).append(m)
    parts = [_read_group(np, inp, ms) for ms in groups.values()]
    parts = [p for p in parts if p is not None]
    if not parts:
        raise UserError(f"{inp.path}: no symbol table (stripped?)")
    if len(parts) == 1:
        cols = parts[0]
    else:  # rows of later groups point at later sections
        offset, cols = 0, {k: [] for k in parts[0]}
        for p in parts:
            p["sym_section"] = np.where(p["sym_section"] >= 0, p["sym_section"] + offset, -1)
            offset += len(p["sec_type"])
            for k, v in p.items():
                cols[k].append(v)
        cols = {k: np.concatenate(v) for k, v in cols.items()}
    return Tables(inp, **cols)


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


def _concat(np, buf, dtype, pieces):
    """Rows of DTYPE at (offset, count) PIECES of BUF, as one array (a byte-level concatenation
    copies once and skips numpy's per-view structured-dtype checks)."""
    size = dtype.itemsize
    raw = np.frombuffer(buf, np.uint8)
    return np.concatenate([raw[o:o + n * size] for o, n in pieces]).view(dtype)


def _read_group(np, inp: Input, members: list[Member]) -> dict | None:
    buf = inp.buf
    shdr_t, sym_t = _dtypes(np, members[0].is64, members[0].big)
    sh = _concat(np, buf, shdr_t, [(m.offset + m.shoff, m.shnum) for m in members])
    nm = len(members)
    shnum = np.array([m.shnum for m in members], np.int64)
    moff = np.array([m.offset for m in members], np.int64)
    msize = np.array([m.size for m in members], np.int64)
    shstrndx = np.array([m.shstrndx for m in members], np.int64)
    base = np.concatenate(([0], np.cumsum(shnum)[:-1]))
    sec_member = np.repeat(np.arange(nm), shnum)
    local = np.arange(len(sh)) - base[sec_member]
    sec_type = sh["type"].astype(np.uint32)
    sec_flags = sh["flags"].astype(np.uint64)
    sec_off = sh["offset"].astype(np.int64)
    sec_size = sh["size"].astype(np.int64)
    link = sh["link"].astype(np.int64)

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
        bad = sec_off[r] + sec_size[r] > msize[has]
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            m = members[has[k]]
            raise UserError(f"{m.name}: truncated ELF file ({what} at {sec_off[r][k]}+"
                            f"{sec_size[r][k]} past the end, size {m.size})")
    counts = sec_size[symtab_row[has]] // sym_t.itemsize
    syms = _concat(np, buf, sym_t, zip((moff[has] + sec_off[symtab_row[has]]).tolist(), counts.tolist()))
    sym_member = np.repeat(has, counts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    shndx = syms["shndx"].astype(np.int64)
    if (shndx == SHN_XINDEX).any():
        _apply_xindex(np, inp, members, has, starts, counts, shndx, symtab_row, base)

    # Section letters from type and flags; names only for sections some symbol is defined in
    # that are not allocated or may carry a COFF name (not the thousands of COMDAT groups).
    in_table = np.zeros(nm, bool)
    in_table[has] = True
    keep_m = in_table[sec_member]
    name_base = np.zeros(nm, np.int64)
    name_stop = np.zeros(nm, np.int64)
    name_base[has] = moff[has] + sec_off[shstr_row]
    name_stop[has] = name_base[has] + sec_size[shstr_row]
    name_off = name_base[sec_member] + sh["name"].astype(np.int64)
    name_stop = name_stop[sec_member]
    bad = keep_m & (name_off >= name_stop)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise UserError(f"{members[sec_member[r]].name}: corrupt ELF (section name offset past "
                        "the section name table)")
    write = (sec_flags & SHF_WRITE) != 0
    alloc = (sec_flags & SHF_ALLOC) != 0
    code = (sec_flags & SHF_EXECINSTR) != 0
    contents = sec_type != SHT_NOBITS
    letter = np.full(len(sh), ord("?"), np.uint8)
    letter[~write & contents] = ord("n")
    letter[~contents] = ord("b")
    letter[alloc & contents] = np.where(write[alloc & contents], ord("d"), ord("r"))
    letter[code] = ord("t")
    in_section = (shndx > 0) & (shndx < SHN_LORESERVE) & (shndx < shnum[sym_member])
    grow = np.where(in_section, base[sym_member] + shndx, 0)
    referenced = np.zeros(len(sh), bool)
    referenced[grow[in_section]] = True
    cand = np.flatnonzero(referenced & ((~alloc & contents & ~code) | alloc))
    cand = cand[~alloc[cand] | _starts_with_any(np, buf, name_off[cand], name_stop[cand], COFF_PREFIXES)]
    for r in cand.tolist():
        name = cstring(buf, int(name_off[r]), int(name_stop[r]))
        letter[r] = ord(section_letter(int(sec_type[r]), int(sec_flags[r]), name))
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

    str_base = np.zeros(nm, np.int64)
    str_base[has] = moff[has] + sec_off[strtab_row]
    str_stop = np.zeros(nm, np.int64)
    str_stop[has] = str_base[has] + sec_size[strtab_row]
    member = sym_member[rows]
    sym_name = str_base[member] + syms["name"][rows].astype(np.int64)
    bad = sym_name >= str_stop[member]
    if bad.any():
        raise UserError(f"{members[member[np.flatnonzero(bad)[0]]].name}: corrupt ELF (symbol "
                        "name offset past the string table)")
    value = syms["value"][rows].astype(np.uint64)
    stype = info[rows] & 0xF
    thumb = (machine[rows] == 40) & ((stype == 2) | (stype == STT_GNU_IFUNC))
    value[thumb] &= ~np.uint64(1)
    return dict(
        sec_member=sec_member, sec_name=name_off, sec_name_stop=name_stop, sec_type=sec_type,
        sec_flags=sec_flags, sec_addr=sh["addr"].astype(np.uint64),
        sec_size=sec_size, sec_letter=letter,
        sym_name=sym_name, sym_name_base=str_base[member], sym_name_stop=str_stop[member],
        sym_value=value, sym_size=syms["size"][rows].astype(np.uint64),
        sym_section=np.where(common[rows], -1, grow[rows]), sym_letter=sym_letter[rows])


def _check_rows(members, has, local, shnum, what):
    bad = (local <= 0) | (local >= shnum[has])
    if bad.any():
        k = int(bad.nonzero()[0][0])
        m = members[has[k]]
        raise UserError(f"{m.name}: corrupt ELF ({what} is section {local[k]} of {m.shnum})")


def _apply_xindex(np, inp, members, has, starts, counts, shndx, symtab_row, base):
    """Real section indices from SHT_SYMTAB_SHNDX, for members with more than 0xff00 sections."""
    for k, mi in enumerate(has.tolist()):
        part = shndx[starts[k]:starts[k] + counts[k]]
        if not (part == SHN_XINDEX).any():
            continue
        m = members[mi]
        headers, symtab = member_sections(inp, m)
        table = _xindex_table(inp, m, headers, symtab)
        if table is None:
            continue
        x = np.zeros(len(part), np.int64)
        n = min(len(table), len(part))
        x[:n] = table[:n]
        part[part == SHN_XINDEX] = x[part == SHN_XINDEX]


def _starts_with_any(np, buf, offsets, stops, prefixes) -> object:
    """Whether the string at each offset starts with one of PREFIXES (all of length 3)."""
    raw = np.frombuffer(buf, np.uint8)
    out = np.zeros(len(offsets), bool)
    ok = offsets + 3 <= stops
    idx = offsets[ok]
    b0, b1, b2 = raw[idx], raw[idx + 1], raw[idx + 2]
    hit = np.zeros(len(idx), bool)
    for p in prefixes:
        hit |= (b0 == p[0]) & (b1 == p[1]) & (b2 == p[2])
    out[ok] = hit
    return out
