"""`flagbench series`'s running (`run_series`): the commits of BASE..HEAD (`commits_of`), built,
and their measurements as engine cells (run/engine.py) into the series' run (ss.py).

`measure` builds the commits in order (a kernel walks one O= directory; builds are recorded
in the run as they finish: a commit that does not build is a failed `build` cell, not tried
again when the run resumes), then hands every measurement to the engine at once:

    size / asm   a counted job comparing the commit's files with its first parent's (`compared_with`)
                 and, size, with the base's
    counts       the experiment's counted benches on each commit (one run each: exact)
    time         with a fleet (--host/--place): the timed benches of each commit and its first
                 parent, the pair one table row (params pair=COMMIT), so the engine's paired
                 rounds put both in every round on that machine

A resumed run skips every finished cell; a run whose engine pass ended is marked `done`, and
running it again then builds nothing.
"""
from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from flagbench import spec, subject as subjects, vcs
from flagbench import series_store as ss
from flagbench.errors import DiskFull, UserError
from flagbench.provenance import CommitRecord
from flagbench.textsafe import sayer

if TYPE_CHECKING:             # series imports the table's reading of the store: only for the annotation
    from flagbench.series import Series


def commit_experiment(exp: spec.Experiment, template: spec.Variant, commits: list[vcs.Commit]):
    """EXP with one variant per commit (named by its short sha), each TEMPLATE at that commit:
    (experiment, {short sha: why it cannot be built}) (a C source the commit lacks)."""
    return subjects.of(exp).at_commits(template, commits)


def compared_with(records: list[CommitRecord], built: set[str]) -> dict[str, str]:
    """Each commit's (short sha) comparison: its first parent, or where that did not build the
    nearest first-parent ancestor in the series that did; absent when the chain leaves the series."""
    by_sha = {c.sha: c for c in records}
    out = {}
    for c in records[1:]:
        if c.short not in built:
            continue
        p = by_sha.get(c.first_parent or "")
        while p is not None and p.short not in built:
            p = by_sha.get(p.first_parent or "")
        if p is not None:
            out[c.short] = p.short
    return out


_EXPORT = re.compile(r"\S*/git/trees/[0-9a-f]{40}/")
_COMPILE = re.compile(r"^.*? does not compile for \S+: ")


def short_error(message: str) -> str:
    """A C build's error with the export's paths as the repository has them, and without the
    "X does not compile for CELL:" preamble (the row says so)."""
    return _COMPILE.sub("", _EXPORT.sub("", message))


def commits_of(exp: spec.Experiment, range_text: str) -> tuple[Path, list[vcs.Commit], list[CommitRecord]]:
    """The repository, the base followed by each commit of BASE..HEAD, and their records (with
    parents). A BASE that is not an ancestor of HEAD is refused: rev-list would charge the base's
    own changes to the first commit."""
    repo = subjects.of(exp).repository()
    if repo is None:
        subject = subjects.of(exp)
        raise UserError(f"{exp.path}: a series needs {subject.sources_what} in a git repository"
                        + (" ([kernel] source = PATH of one)" if subject.kind == "kernel" else ""))
    base, head = vcs.parse_range(range_text)
    try:
        first = vcs.resolve(repo, base)
        top = vcs.resolve(repo, head)
        rest = vcs.commits(repo, base, head)
    except vcs.UnknownRef as e:
        raise UserError(f"{range_text}: {e}") from None
    if not rest:
        raise UserError(f"{range_text}: no commits in {repo} between {base} and {head}")
    if not ss.is_ancestor(repo, first.sha, top.sha):
        raise UserError(f"{range_text}: {base} is not an ancestor of {head}, so its own changes would be "
                        f"charged to the first commit: give the fork point, $(git merge-base {base} {head})..{head}")
    commits = [first, *rest]
    return repo, commits, ss.records(repo, commits)


def run_series(path, range_text: str, *, db: Path, variant: str | None = None, target: str | None = None,
               compiler: str | None = None, jobs: int | None = None, progress: bool = True,
               asm: bool = True, counts: bool = True, fresh: bool = False, fleet=None,
               experiment: spec.Experiment | None = None, given=None) -> tuple[Series, int]:
    """Build every commit of the range, measure it through the engine into the store (resuming
    a run of the same series), and read the table back: (series, the engine's exit status).
    EXPERIMENT (else loaded from PATH) and GIVEN (what commits_of returns) stand for the range
    when the commits come from elsewhere: mail/run.py's patches applied in a clone flagbench owns."""
    from flagbench import procs
    from flagbench.causes import measured_functions
    from flagbench.store import Store
    from flagbench.variants import choose

    procs.install()
    exp = spec.load(path) if experiment is None else experiment
    template = exp.variant(variant) if variant else exp.variants[0]
    old, _, notes = choose(replace(exp, variants=(template, template)), None, target, compiler)
    if fleet is not None and not subjects.of(exp).times_commits:
        raise UserError(f"{exp.path}: a kernel series is not timed on --host/--place yet (its counts are exact)")
    repo, commits, records = commits_of(exp, range_text) if given is None else given
    place = ",".join(sorted(h.name for h in fleet.hosts)) if fleet is not None else ""
    key = ss.run_key("series", exp.hash, f"{old.target}/{old.compiler}", template.name,
                               [c.sha for c in commits], asm, counts, place)
    say = sayer("flagbench series: ", quiet=not progress)
    with Store(db) as store, store.writer(f"flagbench series {exp.path}"):
        run_id = ss.open_run(store, "series", exp.name, key, records, {
            "experiment_path": str(exp.path), "cell": f"{old.target}/{old.compiler}", "repo": str(repo),
            "range": range_text, "notes": notes, "place": place, "variants": [c.short for c in commits],
            "measured_functions": measured_functions(exp.benches)},
            fresh=fresh)
        status = measure(store, run_id, key, exp, template, old, commits, records, jobs=jobs, asm=asm,
                         counts=counts, fleet=fleet, progress=progress, say=say)
        from flagbench.series import load
        return load(store, run_id), status


def measure(store, run_id: int, key: str, exp, template, cell, commits, records, *, jobs, asm: bool,
            counts: bool, fleet, progress: bool, say) -> int:
    """Build and measure what the run does not have yet; the engine's exit status."""
    from flagbench import procs
    from flagbench.run.engine import run_cells
    t, c = cell.target, cell.compiler
    base = records[0]
    ev = ss.evidence(store, run_id)
    if ev.cell(base.short, "done") is not None:
        say(f"run {run_id}: every commit is stored (--fresh to measure again)")
        return 0
    dexp, missing = commit_experiment(exp, template, commits)
    say(f"{len(commits) - 1} commits on {base.short} ({base.subject[:60]}), {t}/{c}, run {run_id}")
    built: dict[str, subjects.Built] = {}
    for i, (rec, v) in enumerate(zip(records, dexp.variants)):
        stored = ev.cell(rec.short, "build")
        if stored is not None and stored.status == "failed":
            say(f"[{i + 1}/{len(records)}] {rec.short} {rec.subject[:60]}: does not build (stored)")
            continue
        say(f"[{i + 1}/{len(records)}] {rec.short} {rec.subject[:60]}")
        t0 = time.monotonic()
        error = missing.get(v.name) or ""
        got = None if error else _build(dexp, replace(cell, variant=v), jobs, progress)
        if isinstance(got, str):
            error, got = got, None
        if got is not None:
            built[rec.short] = got
        if stored is None or (got is None) != (stored.status == "failed"):
            facts = {"files": [str(f) for f in got.files], "size_file": str(got.size_file)} if got else {}
            ss.record(store, run_id, key, "build", ss.cell_key(rec.short, t, c), rec,
                      [(ss.BUILD_S, time.monotonic() - t0), (ss.CACHED, float(bool(got and got.cached)))],
                      facts=facts, failed=error or None)
    pairs = compared_with(records, set(built))
    by_short = {r.short: r for r in records}
    cells = []
    for child, parent in pairs.items():
        cells += _compare_cells(by_short[child], built[parent], built[child], parent, "parent", t, c, asm)
        if base.short in built:
            cells += _compare_cells(by_short[child], built[base.short], built[child], base.short, "base", t, c, False)
    with procs.owned_dir("flagbench-series") as workdir:
        if counts and dexp.benches:
            cells += _count_cells(dexp, [built[r.short].build for r in records if r.short in built], by_short,
                                  workdir)
        if fleet is not None:
            for n, (child, parent) in enumerate(pairs.items()):
                cells += _timed_cells(dexp, built[parent].build, built[child].build, child, by_short,
                                      workdir / f"pair-{n}", fleet)
        outcome = run_cells(store, cells, experiment=exp.name, experiment_hash=key, progress=progress)
    if outcome.run_id != run_id:
        raise RuntimeError(f"the engine measured into run {outcome.run_id}, not the series' run {run_id}")
    from flagbench.errors import PlaceLost
    lost = any(PlaceLost.was(reason) for *_, reason in outcome.failed)   # a host that dropped: resumable
    if outcome.status == 0 or (outcome.status == 1 and not lost):   # everything there is to measure is stored
        store.finish_cell(run_id, "done", ss.cell_key(base.short, t, c), "ok")
    return outcome.status


def _build(exp, cell, jobs: int | None, progress: bool):
    """The commit's subject.Built, or why it does not build (a line)."""
    got = subjects.of(exp).built(cell, jobs=jobs, progress=progress)
    return short_error(got) if isinstance(got, str) else got


TOP_SIZES = 8      # bloat-o-meter lines kept per commit: the table shows what fits


def _compare_cells(rec, old: subjects.Built, new: subjects.Built, against: str, vs: str, t: str, c: str, asm: bool) -> list:
    from flagbench.run.engine import BenchCell
    kernel = old.files and old.files[0] == old.size_file

    def size(emit):
        from flagbench.size.measure import compare
        got = compare(str(old.size_file), str(new.size_file))
        tb = got.table
        names, deltas = tb.columns(TOP_SIZES, "names", "deltas")   # bloat-o-meter's largest lines
        facts = {"against": against, "sizes": [[str(n), int(d)] for n, d in zip(names, deltas)]}
        for metric, value in zip(ss.SIZE_METRICS, (tb.up - tb.down, tb.grow, tb.shrink, tb.add, tb.remove,
                                                   got.new.padding - got.old.padding)):
            emit(metric, value, facts=facts)

    def functions(emit):
        from flagbench.asm.compare import compare_files, compare_object_sets
        # counts and names only: each side's mix summed, not made function by function
        a = (compare_files(old.files[0], new.files[0], mix_each=False) if kernel
             else compare_object_sets(old.files, new.files))
        emit(ss.ASM_CHANGED, a.counts()["changed"],
             facts={"against": against, "functions": [f.name for f in a.functions if f.status != "same"]})

    prov = {"commit": rec.to_json()}
    out = [BenchCell("size", rec.short, t, c, {"vs": vs}, counted=size, count_executor="bloat-o-meter",
                     counted_metric=ss.SIZE_TOTAL.name, provenance=prov)]
    if asm:
        out.append(BenchCell("asm", rec.short, t, c, {"vs": vs}, counted=functions, count_executor="objdump",
                             counted_metric=ss.ASM_CHANGED.name, provenance=prov))
    return out


def _count_cells(exp, builds, by_short, workdir: Path) -> list:
    """Every counted bench once per built commit (exact counts: one run is the value)."""
    cells, notes = [], []
    host, guest = subjects.of(exp).commit_benches(exp.benches)
    if host:
        cells += _host_cells(exp, host, builds, workdir, notes)
    if guest:
        from flagbench.run.guest.guest import guest_cells
        cells += guest_cells(exp, guest, builds, workdir=workdir / "guest", notes=notes,
                             noise_floor=True, profile_top=0)   # the first commit booted twice: the floor its causes use
    out = []
    for cell in cells:
        if cell.counted is None or cell.bench.endswith(" kernel profile"):
            continue
        # in place: the guest's job adds its symbols' counts and A/A floor to this very dict
        cell.provenance["commit"] = by_short[cell.variant].to_json()
        out.append(replace(cell, timed=None))
    return out


def _timed_cells(exp, parent, child, short: str, by_short, workdir: Path, fleet) -> list:
    """The timed benches of CHILD and its first parent, one row per bench row (pair=CHILD)."""
    benches = [b for b in exp.benches if not b.guest]
    out = []
    for cell in _host_cells(exp, benches, [parent, child], workdir, [], fleet):
        if cell.timed is None:
            continue
        out.append(replace(cell, counted=None, params={**cell.params, "pair": short},
                           provenance={**cell.provenance, "commit": by_short[cell.variant].to_json()}))
    return out


def _host_cells(exp, benches, builds, workdir: Path, notes: list[str], fleet=None) -> list:
    """The benches' engine cells (run/kinds) over BUILDS; a bench whose programs cannot be made
    is bad input at its own line."""
    from flagbench.run.kinds import cells_for_bench

    cells = []
    for bench in benches:
        try:
            cells += cells_for_bench(bench, builds, root=exp.root, workdir=workdir, notes=notes, fleet=fleet)
        except DiskFull:
            raise
        except UserError as e:
            raise UserError(f"{exp.path}:{bench.line}: {e}") from None
    return cells
