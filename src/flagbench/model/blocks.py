"""The plugin driver: a program run under qemu-user with plugin/bbcount.c (every executed
block, its machine code and how often it ran) and plugin/cachesim.c (L1I/L1D/L2 misses for
the modelled cores' geometries, misaligned accesses), at n and 2n iterations, differenced
into counts per iteration, as the exact counts of `flagbench run` are.

A block is keyed by its address and its bytes (qemu translates a block again after a flush,
or from a second entry point: equal keys are summed). x86_64 programs run under
qemu-x86_64 here too, so their blocks are qemu's.
"""
from __future__ import annotations

import bisect
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from flagbench import procs
from flagbench.errors import UserError
from flagbench.toolchains import get_target

_MAPPING = re.compile(r"^\$([atd])(\..*)?$")


@dataclass(frozen=True)
class Block:
    vaddr: int
    code: bytes
    sizes: tuple[int, ...]       # instruction lengths
    per_iter: float              # executions per iteration (n and 2n differenced)
    symbol: str = "?"
    thumb: bool = False          # arm: Thumb-2 code

    @property
    def insns(self) -> int:
        return len(self.sizes)


def qemu_runner(target: str) -> str:
    spec = get_target(target)
    name = spec.qemu or ("qemu-x86_64" if target == "x86_64" else None)
    runner = shutil.which(name) if name else None
    if runner is None:
        raise UserError(f"modelling {target} programs needs {name or 'a qemu-user runner'}: apt-get install qemu-user")
    return runner


def _run(target: str, plugin: str, argv: list[str], timeout: float) -> None:
    from flagbench.run.executors import FIXED_CWD, FIXED_ENV, absolute_argv
    if "," in plugin.split(",", 1)[0]:
        raise UserError(f"qemu cannot load a plugin from a path with a comma: {plugin}")
    wrapped = [qemu_runner(target), *get_target(target).qemu_cpu, "-plugin", plugin, *absolute_argv(argv)]
    done = procs.run(wrapped, timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV)
    if done.failure:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        raise UserError(f"{Path(argv[0]).name} under qemu with a model plugin: {done.failure} {tail}".rstrip())


def parse_blocks(text: str) -> tuple[int, dict[tuple[int, bytes], tuple[tuple[int, ...], int]]]:
    """(the plugin's instruction total, {(vaddr, code): (sizes, executions)}) of bbcount's file."""
    if text.startswith("# incomplete"):
        raise UserError("the bbcount plugin ran out of memory: its block counts are incomplete")
    total, blocks = None, {}
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["insns"] and len(fields) == 2:
            total = int(fields[1])
        elif fields[:1] == ["B"] and len(fields) == 5:
            key = (int(fields[1], 16), bytes.fromhex(fields[4]))
            sizes = tuple(int(s) for s in fields[3].split(","))
            if sum(sizes) != len(key[1]):
                raise UserError(f"the bbcount plugin wrote a block whose sizes do not add up: {line[:80]}")
            old = blocks.get(key, (sizes, 0))[1]
            blocks[key] = (sizes, old + int(fields[2]))
    if total is None:
        raise UserError("the bbcount plugin wrote no instruction total")
    return total, blocks


def block_counts(target: str, plugin: Path, argv: list[str], tmp: Path, timeout: float, tag: str):
    out = tmp / f"blocks.{tag}"
    _run(target, f"{plugin},outfile={out}", argv, timeout)
    if not out.exists():
        raise UserError(f"the bbcount plugin wrote nothing for {Path(argv[0]).name}")
    return parse_blocks(out.read_text())


class ElfFacts:
    """What an executable says about an address: the symbol it is in, and on arm whether it is
    Thumb-2 code (mapping symbols $t / $a)."""

    def __init__(self, exe: Path, target: str):
        from flagbench.elf.image import Image
        from flagbench.profile import SymbolMap
        self.symbols = SymbolMap.of_elf(exe)
        marks = []
        if target == "arm":
            with Image(str(exe)) as image:
                for s in image.symbols:
                    m = _MAPPING.match(s.name or "")
                    if m and s.shndx:
                        marks.append((s.value, m.group(1)))
        marks.sort()
        self.mark_at, self.marks = [a for a, _ in marks], [k for _, k in marks]

    def thumb(self, vaddr: int) -> bool:
        i = bisect.bisect_right(self.mark_at, vaddr) - 1
        return i >= 0 and self.marks[i] == "t"


def per_iteration(target: str, exe: Path, argv_of, iters: int, tmp: Path, timeout: float) -> tuple[list[Block], float]:
    """The blocks that run per iteration (count(2n) - count(n), over n) and the exact
    instructions per iteration; argv_of(k) is the program's argv for k iterations."""
    from flagbench.run.qemu_plugin import plugin_path
    plugin = plugin_path("bbcount")
    deadline = procs.Deadline(timeout)
    t_small, small = block_counts(target, plugin, argv_of(iters), tmp, deadline.left(), "n")
    t_large, large = block_counts(target, plugin, argv_of(2 * iters), tmp, deadline.left(), "2n")
    facts = ElfFacts(exe, target)
    out = []
    for key in large.keys() | small.keys():
        sizes = (large.get(key) or small[key])[0]
        delta = large.get(key, (sizes, 0))[1] - small.get(key, (sizes, 0))[1]
        if delta:
            out.append(Block(key[0], key[1], sizes, delta / iters, facts.symbols.name(key[0]), facts.thumb(key[0])))
    out.sort(key=lambda b: (-b.per_iter * b.insns, b.vaddr))
    return out, (t_large - t_small) / iters


def cache_per_iteration(target: str, argv_of, iters: int, geometries: list[str], tmp: Path,
                        timeout: float) -> dict[str, float]:
    """cachesim's counters per iteration for these geometries (c0.*, c1.* in their order)."""
    from flagbench.run.executors import parse_metrics
    from flagbench.run.qemu_plugin import plugin_path
    plugin = plugin_path("cachesim")
    deadline = procs.Deadline(timeout)
    runs = []
    for tag, k in (("n", iters), ("2n", 2 * iters)):
        out = tmp / f"cache.{tag}"
        options = ",".join([f"{plugin}", f"outfile={out}", *(f"cache={g}" for g in geometries)])
        _run(target, options, argv_of(k), deadline.left())
        counts, bad = parse_metrics(out.read_text()) if out.exists() else ({}, None)
        if "insns" not in counts or bad is not None:
            raise UserError(f"the cachesim plugin wrote no counts for {Path(argv_of(k)[0]).name}")
        runs.append(counts)
    small, large = runs
    return {k: (large[k] - small.get(k, 0.0)) / iters for k in large}
