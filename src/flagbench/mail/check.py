"""`flagbench check EXP`: a patch or a series on stdin (as b4 runs a check command: the message
on stdin), measured against its base, judged by the experiment's budgets:

    [check]
    size = "+1%"      # bloat-o-meter's total may grow by at most 1 %
    counts = "+2%"    # each counted bench's exact count by at most 2 %
    time = "+3%"      # (check counts, it does not time: reported as not measured)

and printed as b4 shows a check (a list of {tool, status pass|warn|fail, summary, url,
details}, details a JSON list of findings as b4's own checks write it) or as the check a CI
posts to patchwork ({state, context, description, target_url}). Nothing is posted anywhere.
Status: fail when a budget is exceeded or a patch does not build; warn when something could not
be measured (a patch does not apply, the base does not build); pass otherwise."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from flagbench.mail.run import MailRun

TOOL = "flagbench"
PW_STATE = {"pass": "success", "warn": "warning", "fail": "fail", "pending": "pending"}
_ORDER = {"pass": 0, "warn": 1, "fail": 2}


@dataclass
class Verdict:
    status: str = "pass"
    summary: str = ""
    findings: list[dict] = field(default_factory=list)    # {status, description}

    def worse(self, status: str) -> None:
        if _ORDER[status] > _ORDER[self.status]:
            self.status = status


def _pct(old: float, new: float) -> float | None:
    return None if not old else (new - old) / old * 100.0


def judge(run: MailRun) -> Verdict:
    """The series' tip (its last patch that applied and built) against its base."""
    v = Verdict()
    budgets = dict(run.exp.check)
    rows = run.series.rows
    base = rows[0]
    moved: list[tuple[float, str]] = []          # (how far over its budget, the phrase)
    for i, p in enumerate(run.mail.patches):
        row = run.rows[i]
        if row.error:
            status = "warn" if row.error.startswith("does not apply") else "fail"
            v.worse(status)
            what = row.error if row.error.startswith("does not ") else f"does not build: {row.error}"
            v.findings.append({"status": status, "description": f"{p.label} {p.subject}: {what}"})
            moved.append((1e9 if status == "fail" else 1e8, f"{p.label} {what}"))
    tip = next((r for r in reversed(rows[1:]) if r.built), None)
    if not base.built:
        v.worse("warn")
        moved.append((1e8, f"the base does not build: {base.error}"))
    elif tip is None:
        v.worse("warn")
        moved.append((1e7, "no patch applied and built: nothing measured"))
    else:
        _size(base, tip, budgets.get("size"), v, moved)
        _counts(base, tip, budgets.get("counts"), v, moved)
    if "time" in budgets:
        v.findings.append({"status": "pass", "description": f"time (budget +{budgets['time']:g}%): not measured: "
                           "check counts instructions; `flagbench run` times"})
    if not budgets:
        v.findings.append({"status": "pass", "description": "no [check] budgets in the experiment: nothing judged"})
    moved.sort(key=lambda m: -m[0])
    shown = [m for m in moved if m[0] > 0] or moved[:1]
    v.summary = "; ".join(m[1] for m in shown[:2]) or "no change in size or counts"
    if len(v.summary) > 160:
        v.summary = v.summary[:159] + "~"
    return v


def _over(pct: float | None, budget: float | None) -> float:
    if pct is None:
        return 0.0
    return pct / budget if budget else abs(pct) / 100.0


def _size(base, tip, budget, v: Verdict, moved) -> None:
    from flagbench.size.measure import compare

    t = compare(str(base.size_file), str(tip.size_file)).table
    pct = _pct(t.total_old, t.total_new)
    over = budget is not None and pct is not None and pct > budget
    if over:
        v.worse("fail")
    rows = sorted(zip(t.deltas, t.names), key=lambda r: -abs(r[0]))
    most = f", most {rows[0][1]} {rows[0][0]:+d} B" if rows else ""
    said = f"size {t.total_new - t.total_old:+d} B ({pct:+.2f}%" if pct is not None else "size ("
    said += f", budget +{budget:g}%)" if budget is not None else ")"
    moved.append((_over(pct, budget), said + most))
    v.findings.append({"status": "fail" if over else "pass",
                       "description": f"{said}: bloat-o-meter Total: Before={t.total_old}, After={t.total_new}"})
    for delta, name in rows[:20]:
        v.findings.append({"status": "pass", "description": f"function {name} {delta:+d} B"})


def _counts(base, tip, budget, v: Verdict, moved) -> None:
    for label, new in tip.counts.items():
        old = base.counts.get(label)
        if old is None:
            continue
        pct = _pct(old, new)
        over = budget is not None and pct is not None and pct > budget
        if over:
            v.worse("fail")
        said = f"{label} {new - old:+,.0f} ({pct:+.2f}%" if pct is not None else f"{label} {new - old:+,.0f} ("
        said += f", budget +{budget:g}%)" if budget is not None else ")"
        moved.append((_over(pct, budget), said))
        v.findings.append({"status": "fail" if over else "pass", "description": f"{said}: {old:,.0f} -> {new:,.0f}"})


def b4_json(v: Verdict, url: str = "") -> list[dict]:
    """What b4's check matrix reads from a check command's stdout."""
    return [{"tool": TOOL, "status": v.status, "summary": v.summary, "url": url,
             "details": json.dumps(v.findings)}]


def checkpatch_lines(v: Verdict) -> str:
    """For b4's `am-perpatch-check-cmd` / `prep-perpatch-check-cmd` (b4 am --check, b4 prep
    --check), which read a checkpatch-style command's lines: a line with ERROR: is a failure,
    any other a warning, no output (and exit 0) "passed all checks". So: nothing when the
    verdict passes, else the summary and each finding that is not a pass, one line each."""
    if v.status == "pass":
        return ""
    word = "ERROR" if v.status == "fail" else "WARNING"
    lines = [f"{word}: {TOOL}: {v.summary}"]
    for f in v.findings:
        if f["status"] != "pass":
            lines.append(f"{'ERROR' if f['status'] == 'fail' else 'WARNING'}: {TOOL}: {f['description']}")
    return "".join(" ".join(line.split()) + "\n" for line in lines)


def patchwork(experiment: str, v: Verdict, url: str = "", context: str | None = None) -> dict:
    """The check a CI posts to patchwork (POST /api/patches/ID/checks/): flagbench posts nothing."""
    name = context or f"{TOOL}-{re.sub(r'[^A-Za-z0-9_-]+', '-', experiment)}"
    return {"state": PW_STATE[v.status], "context": name, "description": v.summary[:255], "target_url": url}
