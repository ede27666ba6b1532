"""Verdicts for benchmark samples: is variant B faster, slower, or `~` the same as A?

Modelled on benchstat: medians, a 95 % confidence interval for the ratio new/old, a two-sided
rank test (Mann-Whitney U for two samples, Wilcoxon signed-rank for the pairs of one round: see
stats.ranks), and `~` unless both say the difference is real.

On a shared machine the samples of A and B are not alike by default: each sample should be one
run of the program (the report averages the values one run emits), and `change` takes each
sample's CPU share (CPU time over wall time, run/noise.py) to set aside samples that ran through
a burst of load, and (unpaired) refuses a verdict when A and B ran under different load. An A/A control
(the baseline measured twice) gives `reach`, the smallest change a run may call. A `~` with an
interval says how many samples per side would resolve the change seen (`needed`).

The result is a `Change` (`change` for noisy samples, `exact_change` for deterministic counts);
the size and asm stages have their own `SizeComparison` and `AsmComparison`. A `Metric`
(metrics.py, declared where the number is emitted and stored with the run) says what a number is:
its unit, whether it is exact work or noisy time, and which direction is better.

>>> c = change([10.0, 10.2, 9.9, 10.1, 10.0, 10.3, 9.8, 10.1, 10.0],
...            [12.1, 11.9, 12.0, 12.2, 12.0, 11.8, 12.3, 12.1, 12.0])
>>> c.verdict, round(c.ratio, 2), c.ci_low > 1, c.p_value < 0.05
('slower', 1.2, True, True)
>>> change([1, 2, 3], [1, 2, 3]).verdict, change([1, 2, 3], [1, 2, 3]).ci_low
('~', None)
>>> exact_change(1000, 1250).ratio
1.25
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from flagbench.metrics import EXACT_UNITS, Metric, guess  # noqa: F401
from flagbench.stats.ranks import (MIN_SAMPLES_CI, paired_ratio_interval, ratio_estimate_interval, samples_needed,
                                   signed_rank_p)

MIN_SAMPLES_QUIET = 9     # below this: a "too few samples" warning (as compare.py)
HIGH_SPREAD = 0.10        # IQR/median above this: a "high spread" warning
# A timed sample whose programs got less than this fraction of the typical good CPU share of
# its comparison (the upper quartile of both sides' shares; noise.Contention: CPU time over
# wall time) ran beside a burst of something else: set aside when enough samples remain.
CONTENDED = 0.85
# Below this typical share the job mostly waited (start-up, perf's attach, a harness that times
# only its own loop): its CPU share says nothing about the samples' contention, and is not used.
CPU_BOUND = 0.5
RESOLVE_AT_LEAST = 0.02   # the smallest change the advice on a wide interval aims to resolve


# What a number measures is declared where it is emitted (metrics.py) and stored with the run;
# `metric` reads an undeclared one (an old database, a program's own output lines) by its name.
metric = guess


@dataclass(frozen=True)
class Change:
    """The statistical verdict on the change from sample `old` to sample `new` of one metric.

    Its field names are the report's JSON keys (report/__init__.py): renaming one breaks readers."""

    metric: str
    n_old: int
    n_new: int
    median_old: float
    median_new: float
    ratio: float                  # median_new / median_old
    ci_low: float | None          # 95 % CI of the ratio new/old (of `estimate`, not of `ratio`)
    ci_high: float | None
    p_value: float | None         # Mann-Whitney U, two-sided
    verdict: str                  # "faster" | "slower" | "~" | "exact"
    warnings: tuple[str, ...] = ()
    higher_is_better: bool = False
    alpha: float = 0.05
    # The Hodges-Lehmann estimate of the ratio (median of the pairwise ratios new_i/old_j): the
    # point estimate the Moses interval belongs to, so it always lies inside [ci_low, ci_high].
    # The ratio of medians can fall outside that interval (-49.0 % [-50.1, -49.2] was printed
    # once); print this one beside an interval. None where there is no interval.
    hl_ratio: float | None = None
    # When the verdict is "~" with an interval: samples per side that would narrow the interval
    # to +-resolve (the observed change, at least RESOLVE_AT_LEAST) at the spread seen.
    needed: int | None = None
    resolve: float | None = None
    paired: bool = False          # n_old == n_new rounds compared pair by pair (signed-rank)

    @property
    def relative(self) -> float:
        """Relative change new/old - 1, e.g. 0.05 for +5 %."""
        return self.ratio - 1.0

    @property
    def estimate(self) -> float:
        """The ratio to print: the interval's own estimate when there is an interval, else medians'."""
        return self.ratio if self.hl_ratio is None else self.hl_ratio


def _ratio(new: float, old: float) -> float:
    if old == 0:
        return 1.0 if new == 0 else math.inf
    return new / old


def _spread(values: np.ndarray) -> float:
    median = float(np.median(values))
    if median == 0:
        return 0.0
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1) / abs(median)



def uncontended(shares_old: Sequence[float | None] | None, shares_new: Sequence[float | None] | None,
                limit: float = CONTENDED) -> tuple[np.ndarray, np.ndarray] | None:
    """Which samples ran without a burst of contention: their CPU share is at least `limit` of the
    upper quartile of both sides' shares (one lucky sample does not set the bar; the same rule
    for A and B, so setting samples aside favours neither). None when a share is unknown, or
    when the jobs were not CPU-bound (typical share below CPU_BOUND).

    >>> [m.tolist() for m in uncontended([1.0, 0.5, 0.98], [0.99, 1.0, 0.6])]
    [[True, False, True], [True, True, False]]
    >>> uncontended([0.1, 0.12, 0.07], [0.11, 0.1, 0.13]) is None
    True
    """
    if not shares_old or not shares_new or any(x is None for x in (*shares_old, *shares_new)):
        return None
    a, b = np.asarray(shares_old, dtype=float), np.asarray(shares_new, dtype=float)
    typical = float(np.percentile(np.concatenate([a, b]), 75))
    if typical < CPU_BOUND:
        return None
    return a >= limit * typical, b >= limit * typical


def contention_differs(shares_old: Sequence[float], shares_new: Sequence[float], alpha: float = 0.05) -> float | None:
    """p of "A's and B's samples got different CPU shares" (Mann-Whitney): when they did, a
    difference in speed may be the machine's, not the variant's. None when it cannot be said.

    >>> contention_differs([1.0] * 6, [0.5] * 6) < 0.05, contention_differs([1.0, 0.9] * 3, [0.9, 1.0] * 3)
    (True, 1.0)
    """
    a, b = np.asarray(shares_old, dtype=float), np.asarray(shares_new, dtype=float)
    if min(a.size, b.size) < MIN_SAMPLES_CI:
        return None
    if np.unique(np.concatenate([a, b])).size == 1:
        return 1.0
    from scipy.stats import mannwhitneyu
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)



def change(old: Sequence[float], new: Sequence[float], *, higher_is_better: bool = False,
           alpha: float = 0.05, metric: str = "", shares_old: Sequence[float | None] | None = None,
           shares_new: Sequence[float | None] | None = None, floor: float | None = None,
           paired: bool = False) -> Change:
    """The change between two samples of a noisy metric (times by default: lower is better).

    `shares_old`/`shares_new`: each sample's CPU share (noise.Contention.cpu_share); samples that
    ran through a burst of contention are set aside when enough remain, and, unpaired, no verdict
    is given when A's and B's shares differ (the machine, not the variant, may explain the change).
    `floor`: the smallest relative change this run may call (an A/A control's reach): the
    whole interval must lie beyond +-floor for a verdict.
    `paired`: old[i] and new[i] were measured in one round, in a random order (see the module's
    docstring): compared pair by pair, a contended pair set aside whole.

    >>> a = [10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 9.5, 12.5]     # load moves both members of a pair
    >>> b = [x * 1.03 for x in a]
    >>> change(a, b).verdict, change(a, b, paired=True).verdict
    ('~', 'slower')
    """
    a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("change needs at least one sample on each side")
    if paired and a.size != b.size:
        raise ValueError("paired samples come in pairs")
    warnings: list[str] = []
    refuse = None
    keep = uncontended(shares_old, shares_new) if len(a) == len(shares_old or ()) \
        and len(b) == len(shares_new or ()) else None
    if keep is not None:
        if paired:
            keep = (keep[0] & keep[1],) * 2
        sa, sb = np.asarray(shares_old, dtype=float), np.asarray(shares_new, dtype=float)
        n_cont = int((~keep[0]).sum() + (~keep[1]).sum())
        what = (f"{int((~keep[0]).sum())} of {a.size} rounds ran contended" if paired else
                f"{n_cont} of {a.size + b.size} samples ran contended") + \
            f" (< {CONTENDED:.0%} of the typical CPU share)"
        if n_cont and min(keep[0].sum(), keep[1].sum()) >= MIN_SAMPLES_CI:
            a, b, sa, sb = a[keep[0]], b[keep[1]], sa[keep[0]], sb[keep[1]]
            warnings.append(f"{what}: set aside")
        elif n_cont:
            warnings.append(what)
        p_share = None if paired else contention_differs(sa, sb)
        if p_share is not None and p_share < alpha:
            refuse = (f"A and B ran under different contention (their CPU shares differ, p={p_share:.3f}): "
                      f"not called; measure on a quieter machine")
            warnings.append(refuse)
    med_a, med_b = float(np.median(a)), float(np.median(b))
    n_min = min(a.size, b.size)
    what = "pairs" if paired else "samples"
    if n_min < MIN_SAMPLES_CI:
        warnings.append(f"too few {what} for a confidence interval (n={n_min} < {MIN_SAMPLES_CI})")
    elif n_min < MIN_SAMPLES_QUIET:
        warnings.append(f"too few {what} (n={n_min} < {MIN_SAMPLES_QUIET}): interval is wide")
    for side, values in (("old", a), ("new", b)):
        spread = _spread(values)
        if spread > HIGH_SPREAD:
            warnings.append(f"high spread in {side}: IQR/median {spread:.0%}")

    found, p_value = None, None
    if n_min >= MIN_SAMPLES_CI:
        found = paired_ratio_interval(a, b, alpha) if paired else ratio_estimate_interval(a, b, alpha)
        if found is None:
            warnings.append("values <= 0: no ratio interval")
        p_value = _p_value(a, b, paired)
    hl, ci = (None, None) if found is None else (found[0], found[1:])

    verdict, needed = "~", None
    reach = 1.0 + (floor or 0.0)
    if ci is not None and p_value is not None and p_value < alpha and refuse is None:
        if ci[0] > reach or ci[1] < 1 / reach:
            verdict = "faster" if (ci[0] > 1.0) == higher_is_better else "slower"
        elif not ci[0] <= 1.0 <= ci[1]:
            warnings.append(f"within the A/A control's reach (+-{floor:.1%}): not called")
    target = 0.0
    if verdict == "~" and ci is not None and refuse is None:
        target = max(abs(math.log(hl)), math.log(reach), math.log1p(RESOLVE_AT_LEAST))
        if (math.log(ci[1]) - math.log(ci[0])) / 2 > target:   # else resolved: no change beyond +-target
            needed = samples_needed(n_min, ci[0], ci[1], math.expm1(target))
    return Change(metric=metric, n_old=int(a.size), n_new=int(b.size), median_old=med_a,
                  median_new=med_b, ratio=_ratio(med_b, med_a),
                  ci_low=None if ci is None else ci[0], ci_high=None if ci is None else ci[1],
                  p_value=p_value, verdict=verdict, warnings=tuple(warnings),
                  higher_is_better=higher_is_better, alpha=alpha, hl_ratio=hl, needed=needed,
                  resolve=None if needed is None else math.expm1(target), paired=paired)


def _p_value(a: np.ndarray, b: np.ndarray, paired: bool) -> float:
    """Two-sided p: signed-rank on the pairs' log-ratios, else Mann-Whitney U."""
    if paired:
        if (a <= 0).any() or (b <= 0).any():
            return signed_rank_p(b - a)
        return signed_rank_p(np.log(b) - np.log(a))
    if np.array_equal(np.unique(a), np.unique(b)) and np.unique(a).size == 1:
        return 1.0  # all values identical: scipy would divide by zero
    from scipy.stats import mannwhitneyu
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def reach(control: Change | None) -> float | None:
    """The smallest relative change a run may call, from its A/A control (the baseline against
    itself): the farther end of the control's interval. None without a control interval.

    >>> reach(change([10, 10.1, 9.9, 10, 10.2, 9.8], [10.1, 10.3, 9.9, 10, 10.2, 10.0])) > 0
    True
    """
    if control is None or control.ci_low is None:
        return None
    return max(control.ci_high, 1 / control.ci_low) - 1


def exact_change(old: float, new: float, *, metric: str = "") -> Change:
    """Deterministic counts (instructions, loads, stores): the numbers and their ratio, verdict "exact".

    >>> c = exact_change(400, 300, metric="insns")
    >>> c.verdict, c.ratio, c.ci_low, c.p_value
    ('exact', 0.75, None, None)
    """
    return Change(metric=metric, n_old=1, n_new=1, median_old=float(old), median_new=float(new),
                  ratio=_ratio(float(new), float(old)), ci_low=None, ci_high=None, p_value=None,
                  verdict="exact", warnings=())


def pct(ratio: float) -> str:
    """A ratio as a signed percentage with one decimal: 1.05 -> "+5.0"."""
    return f"{(ratio - 1) * 100:+.1f}"


def fmt_exact(c: Change) -> str:
    """An exact change as printed: "+17.00 % exact", or the difference where A is zero."""
    if c.median_old == 0:        # no ratio from zero: the difference itself
        return f"{c.median_new:+g} exact"
    return f"{(c.ratio - 1) * 100:+.2f} % exact"
