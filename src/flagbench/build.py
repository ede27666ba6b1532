"""Variant builds: every cell (variant x target x compiler) of an experiment compiled
to objects in its own directory, in parallel, cached by content.

An object's cache key is the sha256 of its source (and local headers), the full
flags, the compiler argv and the version lines of the compiler and assembler, so a
second build of an unchanged experiment runs no compiler at all: versions and flag
probes are cached on disk as well. Everything is written to a temporary name and
renamed into place, so two processes can build the same thing at once.

Cache: the one cache root of cache.py (./.cache/flagbench, or FLAGBENCH_CACHE).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from flagbench import ccache, procs
from flagbench.cache import CACHE_ENV, cache_dir  # noqa: F401 - re-exported: build.cache_dir is the common import
from flagbench.elf.constants import ELF_MAGIC
from flagbench.errors import DiskFull, UserError, disk_full
from flagbench.spec import Cell, Experiment, files_digest
from flagbench.toolchains import Target, get_target, install_hint, is_clang, tool_version

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
# Quiet under -Wall -Wextra -Wpedantic -Wmissing-prototypes -Weverything: the probe
# must fail only for the flags.
PROBE_SOURCE = "int fb_probe(void);\nint fb_probe(void) { return 0; }\n"
COMPILE_TIMEOUT = 600
_ERROR_LINE = re.compile(r"^.*?(?:fatal )?error: .*$", re.M)

Progress = Callable[[str], None] | None


@dataclass(frozen=True)
class Build:
    cell: Cell
    dir: Path                         # this cell's own directory: the objects, build.json
    objects: tuple[Path, ...]
    cflags: tuple[str, ...]           # the full flags used, after the compiler argv
    tools: dict[str, str]             # tool -> its version line
    cached: bool                      # True: no compiler ran for this cell
    ccache: "ccache.Stats | None" = None   # with a ccache remote: what ccache did for its compiles


def archive(b: Build) -> Path:
    """The cell's objects as one static archive (what `size` compares for an object set).
    `ar S`: no symbol index, so ar need not understand the target's object format."""
    out = b.dir / "objects.a"
    if not out.exists():
        tmp = out.with_name(f".objects.a.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        done = _run(["ar", "rcS", str(tmp), *(str(o) for o in b.objects)], b.dir)
        if done.returncode:
            raise UserError(f"ar cannot archive the objects of {b.cell.key}: {_first_errors(done.stderr)}")
        os.replace(tmp, out)
    return out


_READY: set[Path] = set()


def ensure_cache() -> Path:
    """The cache directory, made and checked once per process (a UserError, not a
    traceback, when it cannot be written); temporary files a killed build left are removed."""
    path = cache_dir()
    if path in _READY:
        return path
    where = f"FLAGBENCH_CACHE={os.environ[CACHE_ENV]}" if os.environ.get(CACHE_ENV) else "the cache"
    try:
        (path / "tmp").mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path / "tmp", prefix=f"probe-{os.getpid()}-")
        probe.close()
    except OSError as e:
        raise UserError(f"{where}: cannot write {path}: {e.strerror or e} "
                        f"(set {CACHE_ENV} to a writable directory)") from None
    procs.sweep(path / "tmp", "o")
    _READY.add(path)
    return path


# -- tools ----------------------------------------------------------------------------
def compiler_for(target: str | Target, compiler: str) -> list[str]:
    """The compiler argv for a target; UserError when it cannot build it or is not installed."""
    t = get_target(target)
    try:
        argv = t.compiler_argv(compiler)
    except LookupError as e:
        raise UserError(f"{t.name}/{compiler}: {e}") from None
    if shutil.which(argv[0]) is None:
        if "/" in argv[0]:
            raise UserError(f"{argv[0]}: no such program (needed for {t.name}/{compiler})")
        raise UserError(f"{argv[0]} is not installed (needed for {t.name}/{compiler}): "
                        f"apt-get install {install_hint(argv[0])}")
    return argv


def cached_version(tool: str) -> str:
    """tool_version, remembered on disk by the executable's path, size and mtime, so a
    cached build does not even run `--version`."""
    path = shutil.which(tool)
    if path is None:
        return ""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = _sha(f"{real}\0{st.st_size}\0{st.st_mtime_ns}")
    file = cache_dir() / "versions" / key
    try:
        return file.read_text()
    except OSError:
        pass
    version = tool_version(tool)
    _write_atomic(file, version.encode())
    return version


def tool_versions(t: Target, compiler: str, argv: Sequence[str]) -> dict[str, str]:
    tools = {argv[0]: cached_version(argv[0])}
    assembler = t.assembler(compiler)
    if assembler and shutil.which(assembler):
        tools[assembler] = cached_version(assembler)
    return tools


# -- flag probing (Kbuild's cc-option) -----------------------------------------------------
def probe(argv: Sequence[str], tools: dict[str, str], flags: Sequence[str], cwd: Path) -> str | None:
    """Compile a one-line file with these flags and -Werror: None when the compiler
    takes them, else its message. gcc accepts any -Wno-foo silently, so, like Kbuild,
    the probe asks for -Wfoo instead."""
    if not is_clang(argv[0]):
        flags = ["-W" + f[len("-Wno-"):] if f.startswith("-Wno-") else f for f in flags]
    key = _sha(json.dumps([list(argv), tools, list(flags)]))
    file = cache_dir() / "probes" / f"{key}.json"
    try:
        return json.loads(file.read_text())["message"]
    except (OSError, ValueError, KeyError):
        pass
    with tempfile.TemporaryDirectory(prefix="flagbench-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(PROBE_SOURCE)
        out = _run([*argv, *flags, "-Werror", "-c", str(src), "-o", str(Path(tmp) / "probe.o")], cwd)
        if out.returncode:
            check_disk(out.stderr, tmp)
    message = None if out.returncode == 0 else _first_errors(out.stderr)
    if out.returncode and not message:   # a compiler rejects a flag in words: this is something else
        return f"exit status {out.returncode}"
    _write_atomic(file, json.dumps({"flags": list(flags), "message": message}).encode())
    return message


def _cell_flags(exp: Experiment, cell: Cell, t: Target, pool: ThreadPoolExecutor, argv, tools,
                notes: list[str]) -> list[str]:
    """The cell's full flags: target base, experiment, [target.X], variant, the optional
    ones the compiler takes, and the defines. A rejected required flag is a UserError."""
    v = cell.variant
    required = [*t.extra_cflags(cell.compiler), *exp.cflags, *exp.target_cflags.get(cell.target, ()), *v.cflags]
    message = probe(argv, tools, required, exp.root)
    if message:
        driver = " ".join(argv)
        shown = cell.compiler if driver == cell.compiler else f"{cell.compiler} ({driver})"
        raise UserError(f"variant {v.name}: {shown} for {cell.target} rejects its flags: {message}")
    optional = [*exp.target_optional_cflags.get(cell.target, ()), *v.optional_cflags]
    verdicts = list(pool.map(lambda f: probe(argv, tools, [*required, f], exp.root), optional))
    kept = []
    for flag, message in zip(optional, verdicts):
        if message:
            notes.append(f"variant {v.name}: {cell.compiler} for {cell.target} rejects optional {flag}, "
                         f"dropped ({message})")
        else:
            kept.append(flag)
    return [*required, *kept, *v.define_flags()]


# -- compiling ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Job:
    source: Path
    argv: tuple[str, ...]
    flags: tuple[str, ...]
    tools: tuple[tuple[str, str], ...]
    cwd: Path
    what: str                          # for messages: "variant/target/compiler"
    via: tuple[tuple[str, str], ...] = ()   # with a ccache remote: ccache's environment (not in the key)

    @property
    def shown(self) -> str:
        """The source as the compiler is given it: relative to cwd where it can be."""
        src = self.source
        return os.path.relpath(src, self.cwd) if src.is_relative_to(self.cwd) else str(src)

    @property
    def key(self) -> str:
        h = hashlib.sha256()
        files_digest(h, [self.source])
        h.update(json.dumps([self.argv, self.flags, self.tools, self.shown]).encode())
        return h.hexdigest()

    def object_path(self) -> Path:
        key = self.key
        return cache_dir() / "objects" / key[:2] / f"{key}.o"


def _compile(job: _Job, progress: Progress) -> tuple[Path, bool]:
    """The job's object, from the cache or compiled now: (path, was it cached)."""
    obj = job.object_path()
    if obj.is_file():
        return obj, True
    obj.parent.mkdir(parents=True, exist_ok=True)
    # under tmp/, named by our pid: what a kill -9 leaves there is swept by the next build
    fd, tmp = tempfile.mkstemp(prefix=f"o-{os.getpid()}-", suffix=".o", dir=ensure_cache() / "tmp")
    os.close(fd)
    src = job.shown
    if progress:
        progress(f"cc {job.what} {src}")
    # through ccache only with a remote: flagbench's own cache already keys objects by content
    argv = ["ccache", *job.argv] if job.via else list(job.argv)
    try:
        out = _run([*argv, *job.flags, "-c", src, "-o", tmp], job.cwd, dict(job.via))
        if out.returncode != 0:
            check_disk(out.stderr, Path(tmp).parent)
            raise UserError(f"{src} does not compile for {job.what}: "
                            f"{_first_errors(out.stderr) or f'exit status {out.returncode}'}")
        with open(tmp, "rb") as f:
            if f.read(4) != ELF_MAGIC:
                raise UserError(f"{src} for {job.what}: {job.argv[0]} exited 0 but wrote no ELF object "
                                f"(is {job.argv[0]} a compiler?)")
        os.replace(tmp, obj)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return obj, False


def _compile_all(jobs: list[_Job], workers: int, progress: Progress) -> list[tuple[Path, bool]]:
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_compile, j, progress) for j in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def build(exp: Experiment, cells: Iterable[Cell] | None = None, *, jobs: int = 2,
          progress: Progress = None, notes: list[str] | None = None,
          skip_missing: bool = False) -> list[Build]:
    """Compile every cell's sources; one Build per cell, in the order of the cells.

    A compiler that is not installed is a UserError with the package to install, or
    with skip_missing=True a note (in `notes`) and its cells left out.
    """
    cells = list(exp.cells() if cells is None else cells)
    notes = [] if notes is None else notes
    ensure_cache()
    argvs, tools = {}, {}
    for pair in dict.fromkeys((c.target, c.compiler) for c in cells):
        arch = get_target(pair[0])
        try:
            argvs[pair] = compiler_for(arch, pair[1])
        except UserError as e:
            if not skip_missing:
                raise
            notes.append(f"skipped {pair[0]}/{pair[1]}: {e}")
            continue
        tools[pair] = tool_versions(arch, pair[1], argvs[pair])
    cells = [c for c in cells if (c.target, c.compiler) in argvs]
    remote = ccache.remote(exp.cache_remote)
    logs = _stats_logs(cells, exp.root, remote) if remote else {}

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        flags = {}
        for c in cells:   # probes of one cell in parallel; identical sets hit the cache
            pair = (c.target, c.compiler)
            flags[c.key] = _cell_flags(exp, c, c.arch, pool, argvs[pair], tools[pair], notes)

    work = []
    for c in cells:
        pair = (c.target, c.compiler)
        for src in c.variant.sources or exp.sources:
            work.append(_Job(src, tuple(argvs[pair]), tuple(flags[c.key]), tuple(sorted(tools[pair].items())),
                             exp.root, c.key, logs.get(c.key, ())))
    if progress:
        progress(f"{len(cells)} cells, {len(work)} objects, {max(1, jobs)} workers")
    try:
        results = iter(_compile_all(work, jobs, progress))
        stats = {key: ccache.read_stats(Path(dict(via)["CCACHE_STATSLOG"]), remote) for key, via in logs.items()}
    finally:
        for via in logs.values():
            Path(dict(via)["CCACHE_STATSLOG"]).unlink(missing_ok=True)

    builds = []
    for c in cells:
        pair = (c.target, c.compiler)
        sources = c.variant.sources or exp.sources
        done = [next(results) for _ in sources]
        meta = {"cell": c.key, "experiment": exp.name, "compiler": argvs[pair], "cflags": flags[c.key],
                "tools": tools[pair], "sources": [str(s) for s in sources]}
        cell_dir = _cell_dir(exp.name, c, [(s.stem + ".o", obj) for s, (obj, _) in zip(sources, done)], meta)
        builds.append(Build(cell=c, dir=cell_dir, objects=tuple(cell_dir / (s.stem + ".o") for s in sources),
                            cflags=tuple(flags[c.key]), tools=dict(tools[pair]),
                            cached=all(hit for _, hit in done), ccache=stats.get(c.key)))
    return builds


def _stats_logs(cells: list[Cell], root: Path, remote: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Per cell, ccache's environment with a stats log of its own (under the cache's tmp/,
    swept if a kill leaves it). Paths are hashed relative to the experiment, and the working
    directory not at all, so another machine's checkout at another path hits too."""
    if shutil.which("ccache") is None:
        raise UserError("a ccache remote is configured but ccache is not installed: apt-get install ccache")
    out = {}
    for c in cells:
        fd, log = tempfile.mkstemp(prefix=f"o-{os.getpid()}-", suffix=".ccache-log", dir=ensure_cache() / "tmp")
        os.close(fd)
        via = {**ccache.env(remote, Path(log)), "CCACHE_BASEDIR": str(root),
               "CCACHE_NOHASHDIR": "1"}
        out[c.key] = tuple(sorted(via.items()))
    return out


def _cell_dir(name: str, cell: Cell, objects: list[tuple[str, Path]], meta: dict) -> Path:
    """The cell's directory, named for people and by content: it never changes once made."""
    digest = _sha(json.dumps([meta, [(n, o.name) for n, o in objects]]))[:12]
    parts = [name, cell.variant.name, cell.target, cell.compiler.rsplit("/", 1)[-1], digest]
    final = cache_dir() / "cells" / "--".join(re.sub(r"[^A-Za-z0-9._,+=-]", "_", p) for p in parts)
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"o-{os.getpid()}-", dir=ensure_cache() / "tmp"))
    for file_name, obj in objects:
        _link_or_copy(obj, tmp / file_name)
    (tmp / "build.json").write_text(json.dumps(meta, indent=2) + "\n")
    try:
        os.rename(tmp, final)
    except OSError:           # another process made it first: same content
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise
    return final


# -- harness programs ---------------------------------------------------------------------
def compile_sources(target: str, compiler: str, sources: Sequence[Path], cflags: Sequence[str],
                    outdir: Path | None = None, *, jobs: int = 2) -> list[Path]:
    """Objects of harness sources (which #include "fbrt.h"), cached like build();
    copied into outdir as <stem>.o when given."""
    t = get_target(target)
    argv = compiler_for(t, compiler)
    ensure_cache()
    tools = tuple(sorted(tool_versions(t, compiler, argv).items()))
    flags = (*t.extra_cflags(compiler), *cflags, f"-I{HARNESS_DIR}")
    work = [_Job(Path(s).resolve(), tuple(argv), flags, tools, Path.cwd(), f"{target}/{compiler}")
            for s in sources]
    objects = [obj for obj, _ in _compile_all(work, jobs, None)]
    if outdir is None:
        return objects
    outdir.mkdir(parents=True, exist_ok=True)
    placed = []
    for src, obj in zip(work, objects):
        dest = outdir / (src.source.stem + ".o")
        _link_or_copy(obj, dest)
        placed.append(dest)
    return placed


# -- helpers ------------------------------------------------------------------------------
def _run(argv: Sequence[str], cwd: Path, extra_env: dict[str, str] | None = None) -> procs.Done:
    try:
        done = procs.run(list(argv), timeout=COMPILE_TIMEOUT, cwd=cwd,
                         env={**os.environ, "LC_ALL": "C", **(extra_env or {})})
    except FileNotFoundError:
        raise UserError(f"{argv[0]} is not installed: apt-get install {install_hint(argv[0])}") from None
    except OSError as e:
        raise UserError(f"{argv[0]}: cannot run: {e.strerror or e}") from None
    if done.timed_out:
        raise UserError(f"{argv[0]} took more than {COMPILE_TIMEOUT} s")
    return done


def check_disk(output: str, writing) -> None:
    """DiskFull when a tool failed because a disk is full: the experiment is not at fault, and
    the failure is never cached as the tool's verdict."""
    if disk_full(output):
        raise DiskFull(f"the disk is full: no space left writing in {writing} or the temporary directory "
                       f"{tempfile.gettempdir()}; free some space, or set TMPDIR to a directory with room")


def _first_errors(stderr: str, most: int = 2) -> str:
    """The compiler's first error lines ("file:line:col: error: ..."), joined."""
    errors = [m.group(0).strip() for m in _ERROR_LINE.finditer(stderr)]
    if not errors:
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        return lines[0] if lines else ""
    more = len(errors) - most
    return " | ".join(errors[:most]) + (f" (and {more} more)" if more > 0 else "")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"o-{os.getpid()}-", dir=ensure_cache() / "tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _link_or_copy(src: Path, dest: Path) -> None:
    """Hard link (the cache and the cell share one inode), else copy; atomic either way."""
    tmp = dest.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{dest.name}")
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    os.replace(tmp, dest)
    # rename() between two links to one inode does nothing and leaves tmp behind
    tmp.unlink(missing_ok=True)
