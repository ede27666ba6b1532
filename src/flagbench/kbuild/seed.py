"""A cell's first build starts from a sibling's O= directory: another cell of the same tree
whose .config, make command (but O=), tools and pinned environment are the same is copied in
before make, so make recompiles only what differs between them (the build identity:
init/version.o, then the link) instead of every object again through ccache (each hit still
costs a compiler start and objtool: minutes for a tinyconfig on two cores). ktest.pl reuses
one O= for a series the same way; here the sibling's directory is left as it was.

Only a sibling of the same tree qualifies: Kbuild writes the absolute source path into each
object's saved command line, so a directory copied from another tree would rebuild all.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from flagbench import procs
from flagbench.cache import try_locked

KEY = "seed_key"                 # in a cell's flagbench-cell.json: what a sibling must match
# flagbench's own files in an O= directory: the cell's, never a sibling's
OWN = {"flagbench-cell.json", "flagbench-make.log", "flagbench-ccache.log", "flagbench-distcc.log", ".config"}


def key(p) -> str:
    """What decides every byte make would write for the cell, but its O= and build identity."""
    inputs = {"src": str(p.tree.src), "tree": p.tree.identity,
              "make": [a for a in p.make if not a.startswith("O=")], "tools": p.tools,
              "config": hashlib.sha256((p.odir / ".config").read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def find(p, wanted: str, read_json) -> Path | None:
    """A finished sibling O= directory of P's tree with the same key, or None."""
    if p.tree.identity is None:          # a user's tree as it is: its content may have moved since
        return None
    for cell_file in sorted(p.tree.home.glob("out/*/*/flagbench-cell.json")):
        sibling = cell_file.parent
        if sibling == p.odir:
            continue
        data = read_json(cell_file)
        if data.get("ok") and data.get(KEY) == wanted and (sibling / "vmlinux").is_file():
            return sibling
    return None


def copy_from(sibling: Path, odir: Path) -> bool:
    """SIBLING's build copied into ODIR (mtimes kept: make sees it up to date), unless another
    process holds the sibling (it may be building there): then False, and make builds it all."""
    with try_locked(sibling.with_name(sibling.name + ".lock")) as mine:
        if not mine:
            return False
        entries = [str(e) for e in sibling.iterdir() if e.name not in OWN]
        done = procs.run(["cp", "-a", *entries, str(odir)], timeout=1800)
        if done.returncode != 0:
            return False
    _relocate(sibling, odir)
    return True


def _relocate(sibling: Path, odir: Path) -> None:
    """tools/ (objtool and its libsubcmd) is built with absolute output paths: its saved command
    lines and dependency files name the sibling's directory, which would rebuild objtool, and
    then every object (each depends on objtool). They are the only such files in an O= tree."""
    old, new = str(sibling).encode(), str(odir).encode()
    for path in (odir / "tools").rglob("*"):
        if path.suffix not in (".cmd", ".d") or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            was = path.stat()
            path.write_bytes(data.replace(old, new))
            os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
