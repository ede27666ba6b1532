"""flagbench's one cache root: ./.cache/flagbench, or FLAGBENCH_CACHE.

Everything flagbench keeps between runs lives under it, keyed by content: compiled
objects and cells (build.py), tool versions and flag probes, unpacked kernel trees and
Kbuild cells (kernel/), the qemu plugins (run/qemu_plugin.py). Files are written under
a temporary name and renamed into place, so deleting the directory is always safe.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "FLAGBENCH_CACHE"
DEFAULT = ".cache/flagbench"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT).resolve()


@contextmanager
def locked(path: Path):
    """An exclusive lock on PATH (created), held while the block runs: two processes asking
    for the same tree or cell do the work once, the second finds it done."""
    with _flock(path, wait=True):
        yield


def try_locked(path: Path):
    """PATH's lock if nobody holds it: yields True while held, False (without waiting) when
    another process has it."""
    return _flock(path, wait=False)


@contextmanager
def _flock(path: Path, wait: bool):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
