"""A bisection as a run of the store (series_store.py): each commit it measures is measured
once, by the engine (run/engine.py), into the run; a bisection killed and run again reads the
steps it already took from the store and measures only the rest.

    the run      kind "bisect"; key: the experiment, the cell, the bench, the metric, the good
                 and bad commits (and, for time, the threshold and the step's settings: a timed
                 step's verdict is measured, an exact one is computed from the stored value)
    a step       the subject's engine cells of that commit (its bench's counted cells, a size
                 cell, or one timed decision against the good end), then bench "step", cell
                 SHORT/t/c: the step's value in the bisection's Metric (declared: unit,
                 exactness, direction), or failed: "does not build: ..." / "does not run: ..."

`once` runs cells through the engine into a store of their own (a `--run-step`, an object mix):
nothing there is resumed, but nothing is measured outside the engine either.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from flagbench import series_store as ss
from flagbench.metrics import Metric
from flagbench.provenance import CommitRecord

NOT_BUILT = "does not build: "
NOT_MEASURED = "does not run: "   # it built; its bench crashed, timed out or printed garbage
FACTS = ("detail", "verdict", "decided",     # a timed step's (bisect/timed.py)
         "cause", "total", "floor")          # an attributed one's (bisect/attributed.py)


class StoredBisect:
    """The steps of one bisection, each measured once (see the module doc)."""

    def __init__(self, store, subject, metric: Metric, commits: list, *, key_extra=(), fresh: bool = False,
                 provenance: dict | None = None):
        self.store, self.subject, self.metric = store, subject, metric
        cell = subject.cell
        self.target, self.compiler = cell.target, cell.compiler
        self.records = {r.sha: r for r in ss.records(subject.repository(), commits)}
        self.key = ss.run_key("bisect", subject.exp.hash, f"{cell.variant.name}/{self.target}/{self.compiler}",
                              getattr(subject.bench, "name", None), metric.name, [c.sha for c in commits],
                              *key_extra)
        self.run_id = ss.open_run(store, "bisect", subject.exp.name, self.key, list(self.records.values()), {
            "experiment_path": str(subject.exp.path), "cell": f"{self.target}/{self.compiler}",
            "repo": str(subject.repository()), "metric": metric.to_json(), **(provenance or {})}, fresh=fresh)
        self.measured = 0                 # steps measured by this process (not read from the store)

    def stored(self, commit) -> tuple[float | None, str, dict] | None:
        """(value, why not, facts) of a step already in the store; None when it is not."""
        m = ss.evidence(self.store, self.run_id).cell(commit.short, "step")
        if m is None or not m.status:
            return None
        if m.status == "failed":
            return None, m.reason, m.facts
        return m.values.get(self.metric.name), "", m.facts

    def value(self, commit, cells_of) -> tuple[float | None, str, dict]:
        """The step's (value, why not, facts): from the store, else built and measured now.
        CELLS_OF(build) gives the engine cells measuring the build; their values of the
        bisection's metric add up to the step's value."""
        have = self.stored(commit)
        if have is not None:
            return have
        rec = self.records[commit.sha]
        key = ss.cell_key(rec.short, self.target, self.compiler)
        build = self.subject.build(commit)
        if build is None:
            why = NOT_BUILT + self.subject.why
            ss.record(self.store, self.run_id, self.key, "step", key, rec, [], failed=why)
            return None, why, {}
        cells = [_named(c, rec) for c in cells_of(build)]
        value, facts, failure = _engine(self.store, self.run_id, self.key, self.subject.exp.name, cells,
                                        self.metric.name)
        self.measured += 1
        if failure:
            why = NOT_MEASURED + failure
            ss.record(self.store, self.run_id, self.key, "step", key, rec, [], failed=why)
            return None, why, {}
        ss.record(self.store, self.run_id, self.key, "step", key, rec, [(self.metric, value)], facts=facts)
        return value, "", facts


def _named(cell, rec: CommitRecord):
    """A subject's cell as the commit's: its column the short sha, its provenance the commit."""
    from dataclasses import replace
    return replace(cell, variant=rec.short, provenance={**cell.provenance, "commit": rec.to_json()})


def _engine(store, run_id: int, key: str, name: str, cells: list, metric: str) -> tuple[float, dict, str]:
    """Run CELLS into the run: (their values of METRIC summed, the facts of the last, a failure)."""
    from flagbench.run.engine import run_cells

    if not cells:
        return 0.0, {}, "no cell measures it"
    outcome = run_cells(store, cells, experiment=name, experiment_hash=key, progress=False)
    if outcome.run_id != run_id:
        raise RuntimeError(f"the engine measured into run {outcome.run_id}, not the bisection's {run_id}")
    if outcome.status > 1:
        raise KeyboardInterrupt()
    if outcome.failed:
        return 0.0, {}, outcome.failed[0][2].splitlines()[0] if outcome.failed[0][2] else "failed"
    wanted = {(c.bench, c.key) for c in cells}
    total, facts, seen = 0.0, {}, 0
    for s in store.samples(run_id):
        if (s["bench"], s["cell"]) in wanted and s["metric"] == metric:
            total, seen = total + s["value"], seen + 1
            facts = {k: s["provenance"][k] for k in FACTS if k in s["provenance"]}
    if not seen:
        return 0.0, {}, f"no {metric} value"
    return total, facts, ""


def once(cells: list, metric: str, workdir: Path, name: str = "flagbench bisect", keep: dict | None = None) -> float:
    """CELLS run by the engine into a store of their own (under WORKDIR): METRIC's values summed
    (their facts put in KEEP). A failed cell (its bench crashed or timed out) is a StepFailed naming it."""
    from flagbench.store import Store

    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workdir) as d, Store(Path(d) / "once.db") as store:
        key = ss.run_key("bisect", name, [c.key for c in cells], d)
        run_id = store.start_run(name, key, {"kind": "bisect"})
        value, facts, failure = _engine(store, run_id, key, name, cells, metric)
    if keep is not None:
        keep.update(facts)
    if failure:
        from flagbench.errors import StepFailed
        raise StepFailed(f"{cells[0].bench} at {cells[0].variant}: {failure}" if cells else failure)
    return value


def report(store, run_id: int, fmt: str) -> str:
    """A stored bisection's steps, from the store alone: text or md (a line a step), or json."""
    import json

    from flagbench import export
    from flagbench.export import safe

    ev = ss.evidence(store, run_id)
    prov = ev.run["provenance"]
    metric = Metric.from_json(prov["metric"]) if isinstance(prov.get("metric"), dict) else None
    steps = []
    for c in ev.commits:
        m = ev.cell(c.short, "step")
        if m is None or not m.status:
            continue
        steps.append({"sha": c.sha, "short": c.short, "subject": c.subject, "ok": m.status == "ok",
                      "value": m.values.get(metric.name) if metric and m.status == "ok" else None,
                      "why": m.reason or None, **{k: m.facts[k] for k in ("detail", "verdict") if k in m.facts}})
    unit = f" {metric.unit}" if metric and metric.unit else ""
    head = (f"flagbench bisect: {ev.run['experiment']} {prov.get('cell', '')}, {prov.get('range', '')}, metric "
            f"{metric.name if metric else '?'} (run {run_id}): {len(steps)} commits measured")
    lines = [f"{s['short']} {s['subject'][:50]!r}: "
             + ((s.get("detail") or f"{s['value']:,.2f}{unit}") if s["ok"] else s["why"]) for s in steps]
    doc = {"run": run_id, "kind": "bisect", "experiment": prov.get("experiment_path"), "range": prov.get("range"),
           "metric": prov.get("metric"), "steps": steps}
    return export.render(fmt, {
        "text": lambda: safe("text", head) + "\n" + "".join(f"  {safe('text', ln)}\n" for ln in lines),
        "md": lambda: f"**{safe('md', head)}**\n\n" + "".join(f"- {safe('md', ln)}\n" for ln in lines),
        "json": lambda: json.dumps(doc, indent=1) + "\n"})
