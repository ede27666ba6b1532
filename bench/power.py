#!/usr/bin/env python3
"""Smallest slowdown flagbench's verdict detects with power >= 0.8, within a time budget per trial.

Variant B is the same gcc-built busy loop as A with K % more loop iterations (a known amount
of extra work). Each trial takes interleaved samples of A and B (as many per side as fit in
--budget seconds, at most --max-samples) and counts as a detection when the verdict is
"slower". Levels are tried smallest first; the first with detections/trials >= 0.8 is the
answer.

    .venv/bin/python bench/power.py --levels 0.5,1,2,3,5,10 --trials 10 --budget 60
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_false_positive import Timer, build_busy_loop, calibrate, trial, wilson  # noqa: E402

from flagbench import stats  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,2,3,5,10", help="slowdowns to inject, in percent")
    ap.add_argument("--trials", type=int, default=10, help="trials per level")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of measuring per trial (a ceiling)")
    ap.add_argument("--max-samples", type=int, default=300, help="samples per side per trial, at most")
    ap.add_argument("--run-ms", type=float, default=10.0)
    ap.add_argument("--power", type=float, default=0.8)
    ap.add_argument("--all", action="store_true", help="measure every level, not only up to the first found")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    timer = Timer()
    levels = sorted(float(x) for x in args.levels.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_busy_loop(Path(tmp))
        iters = calibrate(timer, exe, args.run_ms)
        per_run = sum(timer([str(exe), str(iters)]) for _ in range(10)) / 10 / 1e9
        samples = max(6, min(args.max_samples, int(args.budget / (2 * per_run * 1.05)) - 1))
        print(f"timer: {timer.name}")
        print(f"program: gcc -O2 busy loop, {iters} iterations, {per_run * 1e3:.1f} ms per run; "
              f"{samples} samples per side per trial (budget {args.budget:.0f} s), {args.trials} trials per level")
        found = None
        for level in levels:
            argvs = {"A": [str(exe), str(iters)], "B": [str(exe), str(round(iters * (1 + level / 100)))]}
            detected, longest = 0, 0.0
            for _ in range(args.trials):
                started = time.monotonic()
                t = trial(timer, argvs, samples, rng)
                longest = max(longest, time.monotonic() - started)
                c = stats.change(t["A"], t["B"], metric="wall_ns")
                detected += c.verdict == "slower"
            power = detected / args.trials
            lo, hi = wilson(detected, args.trials)
            print(f"+{level:g} % work: flagged slower in {detected}/{args.trials} trials, power {power:.0%} "
                  f"(95 % CI {lo:.0%}..{hi:.0%}); longest trial {longest:.1f} s")
            if power >= args.power and found is None:
                found = level
                if not args.all:
                    break
        if found is None:
            print(f"no level reached power {args.power:.0%}")
        else:
            print(f"smallest slowdown flagged with power >= {args.power:.0%}: +{found:g} % "
                  f"({samples} samples per side, <= {args.budget:.0f} s per trial)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
