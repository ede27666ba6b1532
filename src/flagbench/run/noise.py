"""Keeping a busy machine off the verdicts: what each timed sample competed with, and an
order of runs that puts the samples to be compared next to each other in time.

Contention per job: the CPU time its programs got (this process's reaped children,
`getrusage(RUSAGE_CHILDREN)`, so a driver's forked tasks count once it waits them) against
the wall time it took, their involuntary context switches, and from /proc/stat how busy the
rest of the machine was and how much time the hypervisor stole. A CPU-bound program that got
half a CPU ran at half speed whatever the variant: stats.change sets such samples aside.

>>> c = Contention(wall_s=2.0, cpu_s=1.0, nivcsw=40, others=0.5, steal=0.0)
>>> c.cpu_share, c.as_dict()["cpu_share"]
(0.5, 0.5)
"""
from __future__ import annotations

import os
import random
import resource
import time
from dataclasses import asdict, dataclass
from typing import Callable, Hashable, Sequence, TypeVar

T = TypeVar("T")
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Contention:
    wall_s: float
    cpu_s: float          # user + system time of the job's programs
    nivcsw: int           # their involuntary context switches (preempted while runnable)
    others: float | None  # share of the machine's CPUs busy with anything but the job
    steal: float | None   # share of the machine's CPU time stolen by the hypervisor

    @property
    def cpu_share(self) -> float:
        """CPUs' worth the job's programs got on average: 1.0 for a single-threaded program alone."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict:
        return {**{k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()},
                "cpu_share": round(self.cpu_share, 4)}


@dataclass(frozen=True)
class _Mark:
    wall: float
    cpu: float
    nivcsw: int
    busy: float | None    # jiffies of all CPUs, from /proc/stat
    steal: float | None
    total: float | None


def mark() -> _Mark:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = steal = total = None
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)     # idle + iowait
        total = sum(fields[:8])                                        # guest time is inside user
        steal = fields[7] if len(fields) > 7 else 0.0
        busy = total - idle - steal
    except (OSError, ValueError, IndexError):
        pass
    return _Mark(time.monotonic(), r.ru_utime + r.ru_stime, r.ru_nivcsw, busy, steal, total)


def since(start: _Mark) -> Contention:
    end = mark()
    wall, cpu = end.wall - start.wall, end.cpu - start.cpu
    others = steal = None
    if start.total is not None and end.total is not None and end.total > start.total:
        span = end.total - start.total
        others = max(0.0, min(1.0, ((end.busy - start.busy) / _HZ - cpu) / (span / _HZ)))
        steal = max(0.0, (end.steal - start.steal) / span)
    return Contention(wall, cpu, end.nivcsw - start.nivcsw, others, steal)


def paired_round(items: Sequence[T], group: Callable[[T], Hashable], rng: random.Random) -> list[T]:
    """One visit of every item, items of one group next to each other (groups in random
    order, items within a group in random order): the variants of one table row are
    measured back to back, so a burst of contention hits them alike instead of one of them.

    >>> order = paired_round(["a1", "b1", "a2", "b2", "a3", "b3"], lambda s: s[1], random.Random(1))
    >>> sorted(order) == sorted(["a1", "b1", "a2", "b2", "a3", "b3"])
    True
    >>> all(order[i][1] == order[i + 1][1] for i in (0, 2, 4))
    True
    """
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(group(item), []).append(item)
    keys = list(groups)
    rng.shuffle(keys)
    out: list[T] = []
    for key in keys:
        members = groups[key]
        rng.shuffle(members)
        out += members
    return out


AA_SUFFIX = "@aa"


def aa_control(cells: list, order: Sequence[str]) -> list:
    """An A/A control per bench: its baseline's timed cells once more as their own column
    ("default@aa"), same program, measured in the same rounds. How far the baseline moves
    against itself is the smallest change the run may call (stats.reach).

    The baseline of a bench is the first of `order` among its columns (else its first column);
    layout relinks and count-only cells get no control."""
    from dataclasses import replace
    by_bench: dict[str, list] = {}
    for cell in cells:
        by_bench.setdefault(cell.bench, []).append(cell)
    out = []
    for bench_cells in by_bench.values():
        columns = [c.variant for c in bench_cells]
        base = next((v for v in order if v in columns), columns[0])
        out += [replace(c, variant=c.variant + AA_SUFFIX, counted=None, counted_metric=None, check=None)
                for c in bench_cells if c.variant == base and c.timed is not None]
    return out
