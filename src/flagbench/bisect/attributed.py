"""Bisection on the attributed change (`bisect --on attributed`, the default for insns).

A total is not evidence of a commit's effect (attribution.py): a commit that moves only layout
can move a count a lot (code whose work depends on where it landed, a kernel's allocator walk),
so a threshold on the total names it. Here each step's count delta against the good end is split
by attribution.attribute into the functions whose code changed (asm/compare.py on the good end's
objects and the step's) and the rest, and the rest is judged against the good end's A/A floor.
The threshold applies to `Attribution.effect_delta`: the changed functions' delta plus the part
of the rest beyond the floor. A step's value is the good end's total plus that delta, so the
search and its threshold read it as they read a total.

C subjects (micro benches): per-symbol counts from the exact profile of the harness linked with
the build (run/profiled.exact_profile: callgrind on x86_64, qemu + the plugin elsewhere, n and 2n
iterations differenced); the A/A floor is the good end relinked FLOOR_RELINKS times with a
padding object first (run/layout.py: nothing but addresses change), the largest count change.
For most code that floor is 0 and the attributed change is the total; it differs when the
counts do move with layout.

Kernel subjects: per-symbol counts from the guest boot's row (its kernel profile per iteration),
the changed functions from the good end's vmlinux (a kept copy: the walked O= directory moves on)
against the step's; the A/A floor is the good end booted again with one extra ignored
command-line word. The subject gives each (counted, floor, changed, kept): one path for both.
"""
from __future__ import annotations

from dataclasses import dataclass

from flagbench.attribution import Attribution, attribute, cause, cause_line, changed_functions
from flagbench.metrics import count

FLOOR_RELINKS = 3
ATTRIBUTED = count("attributed_insns_per_iter", label="attributed insns/iter")


def supports(subject) -> str | None:
    """None when the subject's steps can be attributed, else why not (the threshold then takes the total)."""
    if not getattr(subject, "attributes", False):
        return "this subject's steps are not attributed"
    return subject.why_not_attributed()


@dataclass(frozen=True)
class Counted:
    symbols: dict[str, float]      # self instructions per iteration, by symbol
    total: float                   # instructions per iteration


def profiled(subject, build, name: str) -> Counted:
    """The bench's exact profile of micro bench with the build (a UserError when the program cannot
    be profiled): CSubject.counted."""
    from flagbench.run.profiled import exact_profile
    from flagbench.run.harness import MICRO_C, Program, link_with_build, program_dir
    bench = subject.bench
    where = program_dir(subject.workdir, "attributed", name, build.cell.target, build.cell.compiler)
    exe = link_with_build(build, Program(MICRO_C, (f"-DFB_FN={bench.function}",), f"micro-{bench.function}"),
                          where)
    symbols, total, _ = exact_profile(exe, build.cell.target, bench.count_iters, where, bench.timeout)
    return Counted(symbols, total)


def relinked_floor(subject, build, counted: Counted) -> float:
    """The largest change of the count when only layout changes: the good end relinked
    FLOOR_RELINKS times, a padding object of 16..4096 bytes first (run/layout.py): CSubject.floor."""
    from flagbench.run.layout import plan, relink
    moved = []
    for lay in plan(FLOOR_RELINKS, len(build.objects)):
        relinked = relink(build, lay, subject.workdir)
        moved.append(abs(profiled(subject, relinked, f"good@L{lay.index}").total - counted.total))
    return max(moved)


class GoodEnd:
    """The good end's build (a copy the subject keeps: a walked O= directory moves on), its
    counts (subject.counted) and its A/A floor (subject.floor), each taken once."""

    def __init__(self, subject, build):
        self.subject, self.build = subject, subject.kept(build)
        self._counted: Counted | None = None
        self._floor: float | None = None

    @property
    def counted(self) -> Counted:
        if self._counted is None:
            self._counted = self.subject.counted(self.build, "good")
        return self._counted

    @property
    def floor(self) -> float:
        if self._floor is None:
            self._floor = self.subject.floor(self.build, self.counted)
        return self._floor

    def prepare(self) -> None:
        """Counts and floor now, outside any step: their failures are the bisection's."""
        self.counted, self.floor   # noqa: B018 - taken for their side effect


def attributed(good: GoodEnd, build) -> Attribution:
    """The step's count delta against the good end, split (see the module doc)."""
    if good.subject.same_build(good.build, build):
        step, changed = good.counted, ()
    else:
        step = good.subject.counted(build, "step")
        changed = good.subject.changed(good.build, build)
    return attribute(good.counted.symbols, step.symbols, changed, floor=good.floor, total_old=good.counted.total,
                     total_new=step.total, unit="insns/iter", calls=1)


def step_cell(subject, good: GoodEnd, build):
    """An engine cell for one step: it emits the bench's total count and the attributed value
    (the good end's total plus the effect delta), with the step's cause and total as facts."""
    from flagbench.run.engine import BenchCell
    total_metric = subject.counted_metric()

    def job(emit):
        a = attributed(good, build)
        line = cause_line(cause(a))
        emit(total_metric, a.total_new)
        emit(ATTRIBUTED, a.total_old + a.effect_delta,
             facts={"cause": line, "total": a.total_new, "floor": a.floor})
    cell = build.cell
    return BenchCell(subject.bench.name, cell.variant.name, cell.target, cell.compiler, counted=job,
                     count_executor=subject.count_executor(cell),
                     counted_metric=ATTRIBUTED.name, provenance={"good": good.build.cell.variant.name})
