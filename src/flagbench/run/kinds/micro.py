"""micro: `uint64_t FUNCTION(uint64_t n)` called by harness/micro.c.

- time (x86_64, native): "ns_per_iter" (ns). n is calibrated once per bench, target and
  compiler (one call >= 20 ms) and then used for every variant and sample.
- insns (callgrind / qemu + plugin): runs with n and 2n iterations; the difference over
  n is "insns_per_iter" (and loads/stores per iteration, by width, under qemu): exact, so
  measured once. The small run is checked before the large one starts, and both share
  one timeout.
- `layouts = K`: the variants in `layout_variants` (default: the baseline) are also
  relinked K times with their code moved (run/layout.py), each relink its own column
  "VARIANT@Ln", timed only (the machine code is the same, so the counts are too).
"""
from __future__ import annotations

from pathlib import Path

from flagbench import procs
from flagbench.benchspec import MicroBench
from flagbench.metrics import INSNS_PER_ITER, NS_PER_ITER, count
from flagbench.run.engine import BenchCell, Emit
from flagbench.run.executors import executor_for
from flagbench.run.harness import MICRO_C, Program
from flagbench.run.kinds.context import (Context, count_executor_name, counter_deltas, defined_symbols, emit_perf,
                                         need_function, pad)
from flagbench.run.places import Place


def cells(ctx: Context, build) -> list[BenchCell]:
    bench: MicroBench = ctx.bench
    measures = ctx.measures_for(build.cell.target)
    if not measures:
        return []
    function = bench.function
    if function not in defined_symbols(build):
        need_function(ctx, function, set().union(*(defined_symbols(b) for b in ctx.builds)))
        ctx.note(f"{build.cell.target}/{build.cell.compiler}: {function} is not built for this target; skipped")
        return []
    program = Program(MICRO_C, (f"-DFB_FN={function}",), f"micro-{function}")
    variant = build.cell.variant.name
    exe = ctx.program(build, program)
    out = _cells(ctx, build, exe, variant, measures, {})
    relinked = bench.layout_variants if bench.layout_variants is not None else (ctx.baseline,)
    if bench.layouts and variant in relinked and "time" in measures:
        from flagbench.run.layout import layout_column, plan, relink, symbol_address
        for cell in out:
            cell.provenance["function_address"] = symbol_address(exe, function)   # the unshifted layout
        for layout in plan(bench.layouts, len(build.objects)):
            column = layout_column(variant, layout.index)
            exe = ctx.program(relink(build, layout, ctx.workdir), program, column)
            address = symbol_address(exe, function)
            out += _cells(ctx, build, exe, column, ["time"], {**layout.describe(), "function_address": address})
    return out


def _cells(ctx: Context, build, exe: Path, column: str, measures: list[str], provenance: dict) -> list[BenchCell]:
    bench: MicroBench = ctx.bench
    target, iters = build.cell.target, bench.count_iters

    def timed_on(place: Place):
        calib_key = (place.name, target, build.cell.compiler)

        def timed(emit: Emit) -> str | None:
            return _timed(ctx, exe, target, calib_key, place, emit)
        return timed

    def counted(emit: Emit) -> str | None:
        executor, deadline = executor_for(target, "insns"), procs.Deadline(bench.timeout)
        runs = []
        for n in (iters, 2 * iters):    # checked one by one: a hang costs one timeout, not two
            m = executor.measure([str(exe), "c", pad(n)], target=target, timeout=deadline.left())
            reason = ctx.failure(m, "insns")
            if reason:
                return reason
            runs.append(m)
        for metric, delta in counter_deltas(*runs).items():
            emit(INSNS_PER_ITER if metric == "insns" else count(f"{metric}_per_iter", metric.split("_")[0]),
                 delta / iters)
        return None

    return ctx.cells_on(build, column, {},
                        timed_on=timed_on if "time" in measures else None,
                        counted=counted if "insns" in measures else None,
                        executor="native", count_executor=count_executor_name(target),
                        timed_metric="ns_per_iter", counted_metric="insns_per_iter",
                        provenance={"function": bench.function, "count_iters": iters, **provenance})


def _timed(ctx: Context, exe: Path, target: str, calib_key: tuple, place: Place, emit: Emit) -> str | None:
    """One timed sample on PLACE: n calibrated once per place, target and compiler (one call
    >= 20 ms there), then one run with n iterations."""
    native, deadline = ctx.native_executor(place), procs.Deadline(ctx.bench.timeout)
    n = ctx.calibrated.get(calib_key)
    if n is None:   # the first cell of this place and target measured sets n for every variant
        m = native.measure([str(exe)], target=target, timeout=deadline.left())
        reason = ctx.failure(m, "iters")
        if reason:
            return reason
        n = ctx.calibrated[calib_key] = int(m.metrics["iters"])
    m = native.measure([str(exe), "t", str(n)], target=target, timeout=deadline.left())
    reason = ctx.failure(m, "iters", "ns")
    if reason:
        return reason
    emit(NS_PER_ITER, m.metrics["ns"] / m.metrics["iters"])
    emit_perf(m, emit)
    return None

