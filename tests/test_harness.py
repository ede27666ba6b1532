"""The benchmark harnesses (micro, memcheck, memsweep) built with real compilers and run
natively, under callgrind and under qemu-user; run/kinds/ turn them into samples.

Everything is compiled with flagbench.build.compile_sources and linked the way a run
links it (run/harness.link_with_build: build.link_executable with the harness runtime,
glibc -static for x86_64 and aarch64, the freestanding runtime for loongarch64).
The loops whose instruction counts are asserted are written in assembler, so the
expected numbers come from the source here, not from the code under test.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import bench
from flagbench import build as builder
from flagbench.errors import UserError
from flagbench.run import harness
from flagbench.run.harness import Program, link_with_build
from flagbench.run.executors import NativeExecutor, QemuExecutor, parse_metrics
from flagbench.run.kinds import cells_for_bench as kind_cells
from flagbench.toolchains import get_target

DATA = Path(__file__).resolve().parent / "data"

COMPILER = {"x86_64": "gcc", "aarch64": "gcc", "loongarch64": "clang"}
QEMU = {"aarch64": "qemu-aarch64", "loongarch64": "qemu-loongarch64"}

# Five instructions an iteration (three nops, decrement, branch), n = 0 does no turn.
SPIN5 = {
    "x86_64": "spin5:\n test %rdi, %rdi\n jz 2f\n1: nop\n nop\n nop\n dec %rdi\n jnz 1b\n2: mov %rdi, %rax\n ret\n",
    "aarch64": "spin5:\n cbz x0, 2f\n1: nop\n nop\n nop\n subs x0, x0, #1\n b.ne 1b\n2: ret\n",
    "loongarch64": "spin5:\n beqz $a0, 2f\n1: nop\n nop\n nop\n addi.d $a0, $a0, -1\n bnez $a0, 1b\n2: jr $ra\n",
}
# A byte copy of four instructions a byte (load, store, count, branch).
COPY4 = {
    "aarch64": ("copy4:\n cbz x2, 2f\n mov x3, x0\n1: ldrb w4, [x1], #1\n strb w4, [x3], #1\n"
                " subs x2, x2, #1\n b.ne 1b\n2: ret\n"),
    "loongarch64": ("copy4:\n beqz $a2, 2f\n move $t0, $a0\n1: ld.b $t1, $a1, 0\n st.b $t1, $t0, 0\n"
                    " addi.d $a1, $a1, 1\n addi.d $t0, $t0, 1\n addi.d $a2, $a2, -1\n bnez $a2, 1b\n"
                    "2: jr $ra\n"),   # six here: no post-increment addressing
}
COPY_PER_BYTE = {"aarch64": 4, "loongarch64": 6}


def need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (see scripts/install-deps)")


@pytest.fixture(autouse=True)
def cache(module_cache):
    """One object cache for this module's tests, not the working directory's."""


def cells_for_bench(table: dict, builds, **kw):
    """The kinds' cells of a bench given as a [[bench]]-shaped dict (typed first, as spec does)."""
    return kind_cells(bench(table, root=kw["root"]), builds, **kw)


def make_build(tmp: Path, target: str, variant: str, sources: list[Path], cflags=()) -> SimpleNamespace:
    """A variant's objects, duck-typed as build.Build (what the bench kinds read of it)."""
    compiler = COMPILER[target]
    need(get_target(target).compiler_argv(compiler)[0], *([QEMU[target]] if target in QEMU else []))
    out = tmp / "obj" / variant / target
    objects = builder.compile_sources(target, compiler, sources, ["-O2", "-fno-builtin", *cflags], out)
    cell = SimpleNamespace(variant=SimpleNamespace(name=variant), target=target, compiler=compiler)
    return SimpleNamespace(cell=cell, objects=tuple(objects), cflags=("-O2", *cflags), tools={}, dir=out)


def asm_source(tmp: Path, name: str, text: str) -> Path:
    path = tmp / f"{name}.s"
    kind = "%function" if "x0" in text else "@function"   # '@' starts a comment in aarch64 gas
    path.write_text(f"  .text\n  .globl {name}\n  .type {name}, {kind}\n{text}  .size {name}, .-{name}\n")
    return path


def emitted(into: list):
    """An engine Emit (run/engine.py) that appends (name, unit, value): a job emits a declared
    metrics.Metric, or a name and its unit."""
    def emit(metric, value, unit=None, facts=None):
        into.append((getattr(metric, "name", metric), getattr(metric, "unit", unit), value))
    return emit


def collect(job) -> tuple[dict[str, float], str | None]:
    got: list = []
    reason = job(emitted(got))
    return {name: value for name, _, value in got}, reason


# -- micro -------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["x86_64", "aarch64", "loongarch64"])
def test_micro_counts_exact_per_iteration(target, tmp_path):
    if target == "x86_64":
        need("valgrind")
    build = make_build(tmp_path, target, "A", [asm_source(tmp_path, "spin5", SPIN5[target])])
    cell, = cells_for_bench({"name": "spin", "kind": "micro", "function": "spin5", "metrics": ["insns"]},
                            [build], root=tmp_path, workdir=tmp_path / "work")
    assert cell.timed is None and cell.key == f"A/{target}/{build.cell.compiler}"
    first, reason = collect(cell.counted)
    assert reason is None
    assert first["insns_per_iter"] == 5.0                # exact: the loop as written above
    again, _ = collect(cell.counted)
    assert again == first                                # identical run to run
    if target != "x86_64":                               # qemu plugin: nops are no memory access
        assert first["loads_per_iter"] == first["stores_per_iter"] == 0


def test_micro_raw_counts_identical_on_repeat(tmp_path):
    build = make_build(tmp_path, "aarch64", "A", [asm_source(tmp_path, "spin5", SPIN5["aarch64"])])
    exe = link_with_build(build, Program(harness.MICRO_C, ("-DFB_FN=spin5",), "micro"), tmp_path)
    qemu = QemuExecutor("aarch64")
    runs = [qemu.measure([str(exe), "c", "0000004000"], target="aarch64").metrics for _ in range(3)]
    assert runs[0] == runs[1] == runs[2] and runs[0]["insns"] > 4000 * 5


def test_micro_timed_natively(tmp_path):
    build = make_build(tmp_path, "x86_64", "A", [asm_source(tmp_path, "spin5", SPIN5["x86_64"])])
    exe = link_with_build(build, Program(harness.MICRO_C, ("-DFB_FN=spin5",), "micro"), tmp_path)
    calibrated = NativeExecutor().measure([str(exe)])
    assert calibrated.ok
    iters = int(calibrated.metrics["iters"])
    assert iters & (iters - 1) == 0                      # doubled from 1
    fixed = NativeExecutor().measure([str(exe), "t", "12345"])
    assert fixed.metrics["iters"] == 12345 and "ns" in fixed.metrics
    bad = NativeExecutor().measure([str(exe), "x", "1"])
    assert bad.failure == "exit status 2"

    cell, = cells_for_bench({"name": "spin", "kind": "micro", "function": "spin5", "metrics": ["time"]},
                            [build], root=tmp_path, workdir=tmp_path / "work")
    values, reason = collect(cell.timed)
    assert reason is None and values["ns_per_iter"] > 0


def test_micro_time_is_host_only(tmp_path):
    build = make_build(tmp_path, "aarch64", "A", [asm_source(tmp_path, "spin5", SPIN5["aarch64"])])
    notes: list[str] = []
    cell, = cells_for_bench({"name": "spin", "kind": "micro", "function": "spin5"}, [build], root=tmp_path,
                            workdir=tmp_path / "w", notes=notes)
    assert cell.timed is None and cell.counted is not None
    assert any("natively on x86_64 only" in n for n in notes)


def test_micro_missing_function_is_bad_input(tmp_path):
    build = make_build(tmp_path, "x86_64", "A", [asm_source(tmp_path, "spin5", SPIN5["x86_64"])])
    with pytest.raises(UserError, match="kind micro needs function"):
        cells_for_bench({"name": "x", "kind": "micro"}, [build], root=tmp_path, workdir=tmp_path)
    with pytest.raises(UserError, match="unknown kind 'nope'"):
        cells_for_bench({"name": "x", "kind": "nope"}, [build], root=tmp_path, workdir=tmp_path)


# -- memcheck ------------------------------------------------------------------------------------

def memcheck_reason(tmp_path, target, kind, functions):
    build = make_build(tmp_path, target, "O2", [DATA / "memcpy_good.c", DATA / "memcpy_broken.c"],
                       ["-fno-tree-loop-distribute-patterns"] if target != "loongarch64" else [])
    cells = cells_for_bench({"name": kind, "kind": kind, "functions": functions, "sizes": [64],
                             "alignments": [[0, 0]], "metrics": ["insns"]},
                            [build], root=tmp_path, workdir=tmp_path / "work")
    return {c.variant: c.check() for c in cells}


@pytest.mark.parametrize("target", ["x86_64", "aarch64", "loongarch64"])
def test_memcheck_passes_correct_implementations(target, tmp_path):
    reasons = memcheck_reason(tmp_path, target, "memcpy", ["good_memcpy"])
    assert reasons == {"good_memcpy": None}


def test_memcheck_passes_correct_memset_memmove_and_libc(tmp_path):
    assert memcheck_reason(tmp_path, "x86_64", "memmove", ["good_memmove", "libc"]) == \
        {"good_memmove": None, "libc": None}
    assert memcheck_reason(tmp_path, "x86_64", "memset", ["good_memset", "libc"]) == \
        {"good_memset": None, "libc": None}


@pytest.mark.parametrize("kind, function, expected", [
    ("memcpy", "memcpy_overrun", "dst_align 0 src_align 0 len 0: byte 0 expected"),
    ("memcpy", "memcpy_one_alignment", "dst_align 5 src_align 17 len 8: byte 7 expected"),
    ("memcpy", "memcpy_stray_before", "dst_align 0 src_align 0 len 41: byte -1 expected"),
    ("memcpy", "memcpy_bad_return", "dst_align 0 src_align 0 len 1: returned dst+1"),
    ("memmove", "memmove_forward", "overlap dst-src=+1 dst_align 1 src_align 0 len 2: byte 1 expected"),
    ("memset", "memset_short", "dst_align 3 len 16: byte 15 expected 0xc3 got"),
])
def test_memcheck_catches_broken_implementations(kind, function, expected, tmp_path):
    reason = memcheck_reason(tmp_path, "x86_64", kind, [function])[function]
    assert reason.startswith(f"memcheck: exit status 1: FAIL {function}: {expected}")


def test_memcheck_catches_broken_under_qemu(tmp_path):
    reason = memcheck_reason(tmp_path, "loongarch64", "memcpy", ["memcpy_one_alignment"])
    assert "FAIL memcpy_one_alignment: dst_align 5 src_align 17 len 8: byte 7" in reason["memcpy_one_alignment"]


def test_memcheck_stray_byte_got_value_is_reported(tmp_path):
    """The byte before dst was 0-written by the broken copy: "got 0x00" is what memory held."""
    reason = memcheck_reason(tmp_path, "x86_64", "memcpy", ["memcpy_stray_before"])["memcpy_stray_before"]
    assert reason.endswith("got 0x00")


def test_libc_skipped_on_freestanding_target(tmp_path):
    notes: list[str] = []
    build = make_build(tmp_path, "loongarch64", "O2", [DATA / "memcpy_good.c"])
    cells = cells_for_bench({"name": "m", "kind": "memcpy", "functions": ["good_memcpy", "libc"],
                             "sizes": [32], "metrics": ["insns"]}, [build], root=tmp_path,
                            workdir=tmp_path / "w", notes=notes)
    assert {c.variant for c in cells} == {"good_memcpy"}
    assert any("libc memcpy skipped" in n for n in notes)


# -- memsweep ----------------------------------------------------------------------------------

def test_memsweep_output_parses(tmp_path):
    build = make_build(tmp_path, "x86_64", "O2", [DATA / "memcpy_good.c"], ["-fno-tree-loop-distribute-patterns"])
    exe = link_with_build(build, Program(harness.MEMSWEEP_C, ("-DFB_FN=good_memcpy",), "sweep"), tmp_path)
    m = NativeExecutor().measure([str(exe), "t", "100", "3", "1", "64", "4096", "0", "0", "0"])
    assert m.ok, m.stdout
    assert m.metrics["reps.size100.dalign3.salign1"] == 64 and m.metrics["ns.size100.dalign3.salign1"] > 0
    assert m.metrics["reps.size4096.dalign0.salign0"] >= 1
    assert set(m.metrics) == {"wall_ns", "reps.size100.dalign3.salign1", "ns.size100.dalign3.salign1",
                              "reps.size4096.dalign0.salign0", "ns.size4096.dalign0.salign0"}
    metrics, garbage = parse_metrics(m.stdout)
    assert garbage is None and len(metrics) == 4
    assert NativeExecutor().measure([str(exe), "t", "100", "99", "0", "1"]).failure == "exit status 2"

    cells = cells_for_bench({"name": "copy", "kind": "memcpy", "functions": ["good_memcpy"], "sizes": [32, 4096],
                             "alignments": [[0, 0], [3, 1]], "metrics": ["time"]},
                            [build], root=tmp_path, workdir=tmp_path / "w")
    assert [c.key for c in cells] == [f"good_memcpy/x86_64/gcc:dalign={d},salign={s},size={n}"
                                      for d, s in ((0, 0), (3, 1)) for n in (32, 4096)]
    values, reason = collect(cells[3].timed)
    assert reason is None and values["MB/s"] > 0


@pytest.mark.parametrize("target", ["aarch64", "loongarch64"])
def test_memsweep_counts_per_byte_exact(target, tmp_path):
    build = make_build(tmp_path, target, "O2", [asm_source(tmp_path, "copy4", COPY4[target])])
    cells = cells_for_bench({"name": "copy", "kind": "memcpy", "functions": ["copy4"], "sizes": [32, 4096],
                             "alignments": [[3, 1]], "metrics": ["insns"]},
                            [build], root=tmp_path, workdir=tmp_path / "w")
    small, reason_small = collect(cells[0].counted)
    large, reason_large = collect(cells[1].counted)
    assert reason_small is None and reason_large is None
    # Per call: a fixed cost (harness loop, entry, exit) plus the loop's instructions a byte.
    assert large["insns_per_call"] - small["insns_per_call"] == COPY_PER_BYTE[target] * (4096 - 32)
    assert large["insns_per_byte"] == large["insns_per_call"] / 4096
    assert collect(cells[0].counted)[0] == small


# -- wis and command ---------------------------------------------------------------------------

def test_wis_bench_runs_the_driver_per_variant(tmp_path):
    need("gcc")
    build = make_build(tmp_path, "x86_64", "O2", [DATA / "memcpy_good.c"])
    cells = cells_for_bench({"name": "getppid", "kind": "wis", "testcase": "wis_getppid.c", "tasks": [1],
                             "modes": ["threads"], "duration": 1, "warmup_seconds": 0},
                            [build], root=DATA, workdir=tmp_path / "w")
    cell, = cells
    assert cell.key == "O2/x86_64/gcc:mode=threads,tasks=1" and cell.warmup == 0
    got: list = []
    reason = cell.timed(emitted(got))
    assert reason is None and [(m, u, v > 0) for m, u, v in got] == [("per_second", "iter/s", True)]
    with pytest.raises(UserError, match="no such C file"):
        cells_for_bench({"name": "w", "kind": "wis", "testcase": "nope.c"}, [build], root=DATA,
                        workdir=tmp_path)


def test_command_bench_fills_placeholders_and_times(tmp_path):
    need("gcc")
    build = make_build(tmp_path, "x86_64", "O2", [DATA / "memcpy_good.c"], ["-fno-tree-loop-distribute-patterns"])
    cell, = cells_for_bench({"name": "cc", "kind": "command",
                             "command": ["{cc}", "{cflags}", "-c", "-o", "{dir}/again.o", str(DATA / "memcpy_good.c")]},
                            [build], root=tmp_path, workdir=tmp_path / "w")
    got: list = []
    assert cell.timed(emitted(got)) is None
    assert [(m, u) for m, u, _ in got] == [("seconds", "s")] and (build.dir / "again.o").is_file()
    assert cell.provenance["command"][:4] == ["gcc", "-O2", "-fno-tree-loop-distribute-patterns", "-c"]
    failing, = cells_for_bench({"name": "cc", "kind": "command", "command": ["gcc", "/nonexistent.c"]},
                               [build], root=tmp_path, workdir=tmp_path / "w")
    assert failing.timed(lambda *a: None).startswith("exit status 1: ")
