#!/usr/bin/env python3
"""A/A false-positive rate of flagbench's verdict on this machine.

Each trial times the SAME native program (a gcc-built busy loop) as variant "A" and as
"A again", N samples each, in a randomised interleaved order with warm-up runs dropped,
and asks `flagbench.stats.change` for a verdict. Anything but `~` is a false positive;
at alpha = 0.05 the rate should be <= 5 %.

    .venv/bin/python bench/aa_false_positive.py --trials 40 --samples 10

Timing uses flagbench.run.executors.NativeExecutor when it exists, else a minimal
time.perf_counter_ns() around subprocess.run (the script says which).
"""
from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from flagbench import stats  # noqa: E402

BUSY_LOOP_C = r"""
#include <stdlib.h>
/* Work proportional to argv[1]: a loop the compiler cannot remove. */
int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000000;
    volatile unsigned long sum = 0;
    for (unsigned long i = 0; i < n; i++)
        sum += i;
    return 0;
}
"""
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def build_busy_loop(workdir: Path) -> Path:
    if not shutil.which("gcc"):
        sys.exit("gcc is missing: apt-get install gcc")
    src, exe = workdir / "busy.c", workdir / "busy"
    src.write_text(BUSY_LOOP_C)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
    return exe


class Timer:
    """Wall time of one whole process run, in ns."""

    def __init__(self):
        try:
            from flagbench.run.executors import NativeExecutor
            self._executor = NativeExecutor()
            self.name = "flagbench.run.executors.NativeExecutor"
        except ImportError:
            self._executor = None
            self.name = "time.perf_counter_ns around subprocess.run (NativeExecutor not available)"

    def __call__(self, argv: list[str]) -> float:
        if self._executor is not None:
            m = self._executor.measure(argv, target="x86_64", timeout=60)
            if m.failure:
                sys.exit(f"{argv}: {m.failure}")
            return m.metrics["wall_ns"]
        start = time.perf_counter_ns()
        subprocess.run(argv, env=ENV, cwd="/", check=True, stdout=subprocess.DEVNULL)
        return float(time.perf_counter_ns() - start)


def interleaved(names: list[str], samples: int, rng: random.Random) -> list[str]:
    """Randomised order of `samples` runs per name: never all of A then all of B."""
    try:
        from flagbench.run.executors import interleave
        return list(interleave(names, samples, rng.randrange(2**32)))
    except ImportError:
        order = [n for n in names for _ in range(samples)]
        rng.shuffle(order)
        return order


def calibrate(timer: Timer, exe: Path, target_ms: float) -> int:
    """Loop count that makes one run last about target_ms."""
    iters = 1_000_000
    for _ in range(6):
        ms = min(timer([str(exe), str(iters)]) for _ in range(3)) / 1e6
        iters = max(int(iters * target_ms / max(ms, 0.01)), 1000)
    return iters


def trial(timer: Timer, argvs: dict[str, list[str]], samples: int, rng: random.Random,
          warmup: int = 1) -> dict[str, list[float]]:
    """Samples per variant name, taken interleaved; the first `warmup` runs of each are dropped."""
    times: dict[str, list[float]] = {name: [] for name in argvs}
    for name in interleaved(list(argvs), samples + warmup, rng):
        times[name].append(timer(argvs[name]))
    return {name: t[warmup:] for name, t in times.items()}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % interval of a binomial proportion k/n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--samples", type=int, default=10, help="samples per variant per trial")
    ap.add_argument("--run-ms", type=float, default=10.0, help="length of one run of the busy loop")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    timer = Timer()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_busy_loop(Path(tmp))
        iters = calibrate(timer, exe, args.run_ms)
        argv = [str(exe), str(iters)]
        print(f"timer: {timer.name}")
        print(f"program: gcc -O2 busy loop, {iters} iterations (~{args.run_ms} ms); "
              f"{args.trials} trials x {args.samples} samples per side, alpha={args.alpha}")
        false_positives, spreads, started = 0, [], time.monotonic()
        for i in range(args.trials):
            t = trial(timer, {"A": argv, "A again": argv}, args.samples, rng)
            c = stats.change(t["A"], t["A again"], alpha=args.alpha, metric="wall_ns")
            false_positives += c.verdict != "~"
            spreads.append(c.ratio)
            print(f"trial {i + 1:3d}: ratio {c.estimate:.4f} [{c.ci_low:.4f}, {c.ci_high:.4f}] "
                  f"p={c.p_value:.3f} {c.verdict}")
        lo, hi = wilson(false_positives, args.trials)
        print(f"false positives: {false_positives}/{args.trials} = {false_positives / args.trials:.1%} "
              f"(95 % CI {lo:.1%}..{hi:.1%}); goal <= {args.alpha:.0%}; "
              f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
