"""`flagbench box start|stop|status|ssh-config` and `flagbench doctor --host` on it: the qemu
kexec box a user tries the real-machine path on (flagbench.run.guest.box, the one the kexec tests
boot). Oracles: /proc (qemu's process there while the box runs, gone after stop), plain OpenSSH
with the printed config, and the box's own /proc/sys/kernel/kexec_load_disabled; for `--lab`,
labgrid's own labgrid-client against the printed exports, and each server's process group."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, flagbench

from flagbench.run.guest import box as kbox

pytestmark = pytest.mark.slow   # a kernel build (cached after the first), a qemu boot


def test_box_start_ssh_config_doctor_stop(tmp_path):
    missing = kbox.missing()
    if missing:
        pytest.skip(f"the box needs {', '.join(missing)} (scripts/install-deps)")
    name = f"test-{os.getpid()}"
    home = kbox.home(name)
    try:
        done = flagbench("box", "status", "--name", name)
        assert done.returncode == 1 and "not running" in done.stdout, done
        done = flagbench("box", "start", "--name", name, "-q", timeout=7200)   # a cold box kernel: an hour under load
        assert done.returncode == 0, done.stderr[-2000:]
        assert "export FLAGBENCH_SSH=" in done.stdout
        b = kbox.load(home)
        assert b is not None and Path(f"/proc/{b.pid}").exists()       # outlived `box start`
        assert os.getpgid(b.pid) == b.pid                                  # its own group: stop kills it all

        config = flagbench("box", "ssh-config", "--name", name)
        assert config.returncode == 0 and f"Host {name}\n" in config.stdout
        assert "HostName 127.0.0.1" in config.stdout and f"Port {b.port}" in config.stdout
        (tmp_path / "ssh_config").write_text(config.stdout)
        ssh = ["ssh", "-F", str(tmp_path / "ssh_config")]
        # kexec allowed, root, and timed on the TSC: booted without tsc=reliable on a busy machine
        # its kernel's watchdog (jiffies, whose ticks come late under TCG) fell back to refined-jiffies
        said = subprocess.run([*ssh, name, "cat /proc/sys/kernel/kexec_load_disabled; id -u; "
                               "cat /sys/devices/system/clocksource/clocksource0/current_clocksource"],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert said.returncode == 0 and said.stdout.split() == ["0", "0", "tsc"], said.stdout + said.stderr

        env = {"FLAGBENCH_SSH": shlex.join(ssh)}
        doctor = flagbench("doctor", "--host", name, env=env, timeout=300)
        assert doctor.returncode == 0, doctor.stderr
        kexec_line = next(line for line in doctor.stdout.splitlines() if line.strip().startswith("kexec"))
        assert "ready: kernel experiments can run there" in kexec_line and "/boot/vmlinuz-" in kexec_line, doctor.stdout
        # the same check says why not once kexec is gone there
        assert subprocess.run([*ssh, name, "rm /usr/sbin/kexec"], timeout=60, stdin=subprocess.DEVNULL).returncode == 0
        doctor = flagbench("doctor", "--host", name, env=env, timeout=300)
        assert "not ready: no kexec there" in doctor.stdout, doctor.stdout

        again = flagbench("box", "start", "--name", name, "-q")
        assert again.returncode == 0 and "already running" in again.stderr
        assert kbox.load(home).pid == b.pid

        stopped = flagbench("box", "stop", "--name", name)
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert not Path(f"/proc/{b.pid}").exists() or kbox._start_time(b.pid) is None   # nothing outlives stop
        assert flagbench("box", "status", "--name", name).returncode == 1
        assert flagbench("box", "ssh-config", "--name", name).returncode == 2
    finally:
        kbox.stop(home)
        shutil.rmtree(home, ignore_errors=True)     # its keys, initramfs and logs: not left in the cache


def test_box_name_is_checked():
    done = flagbench("box", "status", "--name", "../x")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "box name" in done.stderr


def exports(stdout: str) -> dict[str, str]:
    """The `export K=V` lines `box start` prints, read as a shell reads them."""
    out = {}
    for line in stdout.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            key, _, value = words[1].partition("=")
            out[key] = value
    return out


def group_gone(pgid: int) -> bool:
    """No process is running in process group PGID (what a server started is gone with it); a
    zombie waiting for init to reap it is gone."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return False
    return True


def test_box_start_lab_is_a_place_to_run_on_and_its_power_is_the_box(tmp_path):
    """Issue 42: `box start --lab` on a fresh box; `run cases/memcpy-strategy --place NAME` with
    what it printed is timed there; labgrid-client's `power off` on the place stops the box's
    qemu and the next run powers it on (a new qemu, booted again); `box stop` leaves no qemu and
    no labgrid process, nor anything in their process groups."""
    missing = kbox.missing()
    if missing:
        pytest.skip(f"the box needs {', '.join(missing)} (scripts/install-deps)")
    pytest.importorskip("labgrid", reason="make venv installs flagbench[lab] (labgrid 26.0.1)")
    name = f"test-lab-{os.getpid()}"
    home = kbox.home(name)
    try:
        done = flagbench("box", "start", "--lab", "--name", name, "-q", timeout=7200)
        assert done.returncode == 0, done.stderr[-2000:]
        env = exports(done.stdout)
        assert set(env) == {"FLAGBENCH_SSH", "LG_COORDINATOR", "LG_ENV"}, done.stdout
        b = kbox.load(home)
        lab = json.loads((home / "lab" / "lab.json").read_text())["processes"]
        servers = {"qemu": b.pid, **{what: p["pid"] for what, p in lab.items()}}
        assert sorted(servers) == ["coordinator", "exporter", "qemu"]
        assert all(os.getpgid(pid) == pid for pid in servers.values())      # each its own group
        release = subprocess.run([*shlex.split(env["FLAGBENCH_SSH"]), name, "uname -r"], capture_output=True,
                                 text=True, timeout=60, stdin=subprocess.DEVNULL).stdout.strip()
        assert release and release != os.uname().release

        def run(db: Path) -> subprocess.CompletedProcess:
            done = flagbench("run", ROOT / "cases" / "memcpy-strategy", "--place", name, "--bench", "copy_page_info",
                             "--samples", "3", "--db", db, "--format", "json", env=env, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            for said in ("acquired by", "powered on", f"its shell is root@{name} (NetworkService)", "released"):
                assert f"place {name}: {said}" in done.stderr, done.stderr
            assert f"host {name}: x86_64, QEMU TCG CPU" in done.stderr and f"kernel {release};" in done.stderr
            rows = json.loads(done.stdout)
            assert rows, done.stdout[:2000]
            return done

        run(tmp_path / "fb.db")
        from test_hosts_run import samples
        timed = [s for s in samples(tmp_path / "fb.db") if s["cell"].endswith(f":host={name}")]
        assert len(timed) >= 6, timed[:2]                                    # 2 variants x 3 samples there

        client = [str(Path(sys.executable).parent / "labgrid-client"), "-p", name]
        lab_env = {**os.environ, **env}
        for action in ("acquire", "power off", "release"):                  # as a labgrid user switches a board
            said = subprocess.run([*client, *action.split()], capture_output=True, text=True, env=lab_env,
                                  timeout=120, stdin=subprocess.DEVNULL)
            assert said.returncode == 0, (action, said.stderr)
        assert kbox._start_time(b.pid) is None and kbox.load(home) is None   # its qemu is off
        assert all(kbox._start_time(servers[what]) for what in ("coordinator", "exporter"))   # its lab is not

        run(tmp_path / "fb2.db")                                             # powered on by the run
        again = kbox.load(home)
        assert again is not None and again.pid != b.pid and os.getpgid(again.pid) == again.pid
        servers["qemu after power on"] = again.pid

        stopped = flagbench("box", "stop", "--name", name)
        assert stopped.returncode == 0 and stopped.stdout == f"{name}: its lab stopped (labgrid coordinator and " \
            f"exporter)\n{name}: stopped\n", stopped.stdout
        assert [what for what, pid in servers.items() if kbox._start_time(pid) or not group_gone(pid)] == []
        host, port = env["LG_COORDINATOR"].split(":")
        with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port)), timeout=10):
            pass
    finally:
        flagbench("box", "stop", "--name", name)
        shutil.rmtree(home, ignore_errors=True)
