"""What every bench kind shares while it turns a typed bench into engine cells: the
builds it runs on, where its programs go, notes, calibrations, and the small helpers
that turn a Measurement into a failure reason or per-iteration counts."""
from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Sequence

from flagbench.benchspec import Bench
from flagbench.errors import UserError
from flagbench.metrics import PAGE_FAULTS, TASK_CLOCK_MS, Metric
from flagbench.run.engine import BenchCell, Emit
from flagbench.hosts.checks import local_cpu
from flagbench.run.kinds import values
from flagbench.run.executors import HOST_TARGET, Measurement, NativeExecutor, perf_available
from flagbench.run.harness import Linker, Program, program_dir
from flagbench.run.places import LOCAL, Fleet, Place
from flagbench.spec import compiler_label
from flagbench.toolchains import get_target

COUNT_WIDTH = 10             # counted argv numbers are zero-padded to this width
_FAIL_LINE = re.compile(r"^FAIL .*$", re.M)


class Context:
    def __init__(self, bench: Bench, builds: Sequence, root: Path, workdir: Path, link: Linker,
                 notes: list[str], fleet: Fleet | None = None, cpu: int | None = None):
        self.bench, self.root, self.workdir, self.link, self.notes = bench, root, workdir, link, notes
        self.name, self.kind = bench.name, bench.kind
        self.fleet, self.cpu = fleet, cpu
        self.executors: dict[str, NativeExecutor] = {}
        self.perf = "perf" in bench.metrics and self._perf_here()
        self.builds = [b for b in builds if bench.runs_on(b.cell.target)]
        self.single_variant = len({b.cell.variant.name for b in builds}) == 1
        self.baseline = builds[0].cell.variant.name if builds else ""
        self.native = None
        self.calibrated: dict[tuple, int] = {}   # one calibration per bench x target x compiler x point

    def native_executor(self, place: Place = LOCAL) -> NativeExecutor:
        """The timed executor on PLACE (a host's counts perf there whenever its perf can)."""
        if not place.remote:
            if self.native is None:
                local_cpu(self.cpu)   # a target no --host takes is timed here: the cell fails, saying why
                self.native = NativeExecutor(perf=self.perf, **({} if self.cpu is None else {"cpu": self.cpu}))
            return self.native
        if place.name not in self.executors:
            self.executors[place.name] = NativeExecutor(place=place, perf=bool(place.perf_events()),
                                                        cpu=self.cpu)
        return self.executors[place.name]

    def places(self, target: str, row: tuple = ()) -> list[Place]:
        """Where programs of TARGET are timed: the fleet's hosts of that architecture
        (one per table row, or all with --replicate), else here when this machine can."""
        hosts = self.fleet.places_for(target, (self.name, target, *row)) if self.fleet else []
        if hosts:
            return hosts
        return [LOCAL] if target == HOST_TARGET and platform.machine() == HOST_TARGET else []

    def can_time(self, target: str) -> bool:
        if self.fleet and target in self.fleet.targets():
            return True
        return target == HOST_TARGET and platform.machine() == HOST_TARGET

    def cells_on(self, build, column: str, params: dict, *, timed_on, counted, **kw) -> list[BenchCell]:
        """One cell here (timed and counted) or, where hosts time TARGET, the counted cell here
        and a timed cell per host, its row named by the host (exact counts are the same on
        every machine)."""
        row = (build.cell.compiler, *params.items())
        places = self.places(build.cell.target, row) if timed_on else []
        if not any(p.remote for p in places):
            return [self.cell(build, column, params, timed=timed_on(LOCAL) if places else None,
                              counted=counted, **kw)]
        out = []
        if counted is not None:
            local = {k: v for k, v in kw.items() if k not in ("executor", "timed_metric", "per_invocation")}
            out.append(self.cell(build, column, params, counted=counted, **local))
        for place in places:
            prov = {**kw.get("provenance", {}), "host": place.name}
            out.append(self.cell(build, column, {"host": place.name, **params}, timed=timed_on(place),
                                 **{**kw, "executor": f"ssh:{place.name}", "count_executor": "",
                                    "counted_metric": None, "provenance": prov},
                                 place=place))
        return out

    def _perf_here(self) -> bool:
        if not perf_available():
            self.note("perf stat -e task-clock,page-faults does not work here (apt-get install linux-perf; "
                      "kernel.perf_event_paranoid): no perf metrics")
        return perf_available()

    def measures_for(self, target: str) -> list[str]:
        """time and/or insns for programs of `target` (perf rides on the timed runs)."""
        if not get_target(target).runnable:
            self.note(f"{target}: cannot run here (objects only); no {self.name} measurements")
            return []
        out = []
        for m in self.bench.metrics:
            if m in ("perf", "profile"):   # perf rides on timed runs; profiles are run/profiled.py's
                continue
            if m == "time" and not self.can_time(target):
                self.note(f"{target}: time is measured natively on {HOST_TARGET} only, or on a --host of "
                          f"this architecture; insns instead")
                continue
            out.append(m)
        return out

    def note(self, text: str) -> None:
        text = f"bench {self.name}: {text}"
        if text not in self.notes:
            self.notes.append(text)

    def program(self, build, program: Program, column: str | None = None) -> Path:
        column = column or build.cell.variant.name
        out = program_dir(self.workdir, self.name, column, build.cell.target, build.cell.compiler)
        return self.link(build, program, out)

    def cell(self, build, column: str, params: dict, **kw) -> BenchCell:
        prov = {"variant": build.cell.variant.name, "cflags": list(build.cflags),
                "tools": dict(getattr(build, "tools", {}) or {}), "bench_kind": self.kind,
                "compiler_driver": build.cell.compiler, "timeout": self.bench.timeout}
        prov.update(kw.pop("provenance", {}))
        kw.setdefault("samples", self.bench.samples)
        kw.setdefault("warmup", self.bench.warmup)
        return BenchCell(bench=self.name, variant=column, target=build.cell.target,
                         compiler=compiler_label(build.cell.compiler), params=params, provenance=prov, **kw)

    def failure(self, m: Measurement, *keys: str, ranges: dict | None = None) -> str | None:
        """Why a measurement is unusable: it failed (with the harness's FAIL line, and the
        bench's timeout rather than what was left of it), lacks a metric, or printed one that
        the harness cannot print (values.py: unsigned integers, within RANGES where given)."""
        if not m.ok:
            if m.failure.startswith("timeout"):
                return f"timeout after {self.bench.timeout:g} s"
            fail = _FAIL_LINE.search(m.stdout)
            return f"{m.failure}: {fail.group(0)}" if fail else m.failure
        missing = [k for k in keys if k not in m.metrics]
        if missing:
            return f"garbage output: no {', '.join(missing)} in {m.stdout[:80]!r}"
        return (values.uints(m.stdout, keys) or values.garbage(m.stdout, ranges or {})
                or values.perf_garbage(m.metrics))

    def ns_range(self) -> tuple[int, float]:
        """A timed call printed at least 1 ns and at most the bench's timeout."""
        return 1, self.bench.timeout * 1e9


def pad(n: int) -> str:
    return f"{n:0{COUNT_WIDTH}d}"


def counter_deltas(small: Measurement, large: Measurement) -> dict[str, float]:
    """Exact counters (insns, loads_W, stores_W by width, and their totals) of the
    larger run minus the smaller."""
    deltas = {k: large.metrics[k] - small.metrics.get(k, 0.0) for k in large.metrics
              if k == "insns" or k.startswith(("loads_", "stores_"))}
    for access in ("loads", "stores"):
        widths = [v for k, v in deltas.items() if k.startswith(access + "_")]
        if widths:
            deltas[access] = sum(widths)
    return deltas


def emit_perf(m: Measurement, emit: Emit) -> None:
    """perf's software events of a timed run, when it ran under perf (whole process: harness start-up too)."""
    if "task_clock_ns" in m.metrics:
        emit(TASK_CLOCK_MS, m.metrics["task_clock_ns"] / 1e6)
    if "page_faults" in m.metrics:
        emit(PAGE_FAULTS, m.metrics["page_faults"])
    for name, value in m.metrics.items():   # a host's PMU counters (perf_cycles, perf_itlb_misses, ...)
        if name.startswith("perf_"):
            emit(Metric(name, name.removeprefix("perf_").split("_")[-1]), value)


def count_executor_name(target: str) -> str:
    return "callgrind" if target == HOST_TARGET else f"qemu-{target}"


def compile_flags(build) -> list[str]:
    """The variant's compile flags without the object-file plumbing."""
    out, skip = [], False
    for flag in build.cflags:
        if skip or flag in ("-c", "-o"):
            skip = flag == "-o"
            continue
        out.append(flag)
    return out


_SYMBOLS: dict[tuple, frozenset[str]] = {}


def defined_symbols(build) -> frozenset[str]:
    """Code symbols defined in a build's objects (an implementation may exist on one target
    only: rep movsb on x86_64), read with the size stage's ELF reader."""
    from flagbench import elf
    key = tuple(build.objects)
    if key not in _SYMBOLS:
        _SYMBOLS[key] = frozenset(name for obj in build.objects
                                  for name, letter, _ in elf.sized_symbols(obj)
                                  if letter in "TtWi")
    return _SYMBOLS[key]


def named_functions(bench) -> list[str]:
    """The experiment's functions a bench calls (micro: function; memory kinds: functions but libc)."""
    if bench.kind == "micro":
        return [bench.function]
    return [f for f in getattr(bench, "functions", ()) if f != "libc"]


def need_function(ctx: Context, name: str, defined) -> None:
    if name not in defined:
        raise UserError(f"bench {ctx.name}: no object of the experiment defines {name}")
