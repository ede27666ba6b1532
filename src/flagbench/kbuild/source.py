"""Kernel source trees: Debian's linux-source tarball unpacked once into the cache, a user's
tree used where it is, and copies with a variant's patches applied.

A source tree is never written: builds are out of tree (`make O=`). Every tree the cache
holds lives at `<cache>/kernel/trees/<key>/src` with its build directories under
`<key>/out/<experiment>/<cell>`, so the path from a build directory to its source is the
same for every tree (`../../../src`); with CCACHE_BASEDIR above both, ccache sees the same
relative paths and a patched copy hits on every file the patch did not touch.

A ref variant (a commit of a `source = PATH` git repository) builds from a checkout flagbench
owns, `<cache>/kernel/trees/git-<slot>/src`, one per O= directory: `checkout` walks it to the
cell's commit with a private index (vcs.walk), rewriting only the files that differ, so one
`O=` directory is built incrementally commit by commit, as ktest.pl walks a series. Its
identity is the commit's tree sha: two refs with one tree are one build.

A patched copy is a hard-link farm (`cp -al`) of the tree: before a patch is applied, each
file it names is replaced in the copy by a private copy of its own, so `patch` can never
write through a shared inode into the original; `apply_patches` checks that afterwards.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from flagbench import procs, vcs
from flagbench.cache import locked
from flagbench.errors import UserError
from flagbench.kernelspec import DEBIAN_SOURCES

_MAKEFILE_VERSION = re.compile(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)[ \t]*=[ \t]*(\S*)", re.M)
_PATCH_PATH = re.compile(r"^(?:\+\+\+|---) (\S+)|^(?:rename|copy) (?:from|to) (\S+)", re.M)
MARKER = "flagbench-tree.json"


@dataclass(frozen=True)
class Tree:
    src: Path                 # what `make -C` runs in
    home: Path                # the cache directory of this tree: build dirs go under home/out
    version: str              # "6.1.192" from the top Makefile
    label: str                # "debian:6.1 (linux-source-6.1 6.1.192-2)" or the path
    identity: str | None      # changes whenever the content may have; None: unknown (plain user tree)
    commit: vcs.Commit | None = None   # a git tree: src is walked to this commit by checkout()
    base_identity: str | None = None   # the tree it is a patched copy of (its own for a base tree)
    changed: tuple[str, ...] = ()      # the files its patches touch, relative to src

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = (self.version.split(".") + ["0"])[:2]
        return int(major), int(minor)


def trees_dir() -> Path:
    from flagbench.build import cache_dir
    return cache_dir() / "kernel" / "trees"


def makefile_version(src: Path) -> str:
    try:
        text = (src / "Makefile").read_text(errors="replace")[:2000]
    except OSError:
        return "?"
    v = dict(_MAKEFILE_VERSION.findall(text))
    return ".".join(x for x in (v.get("VERSION"), v.get("PATCHLEVEL"), v.get("SUBLEVEL")) if x) + v.get("EXTRAVERSION", "")


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _read_marker(home: Path) -> dict | None:
    try:
        return json.loads((home / MARKER).read_text())
    except (OSError, ValueError):
        return None


def _write_marker(home: Path, data: dict) -> None:
    tmp = home / f".{MARKER}.{os.getpid()}"
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, home / MARKER)


def base_tree(source: str, say=None) -> Tree:
    """The tree a [kernel] source names, unpacked into the cache first when it is Debian's."""
    if source in DEBIAN_SOURCES:
        return _debian_tree(source, say)
    src = Path(source)
    home = trees_dir() / f"path-{_sha(str(src))[:12]}"
    return Tree(src, home, makefile_version(src), str(src), _git_identity(src))


def _debian_tree(source: str, say=None) -> Tree:
    tarball = DEBIAN_SOURCES[source]
    package = tarball.name.removesuffix(".tar.xz")
    try:
        st = tarball.stat()
    except OSError:
        raise UserError(f"{source}: {tarball} is missing: apt-get install {package}") from None
    identity = _sha(f"{tarball}\0{st.st_size}\0{st.st_mtime_ns}")
    home = trees_dir() / source.replace(":", "-")
    marker = _read_marker(home)
    if marker is None or marker.get("identity") != identity:
        with locked(home.with_name(home.name + ".lock")):
            marker = _read_marker(home)
            if marker is None or marker.get("identity") != identity:
                marker = _unpack(tarball, package, home, identity, say)
    return Tree(home / "src", home, marker["version"],
                f"{source} (Debian {package} {marker['package_version']})", identity, base_identity=identity)


def _unpack(tarball: Path, package: str, home: Path, identity: str, say) -> dict:
    if say:
        say(f"unpacking {tarball.name} into {home} (once)")
    home.mkdir(parents=True, exist_ok=True)
    (home / MARKER).unlink(missing_ok=True)
    for stale in home.glob("unpack-*"):   # a killed unpack's (the caller holds the tree's lock)
        shutil.rmtree(stale, ignore_errors=True)
    tmp = home / f"unpack-{os.getpid()}"
    tmp.mkdir()
    try:
        done = procs.run(["tar", "-xJf", str(tarball), "-C", str(tmp)], timeout=1800)
    except BaseException:   # interrupted: tar is dead, its half-written tree goes too
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if done.failure:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot unpack {tarball}: {done.stderr.strip().splitlines()[-1:]}")
    top = next(tmp.iterdir())
    old = home / "src"
    if old.exists():   # a different tarball version: its build dirs go with it
        shutil.rmtree(old)
        shutil.rmtree(home / "out", ignore_errors=True)
    os.replace(top, old)
    tmp.rmdir()
    pkg = procs.run(["dpkg-query", "-W", "-f", "${Version}", package], timeout=60)
    marker = {"identity": identity, "version": makefile_version(old),
              "package_version": pkg.stdout.strip() or "?"}
    _write_marker(home, marker)
    return marker


def git_tree(commit: vcs.Commit, slot: str) -> Tree:
    """The tree of a commit as a checkout flagbench owns, one per SLOT (an O= directory's name)
    and repository (a clone flagbench made of one counts as that one: vcs.origin): not written
    until checkout(tree) walks it there."""
    home = trees_dir() / f"git-{_sha(str(vcs.origin(commit.repo)) + chr(0) + slot)[:12]}"
    makefile = vcs.show(commit, "Makefile") or b""
    v = dict(_MAKEFILE_VERSION.findall(makefile[:2000].decode(errors="replace")))
    version = ".".join(x for x in (v.get("VERSION"), v.get("PATCHLEVEL"), v.get("SUBLEVEL")) if x) + v.get("EXTRAVERSION", "")
    return Tree(home / "src", home, version or "?", f"{commit.repo} @ {commit.short} {commit.subject}",
                commit.tree, commit)


def checkout(tree: Tree, say=None) -> None:
    """A git tree's checkout moved to its commit (only changed files rewritten); nothing for
    other trees. The caller holds the lock of the O= directory the checkout belongs to."""
    if tree.commit is None or vcs.holds(tree.src) == tree.commit.tree:
        return
    if say:
        say(f"checking out {tree.commit.short} ({tree.commit.subject[:50]}) into {tree.src}")
    vcs.walk(tree.commit, tree.src)


def _git_identity(src: Path) -> str | None:
    """HEAD plus the uncommitted changes of a git tree; None for a plain tree (then make itself
    decides what is out of date)."""
    if not (src / ".git").exists():
        return None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}   # status must not refresh (rewrite) the user's index
    head = procs.run(["git", "-C", str(src), "rev-parse", "HEAD"], timeout=120, env=env)
    diff = procs.run(["git", "-C", str(src), "diff", "HEAD", "--binary"], timeout=600, env=env)
    status = procs.run(["git", "-C", str(src), "status", "--porcelain", "-z"], timeout=600, env=env)
    if head.failure or diff.failure or status.failure:
        return None
    return _sha("\0".join((head.stdout, diff.stdout, status.stdout)))


def patched_tree(base: Tree, patches: tuple[Path, ...], say=None, fuzz: int = 0) -> Tree:
    """BASE with PATCHES applied, as a hard-link farm in the cache (made once per content).
    FUZZ: the context lines a hunk may ignore ([kernel] fuzz); a hunk that needs more is refused."""
    if not patches:
        return base
    h = hashlib.sha256((base.identity or f"plain:{base.src}").encode())   # plain trees: copied anew each time
    for p in patches:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    if fuzz:
        h.update(f"fuzz={fuzz}".encode())
    key = h.hexdigest()[:12]
    home = base.home.with_name(f"{base.home.name}+{key}")
    label = f"{base.label} + {', '.join(p.name for p in patches)}"
    identity = h.hexdigest() if base.identity else None
    with locked(home.with_name(home.name + ".lock")):
        marker = _read_marker(home) or {}
        if identity is not None and marker.get("identity") == identity and marker.get("fuzz") != fuzz:
            # made before fuzz was checked: checked now on copies of the files the patches touch
            # (the tree itself may be in use by a build: never remade under it)
            check_fuzz(base.src, patches, fuzz)
            _write_marker(home, {**marker, "fuzz": fuzz})
            marker["fuzz"] = fuzz
        if identity is None or marker.get("identity") != identity:
            if say:
                say(f"applying {', '.join(p.name for p in patches)} to a copy of {base.label}")
            (home / MARKER).unlink(missing_ok=True)
            shutil.rmtree(home / "src", ignore_errors=True)
            apply_patches(base.src, home / "src", patches, fuzz)
            _write_marker(home, {"identity": identity, "version": base.version, "base": str(base.src),
                                 "patches": [str(p) for p in patches], "fuzz": fuzz})
    changed = tuple(sorted({path for p in patches for path in patch_paths(p)}))
    return Tree(home / "src", home, makefile_version(home / "src"), label, identity,
                base_identity=base.identity, changed=changed)


DETECT_FUZZ = 2
# patch(1): "patching file lib/string.c" then "Hunk #1 succeeded at 115 with fuzz 1 (offset 10 lines)."
_PATCHING = re.compile(r"^patching file (.+?)\s*$")
_FUZZED = re.compile(r"^Hunk #(\d+) succeeded at (\d+) with fuzz (\d+)(?: \(offset (-?\d+) lines?\))?")


def fuzzed_hunks(output: str) -> list[tuple[str, int, int, int, int]]:
    """(file, hunk, fuzz, line, offset) of every hunk patch(1) applied with fuzz.

    >>> fuzzed_hunks("patching file lib/string.c\\nHunk #1 succeeded at 115 with fuzz 1 (offset 10 lines).\\n")
    [('lib/string.c', 1, 1, 115, 10)]
    """
    out, current = [], "?"
    for line in output.splitlines():
        m = _PATCHING.match(line)
        if m:
            current = m.group(1).strip("'")
            continue
        m = _FUZZED.match(line)
        if m:
            out.append((current, int(m.group(1)), int(m.group(3)), int(m.group(2)), int(m.group(4) or 0)))
    return out


def patch_paths(patch: Path, strip: int = 1) -> list[str]:
    """The tree-relative paths a unified or git diff names (after -p1), /dev/null left out."""
    out = []
    for a, b in _PATCH_PATH.findall(patch.read_text(errors="replace")):
        path = a or b
        if path == "/dev/null":
            continue
        parts = path.split("/")[strip if a else 0:]
        if parts:
            out.append("/".join(parts))
    return sorted(set(out))


def apply_patches(original: Path, copy: Path, patches: tuple[Path, ...], fuzz: int = 0) -> None:
    """COPY := ORIGINAL (hard links, .git left out) with PATCHES applied; ORIGINAL is never written.
    A hunk that applies only by ignoring more than FUZZ context lines is refused, named: a fuzzed
    hunk can land in the wrong function, and the kernel measured would not be the one meant."""
    tmp = copy.with_name(f"{copy.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    entries = [str(e) for e in original.iterdir() if e.name != ".git"]
    done = procs.run(["cp", "-al", *entries, str(tmp)], timeout=1800)
    if done.failure:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot copy {original} for patching: {done.stderr.strip()}")
    touched = []
    for patch in patches:
        for rel in patch_paths(patch):
            f = tmp / rel
            if f.is_file() and not f.is_symlink():
                private = f.with_name(f".{f.name}.flagbench-copy")
                shutil.copy2(f, private)        # a new inode with the same bytes and mtime
                os.replace(private, f)
                touched.append(rel)
        try:
            _apply(patch, tmp, original, fuzz)
        except UserError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    for rel in touched:   # the guarantee, checked: no patched file shares an inode with the original
        a, b = original / rel, tmp / rel
        if a.exists() and b.exists() and os.stat(a).st_ino == os.stat(b).st_ino:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"internal: patched {rel} still shares its inode with {original}")
    os.replace(tmp, copy)


def _apply(patch: Path, tree: Path, original: Path, fuzz: int) -> None:
    """patch -p1 in TREE; a UserError when it does not apply, or applies only with more fuzz than FUZZ."""
    # patch's own default fuzz (2) or more, so a fuzzed hunk is found and named, not just failed
    done = procs.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
                      f"--fuzz={max(fuzz, DETECT_FUZZ)}", "-d", str(tree), "-i", str(patch)], timeout=600)
    if done.failure:
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
        raise UserError(f"patch {patch} does not apply to {original}: {' / '.join(lines[-3:])}")
    fuzzed = [h for h in fuzzed_hunks(done.stdout) if h[2] > fuzz]
    if fuzzed:
        worst = max(h[2] for h in fuzzed)
        where = "; ".join(f"hunk #{n} of {f} applies only with fuzz {z}, at line {at}"
                          + (f" (offset {o:+d} lines)" if o else "") for f, n, z, at, o in fuzzed)
        raise UserError(f"patch {patch.name}: {where}: a fuzzed hunk can land in the wrong function; "
                        f"refresh the patch, or allow it with fuzz = {worst} in [kernel]")


def check_fuzz(original: Path, patches: tuple[Path, ...], fuzz: int) -> None:
    """The fuzz check of apply_patches, on copies of only the files PATCHES touch."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="flagbench-fuzz-") as tmp:
        for patch in patches:
            for rel in patch_paths(patch):
                src, dst = original / rel, Path(tmp) / rel
                if src.is_file() and not dst.exists():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dst)
            _apply(patch, Path(tmp), original, fuzz)
