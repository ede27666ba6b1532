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
    attributes = True      # its insns steps can be split by kernel function (bisect/attributed.py)
    floor_how = "booted twice, one extra ignored command-line word"

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._meter = None
        self._last = None         # (sha, build): the walked O= directory holds that commit's build

    def build(self, commit=None, column: str | None = None):
        """The kernel at the commit (None: the source tree as it is on disk, which `git bisect
        run` checked out: built out of tree like any `source = PATH`, the tree only read);
        None when it does not build (the step is skipped)."""
        from flagbench import subject
        if commit is not None and self._last is not None and self._last[0] == commit.sha:
            return self._last[1]      # nothing built since: the O= directory still holds it
        self.builds += 1
        ref = (commit.sha, commit) if commit is not None else (None, None)
        cell = replace(self.cell, variant=replace(self.cell.variant, ref=ref[0], commit=ref[1]))
        kb = subject.of(self.exp).kernels([cell], jobs=self.jobs, progress=True, boot=True)[0]
        if not kb.ok:
            self.why = (kb.error or "make failed").splitlines()[0]
            self._last = None
            return None
        self._last = (commit.sha, kb) if commit is not None else None
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
        from flagbench.run.engine import BenchCell
        metric_decl = self.counted_metric()

        def boot(emit):
            row = self.meter(kb).measure(kb.vmlinux, kb.system_map)
            emit(metric_decl, row.per_iter(row.kernel))
        cell = kb.cell
        return [BenchCell(self.bench.name, cell.variant.name, cell.target, cell.compiler, counted=boot,
                          count_executor="qemu-system", counted_metric=metric_decl.name)]

    def meter(self, kb):
        from flagbench.bisect.objects import GuestMeter
        if self._meter is None:
            self._meter = GuestMeter(self.exp, self.bench, kb.cell.target, self.workdir / "boots")
        return self._meter

    # -- the attributed change (bisect/attributed.py) -------------------------------------------
    def why_not_attributed(self) -> str | None:
        return None

    def kept(self, kb):
        """KB with its vmlinux and System.map copied out of the walked O= directory (the next
        commit's build overwrites them there)."""
        import shutil
        where = self.workdir / "good-end" / (kb.cell.variant.ref or "worktree")
        where.mkdir(parents=True, exist_ok=True)
        vmlinux, system_map = where / "vmlinux", where / "System.map"
        shutil.copyfile(kb.vmlinux, vmlinux)
        shutil.copyfile(kb.system_map, system_map)
        return replace(kb, vmlinux=vmlinux, system_map=system_map)

    def same_build(self, a, b) -> bool:
        return a is b or (a.cell.variant.ref is not None and a.cell.variant.ref == b.cell.variant.ref)

    def counted(self, kb, name: str, append: tuple[str, ...] = ()):
        """(symbols, total): the guest bench's kernel instructions per iteration, by symbol and in all."""
        from flagbench.bisect.attributed import Counted
        row = self.meter(kb).measure(kb.vmlinux, kb.system_map, append=append)
        return Counted({s: row.per_iter(n) for s, n in sorted(row.profile.items()) if n}, row.per_iter(row.kernel))

    def floor(self, kb, counted) -> float:
        """|A/A difference| of kernel instructions per iteration: the kernel booted again with one
        extra ignored command-line word (as run/guest's Booter.floor)."""
        from flagbench.run.guest.guest import AA_WORD
        return abs(self.counted(kb, "aa", append=(AA_WORD,)).total - counted.total)

    def changed(self, good_kb, kb) -> tuple[str, ...]:
        """The kernel functions whose code differs between the two vmlinux files (asm/compare.py)."""
        from flagbench.asm.compare import compare_files
        from flagbench.attribution import changed_functions
        return changed_functions(compare_files(good_kb.vmlinux, kb.vmlinux, rank=False))

    def count_executor(self, cell) -> str:
        return "qemu-system"

    def time_cell(self, *args, **kw):
        return self.timed_jobs()

    def timed_jobs(self, *builds) -> list:
        raise UserError("a kernel is not bisected on time: under qemu TCG a guest's time is emulated time "
                        "(use --metric insns)")
