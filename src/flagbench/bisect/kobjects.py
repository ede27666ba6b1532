"""Object mixes of a kernel: A's Kbuild `O=` directory copied, some of its objects replaced
by B's, relinked by Kbuild itself, then booted and counted like any variant.

The candidates are the objects vmlinux is linked from (the members of vmlinux.a and of the
lib.a archives, read with `ar t`) whose bytes differ between A and B. A mix directory is
a copy of A's: objects hard-linked (make only relinks, checked below), everything else
copied (Kbuild rewrites `.cmd` files in place, which through a link would write into A).
The chosen objects are B's bytes under a fresh mtime, so make rebuilds the archives that
hold them and relinks vmlinux. Their `.cmd` files stay A's: Kbuild recompiles an object
whose recorded command differs from the one it would run now, and in A's directory that is
A's command (B's records B's flags, or B's tree for a patch or a commit: copying it made
make recompile the object from A's source, undoing the swap).

Each mix is checked after its make: no object compiled, no linked (A's) object rewritten,
every candidate equal to B's copy when chosen and to A's otherwise.
"""
from __future__ import annotations

import filecmp
import hashlib
import os
import re
import shutil
import time
from pathlib import Path
from typing import Sequence

from flagbench import procs
from flagbench.errors import UserError
from flagbench.kbuild.build import PINNED_ENV, KernelBuild

RELINK_TIMEOUT = 1800
_COMPILED = re.compile(r"^  (CC|AS)\s+(\S+\.o)$", re.M)
# Link-time objects: made anew by every link (kallsyms passes, exports), never candidates.
_LINK_TIME = re.compile(r"(^|/)\.tmp_|(^|/)\.vmlinux|^vmlinux\.o$")


def linked_objects(odir: Path) -> list[str]:
    """Objects (relative paths) vmlinux is linked from: members of vmlinux.a and the lib.a archives."""
    archives = [odir / "vmlinux.a", *sorted(odir.glob("lib/lib.a")), *sorted(odir.glob("arch/*/lib/lib.a"))]
    out: list[str] = []
    for archive in archives:
        if not archive.is_file():
            continue
        done = procs.run(["ar", "t", str(archive)], timeout=60)
        if done.returncode:
            raise UserError(f"ar t {archive}: {done.stderr.strip()[:200]}")
        for line in filter(None, map(str.strip, done.stdout.splitlines())):
            # a thin archive names its members relative to itself (or from the top, with P)
            path = next((p for p in (archive.parent / line, odir / line) if p.is_file()), archive.parent / line)
            rel = os.path.relpath(path, odir)
            if rel.endswith(".o") and not _LINK_TIME.search(rel) and rel not in out:
                out.append(rel)
    if not out:
        raise UserError(_no_archive(odir))
    return out


def _no_archive(odir: Path) -> str:
    """Why ODIR has no vmlinux.a to read objects from, as far as the directory tells."""
    from flagbench.kbuild.source import makefile_version
    if (odir / "vmlinux.a").is_file():
        return f"{odir}: vmlinux.a lists no objects"
    if (odir / "built-in.a").is_file():
        return (f"{odir}: built-in.a and no vmlinux.a: Linux before 5.19 links vmlinux otherwise, "
                "and object bisection reads vmlinux.a")
    if (odir / "vmlinux").is_file() and not any(odir.glob("*/*.o")):
        return f"{odir}: a kept build (vmlinux, System.map, .config) without its objects: nothing to relink"
    version = makefile_version(odir / "source") if (odir / "source").exists() else ""
    return f"{odir}: no vmlinux.a (a Kbuild build of Linux 5.19 or later){f', Linux {version}' if version else ''}"


def differing(a: KernelBuild, b: KernelBuild) -> tuple[list[str], int]:
    """(objects of vmlinux whose bytes differ between A and B, how many objects vmlinux has)."""
    names = linked_objects(a.dir)
    differ = []
    for rel in names:
        pa, pb = a.dir / rel, b.dir / rel
        if not pb.is_file():
            raise UserError(f"{b.cell.variant.name} has no {rel}: object bisection needs two builds of one "
                            "configuration (the same objects)")
        if not filecmp.cmp(pa, pb, shallow=False):
            differ.append(rel)
    return sorted(differ), len(names)


class KernelMixer:
    """Relinks mixes of A and B in copies of A's O= directory under `workdir`."""

    def __init__(self, a: KernelBuild, b: KernelBuild, candidates: Sequence[str], workdir: Path, jobs: int = 2,
                 say=None):
        if not (a.ok and b.ok):
            raise UserError("object bisection needs both kernels built: " + (a.error or b.error or "a build failed"))
        self.a, self.b, self.candidates, self.workdir, self.jobs = a, b, list(candidates), workdir, jobs
        self.relinks, self.seconds = 0, 0.0
        self.say = say or (lambda text: None)

    def vmlinux(self, chosen: frozenset[str]) -> Path:
        """A's vmlinux with B's copies of the chosen objects (A's own for none)."""
        if not chosen:
            return self.a.vmlinux
        tag = hashlib.sha256("\0".join(sorted(chosen)).encode()).hexdigest()[:12]
        mix = self.workdir / f"mix-{tag}"
        if (mix / "vmlinux").is_file():
            return mix / "vmlinux"
        start = time.monotonic()
        self.say(f"relinking A with {len(chosen)} of B's objects in {mix.name}")
        if mix.exists():
            shutil.rmtree(mix)
        linked = copy_build_dir(self.a.dir, mix)
        for rel in chosen:
            dest = mix / rel
            dest.unlink()
            shutil.copyfile(self.b.dir / rel, dest)   # a new inode, mtime now: its archive is rebuilt
        before = {rel: (mix / rel).stat().st_mtime_ns for rel in linked if rel not in chosen}
        self._make(mix)
        self._check(mix, chosen, before)
        self.relinks += 1
        self.seconds += time.monotonic() - start
        return mix / "vmlinux"

    def system_map(self, vmlinux: Path) -> Path:
        return vmlinux.with_name("System.map")

    def _make(self, mix: Path) -> None:
        argv = [f"O={mix}" if a.startswith("O=") else a for a in self.a.make]
        env = {**os.environ, **PINNED_ENV, "KBUILD_BUILD_HOST": self.a.identity}
        env.pop("KBUILD_OUTPUT", None)
        done = procs.run([*argv, f"-j{self.jobs}", "vmlinux"], timeout=RELINK_TIMEOUT, env=env)
        (mix / "flagbench-relink.log").write_text(done.stdout + done.stderr)
        if done.failure or done.returncode:
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            raise UserError(f"relinking {mix.name} failed ({done.failure or done.returncode}): {tail}")
        compiled = _COMPILED.findall(done.stdout)
        if compiled:
            raise UserError(f"relinking {mix.name}: make compiled {len(compiled)} objects "
                            f"({', '.join(p for _, p in compiled[:3])}): the mix is not A's objects and B's")

    def _check(self, mix: Path, chosen: frozenset[str], before: dict[str, int]) -> None:
        """Only the chosen objects differ from A: nothing linked from A was rewritten, and every
        candidate holds B's bytes when chosen, A's otherwise."""
        rewritten = [rel for rel, mtime in before.items() if (mix / rel).stat().st_mtime_ns != mtime]
        if rewritten:
            raise UserError(f"relinking {mix.name} rewrote {rewritten[0]} (and {len(rewritten) - 1} more)")
        for rel in self.candidates:
            want = (self.b if rel in chosen else self.a).dir / rel
            if not filecmp.cmp(mix / rel, want, shallow=False):
                raise UserError(f"relinking {mix.name}: {rel} is not {'B' if rel in chosen else 'A'}'s")


def copy_build_dir(src: Path, dest: Path) -> list[str]:
    """A copy of a Kbuild O= directory: .o files hard-linked (relative paths returned), the rest
    copied with their mtimes (make decides by them), link-time leftovers left out."""
    linked = []
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        out_root = dest / rel_root
        out_root.mkdir(parents=True, exist_ok=True)
        for d in list(dirs):
            if os.path.islink(os.path.join(root, d)):
                dirs.remove(d)
                os.symlink(os.readlink(os.path.join(root, d)), out_root / d)
        for name in files:
            rel = os.path.normpath(os.path.join(rel_root, name))
            path = os.path.join(root, name)
            if _LINK_TIME.search(rel) and not rel.endswith(".cmd"):
                continue
            if os.path.islink(path):
                os.symlink(os.readlink(path), out_root / name)
            elif name.endswith(".o"):
                os.link(path, out_root / name)
                linked.append(rel)
            elif name.endswith((".cmd", ".d")):
                _copy_moved(Path(path), out_root / name, str(src), str(dest))
            else:
                shutil.copy2(path, out_root / name)
    return linked


def _copy_moved(path: Path, dest: Path, old: str, new: str) -> None:
    """A recorded command or dependency list, the O= directory's absolute path in it moved to
    the copy's (tools/objtool records absolute paths: left as A's, make rebuilt objtool, and
    every object, whose prerequisite objtool is), its mtime kept."""
    data = path.read_bytes()
    if old.encode() in data:
        dest.write_bytes(data.replace(old.encode(), new.encode()))
        st = path.stat()
        os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        shutil.copy2(path, dest)
