"""Series and bisect runs in the store: how a run over commits, its per-commit evidence and its
commits' provenance are written and read back (store.py's tables, nothing of their own).

A run over commits is an ordinary run of the store whose provenance says what it is:

    kind         "series" or "bisect" (KINDS)
    experiment_path, cell ("target/compiler"), repo, range
    commits      the commits in order (a series: the base first), each a checked
                 provenance.CommitRecord: sha, tree, subject, parents (first parent first)
    and the kind's own (a series' options, a bisection's metric and threshold)

Its evidence are samples and cells like any run's, one engine cell per measurement, the cell key
"SHORT/TARGET/COMPILER[:k=v,...]" with SHORT the commit's 12-hex short sha (cell_key):

    bench "build"   cell SHORT/t/c: build_s, cached; ok, or failed with why it did not build;
                    facts: files (what size and asm read), size_file
    bench "size"    cell SHORT/t/c:vs=parent|base: size_total, functions_grown, functions_shrunk,
                    functions_added, functions_removed, padding; facts: against (the short sha)
    bench "asm"     cell SHORT/t/c:vs=parent: asm_changed; facts: functions, against
    a bench's name  its own counted metrics (exact counts) per commit; with a place, timed samples
                    in paired rounds: cell SHORT/t/c:...,pair=CHILD (the commit CHILD and its first
                    parent, measured in the same rounds)
    bench "done"    cell BASE/t/c, no samples: the engine's pass over the series ended (a rerun
                    builds nothing)
    bench "step"    (bisect) cell SHORT/t/c: the step's value (or its timed decision); failed:
                    the commit did not build (a skipped step)

Every sample's provenance names its commit (`commit`: a CommitRecord's JSON, in the cell's part
of provenance.SampleRecord) and every metric is declared (metrics.Metric) before it is stored.

API (stable; watch and mail build on it):

    run_key(kind, *parts) -> str                 the hash a run resumes by (its experiment_hash)
    open_run(store, kind, name, key, commits, provenance, fresh=False) -> int
    kind_of(run) -> str | None                   "series", "bisect", or None (a `flagbench run`)
    commits_of(run) -> list[CommitRecord]        the run's commits in order
    cell_key(short, target, compiler, **params) -> str
    record(store, run_id, key, bench, cell, commit, values, *, facts=None, failed=None)
                                                 one measurement stored directly (a build's)
    evidence(store, run_id) -> Evidence          every commit's stored values, facts and failures
    records(repo, commits) -> list[CommitRecord] vcs.Commits with their parents, as runs store them
    is_ancestor(repo, old, new) -> bool
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from flagbench.metrics import Metric, count
from flagbench.provenance import CommitRecord, SampleRecord
from flagbench.store import Store, split_cell

KINDS = ("series", "bisect")

# what a series stores of each commit (beside its benches' own metrics)
BUILD_S = Metric("build_s", "s", side=True)
CACHED = Metric("cached", "", exact=True)           # 1: no compiler or make ran for it
SIZE_TOTAL = count("size_total", "bytes")            # bloat-o-meter's up/down total
GROWN = count("functions_grown", "functions")
SHRUNK = count("functions_shrunk", "functions")
ADDED = count("functions_added", "functions")
REMOVED = count("functions_removed", "functions")
PADDING = count("padding", "bytes")                  # between functions
ASM_CHANGED = count("asm_changed", "functions")      # whose normalised code changed
SIZE_METRICS = (SIZE_TOTAL, GROWN, SHRUNK, ADDED, REMOVED, PADDING)
OWN_BENCHES = ("build", "size", "asm", "step", "done")


def run_key(kind: str, *parts) -> str:
    """The experiment_hash of a run over commits: what a second invocation resumes by."""
    if kind not in KINDS:
        raise ValueError(f"a run over commits is one of {KINDS}, not {kind!r}")
    text = json.dumps([kind, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def open_run(store: Store, kind: str, name: str, key: str, commits: list[CommitRecord], provenance: dict,
             fresh: bool = False) -> int:
    """The latest run of KEY (resumed), or a new one holding the commits and PROVENANCE."""
    run_id = None if fresh else store.latest_run(key)
    if run_id is None:
        run_id = store.start_run(name, key, {**provenance, "kind": kind,
                                             "commits": [c.to_json() for c in commits]})
    return run_id


def kind_of(run: dict) -> str | None:
    kind = (run.get("provenance") or {}).get("kind")
    return kind if kind in KINDS else None


def commits_of(run: dict) -> list[CommitRecord]:
    """The run's commits in order, checked (a damaged store raises ProvenanceError)."""
    return [CommitRecord.from_json(c) for c in (run.get("provenance") or {}).get("commits") or []]


def cell_key(short: str, target: str, compiler: str, **params) -> str:
    items = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{short}/{target}/{compiler}" + (f":{items}" if items else "")


def sample_record(key: str, commit: CommitRecord, target: str, compiler: str, executor: str = "flagbench",
                  facts: dict | None = None) -> SampleRecord:
    """The provenance of a value measured once (a count) of COMMIT."""
    return SampleRecord(key, commit.short, target, compiler, executor, "count", 0, 0, time.time(),
                        cell={"commit": commit.to_json()}, facts=dict(facts or {}))


def record(store: Store, run_id: int, key: str, bench: str, cell: str, commit: CommitRecord,
           values: list[tuple[Metric, float]], *, facts: dict | None = None, failed: str | None = None) -> None:
    """One measurement of COMMIT stored directly (not through the engine: a build, which must
    happen in the commits' order): its metrics declared, its values in one transaction, its cell
    finished (ok, or failed with the reason)."""
    parts = split_cell(cell)
    store.declare_metrics(run_id, [m for m, _ in values])
    prov = sample_record(key, commit, parts["target"], parts["compiler"], facts=facts)
    store.add_samples(run_id, [(bench, cell, m.name, v, m.unit, "flagbench", prov) for m, v in values])
    store.finish_cell(run_id, bench, cell, "failed" if failed else "ok", failed)


@dataclass
class Measured:
    """One stored cell of one commit."""
    bench: str
    params: dict
    status: str                                   # "ok", "failed", or "" (not finished: killed)
    reason: str = ""
    values: dict[str, float] = field(default_factory=dict)      # metric -> the counted value
    timed: dict[str, list[dict]] = field(default_factory=dict)  # metric -> timed samples (store rows)
    facts: dict = field(default_factory=dict)


@dataclass
class Evidence:
    run: dict
    commits: list[CommitRecord]
    metrics: dict                                 # name -> Metric, as declared
    by_commit: dict[str, list[Measured]]          # short sha -> its cells, in the order stored

    def cell(self, short: str, bench: str, **params) -> Measured | None:
        want = {k: str(v) for k, v in params.items()}
        return next((m for m in self.by_commit.get(short, []) if m.bench == bench and m.params == want), None)

    def benches(self, short: str) -> list[Measured]:
        """The commit's cells of the experiment's own benches (not build/size/asm/step)."""
        return [m for m in self.by_commit.get(short, []) if m.bench not in OWN_BENCHES]


# what a cell's provenance keeps for the table: a build's files, a size or asm comparison's
# lines, and a guest's per-symbol kernel counts and A/A floor (causes.PROFILE_KEY, FLOOR_KEY)
_FACTS_KEPT = ("files", "size_file", "against", "functions", "sizes", "kernel_profile_per_iter",
               "aa_noise_floor_kernel_per_iter",
               "detail", "verdict", "decided", "cause", "total", "floor")   # a bisection step's: bisect/stored.FACTS


def evidence(store: Store, run_id: int) -> Evidence:
    """Everything stored of a run over commits, by commit: read from the store alone."""
    run = store.run(run_id)
    commits = commits_of(run)
    cells: dict[tuple[str, str], Measured] = {}
    for c in store.cells(run_id):
        parts = split_cell(c["cell"])
        cells[(c["bench"], c["cell"])] = Measured(c["bench"], parts["params"], c["status"], c["reason"] or "")
    for s in store.samples(run_id):
        m = cells.setdefault((s["bench"], s["cell"]), Measured(s["bench"], s["params"], ""))
        prov = s["provenance"]
        if prov.get("job") == "sample":
            m.timed.setdefault(s["metric"], []).append(s)
        else:
            m.values[s["metric"]] = s["value"]
        m.facts.update({k: prov[k] for k in _FACTS_KEPT if k in prov})
    by_commit: dict[str, list[Measured]] = {}
    for (_, cell), m in cells.items():
        by_commit.setdefault(split_cell(cell)["variant"], []).append(m)
    return Evidence(run, commits, store.metrics(run_id), by_commit)


def _git(repo: Path, *args: str):
    from flagbench import procs
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    return procs.run(["git", "-C", str(repo), *args], timeout=120, env=env)


def is_ancestor(repo: Path, old: str, new: str) -> bool:
    return _git(repo, "merge-base", "--is-ancestor", old, new).returncode == 0


def records(repo: Path, commits: list) -> list[CommitRecord]:
    """vcs.Commits as CommitRecords, each with its parents (first parent first)."""
    done = _git(repo, "rev-list", "--parents", "--no-walk=unsorted", *(c.sha for c in commits))
    parents = {}
    for line in done.stdout.splitlines():
        sha, *theirs = line.split()
        parents[sha] = tuple(theirs)
    return [CommitRecord.of(c, parents.get(c.sha, ())) for c in commits]
