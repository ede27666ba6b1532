"""Kernel builds: each (variant, target, compiler) cell of a kernel experiment in its own
Kbuild `O=` directory in the cache, through ccache.

Order: every cell is planned (tree, patches, toolchain, KCFLAGS probed against the kernel's
compiler), then configured and checked (config.check_truth) before any cell compiles, so a
dropped option or a rejected flag costs seconds, not a build. A cell whose inputs (tree,
config, options, make command, tool versions) match its last successful build runs no make
at all. `make -jN all` output drives one progress bar per cell; a failing cell keeps its
compiler's error lines and the others go on. Per-cell file locks: two processes building the
same cell build it once; make's whole tree dies with flagbench, even by kill -9 (procs), and
a build a killed flagbench left in a cell is ended before the cell is used again.

A variant with a git ref builds in a checkout flagbench owns (source.git_tree), walked
commit by commit in one O= directory shared by every ref variant of its kind (make rebuilds
what the walk changed, ccache serves the rest). Each good build's artifacts are kept in
`<tree home>/builds/<stamp>` (the stamp names the commit's tree, not the variant): that is the
build's `dir`, and a later run, or another ref with the same tree, finds it there without make.
Its objects are not kept (the next commit's make rewrites them), only their code's size and
hash (size/objects.py: what `size --objects` compares). Object bisection, which relinks the
objects, asks for keep_objects: each ref variant in a checkout and O= directory of its own.

Reproducible: KBUILD_BUILD_TIMESTAMP/USER/VERSION are pinned, so A and B differ only where
the variant does and in the build identity, KBUILD_BUILD_HOST = fb-HASH16 (only init/version.o
sees it): a kernel booted on a real machine is checked against it. The identity is the same
length for every variant, so linux_proc_banner (which bloat-o-meter does not skip) and .rodata
keep their size: an A/A pair is byte-identical in section sizes.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from flagbench import ccache, distcc, procs
from flagbench.build import cached_version, probe
from flagbench.errors import UserError
from flagbench.kbuild import config as kconfig_file, seed
from flagbench.kbuild import source
from flagbench.kernelspec import Changes, Option, fragment_file, is_config_line, is_host_config, parse_lines
from flagbench.spec import Cell, Experiment, compiler_label
from flagbench.textsafe import sayer, term_text
from flagbench.targets import CLANG, is_clang

STAMP_VERSION = 1
CELL_FILE = "flagbench-cell.json"
CCACHE_LOG = "flagbench-ccache.log"    # ccache's stats log of the cell's last make
DISTCC_LOG = "flagbench-distcc.log"    # distcc's log of the cell's last make: where compiles ran
BUILD_TIMEOUT = 3 * 3600
PINNED_ENV = {"KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 1970", "KBUILD_BUILD_USER": "flagbench",
              "KBUILD_BUILD_HOST": "flagbench", "KBUILD_BUILD_VERSION": "1", "LC_ALL": "C"}
MIN_LOONGARCH_CLANG = (6, 5)    # clang-built LoongArch kernels need 6.5+ (Debian: debian:6.12)
# Kbuild's quiet lines: "  CC      init/main.o", "  CC [M]  fs/x.o", "  AS      arch/x86/entry.o"
_QUIET = re.compile(r"^  ([A-Z][A-Z0-9_]*(?: \[M\])?)\s+(\S+)")
_COMPILES = {"CC", "AS", "CC [M]", "AS [M]"}
_ERROR = re.compile(r"(?:^|: )(?:fatal )?error: |undefined reference to|\*\*\* \[|Error \d+$")


@dataclass(frozen=True)
class KernelBuild:
    cell: Cell
    dir: Path                          # the cell's O= directory
    vmlinux: Path
    image: Path | None                 # bzImage / Image / zImage, None when the arch makes none
    system_map: Path
    config: Path
    modules: tuple[Path, ...]
    seconds: float                     # wall time of the make that built these artifacts
    tools: dict[str, str]              # tool -> its version line
    cached: bool                       # True: no make ran now
    ok: bool
    error: str | None = None           # the compiler's error lines when not ok
    compiled: int = 0                  # objects compiled (or fetched from ccache) by this run's make
    tree: str = ""                     # the source tree, as a label with its version
    make: tuple[str, ...] = ()         # the make command (without the target)
    options: tuple[Option, ...] = ()   # every config option asked for
    src: Path | None = None            # the source tree make ran in (a patched copy for patches)
    identity: str = ""                 # KBUILD_BUILD_HOST: /proc/version says "(flagbench@IDENTITY)"
    ccache: ccache.Stats | None = None  # what ccache did for this run's make (None: no make ran)
    distcc: distcc.Counts | None = None  # with distcc hosts: where this run's make compiled
    seeded_from: Path | None = None    # the sibling O= directory this build started from (seed.py)


@dataclass
class _Plan:
    cell: Cell
    tree: source.Tree
    odir: Path
    make: list[str]                    # make -C SRC O=ODIR VAR=... (no target, no -j)
    env: dict
    options: list[Option]
    base: str
    tools: dict[str, str]
    stamp: str                         # every input of the build
    config_stamp: str                  # the inputs Kconfig sees (not KCFLAGS or per-file flags)
    last: dict = field(default_factory=dict)
    snapshot: Path | None = None       # a git ref's build: where its artifacts are kept (see module doc)

    @property
    def cached(self) -> bool:
        if self.snapshot is not None:
            kept = _read_json(self.snapshot / CELL_FILE)
            return kept.get("stamp") == self.stamp and bool(kept.get("ok")) and (self.snapshot / "vmlinux").is_file()
        return (self.tree.identity is not None and self.last.get("stamp") == self.stamp
                and self.last.get("ok") and (self.odir / "vmlinux").is_file())


def build_kernels(exp: Experiment, cells: Iterable[Cell] | None = None, *, jobs: int | None = None,
                  progress: bool = True, extra_fragments: Sequence[str | Path] = (),
                  keep_objects: bool = False) -> list[KernelBuild]:
    """Build every cell (default: all of the experiment's), in order; see the module doc.
    EXTRA_FRAGMENTS (config lines or fragment files) go into every cell, after the experiment's.
    KEEP_OBJECTS: a ref variant builds in a checkout and O= directory of its own (its `dir`, with
    its objects, not a kept copy of vmlinux), which stay at its commit: what object bisection
    relinks. It costs a checkout and a build directory per variant (ccache serves the compiles)."""
    if exp.kernel is None:
        raise UserError(f"{exp.path}: no [kernel] table: not a kernel experiment")
    cells = list(exp.cells() if cells is None else cells)
    jobs = jobs or os.cpu_count() or 1
    extra = extra_options(extra_fragments)
    say = sayer("flagbench build: ", quiet=not progress)
    plans = [_plan(exp, cell, extra, say, keep_objects) for cell in cells]
    for p in plans:
        if not p.cached:
            with _cell_locked(p):
                _configure(p, exp, say)
    # what distcc would get wrong is said even without progress: it changes where compiles run
    _send_to_distcc([p for p in plans if not p.cached], distcc.configured(exp.distcc), sayer("flagbench build: "))
    return _compile_all(plans, jobs, progress)


def _send_to_distcc(plans: list[_Plan], hosts: tuple[str, ...], say) -> None:
    """ccache's misses compiled by `distcc CC` on the hosts that make this machine's bytes with
    the cell's CC and HOSTCC (CC stays on make's command line, where Kbuild needs it)."""
    for p in plans if hosts else ():
        values = {a.split("=", 1)[0]: a.split("=", 1)[1].split() for a in p.make[3:] if "=" in a}
        native = distcc.native_flag([f for v in values.values() for f in v])
        if native:
            say(f"{p.cell.key}: {native} compiles here only, not through distcc (distcc#331)")
            continue
        compilers = [[w for w in values.get(var, ()) if w != "ccache"] for var in ("CC", "HOSTCC")]
        kept = distcc.hosts_for(hosts, [c for c in compilers if c], say, through_ccache=True)
        if kept:
            p.env.update(distcc.env(kept, p.odir / DISTCC_LOG), CCACHE_PREFIX="distcc")


def extra_options(fragments: Sequence[str | Path]) -> list[Option]:
    out: list[Option] = []
    for item in fragments:
        if isinstance(item, str) and is_config_line(item):
            out += parse_lines([item], lambda _: "extra fragment")
        else:
            path = Path(item)
            if not path.is_file():
                raise UserError(f"extra fragment {item}: no such file")
            out += fragment_file(path)
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- planning ---------------------------------------------------------------------------
def toolchain(cell: Cell, changes: Changes, tree: source.Tree) -> tuple[dict[str, str], list[str], str]:
    """(make variables, compiler argv for probing, the C compiler make will run) of a cell."""
    t = cell.arch
    user = dict(changes.make)
    variables = {"ARCH": t.kbuild.arch}
    llvm = user.get("LLVM")
    if llvm is None and is_clang(cell.compiler):
        name = CLANG if cell.compiler == "clang" else compiler_label(cell.compiler)
        llvm = name[len("clang"):] or "1"
        variables["LLVM"] = llvm
    if cell.target == "loongarch64" and tree.version_tuple < MIN_LOONGARCH_CLANG:
        raise UserError(f"{cell.key}: loongarch64 kernels build with clang-19 (LLVM=-19) from Linux "
                        f"{'.'.join(map(str, MIN_LOONGARCH_CLANG))} on; {tree.label} is {tree.version}: "
                        "use source = \"debian:6.12\"")
    if llvm:
        cc = _llvm_tool(llvm, "clang")
        probe_argv = [cc, f"--target={t.triplet}"]
    else:
        if t.gcc is None:
            raise UserError(f"{cell.key}: Debian has no gcc for {cell.target}: use compilers = [\"clang\"]")
        prefix = t.cross
        if prefix:
            variables["CROSS_COMPILE"] = prefix
        cc = prefix + "gcc" if cell.compiler in ("gcc", "cc") else cell.compiler
        probe_argv = [cc]
    cc = user.pop("CC", cc)
    if shutil.which(cc.split()[-1]) is None:
        raise UserError(f"{cell.key}: compiler {cc} is not installed"
                        + (" (LLVM=1 means plain `clang`; here use LLVM=-19)" if llvm == "1" else ""))
    if user.get("HOSTCC") is None:
        variables["HOSTCC"] = "ccache " + (_llvm_tool(llvm, "clang") if llvm else "gcc")
    variables["CC"] = cc if cc.startswith("ccache ") else f"ccache {cc}"
    variables.update(user)
    if changes.kcflags:
        variables["KCFLAGS"] = " ".join(changes.kcflags)
    return variables, probe_argv, cc.split()[-1]


def cell_dir(exp: Experiment, cell: Cell, tree: source.Tree, extra: list[Option]) -> Path:
    """<tree home>/out/<experiment>/<cell>: two levels below out for every tree (see source.py).
    (A ref variant's is <checkout home>/out/git/<ref_slot>.)"""
    exp_part = f"{exp.name}-{_sha(str(exp.path.resolve()))[:8]}"
    name = f"{cell.variant.name}--{cell.target}--{compiler_label(cell.compiler)}"
    if extra:
        name += "+" + _sha("\n".join(o.line for o in extra))[:8]
    return tree.home / "out" / re.sub(r"[^A-Za-z0-9._+=-]", "_", exp_part) / re.sub(r"[^A-Za-z0-9._+=,-]", "_", name)


def _plan(exp: Experiment, cell: Cell, extra: list[Option], say, keep_objects: bool = False) -> _Plan:
    kernel = exp.kernel
    if is_host_config(kernel.config):
        raise UserError(f"{exp.path}: config = {kernel.config!r}: the config comes from a machine "
                        "(flagbench run --host DEST, or config = \"host:DEST\")")
    changes = kernel.changes(cell.variant.name)
    asked = {o.name: o for o in changes.options}
    implied = [Option(name, value, f"target {cell.target}") for name, value in cell.arch.kbuild.implied
               if name not in asked]
    asked.update({o.name: o for o in implied})
    added = [o for o in extra if asked.get(o.name, Option("", "", "")).value != o.value]
    options = implied + list(changes.options) + added
    commit = cell.variant.commit
    if commit is not None:   # one walked checkout per O= directory, shared by experiments asking alike
        slot = ref_slot(kernel, cell, options)
        if keep_objects:   # its own checkout and O=, left at its commit (see build_kernels)
            slot += "--" + re.sub(r"[^A-Za-z0-9._+=,-]", "_", cell.variant.name)
        tree = source.git_tree(commit, slot)
        odir = tree.home / "out" / "git" / slot
    else:
        tree = source.patched_tree(source.base_tree(kernel.source, say), changes.patches, say, kernel.fuzz)
        odir = cell_dir(exp, cell, tree, added)
    variables, probe_argv, cc = toolchain(cell, changes, tree)
    tools = {cc: cached_version(cc), "ccache": cached_version("ccache")}
    ld = _linker(variables)
    if shutil.which(ld):
        tools[ld] = cached_version(ld)
    if changes.kcflags:
        message = probe(probe_argv, tools, list(changes.kcflags), exp.root)
        if message:
            raise UserError(f"variant {cell.variant.name}: {' '.join(probe_argv)} for {cell.target} rejects "
                            f"its kcflags {' '.join(changes.kcflags)}: {message}")
    make = ["make", "-C", str(tree.src), f"O={odir}", *(f"{k}={v}" for k, v in variables.items())]
    env = {**os.environ, **PINNED_ENV, **ccache_env(tree),
           **ccache.env(ccache.usable(ccache.remote(exp.cache_remote)), odir / CCACHE_LOG)}
    env.pop("KBUILD_OUTPUT", None)
    inputs = {"v": STAMP_VERSION, "tree": tree.identity, "src": str(tree.src), "base": kernel.config,
              "base_hash": kernel.hash if kernel.config_is_file else None,
              "options": [o.line for o in options], "make": make, "tools": tools,
              "pinned": PINNED_ENV}
    last = _read_json(odir / CELL_FILE)
    config_inputs = {**inputs, "make": [a for a in make if "FLAGS" not in a.split("=", 1)[0]]}
    if commit is not None:   # a walk reconfigures only when the config asked for changes: Kconfig
        config_inputs["tree"] = None   # changes between commits are make's own syncconfig's to follow
    env["KBUILD_BUILD_HOST"] = inputs["identity"] = identity(
        f"git-{commit.tree[:8]}" if commit is not None else cell.variant.name, _sha(json.dumps(inputs, sort_keys=True)))
    stamp = _sha(json.dumps(inputs, sort_keys=True))
    return _Plan(cell, tree, odir, make, env, options, kernel.config, tools, stamp,
                 _sha(json.dumps(config_inputs, sort_keys=True)), last,
                 tree.home / "builds" / stamp[:16] if commit is not None and not keep_objects else None)


def ref_slot(kernel, cell: Cell, options: list[Option]) -> str:
    """A ref variant's checkout and O= directory: one per target, compiler and config asked for
    (base and options, any experiment's), so every commit and every experiment that asks the
    same walks one tree and rebuilds only what a commit changed."""
    config = [kernel.config, kernel.hash if kernel.config_is_file else "", *(o.line for o in options)]
    name = f"{cell.target}--{compiler_label(cell.compiler)}+{_sha(chr(10).join(config))[:8]}"
    return re.sub(r"[^A-Za-z0-9._+=,-]", "_", name)


IDENTITY_HEX = 16


def identity(variant: str, cell_hash: str) -> str:
    """The kernel's build identity, in /proc/version as "(flagbench@IDENTITY)", so a booted
    kernel says which build it is: a hash of the variant's name and its cell's inputs, of one
    length for every variant (a name in it would make the banner, and so the kernel measured,
    differ in size between A and B)."""
    return "fb-" + _sha(f"{variant}\0{cell_hash}")[:IDENTITY_HEX]


def _llvm_tool(llvm: str, name: str) -> str:
    """Kbuild's LLVM= naming: LLVM=1 clang, LLVM=-19 clang-19, LLVM=/dir/ /dir/clang."""
    return llvm + name if llvm.endswith("/") else name + ("" if llvm == "1" else llvm)


def _linker(variables: dict[str, str]) -> str:
    """The linker make will run: ld.lld under LLVM=, else CROSS_COMPILE + ld."""
    llvm = variables.get("LLVM")
    return _llvm_tool(llvm, "ld.lld") if llvm else variables.get("CROSS_COMPILE", "") + "ld"


def ccache_env(tree: source.Tree) -> dict[str, str]:
    """Relative paths for ccache (base dir above tree and build dirs), and the build dir left
    out of the hash even with -g: a cell's objects hit for every other cell of the same
    inputs (their debug info then names the first cell's directory)."""
    return {"CCACHE_BASEDIR": os.path.commonpath([str(tree.home.parent), str(tree.src)]),
            "CCACHE_NOHASHDIR": "1"}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


@contextmanager
def _cell_locked(p: _Plan) -> Iterator[None]:
    """The cell's lock, then its O= directory taken over: a make that a killed flagbench left
    compiling there (its watchdog died too) is ended before ours starts."""
    with source.locked(p.odir.with_name(p.odir.name + ".lock")):
        procs.take_over(p.odir.with_name(p.odir.name + ".owner"))
        yield


# -- configure -----------------------------------------------------------------------------
def _configure(p: _Plan, exp: Experiment, say) -> None:
    """The cell's .config, made unless the last configure had the same inputs; then checked."""
    p.last = _read_json(p.odir / CELL_FILE)
    if p.cached:
        return
    source.checkout(p.tree, say)
    if p.last.get("config_stamp") != p.config_stamp or not (p.odir / ".config").is_file():
        say(f"{p.cell.key}: configuring ({p.base} + {len(p.options)} options) in {p.odir}")
        kconfig_file.configure(p.make, p.odir, p.base, p.options, p.env)
        p.last = {**p.last, "config_stamp": p.config_stamp, "stamp": None, seed.KEY: None}
        _write_json(p.odir / CELL_FILE, p.last)
    kconfig_file.check_truth(p.options, p.odir / ".config", p.tree.src, p.cell.arch.kbuild.srcarch, p.cell.key)


# -- compile -------------------------------------------------------------------------------
def _compile_all(plans: list[_Plan], jobs: int, progress: bool) -> list[KernelBuild]:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn)
    from rich.table import Column

    console = Console(stderr=True, quiet=not progress)
    width = max((len(p.cell.key) for p in plans), default=10) + 7
    columns = (TextColumn("{task.description}", table_column=Column(min_width=width, no_wrap=True)),
               BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("[dim]{task.fields[now]}"))
    out = []
    with Progress(*columns, console=console, transient=False, refresh_per_second=4) as bars:
        for p in plans:
            task = bars.add_task(escape(p.cell.key), total=None, now="")
            out.append(_compile(p, jobs, bars, task, escape))
    return out


def _compile(p: _Plan, jobs: int, bars, task, escape) -> KernelBuild:
    with _cell_locked(p):
        p.last = _read_json(p.odir / CELL_FILE)
        if p.cached:
            bars.update(task, total=1, completed=1, now="cached: no make ran")
            return _result(p, cached=True)
        expected = p.last.get("objects") or _estimate(p)
        bars.update(task, total=expected, completed=0, now="checkout" if p.snapshot else "make")
        source.checkout(p.tree)
        seed_key = seed.key(p)
        seeded = None
        if "compiled" not in p.last:   # no make ran here yet: start from a sibling's build
            found = seed.find(p, seed_key, source.trees_dir(), _read_json)
            if found is not None:
                bars.update(task, now=f"copying {found[0].name}")
                seeded = found[0] if seed.copy_from(*found, p) else None
        bars.update(task, now="make")
        start = time.monotonic()
        (p.odir / CCACHE_LOG).unlink(missing_ok=True)
        (p.odir / DISTCC_LOG).unlink(missing_ok=True)
        _write_json(p.odir / CELL_FILE, {**p.last, seed.KEY: None})   # a killed make seeds nobody
        rc, compiled, errors = _run_make(p, jobs, bars, task, escape)
        seconds = time.monotonic() - start
        stats = ccache.read_stats(p.odir / CCACHE_LOG, p.env.get("CCACHE_REMOTE_STORAGE"))
        ok = rc == 0 and (p.odir / "vmlinux").is_file()
        error = None
        if not ok:
            error = "\n".join(errors[:12]) or f"make exited with status {rc}"
            shown = [term_text(e) for e in error.splitlines()]   # rich escapes markup, not ESC or BEL
            bars.update(task, description=f"[red]{escape(p.cell.key)} FAILED", now=escape(shown[0][:80]))
            bars.console.print(f"[red]{p.cell.key} failed:[/]\n{escape(chr(10).join(shown))}", highlight=False)
        else:
            bars.update(task, total=max(compiled, 1), completed=max(compiled, 1), now=f"{compiled} compiled")
        seeds = seed.recorded(p, seed_key) if ok else seed.recorded_failure(p, seed_key, p.last)
        data = {**p.last, "stamp": p.stamp if ok else None, "ok": ok, "error": error, "seconds": seconds,
                "compiled": compiled, "tools": p.tools, **seeds,
                "seeded_from": str(seeded) if seeded else None,
                "objects": max(compiled, p.last.get("objects") or 0) if ok else p.last.get("objects")}
        _write_json(p.odir / CELL_FILE, data)
        if ok:
            _remember_estimate(p, data["objects"])
            if p.snapshot is not None:
                _keep(p, data)
        p.last = data
        sent = p.env.get("DISTCC_LOG") == str(p.odir / DISTCC_LOG)   # not a DISTCC_HOSTS of the user's shell
        spread = distcc.read_counts(p.odir / DISTCC_LOG, p.env["DISTCC_HOSTS"].split()) if sent else None
        return replace(_result(p, cached=False), ccache=stats, distcc=spread)


def _run_make(p: _Plan, jobs: int, bars, task, escape) -> tuple[int, int, list[str]]:
    """make -jN all, its output (kept in O=/flagbench-make.log) read as it comes:
    (status, objects compiled, error lines). A signal or the deadline kills make's whole tree."""
    argv = [*p.make, f"-j{jobs}", "all"]
    log_path = p.odir / "flagbench-make.log"
    compiled = 0
    errors: list[str] = []
    deadline = time.monotonic() + BUILD_TIMEOUT
    with open(log_path, "w+b") as log, open(log_path, "rb") as reader:
        with procs.start(argv, env=p.env, stdout=log, stderr=log) as proc:
            pending = b""
            while True:
                running = proc.popen.poll() is None
                chunk = reader.read()
                if not chunk and running:
                    if time.monotonic() > deadline:
                        errors.append(f"make took more than {BUILD_TIMEOUT} s: stopped")
                        break
                    time.sleep(0.25)   # a compile takes longer: 4 looks a second cost ~nothing
                    continue
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    m = _QUIET.match(line)
                    if m:
                        if m.group(1) in _COMPILES:
                            compiled += 1
                            bars.update(task, advance=1, now=escape(m.group(2)))
                    elif _ERROR.search(line) and len(errors) < 40:
                        errors.append(line.rstrip())
                if not running and not chunk:
                    break
            rc = proc.wait(timeout=0) if proc.popen.poll() is None else proc.popen.returncode
    # the compiler's own lines first, make's "*** [...] Error 1" after them; paths as in the tree
    errors.sort(key=lambda e: ("***" in e or e.startswith("make")))
    errors = [e.replace(f"{p.tree.src}/", "").replace("../../../src/", "") for e in errors]
    return (rc if rc is not None else -1), compiled, errors


def _estimate_file(p: _Plan) -> Path:
    return p.tree.home.parent / "estimates.json"


def _estimate_key(p: _Plan) -> str:
    return f"{p.tree.version} {p.cell.arch.kbuild.arch} {p.base} {len(p.options)}"


def _estimate(p: _Plan) -> int | None:
    """Objects a build of this kind compiled last time anywhere (cold cells get a real bar)."""
    return _read_json(_estimate_file(p)).get(_estimate_key(p))


def _remember_estimate(p: _Plan, objects: int) -> None:
    with source.locked(_estimate_file(p).with_suffix(".lock")):
        data = _read_json(_estimate_file(p))
        data[_estimate_key(p)] = max(objects, data.get(_estimate_key(p), 0))
        _write_json(_estimate_file(p), data)


def _keep(p: _Plan, data: dict) -> None:
    """A ref build's artifacts copied out of the walked O= directory (the next commit's make
    overwrites them there) into p.snapshot, written under another name and renamed into place."""
    files = ["vmlinux", "System.map", ".config", "flagbench-make.log", *p.cell.arch.kbuild.images]
    if kconfig_file.read_config(p.odir / ".config").get("CONFIG_MODULES") == "y":
        files += [str(m.relative_to(p.odir)) for m in p.odir.rglob("*.ko")]
    from flagbench.size.objects import CODE_INDEX, write_code_index
    for left in p.snapshot.parent.glob(f"{p.snapshot.name}.tmp-*"):   # a killed run's (we hold the cell lock)
        shutil.rmtree(left, ignore_errors=True)
    tmp = p.snapshot.with_name(f"{p.snapshot.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True)
    for rel in files:
        if (p.odir / rel).is_file():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p.odir / rel, tmp / rel)
    write_code_index(p.odir, tmp / CODE_INDEX)   # the objects stay behind: `size --objects` reads this
    _write_json(tmp / CELL_FILE, {**data, "commit": p.tree.commit.as_dict() if p.tree.commit else None})
    shutil.rmtree(p.snapshot, ignore_errors=True)
    os.replace(tmp, p.snapshot)


def _result(p: _Plan, cached: bool) -> KernelBuild:
    d = p.odir
    if p.snapshot is not None and (cached or p.last.get("ok")):
        d = p.snapshot
        p.last = _read_json(d / CELL_FILE)
    image = next((d / i for i in p.cell.arch.kbuild.images if (d / i).is_file()), None)
    modules: tuple[Path, ...] = ()
    if p.last.get("ok") and kconfig_file.read_config(d / ".config").get("CONFIG_MODULES") == "y":
        modules = tuple(sorted(d.rglob("*.ko")))
    return KernelBuild(
        cell=p.cell, dir=d, vmlinux=d / "vmlinux", image=image, system_map=d / "System.map",
        config=d / ".config", modules=modules, seconds=float(p.last.get("seconds") or 0.0),
        tools=dict(p.last.get("tools") or p.tools), cached=cached, ok=bool(p.last.get("ok")),
        error=p.last.get("error"), compiled=0 if cached else int(p.last.get("compiled") or 0),
        tree=f"{p.tree.label}: Linux {p.tree.version}", make=tuple(p.make), options=tuple(p.options),
        src=p.tree.src, identity=p.env["KBUILD_BUILD_HOST"],
        seeded_from=Path(p.last["seeded_from"]) if p.last.get("seeded_from") and not cached else None)


# -- what `flagbench build` prints ------------------------------------------------------------
def as_json(b: KernelBuild) -> dict:
    return {"cell": b.cell.key, "kind": "kernel", "variant": b.cell.variant.name, "target": b.cell.target,
            "compiler": b.cell.compiler, "ok": b.ok, "error": b.error, "cached": b.cached,
            "dir": str(b.dir), "vmlinux": str(b.vmlinux) if b.ok else None,
            "image": str(b.image) if b.image else None, "system_map": str(b.system_map) if b.ok else None,
            "config": str(b.config), "modules": [str(m) for m in b.modules], "seconds": round(b.seconds, 1),
            "compiled": b.compiled, "seeded_from": str(b.seeded_from) if b.seeded_from else None, "tools": b.tools, "tree": b.tree, "make": list(b.make),
            "options": [o.line for o in b.options], "identity": b.identity, "ccache": b.ccache.as_dict() if b.ccache else None,
            "distcc": b.distcc.as_dict() if b.distcc else None}
