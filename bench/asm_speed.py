#!/usr/bin/env python3
"""How long `flagbench asm OLD NEW` takes, as a user runs it (the list, the instruction mix of
every function, the text output), against one `objdump -d` of the larger file (goal: at most
1x: two files on two cores cost one objdump's wall time), and where the time goes.

    .venv/bin/python bench/asm_speed.py [--runs N] [OLD NEW]
        (default DIR/vmlinux.{old,new}, DIR /work/kernel-pair-big when built, else /work/kernel-pair)

`bench/make-kernel-pair --big` builds the default inputs with flagbench's kernel support:
x86_64 6.1 at -O2, over 20,000 functions, built without and with -falign-functions=64 (which
moves every function). Each run times objdump, then the command; the ratio of the fastest of
each is printed (wall), with CPU seconds beside it (this machine is shared: wall time is noisy).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from flagbench.asm.places import file_target
from flagbench.elf import Image
from flagbench.toolchains import get_target

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env=None) -> tuple[float, float]:
    """(wall, CPU of the process tree) seconds of one run, output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def moved(old: Path, new: Path) -> tuple[int, int]:
    """(functions at another address in NEW, functions in both): sized code symbols, unique names."""
    def places(path):
        with Image(str(path)) as image:
            seen: dict[str, int | None] = {}
            for s in image.symbols:
                if s.size and s.type == 2 and s.shndx:   # STT_FUNC
                    seen[s.name] = None if s.name in seen else s.value
            return {n: v for n, v in seen.items() if v is not None}
    a, b = places(old), places(new)
    both = a.keys() & b.keys()
    return sum(a[n] != b[n] for n in both), len(both)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("files", nargs="*", metavar="OLD NEW")
    args = ap.parse_args(argv)
    if len(args.files) not in (0, 2):
        ap.error("give OLD NEW, or nothing for the default pair")
    default = next((d for d in (Path("/work/kernel-pair-big"), Path("/work/kernel-pair"))
                    if (d / "vmlinux.new").exists()), Path("/work/kernel-pair-big"))
    old, new = (Path(a) for a in (args.files or [default / "vmlinux.old", default / "vmlinux.new"]))
    for p in (old, new):
        if not p.is_file():
            print(f"asm_speed: {p} missing (bench/make-kernel-pair --big builds it)", file=sys.stderr)
            return 2
    larger = max((old, new), key=os.path.getsize)
    objdump = get_target(file_target(larger)).objdump
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "flagbench", "asm", str(old), str(new)]

    n_moved, n_both = moved(old, new)
    print(f"inputs: {old} ({os.path.getsize(old)} B), {new} ({os.path.getsize(new)} B)")
    print(f"functions in both: {n_both}, at another address in the new one: {n_moved}")
    runs_objdump, runs_asm = [], []
    for _ in range(args.runs):
        runs_objdump.append(timed([objdump, "-d", str(larger)]))
        runs_asm.append(timed(command, env))
    for label, runs in ((f"objdump -d {larger.name}", runs_objdump), ("flagbench asm OLD NEW", runs_asm)):
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"{label}: wall min {min(walls):.2f} s, median {statistics.median(walls):.2f} s; "
              f"CPU min {min(cpus):.2f} s ({len(runs)} runs)")
    ratio = min(w for w, _ in runs_asm) / min(w for w, _ in runs_objdump)
    cpu_ratio = min(c for _, c in runs_asm) / min(c for _, c in runs_objdump)
    print(f"ratio asm / objdump: {ratio:.2f} wall (goal <= 1), {cpu_ratio:.2f} CPU")
    summary = subprocess.run(command, capture_output=True, text=True, env=env).stdout.splitlines()
    print("asm says: " + " | ".join(summary[2:4]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
