"""A C experiment as the subject of a bisection: its sources read at a commit (an export in
the cache, never the user's checkout), built for one cell, measured by one bench.

The experiment file is the one on disk; only its sources come from the commit, so the
benches and variants stay what the user wrote while the code moves under them. Two commits
with one tree share an export and every object (build.py keys objects by content).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flagbench.errors import UserError


class CSubject:
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
        self._built: dict[str, object] = {}

    # -- sources at a commit --------------------------------------------------------------
    def repository(self) -> Path:
        """The git work tree holding the experiment's sources."""
        from flagbench import refspec
        if self.repo is None:
            self.repo = refspec.repository(self.exp)
            if self.repo is None:
                raise UserError(f"{self.exp.path}: its sources are not in a git repository: nothing to bisect")
        return self.repo

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
        except UserError as e:
            self.why = str(e)
            self._built[key] = None
            return None
        name = column or (commit.short if commit is not None else "worktree")
        b = replace(b, cell=replace(b.cell, variant=replace(b.cell.variant, name=name)))
        self._built[key] = b
        return b

    def count(self, build, metric: str) -> float:
        """Exact counts or code bytes of a build (deterministic: measured once)."""
        from flagbench.bisect.cobjects import COUNTED_METRICS, code_bytes
        if metric == "size":
            return float(code_bytes(build.objects))
        from flagbench.run.kinds import cells_for_bench
        if self.bench.kind not in COUNTED_METRICS:
            raise UserError(f"bench {self.bench.name}: exact counts of {self.bench.kind} benches cannot be bisected")
        bench = replace(self.bench, metrics=("insns",))
        total = 0.0
        for cell in cells_for_bench(bench, [build], root=self.exp.root, workdir=self.workdir, notes=[]):
            got: dict[str, float] = {}
            reason = cell.counted(lambda m, v, u: got.__setitem__(m, v)) if cell.counted else "no counted job"
            if reason:
                raise UserError(f"bench {self.bench.name} at {build.cell.variant.name}: {reason}")
            total += got[COUNTED_METRICS[self.bench.kind]]
        return total

    def timed_jobs(self, *builds) -> list:
        """One callable per build returning a timed sample (ns per iteration); one calibration
        of the iteration count serves all of them, so their samples compare."""
        from flagbench.run.kinds import cells_for_bench
        if self.bench.kind != "micro":
            raise UserError(f"bench {self.bench.name}: bisection on time takes micro benches, not {self.bench.kind}")
        bench = replace(self.bench, metrics=("time",), layouts=0)
        cells = cells_for_bench(bench, list(builds), root=self.exp.root, workdir=self.workdir, notes=[])
        by_column = {c.variant: c for c in cells if c.timed is not None}
        jobs = []
        for b in builds:
            cell = by_column.get(b.cell.variant.name)
            if cell is None:
                raise UserError(f"bench {self.bench.name}: {b.cell.target} cannot be timed here")
            jobs.append(_sample(cell, self.bench.name))
        return jobs


def _sample(cell, bench: str):
    def run() -> float:
        got: dict[str, float] = {}
        reason = cell.timed(lambda m, v, u: got.__setitem__(m, v))
        if reason:
            raise UserError(f"bench {bench}, {cell.variant}: {reason}")
        return got["ns_per_iter"]
    return run
