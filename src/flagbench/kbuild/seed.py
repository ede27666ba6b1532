"""A cell's first build starts from a sibling's O= directory, as a kernel developer builds a
patch: in the tree already built, recompiling what the patch touches. A sibling qualifies when
its tree is the same, or another patched copy of the same base, and its .config, make command
(but O= and the tree's path), tools and pinned environment are the same. Its directory is
copied in (the sibling is left as it was), and then, when the trees differ:

- Kbuild saved each target's command line and dependencies with the tree's absolute path (and
  tools/, objtool's build, with the O= path too, absolute and relative to the tree): all are
  rewritten to this cell's, else make would see every command changed and rebuild all;
- every target whose saved dependencies name a file either tree's patches touch is deleted, so
  make builds it again; nothing rests on file times across the two trees.

What is left for make: those targets, what links them, and the build identity (init/version.o
and the boot image), instead of every object through ccache (each hit still costs a compiler
start, fixdep and objtool: minutes for a tinyconfig on two cores).

A git checkout (a commit's own checkout, as `bisect --objects` and `watch --objects` make, or a
walk's first build) starts likewise from another checkout of the same repository built in the
same configuration: the files that differ are the two commits' trees' difference (git
diff-tree), and, the checkout's files being newer than any copied target (written when it was
checked out), every file copied is made newer than them; stale targets are deleted as above.
Only when the difference is C sources and headers: a Kconfig, Makefile or script change is
left to a whole build, whose own checks follow it. A walk's make that failed (a commit that
does not build) still seeds: Kbuild deletes a target whose command failed (.DELETE_ON_ERROR),
and what make did not reach is at most the files of the walks since its last good build
(recorded as stale, rebuilt like the difference). In the kernel watch of the tests, each object
checkout then compiled 7 files, not 931 (2.5 minutes of two cores each, cold).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from flagbench import procs, vcs
from flagbench.cache import try_locked

KEY = "seed_key"                 # in a cell's flagbench-cell.json: what a sibling must match
SRC = "seed_src"                 # ... the tree it was built from
CHANGED = "seed_changed"         # ... the files that tree's patches touch
TREE = "seed_tree"               # ... the git tree its checkout held (a git checkout's)
STALE = "seed_stale"             # ... after a failed make there: files whose targets may be older
SOURCES = (".c", ".h", ".S")     # a git difference seeds only when it is all these
# flagbench's own files in an O= directory: the cell's, never a sibling's
OWN = {"flagbench-cell.json", "flagbench-make.log", "flagbench-ccache.log", "flagbench-distcc.log", ".config"}


def key(p) -> str | None:
    """What decides every byte make would write for the cell but its O=, the tree's path and
    what its patches (or its commit) changed; None when the cell cannot be seeded (a user's tree)."""
    commit = p.tree.commit
    base = f"git:{vcs.origin(commit.repo)}" if commit is not None else p.tree.base_identity
    if base is None:
        return None
    src = str(p.tree.src)
    inputs = {"base": base, "tools": p.tools,
              "make": [a.replace(src, "<src>") for a in p.make if not a.startswith("O=")],
              "config": hashlib.sha256((p.odir / ".config").read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def recorded(p, wanted: str | None) -> dict:
    """What a finished build of P records for the cells that may start from it."""
    commit = p.tree.commit
    return {KEY: wanted, SRC: str(p.tree.src), CHANGED: list(p.tree.changed),
            TREE: commit.tree if commit is not None else None, STALE: []}


def recorded_failure(p, wanted: str | None, last: dict) -> dict:
    """What a git walk's failed make records (LAST: the build before it there): still a seed,
    its stale files those of the walks since the last good build; none for another tree, for
    a first build, or a difference git cannot name."""
    commit = p.tree.commit
    before = last.get(TREE)
    unknown = {KEY: None, STALE: None}   # and none after it until a good build: what is stale is not known
    if commit is None or wanted is None or not isinstance(before, str) or not isinstance(last.get(STALE), list):
        return unknown
    walked = vcs.changed_paths(commit.repo, before, commit.tree)
    if walked is None:
        return unknown
    return {**recorded(p, wanted), STALE: sorted(set(last[STALE]) | set(walked))}


def find(p, wanted: str | None, trees: Path, read_json) -> tuple[Path, dict, list[str]] | None:
    """The finished sibling with the same key whose tree differs from P's in the fewest files:
    (its O= directory, its record, the files that differ), or None."""
    if wanted is None:
        return None
    best = None
    for cell_file in trees.glob("*/out/*/*/flagbench-cell.json"):
        sibling = cell_file.parent
        if sibling == p.odir:
            continue
        data = read_json(cell_file)
        if not (data.get(KEY) == wanted and (data.get("ok") or data.get(STALE)) and (sibling / "vmlinux").is_file()):
            continue
        differ = _differing(p, data)
        if differ is not None and (best is None or (len(differ), str(sibling)) < best[0]):
            best = ((len(differ), str(sibling)), sibling, data, differ)
    return best[1:] if best else None


def _differing(p, record: dict) -> list[str] | None:
    """The files (relative to the tree) in which P's tree and the sibling's differ; None when
    the sibling cannot seed P (a git difference that is not all C sources and headers)."""
    commit = p.tree.commit
    if commit is None:
        same = record.get(SRC) == str(p.tree.src)
        return [] if same else sorted(set(record.get(CHANGED) or ()) | set(p.tree.changed))
    if not isinstance(record.get(TREE), str):
        return None
    differ = vcs.changed_paths(commit.repo, record[TREE], commit.tree)   # a clone holds its origin's trees too
    if differ is None:
        return None
    differ = sorted(set(differ) | set(record.get(STALE) or ()))
    return differ if all(f.endswith(SOURCES) for f in differ) else None


def copy_from(sibling: Path, record: dict, differ: list[str], p) -> bool:
    """SIBLING's build copied into P's O= (times kept: make sees it up to date), made this tree's
    as the module doc says. False when another process holds the sibling (it may be building
    there): then make builds it all."""
    with try_locked(sibling.with_name(sibling.name + ".lock")) as mine:
        if not mine:
            return False
        entries = [str(e) for e in sibling.iterdir() if e.name not in OWN]
        done = procs.run(["cp", "-a", *entries, str(p.odir)], timeout=1800)
        if done.returncode != 0:
            return False
    their_src, our_src = record[SRC], str(p.tree.src)
    # the O= path absolute, then as tools/ also writes it: relative to the tree (../../../out/E/C)
    rewrites = [(str(sibling).encode(), str(p.odir).encode()),
                (f"out/{sibling.parent.name}/{sibling.name}/".encode(), f"out/{p.odir.parent.name}/{p.odir.name}/".encode())]
    differing: list[bytes] = []
    if their_src != our_src:
        rewrites.append((their_src.encode(), our_src.encode()))
        differing = [f"{our_src}/{rel}".encode() for rel in differ]
    stale = re.compile(b"(?:" + b"|".join(map(re.escape, differing)) + rb")(?=[\s\\:)]|$)") if differing else None
    for path in _saved_commands(p.odir):
        data = path.read_bytes()
        new = data
        for old, to in rewrites:
            new = new.replace(old, to)
        if stale is not None and stale.search(new):
            _target(path).unlink(missing_ok=True)   # make builds it again, and links it
        if new != data:
            was = path.stat()
            path.write_bytes(new)
            os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
    if p.tree.commit is not None:   # every source file was written at checkout: newer than any target
        _touch_all(p.odir)
    return True


def _touch_all(odir: Path) -> None:
    """Every file under ODIR given the time now (in one order: none newer than another)."""
    now = None
    for dirpath, _, files in os.walk(odir):
        for name in files:
            path = os.path.join(dirpath, name)
            if now is None:
                os.utime(path, follow_symlinks=False)
                now = os.lstat(path).st_mtime_ns
            os.utime(path, ns=(now, now), follow_symlinks=False)


def _saved_commands(odir: Path):
    """Kbuild's `.T.cmd` (command line and dependencies of target T) and tools/' `.T.d`."""
    for dirpath, _, files in os.walk(odir):
        for name in files:
            if name.startswith(".") and (name.endswith(".cmd") or name.endswith(".d")):
                yield Path(dirpath) / name


def _target(saved: Path) -> Path:
    """`.bcd.o.cmd` -> bcd.o; `.check.o.d` -> check.o."""
    name = saved.name[1:]
    return saved.with_name(name[:-4] if name.endswith(".cmd") else name[:-2])
