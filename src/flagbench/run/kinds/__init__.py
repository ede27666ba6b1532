"""Bench kinds: from one typed [[bench]] (benchspec.py) and the experiment's builds to
engine cells. One module per kind; each builds its programs here, before anything is
measured, so a function that does not exist fails the run before its first sample.

| kind | module | what one cell stores |
|---|---|---|
| micro | micro.py | ns_per_iter (time), insns_per_iter and loads/stores by width (counted) |
| memcpy, memset, memmove | memfn.py | MB/s (time), insns_per_byte and insns_per_call (counted) |
| wis | wis.py | per_second of a will-it-scale testcase, per mode and task count |
| command | command.py | seconds of a whole command |

Builds are duck-typed as build.Build (cell.variant.name, cell.target, cell.compiler,
objects, cflags, tools, dir); harness programs are compiled and linked by a `link`
callable, by default run/harness.link_with_build.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from flagbench.benchspec import MEMORY_KINDS, Bench
from flagbench.run.engine import BenchCell
from flagbench.run.harness import Linker, link_with_build
from flagbench.run.kinds import command, memfn, micro, wis
from flagbench.run.kinds.context import Context

REMOTE_KINDS = ("micro", "memcpy", "memset", "memmove", "wis")   # static programs: they run anywhere
MODULES = {"micro": micro, "memcpy": memfn, "memset": memfn, "memmove": memfn, "wis": wis, "command": command}


def cells_for_bench(bench: Bench, builds: Sequence, *, root: Path, workdir: Path,
                    link: Linker = link_with_build, notes: list[str] | None = None,
                    fleet=None, cpu: int | None = None) -> list[BenchCell]:
    """The engine cells of one bench over the experiment's builds; timed on the fleet's
    hosts where one has the target's architecture (run/places.py), else here."""
    notes = notes if notes is not None else []
    if fleet is not None and bench.kind not in REMOTE_KINDS:
        note = f"bench {bench.name}: {bench.kind} benches are timed on this machine only, not on --host"
        if note not in notes:
            notes.append(note)
        fleet = None
    ctx = Context(bench, builds, Path(root), Path(workdir), link, notes, fleet=fleet, cpu=cpu)
    make = MODULES[bench.kind].cells
    return [cell for build in ctx.builds for cell in make(ctx, build)]


def column_order(benches: Sequence[Bench], variants: Sequence[str]) -> list[str]:
    """Report columns in file order: variants, then each memcpy-like bench's functions
    (prefixed by the variant when there are several)."""
    order = list(variants)
    for bench in benches:
        if bench.kind in MEMORY_KINDS:
            names = (bench.functions if len(variants) == 1
                     else [f"{v}+{f}" for v in variants for f in bench.functions])
            order += [n for n in names if n not in order]
    return order
