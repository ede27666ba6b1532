"""`flagbench box` when things go wrong (issue 44), without booting a box: two starts at once, a
start killed mid-boot (its qemu left running, no kernel in /boot), a damaged state.json. The
box's qemu is a real qemu-system-x86_64 on the box directory's files, idle (-S, no machine);
`box start` runs with a PATH that lacks the kernel's build tools, so it stops at "the box
needs ..." instead of building a kernel: far enough to show what it did before."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, wait_until
from flagbench.run.guest import box as kbox

NAME = "tbox"


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "cache" / "box" / NAME


def box(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`flagbench box ARGS --name tbox`, its cache in TMP_PATH; no make on PATH (no kernel build)."""
    bare = tmp_path / "bare-bin"
    bare.mkdir(exist_ok=True)
    quiet = ["-q"] if args[0] == "start" else []
    return flagbench("box", *args, "--name", NAME, *quiet, cache=tmp_path / "cache", env={"PATH": str(bare)}, timeout=120)


@pytest.fixture
def qemu(home):
    """An idle qemu-system-x86_64 on HOME's files, in its own session as `box start` runs it."""
    if shutil.which(kbox.QEMU) is None:
        pytest.skip(f"{kbox.QEMU} is not installed")
    home.mkdir(parents=True)
    proc = subprocess.Popen([kbox.QEMU, "-M", "none", "-nodefaults", "-display", "none", "-S",
                             "-serial", f"file:{home / 'console.log'}"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: kbox._qemu_alive(home, proc.pid), 30, "qemu to start")
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def state(home: Path, pid: int, **more) -> None:
    """The state.json `box start` writes when qemu has started (before the box answers)."""
    (home / kbox.STATE).write_text(json.dumps({"pid": pid, "start_time": kbox._start_time(pid), "port": 2222,
                                               "alias": NAME, **more}))


def one_line(done: subprocess.CompletedProcess, status: int) -> str:
    assert done.returncode == status and done.stderr.count("\n") == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stderr


def test_a_second_start_is_told_who_starts_the_box(tmp_path, home):
    with kbox._StartLock(home):                  # a `box start` under way (this process)
        line = one_line(box(tmp_path, "start"), 2)
        assert f"is being started by pid {os.getpid()} (flagbench box start, since" in line, line
        status = box(tmp_path, "status")
        assert status.returncode == 1 and f"being started by pid {os.getpid()}" in status.stdout, status
    line = one_line(box(tmp_path, "start"), 2)   # the lock is free again: on to the build
    assert "the box needs make" in line, line


def test_a_start_killed_before_the_box_was_ready_is_not_a_box(tmp_path, home, qemu):
    state(home, qemu.pid)                        # kill -9 of `box start` while it booted
    status = box(tmp_path, "status")
    assert status.returncode == 1, status
    assert status.stdout.startswith(f"{NAME}: not running: a start was stopped before the box was ready "
                                    f"(its qemu, pid {qemu.pid}, still runs"), status.stdout
    assert kbox.load(home) is None
    start = box(tmp_path, "start")
    assert "already running" not in start.stderr + start.stdout
    assert "the box needs make" in one_line(start, 2)
    assert qemu.wait(timeout=30) is not None     # the leftover qemu was stopped before starting over
    assert not (home / kbox.STATE).exists()


def test_a_ready_box_whose_qemu_runs_is_running(tmp_path, home, qemu):
    state(home, qemu.pid, ready=True)
    status = box(tmp_path, "status")
    assert status.returncode == 0 and status.stdout.startswith(f"{NAME}: running (qemu pid {qemu.pid})"), status
    stop = box(tmp_path, "stop")
    assert stop.returncode == 0 and stop.stdout == f"{NAME}: stopped\n" and qemu.wait(timeout=30) is not None


@pytest.mark.parametrize("text, why", [
    ("{", "is damaged (Expecting"),
    ("[]", "is damaged (not an object)"),
    ('{"port": 2222}', "is damaged ('pid' is not a number)"),
    ('{"pid": "12", "port": 2222}', "is damaged ('pid' is not a number)"),
    ('{"pid": 12, "port": 2222, "start_time": "x"}', "is damaged ('start_time' is not a number)"),
    ('{"pid": 12, "port": 2222, "alias": 3}', "is damaged ('alias' is not a name)"),
])
def test_a_damaged_state_is_one_line_and_stop_clears_it(tmp_path, home, text, why):
    home.mkdir(parents=True)
    (home / kbox.STATE).write_text(text)
    for action in ("status", "start", "ssh-config"):
        line = one_line(box(tmp_path, action), 2)
        assert f"{home / kbox.STATE} {why}" in line or f"{home / kbox.STATE}: {why}" in line, line
        assert line.rstrip().endswith(f"`flagbench box stop --name {NAME}` clears it"), line
    stop = box(tmp_path, "stop")
    assert stop.returncode == 0 and stop.stdout == f"{NAME}: not running\n", stop
    status = box(tmp_path, "status")
    assert status.returncode == 1 and status.stdout.startswith(f"{NAME}: not running (flagbench box start"), status


def test_stop_finds_the_qemu_of_a_box_whose_state_is_damaged(tmp_path, home, qemu):
    (home / kbox.STATE).write_text('{"pid": ')
    stop = box(tmp_path, "stop")
    assert stop.returncode == 0 and stop.stdout == f"{NAME}: stopped\n", stop
    assert qemu.wait(timeout=30) is not None and not (home / kbox.STATE).exists()


def test_box_stop_stops_its_lab(tmp_path, home, monkeypatch):
    """`box start --lab`'s coordinator and exporter (run/guest/box_lab.py) end with `box stop`."""
    pytest.importorskip("labgrid", reason="make venv installs flagbench[lab] (labgrid 26.0.1)")
    from flagbench.run.guest import box_lab as lab_box
    monkeypatch.delenv("LG_ENV", raising=False)
    lab = lab_box.start_lab(home / "lab", alias=NAME, arch="x86_64")
    pids = [p["pid"] for p in json.loads((lab.dir / lab_box.STATE).read_text())["processes"].values()]
    assert len(pids) == 2 and all(kbox._start_time(pid) for pid in pids)
    done = box(tmp_path, "stop")
    assert done.returncode == 0 and done.stdout.startswith(f"{NAME}: its lab stopped"), done
    assert not any(kbox._start_time(pid) for pid in pids)
    assert lab_box.load_lab(home / "lab") is None


def test_the_box_labs_place_is_powered_by_the_command_it_is_given(tmp_path, home, monkeypatch):
    """`--lab`'s env.yaml (LG_ENV) gives the place labgrid's ExternalPowerDriver running the box's
    power command (here a script that notes its words), SWITCH made on / off / cycle, as
    labgrid-client itself reads and switches it."""
    pytest.importorskip("labgrid", reason="make venv installs flagbench[lab] (labgrid 26.0.1)")
    import sys
    from flagbench.run.guest import box_lab as lab_box
    monkeypatch.delenv("LG_ENV", raising=False)
    script = tmp_path / "power.sh"
    script.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "power.log"}\n')
    script.chmod(0o755)
    lab = lab_box.start_lab(home / "lab", alias=NAME, arch="x86_64", power=[str(script), "SWITCH", "--name", NAME])
    try:
        assert lab.exports == {"LG_COORDINATOR": lab.address, "LG_ENV": str(home / "lab" / "env.yaml")}
        env = {**os.environ, **lab.exports}
        client = [str(Path(sys.executable).parent / "labgrid-client"), "-p", NAME]
        for action in ("acquire", "power on", "power cycle", "power off", "release"):
            done = subprocess.run([*client, *action.split()], capture_output=True, text=True, env=env, timeout=120,
                                  stdin=subprocess.DEVNULL)
            assert done.returncode == 0, (action, done.stderr)
        assert (tmp_path / "power.log").read_text().splitlines() == [f"{s} --name {NAME}" for s in ("on", "cycle", "off")]
    finally:
        lab_box.stop_lab(home / "lab")
    assert lab_box.load_lab(home / "lab") is None


def test_box_power_off_stops_its_qemu_but_not_a_start_under_way(tmp_path, home, qemu):
    """`box power off` (what the --lab place's power driver runs) ends the box's qemu; while a
    `box start` holds the box it is one line naming that start, and the qemu runs on."""
    state(home, qemu.pid, ready=True)
    with kbox._StartLock(home):
        line = one_line(box(tmp_path, "power", "off"), 2)
        assert f"is being started by pid {os.getpid()}" in line, line
    assert qemu.poll() is None
    done = box(tmp_path, "power", "off")
    assert done.returncode == 0, done.stderr
    assert qemu.wait(timeout=30) is not None and not (home / kbox.STATE).exists()
