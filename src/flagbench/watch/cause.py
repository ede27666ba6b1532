"""Why an exact count moved at a commit: flagbench.attribution's split (functions whose code
changed on the measured path, the rest against the A/A floor) and its cause, for the watch.

    touches   did the commit move what the bench executes? (its count moved, or a function on
              the path changed code; the path: the symbols of the bench's last exact profile).
              Only such a commit is profiled, timed and judged; the others are "code identical
              on the measured path"
    judge     the Verdict of one counted metric: attribution.attribute + attribution.cause,
              and whether it is a change (`moved`): a direct move whose attributed part is past
              the threshold, an indirect one (beyond the floor) past it, an unknown one past it;
              a layout-only one never

The floor of a user-mode count (callgrind, the qemu plugin; n and 2n iterations differenced)
is 0: the same program counts the same, whatever its layout. A booted kernel's is not (the
A/A floor of DESIGN.md: 14 % of a run): a kernel's floor is measured once, at the first commit
watched (booted twice), and its per-symbol counts are every symbol the guest bench ran (kept by
its counted cell), so a kernel commit's move is split the same way: direct, indirect beyond
the floor, layout within it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from flagbench import attribution as attr

NONE = "none"
IDENTICAL_LINE = "cause: none: code identical on the measured path"
USER_FLOOR = 0.0


@dataclass
class Verdict:
    metric: str
    base: float
    head: float
    cause: str                     # attribution.CAUSES, or NONE
    line: str
    moved: bool = False            # a change at this commit
    changed_on_path: list[str] = field(default_factory=list)
    regression: bool = True

    @property
    def delta(self) -> float:
        return self.head - self.base


def path_of(profile: dict[str, float] | None) -> set[str]:
    return {attr.symbol_key(n) for n, v in (profile or {}).items() if v}


def touches(base: float, head: float, changed: list[str], base_profile: dict | None,
            floor: float | None = USER_FLOOR) -> bool:
    """A count moved beyond the floor (any move where none was measured), or a function on the path changed."""
    return abs(head - base) > (floor or 0.0) or bool({attr.symbol_key(n) for n in changed} & path_of(base_profile))


def judge(metric: str, base: float, head: float, changed: list[str], base_profile: dict | None,
          head_profile: dict | None, threshold_pct: float, floor: float | None = USER_FLOOR) -> Verdict:
    if not touches(base, head, changed, base_profile, floor) and head_profile in (None, base_profile):
        return Verdict(metric, base, head, NONE, IDENTICAL_LINE)
    past = abs(head - base) > abs(base) * threshold_pct / 100.0
    if base_profile and head_profile:
        a = attr.attribute(base_profile, head_profile, changed, floor=floor, total_old=base, total_new=head)
        c = attr.cause(a)
        if c.kind == "direct":   # the changed functions' part past the threshold, or the rest beyond the floor
            moved = abs(a.attributed_delta) > abs(base) * threshold_pct / 100.0 or (a.within_floor is False and past)
        else:
            moved = c.kind == "indirect" and past
        return Verdict(metric, base, head, c.kind, attr.cause_line(c), moved, [d.name for d in a.changed],
                       c.regression)
    c = attr.cause(None)
    return Verdict(metric, base, head, c.kind, attr.cause_line(c), past)
