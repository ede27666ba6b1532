"""Opening an input: an ELF file or an `ar` archive of them, checked, read by byte range.

Only regular files are opened (a FIFO would block, a device has no size); every header field
that says where something is gets checked against the bytes there are, so damaged input is one
UserError line. Nothing is read whole: `Input.read` is one `pread` of the range asked for, and
`Input.view` a window on the file mapped read-only (for megabytes of code scanned once: a `pread`
of a vmlinux's .text into fresh memory costs 5x the mapping's page-cache faults).
"""
from __future__ import annotations

import mmap
import os
import stat
import struct

from flagbench.elf.constants import (AR_HEADER, AR_MAGIC, ELF_MAGIC, SHDR_FORMAT, SHDR_SIZE, SHN_XINDEX,
                                     THIN_MAGIC)
from flagbench.errors import UserError

_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"))


class Member:
    """One ELF image: the file itself, or one member of an archive (a plain class with slots:
    an LLVM archive has thousands)."""
    __slots__ = ("name", "offset", "size", "is64", "big", "machine", "etype", "shoff", "shnum",
                 "shstrndx")

    def __init__(self, name, offset, size, is64, big, machine, etype, shoff, shnum, shstrndx):
        self.name, self.offset, self.size, self.is64, self.big = name, offset, size, is64, big
        self.machine, self.etype, self.shoff = machine, etype, shoff
        self.shnum, self.shstrndx = shnum, shstrndx

    @property
    def order(self) -> str:
        return ">" if self.big else "<"


class Input:
    """An opened input file: its descriptor, kind and ELF members; bytes are read on demand."""

    def __init__(self, path: str, fd: int, size: int, kind: str, members: list[Member]):
        self.path, self.fd, self.size, self.kind, self.members = path, fd, size, kind, members
        self._map: mmap.mmap | None = None

    @property
    def machine(self) -> tuple[int, bool]:
        return self.members[0].machine, self.members[0].is64

    def read(self, offset: int, size: int) -> bytes:
        self._check(offset, size, size)
        data = os.pread(self.fd, size, offset) if size else b""
        self._check(offset, size, len(data))
        return data

    def view(self, offset: int, size: int) -> memoryview:
        """The bytes `read(offset, size)` returns, as a read-only window on the mapped file."""
        self._check(offset, size, min(size, self.size - offset))
        if not size:
            return memoryview(b"")
        if self._map is None:
            self._map = mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ)
        return memoryview(self._map)[offset:offset + size]

    def _check(self, offset: int, size: int, there: int) -> None:
        """A range asked for (SIZE bytes at OFFSET) of which THERE bytes exist, or one line why not."""
        if offset < 0 or size < 0:
            raise UserError(f"{self.path}: corrupt ELF (negative offset or size)")
        if there != size:
            raise UserError(f"{self.path}: truncated file (wanted {size} bytes at {offset})")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:   # a view is still held: the mapping goes with the last one
                pass
            self._map = None

    def __enter__(self) -> "Input":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_regular(path: str) -> tuple[int, int]:
    """(descriptor, size) of PATH, which must be a regular file; never blocks on a FIFO."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as e:
        raise UserError(f"{path}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, not an ELF file")
    for test, what in _NOT_REGULAR:
        if test(st.st_mode):
            raise UserError(f"{path}: is {what}, not a regular file")
    try:   # O_NONBLOCK: should it have become a FIFO since the stat, opening does not wait
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise UserError(f"{path}: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a regular file")
    return fd, st.st_size


def is_elf(path) -> bool:
    """Whether PATH is a regular file that starts as an ELF file does (False when it cannot be read)."""
    try:
        fd, _ = open_regular(str(path))
    except UserError:
        return False
    try:
        return os.pread(fd, 4, 0) == ELF_MAGIC
    finally:
        os.close(fd)


def open_input(path: str, archives: bool = True) -> Input:
    """Open PATH and list its ELF members; UserError for anything that is not one we can read.
    Without ARCHIVES, only a single ELF file is accepted."""
    path = str(path)
    fd, size = open_regular(path)
    try:
        if size == 0:
            raise UserError(f"{path}: empty file, not an ELF file" + (" or archive" if archives else ""))
        head = os.pread(fd, 64, 0)
        if head[:8] in (AR_MAGIC, THIN_MAGIC) and not archives:
            raise UserError(f"{path}: an archive; give an object or an executable")
        if head[:8] == AR_MAGIC:
            members = _archive_members(path, fd, size)
            if not members:
                raise UserError(f"{path}: empty archive (no ELF members)")
            return Input(path, fd, size, "archive", members)
        if head[:8] == THIN_MAGIC:
            raise UserError(f"{path}: thin archive (members are separate files); "
                            "pass a normal archive or the objects")
        if head[:4] != ELF_MAGIC:
            raise UserError(f"{path}: not an ELF file" + (" or ar archive" if archives else ""))
        member = elf_member(path, fd, head, 0, size)
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
        chunk = os.pread(fd, AR_HEADER + 64, pos)
        if pos + AR_HEADER > end:
            if chunk.strip(b"\n") == b"":
                break
            raise UserError(f"{path}: truncated archive (member header at byte {pos})")
        header = chunk[:AR_HEADER]
        if header[58:60] != b"`\n":
            raise UserError(f"{path}: corrupt archive (bad member header at byte {pos})")
        field = header[48:58].strip()
        if not field.isdigit():
            raise UserError(f"{path}: corrupt archive (bad member size at byte {pos})")
        size = int(field)
        data = pos + AR_HEADER
        if data + size > end:
            raise UserError(f"{path}: truncated archive (member at byte {pos} runs past the end)")
        raw = header[:16].rstrip(b" ")
        name = raw.decode("utf-8", "replace")
        start, length, head = data, size, chunk[AR_HEADER:AR_HEADER + size]
        if raw in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            name = None                                   # symbol index
        elif raw == b"//":
            longnames, name = os.pread(fd, size, data), None  # GNU long-name table
        elif raw.startswith(b"#1/"):                      # BSD: name precedes the data
            if not raw[3:].isdigit() or int(raw[3:]) > size:
                raise UserError(f"{path}: corrupt archive (bad BSD name at byte {pos})")
            n = int(raw[3:])
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
            members.append(elf_member(f"{path}({name})", fd, head, start, length))
        pos = data + size + (size & 1)
    return members


def elf_member(label: str, fd: int, head: bytes, offset: int, size: int) -> Member:
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
    want = SHDR_SIZE[is64]
    if shoff == 0:
        raise UserError(f"{label}: no section headers (no symbol table; stripped?)")
    if shentsize != want:
        raise UserError(f"{label}: corrupt ELF header (section header size {shentsize}, expected {want})")
    if shoff + want > size:
        raise UserError(f"{label}: truncated ELF file (section headers at {shoff} past the end, size {size})")
    if shnum == 0 or shstrndx == SHN_XINDEX:  # more than 0xff00 sections: counts live in section 0
        sh0 = struct.unpack(e + SHDR_FORMAT[is64], os.pread(fd, want, offset + shoff))
        shnum = shnum or sh0[5]
        shstrndx = sh0[6] if shstrndx == SHN_XINDEX else shstrndx
    if shnum == 0 or shoff + shnum * want > size:
        raise UserError(f"{label}: truncated ELF file ({shnum} section headers at {shoff} "
                        f"do not fit in {size} bytes)")
    if shstrndx >= shnum or shstrndx == 0:
        raise UserError(f"{label}: corrupt ELF header (section name table index {shstrndx} of {shnum})")
    return Member(label, offset, size, is64, big, machine, etype, shoff, shnum, shstrndx)
