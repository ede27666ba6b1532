"""Exports: a commit's tree as a directory flagbench owns (vcs.export), its files hard links
into one store of blobs, one read-only file per blob and mode (a file no commit changed takes
its space once, however many commits are exported), read with one `git cat-file --batch`.

Not narrowed by the user's sparse-checkout settings (nothing here reads them); a submodule's
files come from its own repository; a tree git would convert on checkout (attributes, eol,
filters such as LFS) is checked out by git itself, with a private index. A temporary a killed
export left is removed by the next export of the same tree (under its lock: unused then).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

from flagbench import procs
from flagbench.cache import locked
from flagbench.errors import UserError
from flagbench.vcs import EXPORT_VERSION, MARKER, Commit, _env, _git, _git_dir, _read_tree, holds


def _sweep_temporaries(dest: Path) -> None:
    """DEST.tmp-PID directories and their indexes that a killed export left (under DEST's lock:
    nobody else is making DEST now, so none of them is in use)."""
    for entry in dest.parent.glob(f"{dest.name}.tmp-*"):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def export(commit: Commit, dest: Path, store: Path | None = None) -> Path:
    """DEST := the commit's tree, made once (under a lock, built beside and renamed into place).
    Files are hard links to STORE (default: DEST's parent's `.blobs`), one read-only file per
    blob and mode, so a file that did not change between commits takes its space once."""
    dest = Path(dest)
    if holds(dest, EXPORT_VERSION) == commit.tree:
        return dest
    store = Path(store) if store is not None else dest.parent / ".blobs"
    with locked(dest.with_name(dest.name + ".lock")):
        if holds(dest, EXPORT_VERSION) == commit.tree:
            return dest
        _sweep_temporaries(dest)
        tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True)
        try:
            _fill(commit.repo, commit.tree, tmp, store, f"{commit.ref} ({commit.short})")
            (tmp / MARKER).write_text(json.dumps({"tree": commit.tree, "commit": commit.sha, "v": EXPORT_VERSION}))
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
        finally:
            _sweep_temporaries(dest)
    return dest


def _fill(repo: Path, tree: str, dest: Path, store: Path, what: str) -> None:
    """DEST (empty) := TREE of REPO: blobs from the store (read from git once), submodules from
    their own repositories. A tree git would convert on checkout (.gitattributes, autocrlf: eol,
    filters such as LFS) is checked out by git itself instead, with a private index."""
    done = _git(repo, "ls-tree", "-r", "-z", "--full-tree", tree, timeout=600)
    if done.failure:
        raise UserError(f"cannot list {what} of {repo}: {done.stderr.strip()[:200]}")
    entries = []
    for item in filter(None, done.stdout.split("\0")):
        meta, path = item.split("\t", 1)
        mode, kind, sha = meta.split()
        entries.append((mode, kind, sha, path))
    if _converts(repo, entries):
        index = dest.with_name(dest.name + ".index")
        _read_tree(repo, tree, dest, index, what)
        index.unlink(missing_ok=True)
    else:
        blobs = [(m, sha, p) for m, k, sha, p in entries if k == "blob"]
        _store_blobs(repo, {sha for m, sha, p in blobs if not _stored(store, sha, m).exists()}, blobs, store)
        for mode, sha, path in blobs:
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            source = _stored(store, sha, mode)
            if mode == "120000":
                os.symlink(source.read_bytes(), target)
                continue
            try:
                os.link(source, target)
            except OSError:   # another file system, or the blob's link count at its limit
                shutil.copy2(source, target)
    for mode, kind, sha, path in entries:
        if kind == "commit":
            _fill_submodule(repo, sha, path, dest / path, store, what)


def _converts(repo: Path, entries) -> bool:
    """True when git would not check the blobs out as they are: attributes in the tree or the
    repository, or core.autocrlf (eol conversion, filters such as git-lfs, ident)."""
    if any(p == ".gitattributes" or p.endswith("/.gitattributes") for _, _, _, p in entries):
        return True
    info = _git_dir(repo) / "info" / "attributes"
    if info.is_file() and info.stat().st_size:
        return True
    crlf = _git(repo, "config", "--get", "core.autocrlf").stdout.strip().lower()
    attributes = _git(repo, "config", "--get", "core.attributesFile").stdout.strip()
    default = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git" / "attributes"
    return crlf in ("true", "input") or bool(attributes) or default.is_file()


def _stored(store: Path, sha: str, mode: str) -> Path:
    return store / sha[:2] / (sha[2:] + (".x" if mode == "100755" else ""))


def _store_blobs(repo: Path, missing: set[str], blobs, store: Path) -> None:
    """The MISSING blobs read with one `git cat-file --batch` and written into the store, each
    under a temporary name and renamed into place (a killed run leaves only temporaries, which
    the next run removes: their pid is dead)."""
    if not missing:
        return
    tmpdir = store / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    procs.sweep(tmpdir, "blob")
    modes: dict[str, set[str]] = {}
    for mode, sha, _ in blobs:
        if sha in missing:
            modes.setdefault(sha, set()).add(mode)
    env = _env(GIT_DIR=str(_git_dir(repo)))
    try:   # procs: it dies with flagbench, whatever ends it
        proc = procs.start(["git", "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env)
    except FileNotFoundError:
        raise UserError("git is not installed: apt-get install git") from None
    with proc:
        feeder = threading.Thread(target=_feed, args=(proc.popen.stdin, [f"{sha}\n".encode() for sha in modes]),
                                  daemon=True)
        feeder.start()
        try:
            for _ in modes:
                _store_one(proc.popen.stdout, modes, tmpdir, store, repo)
        finally:
            proc.stop()
            feeder.join()
            proc.popen.stdout.close()


def _feed(pipe, lines: list[bytes]) -> None:
    try:
        for line in lines:
            pipe.write(line)
        pipe.close()
    except OSError:   # cat-file ended first (killed, or an error read on our side)
        pass


def _store_one(stream, modes: dict[str, set[str]], tmpdir: Path, store: Path, repo: Path) -> None:
    header = stream.readline().decode().split()
    if len(header) != 3 or header[0] not in modes:
        raise UserError(f"git cat-file in {repo}: {' '.join(header) or 'no answer'}")
    sha, size = header[0], int(header[2])
    tmp = tmpdir / f"blob-{os.getpid()}-{sha}"
    with open(tmp, "wb") as out:
        left = size
        while left:
            chunk = stream.read(min(left, 1 << 20))
            if not chunk:
                raise UserError(f"git cat-file in {repo}: {sha} cut short")
            out.write(chunk)
            left -= len(chunk)
    stream.read(1)
    for mode in modes[sha]:
        final = _stored(store, sha, mode)
        final.parent.mkdir(parents=True, exist_ok=True)
        part = tmp.with_name(f"{tmp.name}-{mode}")
        shutil.copyfile(tmp, part)
        os.chmod(part, 0o555 if mode == "100755" else 0o444)   # shared by every export: nobody writes it
        os.replace(part, final)
    tmp.unlink()


def _fill_submodule(repo: Path, sha: str, path: str, dest: Path, store: Path, what: str) -> None:
    """A submodule at PATH, its commit SHA read from its own repository: the user's checkout of
    it, or the superproject's .git/modules; one that is not here is a clear error."""
    top = _git_dir(repo)
    for candidate in (repo / path, top / "modules" / path):
        if not candidate.exists():
            continue
        done = _git(candidate, "rev-parse", "--absolute-git-dir")
        if done.failure or Path(done.stdout.strip()) == top:
            continue   # an empty directory of the superproject: not the submodule
        sub = Path(done.stdout.strip())
        tree = _git(sub, "rev-parse", "--verify", "--quiet", f"{sha}^{{tree}}")
        if not tree.failure and tree.stdout.strip():
            dest.mkdir(parents=True, exist_ok=True)
            _fill(sub, tree.stdout.strip(), dest, store, f"submodule {path} at {sha[:12]}")
            return
    raise UserError(f"{what} has the submodule {path} at {sha[:12]}, which {repo} does not have: "
                    f"git submodule update --init {path}")
