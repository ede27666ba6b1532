"""From an experiment's [[bench]] tables to engine cells: which harness programs to
build, how to run them, and which samples they give.

Kinds and what one cell stores (metric, unit):
- micro: `uint64_t FN(uint64_t n)` called by harness/micro.c.
    time (x86_64, native): "ns_per_iter" (ns). n is calibrated once per bench, target
      and compiler (one call >= 20 ms) and then used for every variant and sample.
    insns (callgrind / qemu + plugin): runs with n and 2n iterations; the difference
      over n is "insns_per_iter" (and loads/stores per iteration, by width, under qemu):
      exact, so measured once.
- memcpy / memset / memmove: every function first passes harness/memcheck.c (else each
  of its cells fails with memcheck's line); then harness/memsweep.c per size x
  alignment: "MB/s" natively; "insns_per_byte" and "insns_per_call" counted. The
  table column is the implementation (the variant too when there are several):
  the seed's table compares implementations side by side.
- wis: the will-it-scale driver (run/wis.py) per variant, x86_64 only: "per_second".
- command: a whole command per variant, timed from outside: "seconds".

`layouts = K` (micro): the variants named in `layout_variants` (default: the first,
the baseline) are also relinked K times with their code moved (run/layout.py), each
relink its own column "VARIANT@Ln", timed only (the machine code is the same, so
instruction counts are too); report.py turns those columns into the layout-noise band.

Builds are duck-typed as build.Build (cell.variant.name, cell.target, cell.compiler,
objects, cflags, tools, dir); harness programs are compiled and linked by a `link`
callable, by default flagbench.build's compile_sources + link_executable.
"""
from __future__ import annotations

import platform
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flagbench.errors import UserError
from flagbench.run.engine import BenchCell, Emit
from flagbench.run.executors import HOST_TARGET, Measurement, NativeExecutor, executor_for
from flagbench.run.layout import bench_layouts
from flagbench.toolchains import get_target

HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
MICRO_C, MEMCHECK_C, MEMSWEEP_C = (HARNESS_DIR / f for f in ("micro.c", "memcheck.c", "memsweep.c"))
KINDS = ("micro", "memcpy", "memset", "memmove", "wis", "command")
MEASURES = ("time", "insns", "perf")   # perf: task-clock and page faults of each timed run
COUNT_ITERS = 1000           # micro: counted with n and 2n
COUNT_WIDTH = 10             # counted argv numbers are zero-padded to this width
DEFAULT_SIZES = (32, 100, 4096, 1048576)
DEFAULT_ALIGNMENTS = ((0, 0), (3, 1))
_FAIL_LINE = re.compile(r"^FAIL .*$", re.M)


@dataclass(frozen=True)
class Program:
    """A harness source to compile with fixed flags and link with a variant's objects."""
    source: Path
    defines: tuple[str, ...]
    name: str                                   # file name of the executable


Linker = Callable[[Any, Program, Path], Path]   # (build, program, out_dir) -> executable


def harness_cflags(compiler: str) -> list[str]:
    """Harness code is the same for every variant; keep compilers from turning its
    byte loops into calls of the very functions under test."""
    flags = ["-O2", "-fno-builtin"]
    if "clang" not in compiler:
        flags.append("-fno-tree-loop-distribute-patterns")
    return flags


def link_with_build(build, program: Program, out_dir: Path) -> Path:
    """Default linker: flagbench.build compiles the harness and links it with the variant's objects."""
    from flagbench import build as builder
    target, compiler = build.cell.target, build.cell.compiler
    objects = builder.compile_sources(target, compiler, [program.source],
                                      [*harness_cflags(compiler), *program.defines], out_dir)
    # A layout relink (run/layout.py) puts its padding before everything, harness included.
    leading = tuple(getattr(build, "leading_objects", ()))
    return builder.link_executable(target, compiler, [*leading, *objects, *build.objects],
                                   out_dir / program.name)


def _pad(n: int) -> str:
    return f"{n:0{COUNT_WIDTH}d}"


def _failure(m: Measurement) -> str | None:
    if m.ok:
        return None
    fail = _FAIL_LINE.search(m.stdout)
    return f"{m.failure}: {fail.group(0)}" if fail else m.failure


def _need(m: Measurement, *keys: str) -> str | None:
    missing = [k for k in keys if k not in m.metrics]
    return f"garbage output: no {', '.join(missing)} in {m.stdout[:80]!r}" if missing else None


def _counter_deltas(small: Measurement, large: Measurement) -> dict[str, float]:
    """Exact counters (insns, loads_W, stores_W by width, and their totals) of the
    larger run minus the smaller."""
    deltas = {k: large.metrics[k] - small.metrics.get(k, 0.0) for k in large.metrics
              if k == "insns" or k.startswith(("loads_", "stores_"))}
    for access in ("loads", "stores"):
        widths = [v for k, v in deltas.items() if k.startswith(access + "_")]
        if widths:
            deltas[access] = sum(widths)
    return deltas


class _Context:
    def __init__(self, bench: dict, builds: Sequence, root: Path, workdir: Path, link: Linker,
                 notes: list[str]):
        self.bench, self.root, self.workdir, self.link, self.notes = bench, root, workdir, link, notes
        self.name = bench["name"]
        self.kind = bench["kind"]
        self.timeout = float(bench.get("timeout", 300))
        self.samples = int(bench.get("samples", 10))
        self.warmup = int(bench.get("warmup", 1))
        measures = bench.get("metrics", ["time", "insns"])
        if not isinstance(measures, list) or not measures or set(measures) - set(MEASURES):
            raise UserError(f"bench {self.name}: metrics must be a list of {', '.join(MEASURES)}")
        self.measures = measures
        self.perf = "perf" in measures and self._perf_here()
        wanted = bench.get("targets")
        self.builds = [b for b in builds if wanted is None or b.cell.target in wanted]
        self.single_variant = len({b.cell.variant.name for b in builds}) == 1
        self.native = None
        self.calibrated: dict[tuple, int] = {}   # one calibration per bench x target x compiler x point
        self.layouts, self.layout_variants = bench_layouts(bench, [b.cell.variant.name for b in builds])

    def native_executor(self) -> NativeExecutor:
        if self.native is None:
            self.native = NativeExecutor(perf=self.perf)
        return self.native

    def _perf_here(self) -> bool:
        from flagbench.run.executors import perf_available
        if not perf_available():
            self.note("perf stat -e task-clock,page-faults does not work here (apt-get install linux-perf; "
                      "kernel.perf_event_paranoid): no perf metrics")
        return perf_available()

    def measures_for(self, target: str) -> list[str]:
        spec = get_target(target)
        if not spec.runnable:
            self.note(f"{target}: cannot run here (objects only); no {self.name} measurements")
            return []
        out = []
        for m in self.measures:
            if m == "perf":
                continue                  # rides on the timed runs
            if m == "time" and (target != HOST_TARGET or platform.machine() != HOST_TARGET):
                self.note(f"{target}: time is measured natively on {HOST_TARGET} only; insns instead")
                continue
            out.append(m)
        return out

    def note(self, text: str) -> None:
        text = f"bench {self.name}: {text}"
        if text not in self.notes:
            self.notes.append(text)

    def program(self, build, program: Program, column: str | None = None) -> Path:
        column = column or build.cell.variant.name
        out = self.workdir / self.name / column / build.cell.target / build.cell.compiler
        out.mkdir(parents=True, exist_ok=True)
        return self.link(build, program, out)

    def cell(self, build, column: str, params: dict, **kw) -> BenchCell:
        prov = {"variant": build.cell.variant.name, "cflags": list(build.cflags),
                "tools": dict(getattr(build, "tools", {}) or {}), "bench_kind": self.kind}
        prov.update(kw.pop("provenance", {}))
        kw.setdefault("samples", self.samples)
        kw.setdefault("warmup", self.warmup)
        return BenchCell(bench=self.name, variant=column, target=build.cell.target,
                         compiler=build.cell.compiler, params=params, provenance=prov, **kw)


def cells_for_bench(bench: dict, builds: Sequence, *, root: Path, workdir: Path,
                    link: Linker = link_with_build, notes: list[str] | None = None) -> list[BenchCell]:
    """The engine cells of one [[bench]] table over the experiment's builds; harness
    programs are built here, so a function that does not exist fails before any run."""
    if not isinstance(bench.get("name"), str) or not bench["name"]:
        raise UserError("every [[bench]] needs a name")
    if bench.get("kind") not in KINDS:
        raise UserError(f"bench {bench['name']}: kind must be one of {', '.join(KINDS)}, "
                        f"not {bench.get('kind')!r}")
    ctx = _Context(bench, builds, Path(root), Path(workdir), link, notes if notes is not None else [])
    make = {"micro": _micro, "wis": _wis, "command": _command}.get(ctx.kind, _memfn)
    return [cell for build in ctx.builds for cell in make(ctx, build)]


# -- micro -----------------------------------------------------------------------------------

def _micro(ctx: _Context, build) -> list[BenchCell]:
    function = ctx.bench.get("function")
    if not isinstance(function, str) or not re.fullmatch(r"[A-Za-z_]\w*", function):
        raise UserError(f"bench {ctx.name}: kind micro needs function = \"name_of_a_loop\"")
    measures = ctx.measures_for(build.cell.target)
    if not measures:
        return []
    program = Program(MICRO_C, (f"-DFB_FN={function}",), f"micro-{function}")
    variant = build.cell.variant.name
    exe = ctx.program(build, program)
    cells = [_micro_cell(ctx, build, exe, variant, function, measures, {})]
    if variant in ctx.layout_variants and "time" in measures:
        from flagbench.run.layout import layout_column, plan, relink, symbol_address
        cells[0].provenance["function_address"] = symbol_address(exe, function)   # the unshifted layout
        for layout in plan(ctx.layouts, len(build.objects)):
            column = layout_column(variant, layout.index)
            exe = ctx.program(relink(build, layout, ctx.workdir), program, column)
            address = symbol_address(exe, function)
            cells.append(_micro_cell(ctx, build, exe, column, function, ["time"],
                                     {**layout.describe(), "function_address": address}))
    return cells


def _micro_cell(ctx: _Context, build, exe: Path, column: str, function: str, measures: list[str],
                provenance: dict) -> BenchCell:
    target, iters = build.cell.target, int(ctx.bench.get("count_iters", COUNT_ITERS))
    calib_key = (target, build.cell.compiler)

    def timed(emit: Emit) -> str | None:
        native = ctx.native_executor()
        n = ctx.calibrated.get(calib_key)
        if n is None:   # the first cell of this target measured sets n for every variant
            m = native.measure([str(exe)], target=target, timeout=ctx.timeout)
            if _failure(m) or _need(m, "iters"):
                return _failure(m) or _need(m, "iters")
            n = ctx.calibrated[calib_key] = int(m.metrics["iters"])
        m = native.measure([str(exe), "t", str(n)], target=target, timeout=ctx.timeout)
        if _failure(m) or _need(m, "iters", "ns"):
            return _failure(m) or _need(m, "iters", "ns")
        emit("ns_per_iter", m.metrics["ns"] / m.metrics["iters"], "ns")
        emit_perf(m, emit)
        return None

    def counted(emit: Emit) -> str | None:
        executor = executor_for(target, "insns")
        small = executor.measure([str(exe), "c", _pad(iters)], target=target, timeout=ctx.timeout)
        large = executor.measure([str(exe), "c", _pad(2 * iters)], target=target, timeout=ctx.timeout)
        for m in (small, large):
            if _failure(m) or _need(m, "insns"):
                return _failure(m) or _need(m, "insns")
        for metric, delta in _counter_deltas(small, large).items():
            emit(f"{metric}_per_iter", delta / iters, metric.split("_")[0])
        return None

    return ctx.cell(build, column, {},
                    timed=timed if "time" in measures else None,
                    counted=counted if "insns" in measures else None,
                    executor="native", count_executor=_count_executor_name(target),
                    timed_metric="ns_per_iter", counted_metric="insns_per_iter",
                    provenance={"function": function, "count_iters": iters,
                                **provenance})


def emit_perf(m: Measurement, emit: Emit) -> None:
    """perf's software events of a timed run, when it ran under perf (whole process: harness start-up too)."""
    if "task_clock_ns" in m.metrics:
        emit("task_clock_ms", m.metrics["task_clock_ns"] / 1e6, "ms")
    if "page_faults" in m.metrics:
        emit("page_faults", m.metrics["page_faults"], "faults")


def _count_executor_name(target: str) -> str:
    return "callgrind" if target == HOST_TARGET else f"qemu-{target}"


# -- memcpy / memset / memmove ----------------------------------------------------------------

def _memfn(ctx: _Context, build) -> list[BenchCell]:
    kind, target = ctx.kind, build.cell.target
    functions = ctx.bench.get("functions") or ([ctx.bench["function"]] if "function" in ctx.bench else None)
    if not functions or not all(isinstance(f, str) and re.fullmatch(r"[A-Za-z_]\w*", f) for f in functions):
        raise UserError(f"bench {ctx.name}: kind {kind} needs functions = [\"name\", ..., \"libc\"]")
    sizes = [int(s) for s in ctx.bench.get("sizes", DEFAULT_SIZES)]
    aligns = [tuple(int(x) for x in a) for a in ctx.bench.get("alignments", DEFAULT_ALIGNMENTS)]
    if any(s < 1 or s > 16 << 20 for s in sizes) or any(len(a) != 2 or not 0 <= min(a) <= max(a) <= 63
                                                         for a in aligns):
        raise UserError(f"bench {ctx.name}: sizes must be 1..16777216 and alignments [dst, src] pairs in 0..63")
    if kind == "memset":
        aligns = list(dict.fromkeys((d, 0) for d, _ in aligns))
    measures = ctx.measures_for(target)
    if not measures:
        return []
    cells = []
    defined = _defined_symbols(build)
    for function in functions:
        if function == "libc" and not get_target(target).static_libc:
            ctx.note(f"{target}: no C library here (freestanding runtime); libc {kind} skipped")
            continue
        if function != "libc" and function not in defined:
            if not any(function in _defined_symbols(b) for b in ctx.builds):
                raise UserError(f"bench {ctx.name}: no object of the experiment defines {function}")
            ctx.note(f"{target}/{build.cell.compiler}: {function} is not built for this target; skipped")
            continue
        defines = ({"memset": ("-DFB_KIND_MEMSET",), "memmove": ("-DFB_KIND_MEMMOVE",)}.get(kind, ())
                   + (("-DFB_LIBC",) if function == "libc" else (f"-DFB_FN={function}",)))
        checker = ctx.program(build, Program(MEMCHECK_C, defines, f"memcheck-{kind}-{function}"))
        sweeper = ctx.program(build, Program(MEMSWEEP_C, defines, f"memsweep-{kind}-{function}"))
        check = _memcheck(ctx, checker, target)
        column = function if ctx.single_variant else f"{build.cell.variant.name}+{function}"
        for dalign, salign in aligns:
            for size in sizes:
                params = {"dalign": dalign, **({} if kind == "memset" else {"salign": salign}), "size": size}
                point = (size, dalign, salign)
                cells.append(ctx.cell(
                    build, column, params, check=check,
                    timed=_sweep_timed(ctx, sweeper, target, build.cell.compiler, point) if "time" in measures else None,
                    counted=_sweep_counted(ctx, sweeper, target, point) if "insns" in measures else None,
                    executor="native", count_executor=_count_executor_name(target),
                    timed_metric="MB/s", counted_metric="insns_per_byte",
                    provenance={"function": function, "memcheck": str(checker)}))
    return cells


_SYMBOLS: dict[tuple, frozenset[str]] = {}


def _defined_symbols(build) -> frozenset[str]:
    """Code symbols defined in a build's objects (an implementation may exist on one target
    only: rep movsb on x86_64), read with the size stage's ELF reader."""
    from flagbench import elf
    key = tuple(build.objects)
    if key not in _SYMBOLS:
        _SYMBOLS[key] = frozenset(name for obj in build.objects
                                  for name, letter, _ in elf.sized_symbols_small(elf.open_input(str(obj)))
                                  if letter in "TtWi")
    return _SYMBOLS[key]


def _memcheck(ctx: _Context, exe: Path, target: str) -> Callable[[], str | None]:
    """The correctness gate of one implementation, run once however many cells share it."""
    verdict: list[str | None] = []

    def check() -> str | None:
        if not verdict:
            argv = [str(exe)]
            qemu = get_target(target).qemu
            if target != HOST_TARGET:
                runner = shutil.which(qemu) if qemu else None
                if runner is None:
                    return f"running {target} programs needs {qemu}: apt-get install qemu-user"
                argv = [runner, *argv]
            m = NativeExecutor(cpu=None).measure(argv, timeout=max(ctx.timeout, 600))
            reason = _failure(m) or _need(m, "cases")
            verdict.append(f"memcheck: {reason}" if reason else None)
        return verdict[0]
    return check


def _sweep_timed(ctx: _Context, exe: Path, target: str, compiler: str, point: tuple[int, int, int]):
    size, d, s = point
    key = f"size{size}.dalign{d}" + ("" if ctx.kind == "memset" else f".salign{s}")

    def timed(emit: Emit) -> str | None:
        native = ctx.native_executor()
        reps = ctx.calibrated.get((target, compiler, point))
        if reps is None:   # calibrate: the batch that takes >= 10 ms, shared by every column
            m = native.measure([str(exe), "t", str(size), str(d), str(s), "0"], target=target, timeout=ctx.timeout)
            if _failure(m) or _need(m, f"reps.{key}"):
                return _failure(m) or _need(m, f"reps.{key}")
            reps = ctx.calibrated[(target, compiler, point)] = int(m.metrics[f"reps.{key}"])
        m = native.measure([str(exe), "t", str(size), str(d), str(s), str(reps)], target=target,
                           timeout=ctx.timeout)
        if _failure(m) or _need(m, f"ns.{key}", f"reps.{key}"):
            return _failure(m) or _need(m, f"ns.{key}", f"reps.{key}")
        ns = max(m.metrics[f"ns.{key}"], 1.0)
        emit("MB/s", size * m.metrics[f"reps.{key}"] * 1e3 / ns, "MB/s")
        return None
    return timed


def _sweep_counted(ctx: _Context, exe: Path, target: str, point: tuple[int, int, int]):
    size, d, s = point
    reps = max(1, min(64, 65536 // size))

    def counted(emit: Emit) -> str | None:
        executor = executor_for(target, "insns")
        runs = [executor.measure([str(exe), "c", _pad(size), _pad(d), _pad(s), _pad(r)], target=target,
                                 timeout=ctx.timeout) for r in (reps, 2 * reps)]
        for m in runs:
            if _failure(m) or _need(m, "insns"):
                return _failure(m) or _need(m, "insns")
        delta = _counter_deltas(*runs)["insns"]
        emit("insns_per_byte", delta / (reps * size), "insns")
        emit("insns_per_call", delta / reps, "insns")
        return None
    return counted


# -- will-it-scale -----------------------------------------------------------------------------

def _compile_flags(build) -> list[str]:
    """The variant's compile flags without the object-file plumbing."""
    out, skip = [], False
    for flag in build.cflags:
        if skip or flag in ("-c", "-o"):
            skip = flag == "-o"
            continue
        out.append(flag)
    return out


def _wis(ctx: _Context, build) -> list[BenchCell]:
    from flagbench.run.wis import MODES, run_wis
    target = build.cell.target
    if target != HOST_TARGET:
        ctx.note(f"{target}: will-it-scale testcases run on {HOST_TARGET} only")
        return []
    testcase = ctx.bench.get("testcase")
    if not isinstance(testcase, str):
        raise UserError(f"bench {ctx.name}: kind wis needs testcase = \"file.c\"")
    path = (ctx.root / testcase).resolve()
    if not path.is_file():
        raise UserError(f"bench {ctx.name}: testcase {path} does not exist")
    tasks = [int(n) for n in ctx.bench.get("tasks", [1])]
    modes = list(ctx.bench.get("modes", MODES))
    duration = float(ctx.bench.get("duration", 5.0))
    warmup = float(ctx.bench.get("warmup_seconds", 2.0))
    if set(modes) - set(MODES) or not tasks or min(tasks) < 1:
        raise UserError(f"bench {ctx.name}: modes are {', '.join(MODES)}; tasks positive integers")
    cflags = _compile_flags(build)

    def job(mode: str, n: int):
        def timed(emit: Emit) -> str | None:
            def on_sample(_mode, _tasks, _index, per_second, is_warmup):
                if not is_warmup:
                    emit("per_second", per_second, "iter/s")
            result, = run_wis(path, tasks=[n], modes=[mode], duration=duration, warmup=warmup,
                              cflags=cflags, compiler=build.cell.compiler, on_sample=on_sample)
            return result["failure"]
        return timed

    return [ctx.cell(build, build.cell.variant.name, {"mode": mode, "tasks": n}, timed=job(mode, n),
                     executor="wis", timed_metric="per_second", per_invocation=max(1, round(duration)),
                     samples=int(ctx.bench.get("samples", 1)), warmup=0,
                     provenance={"testcase": str(path), "duration": duration, "warmup_seconds": warmup})
            for mode in modes for n in tasks]


# -- command ------------------------------------------------------------------------------------

def fill_command(command: Sequence[str], values: dict[str, list[str]]) -> list[str]:
    """Placeholders per variant: an argument that is exactly "{cflags}" becomes one
    argument per flag; inside a longer argument the flags are joined by spaces.

    >>> fill_command(["make", "-C", "{dir}", "CFLAGS={cflags}", "{cflags}"],
    ...              {"dir": ["/b"], "cflags": ["-O2", "-mfoo"]})
    ['make', '-C', '/b', 'CFLAGS=-O2 -mfoo', '-O2', '-mfoo']
    """
    out = []
    for arg in command:
        whole = re.fullmatch(r"\{(\w+)\}", arg)
        if whole and whole.group(1) in values:
            out += values[whole.group(1)]
            continue
        out.append(re.sub(r"\{(\w+)\}", lambda m: " ".join(values[m.group(1)]) if m.group(1) in values
                          else m.group(0), arg))
    return out


def _command(ctx: _Context, build) -> list[BenchCell]:
    command = ctx.bench.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise UserError(f"bench {ctx.name}: kind command needs command = [\"program\", \"arg\", ...]")
    target, compiler = build.cell.target, build.cell.compiler
    try:
        cc = get_target(target).compiler_argv(compiler)
    except LookupError as e:
        raise UserError(f"bench {ctx.name}: {e}") from None
    argv = fill_command(command, {"dir": [str(build.dir)], "cc": cc, "cflags": _compile_flags(build),
                                  "target": [target], "variant": [build.cell.variant.name],
                                  "root": [str(ctx.root)]})
    executor = NativeExecutor(cpu=None, parse_stdout=False, perf=ctx.perf)   # a build may use every CPU

    def timed(emit: Emit) -> str | None:
        m = executor.measure(argv, timeout=ctx.timeout)
        if not m.ok:
            return m.failure + (f": {m.stderr.strip().splitlines()[-1]}" if m.stderr.strip() else "")
        emit("seconds", m.metrics["wall_ns"] / 1e9, "s")
        emit_perf(m, emit)
        return None

    return [ctx.cell(build, build.cell.variant.name, {}, timed=timed, executor="native-command",
                     timed_metric="seconds", provenance={"command": argv})]


def column_order(benches: Sequence[dict], variants: Sequence[str]) -> list[str]:
    """Report columns in file order: variants, then each memcpy-like bench's functions.

    >>> column_order([{"kind": "memcpy", "functions": ["old", "new"]}], ["O2"])
    ['O2', 'old', 'new']
    >>> column_order([{"kind": "memcpy", "functions": ["old", "new"]}], ["a", "b"])
    ['a', 'b', 'a+old', 'a+new', 'b+old', 'b+new']
    """
    order = list(variants)
    for bench in benches:
        if bench.get("kind") in ("memcpy", "memset", "memmove"):
            functions = bench.get("functions") or [bench.get("function")]
            names = functions if len(variants) == 1 else [f"{v}+{f}" for v in variants for f in functions]
            order += [n for n in names if n not in order]
    return order
