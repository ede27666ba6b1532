"""Executors: run one benchmark program once and say what it measured.

Three ways to measure: time on a real machine (NativeExecutor: this one, or a host
over ssh, see run/places.py), exact instruction counts under callgrind (host
binaries) or under qemu-user with the project's TCG plugin (other targets); counts
do not depend on the machine, so they are always taken here. Every program runs with the same minimal
environment, an absolute path and a fixed cwd, because instruction counts move
with the size of the environment and argv. A failing program never raises: the
Measurement says why it failed (signal name, timeout, exit status, garbage).
"""
from __future__ import annotations

import functools
import math
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

from flagbench import procs
from flagbench.elf.constants import ELF_MAGIC
from flagbench.errors import UserError
from flagbench.run.places import FIXED_CWD, FIXED_ENV, LOCAL, Place
from flagbench.targets import HOST, get_target

HOST_TARGET = HOST.name      # programs of this target are timed natively here, counted under callgrind
_METRIC_LINE = re.compile(r"^([A-Za-z_][\w.:/%-]*)\s+(\S+)$")


@dataclass(frozen=True)
class Measurement:
    metrics: dict[str, float]
    stdout: str
    failure: str | None  # None = ok; "SIGSEGV", "timeout after 30 s", "exit status 3", "garbage output: ..."
    stderr: str = ""
    argv: tuple[str, ...] = field(default=())  # what was run, for the record

    @property
    def ok(self) -> bool:
        return self.failure is None


class Executor(Protocol):
    name: str

    def measure(self, argv: list[str], *, target: str, timeout: float = 60) -> Measurement: ...


def parse_metrics(stdout: str) -> tuple[dict[str, float], str | None]:
    """The harness's "key value" lines as metrics, and the first line that is not one.

    Blank lines and lines starting with '#' are allowed; anything else is garbage.
    """
    metrics: dict[str, float] = {}
    for line in stdout.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        m = _METRIC_LINE.match(text)
        value = _number(m.group(2)) if m else None
        if value is None:
            return metrics, text[:80]
        metrics[m.group(1)] = value
    return metrics, None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def absolute_argv(argv: Sequence[str]) -> list[str]:
    """argv with its program as an absolute path (counts depend on argv[0])."""
    if not argv:
        raise UserError("nothing to run: empty command")
    prog = argv[0]
    if os.sep in prog:
        path = Path(prog).resolve()
        if not path.is_file():
            raise UserError(f"{prog}: no such program")
    else:
        found = shutil.which(prog)
        if found is None:
            raise UserError(f"{prog}: not found on PATH")
        path = Path(found).resolve()
    return [str(path), *argv[1:]]


def _run(argv: list[str], timeout: float, cpu: int | None = None) -> procs.Done:
    """Run argv under procs (own group, hard timeout, nothing left behind) with the fixed env."""
    return _fixed(procs.run, argv, timeout=timeout, cpu=cpu)


def _start(argv: list[str], cpu: int | None) -> procs.Proc:
    """Start argv under procs with the fixed env (stop it, or use it as a context manager)."""
    return _fixed(procs.start, argv, cpu=cpu)


def _fixed(call, argv: list[str], **kw):
    """procs.run / procs.start in the fixed cwd and env; a program that cannot start is a UserError."""
    try:
        return call(argv, cwd=FIXED_CWD, env=FIXED_ENV, **kw)
    except OSError as e:
        raise UserError(f"{argv[0]}: cannot run: {e.strerror or e}") from None


def _finish(done: procs.Done, argv: list[str], timeout: float, metrics: dict[str, float],
            parse_stdout: bool, failure: str | None = None) -> Measurement:
    if done.returncode is None:
        failure = f"timeout after {timeout:g} s"
    failure = failure or done.failure
    if parse_stdout and failure is None:
        parsed, garbage = parse_metrics(done.stdout)
        if garbage is not None:
            failure = f"garbage output: {garbage!r}"
        # The executor's own metrics (insns, wall_ns) win over same-named program lines.
        metrics = {**parsed, **metrics}
    return Measurement(metrics, done.stdout, failure, done.stderr[-4000:], tuple(argv))


def _default_cpu() -> int | None:
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1] if cpus else None


# Why flagbench does not let perf fork the program: perf stat (6.1, builtin-stat.c) has a
# SIGCHLD handler that sets child_pid = -1, and when the child dies before perf reaches
# `if (child_pid != -1) wait4(...)` (a short program, a loaded or single CPU: ~5 % of runs
# here) perf never waits for it: no "PROG: Bus error" line and exit 0, even for `exit 3`.
# So flagbench is the program's parent, as without perf, and has its wait status: a shell
# blocks on a FIFO, perf attaches to it (-p, events off until its "enable" is acked), then
# the shell execs the program.
PERF_EVENTS = "task-clock,page-faults"
_GATE = 'read -r _ <"$0" && unset PWD && exec "$@"'   # dash would export PWD to the program
_PERF_START_S = 30.0   # perf's attach, apart from the program's own timeout
_PERF_STOP_S = 5.0


@functools.cache
def perf_available() -> bool:
    """Whether `perf stat -e task-clock,page-faults` works here as NativeExecutor runs it."""
    if shutil.which("perf") is None:
        return False
    try:
        done, _, perf_failure = perf_stat(["/bin/true"], timeout=30, cpu=None)
    except UserError:
        return False
    return done is not None and done.returncode == 0 and perf_failure is None


def perf_stat(argv: list[str], *, timeout: float,
              cpu: int | None) -> tuple[procs.Done | None, dict[str, float], str | None]:
    """Run argv (absolute program path) with perf stat counting it: how the program ended
    (its own wait status; None if perf never started, so neither did it), perf's counts,
    and what went wrong with perf (None when it counted)."""
    _check_exec(argv[0])
    perf = shutil.which("perf") or "perf"
    with tempfile.TemporaryDirectory(prefix="flagbench-perf-") as tmp:
        fifos = {name: Path(tmp) / name for name in ("go", "ctl", "ack")}
        for path in fifos.values():
            os.mkfifo(path)
        out = Path(tmp) / "perf.csv"
        # O_RDWR: never blocks, and what is written stays until the reader opens its end.
        fds = {name: os.open(path, os.O_RDWR | os.O_NONBLOCK) for name, path in fifos.items()}
        try:
            with _start(["/bin/sh", "-c", _GATE, str(fifos["go"]), *argv], cpu) as gate, \
                 _start([perf, "stat", "-x,", "-e", PERF_EVENTS, "-o", str(out), "-D", "-1", "--control",
                         f"fifo:{fifos['ctl']},{fifos['ack']}", "-p", str(gate.pid)], cpu) as stat:
                if not _perf_enabled(stat, fds["ctl"], fds["ack"]):
                    gate.stop()
                    stat.stop()
                    return None, {}, "perf stat did not start" + _last_line(stat.output()[1])
                os.write(fds["go"], b"\n")
                started = time.perf_counter_ns()
                code = gate.wait(timeout=max(timeout, 0.0))
                wall = time.perf_counter_ns() - started
                _perf_finish(stat, fds["ctl"])
                stdout, stderr = gate.output()
                perf_err = stat.output()[1]
        finally:
            for fd in fds.values():
                os.close(fd)
        counts = _parse_perf_csv(out)
    perf_failure = None
    if not {"task_clock_ns", "page_faults"} <= counts.keys():
        perf_failure = "perf stat wrote no counts" + _last_line(perf_err)
    return procs.Done(tuple(argv), code, stdout, stderr, wall, timeout), counts, perf_failure


def _check_exec(path: str) -> None:
    """What exec would refuse (the shell would run a non-ELF as a script instead)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise UserError(f"{path}: cannot run: {e.strerror or e}") from None
    if not os.access(path, os.X_OK):
        raise UserError(f"{path}: cannot run: Permission denied")
    if head != ELF_MAGIC and not head.startswith(b"#!"):
        raise UserError(f"{path}: cannot run: Exec format error")


def _perf_enabled(stat: procs.Proc, ctl: int, ack: int) -> bool:
    """Ask perf to enable its events; True once it acked (its counters are on the program)."""
    os.write(ctl, b"enable\n")
    deadline = time.monotonic() + _PERF_START_S
    while time.monotonic() < deadline and stat.popen.poll() is None:
        ready, _, _ = select.select([ack], [], [], 0.05)
        if ready and b"ack" in os.read(ack, 64):
            return True
    return False


def _perf_finish(stat: procs.Proc, ctl: int) -> None:
    """Let perf see its target gone (a control message wakes it) and write its counts;
    SIGINT (it prints then too) if it does not; killed past that."""
    os.write(ctl, b"ping\n")
    try:
        stat.popen.wait(timeout=_PERF_STOP_S / 2)
    except subprocess.TimeoutExpired:
        stat.popen.send_signal(signal.SIGINT)
    stat.wait(timeout=_PERF_STOP_S / 2)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("Events ")]
    return f": {lines[-1].strip()}" if lines else ""


def _parse_perf_csv(path: Path) -> dict[str, float]:
    """task-clock (msec) -> task_clock_ns; page-faults -> page_faults."""
    metrics: dict[str, float] = {}
    if not path.exists():
        return metrics
    for line in path.read_text(errors="replace").splitlines():
        fields = line.split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        value = _number(fields[0])
        if value is None:
            continue
        if fields[2] == "task-clock":
            metrics["task_clock_ns"] = value * 1e6 if fields[1] == "msec" else value
        elif fields[2] == "page-faults":
            metrics["page_faults"] = value
    return metrics


class NativeExecutor:
    """The program run natively on a place (default: here, pinned to this machine's last CPU;
    a host: on CPU `cpu` if given), with wall time here and perf's counters where perf counts."""

    name = "native"

    def __init__(self, *, cpu: int | None = -1, perf: bool = False, parse_stdout: bool = True,
                 place: Place = LOCAL):
        self.place = place
        if place.remote:
            self.cpu = None if cpu == -1 else cpu
        else:
            self.cpu = _default_cpu() if cpu == -1 else cpu
            if perf and not perf_available():
                raise UserError("perf stat -e task-clock,page-faults does not work here "
                                "(apt-get install linux-perf; check kernel.perf_event_paranoid)")
        self.perf = perf
        self.parse_stdout = parse_stdout

    def measure(self, argv: list[str], *, target: str = HOST_TARGET, timeout: float = 60) -> Measurement:
        if self.place.remote:
            return self._measure_there(argv, target, timeout)
        if target != HOST_TARGET:
            raise UserError(f"cannot time {target} programs natively on this {HOST_TARGET} host")
        argv = absolute_argv(argv)
        if not self.perf:
            done = _run(argv, timeout, self.cpu)
            return _finish(done, argv, timeout, {"wall_ns": float(done.wall_ns)}, self.parse_stdout)
        done, counts, perf_failure = perf_stat(argv, timeout=timeout, cpu=self.cpu)
        record = [shutil.which("perf") or "perf", "stat", "-e", PERF_EVENTS, "--", *argv]
        if done is None:
            return Measurement({}, "", perf_failure, "", tuple(record))
        metrics = {"wall_ns": float(done.wall_ns), **counts}
        failure = perf_failure if done.returncode == 0 else None   # the program's own failure first
        return _finish(done, record, timeout, metrics, self.parse_stdout, failure)


    def _measure_there(self, argv: list[str], target: str, timeout: float) -> Measurement:
        """One run on a host: the program staged there by content; perf's hardware counters
        when the host's perf counts them (perf forks the program there)."""
        place = self.place
        if target != place.machine():
            raise UserError(f"host {place.name} runs {place.machine()} programs, not {target}")
        argv = absolute_argv(argv)
        remote = [place.stage(Path(argv[0])), *argv[1:]]
        events = place.perf_events() if self.perf else ()
        if events:
            remote = ["perf", "stat", "-x,", "-e", ",".join(events), "--", *remote]
        done = place.run(remote, timeout=timeout, cpu=self.cpu)
        counts: dict[str, float] = {}
        if events:
            counts, stderr = _perf_lines(done.stderr, events)
            done = procs.Done(done.argv, done.returncode, done.stdout, stderr, done.wall_ns, done.timeout)
        return _finish(done, [f"{place.name}:", *remote], timeout, counts, self.parse_stdout)


def _perf_lines(stderr: str, events) -> tuple[dict[str, float], str]:
    """perf stat -x, lines (at the end of stderr) as perf_<event> metrics; the rest of stderr."""
    from flagbench.hosts.facts import PERF_METRICS
    counts, rest = {}, []
    for line in stderr.splitlines():
        fields = line.split(",")
        value = _number(fields[0]) if len(fields) >= 3 and fields[2] in events else None
        if value is not None:
            counts[f"perf_{PERF_METRICS[fields[2]]}"] = value
        elif not (len(fields) >= 3 and fields[2] in events):
            rest.append(line)
    return counts, "\n".join(rest)


class CallgrindExecutor:
    """Exact instruction count (Ir) of a host program under valgrind's callgrind."""

    name = "callgrind"

    def __init__(self, *, parse_stdout: bool = True):
        if shutil.which("valgrind") is None:
            raise UserError("instruction counts on x86_64 need valgrind: apt-get install valgrind")
        self.parse_stdout = parse_stdout

    def measure(self, argv: list[str], *, target: str = HOST_TARGET, timeout: float = 60) -> Measurement:
        if target != HOST_TARGET:
            raise UserError(f"callgrind runs {HOST_TARGET} programs only, not {target}")
        argv = absolute_argv(argv)
        with tempfile.TemporaryDirectory(prefix="flagbench-cg-") as tmp:
            out = Path(tmp) / "callgrind.out"
            wrapped = [shutil.which("valgrind") or "valgrind", "-q", "--tool=callgrind",
                       f"--callgrind-out-file={out}", "--cache-sim=no", "--branch-sim=no", *argv]
            done = _run(wrapped, timeout)
            insns = _callgrind_total(out)
        metrics = {} if insns is None else {"insns": insns}
        failure = None
        if insns is None and done.returncode == 0:
            failure = "callgrind wrote no instruction total"
        return _finish(done, wrapped, timeout, metrics, self.parse_stdout, failure)


def _callgrind_total(path: Path) -> float | None:
    if not path.exists():
        return None
    summary = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                summary = float(fields[1])  # the first event is Ir
    return summary


class QemuExecutor:
    """Exact executed-instruction count (and loads/stores by width) under qemu-user + plugin."""

    name = "qemu"

    def __init__(self, target: str, *, count_memory: bool = True, parse_stdout: bool = True):
        from flagbench.run.qemu_plugin import plugin_path

        spec = _known_target(target)
        # The host's own programs can run under qemu-x86_64 too (counts comparable with other targets').
        qemu = spec.qemu or ("qemu-x86_64" if target == HOST_TARGET else None)
        if qemu is None:
            raise UserError(f"no qemu-user runner for {target}")
        runner = shutil.which(qemu)
        if runner is None:
            raise UserError(f"running {target} programs needs {qemu}: apt-get install qemu-user")
        self.target = target
        self.runner = runner
        self.plugin = plugin_path()
        if "," in str(self.plugin):
            raise UserError(f"qemu cannot load a plugin from a path with a comma: {self.plugin}")
        self.count_memory = count_memory
        self.parse_stdout = parse_stdout

    def measure(self, argv: list[str], *, target: str | None = None, timeout: float = 60) -> Measurement:
        if target is not None and target != self.target:
            raise UserError(f"this executor runs {self.target} programs, not {target}")
        argv = absolute_argv(argv)
        with tempfile.TemporaryDirectory(prefix="flagbench-qemu-") as tmp:
            out = Path(tmp) / "counts"
            options = f"{self.plugin},outfile={out},mem={'on' if self.count_memory else 'off'}"
            wrapped = [self.runner, *get_target(self.target).qemu_cpu, "-plugin", options, *argv]
            done = _run(wrapped, timeout)
            counts, bad = parse_metrics(out.read_text()) if out.exists() else ({}, None)
        failure = None
        if done.returncode == 0 and ("insns" not in counts or bad is not None):
            failure = "the qemu plugin wrote no instruction count"
        return _finish(done, wrapped, timeout, counts, self.parse_stdout, failure)


def _known_target(target: str):
    try:
        return get_target(target)
    except LookupError as e:
        raise UserError(str(e)) from None


def executor_for(target: str, kind: str) -> Executor:
    """The executor that measures `kind` ("time" or "insns") for programs of `target`."""
    spec = _known_target(target)
    if not spec.runnable:
        raise UserError(f"{target} programs cannot run on this machine (no qemu-user for it)")
    if kind == "time":
        if target != HOST_TARGET or platform.machine() != HOST_TARGET:
            raise UserError(f"time is measured natively on {HOST_TARGET} only; "
                            f"use kind 'insns' for {target} (qemu instruction counts)")
        return NativeExecutor()
    if kind == "insns":
        if target == HOST_TARGET:
            return CallgrindExecutor()
        return QemuExecutor(target)
    raise UserError(f"unknown measurement kind {kind!r} (known: time, insns)")

