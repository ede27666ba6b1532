"""`--objects`: a kernel commit whose count moved, bisected to the object files that carry the
move (flagbench.bisect.objects, as `flagbench bisect --objects` does: the two commits built in
checkouts and O= directories of their own, the earlier one's relinked by Kbuild with some of
the later one's objects, booted and counted; the set carrying most of the move found by
halving). Done once, when the commit is measured: its lines are kept with the commit's
evidence and go into the finding's report.
"""
from __future__ import annotations

from pathlib import Path

from flagbench.errors import UserError

SHARE = 0.8    # the smallest set of objects carrying this much of the move, as bisect's default


def bisect(pair, verdict, workdir: Path, notes: list[str], say=lambda _: None) -> list[str]:
    """The object bisection's summary lines (or one line saying why there is none)."""
    from flagbench.bisect.objects import bisect_objects, summary

    bench = verdict.metric.split(" ", 1)[0]
    a, b = pair.base.short, pair.head.short
    try:
        out = bisect_objects(pair.dexp, [a, b], metric="insns", bench=bench, share=SHARE,
                             workdir=Path(workdir) / f"objects-{b}", say=say, jobs=pair.subject.jobs or 2)
    except UserError as e:   # a mix that does not link or boot: the finding stands without its objects
        line = f"objects of {b} against {a}: not bisected: {str(e).splitlines()[0] if str(e) else e}"
        notes.append(line)
        return [line[:99]]
    found = out.narrowed.objects
    head = (f"{PREFIX}{', '.join(found)} ({out.narrowed.share * 100:.0f} % of the move; "
            f"{len(out.candidates)} of {out.total_objects} objects differ)")
    return [head[:99], *(line[:99] for line in summary(out))]


PREFIX = "objects carrying it: "


def carriers(lines: list[str]) -> list[str]:
    """The objects named by the first of BISECT's lines."""
    if not lines or not lines[0].startswith(PREFIX):
        return []
    return [o.strip() for o in lines[0][len(PREFIX):].split(" (", 1)[0].split(",") if o.strip()]
