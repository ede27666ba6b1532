"""The summary at the top of a case: one line per bench and target, like the first paragraph of a
commit message: each variant's verdict and change in time, its exact-count change (work: what the
program executed, never a speed verdict), its size change; every number a link to the table it
comes from. Where work and time point different ways (more instructions, yet faster) the line
says so: both are true, and the time is the speed.

A sweep (several rows) is summarised as benchstat does, by the geometric mean of the per-row
ratios, with how many rows were faster, slower or `~`; with more than three compared columns
(memcpy implementations) the first compared one (the file's "new") and the best and the worst of
the others are named.
"""
from __future__ import annotations

from collections import Counter

from flagbench.report.cells import geomean_ratio, pct, table_anchor
from flagbench.report.doc import Grid, Inline, Link
from flagbench.report.tables import Table

MAX_NAMED = 3


def _timed_entry(t: Table, variant: str) -> tuple[str, float] | None:
    changes = [r.changes[variant] for r in t.rows if variant in r.changes]
    if not changes:
        return None
    if len(changes) == 1:
        c = changes[0]
        text = f"~ {pct(c.estimate)} %" if c.verdict == "~" else f"{pct(c.estimate)} % {c.verdict}"
        bands = [r.band_verdicts[variant] for r in t.rows if variant in r.band_verdicts]
        if bands:
            text += f", {bands[0]}"
        return text, c.estimate
    g = geomean_ratio(changes)
    if g is None:
        return None
    n = Counter(c.verdict for c in changes)
    tally = ", ".join(f"{n[v]} {v}" for v in ("faster", "slower", "~") if n[v])
    return f"geomean {pct(g)} % ({tally} of {len(changes)})", g


def _exact_entry(t: Table, variant: str) -> tuple[str, float] | None:
    """The change of the first count the table's metrics declare a summary label for (metrics.py:
    instructions per iteration or per byte; a booted guest's kernel instructions)."""
    for count, m in t.counts.items():
        changes = [r.changes[variant] for r in t.rows
                   if r.params.get("count") == count and variant in r.changes]
        if not m.label or not changes:
            continue
        what = m.label
        if len(changes) == 1:
            c = changes[0]
            return f"{(c.ratio - 1) * 100:+.2f} % {what}", c.ratio
        g = geomean_ratio(changes)
        if g is not None:
            return f"geomean {pct(g)} % {what}", g
    return None


def _is_profile(t: Table) -> bool:
    """A table of per-symbol counts ("insns_per_iter:SYMBOL" rows, a guest's kernel profile)."""
    return t.exact and bool(t.rows) and all(":" in str(r.params.get("count", "")) for r in t.rows)


def _entries(t: Table | None, prefix: str, pick, higher_better: bool) -> list[Inline]:
    """The cell of one table for every compared variant: "name: change" links, or best and worst."""
    if t is None:
        return ["-"]
    found = [(v, e) for v in t.variants[1:] if (e := pick(t, v))]
    if not found:
        return ["-"]
    anchor = table_anchor(t, prefix)
    if len(t.variants) == 2:
        return [Link(found[0][1][0], anchor)]
    if len(found) > 1 and len({text for _, (text, _) in found}) == 1:   # all alike: say it once
        return [Link(f"all {len(found)}: {found[0][1][0]}", anchor)]
    if len(found) > MAX_NAMED:   # the first compared column (the file's "new"), then best and worst
        first = found[0]
        ranked = sorted(found[1:], key=lambda ve: ve[1][1], reverse=higher_better)
        out: list[Inline] = [f"vs {t.variants[0]}: ", Link(f"{first[0]} {first[1][0]}", anchor), "; best "]
        out += [Link(f"{ranked[0][0]} {ranked[0][1][0]}", anchor), ", worst ",
                Link(f"{ranked[-1][0]} {ranked[-1][1][0]}", anchor)]
        return out
    out = []
    for i, (v, (text, _)) in enumerate(found):
        out += (["; "] if i else []) + [Link(f"{v} {text}", anchor)]
    return out


def case_summary(tables: list[Table], *, prefix: str, baseline: str,
                 sizes: dict[tuple[str, str, str], tuple[str, str]] | None = None) -> Grid:
    """The summary grid of one case. `sizes` maps (variant, target, compiler) to (text, anchor)
    of that cell's size change against the baseline."""
    sizes = sizes or {}
    groups: dict[tuple[str, str, str], list[Table]] = {}
    for t in tables:
        groups.setdefault((t.bench, t.target, t.compiler), []).append(t)
    rows: list[list] = []
    covered = set()
    for (bench, target, compiler), ts in groups.items():
        if all(_is_profile(t) for t in ts):   # per-symbol rows: detail for the tables below
            continue
        timed = next((t for t in ts if not t.exact and not (t.measure and t.measure.side)), None)
        exact = next((t for t in ts if t.exact), None)
        up = bool(timed and timed.measure and timed.measure.higher_is_better)
        variants = (timed or exact).variants[1:]
        size_cell: list[Inline] = []
        texts = {sizes[(v, target, compiler)][0] for v in variants if (v, target, compiler) in sizes}
        if len(variants) > 1 and len(texts) == 1 and all((v, target, compiler) in sizes for v in variants):
            text, anchor = sizes[(variants[0], target, compiler)]
            size_cell = [Link(f"all {len(variants)}: {text}", anchor)]
            covered |= {(v, target, compiler) for v in variants}
            variants = []
        for v in variants:
            if (v, target, compiler) in sizes:
                text, anchor = sizes[(v, target, compiler)]
                size_cell += (["; "] if size_cell else []) + [Link(text if len(variants) == 1 else f"{v} {text}",
                                                                    anchor)]
                covered.add((v, target, compiler))
        work = _entries(exact, prefix, _exact_entry, False)
        if timed and exact and len(timed.variants) == 2 and _disagree(timed, exact):
            work += ["; work and time disagree: the time is the speed"]
        time_cell = _entries(timed, prefix, _timed_entry, up)
        if timed is None and exact and any(r.params.get("count") == "kernel_insns_per_iter" for r in exact.rows):
            time_cell = ["no timing verdict: a booted guest's time is emulated"]
        rows.append([[bench], [f"{target}/{compiler}"], time_cell, work, size_cell or ["-"]])
    for (v, target, compiler), (text, anchor) in sizes.items():   # cells without a bench: size only
        if (v, target, compiler) not in covered and not any(k[1:] == (target, compiler) for k in covered):
            alone = sum(1 for k in sizes if k[1:] == (target, compiler)) == 1
            rows.append([["(size only)"], [f"{target}/{compiler}"], ["-"], ["-"],
                         [Link(text if alone else f"{v} {text}", anchor)]])
    against = f" vs {baseline}" if all(t.variants[0] == baseline for t in tables) else ""   # else each cell says
    return Grid(["bench", "target", f"time{against}", f"work (exact count){against}", f"size{against}"], rows,
                align="lllll")


def _disagree(timed: Table, exact: Table) -> bool:
    """The variant does more work yet is faster, or less work yet slower (one compared variant)."""
    v = timed.variants[1]
    verdicts = {r.changes[v].verdict for r in timed.rows if v in r.changes} - {"~"}
    found = _exact_entry(exact, v)
    if len(verdicts) != 1 or found is None or found[1] == 1.0:
        return False
    more_work = found[1] > 1.0
    return (verdicts == {"faster"} and more_work) or (verdicts == {"slower"} and not more_work)
