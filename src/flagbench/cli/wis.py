"""`flagbench wis TESTCASE.c`: will-it-scale throughput by mode and task count."""
from __future__ import annotations

import json
import shlex
import sys

from flagbench.errors import UserError
from flagbench.export import choices, described

FORMATS = choices("text", "json")


def register(sub):
    p = sub.add_parser("wis", help="run a will-it-scale testcase (processes and threads, 1..N tasks)",
                       description="Build an unmodified will-it-scale testcase with flagbench's "
                       "driver and report iterations per second (all tasks together) per mode "
                       "and task count, warm-up samples dropped.")
    p.add_argument("testcase", help="testcase .c file (testcase, testcase_description, "
                   "optional testcase_prepare/testcase_cleanup)")
    p.add_argument("--tasks", default="1", help="task counts: 1,2,4 or 1-4 (default 1)")
    p.add_argument("--mode", choices=("processes", "threads", "both"), default="both")
    p.add_argument("--duration", type=float, default=5.0, help="seconds measured per cell (default 5)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds dropped first (default 2)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds per sample (default 1)")
    p.add_argument("--cflags", default="", help="extra compiler flags as one string; "
                   "write --cflags=-O3 when it is a single flag")
    p.add_argument("--compiler", default="gcc", help="host compiler (default gcc)")
    p.add_argument("--format", choices=FORMATS, default="text", help=f"{described(FORMATS)} (default text)")
    return p


def parse_tasks(text: str) -> list[int]:
    """Task counts: "1,2,4-6" is [1, 2, 4, 5, 6]; bounded before a range is expanded.

    >>> parse_tasks("1,2,4-6")
    [1, 2, 4, 5, 6]
    """
    from flagbench.benchspec import MAX_TASKS
    tasks: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            lo, hi = int(lo), int(hi or lo)
            if lo < 1 or hi > MAX_TASKS or hi < lo:
                raise UserError(f"--tasks {text!r}: task counts are 1..{MAX_TASKS}, ranges low-high")
            tasks.extend(range(lo, hi + 1))
    except ValueError:
        raise UserError(f"--tasks {text!r}: expected numbers like 1,2,4 or 1-4") from None
    if len(set(tasks)) != len(tasks):
        raise UserError(f"--tasks {text!r}: a task count appears twice")
    return tasks


def run(args) -> int:
    from pathlib import Path

    from flagbench import procs
    from flagbench.run.wis import MODES, check_numbers, run_wis

    procs.install()
    modes = MODES if args.mode == "both" else (args.mode,)
    try:
        cflags = shlex.split(args.cflags)
    except ValueError as e:
        raise UserError(f"--cflags: {e}") from None
    tasks = parse_tasks(args.tasks)
    check_numbers(tasks, args.duration, args.warmup, args.interval)
    try:
        with procs.owned_dir("flagbench-wis") as workdir:
            results = run_wis(Path(args.testcase), tasks, modes, args.duration, args.warmup, cflags,
                              args.compiler, interval=args.interval, workdir=workdir,
                              on_progress=lambda msg: print(f"wis: {msg}", file=sys.stderr, flush=True))
    except procs.Terminated as e:
        print(f"flagbench wis: {e}: stopped", file=sys.stderr)
        return e.exit_status
    from flagbench import export
    sys.stdout.write(export.render(args.format, {
        "text": lambda: table(results),
        "json": lambda: json.dumps({"testcase": args.testcase, "duration": args.duration, "warmup": args.warmup,
                                    "interval": args.interval, "cflags": cflags, "compiler": args.compiler,
                                    "results": results}, indent=2) + "\n"}))
    return 1 if any(r["failure"] for r in results) else 0


def table(results: list[dict]) -> str:
    """The text format: the testcase's own description (its text escaped), then a row per cell."""
    from flagbench.export import safe
    description = next((r["description"] for r in results if r["description"]), None)
    out = [safe("text", description)] if description else []
    out.append(f"{'mode':<10} {'tasks':>5} {'per_second':>14} {'per task':>12} {'scaling':>8} "
               f"{'samples':>7} {'spread':>7}")
    one_task = {r["mode"]: r["per_second"] for r in results if r["tasks"] == 1 and r["per_second"]}
    for r in results:
        if r["failure"]:
            out.append(f"{r['mode']:<10} {r['tasks']:>5} FAILED: {safe('text', r['failure'])}")
            continue
        rate, samples = r["per_second"], r["samples"]
        base = one_task.get(r["mode"])
        scaling = f"x{rate / base:.2f}" if base else "-"
        out.append(f"{r['mode']:<10} {r['tasks']:>5} {rate:>14,.0f} {rate / r['tasks']:>12,.0f} "
                   f"{scaling:>8} {len(samples):>7} {_spread(samples):>7}")
    return "".join(f"{line}\n" for line in out)


def _spread(samples: list[float]) -> str:
    """Coefficient of variation of the kept samples, the noise to expect between cells."""
    if len(samples) < 2:
        return "-"
    mean = sum(samples) / len(samples)
    var = sum((s - mean) ** 2 for s in samples) / (len(samples) - 1)
    return f"{100 * var ** 0.5 / mean:.1f}%" if mean else "-"
