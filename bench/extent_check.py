#!/usr/bin/env python3
"""Does `flagbench asm` give any function more instructions than its symbol's extent holds?

    .venv/bin/python bench/extent_check.py ELF [ELF...]

For each file: objdump -d with addresses (independent of flagbench's pass, which asks for none)
counts the instructions whose address lies inside each sized symbol [value, value + size);
flagbench's per-function line count (instructions and padding, objdump's "..." zero runs left
out) must not exceed it. Prints the functions that do, and the code outside every function
(`asm.unsized`): linker stubs, padding and other code.
"""
from __future__ import annotations

import bisect
import re
import subprocess
import sys

from flagbench.asm.disasm import disassemble
from flagbench.asm.padding import symbol_spans
from flagbench.asm.unsized import of_image
from flagbench.elf import Image
from flagbench.toolchains import get_target

_LINE = re.compile(r"^ *([0-9a-f]+):\t", re.M)


def check(path: str) -> int:
    d = disassemble(path)
    with Image(path) as image:
        cmap = of_image(image, d.target)
        spans = symbol_spans(image, d.target == "arm", list(d.functions.values()))
    out = subprocess.run([get_target(d.target).objdump, "-d", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    addrs = sorted(int(m.group(1), 16) for m in _LINE.finditer(out))
    over = []
    for name, (_, start, _, size) in spans.items():
        if not size:
            continue
        n = sum(1 for line in d.functions[name].lines if line != "...")
        limit = bisect.bisect_left(addrs, start + size) - bisect.bisect_left(addrs, start)
        if n > limit:
            over.append((n - limit, name, n, limit))
    t = cmap.totals()
    print(f"{path} ({d.target}): {len(d.functions)} functions, {len(spans)} sized and checked; "
          f"{len(over)} with more instructions than their extent holds")
    for extra, name, n, limit in sorted(over, reverse=True)[:20]:
        print(f"  {name}: {n} instructions, its extent holds {limit}")
    print(f"  outside functions: {t['stubs']} linker stubs ({t['stub']} B), padding {t['padding']} B, "
          f"other code {t['other']} B")
    return 1 if over else 0


if __name__ == "__main__":
    if not sys.argv[1:]:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    sys.exit(max(check(p) for p in sys.argv[1:]))
