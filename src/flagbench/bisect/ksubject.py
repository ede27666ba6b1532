"""A kernel experiment as the subject of a bisection: `[kernel] source` is a git repository,
each step's commit is built as the experiment's variant at that ref (kbuild walks one checkout
and one O= directory commit by commit, as ktest does: only what a commit changed recompiles),
booted, and its guest bench counted; `size` is the code bytes of vmlinux, no boot.

Time is not bisected here: under TCG a guest's time is emulated time.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flagbench.errors import UserError


class KernelSubject:
    def __init__(self, exp, bench, *, variant: str | None, target: str | None, compiler: str | None,
                 workdir: Path, jobs: int = 2):
        cells = [c for c in exp.cells() if (variant is None or c.variant.name == variant)
                 and (target is None or c.target == target) and (compiler is None or c.compiler == compiler)]
        if not cells:
            raise UserError(f"{exp.path}: no cell of variant {variant or '*'}, target {target or '*'}")
        self.exp, self.bench, self.cell, self.workdir, self.jobs = exp, bench, cells[0], workdir, jobs
        self.repo: Path | None = None
        self.builds = 0
        self.why = ""
        self._meter = None
        self._values: dict[tuple[str, str], float] = {}

    def repository(self) -> Path:
        from flagbench import refspec
        if self.repo is None:
            self.repo = refspec.repository(self.exp)
            if self.repo is None:
                raise UserError(f"{self.exp.path}: [kernel] source is not a git repository: nothing to bisect")
        return self.repo

    def build(self, commit=None, column: str | None = None):
        """The kernel at the commit; None when it does not build (the step is skipped)."""
        from flagbench.run.guest import boot
        from flagbench.kbuild import build as kbuild
        if commit is None:
            raise UserError("--run-step on a kernel experiment: not built yet (use --good/--bad)")
        self.builds += 1
        cell = replace(self.cell, variant=replace(self.cell.variant, ref=commit.sha, commit=commit))
        kb = kbuild.build_kernels(self.exp, [cell], jobs=self.jobs, progress=True,
                                  extra_fragments=boot.boot_fragments(self.exp))[0]
        if not kb.ok:
            self.why = (kb.error or "make failed").splitlines()[0]
            return None
        return kb

    def count(self, kb, metric: str) -> float:
        """Measured at once: the walked O= directory holds the next commit's build after the next step."""
        from flagbench.bisect.cobjects import code_bytes
        if metric == "size":
            return float(code_bytes([kb.vmlinux]))
        if metric != "insns":
            raise UserError("a kernel is bisected on insns (the guest bench's kernel instructions) or size")
        from flagbench.bisect.objects import GuestMeter
        if self._meter is None:
            self._meter = GuestMeter(self.exp, self.bench, kb.cell.target, self.workdir / "boots")
        row = self._meter.measure(kb.vmlinux, kb.system_map)
        return row.per_iter(row.kernel)

    def timed_jobs(self, *builds) -> list:
        raise UserError("a kernel is not bisected on time: under qemu TCG a guest's time is emulated time "
                        "(use --metric insns)")
