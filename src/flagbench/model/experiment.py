"""An experiment's benches modelled: each micro bench's baseline variant (A) against every
other variant (B), and each memcpy-kind bench's first implementation (A) against the others
chosen (B) at every size and alignment, on every target and compiler the experiment builds.

The programs are the ones `flagbench run` counts (harness/micro.c, harness/memsweep.c linked
with the variant's objects), run with the same fixed argv and environment. With `measure` on
x86_64, A and B are also timed here, natively, for the validation table: a measured ratio
beside the modelled one, never folded into it.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from flagbench.errors import UserError
from flagbench.model.band import Comparison, model_side
from flagbench.model.cores import NO_MODEL, cores_for
from flagbench.run.harness import MEMSWEEP_C, MICRO_C, Program, link_with_build
from flagbench.toolchains import get_target

MEASURE_ROUNDS = 11          # A B alternated this many times; the ratio's median and quartiles reported


@dataclass(frozen=True)
class Options:
    benches: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()     # memcpy kinds: B implementations (default: the second)
    cores: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()         # memcpy kinds: only these sizes
    cache: bool = True
    measure: bool = False


def _pad(n: int) -> str:
    from flagbench.run.kinds.context import pad
    return pad(n)


def model_experiment(exp, builds, opts: Options, workdir: Path, say=print) -> tuple[list[Comparison], list[str]]:
    notes: list[str] = []
    out: list[Comparison] = []
    chosen = [b for b in exp.benches if not opts.benches or b.name in opts.benches]
    for bench in chosen:
        if bench.kind not in ("micro", "memcpy"):
            notes.append(f"bench {bench.name}: kind {bench.kind} is not modelled (micro and memcpy are)")
            continue
        cells: dict[tuple[str, str], list] = {}
        for b in builds:
            if bench.runs_on(b.cell.target):
                cells.setdefault((b.cell.target, b.cell.compiler), []).append(b)
        for (target, compiler), group in cells.items():
            if not get_target(target).runnable:
                notes.append(f"{target}: objects only (no qemu-user): not modelled")
                continue
            cores = cores_for(target, list(opts.cores))
            if opts.cores and not cores and target not in NO_MODEL:
                notes.append(f"{target}: none of --core {', '.join(opts.cores)} models it; its default pair used")
                cores = cores_for(target)
            where = workdir / bench.name / target / compiler.replace("/", "_")
            where.mkdir(parents=True, exist_ok=True)
            if bench.kind == "micro":
                out += _micro(bench, target, compiler, group, cores, opts, where, say)
            else:
                out += _memcpy(bench, target, compiler, group, cores, opts, where, say, notes)
    return out, list(dict.fromkeys(notes))


def _micro(bench, target, compiler, group, cores, opts, where, say) -> list[Comparison]:
    program = Program(MICRO_C, (f"-DFB_FN={bench.function}",), f"micro-{bench.function}")
    exes = []
    for b in group:
        d = where / b.cell.variant.name
        d.mkdir(parents=True, exist_ok=True)
        exes.append((b.cell.variant.name, link_with_build(b, program, d), d))
    (a_name, a_exe, a_dir), rest = exes[0], exes[1:]
    out = []
    for b_name, b_exe, b_dir in rest:
        say(f"model {bench.name} {target}/{compiler}: {a_name} vs {b_name}")
        started = time.monotonic()
        sides = [model_side(name, target, exe, lambda k, exe=exe: [str(exe), "c", _pad(k)], bench.count_iters,
                            cores, d, bench.timeout, opts.cache) for name, exe, d in ((a_name, a_exe, a_dir),
                                                                                       (b_name, b_exe, b_dir))]
        c = Comparison(bench.name, target, compiler, *sides, cores, "iteration", time.monotonic() - started)
        if opts.measure and target == "x86_64":
            c.measured = _measure_pair(lambda exe, n: [str(exe), "t", str(n)], [str(a_exe)], a_exe, b_exe,
                                       bench.timeout, lambda m: (m["ns"] / m["iters"]), "iters")
        out.append(c)
    return out


def _memcpy(bench, target, compiler, group, cores, opts, where, say, notes) -> list[Comparison]:
    if len(bench.functions) < 2:
        notes.append(f"bench {bench.name}: one implementation, nothing to compare")
        return []
    bad_sizes = [z for z in opts.sizes if z not in bench.sizes]
    if bad_sizes:
        raise UserError(f"bench {bench.name}: no size {', '.join(map(str, bad_sizes))} "
                        f"(it has {', '.join(map(str, bench.sizes))})")
    wanted = list(opts.functions) or [bench.functions[1]]
    unknown = [f for f in wanted if f not in bench.functions]
    if unknown:
        raise UserError(f"bench {bench.name}: no implementation {', '.join(unknown)} "
                        f"(it has {', '.join(bench.functions)})")
    from flagbench.run.kinds.context import defined_symbols
    out = []
    for build in group:
        defined = defined_symbols(build)
        variant = build.cell.variant.name
        a_fn = bench.functions[0]
        exes = {}
        for fn in [a_fn, *wanted]:
            if fn == "libc" and not get_target(target).static_libc:
                notes.append(f"{target}: no C library here; libc skipped")
                continue
            if fn != "libc" and fn not in defined:
                notes.append(f"{target}/{compiler}: {fn} is not built for this target; skipped")
                continue
            defines = ("-DFB_LIBC",) if fn == "libc" else (f"-DFB_FN={fn}",)
            d = where / variant / fn
            d.mkdir(parents=True, exist_ok=True)
            exes[fn] = (link_with_build(build, Program(MEMSWEEP_C, defines, f"memsweep-memcpy-{fn}"), d), d)
        if a_fn not in exes:
            continue
        for fn in wanted:
            if fn not in exes or fn == a_fn:
                continue
            for dalign, salign in bench.alignments:
                for size in bench.sizes:
                    if opts.sizes and size not in opts.sizes:
                        continue
                    out.append(_memcpy_point(bench, target, compiler, cores, opts, exes, a_fn, fn,
                                             (size, dalign, salign), say))
    return out


def _memcpy_point(bench, target, compiler, cores, opts, exes, a_fn, b_fn, point, say) -> Comparison:
    size, d, s = point
    reps = max(1, min(64, 65536 // size))       # as run/kinds/memfn.py counts
    title = f"{bench.name} {size} {d}/{s}"
    say(f"model {title} {target}/{compiler}: {a_fn} vs {b_fn}")
    started = time.monotonic()
    sides = []
    for fn in (a_fn, b_fn):
        exe, where = exes[fn]
        argv_of = (lambda k, exe=exe: [str(exe), "c", _pad(size), _pad(d), _pad(s), _pad(k)])
        sides.append(model_side(fn, target, exe, argv_of, reps, cores, where / f"{size}.{d}.{s}",
                                bench.timeout, opts.cache))
    c = Comparison(title, target, compiler, *sides, cores, "call", time.monotonic() - started)
    if opts.measure and target == "x86_64":
        key = f"size{size}.dalign{d}.salign{s}"
        c.measured = _measure_pair(lambda exe, n: [str(exe), "t", str(size), str(d), str(s), str(n)],
                                   None, exes[a_fn][0], exes[b_fn][0], bench.timeout,
                                   lambda m: m[f"ns.{key}"] / m[f"reps.{key}"], f"reps.{key}")
    return c


def _measure_pair(argv_of, calibrate_argv, a_exe, b_exe, timeout, per_unit, count_key) -> dict:
    """A and B timed natively here, alternated MEASURE_ROUNDS times with the count that takes
    A >= 20 ms: the median ns per unit of each and the B/A ratio's median and quartiles (the
    middle half of the rounds: a shared machine's worst rounds do not set the range)."""
    from flagbench.run.executors import NativeExecutor
    native = NativeExecutor()

    def run(argv):
        m = native.measure(argv, timeout=timeout)
        if not m.ok:
            raise UserError(f"timing {Path(argv[0]).name}: {m.failure}")
        return m.metrics
    first = run(calibrate_argv or argv_of(a_exe, 0))
    n = int(first[count_key])
    a_ns, b_ns, ratios = [], [], []
    for _ in range(MEASURE_ROUNDS):
        a = per_unit(run(argv_of(a_exe, n)))
        b = per_unit(run(argv_of(b_exe, n)))
        a_ns.append(a)
        b_ns.append(b)
        ratios.append(b / a)
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return {"a_ns": statistics.median(a_ns), "b_ns": statistics.median(b_ns),
            "ratio": statistics.median(ratios), "low": q1, "high": q3, "rounds": MEASURE_ROUNDS}
