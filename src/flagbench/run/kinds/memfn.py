"""memcpy / memset / memmove: implementations compared side by side.

Every function first passes harness/memcheck.c (every dst x src alignment, growing
lengths, guard bytes; else each of its cells fails with memcheck's line), then
harness/memsweep.c runs per size x alignment: "MB/s" natively; "insns_per_byte" and
"insns_per_call" counted. The table column is the implementation (the variant too when
there are several): the seed's table compares implementations side by side.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

from flagbench import procs
from flagbench.benchspec import MemoryBench
from flagbench.metrics import INSNS_PER_BYTE, INSNS_PER_CALL, MB_PER_S
from flagbench.run.engine import BenchCell, Emit
from flagbench.run.executors import HOST_TARGET, NativeExecutor, executor_for
from flagbench.run.harness import MEMCHECK_C, MEMSWEEP_C, Program
from flagbench.run.kinds.context import (Context, count_executor_name, counter_deltas, defined_symbols,
                                         emit_perf, need_function, pad)
from flagbench.run.places import Place
from flagbench.toolchains import get_target

CHECK_TIMEOUT = 600          # memcheck: thousands of cases, under qemu for other targets


def cells(ctx: Context, build) -> list[BenchCell]:
    bench: MemoryBench = ctx.bench
    kind, target = bench.kind, build.cell.target
    aligns = list(bench.alignments)
    if kind == "memset":
        aligns = list(dict.fromkeys((d, 0) for d, _ in aligns))
    measures = ctx.measures_for(target)
    if not measures:
        return []
    out = []
    defined = defined_symbols(build)
    for function in bench.functions:
        if function == "libc" and not get_target(target).static_libc:
            ctx.note(f"{target}: no C library here (freestanding runtime); libc {kind} skipped")
            continue
        if function != "libc" and function not in defined:
            need_function(ctx, function, set().union(*(defined_symbols(b) for b in ctx.builds)))
            ctx.note(f"{target}/{build.cell.compiler}: {function} is not built for this target; skipped")
            continue
        defines = ({"memset": ("-DFB_KIND_MEMSET",), "memmove": ("-DFB_KIND_MEMMOVE",)}.get(kind, ())
                   + (("-DFB_LIBC",) if function == "libc" else (f"-DFB_FN={function}",)))
        checker = ctx.program(build, Program(MEMCHECK_C, defines, f"memcheck-{kind}-{function}"))
        sweeper = ctx.program(build, Program(MEMSWEEP_C, defines, f"memsweep-{kind}-{function}"))
        check = _memcheck(ctx, checker, target)
        column = function if ctx.single_variant else f"{build.cell.variant.name}+{function}"
        for dalign, salign in aligns:
            for size in bench.sizes:
                params = {"dalign": dalign, **({} if kind == "memset" else {"salign": salign}), "size": size}
                point = (size, dalign, salign)
                timed_on = ((lambda place, point=point: _timed(ctx, sweeper, target, build.cell.compiler, point, place))
                            if "time" in measures else None)
                out += ctx.cells_on(
                    build, column, params, check=check, timed_on=timed_on,
                    counted=_counted(ctx, sweeper, target, point) if "insns" in measures else None,
                    executor="native", count_executor=count_executor_name(target),
                    timed_metric="MB/s", counted_metric="insns_per_byte",
                    provenance={"function": function, "memcheck": str(checker)})
    return out


def _memcheck(ctx: Context, exe: Path, target: str) -> Callable[[], str | None]:
    """The correctness gate of one implementation, run once however many cells share it."""
    verdict: list[str | None] = []

    def check() -> str | None:
        if not verdict:
            argv = [str(exe)]
            qemu = get_target(target).qemu
            if target != HOST_TARGET:
                runner = shutil.which(qemu) if qemu else None
                if runner is None:
                    return f"running {target} programs needs {qemu}: apt-get install qemu-user"
                argv = [runner, *argv]
            m = NativeExecutor(cpu=None).measure(argv, timeout=max(ctx.bench.timeout, CHECK_TIMEOUT))
            reason = ctx.failure(m, "cases")
            if reason and reason.startswith("timeout"):
                reason = f"timeout after {max(ctx.bench.timeout, CHECK_TIMEOUT):g} s"
            verdict.append(f"memcheck: {reason}" if reason else None)
        return verdict[0]
    return check


def _timed(ctx: Context, exe: Path, target: str, compiler: str, point: tuple[int, int, int], place: Place):
    size, d, s = point
    key = f"size{size}.dalign{d}" + ("" if ctx.kind == "memset" else f".salign{s}")

    def timed(emit: Emit) -> str | None:
        native, deadline = ctx.native_executor(place), procs.Deadline(ctx.bench.timeout)
        reps = ctx.calibrated.get((place.name, target, compiler, point))
        if reps is None:   # calibrate: the batch that takes >= 10 ms, shared by every column
            m = native.measure([str(exe), "t", str(size), str(d), str(s), "0"], target=target,
                               timeout=deadline.left())
            reason = ctx.failure(m, f"reps.{key}")
            if reason:
                return reason
            reps = ctx.calibrated[(place.name, target, compiler, point)] = int(m.metrics[f"reps.{key}"])
        m = native.measure([str(exe), "t", str(size), str(d), str(s), str(reps)], target=target,
                           timeout=deadline.left())
        reason = ctx.failure(m, f"ns.{key}", f"reps.{key}")
        if reason:
            return reason
        ns = max(m.metrics[f"ns.{key}"], 1.0)
        emit(MB_PER_S, size * m.metrics[f"reps.{key}"] * 1e3 / ns)
        emit_perf(m, emit)
        return None
    return timed


def _counted(ctx: Context, exe: Path, target: str, point: tuple[int, int, int]):
    size, d, s = point
    reps = max(1, min(64, 65536 // size))

    def counted(emit: Emit) -> str | None:
        executor, deadline = executor_for(target, "insns"), procs.Deadline(ctx.bench.timeout)
        runs = []
        for r in (reps, 2 * reps):
            m = executor.measure([str(exe), "c", pad(size), pad(d), pad(s), pad(r)], target=target,
                                 timeout=deadline.left())
            reason = ctx.failure(m, "insns")
            if reason:
                return reason
            runs.append(m)
        delta = counter_deltas(*runs)["insns"]
        emit(INSNS_PER_BYTE, delta / (reps * size))
        emit(INSNS_PER_CALL, delta / reps)
        return None
    return counted
