"""Why an exact count moved at a commit: attribution to the functions whose code changed,
the rest compared with the A/A floor, and the cause (direct / indirect / layout / unknown).

This is the watch's use of the attribution issue's rule (issue 39), kept here small until
flagbench.attribution lands; the watch asks nothing of it but `judge` below.

    path        the symbols the bench executes (its exact profile, self > 0): at the commit
                compared with, and at the commit where that one was profiled
    attributed  the count delta of functions whose code changed (from the two profiles);
                without profiles, the whole move when a changed function is on the path
    elsewhere   the rest: a finding only beyond the floor. The floor of a user-mode count
                (callgrind, the qemu plugin; n and 2n iterations differenced) is 0: the
                same program counts the same. A booted kernel's is not (DESIGN.md: 14 %).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from flagbench.profile import base_name

DIRECT, INDIRECT, LAYOUT, UNKNOWN, NONE = "direct", "indirect", "layout only", "unknown", "none"


@dataclass
class Verdict:
    metric: str
    base: float
    head: float
    cause: str                     # one of the five above
    changed_on_path: list[str] = field(default_factory=list)
    attributed: dict[str, float] = field(default_factory=dict)   # changed function -> its count delta
    elsewhere: float = 0.0
    floor: float = 0.0
    moved: bool = False            # a change at this commit (past the threshold or beyond the floor)

    @property
    def delta(self) -> float:
        return self.head - self.base

    @property
    def percent(self) -> float:
        return 100.0 * self.delta / self.base if self.base else 0.0

    def line(self) -> str:
        """The cause line, under 100 columns."""
        if self.cause == DIRECT:
            fns = ", ".join(f"{n} {v:+,.0f}" for n, v in list(self.attributed.items())[:3]) or \
                ", ".join(self.changed_on_path[:3])
            rest = f"; elsewhere {self.elsewhere:+,.0f} (floor {self.floor:,.0f})" if self.elsewhere else ""
            return _cut(f"cause: direct: code changed on the measured path: {fns}{rest}")
        if self.cause == INDIRECT:
            return _cut(f"cause: indirect: no code changed on the path, counts moved {self.delta:+,.0f} "
                        f"(floor {self.floor:,.0f}): callees, inlining or data")
        if self.cause == LAYOUT:
            return _cut(f"cause: layout only: no code changed on the path, {self.delta:+,.0f} within the "
                        f"floor {self.floor:,.0f}")
        if self.cause == UNKNOWN:
            return "cause: unknown: no per-symbol counts for this bench"
        return "cause: none: code identical on the measured path"


def _cut(text: str) -> str:
    return text if len(text) <= 99 else text[:98] + "…"


def path_of(profile: dict[str, float]) -> set[str]:
    return {base_name(name)[0] for name, v in profile.items() if v}


def judge(metric: str, base: float, head: float, changed: list[str], base_profile: dict | None,
          head_profile: dict | None, threshold_pct: float, floor: float = 0.0) -> Verdict:
    """The verdict of one counted metric at a commit (see the module doc)."""
    changed_names = {base_name(n)[0] for n in changed}
    path = path_of(base_profile or {}) | path_of(head_profile or {})
    on_path = sorted(changed_names & path)
    v = Verdict(metric, base, head, NONE, on_path, floor=floor)
    delta = head - base
    if base_profile is not None and head_profile is not None:
        old = _by_base(base_profile)
        new = _by_base(head_profile)
        per = {n: new.get(n, 0.0) - old.get(n, 0.0) for n in on_path}
        v.attributed = dict(sorted(((n, d) for n, d in per.items() if d), key=lambda kv: -abs(kv[1])))
        v.elsewhere = delta - sum(v.attributed.values())
    elif on_path:
        v.attributed = {}
        v.elsewhere = 0.0
    else:
        v.elsewhere = delta
    past = abs(delta) > abs(base) * threshold_pct / 100.0
    if on_path:
        v.cause = DIRECT
        v.moved = past and (abs(sum(v.attributed.values())) > abs(base) * threshold_pct / 100.0
                            or abs(v.elsewhere) > floor or base_profile is None)
    elif delta == 0:
        v.cause = NONE
    elif base_profile is None and head_profile is None and not path:
        v.cause = UNKNOWN
        v.moved = past and abs(delta) > floor
    elif abs(delta) > floor:
        v.cause = INDIRECT
        v.moved = past
    else:
        v.cause = LAYOUT
    return v


def _by_base(profile: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in profile.items():
        b = base_name(name)[0]
        out[b] = out.get(b, 0.0) + value
    return out
