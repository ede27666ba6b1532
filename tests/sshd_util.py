"""A real OpenSSH server on 127.0.0.1 standing in for a test box.

    from sshd_util import sshd_server            # or the `sshd` fixture (tests/test_hosts*.py)
    with sshd_server(tmp_path / "box", alias="box") as box:
        env = {"FLAGBENCH_SSH": box.ssh_env}      # "ssh -F CONFIG": the alias resolves through it
        subprocess.run([*box.ssh, "box", "uname", "-m"])
        box.kill_sessions()                       # the host "drops": every connection is cut
    # stopped: listener and every session it started are killed

Debian's /usr/sbin/sshd runs in the foreground (-D -e) on a free port with a host key, an
authorized key and a config made here (StrictModes no, root by key only: the tests run as
root). Sessions get HOME = DIR/home (SetEnv), so the box's files stay under DIR. The client
config (DIR/ssh_config) names the server ALIAS, with its own identity and known_hosts.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

SSHD = "/usr/sbin/sshd"


class SshClient:
    """`ssh -F CONFIG` for a test server (`config`: the client's file): argv, and FLAGBENCH_SSH's value."""

    @property
    def ssh(self) -> list[str]:
        return ["ssh", "-F", str(self.config)]

    @property
    def ssh_env(self) -> str:
        return f"ssh -F {self.config}"

    def logged_ssh_env(self, log: Path) -> str:
        return logged_ssh(log, self.ssh)


def logged_ssh(log: Path, ssh: list[str]) -> str:
    """FLAGBENCH_SSH for the ssh argv SSH through a wrapper that appends each ssh argv to LOG
    (a JSON list a line) before running it: `remote_commands(LOG)` reads back what ran there."""
    wrapper = Path(log).with_suffix(".py")
    wrapper.write_text(_LOGGING_SSH)
    return shlex.join([sys.executable, str(wrapper), str(log), *ssh])


# argv: LOG SSH-ARGV...; the ssh's own options follow (flagbench's), then "--", DEST, the command
_LOGGING_SSH = """import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(sys.argv[2:]) + "\\n")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def remote_commands(log: Path) -> list[str]:
    """The commands run on the server through a logged_ssh_env wrapper, in order (the master
    connection and its -O checks, which run nothing there, left out)."""
    out = []
    for line in Path(log).read_text().splitlines():
        argv = json.loads(line)
        if "--" in argv:
            rest = argv[argv.index("--") + 2:]
            if rest:
                out.append(" ".join(rest))
    return out


@dataclass
class Box(SshClient):
    dir: Path
    alias: str
    port: int
    config: Path          # the client's config file (ssh -F)
    home: Path            # HOME of the sessions there
    proc: subprocess.Popen

    def descendants(self) -> list[int]:
        """Every live process the server started (connections, sessions, programs)."""
        return _descendants(self.proc.pid)

    def kill_sessions(self) -> None:
        """Cut every connection (and what runs in it); the listener stays."""
        for pid in self.descendants():
            _kill(pid)

    def stop(self) -> None:
        """Cut every connection and stop listening (a host that went away)."""
        pids = self.descendants()
        _kill(self.proc.pid)
        for pid in pids:
            _kill(pid)
        self.proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def sshd_server(dir: Path, alias: str = "box") -> Iterator[Box]:
    dir = Path(dir)
    home = dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)    # sshd's privilege-separation directory
    for name in ("host_key", "id"):
        if not (dir / name).exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(dir / name)], check=True)
    (dir / "authorized_keys").write_text((dir / "id.pub").read_text())
    port = free_port()
    (dir / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {dir / 'host_key'}\n"
        f"AuthorizedKeysFile {dir / 'authorized_keys'}\nPidFile none\nStrictModes no\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nMaxSessions 100\nMaxStartups 100\nSetEnv HOME={home}\nLogLevel ERROR\n")
    host_pub = (dir / "host_key.pub").read_text().split()
    (dir / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    config = dir / "ssh_config"
    config.write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {dir / 'id'}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {dir / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
        "  LogLevel ERROR\n")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(dir / "sshd_config")], stdin=subprocess.DEVNULL,
                            stderr=open(dir / "sshd.log", "ab"))   # our session: procs leaves it alone
    box = Box(dir, alias, port, config, home, proc)
    try:
        _wait_listening(box)
        yield box
    finally:
        if proc.poll() is None:
            box.stop()


def _wait_listening(box: Box, within: float = 20) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if box.proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(box.dir / 'sshd.log').read_text()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", box.port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("sshd does not answer")


def running(exe_prefix: str, arg: str | None = None) -> list[int]:
    """Live processes whose executable path starts with EXE_PREFIX (and, given ARG, whose argv
    holds it). Read from /proc/PID/exe first: `ps` reads every process's argv, and that blocks
    behind a process stuck in exec or a core dump (other tests on the machine make those)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry}/exe")
            if not exe.startswith(exe_prefix):
                continue
            if arg is not None and arg.encode() not in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0"):
                continue
            if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        out.append(int(entry))
    return out


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
