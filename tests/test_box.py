"""`flagbench box start|stop|status|ssh-config` and `flagbench doctor --host` on it: the qemu
kexec box a user tries the real-machine path on (flagbench.run.guest.box, the one the kexec tests
boot). Oracles: /proc (qemu's process there while the box runs, gone after stop), plain OpenSSH
with the printed config, and the box's own /proc/sys/kernel/kexec_load_disabled."""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench

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
        said = subprocess.run([*ssh, name, "cat /proc/sys/kernel/kexec_load_disabled; id -u"],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert said.returncode == 0 and said.stdout.split() == ["0", "0"], said.stderr

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


def test_box_name_is_checked():
    done = flagbench("box", "status", "--name", "../x")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "box name" in done.stderr
