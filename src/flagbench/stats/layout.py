"""Layout noise: how far a variant moves when only its code placement changes (run/layout.py),
and whether a change lies beyond that band."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from flagbench.stats.ranks import MIN_SAMPLES_CI
from flagbench.stats.verdict import _ratio

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


SURVIVES, GONE, APPEARS, NEITHER = ("survives alignment", "gone under alignment", "appears only under alignment",
                                    "no change either way")


def survives(plain, aligned) -> str:
    """Does a change (stats.Change of B against A) survive the layout check (the same change with
    every function of A and B 64-byte aligned, run/layout.py)? Called changes (faster/slower) are
    compared by verdict, exact counts by the sign of their change.

    >>> from flagbench.stats.verdict import exact_change
    >>> survives(exact_change(10, 12), exact_change(10, 12)), survives(exact_change(10, 12), exact_change(10, 10))
    ('survives alignment', 'gone under alignment')
    """
    def called(c) -> int:   # -1, 0, +1: the direction of a called change
        if c.verdict == "exact":
            return (c.ratio > 1) - (c.ratio < 1)
        if c.verdict in ("faster", "slower"):
            return 1 if c.estimate > 1 else -1
        return 0
    a, b = called(plain), called(aligned)
    if a and b == a:
        return SURVIVES
    if a:
        return GONE
    return APPEARS if b else NEITHER
