"""Change points of a noisy metric's history: E-divisive means (Matteson & James 2014), as
MongoDB's Hunter / Apache Otava find them, written here because neither package fits:
`apache-otava` 0.8.0 pins numpy 2.2.0 (flagbench pins 2.4.6) and pulls BigQuery, Postgres
and Slack clients; `signal-processing-algorithms` 2.1.6 wants numpy < 2, Python ~3.11 only,
gevent and structlog. The method is forty lines over numpy.

Significance: a permutation test (the series shuffled PERMUTATIONS times with a fixed seed,
so the answer is the same every time it is asked), as the paper's; a split is kept when its
statistic is exceeded by fewer than ALPHA of the shuffles and both sides hold MIN_SIZE points.
"""
from __future__ import annotations

import numpy as np

ALPHA = 0.05
PERMUTATIONS = 199
MIN_SIZE = 2


def _best_split(x: np.ndarray, min_size: int) -> tuple[int, float]:
    """(tau, Q): the split x[:tau] | x[tau:] with the largest energy statistic (alpha = 1)."""
    n = len(x)
    d = np.abs(x[:, None] - x[None, :])
    best, best_q = -1, -np.inf
    for tau in range(min_size, n - min_size + 1):
        m = n - tau
        between = d[:tau, tau:].mean()
        within_l = d[:tau, :tau].sum() / (tau * (tau - 1)) if tau > 1 else 0.0
        within_r = d[tau:, tau:].sum() / (m * (m - 1)) if m > 1 else 0.0
        q = tau * m / n * (2 * between - within_l - within_r)
        if q > best_q:
            best, best_q = tau, q
    return best, best_q


def _significant(x: np.ndarray, q: float, min_size: int, rng: np.random.Generator) -> float:
    """The permutation p-value of a split with statistic Q."""
    beaten = sum(_best_split(rng.permutation(x), min_size)[1] >= q for _ in range(PERMUTATIONS))
    return (beaten + 1) / (PERMUTATIONS + 1)


def change_points(values, *, alpha: float = ALPHA, min_size: int = MIN_SIZE, seed: int = 1) -> list[int]:
    """Indexes i where the series' level changes between values[i-1] and values[i], ascending."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    found: list[int] = []
    segments = [(0, len(x))]
    while segments:
        lo, hi = segments.pop()
        part = x[lo:hi]
        if len(part) < 2 * min_size or np.ptp(part) == 0:
            continue
        tau, q = _best_split(part, min_size)
        if tau < 0 or _significant(part, q, min_size, rng) >= alpha:
            continue
        found.append(lo + tau)
        segments += [(lo, lo + tau), (lo + tau, hi)]
    return sorted(found)
