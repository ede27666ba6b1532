#!/usr/bin/env python3
"""A/A false-positive rate of flagbench's verdict on this machine, under an intermittent CPU hog.

Each trial measures the SAME native program as variant "A" and as "A again" through flagbench's
own run engine (interleaved rounds, warm-up dropped, every sample stored) and reads the verdict
the report would print (report.tables.build_tables). Like a will-it-scale cell, one run of the
program reports several per-interval rates (iterations per second); `--rows` such rows (as
tasks 1 and 2 of a testcase) are compared in each trial. Meanwhile `--hog` processes switch a
busy loop on and off every `--hog-period` seconds, as a shared machine does. Anything but `~`
is a false positive; at alpha = 0.05 the rate should be <= 5 %.

    .venv/bin/python bench/aa_false_positive.py --trials 10 --rows 2 --samples 3
    .venv/bin/python bench/aa_false_positive.py --trials 10 --rows 2 --samples 10 --interval-ms 100
    .venv/bin/python bench/aa_false_positive.py --trials 10 --rows 2 --samples 10 --interval-ms 100 --until 3

bench/power.py uses the same trial with a known slowdown in B.
"""
from __future__ import annotations

import argparse
import io
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from flagbench import procs  # noqa: E402
from flagbench.report.tables import build_tables  # noqa: E402
from flagbench.run.engine import BenchCell, run_cells  # noqa: E402
from flagbench.run.executors import NativeExecutor  # noqa: E402
from flagbench.run.until import Until  # noqa: E402
from flagbench.store import Store  # noqa: E402

# K intervals of N loop iterations each, one "sample INDEX ELAPSED_NS ITERATIONS" line per
# interval (the will-it-scale driver's format); interval 0 is the run's own warm-up. ITERATIONS
# is argv[3] when given: power.py's B does more work for the same reported count.
PROGRAM_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static unsigned long long now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}
int main(int argc, char **argv)
{
	unsigned long n = strtoul(argv[1], 0, 10), k = strtoul(argv[2], 0, 10);
	unsigned long shown = argc > 3 ? strtoul(argv[3], 0, 10) : n;
	volatile unsigned long sum = 0;
	for (unsigned long j = 0; j <= k; j++) {
		unsigned long long t0 = now();
		for (unsigned long i = 0; i < n; i++)
			sum += i;
		printf("sample %lu %llu %lu\n", j, now() - t0, shown);
	}
	return 0;
}
"""
# A busy loop that runs during even periods of `period` seconds and sleeps during odd ones.
HOG_PY = ("import sys, time\nP = float(sys.argv[1])\nwhile True:\n    t = time.time()\n"
          "    end = (int(t / P) + 1) * P\n    if int(t / P) % 2:\n        time.sleep(end - t)\n"
          "    else:\n        while time.time() < end:\n            pass\n")


def build_program(workdir: Path) -> Path:
    if not shutil.which("gcc"):
        sys.exit("gcc is missing: apt-get install gcc")
    src, exe = workdir / "rates.c", workdir / "rates"
    src.write_text(PROGRAM_C)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def calibrate(exe: Path, interval_ms: float) -> int:
    """Loop iterations that make one interval last about interval_ms (best of a few runs)."""
    executor, iters = NativeExecutor(parse_stdout=False), 1_000_000
    for _ in range(5):
        m = executor.measure([str(exe), str(iters), "1"], timeout=60)
        ns = min(int(line.split()[2]) for line in m.stdout.splitlines())
        iters = max(int(iters * interval_ms * 1e6 / max(ns, 1)), 1000)
    return iters


class Hog:
    """`n` processes that busy-loop every other `period` seconds (none when n is 0)."""

    def __init__(self, n: int, period: float):
        self.n, self.period, self.procs = n, period, []

    def __enter__(self):
        self.procs = [procs.start([sys.executable, "-c", HOG_PY, str(self.period)]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.stop()

    def __str__(self):
        return f"{self.n} hog process(es), on/off every {self.period:g} s" if self.n else "no hog"


def cells(argvs: dict[str, list[str]], rows: int, samples: int, warmup: int, per_run: int) -> list[BenchCell]:
    executor = NativeExecutor(parse_stdout=False)

    def job(argv):
        def timed(emit):
            m = executor.measure(argv, timeout=600)
            if m.failure:
                return m.failure
            for line in m.stdout.splitlines():
                _, index, ns, n = line.split()
                if int(index):   # interval 0: the run's warm-up
                    emit("per_second", int(n) * 1e9 / int(ns), "iter/s")
            return None
        return timed
    return [BenchCell(bench="rates", variant=name, target="x86_64", compiler="gcc", params={"row": str(r)},
                      timed=job(argv), samples=samples, warmup=warmup, executor="native",
                      timed_metric="per_second", per_invocation=per_run)
            for name, argv in argvs.items() for r in range(rows)]


def trial(argvs: dict[str, list[str]], rows: int, samples: int, rng: random.Random, *, warmup: int = 1,
          per_run: int = 2, until: float | None = None, budget: float = 60.0) -> list:
    """One engine run of every row x variant (with `until`, sampling on as `run --until` does);
    the report's change of the second variant per row."""
    from rich.console import Console
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "fb.db") as store:
        out = run_cells(store, cells(argvs, rows, samples, warmup, per_run), experiment="aa",
                        experiment_hash="aa", seed=rng.randrange(2**32), progress=False,
                        console=Console(file=io.StringIO()),
                        until=None if until is None else Until(until / 100, budget, tuple(argvs)))
        if out.failed:
            sys.exit(f"a cell failed: {out.failed[0]}")
        names = list(argvs)
        [table] = build_tables(store.samples(out.run_id), names)
        return [row.changes[names[1]] for row in table.rows]


def variants(a: list[str], b: list[str], second: str, aa_control: bool) -> dict[str, list[str]]:
    """A, the variant compared with it, and A's control column when asked for."""
    return {"A": a, second: b, **({"A@aa": a} if aa_control else {})}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % interval of a binomial proportion k/n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def describe(c) -> str:
    interval = f"[{c.ci_low:.4f}, {c.ci_high:.4f}] p={c.p_value:.3f}" if c.ci_low is not None else "(no interval)"
    return f"ratio {c.estimate:.4f} {interval} n={c.n_old}/{c.n_new} {c.verdict}"


def common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--rows", type=int, default=2, help="rows compared per trial (as tasks 1 and 2)")
    ap.add_argument("--samples", type=int, default=3, help="runs per variant and row")
    ap.add_argument("--per-run", type=int, default=2, help="rates one run reports (will-it-scale: per second)")
    ap.add_argument("--interval-ms", type=float, default=250.0, help="length of one rate's interval")
    ap.add_argument("--hog", type=int, default=os.cpu_count() or 1, help="hog processes (0: none)")
    ap.add_argument("--hog-period", type=float, default=2.5, help="seconds on, then as many off")
    ap.add_argument("--aa-control", action="store_true", help="add the baseline's A/A control column (run --aa-control)")
    ap.add_argument("--until", type=float, metavar="PCT", help="sample on as `run --until PCT` does")
    ap.add_argument("--budget", type=float, default=60.0, help="with --until: seconds per trial (default 60)")
    ap.add_argument("--seed", type=int, default=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    common_args(ap)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    procs.install()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_program(Path(tmp))
        iters = calibrate(exe, args.interval_ms)
        argv = [str(exe), str(iters), str(args.per_run)]
        print(f"program: gcc -O2 loop, {args.per_run} rates of ~{args.interval_ms:g} ms per run; "
              f"{args.rows} rows x {args.samples} runs per variant per trial; {args.trials} trials"
              f"{'; with an A/A control column' if args.aa_control else ''}"
              f"{f'; --until {args.until:g}% within {args.budget:g} s' if args.until else ''}")
        false_positives = compared = 0
        started = time.monotonic()
        with Hog(args.hog, args.hog_period) as hog:
            print(f"contention: {hog}; load average {os.getloadavg()[0]:.1f}")
            for i in range(args.trials):
                for r, c in enumerate(trial(variants(argv, argv, "A again", args.aa_control), args.rows, args.samples, rng,
                                            per_run=args.per_run, until=args.until, budget=args.budget)):
                    compared += 1
                    false_positives += c.verdict not in ("~",)
                    print(f"trial {i + 1:3d} row {r}: {describe(c)}" +
                          (f"  [{'; '.join(c.warnings)}]" if c.warnings else ""))
        lo, hi = wilson(false_positives, compared)
        print(f"false positives: {false_positives}/{compared} = {false_positives / compared:.1%} "
              f"(95 % CI {lo:.1%}..{hi:.1%}); goal <= 5 %; {time.monotonic() - started:.0f} s, "
              f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
