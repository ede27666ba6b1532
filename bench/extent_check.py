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
from flagbench.asm.unsized import of_image
from flagbench.elf import Image
from flagbench.toolchains import get_target

_LINE = re.compile(r"^ *([0-9a-f]+):\t", re.M)


def check(path: str) -> int:
    d = disassemble(path)
    with Image(path) as image:
        cmap = of_image(image, d.target)
        spans = sorted((s.value, s.value + s.size, s.name) for s in image.symbols
                       if s.size and s.shndx and s.name in d.functions)
    out = subprocess.run([get_target(d.target).objdump, "-d", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    starts = [s for s, _, _ in spans]
    inside: dict[str, int] = {}
    for m in _LINE.finditer(out):
        a = int(m.group(1), 16)
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and a < spans[i][1]:
            inside[spans[i][2]] = inside.get(spans[i][2], 0) + 1
    over = []
    for _, _, name in spans:
        f = d.functions[name]
        n = sum(1 for line in f.lines if line != "...")
        if n > inside.get(name, 0):
            over.append((n - inside.get(name, 0), name, n, inside.get(name, 0)))
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
