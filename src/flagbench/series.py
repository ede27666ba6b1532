"""`flagbench series EXP BASE..HEAD`: what each commit of a series does, one row per commit.

The base and each commit of `git rev-list --reverse BASE..HEAD` become variants of the
experiment (its first variant, or --variant, with `ref` set to the commit: refspec.py), built
in order: a kernel walks one `O=` directory commit by commit (kernel/kbuild.py, as ktest.pl
walks a series; ccache across), C sources are read from each commit's tree (content-cached
objects). Each commit that builds is compared with the last one before it that built, and
with the base:

    size     bloat-o-meter's total delta (size/: its numbers byte for byte), functions
             grown/shrunk (and added/removed), padding between functions
    asm      functions whose code changed (asm/: normalised, so moved code is not a change)
    counts   every counted bench's exact values (guest benches: kernel instructions per
             iteration), from one counted run each: exact counts need no repeats

A commit that does not build is a row saying so. series_table.py prints the table (text
within 100 columns, markdown, json, html); cli/series.py is the thin face.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from flagbench import refspec, spec, vcs
from flagbench.errors import DiskFull, UserError
from flagbench.textsafe import sayer
from flagbench.run.engine import collect


@dataclass
class Delta:
    """NEW against OLD: what the row shows."""
    total: int              # bloat-o-meter's "up/down: U/-D (TOTAL)"
    grow: int
    shrink: int
    add: int
    remove: int
    padding: int            # bytes of alignment padding between functions
    changed: int | None = None        # functions whose code changed (asm); None: not compared
    functions: list[str] = field(default_factory=list)   # the changed/added/removed ones, most first
    counts: dict[str, float] = field(default_factory=dict)   # counted metric -> new - old


@dataclass
class Row:
    commit: vcs.Commit
    built: bool = False
    build: object = None              # build.Build (C objects) or kernel.kbuild.KernelBuild
    error: str = ""                   # why it did not build (or measure)
    files: list[Path] = field(default_factory=list)   # what size and asm read: a vmlinux, or objects
    size_file: Path | None = None     # vmlinux, or the objects' archive
    counts: dict[str, float] = field(default_factory=dict)   # counted metric -> value
    compared_with: str = ""           # the short sha of the row compared with (the last that built)
    vs_parent: Delta | None = None
    vs_base: Delta | None = None
    seconds: float = 0.0              # building it (and its counted runs)
    cached: bool = False              # no compiler or make ran for it


@dataclass
class Series:
    experiment: spec.Experiment
    cell: str                         # target/compiler
    repo: Path
    range: str
    rows: list[Row]                   # the base first
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def commits_of(exp: spec.Experiment, range_text: str) -> tuple[Path, list[vcs.Commit]]:
    """The repository and the base followed by each commit of BASE..HEAD."""
    repo = refspec.repository(exp)
    if repo is None:
        what = (f"the kernel source {exp.kernel.source}" if exp.kernel is not None
                else "the experiment's sources")
        raise UserError(f"{exp.path}: a series needs {what} in a git repository"
                        + (" ([kernel] source = PATH of one)" if exp.kernel is not None else ""))
    base, head = vcs.parse_range(range_text)
    try:
        first = vcs.resolve(repo, base)
        rest = vcs.commits(repo, base, head)
    except vcs.UnknownRef as e:
        raise UserError(f"{range_text}: {e}") from None
    if not rest:
        raise UserError(f"{range_text}: no commits in {repo} between {base} and {head}")
    return repo, [first, *rest]


def commit_experiment(exp: spec.Experiment, template: spec.Variant, commits: list[vcs.Commit]):
    """EXP with one variant per commit (named by its short sha), each TEMPLATE at that commit:
    (experiment, {short sha: why it cannot be built}) (a C source the commit lacks)."""
    variants, missing = [], {}
    own = dict(exp.kernel.variants).get(template.name) if exp.kernel is not None else None
    worktree_sources = template.sources if template.sources and template.commit is None else exp.sources
    for c in commits:
        sources = None
        if exp.kernel is None:
            try:
                sources = refspec.sources_at(c, worktree_sources, _raise)
            except UserError as e:
                missing[c.short] = str(e)
                sources = worktree_sources
        variants.append(replace(template, name=c.short, ref=c.sha, commit=c, sources=sources))
    out = replace(exp, variants=tuple(variants))
    if exp.kernel is not None and own is not None:
        out = replace(out, kernel=replace(exp.kernel, variants=tuple((c.short, own) for c in commits)))
    return out, missing


def _raise(what: str):
    raise UserError(what)


def run_series(path, range_text: str, *, variant: str | None = None, target: str | None = None,
               compiler: str | None = None, jobs: int | None = None, progress: bool = True,
               asm: bool = True, counts: bool = True, experiment: spec.Experiment | None = None,
               given: tuple[Path, list[vcs.Commit]] | None = None) -> Series:
    """Build every commit of the range, compare each with the last that built and with the
    base, count its counted benches; see the module doc. EXPERIMENT (loaded from PATH when
    None) and GIVEN (repository, [base, *commits]) stand for the range when the commits come
    from elsewhere: mail/run.py's patches applied in a checkout flagbench owns."""
    from flagbench import procs
    from flagbench.variants import choose

    procs.install()
    started = time.monotonic()
    exp = spec.load(path) if experiment is None else experiment
    template = exp.variant(variant) if variant else exp.variants[0]
    old, _, notes = choose(replace(exp, variants=(template, template)), None, target, compiler)
    repo, commits = commits_of(exp, range_text) if given is None else given
    dexp, missing = commit_experiment(exp, template, commits)
    say = sayer("flagbench series: ", quiet=not progress)
    say(f"{len(commits) - 1} commits on {commits[0].short} ({commits[0].subject[:60]}), "
        f"{old.target}/{old.compiler}, in {repo}")
    rows = [Row(c) for c in commits]
    for i, (row, v) in enumerate(zip(rows, dexp.variants)):
        say(f"[{i + 1}/{len(rows)}] {row.commit.short} {row.commit.subject[:60]}")
        t0 = time.monotonic()
        if v.name in missing:
            row.error = missing[v.name]
        else:
            _build(dexp, spec.Cell(v, old.target, old.compiler), row, jobs, progress)
        row.seconds = time.monotonic() - t0
    if counts:
        _count(dexp, rows, old, notes, progress)
    _compare(rows, dexp.kernel is not None, asm, say)
    return Series(exp, f"{old.target}/{old.compiler}", repo, range_text, rows, notes,
                  time.monotonic() - started)


def _build(exp, cell: spec.Cell, row: Row, jobs: int | None, progress: bool) -> None:
    try:
        if exp.kernel is not None:
            from flagbench.run.guest import boot
            from flagbench.kbuild.build import build_kernels

            fragments = boot.boot_fragments(exp) if any(b.guest for b in exp.benches) else ()
            (b,) = build_kernels(exp, [cell], jobs=jobs, progress=progress, extra_fragments=fragments)
            if not b.ok:
                row.error = (b.error or "make failed").splitlines()[0]
                return
            row.build, row.files, row.size_file, row.cached = b, [b.vmlinux], b.vmlinux, b.cached
        else:
            from flagbench.build import archive, build

            (b,) = build(exp, [cell], jobs=jobs or 2)
            row.build, row.files, row.size_file, row.cached = b, list(b.objects), archive(b), b.cached
        row.built = True
    except DiskFull:
        raise
    except UserError as e:
        row.error = _short_error(str(e))


_EXPORT = re.compile(r"\S*/git/trees/[0-9a-f]{40}/")
_COMPILE = re.compile(r"^.*? does not compile for \S+: ")


def _short_error(message: str) -> str:
    """A C build's error with the export's paths as the repository has them, and without the
    "X does not compile for CELL:" preamble (the row says so)."""
    return _COMPILE.sub("", _EXPORT.sub("", message))


def _count(exp, rows: list[Row], cell: spec.Cell, notes: list[str], progress: bool) -> None:
    """Every counted bench once per built commit (exact counts: one run is the value)."""
    from flagbench import procs

    built = [r for r in rows if r.built]
    benches = list(exp.benches)
    if not built or not benches:
        return
    by_name = {r.commit.short: r for r in built}
    with procs.owned_dir("flagbench-series") as workdir:
        cells = []
        host = [b for b in benches if not b.guest] if exp.kernel is None else []   # a kernel's C cells: not per commit
        if host:
            from flagbench.pipeline import host_cells
            cells += host_cells(exp, host, [r.build for r in built], workdir, notes)
        guest = [b for b in benches if b.guest]
        if guest and exp.kernel is not None:
            from flagbench.run.guest.guest import guest_cells
            cells += guest_cells(exp, guest, [r.build for r in built], workdir=workdir / "guest", notes=notes,
                                 noise_floor=False, profile_top=0)
        for c in cells:
            row = by_name.get(c.variant)
            if c.counted is None or row is None or c.bench.endswith(" kernel profile"):
                continue
            label = c.bench + "".join(f" {k}={v}" for k, v in c.params.items())
            kept = Path(row.build.dir) / f"flagbench-counts-{_count_key(c, exp)}.json"
            try:
                emitted = json.loads(kept.read_text())
            except (OSError, ValueError):
                t0 = time.monotonic()
                got: dict[str, float] = {}
                reason = c.counted(collect(got))
                emitted = list(got.items())
                row.seconds += time.monotonic() - t0
                if reason:
                    notes.append(f"{row.commit.short} {label}: not counted: {reason.splitlines()[0]}")
                    continue
                tmp = kept.with_name(f".{kept.name}.{os.getpid()}")
                tmp.write_text(json.dumps(emitted))
                os.replace(tmp, kept)
            for metric, value in emitted:   # a counted job emits exact counts only
                row.counts[f"{label} {metric}"] = float(value)


def _count_key(cell, exp) -> str:
    """What a counted value depends on besides the build (whose directory it is kept in): the
    bench's definition, the row, and the counting tools (qemu for guest benches)."""
    bench = next((b for b in exp.benches if b.name == cell.bench), None)
    tools = {k: v for k, v in cell.provenance.items() if k in ("qemu", "icount_shift", "plugin", "valgrind")}
    text = json.dumps([repr(bench), cell.params, cell.count_executor, tools], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _compare(rows: list[Row], kernel: bool, asm: bool, say) -> None:
    base = rows[0] if rows[0].built else None
    last = base
    for row in rows[1:]:
        if not row.built:
            continue
        if last is not None:
            row.compared_with = last.commit.short
            say(f"comparing {row.commit.short} with {last.commit.short}")
            row.vs_parent = delta(last, row, kernel, asm)
        if base is not None:
            row.vs_base = row.vs_parent if last is base else delta(base, row, kernel, False)
        last = row


def delta(old: Row, new: Row, kernel: bool, asm: bool) -> Delta:
    from flagbench.size.measure import compare

    c = compare(str(old.size_file), str(new.size_file))
    t = c.table
    d = Delta(t.up - t.down, t.grow, t.shrink, t.add, t.remove, c.new.padding - c.old.padding)
    if asm:
        from flagbench.asm.compare import compare_files, compare_object_sets

        # counts and names only: each side's mix summed, not made function by function
        a = (compare_files(old.files[0], new.files[0], mix_each=False) if kernel
             else compare_object_sets(old.files, new.files))
        n = a.counts()
        d.changed = n["changed"]
        d.functions = [f.name for f in a.functions if f.status != "same"]
    d.counts = {k: new.counts[k] - old.counts[k] for k in new.counts if k in old.counts}
    return d
