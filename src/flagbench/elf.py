"""ELF files and `ar` archives, read for `flagbench size`: sections, and symbols with GNU nm's type letter.

Why not pyelftools: it builds one Python object per section and per symbol. The speed goal of
`flagbench size` (5x faster than bloat-o-meter on two merged LLVM static archives: 2,500 members,
450k sections and 580k symbols each) rules that out. Only the byte ranges needed are read
(`os.pread`: archive member headers, section headers, symbol and string tables), never the
section contents, so memory stays near the size of the tables, not of the file.

Small inputs (a vmlinux, a .ko, an object) take `small_columns` here, in pure Python whose loops
run in C (`array` columns cut by stride, `map`/`compress` over them): numpy's import alone
(80-150 ms) would be a large part of bloat-o-meter's whole run on a vmlinux pair. Large inputs
take the numpy reader in `elf_tables`. Both share the validation, `section_letter` and
`symbol_letter`, so they cannot disagree on a letter.

The type letter follows binutils 2.40 (bfd/syms.c bfd_decode_symclass, bfd/elf.c
_bfd_elf_make_section_from_shdr, bfd/elfcode.h elf_slurp_symbol_table, nm.c filter_symbols):
common C; undefined and absolute symbols dropped (`nm --size-sort` drops them); ifunc i; weak
V (object) or W; unique u; otherwise by section: code t, data d, read-only data r, no contents b,
debug N, other read-only n; global upper-case. STT_SECTION and STT_FILE symbols are debugging
symbols nm does not list. Size is st_size (for commons too).
"""
from __future__ import annotations

import os
import struct
import sys
from array import array
from itertools import compress, repeat
from operator import and_, lshift, or_

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


class Member:
    """One ELF image: the file itself, or one member of an archive (a plain class: dataclasses
    would import inspect, 7 ms of a 30 ms run)."""
    __slots__ = ("name", "offset", "size", "is64", "big", "machine", "etype", "shoff", "shnum",
                 "shstrndx")

    def __init__(self, name, offset, size, is64, big, machine, etype, shoff, shnum, shstrndx):
        self.name, self.offset, self.size, self.is64, self.big = name, offset, size, is64, big
        self.machine, self.etype, self.shoff = machine, etype, shoff
        self.shnum, self.shstrndx = shnum, shstrndx


class Input:
    """An opened input file: its descriptor, kind and ELF members; bytes are read on demand."""

    def __init__(self, path: str, fd: int, size: int, kind: str, members: list[Member]):
        self.path, self.fd, self.size, self.kind, self.members = path, fd, size, kind, members

    @property
    def machine(self) -> tuple[int, bool]:
        return self.members[0].machine, self.members[0].is64

    def read(self, offset: int, size: int) -> bytes:
        data = os.pread(self.fd, size, offset)
        if len(data) != size:
            raise UserError(f"{self.path}: truncated file (wanted {size} bytes at {offset})")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_input(path: str) -> Input:
    """Open PATH and list its ELF members; UserError for anything that is not one we can read."""
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
        head = os.pread(fd, 64, 0)
        if head[:8] == AR_MAGIC:
            members = _archive_members(path, fd, size)
            if not members:
                raise UserError(f"{path}: empty archive (no ELF members)")
            return Input(path, fd, size, "archive", members)
        if head[:8] == THIN_MAGIC:
            raise UserError(f"{path}: thin archive (members are separate files); "
                            "pass a normal archive or the objects")
        if head[:4] != ELF_MAGIC:
            raise UserError(f"{path}: not an ELF file or ar archive")
        member = _elf_member(path, fd, head, 0, size)
    except BaseException:
        os.close(fd)
        raise
    kind = {1: "relocatable", 2: "executable", 3: "shared object", 4: "core"}.get(member.etype, "ELF")
    return Input(path, fd, size, kind, [member])


def _archive_members(path: str, fd: int, end: int) -> list[Member]:
    """ELF members of an ar archive: GNU (`//` long names, `/N`) and BSD (`#1/len`) names.

    One pread per member gets its header and the ELF header after it."""
    members, longnames, pos = [], b"", 8
    while pos < end:
        chunk = os.pread(fd, 60 + 64, pos)
        if pos + 60 > end:
            if chunk.strip(b"\n") == b"":
                break
            raise UserError(f"{path}: truncated archive (member header at byte {pos})")
        header = chunk[:60]
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
        start, length, head = data, size, chunk[60:60 + size]
        if raw in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            name = None                                   # symbol index
        elif raw == b"//":
            longnames, name = os.pread(fd, size, data), None  # GNU long-name table
        elif raw.startswith(b"#1/"):                      # BSD: name precedes the data
            try:
                n = int(raw[3:])
            except ValueError:
                raise UserError(f"{path}: corrupt archive (bad BSD name at byte {pos})") from None
            if n > size:
                raise UserError(f"{path}: corrupt archive (BSD name longer than member at byte {pos})")
            both = os.pread(fd, n + 64, data)
            name = both[:n].rstrip(b"\0").decode("utf-8", "replace")
            start, length, head = data + n, size - n, both[n:n + size - n]
        elif raw.startswith(b"/") and raw[1:].isdigit():  # GNU: offset into the `//` table
            off = int(raw[1:])
            stop = longnames.find(b"/\n", off)
            if off >= len(longnames) or stop < 0:
                raise UserError(f"{path}: corrupt archive (long name /{off} not in the name table)")
            name = longnames[off:stop].decode("utf-8", "replace")
        elif name.endswith("/"):
            name = name[:-1]
        if name is not None and head[:4] == ELF_MAGIC:
            members.append(_elf_member(f"{path}({name})", fd, head, start, length))
        pos = data + size + (size & 1)
    return members


def _elf_member(label: str, fd: int, head: bytes, offset: int, size: int) -> Member:
    """Validate one ELF header (HEAD: up to 64 bytes at OFFSET); UserError naming LABEL."""
    if size < 52 or len(head) < 52:
        raise UserError(f"{label}: truncated ELF file (no complete ELF header)")
    cls, data = head[4], head[5]
    if cls not in (1, 2) or data not in (1, 2):
        raise UserError(f"{label}: corrupt ELF header (class {cls}, data encoding {data})")
    is64, big = cls == 2, data == 2
    e = ">" if big else "<"
    if is64:
        if size < 64 or len(head) < 64:
            raise UserError(f"{label}: truncated ELF file (no complete ELF header)")
        h = struct.unpack_from(e + "HHIQQQIHHHHHH", head, 16)
    else:
        h = struct.unpack_from(e + "HHIIIIIHHHHHH", head, 16)
    etype, machine, shoff, shentsize, shnum, shstrndx = h[0], h[1], h[5], h[10], h[11], h[12]
    want = 64 if is64 else 40
    if shoff == 0:
        raise UserError(f"{label}: no section headers (no symbol table; stripped?)")
    if shentsize != want:
        raise UserError(f"{label}: corrupt ELF header (section header size {shentsize}, expected {want})")
    if shoff + want > size:
        raise UserError(f"{label}: truncated ELF file (section headers at {shoff} past the end, size {size})")
    if shnum == 0 or shstrndx == SHN_XINDEX:  # more than 0xff00 sections: counts live in section 0
        sh0 = struct.unpack(e + _SHDR[is64], os.pread(fd, want, offset + shoff))
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
    raw = inp.read(m.offset + m.shoff, m.shnum * (64 if m.is64 else 40))
    headers = list(struct.iter_unpack(fmt, raw))
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


def _words(raw: bytes, code: str, swap: bool) -> array:
    a = array(code, raw)
    if swap:
        a.byteswap()
    return a


def sized_symbols_small(inp: Input) -> list[tuple[str, str, int]]:
    """(name, nm letter, size) of every symbol `nm --size-sort` lists, in pure Python."""
    names, letters, sizes = small_columns(inp, None)
    return list(zip(names, letters, sizes))


def small_columns(inp: Input, types: str | None) -> tuple[list[str], list[str], list[int]]:
    """Names, nm letters and sizes of the symbols `nm --size-sort` lists with a letter in TYPES
    (None: all), in symbol-table order, member after member."""
    names: list[str] = []
    letters: list[str] = []
    sizes: list[int] = []
    found = False
    for m in inp.members:
        headers, symtab = member_sections(inp, m)
        if symtab is None:
            continue
        found = True
        _member_columns(inp, m, headers, symtab, types, names, letters, sizes)
    if not found:
        raise UserError(f"{inp.path}: no symbol table (stripped?)")
    return names, letters, sizes


def _member_columns(inp, m: Member, headers, symtab: int, types, names, letters, sizes) -> None:
    sym_off, sym_size = check_table(inp, m, headers, symtab, "symbol table")
    str_off, str_size = check_table(inp, m, headers, headers[symtab][6], "string table")
    shstr_off, shstr_size = check_table(inp, m, headers, m.shstrndx, "section name table")
    if any(h[0] >= shstr_size for h in headers):
        raise UserError(f"{m.name}: corrupt ELF (section name offset past the section name table)")
    shstr = inp.read(shstr_off, shstr_size)
    skip = non_sections(headers, symtab, m.shstrndx)
    section = [NO_SECTION if i in skip else
               section_letter(h[1], h[2], cstring(shstr, h[0], shstr_size))
               for i, h in enumerate(headers)]
    entsize = 24 if m.is64 else 16
    raw = inp.read(sym_off, sym_size - sym_size % entsize)
    # Columns by stride over the table: Elf64_Sym is name:4 info:1 other:1 shndx:2 value:8 size:8,
    # Elf32_Sym name:4 value:4 size:4 info:1 other:1 shndx:2.
    swap = m.big != (sys.byteorder == "big")
    if m.is64:
        name_col = _words(raw, "I", swap)[0::6]
        size_col = _words(raw, "Q", swap)[2::3]
        info_col = raw[4::24]
        shndx_col = _words(raw, "H", swap)[3::12]
    else:
        name_col = _words(raw, "I", swap)[0::4]
        size_col = _words(raw, "I", swap)[2::4]
        info_col = raw[12::16]
        shndx_col = _words(raw, "H", swap)[7::8]
    n = len(size_col)
    # nm's letter depends only on (section index, st_info): work it out once per distinct pair.
    keys = list(map(or_, map(lshift, shndx_col, repeat(8)), info_col))
    xindex = _xindex_table(inp, m, headers, symtab) if SHN_XINDEX in shndx_col else None
    commons = COMMON_INDICES.get(m.machine, ())
    letter_of = {}
    for key in set(keys):
        shndx, info = key >> 8, key & 0xFF
        if shndx == SHN_XINDEX and xindex is not None:
            letter = "X"                                  # per symbol, below
        elif shndx == SHN_UNDEF:
            letter = None
        elif shndx == SHN_COMMON or shndx in commons:
            letter = symbol_letter(COMMON, info >> 4, info & 0xF)
        elif shndx < len(section) and shndx < SHN_LORESERVE:
            letter = symbol_letter(section[shndx], info >> 4, info & 0xF)
        else:
            letter = None
        letter_of[key] = letter if letter is None or types is None or letter in types or \
            letter == "X" else None
    keep = {k for k, v in letter_of.items() if v is not None}
    rows = list(compress(range(n), map(and_, map(keep.__contains__, keys), map(bool, size_col))))
    if rows and rows[0] == 0:
        rows.pop(0)                                       # symbol 0 is the null symbol
    row_letters = list(map(letter_of.__getitem__, map(keys.__getitem__, rows)))
    if "X" in row_letters:
        rows, row_letters = _resolve_xindex(rows, row_letters, keys, xindex, section, types)
    offsets = list(map(name_col.__getitem__, rows))
    if offsets and max(offsets) >= str_size:
        bad = next(o for o in offsets if o >= str_size)
        raise UserError(f"{m.name}: corrupt ELF (symbol name offset {bad} past the "
                        f"string table, size {str_size})")
    names.extend(string_slices(inp.read(str_off, str_size), offsets))
    letters.extend(row_letters)
    sizes.extend(map(size_col.__getitem__, rows))


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


def _resolve_xindex(rows, row_letters, keys, xindex, section, types):
    """Letters of symbols whose section index lives in SHT_SYMTAB_SHNDX."""
    out_rows, out_letters = [], []
    for i, letter in zip(rows, row_letters):
        if letter == "X":
            shndx = xindex[i] if i < len(xindex) else 0
            info = keys[i] & 0xFF
            letter = None
            if 0 < shndx < len(section):
                letter = symbol_letter(section[shndx], info >> 4, info & 0xF)
            if letter is None or (types is not None and letter not in types):
                continue
        out_rows.append(i)
        out_letters.append(letter)
    return out_rows, out_letters


def _xindex_table(inp: Input, m: Member, headers, symtab: int):
    """The SHT_SYMTAB_SHNDX words of the symbol table, when there are more than 0xff00 sections."""
    for i, h in enumerate(headers):
        if h[1] == SHT_SYMTAB_SHNDX and h[6] == symtab:
            off, size = check_table(inp, m, headers, i, "extended section index table")
            return _words(inp.read(off, size - size % 4), "I", m.big != (sys.byteorder == "big"))
    return None
