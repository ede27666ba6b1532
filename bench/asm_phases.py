#!/usr/bin/env python3
"""Where one side of `flagbench asm` spends its CPU: the phases of `asm.disasm.disassemble`
timed apart on one ELF file (process CPU seconds; objdump's as its children's).

    .venv/bin/python bench/asm_phases.py FILE [FILE...]   (e.g. /work/kernel-pair-big/vmlinux.old)

objdump's output is read whole first, so its time is not mixed into the normaliser's, which
goes through disasm._normalised as `disassemble` does (C where it applies, `_normalise.c`); the mix
is summed over the old side's part of the functions (12 of 20), as `compare.disassemble_pair`
does for the text and markdown formats (`mix.mix_sum`; json mixes each function apart).
"""
from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

from flagbench.asm import disasm, extent, unsized
from flagbench.asm.disasm import gc_paused
from flagbench.asm.mix import mix_sum
from flagbench.asm.compare import OLD_PART
from flagbench.asm.model import in_part
from flagbench.asm.places import Places
from flagbench.toolchains import get_target


class Slices:
    """TEXT read as a stream, in slices: an io.StringIO of it costs a copy of the text as four
    bytes a character, and a tenth of a second on a vmlinux, that `asm` does not spend."""

    def __init__(self, text: str):
        self.text, self.at = text, 0

    def read(self, n: int = -1) -> str:
        start, self.at = self.at, len(self.text) if n < 0 else self.at + n
        return self.text[start:self.at]


def normalised(stream, norm):
    """disasm._normalised, or on code from before it (PYTHONPATH=...), the loop it replaced."""
    if hasattr(disasm, "_normalised"):
        return disasm._normalised(stream, norm)
    return ((s, n, norm.body(b, n)) for s, n, b in disasm._blocks(stream))


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def phases(path: Path) -> dict[str, float]:
    out, clock = {}, time.process_time
    t = clock()

    def lap(name: str) -> None:
        nonlocal t
        now = clock()
        out[name] = now - t
        t = now

    with gc_paused(), Places(path) as elf:
        cmap = unsized.of_image(elf.image, elf.target)
        lap("code map")
        norm = disasm.Normaliser(elf, cmap)
        tool = get_target(elf.target).objdump
        texts, before = [], children_cpu()
        for start, stop in ([(None, None)] if elf.relocatable else cmap.code_ranges(disasm.SKIP_PADDING)):
            argv = disasm.objdump_argv(tool, path, elf.relocatable, start, stop)
            texts.append(subprocess.run(argv, capture_output=True, text=True, errors="replace", check=True).stdout)
        out["objdump (its own CPU)"] = children_cpu() - before
        lap("reading objdump's output")
        functions = {}
        for text in texts:   # as disasm._functions does (the C path where it applies)
            for section, name, body in normalised(Slices(text), norm):
                functions[name] = disasm.Function(name, section, body)
        lap("normalising")
        d = disasm.Disassembly(path, elf.target, "", functions, unsized=cmap.totals())
        extent.cut(d, elf.image, cmap)
        lap("cutting to symbol extents")
        d.part_mix = mix_sum(d.target, [f.text for f in d.functions.values() if in_part(f.name, OLD_PART)])
        lap("mix of the old side's part")
    out["python in all"] = sum(v for k, v in out.items() if not k.startswith("objdump"))
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for name in argv:
        print(name)
        for phase, seconds in phases(Path(name)).items():
            print(f"  {phase:<28} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
