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


KILLED_WHILE_RUNNING = textwrap.dedent("""
    import sys
    sys.path.insert(0, {src!r})
    from flagbench import procs
    procs.install()
    procs.run(["/bin/sh", "-c", {script!r}], timeout=120)
""")


def _started(pidfile: Path) -> int:
    end = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    return int(pidfile.read_text())


def _kill_9_while(script: str, pidfile: Path) -> int:
    """Start a flagbench-like process running SCRIPT under procs, kill -9 it once PIDFILE is written;
    the pid the script wrote."""
    parent = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_RUNNING.format(src=str(SRC), script=script)])
    try:
        pid = _started(pidfile)
        assert alive(pid)
    finally:
        parent.kill()
        parent.wait()
    return pid


def test_the_whole_group_dies_when_flagbench_is_killed_9(tmp_path):
    """A parent-death signal reaches only the direct child (here sh, as make in a kernel build):
    what it started (sleep, as gcc and cc1) must die too."""
    pidfile = tmp_path / "pid"
    pid = _kill_9_while(f"sleep 60 & echo $! > {pidfile}; wait", pidfile)
    assert wait_gone(pid)


def test_a_detached_grandchild_dies_when_flagbench_is_killed_9(tmp_path):
    """A setsid child (a daemon a command bench starts) leaves the group: it must die too."""
    pidfile = tmp_path / "pid"
    pid = _kill_9_while(f"setsid /bin/sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 60", pidfile)
    assert wait_gone(pid)


WATCHED = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {src!r})
    from flagbench import procs
    procs.install()
    with procs.start(["/bin/sh", "-c", "setsid sleep 60 & echo $! > {pidfile}; sleep 60"]):
        while not os.path.exists({pidfile!r}) or not open({pidfile!r}).read().strip():
            pass
        procs.record_owner(__import__("pathlib").Path({owner!r}))
        os.kill(procs.watchdog_pid(), signal.SIGKILL)   # as if the watchdog died first
        os.kill(os.getpid(), signal.SIGKILL)
""")


def test_the_next_flagbench_ends_what_a_dead_one_left(tmp_path):
    """When nothing killed them (the watchdog died first), leftovers carry their flagbench's
    token: the next one that takes over the resource ends them before using it."""
    pidfile, owner = tmp_path / "pid", tmp_path / "cell.owner"
    dead = subprocess.run([sys.executable, "-c", WATCHED.format(src=str(SRC), pidfile=str(pidfile),
                                                                 owner=str(owner))], timeout=120)
    assert dead.returncode == -signal.SIGKILL
    pid = int(pidfile.read_text())
    try:
        assert alive(pid)                           # nothing ended it: the case the next run handles
        assert pid in procs.take_over(owner)        # the leftovers of the cell's last owner, ended
        assert wait_gone(pid)
        assert procs.take_over(owner) == []         # the record names us now
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_leftovers_of_dead_flagbenches_are_swept_at_install(tmp_path):
    pidfile, owner = tmp_path / "pid", tmp_path / "owner"
    subprocess.run([sys.executable, "-c", WATCHED.format(src=str(SRC), pidfile=str(pidfile), owner=str(owner))],
                   timeout=120)
    pid = int(pidfile.read_text())
    try:
        assert alive(pid)
        swept = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(SRC)!r}); "
                                "from flagbench import procs; procs.install()"], timeout=60)
        assert swept.returncode == 0
        assert wait_gone(pid)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_token_is_fixed_length_and_the_same_for_every_child():
    """Instruction counts move with the size of the environment: the token's length never varies."""
    printed = {procs.run(["/usr/bin/env"], timeout=30, env={"A": "1"}).stdout for _ in range(2)}
    assert len(printed) == 1
    token = dict(line.split("=", 1) for line in printed.pop().splitlines())[procs.OWNER_VAR]
    other = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(SRC)!r}); "
                            "from flagbench import procs; print(procs.run(['/usr/bin/env'], timeout=30).stdout)"],
                           capture_output=True, text=True, timeout=60).stdout
    theirs = dict(line.split("=", 1) for line in other.splitlines() if "=" in line)[procs.OWNER_VAR]
    assert theirs != token and len(theirs) == len(token)


SIGNALLED_LOOP = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {src!r})
    import logging          # registers at-fork hooks that take and release its lock
    from flagbench import procs
    procs.install()

    def slow_hook():        # a hook as slow as a loaded machine makes logging's: the signal lands in it
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass

    os.register_at_fork(before=slow_hook, after_in_parent=slow_hook)
    try:
        print("ready", flush=True)
        while True:
            procs.run(["/bin/true"], timeout=30)
    except procs.Terminated as e:
        logging.getLogger("x").warning("logging still works")   # its lock was released
        sys.exit(e.exit_status)
""")


def test_sigterm_during_a_loop_of_programs_never_lands_in_an_at_fork_hook():
    """SIGTERM while a program is being forked raised inside logging's at-fork hook
    ("Exception ignored in: <function _releaseLock>"): the exception was lost there."""
    import random
    bad = []
    for _ in range(12):
        loop = subprocess.Popen([sys.executable, "-c", SIGNALLED_LOOP.format(src=str(SRC))],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        loop.stdout.readline()
        time.sleep(random.uniform(0.05, 0.2))
        loop.send_signal(signal.SIGTERM)
        _, err = loop.communicate(timeout=60)
        if loop.returncode != 128 + signal.SIGTERM or "Exception ignored" in err or "logging still works" not in err:
            bad.append((loop.returncode, err[-400:]))
    assert not bad, bad


KEPT = textwrap.dedent("""
    import os, subprocess, sys, time
    sys.path.insert(0, {src!r})
    from flagbench import procs
    procs.install()                              # a subreaper, as `flagbench box start` is
    kept = procs.detached(["sleep", "60"])       # the box's qemu
    plain = subprocess.Popen(["sleep", "60"], start_new_session=True, stdout=subprocess.DEVNULL)   # box.py's before
    os.environ["FLAGBENCH_DETACHED"] = "1"       # inherited by what flagbench runs: no escape for it
    # a program flagbench runs starts a server and exits: the server is reparented to us
    done = procs.run([sys.executable, "-c", "import sys; sys.path.insert(0, {src!r}); from flagbench import procs; "
                      "print(procs.detached(['sleep', '60']).pid)"], timeout=60)
    adopted = int(done.stdout)
    # ... and one that leaves a setsid child with the mark in its environment
    done = procs.run(["/bin/sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo $!"], timeout=60)
    leftover = int(done.stdout)
    procs.run(["true"], timeout=60)              # its stop() ends orphans (an ssh -O check in Connection)
    time.sleep(0.2)
    print(kept.pid, plain.pid, adopted, leftover)
""")


def test_a_detached_server_outlives_what_flagbench_runs_and_the_orphans_do_not(tmp_path):
    """The box's qemu (and its lab) went with the first program flagbench ran after starting it:
    kill_orphans took the Popen'd child in another session for a leftover. procs.detached marks it."""
    out = subprocess.run([sys.executable, "-c", KEPT.format(src=str(SRC))], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    kept, plain, adopted, leftover = map(int, out.stdout.split())
    try:
        assert alive(kept) and alive(adopted)                     # they outlive flagbench too
        assert "FLAGBENCH_OWNER=" not in Path(f"/proc/{kept}/environ").read_text()   # no watchdog ends it
        assert not alive(plain) and not alive(leftover)
    finally:
        for pid in (kept, adopted):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
