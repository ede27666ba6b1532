"""Issue 11, the run side, each item reproduced through the CLI as a user meets it:
signals and kill -9 leave nothing running and no temporary directory, two writers on
one database, bad option values, compilers given by path, unusable caches.

Every check is on processes, files, exit statuses and messages; never on time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, flagbench, write_experiment
from flagbench.store import Store

HANG_C = """
#include <stdint.h>
uint64_t hang(uint64_t n) { for (volatile uint64_t i = 0; ; i++) if (n == 0) break; return n; }
uint64_t quick(uint64_t n) { uint64_t a = 1; for (uint64_t i = 0; i < n; i++) a = a * 3 + i; return a; }
"""
HANG_TOML = """
sources = ["hang.c"]
[variants]
base = {}
[[bench]]
name = "hang"
kind = "micro"
function = "hang"
metrics = ["time"]
timeout = 600
[[bench]]
name = "quick"
kind = "micro"
function = "quick"
metrics = ["insns"]
"""


def harness_pids(name: str, under: Path) -> list[int]:
    """Processes running a harness program of that name (micro-hang) linked under UNDER (this
    test's TMPDIR: xdist runs another test's micro-hang beside it), by their executable."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                exe = os.readlink(entry / "exe")
                if exe.endswith("/" + name) and exe.startswith(str(under) + "/"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def running(pids: list[int]) -> list[int]:
    """Those still running (a killed one may linger as a zombie until its new parent reaps it)."""
    out = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(pid)
        except OSError:
            pass
    return out


def start_run(exp: Path, tmp: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FLAGBENCH_CACHE": str(tmp / "cache"),
           "TMPDIR": str(tmp / "tmp")}
    (tmp / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "flagbench", "run", str(exp), "--db", str(tmp / "fb.db"),
                             "--bench", "hang", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for(predicate, within: float = 120):
    end = time.monotonic() + within
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("never happened")


@pytest.fixture
def hanging(tmp_path):
    return write_experiment(tmp_path / "exp", HANG_TOML, {"hang.c": HANG_C})


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_ends_the_benchmark_and_removes_the_work_dir(hanging, tmp_path, signum):
    run = start_run(hanging, tmp_path)
    loops = wait_for(lambda: harness_pids("micro-hang", tmp_path))
    run.send_signal(signum)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert not running(loops)                                          # nothing left running
    assert not list((tmp_path / "tmp").glob("flagbench-run-*"))        # no work dir left


def test_kill_9_leaves_nothing_running_and_the_next_run_sweeps_the_work_dir(hanging, tmp_path):
    run = start_run(hanging, tmp_path)
    loops = wait_for(lambda: harness_pids("micro-hang", tmp_path))
    run.kill()
    run.communicate()
    wait_for(lambda: not running(loops), within=30)
    left = list((tmp_path / "tmp").glob("flagbench-run-*"))
    assert left                                                        # SIGKILL cannot clean up...
    out = flagbench("run", hanging, "--db", tmp_path / "other.db", "--bench", "quick", cache=tmp_path / "cache",
                    env={"TMPDIR": str(tmp_path / "tmp")})
    assert out.returncode == 0, out.stderr
    assert not any(p.exists() for p in left)                           # ...the next run does


def test_a_second_writer_on_one_database_is_refused_with_the_holder(hanging, tmp_path):
    first = start_run(hanging, tmp_path)
    wait_for(lambda: harness_pids("micro-hang", tmp_path))
    second = flagbench("run", hanging, "--db", tmp_path / "fb.db", "--bench", "quick", cache=tmp_path / "cache")
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    assert second.returncode == 2
    assert f"is being written by pid {first.pid} (flagbench run" in second.stderr
    assert second.stderr.count("\n") == 1


def test_two_runs_one_after_the_other_store_the_count_asked_for(tmp_path):
    exp = write_experiment(tmp_path / "exp", HANG_TOML.replace('metrics = ["time"]\ntimeout = 600',
                                                               'metrics = ["time"]\nsamples = 2')
                           .replace('function = "hang"', 'function = "quick"'), {"hang.c": HANG_C})
    for _ in range(2):
        out = flagbench("run", exp, "--db", tmp_path / "fb.db", "--bench", "hang", cache=tmp_path / "cache")
        assert out.returncode == 0, out.stderr
    with Store(tmp_path / "fb.db") as store:
        assert [s["metric"] for s in store.samples(1)].count("ns_per_iter") == 2


def test_a_hung_count_fails_its_cell_after_one_timeout(tmp_path):
    """Counts run n then 2n; a hang in the first fails the cell without starting the second."""
    exp = write_experiment(tmp_path / "exp", HANG_TOML.replace('metrics = ["time"]\ntimeout = 600',
                                                               'metrics = ["insns"]\ntimeout = 1'),
                           {"hang.c": HANG_C})
    (tmp_path / "tmp").mkdir()
    out = flagbench("run", exp, "--db", tmp_path / "fb.db", "--bench", "hang", "--format", "json",
                    cache=tmp_path / "cache", env={"TMPDIR": str(tmp_path / "tmp")})
    assert out.returncode == 1, out.stderr
    with Store(tmp_path / "fb.db") as store:
        cell, = store.cells(1)
    assert (cell["status"], cell["reason"]) == ("failed", "timeout after 1 s")
    assert not running(harness_pids("micro-hang", tmp_path))


@pytest.mark.parametrize("args, message", [
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--samples", "0"], "--samples must be 1..100000"),
])
def test_bad_run_options_are_one_line(hanging, tmp_path, args, message):
    out = flagbench("run", hanging, "--db", tmp_path / "fb.db", *args, cache=tmp_path / "cache")
    assert out.returncode == 2 and message in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "cache").exists()                          # refused before anything was built


def test_a_compiler_given_by_path_builds_and_runs(tmp_path):
    """Issue 11: compilers = ["/usr/bin/gcc"] built, then run died with FileExistsError."""
    exp = write_experiment(tmp_path / "exp", 'compilers = ["/usr/bin/gcc"]\n' + HANG_TOML, {"hang.c": HANG_C})
    out = flagbench("run", exp, "--db", tmp_path / "fb.db", "--bench", "quick", "--format", "json",
                    cache=tmp_path / "cache")
    assert out.returncode == 0, out.stderr
    table, = json.loads(out.stdout)["tables"]
    assert table["compiler"] == "gcc" and table["rows"][0]["variants"]["base"]["median"] > 0


def test_a_compiler_that_writes_no_object_is_a_build_error(tmp_path):
    """Issue 11: compilers = ["/usr/bin/true"] reported "built" and cached an empty .o."""
    exp = write_experiment(tmp_path / "exp", 'compilers = ["/usr/bin/true"]\nsources = ["a.c"]\n[variants]\nv = {}\n')
    out = flagbench("build", exp, cache=tmp_path / "cache")
    assert out.returncode == 2
    assert "/usr/bin/true exited 0 but wrote no ELF object" in out.stderr.splitlines()[-1]
    assert not list((tmp_path / "cache" / "objects").rglob("*.o"))


def test_an_unwritable_cache_is_one_line(tmp_path):
    exp = write_experiment(tmp_path / "exp", 'sources = ["a.c"]\n[variants]\nv = {}\n')
    (tmp_path / "file").write_text("not a directory")
    out = flagbench("build", exp, cache=tmp_path / "file")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"FLAGBENCH_CACHE={tmp_path / 'file'}: cannot write" in out.stderr
    # a working directory nothing can be created in (/proc, even for root), no FLAGBENCH_CACHE
    env = {k: v for k, v in os.environ.items() if k != "FLAGBENCH_CACHE"}
    out = subprocess.run([sys.executable, "-m", "flagbench", "build", str(exp)], capture_output=True, text=True,
                         cwd="/proc", env={**env, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 2 and "cannot write /proc/.cache/flagbench" in out.stderr
    assert "Traceback" not in out.stderr


def test_temporaries_a_killed_build_left_in_the_cache_are_removed(tmp_path):
    """Issue 11: kill -9 during a build left .tmp-*.o in the cache."""
    exp = write_experiment(tmp_path / "exp", 'sources = ["a.c"]\n[variants]\nv = {}\n')
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    stale = tmp_path / "cache" / "tmp" / f"o-{dead.pid}-half.o"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\x7fELF half written")
    out = flagbench("build", exp, cache=tmp_path / "cache")
    assert out.returncode == 0, out.stderr
    assert not stale.exists() and not list((tmp_path / "cache" / "tmp").iterdir())


def test_objects_without_the_benches_function_are_a_build_error(tmp_path):
    """Issue 11: an object that lacks the symbols the benches name is a build error, at the bench's line."""
    exp = write_experiment(tmp_path / "exp", HANG_TOML.replace('function = "quick"', 'function = "quik"'),
                           {"hang.c": HANG_C})
    for verb in ("build", "run"):
        out = flagbench(verb, exp, cache=tmp_path / "cache", cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stderr.splitlines()[-1].startswith(f"flagbench {verb}: {exp / 'experiment.toml'}:10: bench quick: "
                                                      "no object of the build defines quik")


DAEMON_TOML = """
sources = ["hang.c"]
[variants]
base = {{}}
[[bench]]
name = "daemon"
kind = "command"
command = ["/bin/sh", "-c", "setsid /bin/sh -c 'echo $$ > {pidfile}; exec sleep 120' & sleep 120"]
samples = 1
warmup = 0
"""


def test_kill_9_during_a_command_bench_ends_the_daemon_it_started(tmp_path):
    """A command bench double-forks a setsid child; flagbench is killed -9: the child kept running
    (timeout and SIGTERM ended it, kill -9 did not), and the next flagbench did not end it either."""
    pidfile = tmp_path / "daemon.pid"
    exp = write_experiment(tmp_path / "exp", DAEMON_TOML.format(pidfile=pidfile), {"hang.c": HANG_C})
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FLAGBENCH_CACHE": str(tmp_path / "cache")}
    run = subprocess.Popen([sys.executable, "-m", "flagbench", "run", str(exp), "--db", str(tmp_path / "fb.db")],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        daemon = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()))
        assert running([daemon])
    finally:
        run.kill()
        run.wait()
    try:
        wait_for(lambda: not running([daemon]), within=30)
    finally:
        if running([daemon]):
            os.kill(daemon, signal.SIGKILL)
