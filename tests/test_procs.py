"""procs: nothing flagbench starts outlives its deadline, its parent or a signal.

Real processes (sh, sleep, a detached grandchild); each test checks by pid that what was
started is gone, never how long anything took."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from flagbench import procs

SRC = Path(__file__).resolve().parents[1] / "src"


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pid: int, within: float = 10) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


DETACHING = textwrap.dedent("""
    import sys
    sys.path.insert(0, {src!r})
    from flagbench import procs
    procs.install()   # a subreaper, as every flagbench verb that runs programs is (not this pytest process)
    done = procs.run(["/bin/sh", "-c", "setsid /bin/sh -c 'echo $$ > {pidfile}; exec sleep 15' & "
                      "while [ ! -s {pidfile} ]; do sleep 0.01; done; echo started"], timeout=60)
    print(done.returncode, done.stdout.strip())
    sys.stdout.flush()
    import os
    pid = int(open({pidfile!r}).read())
    state = open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0] if os.path.exists(f"/proc/{{pid}}") else "gone"
    print(state)
""")


def test_a_detached_grandchild_dies_with_the_program_that_started_it(tmp_path):
    """Issue 11: a bench that starts a detached child sleeping 15 s took 15.7 s with timeout = 3.
    The grandchild leaves the process group (setsid) and keeps stdout open."""
    pidfile = tmp_path / "pid"
    out = subprocess.run([sys.executable, "-c", DETACHING.format(src=str(SRC), pidfile=str(pidfile))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["0 started", "gone"]      # killed and reaped when its starter ended


def test_timeout_kills_the_whole_tree(tmp_path):
    pidfile = tmp_path / "pid"
    done = procs.run(["/bin/sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"], timeout=0.5)
    assert done.timed_out and done.failure == "timeout after 0.5 s"
    assert not alive(int(pidfile.read_text()))


CHILD_OF_KILLED = textwrap.dedent("""
    import sys
    sys.path.insert(0, {src!r})
    from flagbench import procs
    procs.install()
    procs.run(["/bin/sh", "-c", "echo $$ > {pidfile}; exec sleep 30"], timeout=60)
""")


def test_a_child_dies_when_flagbench_is_killed_9(tmp_path):
    """PR_SET_PDEATHSIG: kill -9 of the parent ends the program it was running."""
    pidfile = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", CHILD_OF_KILLED.format(src=str(SRC), pidfile=str(pidfile))])
    end = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert alive(child)
    parent.kill()
    parent.wait()
    assert wait_gone(child)


def test_sigterm_kills_children_and_raises_terminated(tmp_path):
    pidfile = tmp_path / "pid"
    script = CHILD_OF_KILLED.format(src=str(SRC), pidfile=str(pidfile)).replace(
        "procs.run(", "try:\n    procs.run(") + textwrap.dedent("""
    except procs.Terminated as e:
        sys.exit(e.exit_status)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script])
    end = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 128 + signal.SIGTERM
    assert not alive(child)


def test_owned_dirs_of_dead_processes_are_swept(tmp_path):
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    stale = tmp_path / f"flagbench-run-{dead.pid}-abc"
    stale.mkdir()
    (stale / "prog").write_text("x")
    mine = tmp_path / f"flagbench-run-{os.getpid()}-keep"
    mine.mkdir()
    with procs.owned_dir("flagbench-run", tmp_path) as fresh:
        assert fresh.is_dir() and fresh.name.startswith(f"flagbench-run-{os.getpid()}-")
        assert not stale.exists() and mine.exists()
    assert not fresh.exists()
