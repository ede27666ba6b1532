#!/usr/bin/env python3
"""How often flagbench's verdict finds a known slowdown, under the same conditions as the A/A
check (bench/aa_false_positive.py: the run engine, several rates per run, an intermittent hog).

Variant B is the same program as A doing K % more loop iterations per interval (a known amount
of extra work, so its rate is K % lower). A trial counts as a detection when the report calls
B "slower"; power is detections / comparisons per level.

    .venv/bin/python bench/power.py --levels 3,10 --trials 5 --rows 2 --samples 10 --interval-ms 100
    .venv/bin/python bench/power.py --levels 3,10 --trials 5 --rows 2 --samples 10 --interval-ms 100 --until 3
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_false_positive import Hog, build_program, calibrate, common_args, describe, trial, variants, wilson  # noqa: E402

from flagbench import procs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="3,10", help="slowdowns to inject, in percent")
    ap.add_argument("--trials", type=int, default=5, help="trials per level")
    common_args(ap)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    procs.install()
    levels = sorted(float(x) for x in args.levels.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_program(Path(tmp))
        iters = calibrate(exe, args.interval_ms)
        print(f"program: gcc -O2 loop, {args.per_run} rates of ~{args.interval_ms:g} ms per run; "
              f"{args.rows} rows x {args.samples} runs per variant per trial; {args.trials} trials per level"
              f"{'; with an A/A control column' if args.aa_control else ''}"
              f"{f'; --until {args.until:g}% within {args.budget:g} s' if args.until else ''}")
        with Hog(args.hog, args.hog_period) as hog:
            print(f"contention: {hog}; load average {os.getloadavg()[0]:.1f}")
            for level in levels:
                argvs = variants([str(exe), str(iters), str(args.per_run)],
                                 [str(exe), str(round(iters * (1 + level / 100))), str(args.per_run), str(iters)],
                                 "B", args.aa_control)
                verdicts, started = [], time.monotonic()
                for _ in range(args.trials):
                    for c in trial(argvs, args.rows, args.samples, rng, per_run=args.per_run,
                                   until=args.until, budget=args.budget):
                        verdicts.append(c.verdict)
                        print(f"  +{level:g} %: {describe(c)}" + (f"  [{'; '.join(c.warnings)}]" if c.warnings else ""))
                found = verdicts.count("slower")
                lo, hi = wilson(found, len(verdicts))
                print(f"+{level:g} % work: slower in {found}/{len(verdicts)}, power {found / len(verdicts):.0%} "
                      f"(95 % CI {lo:.0%}..{hi:.0%}); faster (wrong way) {verdicts.count('faster')}; "
                      f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
