#!/usr/bin/env python3
"""How long a `flagbench watch` pass takes per commit on a C history (tests/watch_repo.py: 40
commits, most unrelated, 3 that change the measured loop, 2 that only move it, one that does
not build), beside `flagbench series` on the same history (goal: a 40-commit pass <= 40 s at
load <= 2). Each measured in a fresh cache directory made warm by one untimed pass of its own
(builds are content-cached: a watch on a live branch builds each commit once, and the first
pass here pays the compiler), then timed cold in a fresh results database:

    .venv/bin/python bench/watch_speed.py [--commits N] [--runs R]

Rows: watch --no-time (exact layers: build, size, asm, counts, profiles where the path moved),
watch with timing (paired rounds only where the path moved, 3 samples a side), series (exact
layers, no place: untimed). Wall seconds (min and median of R runs), per commit, CPU beside,
the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import watch_repo  # noqa: E402


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-400:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    flagbench = [sys.executable, "-m", "flagbench"]
    with tempfile.TemporaryDirectory(prefix="watch-speed-") as tmp:
        tmp = Path(tmp)
        repo, _ = watch_repo.make(tmp, args.commits)
        exp = str(repo / "exp")
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FLAGBENCH_CACHE": str(tmp / "cache")}
        cases = {
            "watch --no-time": ["watch", exp, "--branch", "main", "--since", "base", "--once", "--no-time", "-q"],
            "watch (timed)": ["watch", exp, "--branch", "main", "--since", "base", "--once", "--samples", "3", "-q"],
            "series": ["series", exp, "base..main", "-q"],
        }
        load0 = os.getloadavg()
        print(f"{args.commits} commits; load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
        print(f"{'':18} {'min s':>7} {'median s':>9} {'s/commit':>9} {'CPU s':>7}")
        for k, (name, argv) in enumerate(cases.items()):
            walls, cpus = [], []
            for run in range(args.runs + 1):   # run 0 warms the build cache
                db = tmp / f"case{k}-{run}.db"
                extra = ["--db", str(db)] + (["--out", str(tmp / f"out{k}-{run}")] if argv[0] == "watch" else [])
                wall, cpu = timed([*flagbench, *argv, *extra], env, tmp)
                if run:
                    walls.append(wall)
                    cpus.append(cpu)
            n = args.commits + 1
            print(f"{name:18} {min(walls):7.1f} {statistics.median(walls):9.1f} {min(walls) / n:9.2f} "
                  f"{statistics.median(cpus):7.1f}")
        load1 = os.getloadavg()
        print(f"load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
