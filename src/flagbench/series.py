"""`flagbench series EXP BASE..HEAD`: what each commit of a series does, one row per commit.

The base and each commit of `git rev-list --reverse BASE..HEAD` become variants of the
experiment (its first variant, or --variant, with `ref` set to the commit: refspec.py), built
in order: a kernel walks one `O=` directory commit by commit (kbuild/build.py, as ktest.pl
walks a series; ccache across), C sources are read from each commit's tree (content-cached
objects). Each commit that builds is compared with its FIRST PARENT (for a merge too, and said
so; where the first parent did not build, with the nearest first-parent ancestor that did) and
with the base:

    size     bloat-o-meter's total delta (size/: its numbers byte for byte), functions
             grown/shrunk (and added/removed), padding between functions
    asm      functions whose code changed (asm/: normalised, so moved code is not a change)
    counts   every counted bench's exact values (guest benches: kernel instructions per
             iteration), from one counted run each: exact counts need no repeats
    time     with --host/--place: each commit against its first parent in paired rounds there

A series is a run of the store (series_store.py): the builds are recorded as they finish, every
measurement is an engine cell (run/engine.py; series_cells.run_series), and the table is read
back from the store (`load`, here), so `flagbench report RUN` prints it again without building,
and a killed series run again resumes from what was stored. This module is the table's model and
its reading; series_table.py prints it; cli/series.py is the face.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from flagbench import series_store
from flagbench.causes import FLOOR_KEY, PROFILE_KEY
from flagbench.errors import UserError
from flagbench.provenance import CommitRecord


KERNEL_TOTAL = "kernel_insns_per_iter"    # the count a guest's per-symbol counts add up to


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
    sizes: list[tuple[str, int]] = field(default_factory=list)   # bloat-o-meter's largest lines: name, delta


@dataclass
class Timed:
    """A bench's time of a commit against its first parent, in paired rounds on a place."""
    label: str              # "bench metric"
    estimate: float         # ratio commit / parent
    low: float | None
    high: float | None
    pairs: int


@dataclass
class Row:
    commit: CommitRecord
    built: bool = False
    error: str = ""                   # why it did not build (or measure)
    files: list[Path] = field(default_factory=list)   # what size and asm read: a vmlinux, or objects
    size_file: Path | None = None     # vmlinux, or the objects' archive
    counts: dict[str, float] = field(default_factory=dict)   # counted metric -> value
    compared_with: str = ""           # the short sha of the commit compared with ("": none)
    vs_parent: Delta | None = None
    vs_base: Delta | None = None
    timed: list[Timed] = field(default_factory=list)
    seconds: float = 0.0              # building it
    cached: bool = False              # no compiler or make ran for it
    profiles: dict[str, dict[str, float]] = field(default_factory=dict)  # counted metric -> symbol -> count
    floors: dict[str, float] = field(default_factory=dict)   # counted metric -> its A/A floor, where measured


@dataclass
class Series:
    name: str                         # the experiment's
    path: str                         # the experiment file
    cell: str                         # target/compiler
    repo: str
    range: str
    rows: list[Row]                   # the base first
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    run_id: int | None = None
    place: str = ""                   # where commits were timed ("": not timed)
    measured: dict[str, str] = field(default_factory=dict)   # bench -> the function a micro bench times

    def row(self, short: str) -> Row | None:
        """The row of the commit whose short sha is SHORT (what `Row.compared_with` names). A scan,
        not a cached index: rows are added and replaced while a series runs, and are a few dozen."""
        return next((r for r in self.rows if r.commit.short == short), None)

    def floor(self, label: str) -> float | None:
        """LABEL's A/A floor: the first row that measured one (the series' first commit)."""
        return next((r.floors[label] for r in self.rows if label in r.floors), None)


def load(store, run_id: int) -> Series:
    """A stored series run as its table shows it: read from the store alone, nothing built."""
    ev = series_store.evidence(store, run_id)
    prov = ev.run["provenance"]
    if series_store.kind_of(ev.run) != "series":
        raise UserError(f"{store.path}: run {run_id} is not a series")
    target, _, compiler = str(prov.get("cell", "/")).partition("/")
    rows = [_row(ev, c) for c in ev.commits]
    by_short = {r.commit.short: r for r in rows}
    notes = [n for n in prov.get("notes") or [] if isinstance(n, str)]
    for r in rows:
        if r.vs_parent is not None and r.compared_with in by_short:
            r.vs_parent.counts = _count_deltas(by_short[r.compared_with], r)
        if r.vs_base is not None and rows[0].built:
            r.vs_base.counts = _count_deltas(rows[0], r)
        r.timed = _timed(ev, r, by_short.get(r.compared_with))
        for m in ev.benches(r.commit.short):
            if m.status == "failed" and "pair" not in m.params:
                notes.append(f"{r.commit.short} {_label(m)}: not counted: {m.reason.splitlines()[0] if m.reason else '?'}")
    measured = prov.get("measured_functions")
    measured = {str(k): str(v) for k, v in measured.items()} if isinstance(measured, dict) else {}
    return Series(ev.run["experiment"], str(prov.get("experiment_path", "")), f"{target}/{compiler}",
                  str(prov.get("repo", "")), str(prov.get("range", "")), rows, notes,
                  sum(r.seconds for r in rows), run_id, str(prov.get("place") or ""), measured)


def _label(m) -> str:
    return m.bench + "".join(f" {k}={v}" for k, v in m.params.items() if k not in ("pair", "host"))


def _row(ev, c: CommitRecord) -> Row:
    row = Row(c)
    b = ev.cell(c.short, "build")
    if b is None:
        row.error = "not built (the run was stopped: run it again to resume)"
        return row
    row.built, row.error = b.status == "ok", "" if b.status == "ok" else b.reason
    row.seconds, row.cached = b.values.get("build_s", 0.0), bool(b.values.get("cached", 0))
    row.files = [Path(f) for f in b.facts.get("files") or []]
    row.size_file = Path(b.facts["size_file"]) if b.facts.get("size_file") else None
    for m in ev.benches(c.short):
        if "pair" not in m.params:
            for metric, value in m.values.items():
                row.counts[f"{_label(m)} {metric}"] = float(value)
            _guest_facts(row, m)
    row.vs_parent = _delta(ev, c.short, "parent")
    row.vs_base = _delta(ev, c.short, "base")
    if row.vs_parent is not None:
        row.compared_with = ev.cell(c.short, "size", vs="parent").facts.get("against", "")
    return row


def _guest_facts(row: Row, m) -> None:
    """A guest bench's counted cell keeps every symbol its kernel ran and, on the base, the A/A
    floor: what attributes a kernel count's move to the functions whose code changed."""
    key = f"{_label(m)} {KERNEL_TOTAL}"
    profile, floor = m.facts.get(PROFILE_KEY), m.facts.get(FLOOR_KEY)
    if isinstance(profile, dict):
        row.profiles[key] = {str(k): float(v) for k, v in profile.items() if isinstance(v, (int, float))}
    if isinstance(floor, (int, float)) and floor >= 0:
        row.floors[key] = float(floor)


def _delta(ev, short: str, vs: str) -> Delta | None:
    s = ev.cell(short, "size", vs=vs)
    if s is None or s.status != "ok":
        return None
    v = {k: int(x) for k, x in s.values.items()}
    d = Delta(v.get("size_total", 0), v.get("functions_grown", 0), v.get("functions_shrunk", 0),
              v.get("functions_added", 0), v.get("functions_removed", 0), v.get("padding", 0))
    d.sizes = [(str(p[0]), int(p[1])) for p in s.facts.get("sizes") or []
               if isinstance(p, list) and len(p) == 2 and isinstance(p[1], (int, float))]
    a = ev.cell(short, "asm", vs=vs)
    if a is not None and a.status == "ok":
        d.changed = int(a.values.get("asm_changed", 0))
        d.functions = list(a.facts.get("functions") or [])
    return d


def _count_deltas(old: Row, new: Row) -> dict[str, float]:
    return {k: new.counts[k] - old.counts[k] for k in new.counts if k in old.counts}


def _timed(ev, row: Row, parent: Row | None) -> list[Timed]:
    """Each timed bench of the commit against its parent, from the samples of their shared rounds."""
    from flagbench.stats import change, in_rounds

    if parent is None:
        return []
    out = []
    for m in ev.benches(row.commit.short):
        if m.params.get("pair") != row.commit.short:
            continue
        other = ev.cell(parent.commit.short, m.bench, **m.params)
        for metric, new in m.timed.items():
            old = (other.timed.get(metric) if other is not None else None) or []
            if not old or not new:
                continue
            a, b, _, _, paired = in_rounds([s["value"] for s in old], [s["value"] for s in new],
                                           [s["provenance"].get("round") for s in old],
                                           [s["provenance"].get("round") for s in new])
            declared = ev.metrics.get(metric)
            c = change(a, b, paired=paired, higher_is_better=bool(declared and declared.higher_is_better))
            out.append(Timed(f"{_label(m)} {metric}", c.estimate, c.ci_low, c.ci_high, len(a)))
    return out


def exit_status(series: Series) -> int:
    """0 when the base and some commit after it built (a series with one commit that does not
    build is news, not a failure); 1 when the base or every commit after it failed."""
    if not series.rows[0].built:
        return 1
    return 0 if len(series.rows) == 1 or any(r.built for r in series.rows[1:]) else 1
