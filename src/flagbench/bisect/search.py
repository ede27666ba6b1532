"""The two searches, apart from what they measure: the first bad commit of a range, and
the smallest set of objects that carries most of an effect.

Both take a callable that measures one candidate, so they are the same for exact counts,
sizes and timed rounds, for C experiments and for kernels.

First bad commit (`first_bad`): commits[0..n-1] are the range good..bad, parent first (the
good end itself not among them, the bad end last). The good end is known good; the bad end
is assumed bad and measured only when the search ends on it, so a range of n commits costs
ceil(log2 n) measured steps (plus the good end's reference, measured by the caller). A commit
that does not build (or whose bench does not run) is skipped as `git bisect skip` does: the nearest untried commit between
the bounds is tried instead; skipped commits next to the answer make it a list of candidates.

Smallest set (`narrow`): the candidates are objects that differ between A and B; `effect(S)`
is how far the mix "A with B's objects S" moved from A, in the metric's units. A set is halved
while one half carries at least `share` of the set's effect; when neither half does, the
effect is spread and each half carrying at least `keep` of the whole is narrowed on its own.
The second half is measured only when the first does not carry the set's effect.
The result's own effect is measured once more, so the share it carries is a measured number.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

GOOD, BAD, SKIP = "good", "bad", "skip"


@dataclass(frozen=True)
class Step:
    index: int                     # into the range
    verdict: str                   # GOOD, BAD or SKIP
    detail: str                    # what was measured, for the step's line


@dataclass
class FirstBad:
    n: int                                   # commits in the range
    first: int | None                        # index of the first bad commit; None: none found
    candidates: list[int] = field(default_factory=list)   # > 1 when skipped commits hide the answer
    steps: list[Step] = field(default_factory=list)
    note: str = ""

    @property
    def measured(self) -> int:
        """Steps that measured a commit (skips included: each cost a build attempt)."""
        return len(self.steps)


Decide = Callable[[int], tuple[str, str]]      # index -> (verdict, detail)


def first_bad(n: int, decide: Decide, *, on_step: Callable[[Step], None] | None = None) -> FirstBad:
    """The first bad commit of commits[0..n-1] (see the module doc)."""
    if n < 1:
        raise ValueError("an empty range has no first bad commit")
    out = FirstBad(n, None)
    lo, hi, hi_measured = -1, n - 1, False
    skipped: set[int] = set()

    def step(i: int) -> str:
        verdict, detail = decide(i)
        s = Step(i, verdict, detail)
        out.steps.append(s)
        if on_step:
            on_step(s)
        return verdict

    while hi - lo > 1:
        pick = _nearest_untried((lo + hi) // 2, lo, hi, skipped)
        if pick is None:
            break
        verdict = step(pick)
        if verdict == SKIP:
            skipped.add(pick)
        elif verdict == GOOD:
            lo = pick
        else:
            hi, hi_measured = pick, True
    if not hi_measured:     # the bad end was only assumed: the answer needs its measurement
        verdict = step(hi)
        if verdict == GOOD:
            out.note = "the bad end measured good: no commit of the range moves the metric past the threshold"
            return out
        if verdict == SKIP:
            skipped.add(hi)
    out.candidates = list(range(lo + 1, hi + 1))
    if len(out.candidates) == 1 and hi not in skipped:
        out.first = hi
    else:
        out.note = (f"skipped commits (they did not build or run) leave {len(out.candidates)} candidates for the "
                    "first bad commit")
    return out


def _nearest_untried(mid: int, lo: int, hi: int, skipped: set[int]) -> int | None:
    """mid, else the nearest index strictly between lo and hi that was not skipped."""
    for d in range(hi - lo):
        for i in (mid - d, mid + d):
            if lo < i < hi and i not in skipped:
                return i
    return None


def steps_bound(n: int) -> int:
    """Measured steps first_bad needs for n commits when none is skipped: ceil(log2 n), and
    one more when the answer is the bad end (its measurement was assumed until then)."""
    return max(0, (n - 1).bit_length())


# -- objects -----------------------------------------------------------------------------------
@dataclass
class Narrowed:
    objects: list[str]             # the smallest set found
    effect: float                  # its own effect (units of the metric)
    full: float                    # the effect of all differing objects (B's objects in A)
    mixes: int                     # mixes measured (each a link and a measurement)
    trail: list[tuple[tuple[str, ...], float]] = field(default_factory=list)   # (set, effect) in order

    @property
    def share(self) -> float:
        return self.effect / self.full if self.full else 0.0


def narrow(candidates: Sequence[str], effect: Callable[[frozenset[str]], float], *, full: float | None = None,
           share: float = 0.8, keep: float = 0.1,
           on_mix: Callable[[tuple[str, ...], float], None] | None = None) -> Narrowed:
    """The smallest set of candidates carrying most of the effect (see the module doc)."""
    memo: dict[frozenset[str], float] = {}
    trail: list[tuple[tuple[str, ...], float]] = []

    def measured(s: Sequence[str]) -> float:
        key = frozenset(s)
        if key not in memo:
            memo[key] = effect(key)
            trail.append((tuple(sorted(key)), memo[key]))
            if on_mix:
                on_mix(tuple(sorted(key)), memo[key])
        return memo[key]

    names = sorted(candidates)
    whole = measured(names) if full is None else full
    memo.setdefault(frozenset(names), whole)

    def carried(e: float) -> float:
        return e / whole if whole else 0.0

    def go(s: list[str], c: float) -> list[str]:
        if len(s) == 1 or not whole:
            return s
        half = len(s) // 2
        parts = []
        for part in (s[:half], s[half:]):   # the second half only when the first does not carry it
            pc = carried(measured(part))
            if pc >= share * c:
                return go(part, pc)
            parts.append((part, pc))
        kept = [go(part, pc) for part, pc in parts if pc >= keep]
        return [o for k in kept for o in k] or s

    found = go(names, 1.0)
    return Narrowed(objects=found, effect=measured(found), full=whole, mixes=len(memo), trail=trail)
