"""will-it-scale testcases: build an unmodified testcase with our driver, run it
with 1..N tasks as processes and as threads, and report iterations per second.

The C driver (wis_main.c) prints one "sample INDEX ELAPSED_NS ITERATIONS" line
per interval; here the first `warmup` seconds of samples are set aside and the
rest averaged. Each sample can be handed to a callback as it arrives, so a
store keeps what was measured even if the run is interrupted.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable, Sequence

from flagbench.errors import UserError
from flagbench.toolchains import CLANG
from flagbench.run.executors import FIXED_CWD, FIXED_ENV, signal_name

DRIVER = Path(__file__).resolve().parent / "wis_main.c"
MODES = ("processes", "threads")
BASE_CFLAGS = ("-O2", "-g", "-Wall", "-pthread")
NON_PIC_FLAGS = {"-fno-pic", "-fno-PIC", "-fno-pie", "-fno-PIE", "-mcmodel=kernel"}

# on_sample(mode, tasks, index, per_second, is_warmup)
SampleCallback = Callable[[str, int, int, float, bool], None]


def build_testcase(testcase: Path, mode: str, out_dir: Path, cflags: Sequence[str] = (),
                   compiler: str = "gcc") -> Path:
    """Compile testcase + driver for one mode; UserError with the compiler's message on failure."""
    if mode not in MODES:
        raise UserError(f"unknown wis mode {mode!r} (known: {', '.join(MODES)})")
    if compiler == "clang":
        compiler = CLANG
    if shutil.which(compiler) is None:
        raise UserError(f"compiler {compiler} not found (apt-get install gcc / clang-19)")
    exe = out_dir / f"{testcase.stem}_{mode}"
    # Code built without PIC (kernel-like flags) cannot go into the default PIE executable.
    no_pie = ["-no-pie"] if set(cflags) & NON_PIC_FLAGS else []
    argv = [compiler, *BASE_CFLAGS, *cflags, *no_pie, *(["-DTHREADS"] if mode == "threads" else []),
            "-o", str(exe), str(DRIVER), str(testcase.resolve())]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        message = " | ".join(line for line in proc.stderr.splitlines()
                             if ("error" in line or "ld:" in line) and not line.startswith("collect2"))
        raise UserError(f"{testcase} does not compile ({mode}): "
                        f"{message or proc.stderr.strip() or 'exit status %d' % proc.returncode}")
    return exe


def run_wis(testcase: Path, tasks: Sequence[int] = (1,), modes: Sequence[str] = MODES,
            duration: float = 5.0, warmup: float = 2.0, cflags: Sequence[str] = (),
            compiler: str = "gcc", *, interval: float = 1.0,
            on_sample: SampleCallback | None = None,
            on_progress: Callable[[str], None] | None = None) -> list[dict]:
    """One result per (mode, task count): per_second is the mean of the kept samples
    (all tasks together); warm-up samples are reported apart. A run that fails is a
    result with "failure" set, and the others go on."""
    testcase = Path(testcase)
    if not testcase.is_file():
        raise UserError(f"{testcase}: no such testcase file")
    _check_numbers(tasks, duration, warmup, interval)
    n_warmup = round(warmup / interval)
    n_kept = max(1, round(duration / interval))
    results = []
    with tempfile.TemporaryDirectory(prefix="flagbench-wis-") as tmp:
        exes = {mode: build_testcase(testcase, mode, Path(tmp), cflags, compiler) for mode in modes}
        cells = [(mode, n) for mode in modes for n in tasks]
        for done, (mode, n) in enumerate(cells):
            if on_progress:
                on_progress(f"{testcase.name}: {mode}, {n} task{'s' * (n != 1)} "
                            f"({done + 1}/{len(cells)}, {(n_warmup + n_kept) * interval:g} s)")
            results.append(_run_one(exes[mode], mode, n, n_warmup, n_kept, interval, on_sample))
    return results


def _check_numbers(tasks: Sequence[int], duration: float, warmup: float, interval: float) -> None:
    if not tasks or any(int(n) < 1 for n in tasks):
        raise UserError("tasks must be positive integers, e.g. --tasks 1,2")
    if duration <= 0 or warmup < 0 or interval <= 0:
        raise UserError("duration and interval must be positive and warm-up not negative")
    if duration < interval:
        raise UserError(f"duration {duration:g} s is shorter than one sample ({interval:g} s)")


def _run_one(exe: Path, mode: str, tasks: int, n_warmup: int, n_kept: int, interval: float,
             on_sample: SampleCallback | None) -> dict:
    result = {"mode": mode, "tasks": tasks, "per_second": None, "samples": [],
              "warmup_samples": [], "description": None, "failure": None}
    total = n_warmup + n_kept
    limit = total * interval + 30
    argv = [str(exe), str(tasks), str(total), str(int(interval * 1e9))]
    with tempfile.TemporaryFile() as errfile:  # a file, not a pipe: a chatty testcase cannot block
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errfile, text=True,
                                env=dict(FIXED_ENV), cwd=FIXED_CWD, start_new_session=True)
        timed_out = threading.Event()
        timer = threading.Timer(limit, lambda: (timed_out.set(), _kill_group(proc)))
        timer.start()  # a hung testcase is killed, with all its tasks
        try:
            for line in proc.stdout:  # line-buffered by the driver: one sample per interval
                _take_line(line, result, n_warmup, on_sample)
            proc.wait()
        except ValueError as e:
            result["failure"] = f"garbage output: {e}"
        finally:
            timer.cancel()
            _kill_group(proc)
            proc.wait()
            proc.stdout.close()
        errfile.seek(0)
        stderr = errfile.read().decode(errors="replace").strip()
    if timed_out.is_set():
        result["failure"] = f"timeout after {limit:g} s"
    if result["failure"] is None and proc.returncode:
        result["failure"] = (signal_name(-proc.returncode) if proc.returncode < 0
                             else f"exit status {proc.returncode}")
        if stderr:
            result["failure"] += f": {stderr.splitlines()[-1]}"
    if result["failure"] is None and len(result["samples"]) < n_kept:
        result["failure"] = f"only {len(result['samples'])} of {n_kept} samples"
    if result["samples"]:
        result["per_second"] = sum(result["samples"]) / len(result["samples"])
    return result


def _take_line(line: str, result: dict, n_warmup: int, on_sample: SampleCallback | None) -> None:
    fields = line.split()
    if line.startswith("# description "):
        result["description"] = line[len("# description "):].strip()
        return
    if not fields or fields[0] == "#":
        return
    if fields[0] != "sample" or len(fields) != 4:
        raise ValueError(repr(line.strip()[:80]))
    index, elapsed_ns, iterations = (int(f) for f in fields[1:])
    per_second = iterations * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0
    warm = index < n_warmup
    (result["warmup_samples"] if warm else result["samples"]).append(per_second)
    if on_sample:
        on_sample(result["mode"], result["tasks"], index, per_second, warm)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the driver and every task it forked (they share its process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
