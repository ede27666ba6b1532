"""What a bisection measures: one cell of an experiment whose sources (a C experiment's files,
a kernel experiment's `[kernel] source`) live in a git repository. CSubject and KernelSubject
differ in how a commit is built and counted; picking the cell and the repository is this."""
from __future__ import annotations

from pathlib import Path

from flagbench.errors import UserError


class StepFailed(UserError):
    """A commit built but its bench did not run to the end (a crash, a timeout, a kernel that
    does not boot): the step is skipped like a commit that does not build, not the bisection."""


class Subject:
    what = "its sources are"   # said when the experiment's sources are not in a git repository

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
        from flagbench import refspec
        if self.repo is None:
            self.repo = refspec.repository(self.exp)
            if self.repo is None:
                raise UserError(f"{self.exp.path}: {self.what} not in a git repository: nothing to bisect")
        return self.repo
