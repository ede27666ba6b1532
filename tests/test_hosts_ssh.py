"""hosts/ssh.py against a real OpenSSH server on 127.0.0.1 (tests/sshd_util.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flagbench.hosts.ssh import Connection, ConnectionLost, HostError
from sshd_util import free_port, running, sshd_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def box(tmp_path, monkeypatch):
    with sshd_server(tmp_path / "box", alias="box") as server:
        monkeypatch.setenv("FLAGBENCH_SSH", server.ssh_env)
        yield server


def _sleeping(seconds: str) -> list[int]:
    return running("/usr/bin/sleep", seconds)


def test_run_copy_and_statuses(box, tmp_path):
    prog = tmp_path / "prog"
    prog.write_text("#!/bin/sh\necho \"args:$*\"\necho oops >&2\nexit 3\n")
    prog.chmod(0o755)
    with Connection("box") as host:
        assert host.dir.startswith(str(box.home))
        arch = host.run(["uname", "-m"], timeout=20)
        assert (arch.returncode, arch.stdout.strip()) == (0, os.uname().machine)
        remote = host.stage(prog)
        assert host.stage(prog) == remote                     # once per content
        done = host.run([remote, "a b", "it's"], timeout=20)  # words arrive intact
        assert (done.returncode, done.stdout, done.stderr) == (3, "args:a b it's\n", "oops\n")
        assert done.failure == "exit status 3"
        assert host.run(["sh", "-c", "kill -SEGV $$"], timeout=20).failure == "SIGSEGV"
        slow = host.run(["sleep", "4313"], timeout=0.5)    # (not 30: others' sleep 30 on a shared machine)
        assert slow.failure == "timeout after 0.5 s"
        run_dir = Path(host.dir)
        assert run_dir.is_dir()
    assert not run_dir.exists()                               # removed at close
    assert not _sleeping("4313")


def test_a_copy_that_loses_the_host_says_so_apart_from_a_bad_path(box, tmp_path):
    """A copy refused by the file system is the file's failure; one whose ssh lost the host is
    ConnectionLost, which a place turns into a resumable failure (a fleet's board dropping out
    mid-copy flaked CI's fleet test when it was the former)."""
    data = tmp_path / "data"
    data.write_bytes(b"x")
    with Connection("box") as host:
        with pytest.raises(HostError) as bad:
            host.copy(data, "/proc/no/such/dir/data")
        assert not isinstance(bad.value, ConnectionLost) and "cannot copy data" in str(bad.value)
        box.stop()
        with pytest.raises(ConnectionLost) as lost:
            host.copy(data, f"{host.dir}/data")
        assert "Connection refused" in str(lost.value) or "closed" in str(lost.value), lost.value


def test_refused_connection_is_one_line(tmp_path, monkeypatch):
    port = free_port()      # nothing listens there
    monkeypatch.setenv("FLAGBENCH_SSH", "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")
    with pytest.raises(HostError) as e:
        Connection(f"ssh://root@127.0.0.1:{port}").open()
    assert str(e.value).startswith(f"host ssh://root@127.0.0.1:{port}: unreachable: ")
    assert "Connection refused" in str(e.value) and "\n" not in str(e.value)


def test_nothing_survives_kill_9_of_the_client(box, tmp_path):
    """A process holding the connection dies by SIGKILL mid-program: the guard ends the
    program there and the keeper removes the run directory."""
    script = tmp_path / "hold.py"
    script.write_text(
        "import sys\nfrom flagbench import procs\nfrom flagbench.hosts.ssh import Connection\n"
        "procs.install()\nc = Connection('box').open()\nprint(c.dir, flush=True)\n"
        "c.run(['sh', '-c', 'echo started >&2; exec sleep 777'], timeout=600)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    run_dir = Path(holder.stdout.readline().strip())
    assert run_dir.is_dir()
    end = time.monotonic() + 30
    while not _sleeping("777") and time.monotonic() < end:
        time.sleep(0.05)
    assert _sleeping("777")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    end = time.monotonic() + 20
    while (_sleeping("777") or run_dir.exists()) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _sleeping("777")
    assert not run_dir.exists()


def test_a_run_directory_left_behind_is_removed_by_the_next_connection(box):
    """A directory whose keeper is gone (the host rebooted, the keeper was killed) goes when
    the next connection opens; one whose keeper lives stays."""
    base = box.home / ".flagbench"
    stale = base / "run-stale"
    stale.mkdir(parents=True)
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    (stale / "keeper").write_text(f"{dead.pid}\n")
    (stale / "prog").write_bytes(b"x")
    with Connection("box") as first, Connection("box") as second:
        assert not stale.exists()
        assert Path(first.dir).is_dir() and Path(second.dir).is_dir() and first.dir != second.dir


def test_perf_counters_are_split_from_the_programs_stderr():
    """perf stat -x, on a host writes its CSV after the program's own stderr."""
    from flagbench.run.executors import _perf_lines
    stderr = ("warning: from the program\n"
              "1234567,,cycles,1002003,100.00,,\n"
              "<not counted>,,iTLB-load-misses,0,0.00,,\n"
              "890,,branch-misses,1002003,100.00,,\n")
    counts, rest = _perf_lines(stderr, ("cycles", "iTLB-load-misses", "branch-misses"))
    assert counts == {"perf_cycles": 1234567.0, "perf_branch_misses": 890.0}
    assert rest == "warning: from the program"
