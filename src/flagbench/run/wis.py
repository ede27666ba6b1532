"""will-it-scale testcases: an unmodified testcase linked with flagbench's driver
(harness/wis_main.c), built once per mode through the build cache and run through the
executors, with 1..N tasks as processes and as threads.

The driver prints one "sample INDEX ELAPSED_NS ITERATIONS" line per interval; here the
first `warmup` seconds of samples are set aside and the rest averaged. The testcase
object is checked for `testcase` and `testcase_description` before anything is linked,
so a file that is not a testcase says so instead of printing linker noise.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from flagbench import build as builder
from flagbench.benchspec import MAX_TASKS, WIS_MODES
from flagbench.errors import UserError
from flagbench.targets import HOST
from flagbench.run.executors import Measurement, NativeExecutor
from flagbench.run.harness import WIS_C, link_executable, program_dir

MODES = WIS_MODES
DRIVER_CFLAGS = ("-O2", "-g", "-pthread")
NEEDED = ("testcase", "testcase_description")
EXTRA_SECONDS = 30           # start-up and prepare, beyond the samples themselves


def build_programs(testcase: Path, modes: Sequence[str], cflags: Sequence[str], *, target: str = HOST.name,
                   compiler: str = "gcc", out_dir: Path) -> dict[str, Path]:
    """The driver + testcase executable per mode; the testcase is compiled with `cflags`
    (a variant's flags), the driver with its own."""
    testcase = Path(testcase).resolve()
    obj, = builder.compile_sources(target, compiler, [testcase], [*cflags, "-pthread"])
    _check_testcase(testcase, obj)
    exes = {}
    for mode in modes:
        defines = ["-DTHREADS"] if mode == "threads" else []
        driver, = builder.compile_sources(target, compiler, [WIS_C], [*DRIVER_CFLAGS, *defines])
        exes[mode] = link_executable(target, compiler, [driver, obj],
                                     program_dir(out_dir, mode) / f"{testcase.stem}_{mode}", ldflags=["-pthread"])
    return exes


def _check_testcase(testcase: Path, obj: Path) -> None:
    from flagbench import elf
    names = {name for name, _, _ in elf.sized_symbols(obj)}
    missing = [n for n in NEEDED if n not in names]
    if missing:
        raise UserError(f"{testcase}: not a will-it-scale testcase: it defines no {' and no '.join(missing)} "
                        f"(needed: void testcase(unsigned long long *iterations, unsigned long nr); "
                        f"char *testcase_description)")


def limit(warmup_samples: int, kept_samples: int, interval: float) -> float:
    """The wall-time bound of one driver run."""
    return (warmup_samples + kept_samples) * interval + EXTRA_SECONDS


def run_driver(exe: Path, tasks: int, n_warmup: int, n_kept: int, interval: float, *,
               timeout: float | None = None, mode: str = "", place=None, target: str = HOST.name) -> dict:
    """One driver run (here, or on PLACE: run/places.py): per_second is the mean of the kept
    samples (all tasks together); warm-up samples are reported apart; "failure" says why it
    is unusable, if it is."""
    result = {"mode": mode, "tasks": tasks, "per_second": None, "samples": [],
              "warmup_samples": [], "description": None, "failure": None}
    total = n_warmup + n_kept
    timeout = limit(n_warmup, n_kept, interval) if timeout is None else timeout
    on = {} if place is None else {"place": place}
    m = NativeExecutor(cpu=None, parse_stdout=False, **on).measure(   # the driver pins its own tasks
        [str(exe), str(tasks), str(total), str(int(interval * 1e9))], target=target, timeout=timeout)
    try:
        for line in m.stdout.splitlines():
            _take_line(line, result, n_warmup)
    except ValueError as e:
        result["failure"] = f"garbage output: {e}"
    if m.failure:
        result["failure"] = _failure(m)
    elif result["failure"] is None and len(result["samples"]) < n_kept:
        result["failure"] = f"only {len(result['samples'])} of {n_kept} samples"
    if result["samples"]:
        result["per_second"] = sum(result["samples"]) / len(result["samples"])
    return result


def _failure(m: Measurement) -> str:
    stderr = m.stderr.strip()
    return m.failure + (f": {stderr.splitlines()[-1]}" if stderr and not m.failure.startswith("timeout") else "")


def _take_line(line: str, result: dict, n_warmup: int) -> None:
    fields = line.split()
    if line.startswith("# description "):
        result["description"] = line[len("# description "):].strip()
        return
    if not fields or fields[0] == "#":
        return
    if fields[0] != "sample" or len(fields) != 4:
        raise ValueError(repr(line.strip()[:80]))
    if not all(f.isascii() and f.isdigit() and len(f) <= 20 and int(f) < 2**64 for f in fields[1:]) or int(fields[2]) == 0:
        raise ValueError(repr(line.strip()[:80]))   # the driver prints unsigned 64-bit counts, a positive time
    index, elapsed_ns, iterations = (int(f) for f in fields[1:])
    per_second = iterations * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0
    (result["warmup_samples"] if index < n_warmup else result["samples"]).append(per_second)


def check_numbers(tasks: Sequence[int], duration: float, warmup: float, interval: float) -> None:
    """The numbers `flagbench wis` takes, checked before anything is built."""
    numbers = {"duration": duration, "warmup": warmup, "interval": interval}
    for name, value in numbers.items():
        if value != value or value in (float("inf"), float("-inf")):
            raise UserError(f"--{name} {value}: not a number of seconds")
    if not tasks or min(tasks) < 1 or max(tasks) > MAX_TASKS:
        raise UserError(f"task counts are 1..{MAX_TASKS}, e.g. --tasks 1,2")
    if duration <= 0 or warmup < 0 or interval <= 0:
        raise UserError("--duration and --interval must be positive and --warmup not negative")
    if duration < interval:
        raise UserError(f"--duration {duration:g} s is shorter than one sample ({interval:g} s)")
    if (duration + warmup) / interval > 100_000:
        raise UserError("more than 100000 samples per cell: lengthen --interval")


def run_wis(testcase: Path, tasks: Sequence[int] = (1,), modes: Sequence[str] = MODES,
            duration: float = 5.0, warmup: float = 2.0, cflags: Sequence[str] = (),
            compiler: str = "gcc", *, interval: float = 1.0, workdir: Path,
            on_progress: Callable[[str], None] | None = None) -> list[dict]:
    """`flagbench wis`: one result per (mode, task count); a failed run is a result with
    "failure" set, and the others go on."""
    testcase = Path(testcase)
    if not testcase.is_file():
        raise UserError(f"{testcase}: no such testcase file")
    check_numbers(tasks, duration, warmup, interval)
    n_warmup = round(warmup / interval)
    n_kept = max(1, round(duration / interval))
    exes = build_programs(testcase, modes, ["-O2", "-g", *cflags], compiler=compiler, out_dir=workdir)
    results, cells = [], [(mode, n) for mode in modes for n in tasks]
    for done, (mode, n) in enumerate(cells):
        if on_progress:
            on_progress(f"{testcase.name}: {mode}, {n} task{'s' * (n != 1)} "
                        f"({done + 1}/{len(cells)}, {(n_warmup + n_kept) * interval:g} s)")
        results.append(run_driver(exes[mode], n, n_warmup, n_kept, interval, mode=mode))
    return results
