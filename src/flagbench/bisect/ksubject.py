"""A kernel experiment as the subject of a bisection: `[kernel] source` is a git repository,
each step's commit is built as the experiment's variant at that ref (kbuild walks one checkout
and one O= directory commit by commit, as ktest does: only what a commit changed recompiles),
booted, and its guest bench counted; `size` is the code bytes of vmlinux, no boot.

Time is not bisected here: under TCG a guest's time is emulated time.
"""
from __future__ import annotations

from dataclasses import replace

from flagbench.bisect.subject import Subject, size_cell
from flagbench.errors import UserError


class KernelSubject(Subject):
    what = "[kernel] source is"
    guest = True

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._meter = None

    def build(self, commit=None, column: str | None = None):
        """The kernel at the commit (None: the source tree as it is on disk, which `git bisect
        run` checked out: built out of tree like any `source = PATH`, the tree only read);
        None when it does not build (the step is skipped)."""
        from flagbench import subject
        self.builds += 1
        ref = (commit.sha, commit) if commit is not None else (None, None)
        cell = replace(self.cell, variant=replace(self.cell.variant, ref=ref[0], commit=ref[1]))
        kb = subject.of(self.exp).kernels([cell], jobs=self.jobs, progress=True, boot=True)[0]
        if not kb.ok:
            self.why = (kb.error or "make failed").splitlines()[0]
            return None
        return kb

    def counted_metric(self):
        from flagbench.metrics import KERNEL_INSNS_PER_ITER
        return KERNEL_INSNS_PER_ITER

    def cells(self, kb, metric: str) -> list:
        """An engine cell measuring the kernel: code bytes of vmlinux, or a boot counting the guest
        bench's kernel instructions per iteration (at once: the walked O= directory holds the next
        commit's build after the next step)."""
        if metric == "size":
            return [size_cell(kb, [kb.vmlinux])]
        if metric != "insns":
            raise UserError("a kernel is bisected on insns (the guest bench's kernel instructions) or size")
        from flagbench.bisect.objects import GuestMeter
        from flagbench.run.engine import BenchCell
        if self._meter is None:
            self._meter = GuestMeter(self.exp, self.bench, kb.cell.target, self.workdir / "boots")
        metric_decl = self.counted_metric()

        def boot(emit):
            row = self._meter.measure(kb.vmlinux, kb.system_map)
            emit(metric_decl, row.per_iter(row.kernel))
        cell = kb.cell
        return [BenchCell(self.bench.name, cell.variant.name, cell.target, cell.compiler, counted=boot,
                          count_executor="qemu-system", counted_metric=metric_decl.name)]

    def time_cell(self, *args, **kw):
        return self.timed_jobs()

    def timed_jobs(self, *builds) -> list:
        raise UserError("a kernel is not bisected on time: under qemu TCG a guest's time is emulated time "
                        "(use --metric insns)")
