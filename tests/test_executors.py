"""Executors run real host binaries: exact callgrind counts, failures by name, no time asserts."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from flagbench.errors import UserError
from flagbench.run.executors import (CallgrindExecutor, NativeExecutor, QemuExecutor,
                                     executor_for, parse_metrics, perf_available)

PROGRAM = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    if (!strcmp(mode, "segv")) *(volatile int *)0 = 1;
    if (!strcmp(mode, "bus")) raise(SIGBUS);
    if (!strcmp(mode, "ill")) __builtin_trap();
    if (!strcmp(mode, "hang")) for (;;) pause();
    if (!strcmp(mode, "exit3")) return 3;
    if (!strcmp(mode, "garbage")) { puts("hello world, not a metric"); return 0; }
    if (!strcmp(mode, "cpus")) {
        cpu_set_t set;
        sched_getaffinity(0, sizeof set, &set);
        printf("cpus %d\n", CPU_COUNT(&set));
        return 0;
    }
    if (!strcmp(mode, "env")) { printf("env_count %d\n", (int)(getenv("HOME") != 0)); return 0; }
    if (!strcmp(mode, "environ")) {
        extern char **environ;
        int n = 0;
        while (environ[n]) n++;
        printf("env_vars %d\n", n);
        return 0;
    }
    volatile unsigned long sum = 0;
    for (unsigned long i = 0; i < 100000; i++) sum += i;
    printf("# a comment line\niterations 100000\nns_per_iter 1.5\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("apt-get install gcc")
    d = tmp_path_factory.mktemp("exe")
    (d / "p.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(d / "p"), str(d / "p.c")], check=True)
    return d / "p"


def test_native_parses_metrics_and_times(program):
    m = NativeExecutor().measure([str(program)], target="x86_64")
    assert m.failure is None
    assert m.metrics["iterations"] == 100000 and m.metrics["ns_per_iter"] == 1.5
    assert "wall_ns" in m.metrics  # a value is there; its size is never asserted


def test_fixed_environment(program, monkeypatch):
    monkeypatch.setenv("HOME", "/root")  # set here, it must not reach the program
    assert NativeExecutor().measure([str(program), "env"]).metrics["env_count"] == 0


def test_native_pins_to_one_cpu(program):
    assert NativeExecutor().measure([str(program), "cpus"]).metrics["cpus"] == 1
    assert NativeExecutor(cpu=None).measure([str(program), "cpus"]).metrics["cpus"] >= 1


@pytest.mark.parametrize("mode, failure", [
    ("segv", "SIGSEGV"), ("bus", "SIGBUS"), ("ill", "SIGILL"), ("exit3", "exit status 3"),
])
def test_native_failures_are_recorded(program, mode, failure):
    m = NativeExecutor().measure([str(program), mode], timeout=30)
    assert m.failure == failure


def test_garbage_output_is_a_failure(program):
    m = NativeExecutor().measure([str(program), "garbage"])
    assert m.failure and m.failure.startswith("garbage output:") and "hello world" in m.failure
    assert NativeExecutor(parse_stdout=False).measure([str(program), "garbage"]).failure is None


def test_hang_is_killed_as_timeout(program):
    m = NativeExecutor().measure([str(program), "hang"], timeout=0.5)
    assert m.failure == "timeout after 0.5 s"


def test_callgrind_count_identical_on_repeat(program):
    if shutil.which("valgrind") is None:
        pytest.skip("apt-get install valgrind")
    cg = CallgrindExecutor()
    counts = [cg.measure([str(program)]).metrics for _ in range(3)]
    assert counts[0]["insns"] > 100000  # the loop alone runs 100000 iterations
    assert counts[0] == counts[1] == counts[2]
    assert counts[0]["iterations"] == 100000


def test_callgrind_records_crash_and_timeout(program):
    if shutil.which("valgrind") is None:
        pytest.skip("apt-get install valgrind")
    cg = CallgrindExecutor()
    assert cg.measure([str(program), "bus"]).failure == "SIGBUS"
    assert cg.measure([str(program), "hang"], timeout=2).failure == "timeout after 2 s"


def test_qemu_x86_64_counts_host_program(program):
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("apt-get install qemu-user")
    q = QemuExecutor("x86_64", count_memory=False)
    a, b = (q.measure([str(program)]) for _ in range(2))
    assert a.failure is None and a.metrics == b.metrics


def test_perf_events_when_available(program):
    if not perf_available():
        with pytest.raises(UserError, match="perf"):
            NativeExecutor(perf=True)
        return
    ex = NativeExecutor(perf=True)
    m = ex.measure([str(program)])
    assert m.failure is None and m.metrics["page_faults"] > 0 and "task_clock_ns" in m.metrics
    assert m.metrics["iterations"] == 100000


def test_perf_reports_every_death_and_exit_status(program):
    """perf stat forking the program lost its wait status in ~5 % of runs (its SIGCHLD handler
    races its wait4): a crash or `exit 3` came back as success. Every run must tell."""
    if not perf_available():
        pytest.skip("perf stat does not work here")
    ex = NativeExecutor(perf=True)
    for _ in range(20):
        assert ex.measure([str(program), "bus"]).failure == "SIGBUS"
        assert ex.measure([str(program), "exit3"]).failure == "exit status 3"
    segv = ex.measure([str(program), "segv"])
    assert segv.failure == "SIGSEGV" and segv.metrics["page_faults"] > 0   # counted up to the crash
    assert ex.measure([str(program), "hang"], timeout=0.5).failure == "timeout after 0.5 s"


def test_perf_runs_program_as_native_does(program, tmp_path):
    if not perf_available():
        pytest.skip("perf stat does not work here")
    ex = NativeExecutor(perf=True)
    assert NativeExecutor().measure([str(program), "environ"]).metrics["env_vars"] == 3  # PATH, LC_ALL, procs.OWNER_VAR
    assert ex.measure([str(program), "environ"]).metrics["env_vars"] == 3  # nothing added on the way
    assert ex.measure([str(program), "cpus"]).metrics["cpus"] == 1
    text = tmp_path / "notes.txt"
    text.write_text("echo not a program\n")
    text.chmod(0o755)
    with pytest.raises(UserError, match="cannot run"):
        ex.measure([str(text)])


def test_executor_for():
    assert isinstance(executor_for("x86_64", "time"), NativeExecutor)
    if shutil.which("valgrind"):
        assert isinstance(executor_for("x86_64", "insns"), CallgrindExecutor)
    if shutil.which("qemu-aarch64"):
        assert isinstance(executor_for("aarch64", "insns"), QemuExecutor)
    with pytest.raises(UserError, match="natively"):
        executor_for("aarch64", "time")
    with pytest.raises(UserError, match="cannot run"):
        executor_for("hppa64", "insns")
    with pytest.raises(UserError, match="unknown target"):
        executor_for("vax", "insns")
    with pytest.raises(UserError, match="kind"):
        executor_for("x86_64", "cycles")


def test_missing_runner_names_the_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UserError, match="apt-get install qemu-user"):
        executor_for("riscv64", "insns")
    with pytest.raises(UserError, match="apt-get install valgrind"):
        executor_for("x86_64", "insns")


def test_missing_program_is_user_error():
    with pytest.raises(UserError, match="no such program"):
        NativeExecutor().measure(["/nonexistent/prog"])


def test_parse_metrics():
    assert parse_metrics("a 1\n\n# c\nb.c 2.5e3\n") == ({"a": 1.0, "b.c": 2500.0}, None)
    assert parse_metrics("a 1\nb nan\n")[1] == "b nan"
    assert parse_metrics("a 1 2\n")[1] == "a 1 2"
