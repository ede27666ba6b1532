"""wis: a will-it-scale testcase per variant (x86_64 only), compiled with the variant's
flags; one sample is one whole driver run of `duration` seconds after `warmup_seconds`,
stored as its per-second rates ("per_second", iter/s) all at once when the run ends."""
from __future__ import annotations

from flagbench.benchspec import WisBench
from flagbench.metrics import PER_SECOND
from flagbench.run.engine import BenchCell, Emit
from flagbench.run.executors import HOST_TARGET
from flagbench.run.kinds.context import Context, compile_flags
from flagbench.run.places import Place
from flagbench.run.wis import build_programs, limit, run_driver

INTERVAL = 1.0


def cells(ctx: Context, build) -> list[BenchCell]:
    bench: WisBench = ctx.bench
    target = build.cell.target
    if target != HOST_TARGET:
        ctx.note(f"{target}: will-it-scale testcases run on {HOST_TARGET} only")
        return []
    exes = build_programs(bench.testcase, bench.modes, compile_flags(build), target=target,
                          compiler=build.cell.compiler,
                          out_dir=ctx.workdir / bench.name / build.cell.variant.name)
    n_warmup, n_kept = round(bench.warmup_seconds / INTERVAL), round(bench.duration / INTERVAL)
    timeout = min(bench.timeout, limit(n_warmup, n_kept, INTERVAL))

    def job(mode: str, tasks: int, place: Place):
        def timed(emit: Emit) -> str | None:
            result = run_driver(exes[mode], tasks, n_warmup, n_kept, INTERVAL, timeout=timeout, mode=mode,
                                place=place, target=target)
            if result["failure"]:
                return result["failure"]
            for rate in result["samples"]:
                emit(PER_SECOND, rate)
            return None
        return timed

    return [cell for mode in bench.modes for n in bench.tasks
            for cell in ctx.cells_on(build, build.cell.variant.name, {"mode": mode, "tasks": n},
                                     timed_on=lambda place, mode=mode, n=n: job(mode, n, place), counted=None,
                                     executor="wis", timed_metric="per_second", per_invocation=n_kept,
                                     provenance={"testcase": str(bench.testcase), "duration": bench.duration,
                                                 "warmup_seconds": bench.warmup_seconds})]
