"""command: a whole command per variant, timed from outside ("seconds").

The command is an argument list (never a shell string); placeholders are filled per
variant: {dir} (the cell's object directory), {cc} (the compiler argv), {cflags},
{target}, {variant}, {root} (the experiment's directory).
"""
from __future__ import annotations

import re
from typing import Sequence

from flagbench.benchspec import CommandBench
from flagbench.errors import UserError
from flagbench.metrics import SECONDS
from flagbench.run.engine import BenchCell, Emit
from flagbench.run.executors import NativeExecutor
from flagbench.run.kinds.context import Context, compile_flags, emit_perf
from flagbench.toolchains import get_target


def fill_command(command: Sequence[str], values: dict[str, list[str]]) -> list[str]:
    """Placeholders per variant: an argument that is exactly "{cflags}" becomes one
    argument per flag; inside a longer argument the flags are joined by spaces.

    >>> fill_command(["make", "-C", "{dir}", "CFLAGS={cflags}", "{cflags}"],
    ...              {"dir": ["/b"], "cflags": ["-O2", "-mfoo"]})
    ['make', '-C', '/b', 'CFLAGS=-O2 -mfoo', '-O2', '-mfoo']
    """
    out = []
    for arg in command:
        whole = re.fullmatch(r"\{(\w+)\}", arg)
        if whole and whole.group(1) in values:
            out += values[whole.group(1)]
            continue
        out.append(re.sub(r"\{(\w+)\}", lambda m: " ".join(values[m.group(1)]) if m.group(1) in values
                          else m.group(0), arg))
    return out


def cells(ctx: Context, build) -> list[BenchCell]:
    bench: CommandBench = ctx.bench
    target, compiler = build.cell.target, build.cell.compiler
    try:
        cc = get_target(target).compiler_argv(compiler)
    except LookupError as e:
        raise UserError(f"bench {ctx.name}: {e}") from None
    argv = fill_command(bench.command, {"dir": [str(build.dir)], "cc": cc, "cflags": compile_flags(build),
                                        "target": [target], "variant": [build.cell.variant.name],
                                        "root": [str(ctx.root)]})
    executor = NativeExecutor(cpu=None, parse_stdout=False, perf=ctx.perf)   # a build may use every CPU

    def timed(emit: Emit) -> str | None:
        m = executor.measure(argv, timeout=bench.timeout)
        if not m.ok:
            return ctx.failure(m) + (f": {m.stderr.strip().splitlines()[-1]}" if m.stderr.strip() else "")
        emit(SECONDS, m.metrics["wall_ns"] / 1e9)
        emit_perf(m, emit)
        return None

    return [ctx.cell(build, build.cell.variant.name, {}, timed=timed, executor="native-command",
                     timed_metric="seconds", provenance={"command": argv})]
