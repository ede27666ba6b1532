#!/usr/bin/env python3
"""How long a `flagbench watch` pass takes per commit on a C history (tests/watch_repo.py: 40
commits, most unrelated, 3 that change the measured loop, 2 that only move it, one that does
not build), beside `flagbench series` on the same history (goal: a 40-commit pass <= 40 s at
load <= 2). Each measured in a fresh cache directory made warm by one untimed pass of its own
(builds are content-cached: a watch on a live branch builds each commit once, and the first
pass here pays the compiler), then timed cold in a fresh results database:

    .venv/bin/python bench/watch_speed.py [--commits N] [--runs R] [--kernel]

Rows: watch --no-time (exact layers: build, size, asm, counts, profiles where the path moved),
watch with timing (paired rounds only where the path moved, 3 samples a side), series (exact
layers, no place: untimed). Wall seconds (min and median of R runs), per commit, CPU beside,
the load average before and after.

--kernel: a kernel commit after the base, warm (goal <= 30 s): the series case's repository
(cases/series, made once in the cache, as `flagbench demo --full` and the tests make it) gets a
branch of the bench's own at `series` (measured once first: the base, booted twice for the
floor), then per run a new commit that adds a function to kernel/sys.c (written with git
plumbing: no checkout, no index), which the next watch pass measures alone: Kbuild's walk
rebuilds what it changed (ccache holds the rest), the vmlinux compared, booted once and
counted. Beside it `flagbench series` over one more such commit (its base's build found by
tree, booted again). The branch is deleted at the end. flagbench's cache is a fresh one in the
temporary directory (the repository is made once in the default one): the base is checked out
and built there from ccache (warm: the compiler's cache is the user's), so "the base" row is a
first watch on a machine whose ccache is warm, and each new commit is what a watch of a live
branch pays.
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


def _kernel_commit(repo: Path, parent: str, n: int) -> str:
    """A new commit on PARENT adding one function to kernel/sys.c, made with plumbing only."""
    def git(*a: str, stdin: str | None = None) -> str:
        return subprocess.run(["git", "-C", str(repo), *a], input=stdin, check=True, capture_output=True, text=True,
                              env={**os.environ, **watch_repo.GIT_ENV}).stdout.strip()
    sysc = git("show", f"{parent}:kernel/sys.c") + f"\n\nint watch_speed_{n}(int x)\n{{\n\treturn x * {n + 3};\n}}\n"
    blob = git("hash-object", "-w", "--stdin", stdin=sysc)
    kernel = git("mktree", stdin="".join(line.replace(line.split("\t")[0].split()[2], blob) + "\n"
                                          if line.endswith("\tsys.c") else line + "\n"
                                          for line in git("ls-tree", f"{parent}:kernel").splitlines()))
    top = git("mktree", stdin="".join(line.replace(line.split("\t")[0].split()[2], kernel) + "\n"
                                       if line.endswith("\tkernel") else line + "\n"
                                       for line in git("ls-tree", parent).splitlines()))
    return git("commit-tree", top, "-p", parent, "-m", f"sys: watch_speed_{n} (bench/watch_speed.py)")


def kernel(runs: int, tmp: Path) -> None:
    from flagbench.cli import demo_series

    case = ROOT / "cases" / "series"
    repo = demo_series.repo(case)
    exp = str(demo_series.experiment(case, repo))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FLAGBENCH_CACHE": str(tmp / "cache")}
    flagbench = [sys.executable, "-m", "flagbench"]
    branch = f"watch-speed-{os.getpid()}"
    ref = f"refs/heads/{branch}"
    subprocess.run(["git", "-C", str(repo), "update-ref", ref, "series"], check=True)
    try:
        watch = [*flagbench, "watch", exp, "--branch", branch, "--once", "-q", "--db", str(tmp / "k.db"),
                 "--out", str(tmp / "kout")]
        load0 = os.getloadavg()
        print(f"kernel: load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
        wall, cpu = timed([*watch, "--since", "series"], env, tmp)
        print(f"{'watch: the base':34} {wall:7.1f} s wall {cpu:7.1f} s CPU "
              "(checked out, built from ccache, booted twice)")
        tip = "series"
        walls, cpus = [], []
        stamp = int(time.time())
        for run in range(runs):
            tip = _kernel_commit(repo, tip, stamp * 10 + run)
            subprocess.run(["git", "-C", str(repo), "update-ref", ref, tip], check=True)
            wall, cpu = timed(watch, env, tmp)
            walls.append(wall)
            cpus.append(cpu)
            print(f"{'watch: a new commit after it':34} {wall:7.1f} s wall {cpu:7.1f} s CPU")
        print(f"{'watch, a commit (median)':34} {statistics.median(walls):7.1f} s wall "
              f"{statistics.median(cpus):7.1f} s CPU over {runs}")
        new = _kernel_commit(repo, tip, stamp * 10 + runs)
        wall, cpu = timed([*flagbench, "series", exp, f"{tip}..{new}", "-q", "--db", str(tmp / "ks.db")], env, tmp)
        print(f"{'series: base + a new commit':34} {wall:7.1f} s wall {cpu:7.1f} s CPU, "
              f"{wall / 2:.1f} s a commit")
        load1 = os.getloadavg()
        print(f"kernel: load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    finally:
        subprocess.run(["git", "-C", str(repo), "update-ref", "-d", ref], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kernel", action="store_true", help="a kernel commit after the base instead (see above)")
    args = ap.parse_args()
    if args.kernel:
        sys.path.insert(0, str(ROOT / "src"))
        with tempfile.TemporaryDirectory(prefix="watch-speed-kernel-") as tmp:
            kernel(args.runs, Path(tmp))
        return
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
