"""A C experiment as the subject of a bisection: its sources read at a commit (an export in
the cache, never the user's checkout), built for one cell, measured by one bench.

The experiment file is the one on disk; only its sources come from the commit, so the
benches and variants stay what the user wrote while the code moves under them. Two commits
with one tree share an export and every object (build.py keys objects by content).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flagbench.bisect.subject import TIME_RATIO, Subject, size_cell
from flagbench.errors import StepFailed, UserError


class CSubject(Subject):
    attributes = True      # its insns steps can be split by function (bisect/attributed.py)

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._built: dict[str, object] = {}
        self.iterations: int | None = None   # of a timed sample

    # -- sources at a commit --------------------------------------------------------------
    def at(self, commit) -> tuple:
        """(experiment, cell) with the sources as the commit has them (refspec: an export in the
        cache); a variant's own `ref` is replaced by the step's commit."""
        from flagbench import refspec

        def fail(what: str):
            raise UserError(f"{self.exp.path}: {what}")

        def moved(v):
            own = v.sources if v.commit is None else None   # a ref'd variant's sources are already an export
            return refspec.sources_at(commit, own or self.exp.sources, fail)
        variants = tuple(replace(v, sources=moved(v), commit=commit) for v in self.exp.variants)
        exp = replace(self.exp, variants=variants)
        cell = replace(self.cell, variant=exp.variant(self.cell.variant.name))
        return exp, cell

    # -- building and measuring -------------------------------------------------------------
    def build(self, commit=None, column: str | None = None):
        """The cell built at the commit (None: the sources as they are on disk), under its own
        column name; None when it does not compile (a skipped step), with the reason in .why."""
        from flagbench import build as builds
        key = commit.tree if commit is not None else ""
        if key in self._built:
            return self._built[key]
        exp, cell = self.at(commit) if commit is not None else (self.exp, self.cell)
        self.builds += 1
        try:
            b = builds.build(exp, [cell], jobs=self.jobs)[0]
        except UserError as e:   # the export's path says nothing: the file as the repository names it
            from flagbench.refspec import export_dir
            self.why = str(e).replace(f"{export_dir(commit)}/", "") if commit is not None else str(e)
            self._built[key] = None
            return None
        name = column or (commit.short if commit is not None else "worktree")
        b = replace(b, cell=replace(b.cell, variant=replace(b.cell.variant, name=name)))
        self._built[key] = b
        return b

    def counted_metric(self):
        from flagbench.bisect.cobjects import COUNTED_METRICS
        from flagbench.metrics import DECLARED
        if self.bench is None or self.bench.kind not in COUNTED_METRICS:
            what = f"bench {self.bench.name}: exact counts of {self.bench.kind} benches" if self.bench else "insns"
            raise UserError(f"{what} cannot be bisected")
        return DECLARED[COUNTED_METRICS[self.bench.kind]]

    def cells(self, build, metric: str) -> list:
        """Engine cells measuring an exact metric of a build: its code bytes, or the bench's
        counted cells (their values of counted_metric add up to the step's)."""
        if metric == "size":
            return [size_cell(build, list(build.objects))]
        from flagbench.run.kinds import cells_for_bench
        self.counted_metric()
        bench = replace(self.bench, metrics=("insns",))
        cells = cells_for_bench(bench, [build], root=self.exp.root, workdir=self.workdir, notes=[])
        return [replace(c, timed=None) for c in cells if c.counted is not None]

    # -- the attributed change (bisect/attributed.py) -------------------------------------------
    floor_how = "relinked, layout only"

    def why_not_attributed(self) -> str | None:
        kind = getattr(self.bench, "kind", None)
        if kind != "micro":
            return f"bench {getattr(self.bench, 'name', '?')} is a {kind} bench: exact profiles are of micro benches"
        return None

    def kept(self, build):
        return build              # objects are kept by content in the cache

    def same_build(self, a, b) -> bool:
        return a is b

    def counted(self, build, name: str):
        """(symbols, total) of instructions per iteration: the micro bench's exact profile."""
        from flagbench.bisect.attributed import profiled
        return profiled(self, build, name)

    def floor(self, build, counted) -> float:
        from flagbench.bisect.attributed import relinked_floor
        return relinked_floor(self, build, counted)

    def changed(self, good_build, build) -> tuple[str, ...]:
        """The functions whose code differs between the two builds' objects (asm/compare.py)."""
        from flagbench.asm.compare import compare_object_sets
        from flagbench.attribution import changed_functions
        return changed_functions(compare_object_sets(list(good_build.objects), list(build.objects), rank=False))

    def count_executor(self, cell) -> str:
        return "callgrind" if cell.target == "x86_64" else "qemu-plugin"

    def time_cell(self, good_build, build, threshold, opts, progress, keep: dict | None = None):
        """One engine cell whose counted job is a timed step (bisect/timed.decide: paired rounds of
        the good end and the build until the interval decides); it emits the ratio build/good with
        the step's verdict and interval as facts (also put in KEEP)."""
        from flagbench.bisect import timed
        from flagbench.run.engine import BenchCell

        good_job, job = self.timed_jobs(good_build, build)

        def step(emit):
            got = timed.decide(good_job, job, threshold, alpha=opts.alpha, max_pairs=opts.max_pairs,
                               budget_s=opts.step_budget_s, seed=opts.seed, progress=progress,
                               higher_is_better=TIME_RATIO.higher_is_better)
            facts = {"detail": got.describe(), "verdict": got.verdict, "decided": got.decided}
            if keep is not None:
                keep.update(facts)
            emit(TIME_RATIO, got.estimate, facts=facts)
        cell = build.cell
        return BenchCell("time step", cell.variant.name, cell.target, cell.compiler, counted=step,
                         count_executor="native", counted_metric=TIME_RATIO.name,
                         provenance={"good": good_build.cell.variant.name})

    def timed_jobs(self, *builds) -> list:
        """One callable per build returning a timed sample: CPU ns per iteration of the micro
        bench's loop (see _sample). One iteration count, calibrated once on the first build to
        ~CPU_TARGET_S of CPU time, serves all of them, so their samples compare."""
        from flagbench.run.harness import MICRO_C, Program, link_with_build, program_dir
        if self.bench.kind != "micro":
            raise UserError(f"bench {self.bench.name}: bisection on time takes micro benches, not {self.bench.kind}")
        if builds[0].cell.target != HOST_TARGET:
            raise UserError(f"{builds[0].cell.target}: time is measured natively on {HOST_TARGET} only")
        fn = self.bench.function
        program = Program(MICRO_C, (f"-DFB_FN={fn}",), f"micro-{fn}")
        exes = [link_with_build(b, program, program_dir(self.workdir, "timed", b.cell.variant.name,
                                                           b.cell.target, b.cell.compiler)) for b in builds]
        if self.iterations is None:   # one start-up for all: a per-program one would be a bias of its own
            self.iterations = _calibrate(exes[0], self.bench.timeout)
            self.start_up = _start_up(exes[0], self.bench.timeout)
        return [_sample(exe, self.iterations, self.bench.timeout, self.start_up) for exe in exes]


CPU_TARGET_S = 0.02
HOST_TARGET = "x86_64"


def _cpu_seconds(exe: Path, n: int, timeout: float) -> float:
    """CPU time (user + system, from wait4's rusage) of one timed run of the loop with n iterations."""
    from flagbench import procs
    from flagbench.run import noise
    start = noise.mark()
    done = procs.run([str(exe), "t", str(n)], timeout=timeout, env={"PATH": "/usr/bin:/bin"})
    used = noise.since(start)
    if done.failure or done.returncode:
        raise StepFailed(f"{exe.name} t {n}: {done.failure or f'exit status {done.returncode}'}")
    return used.cpu_s


def _calibrate(exe: Path, timeout: float) -> int:
    n = 1024
    while _cpu_seconds(exe, n, timeout) < CPU_TARGET_S and n < 1 << 40:
        n *= 2
    return n


def _start_up(exe: Path, timeout: float) -> float:
    """CPU seconds of a run with one iteration (exec, the harness's start, exit): the median of 9."""
    runs = sorted(_cpu_seconds(exe, 1, timeout) for _ in range(9))
    return runs[4]


def _sample(exe: Path, n: int, timeout: float, start_up: float):
    """A timed sample: CPU ns per iteration, the run's CPU time less its start-up, over n. On a
    busy machine the wall time is mostly waiting for a CPU, which no commit changes: at load 14
    on 2 cores a run got 10-20 % of a CPU and wall-time steps came out +-15 % wide after 48 pairs."""
    def run() -> float:
        return max(_cpu_seconds(exe, n, timeout) - start_up, 1e-9) * 1e9 / n
    return run
