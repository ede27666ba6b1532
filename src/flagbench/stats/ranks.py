"""The rank statistics behind the verdicts (stats.verdict): intervals and tests that need no
normality, for two samples and for pairs.

Why this interval: the Hodges-Lehmann / Moses interval on log(values). The ratio
new/old is a shift of log(time); the interval is read off the sorted pairwise
log-differences log(new_i) - log(old_j) at ranks given by the exact null
distribution of the U statistic. It needs no normality and no random resampling
(a bootstrap of medians is lumpy at n = 6..10), and it is the inversion of the
same U test we report, so the interval excludes 1 exactly when the test rejects
(ties aside). Fewer than 6 samples on a side cannot give a 95 % interval that can
exclude anything useful, so then we report no interval, no p-value, and `~`.

Paired samples: the run engine measures the variants of a row back to back in each round, in a
random order (noise.paired_round), and tags each sample with its round. `change(paired=True)`
then compares the rounds' log-ratios with the Wilcoxon signed-rank test and its Hodges-Lehmann
/ Tukey interval (the median and order statistics of the Walsh averages). A burst of load that
lasts longer than a round hits both members of a pair and cancels; and because the order within
a round was a fair coin, under "no change" each log-ratio's sign is a fair coin too, whatever
the load did, so the test keeps its level however the bursts line up with the samples (a
randomisation test; no independence between rounds is assumed).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

MIN_SAMPLES_CI = 6        # below this: no interval, no p-value, verdict "~"


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




def in_rounds(old: Sequence, new: Sequence, rounds_old: Sequence | None, rounds_new: Sequence | None,
              shares_old: Sequence | None = None, shares_new: Sequence | None = None) -> tuple:
    """Two columns' samples (and CPU shares) as `change` takes them: (old, new, shares_old,
    shares_new, paired), the samples of one round side by side when there are enough such pairs
    (pair_up), else as they are.

    >>> rounds = [f"s.{i}" for i in range(6)]
    >>> in_rounds([1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1], rounds, rounds[::-1])
    ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], None, None, True)
    """
    pairs = pair_up(rounds_old, rounds_new)
    if pairs is None:
        return old, new, shares_old, shares_new, False

    def pick(xs, side):
        return [xs[p[side]] for p in pairs] if xs else None
    return pick(old, 0), pick(new, 1), pick(shares_old, 0), pick(shares_new, 1), True

def samples_needed(n: int, ci_low: float, ci_high: float, change: float) -> int:
    """Samples per side that would narrow an interval of the ratio seen with n per side to
    +-`change` (a relative change, 0.05 for 5 %): its width shrinks as 1/sqrt(n).

    >>> samples_needed(10, 0.9, 1.1, 0.05)
    43
    """
    half = (math.log(ci_high) - math.log(ci_low)) / 2
    return max(n + 1, math.ceil(n * (half / math.log1p(change)) ** 2))
