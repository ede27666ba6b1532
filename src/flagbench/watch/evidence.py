"""One commit's evidence against the commit before it on the branch (its first parent, or the
nearest first-parent ancestor that built), measured on the series' road: each commit is a
series run of the store (series_store.py: kind "series", commits [before, commit]) whose builds
are recorded and whose size, asm, counted and (where loop.py asks) timed cells the engine runs
(series_cells.py's cells), so `flagbench report RUN` shows any commit the watch measured.

    size       bloat-o-meter's total and grown/shrunk/added/removed functions, padding
    changed    functions whose normalised code changed (asm/: moved code is not a change)
    counts     every counted bench's exact value at the commit (one run: exact counts); the
               commit before it was counted in its own run (never twice)
    profile    per-symbol exact counts (callgrind / the qemu plugin) of micro benches, taken
               where attribution needs them (loop.py), kept in the store by the commit's tree;
               a kernel's: every symbol its guest benches ran in the commit's booted kernel
               (the counted cell keeps them: no second boot)
    floor      a kernel's A/A floor (the first commit watched booted twice, one ignored
               command-line word), carried to every later commit: the configuration's
    timed      the timed benches of the pair in the engine's paired rounds, on the place given

`Evidence` is the watch's summary of that run (ledger.py keeps it, with the run's id).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from flagbench import series, series_cells, spec
from flagbench import series_store as ss
from flagbench.causes import FLOOR_KEY, PROFILE_KEY
from flagbench.provenance import CommitRecord

KERNEL_COUNT = "kernel_insns_per_iter"   # what a kernel commit's verdict is about (causes.TOTALS)


# where the road puts it: series_cells (its latest), series (before)
_commit_experiment = getattr(series_cells, "commit_experiment", None) or getattr(series, "commit_experiment")


@dataclass
class Evidence:
    sha: str
    compared_with: str = ""            # the sha of the commit it is compared with ("" for the first)
    built: bool = False
    error: str = ""
    size: dict = field(default_factory=dict)        # size_total, functions_grown, ... padding
    changed: list[str] = field(default_factory=list)  # functions whose code changed (or were added/removed)
    counts: dict[str, float] = field(default_factory=dict)        # "bench metric" -> value at this commit
    base_counts: dict[str, float] = field(default_factory=dict)   # ... at compared_with
    profile: dict[str, dict[str, float]] = field(default_factory=dict)   # bench -> symbol -> per iter
    timed: dict[str, dict] = field(default_factory=dict)  # "bench metric" -> {"base": [..], "head": [..], "unit"}
    timed_reason: str = ""             # why it was timed, or why not ("code identical on the measured path")
    floor: dict[str, float | None] = field(default_factory=dict)   # "bench metric" -> a kernel's A/A floor
    causes: dict[str, str] = field(default_factory=dict)   # "bench metric" -> its cause line against the base
    objects: list[str] = field(default_factory=list)       # --objects: the object bisection's lines
    run_id: int = 0                    # the series run holding it
    seconds: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Evidence":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Subject:
    """The experiment as the watch builds it: one variant at every commit, one target/compiler."""
    exp: spec.Experiment
    template: spec.Variant
    target: str
    compiler: str
    jobs: int | None = None

    @property
    def kernel(self) -> bool:
        from flagbench import subject
        return subject.of(self.exp).kind == "kernel"

    @property
    def key(self) -> str:
        """What a commit's evidence depends on besides the commit: the experiment's file (not its
        sources: they are read at each commit), the variant's flags, target and compiler."""
        text = "\0".join([Path(self.exp.path).read_text(errors="replace"),
                          repr((self.template.cflags, self.template.optional_cflags, self.template.defines)),
                          self.target, self.compiler])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def cell(self) -> spec.Cell:
        return spec.Cell(self.template, self.target, self.compiler)


@dataclass
class Pair:
    """A commit and the one it is compared with, as one series run of the store."""
    subject: Subject
    records: list[CommitRecord]        # [before, commit], or [commit] for the first one watched
    dexp: spec.Experiment
    key: str
    run_id: int
    built: dict = field(default_factory=dict)   # short -> series_cells._Built
    errors: dict = field(default_factory=dict)  # short -> why it did not build

    @property
    def head(self) -> CommitRecord:
        return self.records[-1]

    @property
    def base(self) -> CommitRecord | None:
        return self.records[0] if len(self.records) == 2 else None


def open_pair(store, subject: Subject, repo: Path, watch: str, commits, parents: dict) -> Pair:
    """The pair's series run (resumed if it exists), both commits built and their builds recorded."""
    records = [CommitRecord.of(c, parents.get(c.sha, ())) for c in commits]
    dexp, missing = _commit_experiment(subject.exp, subject.template, list(commits))
    t, c = subject.target, subject.compiler
    key = ss.run_key("series", "watch", subject.key, [r.sha for r in records])
    run_id = ss.open_run(store, "series", subject.exp.name, key, records, {
        "experiment_path": str(subject.exp.path), "cell": f"{t}/{c}", "repo": str(repo),
        "range": "..".join(r.short for r in records), "notes": [], "place": "",
        "variants": [r.short for r in records], "watch": watch})
    pair = Pair(subject, records, dexp, key, run_id)
    stored = ss.evidence(store, run_id)
    for rec, v in zip(records, dexp.variants):
        t0 = time.monotonic()
        got = missing.get(v.name) or series_cells._build(dexp, replace(subject.cell, variant=v), subject.jobs, False)
        if isinstance(got, str):
            pair.errors[rec.short] = got
        else:
            pair.built[rec.short] = got
        if stored.cell(rec.short, "build") is None:
            ok = rec.short in pair.built
            facts = {"files": [str(f) for f in got.files], "size_file": str(got.size_file)} if ok else {}
            cached = float(bool(getattr(got, "cached", False)))
            ss.record(store, run_id, key, "build", ss.cell_key(rec.short, t, c), rec,
                      [(ss.BUILD_S, time.monotonic() - t0), (ss.CACHED, cached)],
                      facts=facts, failed=pair.errors.get(rec.short))
    return pair


def measure_exact(store, pair: Pair, workdir: Path, counted_in: int = 0, floor: bool = False) -> None:
    """Size and asm of the head against the base, and the head's counted benches, by the engine
    (or copied from run COUNTED_IN, which counted them: a commit compared again after a bisection).
    A kernel's counted benches are its guest benches, in the head's booted kernel (FLOOR: booted
    twice, for the A/A floor)."""
    from flagbench.run.engine import run_cells

    t, c = pair.subject.target, pair.subject.compiler
    head = pair.head
    if head.short not in pair.built:
        return
    cells = []
    if pair.base is not None and pair.base.short in pair.built:
        cells += series_cells._compare_cells(head, pair.built[pair.base.short], pair.built[head.short],
                                             pair.base.short, "parent", t, c, True)
    if pair.subject.kernel:
        counted = tuple(b for b in pair.dexp.benches if b.guest)
    else:
        counted = tuple(replace(b, metrics=("insns",)) for b in pair.dexp.benches if "insns" in b.metrics)
    if counted and counted_in:
        copy_counts(store, pair, head, counted_in)
    elif counted and pair.subject.kernel:
        cells += _guest_cells(pair, counted, workdir, floor)
    elif counted:   # only the counted metric: no timed program linked to be thrown away
        cells += series_cells._count_cells(replace(pair.dexp, benches=counted), [pair.built[head.short].build],
                                           {head.short: head}, workdir)
    run_cells(store, cells, experiment=pair.subject.exp.name, experiment_hash=pair.key, progress=False)


def _guest_cells(pair: Pair, benches, workdir: Path, floor: bool) -> list:
    """The head's guest benches counted in its booted kernel (one boot, two with FLOOR)."""
    from flagbench.run.guest.guest import guest_cells

    head = pair.head
    out = []
    for c in guest_cells(pair.dexp, benches, [pair.built[head.short].build], workdir=workdir / "guest", notes=[],
                         noise_floor=floor, profile_top=0):
        if c.counted is None:
            continue
        c.provenance["commit"] = head.to_json()   # in place: the job adds its symbols' counts to this dict
        out.append(replace(c, timed=None))
    return out


def guest_facts(store, run: int, short: str) -> dict[tuple, dict]:
    """(bench, its params) -> what a guest's counted cell of commit SHORT kept beside its count: every
    symbol's count per iteration, the A/A floor where it was measured."""
    out = {}
    for s in store.samples(run):
        prov = s["provenance"]
        if s["variant"] == short and s["metric"] == KERNEL_COUNT and isinstance(prov.get(PROFILE_KEY), dict):
            out[(s["bench"], _params(s["params"]))] = {k: prov[k] for k in (PROFILE_KEY, FLOOR_KEY) if k in prov}
    return out


def _params(params: dict) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in params.items()))


def copy_counts(store, pair: Pair, rec: CommitRecord | None, run: int) -> None:
    """REC's counted values, from the run that counted them, into the pair's run (said in their
    facts): `flagbench report RUN` shows the pair's count deltas, and nothing is counted twice."""
    if rec is None or not run or rec.short not in pair.built:
        return
    mine = ss.evidence(store, pair.run_id)
    theirs = ss.evidence(store, run)
    kept = guest_facts(store, run, rec.short) if pair.subject.kernel else {}
    t, c = pair.subject.target, pair.subject.compiler
    for m in theirs.benches(rec.short):
        if "pair" in m.params or not m.values or mine.cell(rec.short, m.bench, **m.params) is not None:
            continue
        declared = [(theirs.metrics[k], v) for k, v in m.values.items() if k in theirs.metrics]
        cell = ss.cell_key(rec.short, t, c, **m.params)
        if declared:
            ss.record(store, pair.run_id, pair.key, m.bench, cell, rec, declared,
                      facts={"detail": f"counted in run {run}", **kept.get((m.bench, _params(m.params)), {})})


def measure_timed(store, pair: Pair, workdir: Path, fleet, samples: int | None) -> None:
    """The timed benches of the pair in paired rounds (the engine's), into the pair's run."""
    from flagbench.run.engine import run_cells

    benches = tuple(replace(b, metrics=("time",), **({} if samples is None else {"samples": samples}))
                    for b in pair.dexp.benches if "time" in b.metrics and not b.guest)
    if pair.subject.kernel or not benches or pair.base is None or len(pair.built) < 2:
        return
    by_short = {r.short: r for r in pair.records}
    cells = series_cells._timed_cells(replace(pair.dexp, benches=benches), pair.built[pair.base.short].build,
                                      pair.built[pair.head.short].build, pair.head.short, by_short, workdir, fleet)
    run_cells(store, cells, experiment=pair.subject.exp.name, experiment_hash=pair.key, progress=False)


def read(store, pair: Pair, base_counts: dict[str, float]) -> Evidence:
    """The watch's summary of the pair's stored run."""
    head, base = pair.head, pair.base
    ev = Evidence(head.sha, base.sha if base is not None else "", head.short in pair.built,
                  pair.errors.get(head.short, ""), run_id=pair.run_id)
    if not ev.built:
        return ev
    e = ss.evidence(store, pair.run_id)
    size = e.cell(head.short, "size", vs="parent")
    if size is not None and size.status == "ok":
        ev.size = {k: int(v) for k, v in size.values.items()}
    asm = e.cell(head.short, "asm", vs="parent")
    if asm is not None and asm.status == "ok":
        ev.changed = list(asm.facts.get("functions") or [])
    kernel = pair.subject.kernel
    facts = guest_facts(store, pair.run_id, head.short) if kernel else {}
    for m in e.benches(head.short):
        label = m.bench + "".join(f" {k}={v}" for k, v in m.params.items() if k != "pair")
        if "pair" not in m.params:
            ev.counts.update({f"{label} {metric}": float(v) for metric, v in m.values.items()
                              if not kernel or metric == KERNEL_COUNT})
            kept = facts.get((m.bench, _params(m.params)), {})
            if PROFILE_KEY in kept:
                ev.profile[m.bench] = {str(k): float(v) for k, v in kept[PROFILE_KEY].items()}
            if kernel and m.values:   # None: not measured at this commit (loop.py carries the first one's)
                ev.floor[f"{label} {KERNEL_COUNT}"] = kept.get(FLOOR_KEY)
            continue
        other = e.cell(base.short, m.bench, **m.params) if base is not None else None
        for metric, samples in m.timed.items():
            old = (other.timed.get(metric) if other is not None else None) or []
            ev.timed[f"{label} {metric}"] = {"base": [s["value"] for s in old], "head": [s["value"] for s in samples],
                                             "unit": samples[0]["unit"] if samples else ""}
    ev.base_counts = dict(base_counts)
    return ev


def profile(store, pair: Pair, workdir: Path) -> dict[str, dict[str, float]]:
    """Per-symbol exact counts of the experiment's micro benches at the head (kept in the store
    under the head's tree and the subject: taken once)."""
    from flagbench.profile_experiment import profile_experiment

    micro = [b for b in pair.dexp.benches if b.kind == "micro" and b.runs_on(pair.subject.target)]
    built = pair.built.get(pair.head.short)
    if pair.subject.kernel:   # the counted cells kept them (read)
        return read(store, pair, {}).profile
    if not micro or built is None:
        return {}
    keyed = replace(pair.dexp, hash=f"watch:{pair.subject.key}:{pair.head.tree}")
    got, _ = profile_experiment(keyed, [built.build], micro, store=store, workdir=workdir, perf=False,
                                say=lambda _: None)
    return {p.bench: dict(p.symbols) for p in got if p.exact}
