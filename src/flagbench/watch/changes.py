"""Changes found in a branch's stored history (not per pair only).

    exact   a commit whose counted metric moved by attribution (cause.judge: a move of
            functions whose code changed past the threshold, or elsewhere beyond the floor)
    timed   change points of each timed metric's level over the commits that were timed
            (edivisive.py): one noisy pair alone is not a change, a step spread over
            several is; the level at a commit that was not timed is its parent's (its code
            on the measured path is the same), so only timed commits can be change points

A commit that does not build has no values: it is a row of the history, never a change.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from flagbench.watch.edivisive import change_points
from flagbench.watch.evidence import Evidence


@dataclass
class Finding:
    branch: str
    kind: str                 # "exact" or "timed"
    metric: str
    sha: str
    parent: str               # the commit it is compared with
    subject: str
    base: list[float]
    head: list[float]
    unit: str
    cause_line: str
    cause: str
    changed: list[str] = field(default_factory=list)
    also: list[tuple[str, list[float], list[float]]] = field(default_factory=list)  # the commit's other rows
    objects: list[str] = field(default_factory=list)   # --objects: the bisection's lines (watch/objects.py)

    @property
    def percent(self) -> float:
        b, h = statistics.median(self.base), statistics.median(self.head)
        return 100.0 * (h - b) / b if b else 0.0


@dataclass
class History:
    branch: str
    rows: list[tuple[str, str, bool, Evidence | None]]   # (sha, subject, on the branch, evidence)


def exact_findings(h: History, threshold_pct: float, judge_all) -> list[Finding]:
    out = []
    by_sha = {sha: ev for sha, _, _, ev in h.rows if ev is not None}
    for sha, subject, on, ev in h.rows:
        if not on or ev is None or not ev.built or not ev.compared_with:
            continue
        base = by_sha.get(ev.compared_with)
        base_profile = base.profile if base is not None else {}
        timed_rows = [(m, t["base"], t["head"]) for m, t in ev.timed.items() if t["base"] and t["head"]]
        for v in judge_all(ev, base_profile, ev.profile, threshold_pct):
            if v.moved:
                out.append(Finding(h.branch, "exact", v.metric, sha, ev.compared_with, subject, [v.base], [v.head],
                                   "insns", v.line, v.cause, list(v.changed_on_path), timed_rows, list(ev.objects)))
    return out


def timed_findings(h: History, threshold_pct: float, judge_all) -> list[Finding]:
    """Change points of each timed metric over the branch's timed commits."""
    series: dict[str, list[tuple[str, float, Evidence]]] = {}
    for sha, _, on, ev in h.rows:
        if not on or ev is None or not ev.timed:
            continue
        for metric, t in ev.timed.items():
            if not t["head"] or not t["base"]:
                continue
            points = series.setdefault(metric, [])
            if not points:   # the level before the first timed commit: its parent's samples
                points.append((ev.compared_with, statistics.median(t["base"]), None))
            points.append((sha, statistics.median(t["head"]), ev))
    subjects = {sha: subject for sha, subject, _, _ in h.rows}
    by_sha = {sha: ev for sha, _, _, ev in h.rows if ev is not None}
    out = []
    for metric, points in series.items():
        for i in change_points([p[1] for p in points]):
            sha, _, ev = points[i]
            if ev is None:
                continue
            t = ev.timed[metric]
            base = by_sha.get(ev.compared_with)
            verdicts = judge_all(ev, base.profile if base else {}, ev.profile, threshold_pct)
            v = next((v for v in verdicts if v.cause == "direct"), verdicts[0] if verdicts else None)
            line = v.line if v else "cause: unknown: no exact counts for this bench"
            out.append(Finding(h.branch, "timed", metric, sha, ev.compared_with, subjects.get(sha, ""),
                               list(t["base"]), list(t["head"]), t["unit"], line,
                               v.cause if v else "unknown", list(v.changed_on_path) if v else [],
                               [(m, [n], [x]) for m, n, x in ((v.metric, v.base, v.head),) if v]))
    return out
