"""Kernel build speed: a cold pair, a warm rebuild, a one-file change, and flagbench's
overhead over the same make commands run by hand (goal: at most 5 %).

    .venv/bin/python bench/kernel_build_speed.py [--jobs N] [--rounds R] [--skip-cold]

The experiment is the test kernel (tinyconfig x86_64 on debian:6.1 + the boot fragment;
`default` and a one-function patch), copied to fresh paths so every step gets fresh O=
directories. Cold uses an empty CCACHE_DIR (nothing cached); every later step reuses it.
- cold pair:      both cells, empty ccache
- warm rebuild:   both cells in fresh O= directories, warm ccache (all hits)
- one-file change: the default cell again after the experiment adds CFLAGS_string.o
                   (make recompiles the string.o files and relinks, in the same O= dir)
- overhead:       one cell by hand (make tinyconfig; merge_config.sh -m; olddefconfig;
                   make -jN all, same variables and environment) vs flagbench, both warm,
                   alternated R times. Times are wall clock on a shared, noisy machine.
                   flagbench's cell starts from a sibling's build when the cache has one, so its
                   wall time is then less work than the hand-run make's: the overhead to read is
                   flagbench's own CPU against make's.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from flagbench import procs, spec  # noqa: E402
from flagbench.kbuild import source  # noqa: E402
from flagbench.kbuild.build import PINNED_ENV, build_kernels, ccache_env  # noqa: E402

TEST_KERNEL = ROOT / "tests" / "data" / "kernel"


def experiment_copy(where: Path, extra_make: str = "") -> spec.Experiment:
    """The test kernel's experiment at WHERE (a fresh path: fresh O= directories)."""
    where.mkdir(parents=True, exist_ok=True)
    for f in TEST_KERNEL.iterdir():
        if f.suffix in (".patch", ".c"):   # the variants' patches and the guest bench's program
            shutil.copy(f, where / f.name)
    text = (TEST_KERNEL / "experiment.toml").read_text()
    for fragment in ("boot-x86_64.config", "box-x86_64.config"):
        text = text.replace(f"../../../src/flagbench/run/guest/{fragment}",
                            str(ROOT / "src/flagbench/run/guest" / fragment))
    text = text.replace('name = "test-kernel"', f'name = "bench-{where.name}"')
    if extra_make:
        text = text.replace("default = {}", f"default = {{ make = {{ {extra_make} }} }}")
    (where / "experiment.toml").write_text(text)
    return spec.load(where)


def timed(fn):
    start = time.monotonic()
    out = fn()
    return time.monotonic() - start, out


def cpu() -> tuple[float, float]:
    """(CPU seconds of this process, of its finished children): flagbench's own work vs make's."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def cells(exp, names=("default", "patched")):
    return [c for c in exp.cells() if c.variant.name in names]


def by_hand(exp, jobs: int, odir: Path) -> float:
    """The commands flagbench runs for the default cell, typed by hand (same make variables)."""
    tree = source.base_tree(exp.kernel.source)
    env = {**os.environ, **PINNED_ENV, **ccache_env(tree)}
    make = ["make", "-C", str(tree.src), f"O={odir}", "ARCH=x86_64", "HOSTCC=ccache gcc", "CC=ccache gcc"]
    fragments = [str(ROOT / "src/flagbench/run/guest" / f) for f in ("boot-x86_64.config", "box-x86_64.config")]
    start = time.monotonic()
    for argv in (make + ["tinyconfig"],
                 [str(tree.src / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(odir),
                  str(odir / ".config"), *fragments],
                 make + ["olddefconfig"], make + [f"-j{jobs}", "all"]):
        done = procs.run(argv, env=env, timeout=7200)
        if done.failure:
            raise SystemExit(f"{argv[0]} failed: {done.stderr[-500:]}")
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--skip-cold", action="store_true", help="use the shared ccache, skip the cold pair")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbench-", dir=ROOT / ".cache"))
    tree = source.base_tree("debian:6.1", print)
    if not args.skip_cold:
        os.environ["CCACHE_DIR"] = str(work / "ccache")
        exp = experiment_copy(work / "cold")
        seconds, builds = timed(lambda: build_kernels(exp, cells(exp), jobs=args.jobs, progress=False))
        print(f"cold pair: {seconds:.0f} s ({', '.join(f'{b.cell.variant.name} {b.seconds:.0f} s' for b in builds)})")
    exp = experiment_copy(work / "warm")
    seconds, builds = timed(lambda: build_kernels(exp, cells(exp), jobs=args.jobs, progress=False))
    print(f"warm pair (fresh O=, ccache hits): {seconds:.0f} s "
          f"({', '.join(f'{b.cell.variant.name} {b.seconds:.0f} s' for b in builds)})")
    seconds, again = timed(lambda: build_kernels(exp, cells(exp), jobs=args.jobs, progress=False))
    print(f"unchanged pair again: {seconds:.2f} s (cached: {all(b.cached for b in again)})")
    exp2 = experiment_copy(work / "warm", extra_make='"CFLAGS_string.o" = "-fno-inline"')
    seconds, one = timed(lambda: build_kernels(exp2, cells(exp2, ("default",)), jobs=args.jobs, progress=False))
    print(f"one-file flags change (CFLAGS_string.o): {seconds:.1f} s, {one[0].compiled} objects compiled")
    for r in range(args.rounds):
        odir = tree.home / "out" / f"bench-hand-{work.name}-{r}" / "default"
        hand = by_hand(exp, args.jobs, odir)
        fresh = experiment_copy(work / f"fb{r}")
        me0, kids0 = cpu()
        fb, _ = timed(lambda: build_kernels(fresh, cells(fresh, ("default",)), jobs=args.jobs, progress=True))
        me1, kids1 = cpu()
        print(f"round {r + 1}: by hand {hand:.1f} s, flagbench {fb:.1f} s, wall overhead {100 * (fb / hand - 1):+.1f} %; "
              f"flagbench's own CPU {me1 - me0:.2f} s vs make's {kids1 - kids0:.1f} s "
              f"({100 * (me1 - me0) / max(kids1 - kids0, 1e-9):.2f} %)")
        shutil.rmtree(odir.parent, ignore_errors=True)
    print(f"(work files in {work}; O= dirs under {tree.home / 'out'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
