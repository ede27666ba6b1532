"""Verdicts for benchmark samples: is variant B faster, slower, or `~` the same as A?

Modelled on benchstat: medians, a 95 % confidence interval for the ratio new/old,
a two-sided Mann-Whitney U test, and `~` unless both say the difference is real.

Why this interval: the Hodges-Lehmann / Moses interval on log(values). The ratio
new/old is a shift of log(time); the interval is read off the sorted pairwise
log-differences log(new_i) - log(old_j) at ranks given by the exact null
distribution of the U statistic. It needs no normality and no random resampling
(a bootstrap of medians is lumpy at n = 6..10), and it is the inversion of the
same U test we report, so the interval excludes 1 exactly when the test rejects
(ties aside). Fewer than 6 samples on a side cannot give a 95 % interval that can
exclude anything useful, so then we report no interval, no p-value, and `~`.

On a shared machine the samples of A and B are not alike by default: each sample should be one
run of the program (the report averages the values one run emits), and `change` takes each
sample's CPU share (CPU time over wall time, run/noise.py) to set aside samples that ran through
a burst of load, and refuses a verdict when A and B ran under different load. An A/A control
(the baseline measured twice) gives `reach`, the smallest change a run may call. A `~` with an
interval says how many samples per side would resolve the change seen (`needed`).

Paired samples: the run engine measures the variants of a row back to back in each round, in a
random order (noise.paired_round), and tags each sample with its round. `change(paired=True)`
then compares the rounds' log-ratios with the Wilcoxon signed-rank test and its Hodges-Lehmann
/ Tukey interval (the median and order statistics of the Walsh averages). A burst of load that
lasts longer than a round hits both members of a pair and cancels; and because the order within
a round was a fair coin, under "no change" each log-ratio's sign is a fair coin too, whatever
the load did, so the test keeps its level however the bursts line up with the samples (a
randomisation test; no independence between rounds is assumed).

The result is a `Change` (`change` for noisy samples, `exact_change` for deterministic counts);
the size and asm stages have their own `SizeComparison` and `AsmComparison`. A `Metric` says what
a number is: its unit, whether it is exact work or noisy time, and which direction is better.

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
from functools import lru_cache
from typing import Sequence

import numpy as np

MIN_SAMPLES_CI = 6        # below this: no interval, no p-value, verdict "~"
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


@dataclass(frozen=True)
class Metric:
    """What a number measures, carried with it as benchstat's units do: its unit, whether it is
    an exact count (work, the same every run) or a noisy measurement (time), and which way is better.

    >>> metric("MB/s", "MB/s").higher_is_better, metric("ns_per_iter", "ns").higher_is_better
    (True, False)
    >>> metric("insns_per_iter", "insns").exact, metric("loads_4_per_iter", "loads").exact
    (True, True)
    >>> metric("per_second", "iter/s").kind, metric("kernel_insns_per_iter", "insns").kind
    ('time', 'work')
    """
    name: str
    unit: str = ""
    exact: bool = False
    higher_is_better: bool = False

    @property
    def kind(self) -> str:
        """"work" for exact counts of what the program did, "time" for how fast it did it."""
        return "work" if self.exact else "time"


# Units of exact counts (instructions, loads and stores by width): work, not speed.
EXACT_UNITS = frozenset({"insns", "loads", "stores"})


def metric(name: str, unit: str = "") -> Metric:
    """The Metric of a stored sample from its name and unit: rates ("/s") are better higher,
    times and counts lower; counted units are exact."""
    u = (unit or "").lower()
    rate = u.endswith("/s") or name.lower().endswith(("/s", "per_second", "per_sec")) or name == "throughput"
    return Metric(name, unit, exact=u in EXACT_UNITS, higher_is_better=rate)


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


@lru_cache(maxsize=256)
def _u_null_cdf(m: int, n: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0..m*n under H0 (no ties), by counting rank arrangements.

    U counts pairs (old < new). The largest of the m+n values is either a "new" one,
    above all m olds (adds m), or an "old" one (adds 0):
    c(m, n, u) = c(m, n-1, u-m) + c(m-1, n, u).
    """
    prev = [np.ones(1) for _ in range(n + 1)]          # i = 0 olds: U = 0 for every j
    for i in range(1, m + 1):
        row = [np.ones(1)]                               # j = 0 news: U = 0
        for j in range(1, n + 1):
            dist = np.zeros(i * j + 1)
            dist[i: i + i * (j - 1) + 1] += row[j - 1]   # largest is new
            dist[: (i - 1) * j + 1] += prev[j]           # largest is old
            row.append(dist)
        prev = row
    dist = prev[n]
    return tuple(np.cumsum(dist) / dist.sum())


def _rank_k(m: int, n: int, alpha: float) -> int:
    """The k of the Moses interval [D_(k), D_(mn+1-k)]: the largest k with P(U <= k-1) <= alpha/2."""
    if m * n <= 2500:
        cdf = _u_null_cdf(m, n)
        k = 0
        while k < len(cdf) and cdf[k] <= alpha / 2:
            k += 1
        return max(k, 1)
    from scipy.stats import norm
    mean, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
    return max(int(math.floor(mean - norm.ppf(1 - alpha / 2) * sd)), 1)


def ratio_interval(old: Sequence[float], new: Sequence[float], alpha: float = 0.05) -> tuple[float, float] | None:
    """Hodges-Lehmann / Moses (1 - alpha) interval of the ratio new/old; None if it cannot be had.

    >>> lo, hi = ratio_interval([10, 11, 10, 12, 11, 10], [20, 22, 20, 24, 22, 20])
    >>> lo > 1.5 and hi < 2.5
    True
    """
    found = ratio_estimate_interval(old, new, alpha)
    return None if found is None else found[1:]


def ratio_estimate_interval(old: Sequence[float], new: Sequence[float],
                            alpha: float = 0.05) -> tuple[float, float, float] | None:
    """(Hodges-Lehmann estimate, low, high) of the ratio new/old: the estimate is the median of the
    sorted pairwise log-differences D, the interval [D_(k), D_(mn+1-k)] with k <= (mn+1)/2, so
    the estimate lies inside its interval by construction.

    >>> est, lo, hi = ratio_estimate_interval([10, 11, 10, 12, 11, 10], [20, 22, 20, 24, 22, 20])
    >>> lo <= est <= hi, round(est, 2)
    (True, 2.0)
    """
    m, n = len(old), len(new)
    if min(m, n) < MIN_SAMPLES_CI:
        return None
    a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    if (a <= 0).any() or (b <= 0).any():
        return None
    diffs = np.sort((np.log(b)[:, None] - np.log(a)[None, :]).ravel())
    k = min(_rank_k(m, n, alpha), (m * n + 1) // 2)
    return (float(math.exp(np.median(diffs))), float(math.exp(diffs[k - 1])),
            float(math.exp(diffs[m * n - k])))


@lru_cache(maxsize=256)
def _signed_rank_null_cdf(n: int) -> tuple[float, ...]:
    """P(T+ <= t) for t = 0..n(n+1)/2 under H0: each rank 1..n counts with probability 1/2,
    so the counts of subsets of {1..n} summing to t, over 2^n (a knapsack count)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return tuple(np.cumsum(counts) / counts.sum())


def _signed_rank_k(n: int, alpha: float) -> int:
    """The k of the signed-rank interval [W_(k), W_(N+1-k)]: the largest k with P(T+ <= k-1) <= alpha/2."""
    if n <= 100:
        cdf = _signed_rank_null_cdf(n)
        k = 0
        while k < len(cdf) and cdf[k] <= alpha / 2:
            k += 1
        return max(k, 1)
    from scipy.stats import norm
    mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(int(math.floor(mean - norm.ppf(1 - alpha / 2) * sd)), 1)


def signed_rank_p(d: Sequence[float]) -> float:
    """Two-sided p of Wilcoxon's signed-rank test that the d are symmetric about 0 (zeros
    dropped, ties given their mean rank; exact up to 100 pairs, normal beyond).

    >>> signed_rank_p([0.1, 0.2, 0.15, 0.3, 0.12, 0.25]) < 0.05, signed_rank_p([0.1, -0.1, 0.2, -0.2, 0.3, -0.3])
    (True, 1.0)
    """
    from scipy.stats import rankdata
    x = np.asarray(d, dtype=float)
    x = x[x != 0]
    n = x.size
    if n == 0:
        return 1.0
    ranks = rankdata(np.abs(x))
    t = float(ranks[x > 0].sum())
    if n <= 100:
        cdf = _signed_rank_null_cdf(n)
        top = len(cdf) - 1
        below = cdf[min(int(math.floor(t)), top)]
        above = 1.0 - (cdf[int(math.ceil(t)) - 1] if math.ceil(t) >= 1 else 0.0)
        return float(min(1.0, 2 * min(below, above)))
    from scipy.stats import norm
    mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return float(min(1.0, 2 * norm.sf(abs(t - mean) / sd)))


def paired_ratio_interval(old: Sequence[float], new: Sequence[float],
                          alpha: float = 0.05) -> tuple[float, float, float] | None:
    """(Hodges-Lehmann estimate, low, high) of the ratio new/old from pairs (old[i], new[i]):
    on d = log(new/old), the median of the Walsh averages (d_i + d_j)/2, i <= j, and the
    interval [W_(k), W_(N+1-k)] that inverts the signed-rank test. None below MIN_SAMPLES_CI pairs.

    >>> est, lo, hi = paired_ratio_interval([10, 12, 9, 11, 10, 13], [11, 13.2, 9.9, 12.1, 11, 14.3])
    >>> round(est, 3), lo <= est <= hi
    (1.1, True)
    """
    a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    n = a.size
    if n != b.size or n < MIN_SAMPLES_CI or (a <= 0).any() or (b <= 0).any():
        return None
    d = np.log(b) - np.log(a)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    k = min(_signed_rank_k(n, alpha), (walsh.size + 1) // 2)
    return (float(math.exp(np.median(walsh))), float(math.exp(walsh[k - 1])),
            float(math.exp(walsh[walsh.size - k])))


def pair_up(old_rounds: Sequence | None, new_rounds: Sequence | None) -> list[tuple[int, int]] | None:
    """Indices (i, j) of the samples of two columns taken in one round (the engine ran them back to
    back), when there are enough such pairs for an interval; None: compare them unpaired.

    >>> pair_up(["s.1", "s.2", "s.3", "s.4", "s.5", "s.6", "s.7"], ["s.2", "s.1", "s.3", "s.4", "s.5", "s.6"])
    [(0, 1), (1, 0), (2, 2), (3, 3), (4, 4), (5, 5)]
    >>> pair_up(["s.1"] * 6, ["s.1"] * 6) is None
    True
    """
    if not old_rounds or not new_rounds or None in old_rounds or None in new_rounds:
        return None
    if len(set(old_rounds)) != len(old_rounds) or len(set(new_rounds)) != len(new_rounds):
        return None
    where = {r: j for j, r in enumerate(new_rounds)}
    pairs = [(i, where[r]) for i, r in enumerate(old_rounds) if r in where]
    return pairs if len(pairs) >= MIN_SAMPLES_CI else None


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


def samples_needed(n: int, ci_low: float, ci_high: float, change: float) -> int:
    """Samples per side that would narrow an interval of the ratio seen with n per side to
    +-`change` (a relative change, 0.05 for 5 %): its width shrinks as 1/sqrt(n).

    >>> samples_needed(10, 0.9, 1.1, 0.05)
    43
    """
    half = (math.log(ci_high) - math.log(ci_low)) / 2
    return max(n + 1, math.ceil(n * (half / math.log1p(change)) ** 2))


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


# -- layout noise ---------------------------------------------------------------------------

BEYOND, WITHIN = "beyond layout noise", "within layout noise"


@dataclass(frozen=True)
class LayoutBand:
    """How far a variant moves when only its code placement changes (run/layout.py).

    Each relink's median over the unshifted build's median is one draw of "layout luck";
    the unshifted build is a layout too (ratio 1), so the band always holds 1. The band
    is min..max of those K + 1 ratios. Each median carries its own sampling noise too,
    which only widens the band (conservative). K draws understate the true extent: a
    fresh layout falls outside the range of K + 1 with probability 2 / (K + 2).
    `p_value` (Kruskal-Wallis over the K + 1 sample groups) says whether the layouts
    differ at all beyond the noise of single runs: a small p means placement matters.

    >>> b = layout_band([10, 10, 10], [[9.5, 9.7, 9.6], [10.4, 10.3, 10.5]])
    >>> b.low, b.high, b.n_layouts, b.ratios, b.p_value
    (0.96, 1.04, 2, (0.96, 1.04), None)
    >>> band_verdict(0.9, 0.95, b), band_verdict(0.95, 1.1, b), band_verdict(None, None, b)
    ('beyond layout noise', 'within layout noise', None)
    """
    n_layouts: int
    low: float
    high: float
    ratios: tuple[float, ...]     # each relink's median / the unshifted median, in layout order
    p_value: float | None = None  # Kruskal-Wallis: do the layouts differ? (None: < MIN_SAMPLES_CI each)

    def as_percent(self) -> str:
        """
        >>> LayoutBand(8, 0.969, 1.042, ()).as_percent()
        '-3.1 % .. +4.2 %'
        """
        return f"{(self.low - 1) * 100:+.1f} % .. {(self.high - 1) * 100:+.1f} %"


def layout_band(unshifted: Sequence[float], layouts: Sequence[Sequence[float]]) -> LayoutBand | None:
    """The band of a variant from its unshifted samples and each relink's samples; None
    without samples on either side."""
    layouts = [np.asarray(v, dtype=float) for v in layouts if len(v)]
    if not len(unshifted) or not layouts:
        return None
    base = float(np.median(np.asarray(unshifted, dtype=float)))
    ratios = tuple(_ratio(float(np.median(v)), base) for v in layouts)
    groups = [np.asarray(unshifted, dtype=float), *layouts]
    p_value = None
    if min(g.size for g in groups) >= MIN_SAMPLES_CI:
        from scipy.stats import kruskal
        everything = np.concatenate(groups)
        p_value = 1.0 if np.all(everything == everything[0]) else float(kruskal(*groups).pvalue)
    return LayoutBand(len(ratios), min(1.0, *ratios), max(1.0, *ratios), ratios, p_value)


def band_verdict(ci_low: float | None, ci_high: float | None, band: LayoutBand | None) -> str | None:
    """BEYOND when the whole CI of a ratio lies outside the band, WITHIN when it touches it;
    None without a CI or a band: too few samples cannot say either."""
    if ci_low is None or ci_high is None or band is None:
        return None
    return BEYOND if ci_low > band.high or ci_high < band.low else WITHIN


SHRANK, NOT_SHOWN, GREW = "shrank", "no evidence it shrank", "grew"


def band_shrink(before: LayoutBand, after: LayoutBand, alpha: float = 0.05) -> tuple[str, float | None]:
    """Did the layout band shrink from `before` to `after` (seed 002: isolating a function)?
    The spread of each band's layout ratios (the unshifted layout's 1 included) is compared with
    the Fligner-Killeen test, robust to outliers and to non-normal spreads: "shrank" when the
    after-band is narrower and the test says the spreads differ, "grew" the other way.

    >>> wide = LayoutBand(6, 0.88, 1.13, (0.88, 1.13, 0.95, 1.07, 0.91, 1.1))
    >>> narrow = LayoutBand(6, 0.998, 1.003, (0.999, 1.001, 1.003, 0.998, 1.0, 1.002))
    >>> band_shrink(wide, narrow)[0], band_shrink(narrow, wide)[0], band_shrink(wide, wide)[0]
    ('shrank', 'grew', 'no evidence it shrank')
    """
    a, b = np.log([1.0, *before.ratios]), np.log([1.0, *after.ratios])
    if a.size < 3 or b.size < 3:
        return NOT_SHOWN, None
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return NOT_SHOWN, 1.0
    from scipy.stats import fligner
    p = float(fligner(a, b).pvalue)
    narrower = (after.high - after.low) < (before.high - before.low)
    if p < alpha:
        return (SHRANK if narrower else GREW), p
    return NOT_SHOWN, p
