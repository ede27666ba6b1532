#!/usr/bin/env python3
"""How long `flagbench asm` takes for the full same/changed list of two vmlinux, against one
`objdump -d` of the larger file (goal: at most 2x), and where the time goes.

    .venv/bin/python bench/asm_speed.py [OLD NEW]
        (default DIR/vmlinux.{old,new}, DIR /work/kernel-pair-big when built, else /work/kernel-pair)

Both are measured in this one run, objdump first; the ratio is what to compare across
machines. `bench/make-kernel-pair --big` builds the default inputs (over 20,000 functions,
every one moved by -falign-functions=64).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from flagbench.asm import compare as asm_compare
from flagbench.asm.compare import changed_lines, compare_files
from flagbench.asm.places import file_target
from flagbench.toolchains import get_target


def main(argv: list[str]) -> int:
    if len(argv) not in (0, 2):
        print(__doc__.strip().splitlines()[-4], file=sys.stderr)
        return 2
    default = next((d for d in (Path("/work/kernel-pair-big"), Path("/work/kernel-pair"))
                    if (d / "vmlinux.new").exists()), Path("/work/kernel-pair-big"))
    old, new = (Path(a) for a in (argv or [default / "vmlinux.old", default / "vmlinux.new"]))
    for p in (old, new):
        if not p.is_file():
            print(f"asm_speed: {p} missing (bench/make-kernel-pair builds it)", file=sys.stderr)
            return 2
    larger = max((old, new), key=os.path.getsize)
    objdump = get_target(file_target(larger)).objdump

    t0 = time.perf_counter()
    subprocess.run([objdump, "-d", str(larger)], stdout=subprocess.DEVNULL, check=True)
    t_objdump = time.perf_counter() - t0

    timings = {}
    layout_pass = asm_compare.same_apart_from_layout

    def timed_layout_pass(d_old, d_new, names):   # the inner-padding pass, timed apart
        t = time.perf_counter()
        out = layout_pass(d_old, d_new, names)
        timings["layout"] = (time.perf_counter() - t, len(names), len(out))
        return out

    asm_compare.same_apart_from_layout = timed_layout_pass
    t0 = time.perf_counter()
    c = compare_files(old, new, rank=False)
    t_list = time.perf_counter() - t0
    asm_compare.same_apart_from_layout = layout_pass

    t0 = time.perf_counter()
    for d in c.functions:
        if d.status == "changed":
            d.changed_lines = changed_lines(d.old, d.new)
    t_rank = time.perf_counter() - t0

    k = c.counts()
    print(f"inputs: {old} ({os.path.getsize(old)} B), {new} ({os.path.getsize(new)} B)")
    print(f"functions: {k['same']} same, {k['changed']} changed, {k['added']} added, {k['removed']} removed")
    print(f"objdump -d {larger.name}: {t_objdump:.2f} s")
    t_layout, asked, same = timings.get("layout", (0.0, 0, 0))
    print(f"flagbench asm list (both files): {t_list:.2f} s, of which the inner-padding pass "
          f"{t_layout:.2f} s ({asked} functions looked at again, {same} found the same); "
          f"ranking the changed ones: {t_rank:.2f} s")
    print(f"ratio list / objdump: {t_list / t_objdump:.2f} (goal <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
