"""`run --until`: sample on, round after round, until every row's interval is as narrow as asked
or the time budget is spent.

A fixed number of samples is a guess made before the noise is known: on a quiet machine 10 are
plenty, on a shared one they end with intervals like [-38 %, +320 %]. With `--until 2%` the run
takes its samples as usual, then looks at each table row (a bench's variants at one parameter
point): the 95 % interval of each variant's ratio to the row's baseline (paired by round, as the
report computes it, contended rounds set aside; a row goes on until enough rounds ran clear of
bursts for that). A row whose interval is wider than +-2 % gets more rounds, as many as the
spread seen says it needs (at most doubling at a time, so a burst of load does not set the whole
budget's plan); the others are left alone.

Why stopping on the interval's width and not on a verdict: stopping when p < alpha is "optional
stopping", which calls A/A differences far more often than alpha. The width of the interval
does not depend on where it lies, so stopping on it keeps the test's level (the A/A benchmark,
bench/aa_false_positive.py --until, measures it).

>>> parse_width("2%"), parse_width("0.5"), parse_budget("90s"), parse_budget("10m"), parse_budget("1h")
(0.02, 0.005, 90.0, 600.0, 3600.0)
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Hashable

from flagbench import stats
from flagbench.errors import UserError
from flagbench.run.layout import split_layout_column


@dataclass(frozen=True)
class Until:
    width: float                   # wanted half-width of each row's 95 % interval, relative (0.02: +-2 %)
    budget_s: float = 600.0        # wall seconds of measuring, the first samples included
    order: tuple[str, ...] = ()    # column order: the first of a row's columns in it is the baseline


@dataclass(frozen=True)
class Need:
    """One row still too wide: its pairs, the widest half-width now, the rounds to add."""
    row: Hashable
    label: str
    pairs: int
    half: float | None             # None: too few pairs for an interval yet
    extra: int


def parse_width(text: str) -> float:
    """'2%' or '2' is +-2 %; a plain number is in percent."""
    try:
        value = float(text.strip().rstrip("%")) / 100
    except ValueError:
        value = math.nan
    if not 0.0001 <= value <= 0.5:
        raise UserError(f"--until {text!r}: give the interval's half-width in percent, 0.01..50 (e.g. 2%)")
    return value


def parse_budget(text: str) -> float:
    """'90', '90s', '10m', '1h'."""
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    scale = units.get(t[-1:], None)
    try:
        value = float(t[:-1] if scale else t) * (scale or 1)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise UserError(f"--budget {text!r}: give a time such as 300, 90s, 10m or 1h")
    return value


def runs(samples: list[dict], metrics: dict[tuple[str, str], str]) -> dict[tuple[str, str], list[tuple]]:
    """Each cell's timed runs as (round, mean of the run's values of the cell's timed metric, CPU share,
    wall seconds), in the order taken; `metrics` maps (bench, cell key) to that metric."""
    found: dict[tuple, list] = {}
    for s in samples:
        prov = s.get("provenance") or {}
        ident = (s["bench"], s["cell"])
        if prov.get("job") != "sample" or metrics.get(ident) != s["metric"]:
            continue
        key = (*ident, prov.get("sample"))
        if key not in found:
            contention = prov.get("contention") or {}
            found[key] = [prov.get("round"), [], contention.get("cpu_share"), contention.get("wall_s") or 0.0]
        found[key][1].append(float(s["value"]))
    out: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for (bench, cell, _), (rnd, values, share, wall) in found.items():
        out[(bench, cell)].append((rnd, sum(values) / len(values), share, wall))
    return out


def needs(taken: dict[tuple[str, str], list[tuple]], cells: dict[tuple[str, str], tuple[Hashable, str, str, str]],
          until: Until) -> list[Need]:
    """The rows whose interval is wider than `until.width`, and the rounds each should add.
    `taken` is each cell's runs (`runs`); `cells` maps (bench, cell key) to (row, column, timed
    metric, row label)."""
    rows: dict[Hashable, dict[str, tuple]] = defaultdict(dict)
    labels = {}
    for ident, (row, column, _, label) in cells.items():
        if split_layout_column(column) is None:     # layout relinks give a band, not an interval
            rows[row][column] = taken.get(ident, [])
            labels[row] = label
    out = []
    for row, columns in rows.items():
        base = next((c for c in until.order if c in columns), next(iter(columns)))
        widest, pairs, extra = 0.0, None, 0
        for column, got in columns.items():
            if column == base:
                continue
            n, half, more = _need(columns[base], got, until.width)
            if more:
                extra = max(extra, more)
                widest = None if half is None or widest is None else max(widest, half)
                pairs = n if pairs is None else min(pairs, n)
        if extra:
            out.append(Need(row, labels[row], pairs or 0, widest, extra))
    return out


def _need(old: list[tuple], new: list[tuple], width: float) -> tuple[int, float | None, int]:
    """(pairs, half-width, rounds to add) for one column against the baseline."""
    total = min(len(old), len(new))
    def field(got: list[tuple], k: int) -> list:   # runs are (round, value, share, wall)
        return [x[k] for x in got]
    a, b, sa, sb, paired = stats.in_rounds(field(old, 1), field(new, 1), field(old, 0), field(new, 0),
                                           field(old, 2), field(new, 2))
    if min(len(a), len(b)) == 0:
        return 0, None, stats.MIN_SAMPLES_CI
    c = stats.change(a, b, shares_old=sa, shares_new=sb, paired=paired)
    keep = stats.uncontended(sa, sb) if paired else None
    clean = None if keep is None else int((keep[0] & keep[1]).sum())
    if clean is not None and clean < stats.MIN_SAMPLES_CI:
        # too few rounds ran clear of a burst to set the others aside: more, until enough do
        half = None if c.ci_low is None else math.expm1((math.log(c.ci_high) - math.log(c.ci_low)) / 2)
        wanted = (stats.MIN_SAMPLES_CI - clean) * total / max(clean, 1)
        return c.n_old, half, max(1, min(math.ceil(wanted), total))
    if c.ci_low is None:
        return c.n_old, None, max(stats.MIN_SAMPLES_CI - c.n_old, 1) if min(a + b) > 0 else 0
    half = (math.log(c.ci_high) - math.log(c.ci_low)) / 2
    if half <= math.log1p(width):
        return c.n_old, math.expm1(half), 0
    kept = max(min(c.n_old, c.n_new), 1)
    wanted = stats.samples_needed(kept, c.ci_low, c.ci_high, width) * total / kept   # contended rounds too
    return c.n_old, math.expm1(half), max(1, min(math.ceil(wanted) - total, total))


def seconds_per_round(cell_runs: list[list[tuple]]) -> float:
    """How long one more round of a row takes: the mean wall seconds of each of its cells' runs."""
    return sum(sum(w for *_, w in got) / len(got) for got in cell_runs if got)


def until_note(until: Until, unresolved: list[Need]) -> str:
    """What `--until` achieved, for the run's log.

    >>> until_note(Until(0.02, 60), [])
    'every row is resolved to +-2.0 % or better'
    >>> print(until_note(Until(0.02, 60), [Need("r", "rates row=1 (x86_64/gcc)", 14, 0.034, 9)]))
    1 row is still wider than +-2.0 % after the 1 min budget: rates row=1 (x86_64/gcc) +-3.4 % after 14 pairs
    """
    def pct(x: float) -> str:
        return f"+-{x * 100:.1f} %"
    if not unresolved:
        return f"every row is resolved to {pct(until.width)} or better"
    budget = f"{until.budget_s / 60:g} min" if until.budget_s >= 60 else f"{until.budget_s:g} s"
    rows = "; ".join(f"{n.label} " + (f"{pct(n.half)} after {n.pairs} pairs" if n.half is not None
                                      else f"{n.pairs} pairs, no interval yet") for n in unresolved[:5])
    more = f"; and {len(unresolved) - 5} more" if len(unresolved) > 5 else ""
    return (f"{len(unresolved)} row{'s are' if len(unresolved) > 1 else ' is'} still wider than "
            f"{pct(until.width)} after the {budget} budget: {rows}{more}")
