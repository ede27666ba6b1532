"""Write a Linux initramfs (a "newc" cpio archive) from Python: no cpio binary.

The archive holds what `Entry`s say: directories, regular files (their bytes) and
device nodes. Times are 0, owners root and inode numbers sequential, so the same
entries give the same bytes (the archive can be content-cached).
"""
from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class Entry:
    path: str                 # inside the archive, no leading "/"
    mode: int                 # full st_mode: type bits | permissions
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


def directory(path: str) -> Entry:
    return Entry(path, stat.S_IFDIR | 0o755)


def file(path: str, data: bytes, executable: bool = True) -> Entry:
    return Entry(path, stat.S_IFREG | (0o755 if executable else 0o644), data)


def char_device(path: str, major: int, minor: int) -> Entry:
    return Entry(path, stat.S_IFCHR | 0o600, rdev=(major, minor))


def _pad4(n: int) -> bytes:
    return b"\0" * (-n % 4)


def _header(ino: int, entry: Entry, name: bytes) -> bytes:
    fields = (ino, entry.mode, 0, 0, 2 if stat.S_ISDIR(entry.mode) else 1, 0, len(entry.data),
              0, 0, entry.rdev[0], entry.rdev[1], len(name) + 1, 0)
    return b"070701" + b"".join(b"%08X" % f for f in fields)


def newc(entries: list[Entry]) -> bytes:
    """The archive: parents before children is the caller's job (the kernel needs it)."""
    out = bytearray()
    for ino, entry in enumerate([*entries, Entry(TRAILER, 0)], start=1):
        name = entry.path.lstrip("/").encode()
        head = _header(ino if entry.path != TRAILER else 0, entry, name) + name + b"\0"
        out += head + _pad4(len(head)) + entry.data + _pad4(len(entry.data))
    return bytes(out)


def guest_initramfs(init: Path, programs: dict[str, Path], bench_list: str) -> bytes:
    """/init, the bench programs under /bin, the bench list in /benches, /dev/console."""
    entries = [directory("dev"), char_device("dev/console", 5, 1), directory("proc"),
               directory("tmp"), directory("bin"),
               file("init", init.read_bytes()), file("benches", bench_list.encode(), executable=False)]
    entries += [file(f"bin/{name}", path.read_bytes()) for name, path in sorted(programs.items())]
    return newc(entries)
