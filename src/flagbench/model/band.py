"""One program modelled (a Side: its blocks per iteration, priced on every core of the band,
and its cache figures) and two of them compared (A and B: cycles per iteration on each core,
the ratio B/A, the band over the cores, and which symbols and blocks carry the difference).

Cycles per iteration = sum over the blocks of (executions per iteration x llvm-mca's cycles
per execution of that block on the core). What that leaves out is listed by `unmodelled`, with
the figures that bound it where there are any.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from flagbench.model import mca
from flagbench.model.blocks import Block, cache_per_iteration, per_iteration
from flagbench.model.cores import ISAS, NO_MODEL, Core

# An x86 string instruction, with or without a rep prefix (movsb, not movsbl: that is a move
# with sign extension; movsd with xmm operands is SSE, its suffix is not one of bwlq).
_STRING_OP = re.compile(r"^((rep|repe|repne|repz|repnz)\s+)?(movs|stos|cmps|scas|lods)[bwlq]?\s")


@dataclass
class Side:
    label: str
    insns: float                                          # exact instructions per iteration (qemu)
    blocks: list[Block]
    asm: list[list[str]]                                  # each block's text
    cycles: dict[str, float] = field(default_factory=dict)          # core -> cycles per iteration
    block_cycles: dict[str, list[float]] = field(default_factory=dict)   # core -> per block, per iteration
    unpriced: dict[str, float] = field(default_factory=dict)        # core -> instructions per iteration
    cache: dict[str, float] = field(default_factory=dict)           # cachesim's counters per iteration
    string_ops: float = 0.0                               # x86 rep string instructions per iteration

    def by_symbol(self, core: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for block, cycles in zip(self.blocks, self.block_cycles.get(core, ())):
            out[block.symbol] = out.get(block.symbol, 0.0) + cycles
        return out

    def hot(self, core: str, most: int = 2) -> list[tuple[Block, list[str], float]]:
        rows = sorted(zip(self.blocks, self.asm, self.block_cycles.get(core, ())), key=lambda r: -r[2])
        return rows[:most]


def model_side(label: str, target: str, exe: Path, argv_of, iters: int, cores: tuple[Core, ...], tmp: Path,
               timeout: float, cache: bool = True) -> Side:
    """Run, price and (with CACHE) cache-simulate one program."""
    tmp.mkdir(parents=True, exist_ok=True)
    blocks, insns = per_iteration(target, exe, argv_of, iters, tmp, timeout)
    isa = ISAS.get(target)
    asm = []
    for b in blocks:
        if isa is None:
            asm.append([])
        else:
            triple = isa.thumb_triple if b.thumb and isa.thumb_triple else isa.triple
            asm.append(mca.disassemble(triple, isa.mattr, b.code))
    side = Side(label, insns, blocks, asm)
    side.string_ops = sum(b.per_iter for b, text in zip(blocks, asm) for ln in text if _STRING_OP.match(ln))
    for core in cores:
        _price_on(side, isa, core)
    if cache:
        geometry_cores = (NO_MODEL[target][1],) if target in NO_MODEL else cores
        side.cache = cache_per_iteration(target, argv_of, iters, [c.geometry_arg() for c in geometry_cores],
                                         tmp, timeout)
    return side


def _price_on(side: Side, isa, core: Core) -> None:
    groups: dict[str, list[int]] = {}
    for i, b in enumerate(side.blocks):
        groups.setdefault(isa.thumb_triple if b.thumb and isa.thumb_triple else isa.triple, []).append(i)
    per_block = [0.0] * len(side.blocks)
    unpriced = 0.0
    for triple, indices in groups.items():
        # String operations stay out: llvm-mca has no figure for microcode (it says 100 cycles
        # an element on znver3, a few on skylake); they are counted and named instead.
        texts = [[ln for ln in side.asm[i] if not _STRING_OP.match(ln)] for i in indices]
        priced = [k for k, text in enumerate(texts) if text]
        prices = dict(zip(priced, mca.price(triple, isa.mattr, core.mcpu, [texts[k] for k in priced])))
        for k, i in enumerate(indices):
            b, p = side.blocks[i], prices.get(k)
            strings = len(side.asm[i]) - len(texts[k])
            per_block[i] = (p.cycles or 0.0) * b.per_iter if p else 0.0
            # what llvm-mc could not decode or llvm-mca could not price, string instructions apart
            unpriced += max(0, b.insns - strings - (p.priced if p else 0)) * b.per_iter
    side.block_cycles[core.mcpu] = per_block
    side.cycles[core.mcpu] = sum(per_block)
    side.unpriced[core.mcpu] = unpriced


@dataclass
class Comparison:
    title: str                   # bench and point
    target: str
    compiler: str
    a: Side
    b: Side
    cores: tuple[Core, ...]
    per: str = "iteration"       # what one count is per ("iteration", "call")
    seconds: float = 0.0         # what modelling this pair cost, wall time
    measured: dict | None = None  # x86_64 validation: {"a_ns", "b_ns", "ratio", "low", "high"}

    def ratio(self, core: str) -> float | None:
        a, b = self.a.cycles.get(core), self.b.cycles.get(core)
        return b / a if a else None

    def band(self) -> tuple[float, float] | None:
        ratios = [r for r in (self.ratio(c.mcpu) for c in self.cores) if r is not None]
        return (min(ratios), max(ratios)) if ratios else None

    def insn_ratio(self) -> float | None:
        return self.b.insns / self.a.insns if self.a.insns else None

    def no_model(self) -> str | None:
        return NO_MODEL[self.target][0] if self.target in NO_MODEL else None

    def unmodelled(self) -> list[str]:
        """What the cycles leave out, each with the figures that bound it."""
        a, b = self.a, self.b
        if self.no_model():
            out = ["cycles: no pipeline model for this target; the exact counts and the cache figures are what "
                   "there is"]
            if a.cache or b.cache:
                out.append(f"misaligned accesses: A {a.cache.get('misaligned', 0):.4g}, "
                           f"B {b.cache.get('misaligned', 0):.4g} per {self.per}")
            return out
        out = ["branch prediction: llvm-mca takes every branch as predicted; mispredictions are not in the cycles",
               "memory: every access priced as an L1 hit; the cache misses above are not in the cycles",
               "blocks priced one by one, each repeated back to back (steady-state throughput): nothing carried "
               "from one block to the next, and a register a block reads and writes becomes a chain the real "
               "code may not have; calls priced as a taken branch"]
        if a.cache or b.cache:
            out.append(f"misaligned accesses: A {a.cache.get('misaligned', 0):.4g}, B {b.cache.get('misaligned', 0):.4g} "
                       f"per {self.per}, priced as aligned (a trap, a split or a replay is not modelled)")
        if a.string_ops or b.string_ops:
            out.append(f"string instructions (movs/stos..., rep or not: microcode): A {a.string_ops:.4g}, "
                       f"B {b.string_ops:.4g} executions per {self.per} (qemu runs a rep once per element) are "
                       f"NOT in the cycles: llvm-mca has no figure for microcode (its placeholder is 100 "
                       f"cycles an element on znver3)")
        for core in self.cores:
            lost = a.unpriced.get(core.mcpu, 0) + b.unpriced.get(core.mcpu, 0)
            if lost:
                out.append(f"{core.mcpu}: {a.unpriced.get(core.mcpu, 0):.4g} (A) and {b.unpriced.get(core.mcpu, 0):.4g}"
                           f" (B) instructions per {self.per} llvm-mca could not price (counted as 0 cycles)")
        return out
