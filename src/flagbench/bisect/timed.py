"""One bisection step on time: paired rounds of the good end and the commit, the signed-rank
test on their log-ratios (stats.change(paired=True)), sampled until the interval decides.

A round runs both programs back to back in a random order (`repeats` times, pairing the
fastest run of each), so a burst of load or a drift of the machine's speed hits both
members of a pair. The interval of the ratio commit/good is
looked at after 8, 12, 16, 24, 32, 48, ... pairs up to the step's budget; a look decides when
the interval lies wholly past the threshold (bad) or wholly short of it (good). Looking
several times spends the step's alpha: each look's two-sided interval has level
1 - 2 alpha / (number of looks), and a wrong call needs the truth beyond one chosen end of it
(each call is a one-sided test: bad = lower end past the threshold, good = upper end short
of it), so the chance that a step decided by its interval was called wrongly is at most
alpha (Bonferroni over the looks), and over k decided steps at most k x alpha. A step still undecided when its budget is spent
is called by its estimate, and says so: its error is not bounded by alpha.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Callable

from flagbench.bisect.search import BAD, GOOD

FIRST_LOOK = 8


@dataclass(frozen=True)
class Threshold:
    """A relative change of a metric: +5 % (worse by 5 %: a regression), -5 % (better by 5 %: an
    improvement) or 5 % (either way). Which way is worse is the metric's own declaration
    (metrics.Metric.better), not the sign: for a rate (better higher) +5 % is a drop.

    >>> t = Threshold(0.05, 1)
    >>> t.past(1.06), t.past(0.94), t.past(0.94, higher_is_better=True), str(t)
    (True, False, True, '+5 %')
    """
    size: float                    # > 0, as a fraction
    direction: int                 # +1 worse, -1 better, 0 either

    def past(self, ratio: float, higher_is_better: bool = False) -> bool:
        """Whether new/old = RATIO moved past the threshold, worse meaning what the metric says."""
        worse = 1 / ratio if higher_is_better and ratio else ratio
        up, down = worse > 1 + self.size, worse < 1 / (1 + self.size)
        return up if self.direction > 0 else down if self.direction < 0 else up or down

    def __str__(self) -> str:
        sign = {1: "+", -1: "-", 0: "±"}[self.direction]
        return f"{sign}{self.size * 100:g} %"

    def said(self) -> str:
        """In words: "+5 % (worse)"."""
        return f"{self} ({ {1: 'worse', -1: 'better', 0: 'either way'}[self.direction] })"


def parse_threshold(text: str) -> Threshold:
    """'5%', '+5%', '-2.5%' -> Threshold; a bare number is percent too ('5' is 5 %, as the
    option's PCT says: read as a fraction it was +500 %); ValueError for anything else."""
    t = text.strip()
    direction = {"+": 1, "-": -1}.get(t[:1], 0)
    body = t[1:] if direction else t
    bad = ValueError(f"threshold {text!r}: a relative change such as 5%, +5% or -5%")
    try:
        value = float(body.removesuffix("%").strip())
    except ValueError:
        raise bad from None
    size = value / 100
    if not (0 < size < 10) or math.isnan(size):
        raise bad
    return Threshold(size, direction)


def looks(max_pairs: int) -> list[int]:
    """Pair counts at which the interval is looked at: 8, 12, 16, 24, 32, 48, ... and max_pairs."""
    out, n = [], FIRST_LOOK
    while n < max_pairs:
        out.append(n)
        n = n + n // 2 if len(out) % 2 else n + n // 3
        n = int(n)
    return out + [max_pairs]


@dataclass
class TimedStep:
    verdict: str                   # GOOD or BAD
    decided: bool                  # by the interval (error <= alpha), else by the estimate
    pairs: int
    estimate: float                # ratio commit / good (Hodges-Lehmann of the pairs)
    low: float | None
    high: float | None
    level: float                   # the interval's confidence, 1 - alpha / looks
    seconds: float

    def describe(self) -> str:
        def pct(r: float | None) -> str:
            return "?" if r is None else f"{(r - 1) * 100:+.1f}"
        how = "" if self.decided else "; budget spent, called by its estimate"
        return (f"{pct(self.estimate)} % [{pct(self.low)}, {pct(self.high)}] ({self.level * 100:.1f} % interval, "
                f"{self.pairs} pairs{how})")


def decide(good: Callable[[], float], commit: Callable[[], float], threshold: Threshold, *,
           alpha: float = 0.05, max_pairs: int = 64, budget_s: float = 300.0, seed: int | None = None,
           repeats: int = 1, progress: Callable[[str], None] | None = None,
           higher_is_better: bool = False) -> TimedStep:
    """Rounds of (good, commit) in a random order until a look decides or the budget is spent;
    HIGHER_IS_BETTER is the timed metric's declaration (which way the threshold's "worse" is)."""
    from flagbench.stats import change

    rng = random.Random(seed)
    schedule = looks(max_pairs)
    per_look = min(0.5, 2 * alpha / len(schedule))   # two-sided level; each call is one-sided
    old: list[float] = []
    new: list[float] = []
    start = time.monotonic()
    result = None
    for n in schedule:
        while len(old) < n:
            runs: dict[int, list[float]] = {0: [], 1: []}
            for _ in range(max(1, repeats)):
                order = [(good, 0), (commit, 1)]
                rng.shuffle(order)
                for run, side in order:
                    runs[side].append(run())
            old.append(min(runs[0]))
            new.append(min(runs[1]))
        c = change(old, new, paired=True, alpha=per_look, higher_is_better=higher_is_better)
        lo, hi = c.ci_low, c.ci_high
        result = TimedStep(BAD if threshold.past(c.estimate, higher_is_better) else GOOD, False, len(old),
                           c.estimate, lo, hi, 1 - per_look, time.monotonic() - start)
        if lo is not None and hi is not None and higher_is_better:   # worse-ward ratios: the interval flips
            lo, hi = 1 / hi, 1 / lo
        if lo is not None and hi is not None:
            if threshold.past(lo) and threshold.past(hi) and (threshold.direction or (lo > 1) == (hi > 1)):
                result.verdict, result.decided = BAD, True
            elif not threshold.past(lo) and not threshold.past(hi) and _between(lo, hi, threshold):
                result.verdict, result.decided = GOOD, True
        if result.decided or time.monotonic() - start > budget_s:
            break
        if progress and n != schedule[-1]:   # one line a look: a step can take minutes on a busy machine
            progress(result.describe().replace("; budget spent, called by its estimate", ": undecided"))
    assert result is not None
    return result


def _between(lo: float, hi: float, t: Threshold) -> bool:
    """The whole interval short of the threshold (not straddling it from one side to the other)."""
    if t.direction > 0:
        return hi <= 1 + t.size
    if t.direction < 0:
        return lo >= 1 / (1 + t.size)
    return lo >= 1 / (1 + t.size) and hi <= 1 + t.size
