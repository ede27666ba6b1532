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
"""
from __future__ import annotations

from dataclasses import dataclass

from flagbench.attribution import Attribution, attribute, cause, cause_line, changed_functions
from flagbench.metrics import count

FLOOR_RELINKS = 3
ATTRIBUTED = count("attributed_insns_per_iter", label="attributed insns/iter")
BENCH_KINDS = ("micro",)       # exact profiles are taken of micro benches (profile_experiment.py)


def supports(subject) -> str | None:
    """None when the subject's steps can be attributed, else why not (the threshold then takes the total)."""
    if not getattr(subject, "attributes", False):
        return "a kernel's steps are not attributed yet"
    kind = getattr(subject.bench, "kind", None)
    if kind not in BENCH_KINDS:
        return f"bench {getattr(subject.bench, 'name', '?')} is a {kind} bench: exact profiles are of micro benches"
    return None


@dataclass(frozen=True)
class Counted:
    symbols: dict[str, float]      # self instructions per iteration, by symbol
    total: float                   # instructions per iteration


def profiled(subject, build, name: str) -> Counted:
    """The bench's exact profile with the build (a UserError when the program cannot be profiled)."""
    from flagbench.run.profiled import exact_profile
    from flagbench.run.harness import MICRO_C, Program, link_with_build, program_dir
    bench = subject.bench
    where = program_dir(subject.workdir, "attributed", name, build.cell.target, build.cell.compiler)
    exe = link_with_build(build, Program(MICRO_C, (f"-DFB_FN={bench.function}",), f"micro-{bench.function}"),
                          where)
    symbols, total, _ = exact_profile(exe, build.cell.target, bench.count_iters, where, bench.timeout)
    return Counted(symbols, total)


class GoodEnd:
    """The good end's build, its exact profile and its A/A floor, each taken once."""

    def __init__(self, subject, build):
        self.subject, self.build = subject, build
        self._counted: Counted | None = None
        self._floor: float | None = None

    @property
    def counted(self) -> Counted:
        if self._counted is None:
            self._counted = profiled(self.subject, self.build, "good")
        return self._counted

    @property
    def floor(self) -> float:
        """The largest change of the count when only layout changes: the good end relinked
        FLOOR_RELINKS times, a padding object of 16..4096 bytes first (run/layout.py)."""
        if self._floor is None:
            from flagbench.run.layout import plan, relink
            moved = []
            for lay in plan(FLOOR_RELINKS, len(self.build.objects)):
                relinked = relink(self.build, lay, self.subject.workdir)
                moved.append(abs(profiled(self.subject, relinked, f"good@L{lay.index}").total - self.counted.total))
            self._floor = max(moved)
        return self._floor

    def prepare(self) -> None:
        """Profile and floor now, outside any step: their failures are the bisection's."""
        self.counted, self.floor   # noqa: B018 - taken for their side effect


def attributed(good: GoodEnd, build) -> Attribution:
    """The step's count delta against the good end, split (see the module doc)."""
    from flagbench.asm.compare import compare_object_sets
    if build is good.build:
        step, changed = good.counted, ()
    else:
        step = profiled(good.subject, build, "step")
        changed = changed_functions(compare_object_sets(list(good.build.objects), list(build.objects), rank=False))
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
                     count_executor="callgrind" if cell.target == "x86_64" else "qemu-plugin",
                     counted_metric=ATTRIBUTED.name, provenance={"good": good.build.cell.variant.name})
