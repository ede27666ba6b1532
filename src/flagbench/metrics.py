"""Metrics that declare themselves (benchstat's units idea): where a number is emitted it says
what it is: its name, unit, which way is better, and whether it is an exact count (the same
every run: work) or a noisy measurement (time). The run engine stores each declaration beside
the run's samples (store.py, table `metrics`), and the verdict (stats/) and the report read it
there instead of guessing from the metric's name.

    PER_SECOND = Metric("per_second", "iter/s", better="higher")
    emit(PER_SECOND, rate)                       # in a bench kind's job (run/engine.Emit)
    emit(count("loads_4_per_iter", "loads"), n)  # an exact count made up on the spot

Samples stored before declarations existed (and "key value" lines a user's program prints)
have none: `guess` reads name and unit as flagbench always did (rates are better higher,
counted units exact).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

BETTER = ("lower", "higher")
EXACT_UNITS = frozenset({"insns", "loads", "stores"})   # units of exact counts: work, not speed


@dataclass(frozen=True)
class Metric:
    """What a number measures.

    >>> Metric("MB/s", "MB/s", better="higher").higher_is_better, count("insns_per_iter").kind
    (True, 'work')
    >>> Metric("x", better="up")
    Traceback (most recent call last):
    ValueError: metric x: better must be 'lower' or 'higher', not 'up'
    """
    name: str
    unit: str = ""
    better: str = "lower"          # "lower" (time, counts) or "higher" (rates)
    exact: bool = False            # an exact count (work), not a noisy measurement (time)
    label: str = ""                # how a summary line names it ("insns/iter"); "": not summarised as a count
    side: bool = False             # a side metric (perf's page faults): in the tables, not the summary

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a metric needs a name, not {self.name!r}")
        if self.better not in BETTER:
            raise ValueError(f"metric {self.name}: better must be 'lower' or 'higher', not {self.better!r}")
        if not isinstance(self.exact, bool) or not isinstance(self.side, bool):
            raise ValueError(f"metric {self.name}: exact and side are true or false")

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    @property
    def kind(self) -> str:
        """"work" for exact counts of what the program did, "time" for how fast it did it."""
        return "work" if self.exact else "time"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Metric":
        return cls(**{k: data[k] for k in ("name", "unit", "better", "exact", "label", "side") if k in data})


def count(name: str, unit: str = "insns", label: str = "") -> Metric:
    """An exact count (instructions, loads, stores): the same every run, lower is less work."""
    return Metric(name, unit, "lower", True, label)


def guess(name: str, unit: str = "") -> Metric:
    """The Metric of a sample stored without a declaration, from its name and unit: rates ("/s")
    are better higher, times and counts lower; counted units are exact.

    >>> guess("MB/s", "MB/s").higher_is_better, guess("ns_per_iter", "ns").higher_is_better
    (True, False)
    >>> guess("insns_per_iter", "insns").exact, guess("per_second", "iter/s").kind
    (True, 'time')
    """
    if name in DECLARED and DECLARED[name].unit == (unit or ""):   # flagbench's own, stored before declarations
        return DECLARED[name]
    u = (unit or "").lower()
    rate = u.endswith("/s") or name.lower().endswith(("/s", "per_second", "per_sec")) or name == "throughput"
    return Metric(name, unit or "", "higher" if rate else "lower", u in EXACT_UNITS)


# The metrics flagbench's own bench kinds emit (each module emits its own: these are shared)
NS_PER_ITER = Metric("ns_per_iter", "ns")
INSNS_PER_ITER = count("insns_per_iter", label="insns/iter")
MB_PER_S = Metric("MB/s", "MB/s", better="higher")
INSNS_PER_BYTE = count("insns_per_byte", label="insns/byte")
INSNS_PER_CALL = count("insns_per_call")
PER_SECOND = Metric("per_second", "iter/s", better="higher")
SECONDS = Metric("seconds", "s")
KERNEL_INSNS_PER_ITER = count("kernel_insns_per_iter", label="kernel insns/iter")
USER_INSNS_PER_ITER = count("user_insns_per_iter")
TASK_CLOCK_MS = Metric("task_clock_ms", "ms", side=True)
PAGE_FAULTS = Metric("page_faults", "faults", side=True)
DECLARED = {m.name: m for m in (NS_PER_ITER, INSNS_PER_ITER, MB_PER_S, INSNS_PER_BYTE, INSNS_PER_CALL, PER_SECOND,
                                 SECONDS, KERNEL_INSNS_PER_ITER, USER_INSNS_PER_ITER, TASK_CLOCK_MS, PAGE_FAULTS)}
