"""Object mixes of a C experiment: the harness linked with A's objects, some of them B's.

Two variants of one experiment compile the same sources to objects of the same names; the
candidates are the objects whose bytes differ. A mix is A's build with B's copies of the
chosen objects (a duck-typed build.Build under its own column name), linked and measured
by the bench's own kind (run/kinds), so a mix is measured exactly as `flagbench run`
measures a variant: `insns` runs the counted job once (exact), `size` sums the code
symbols of the mix's objects.
"""
from __future__ import annotations

import filecmp
import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from flagbench.errors import UserError

COUNTED_METRICS = {"micro": "insns_per_iter", "memcpy": "insns_per_call", "memset": "insns_per_call",
                   "memmove": "insns_per_call"}


def differing(a, b) -> tuple[list[str], list[str]]:
    """(names of objects whose bytes differ, names identical) of two builds of one experiment."""
    names_a = {o.name: o for o in a.objects}
    names_b = {o.name: o for o in b.objects}
    if set(names_a) != set(names_b):
        only = sorted(set(names_a) ^ set(names_b))
        raise UserError(f"{a.cell.variant.name} and {b.cell.variant.name} build different objects "
                        f"({', '.join(only)}): object bisection mixes objects of one set of sources")
    differ = sorted(n for n in names_a if not filecmp.cmp(names_a[n], names_b[n], shallow=False))
    return differ, sorted(set(names_a) - set(differ))


class CMixer:
    """Links and measures mixes of two builds (A, B) of one C experiment for one bench."""

    def __init__(self, exp, bench, a, b, metric: str, workdir: Path):
        if metric not in ("insns", "size"):
            raise UserError(f"object bisection measures exact counts (insns) or size, not {metric}")
        if metric == "insns" and bench.kind not in COUNTED_METRICS:
            raise UserError(f"bench {bench.name}: object bisection counts micro and memcpy-like benches, "
                            f"not {bench.kind}")
        self.exp, self.bench, self.a, self.b, self.metric, self.workdir = exp, bench, a, b, metric, workdir
        self.unit = "bytes" if metric == "size" else "insns"
        self.what = "code bytes" if metric == "size" else COUNTED_METRICS[bench.kind]
        self.links = 0

    def mix(self, chosen: frozenset[str]):
        """A's build with B's copies of the chosen objects, as its own column."""
        by_name = {o.name: o for o in self.b.objects}
        objects = tuple(by_name[o.name] if o.name in chosen else o for o in self.a.objects)
        tag = hashlib.sha256("\0".join(sorted(chosen)).encode()).hexdigest()[:10]
        name = "A" if not chosen else f"mix-{tag}"
        cell = replace(self.a.cell, variant=replace(self.a.cell.variant, name=name))
        return replace(self.a, cell=cell, objects=objects)

    def value(self, chosen: frozenset[str]) -> float:
        build = self.mix(chosen)
        if self.metric == "size":
            return float(code_bytes(build.objects))
        return self._counted(build)

    def _counted(self, build) -> float:
        from flagbench.run.kinds import cells_for_bench

        metric = COUNTED_METRICS[self.bench.kind]
        bench = replace(self.bench, metrics=("insns",))
        cells = cells_for_bench(bench, [build], root=self.exp.root, workdir=self.workdir, notes=[])
        counted = [replace(c, timed=None) for c in cells if c.counted is not None]
        if not counted:
            raise UserError(f"bench {self.bench.name}: no counted cell for {build.cell.target}")
        from flagbench.bisect.stored import once
        self.links += len(counted)
        return once(counted, metric, self.workdir / "mixes")   # the engine measures each mix


def code_bytes(objects: Sequence[Path]) -> int:
    """Bytes of code symbols (nm letters t, T, w, W), bloat-o-meter's Function table."""
    from flagbench import elf
    return sum(size for o in objects for _, letter, size in elf.sized_symbols(o) if letter in "tTwW")
