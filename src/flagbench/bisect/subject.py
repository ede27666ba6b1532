"""What a bisection measures: one cell of an experiment whose sources (a C experiment's files,
a kernel experiment's `[kernel] source`) live in a git repository. CSubject and KernelSubject
differ in how a commit is built and counted; picking the cell and the repository is this.

What a subject measures are engine cells (run/engine.BenchCell), run by the engine into the
bisection's run (bisect/stored.py): `cells(build, name)` for the exact metrics, `time_cell(...)`
for a timed step; `metric(name)` is the declared Metric behind the --metric NAME."""
from __future__ import annotations

from pathlib import Path

from flagbench.errors import UserError
from flagbench.metrics import NS_PER_ITER, Metric, count

CODE_BYTES = count("code_bytes", "bytes")         # bloat-o-meter's Function table: code symbols
TIME_RATIO = Metric("ns_per_iter_ratio", "ratio", better=NS_PER_ITER.better)   # commit/good, paired rounds


class Subject:
    what = "its sources are"   # said when the experiment's sources are not in a git repository
    guest = False              # its bench runs in a guest (a kernel's) rather than on the objects

    def __init__(self, exp, bench, *, variant: str | None, target: str | None, compiler: str | None,
                 workdir: Path, jobs: int = 2):
        cells = [c for c in exp.cells() if (variant is None or c.variant.name == variant)
                 and (target is None or c.target == target) and (compiler is None or c.compiler == compiler)]
        if not cells:
            raise UserError(f"{exp.path}: no cell of variant {variant or '*'}, target {target or '*'}, "
                            f"compiler {compiler or '*'}")
        self.exp, self.bench, self.cell, self.workdir, self.jobs = exp, bench, cells[0], workdir, jobs
        self.repo: Path | None = None
        self.builds = 0                # builds attempted (each commit once)
        self.why = ""                  # why the last build failed

    def repository(self) -> Path:
        """The git work tree holding the experiment's sources."""
        from flagbench import subject
        if self.repo is None:
            self.repo = subject.of(self.exp).repository()
            if self.repo is None:
                raise UserError(f"{self.exp.path}: {self.what} not in a git repository: nothing to bisect")
        return self.repo

    def metric(self, name: str) -> Metric:
        """The declared metric behind --metric NAME (insns, size, time)."""
        if name == "size":
            return CODE_BYTES
        if name == "time":
            return TIME_RATIO
        if name == "insns":
            return self.counted_metric()
        raise UserError(f"--metric {name}: one of insns, size, time")

    def counted_metric(self) -> Metric:
        raise NotImplementedError

    def count(self, build, name: str) -> float:
        """The build's value of an exact metric, measured by the engine now (nothing stored)."""
        from flagbench.bisect.stored import once
        return once(self.cells(build, name), self.metric(name).name, self.workdir / "once")


def size_cell(build, files, variant: str | None = None):
    """An engine cell emitting the code bytes of FILES (objects, or a vmlinux)."""
    from flagbench.bisect.cobjects import code_bytes
    from flagbench.run.engine import BenchCell

    def job(emit):
        emit(CODE_BYTES, float(code_bytes(files)))
    cell = build.cell
    return BenchCell("code bytes", variant or cell.variant.name, cell.target, cell.compiler, counted=job,
                     count_executor="nm", counted_metric=CODE_BYTES.name)
