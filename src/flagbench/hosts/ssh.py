"""One multiplexed OpenSSH connection to a host: run programs there, copy files there.

Use it like this (every call either works or raises HostError, a UserError whose
message is one line naming the host)::

    from flagbench.hosts.ssh import Connection
    with Connection("board") as host:          # DEST: an ssh alias, user@host, ssh://user@host:port
        done = host.run(["uname", "-m"], timeout=10)          # a procs.Done: returncode, stdout, ...
        remote = host.stage(Path("prog"))                      # copied once, by content, into host.dir
        done = host.run([remote, "t", "1000"], timeout=60, cpu=3)   # taskset -c 3 there
        host.copy(Path("vmlinuz"), f"{host.dir}/vmlinuz")      # any file, to any path
    # closed: the master connection ended, host.dir removed

- The client is OpenSSH's `ssh` on PATH, or the words of FLAGBENCH_SSH (as GIT_SSH_COMMAND:
  `FLAGBENCH_SSH="ssh -F my_config"`), so ProxyJump, agents and certificates work as for the
  user. One master connection per Connection (ControlMaster, its socket in a flagbench
  temporary directory), so a sample costs a channel, not a handshake. BatchMode: a host that
  wants a password is refused, not asked about.
- Every remote program runs under a guard (a POSIX sh script): when the program ends, when the
  connection's stdin reaches EOF (flagbench or the connection died: kill -9, SIGTERM) or when the
  guard's own timeout expires, it kills every process the program started, whatever session it
  moved to, then its own process group, so nothing flagbench ran keeps running there. How: the
  program gets a token in its environment (FLAGBENCH_GUARD, fresh per run, fixed length), which
  everything it starts inherits, setsid or not, as locally (procs.py); the guard ends every
  process whose /proc/PID/environ holds it, scans again until none is left, and reports any
  it could not end (the sample then fails). Not a cgroup: that needs root or a delegated
  subtree, which most hosts (dropbear boxes, a user's login) do not give. Not a walk of the
  process tree: a daemon that forked, setsid and let its parent exit hangs under init, no
  longer under the guard. A program that clears its environment for its children escapes,
  as it would here. A timed-out or lost run comes back as a Done whose `failure` says so.
- `host.dir` is the run's directory on the host (under $HOME/.flagbench, else /tmp/.flagbench),
  kept by a keeper shell that removes it when its connection ends, even when flagbench is
  killed with -9; directories of keepers that are gone are removed when a Connection opens.
- Copies go through the connection as `sh -c 'cat > tmp && mv tmp dest'`: no scp or sftp
  (dropbear boxes have neither server), only a POSIX sh, cat, grep, mv, chmod, rm and sleep there.
- What the login prints before a command (a chatty .bashrc, a ForceCommand banner) would be
  taken for the program's output: the keeper frames its answer with a marker line, and a host
  whose login prints anything before it is refused in one line naming what it printed.
- `run(..., guard=False)` runs without the guard (short probes); `reopen()` makes a new master
  connection to the same host (after a host dropped, or came back from a kexec).
"""
from __future__ import annotations

import hashlib
import math
import os
import secrets
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from flagbench import procs
from flagbench.errors import UserError
from flagbench.hosts import checks
from flagbench.textsafe import last_line

ENV_VAR = "FLAGBENCH_SSH"
CONNECT_TIMEOUT_S = 15     # TCP connect + authentication; a dead host fails well within 60 s
ALIVE_INTERVAL_S = 5       # keepalives: a host gone mid-run is noticed after ~3 missed ones
ALIVE_COUNT = 3
LOST_STATUS = 255          # what ssh exits with when the connection, not the program, failed
_MARK = "flagbench-guard-exit"
_DIR_MARK = "flagbench-dir"  # the keeper's answer: what comes before it is the login's
TOKEN_VAR = "FLAGBENCH_GUARD"   # as long as procs.OWNER_VAR: the same environment size as here
_GRACE_S = 15.0            # local timeout past the guard's own: the guard reports first

# $1 = timeout (s), $2 = the token, then the program's argv. fd 3 is the connection's stdin: its
# EOF means flagbench or the connection is gone. `end` kills every process carrying the token
# (whatever session it is in) until a scan finds none: L = how many the first scan found,
# S = how many still ran after the last (the sample fails). At a timeout or EOF the guard's own
# shell goes first (no exit line: a timeout, not the program's SIGKILL). `kill -KILL 0` then ends the
# guard's whole group (sshd makes each session its own). The program runs in / with a fixed,
# minimal environment (as locally); the load average before and after it rides on the exit line.
GUARD = f"""t=$1; k=$2; shift 2
exec 3<&0 </dev/null
end() {{
  L=0; i=0
  while :; do
    S=0
    for f in $(grep -l -s -F -e "{TOKEN_VAR}=$k" /proc/[0-9]*/environ 2>/dev/null); do
      p=${{f#/proc/}}; kill -KILL "${{p%/environ}}" 2>/dev/null; S=$((S + 1))
    done
    [ "$i" = 0 ] && L=$S
    if [ "$S" = 0 ] || [ "$i" -ge 40 ]; then return; fi
    i=$((i + 1)); sleep 0.05 2>/dev/null || sleep 1
  done
}}
{{ cat <&3 >/dev/null; kill -KILL $$; end; kill -KILL 0; }} 2>/dev/null &
{{ sleep "$t"; kill -KILL $$; end; kill -KILL 0; }} 3<&- >/dev/null 2>&1 &
cd /
read -r b _ </proc/loadavg 2>/dev/null || b=-
env -i PATH=/usr/bin:/bin LC_ALL=C {TOKEN_VAR}=$k "$@" 3<&-
r=$?
read -r a _ </proc/loadavg 2>/dev/null || a=-
end
printf '\\n{_MARK} %s %s %s %s %s\\n' "$r" "$b" "$a" "$L" "$S" >&2
kill -KILL 0
"""

# $1 = the run directory's parent. Removes directories whose keeper is gone, makes this run's,
# prints its path, then waits for the connection's end and removes it.
KEEPER = """b=$1
mkdir -p "$b" || exit 1
for d in "$b"/run-*; do
  [ -d "$d" ] || continue
  p=$(cat "$d/keeper" 2>/dev/null)
  if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null; then rm -rf "$d"; fi
done
d=$(mktemp -d "$b/run-XXXXXX" 2>/dev/null) || { d=$b/run-$$; mkdir "$d" || exit 1; }
echo $$ >"$d/keeper"
echo "flagbench-dir $d"
cat >/dev/null
rm -rf "$d"
"""
BASE = '${HOME:-/tmp}/.flagbench'
_COPY = 'cat >"$1.tmp" && chmod "$2" "$1.tmp" && mv -f "$1.tmp" "$1"'


class HostError(UserError):
    """A host that cannot be reached or used: one line naming it."""


class ConnectionLost(HostError):
    """A copy or fetch that failed because ssh lost the host (exit 255), not because of the file."""


@dataclass
class Done(procs.Done):
    """procs.Done of a remote program; `lost` says why the connection, not the program, failed."""
    lost: str | None = None
    load: tuple[float, float] | None = None   # the host's 1-minute load before and after
    survivors: str | None = None              # what the guard could not end (the run is not usable)

    @property
    def failure(self) -> str | None:
        return self.lost or self.survivors or super().failure


def ssh_command() -> list[str]:
    """The ssh client's argv: FLAGBENCH_SSH split into words, or ["ssh"]."""
    try:
        words = shlex.split(os.environ.get(ENV_VAR, "") or "ssh")
    except ValueError as e:   # an unbalanced quote
        raise UserError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r}: {e} (it is split into words as a shell would)") \
            from None
    if not words:
        raise UserError(f"{ENV_VAR} is empty")
    return words


def label(dest: str) -> str:
    """A short name for DEST in tables and cell keys (no '/', ':', ',', '=')."""
    name = dest.removeprefix("ssh://")
    return "".join(c if c.isalnum() or c in "@._-" else "_" for c in name) or "host"


class Connection:
    """A master ssh connection to DEST; see the module's docstring."""

    def __init__(self, dest: str, *, ssh: Sequence[str] | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT_S):
        self.where = checks.destination(dest)
        self.dest = dest
        self.name = label(dest)
        self.ssh = list(ssh) if ssh is not None else ssh_command()
        self.connect_timeout = connect_timeout
        self.dir: str | None = None
        self._tmp: Path | None = None
        self._master: procs.Proc | None = None
        self._keeper: procs.Proc | None = None
        self._staged: dict[str, str] = {}
        self._setsid = False       # the server's sessions share its process group (dropbear): guard with setsid

    # -- connection ------------------------------------------------------------------------------
    def open(self) -> "Connection":
        if self._tmp is None:
            procs.sweep(Path(tempfile.gettempdir()), "flagbench-ssh")
            self._tmp = Path(tempfile.mkdtemp(prefix=f"flagbench-ssh-{os.getpid()}-"))
        try:
            self._connect()
        except BaseException:
            self.close()
            raise
        return self

    @property
    def opened(self) -> bool:
        """open() succeeded (and close() has not been called since): reopen() it, not open()."""
        return self._tmp is not None

    def reopen(self) -> None:
        """A fresh master (and run directory) after the host dropped or rebooted."""
        self._stop_master()
        self._staged.clear()
        self._connect()

    def _connect(self) -> None:
        self._start_master()
        self._start_keeper()
        self._check_group()

    def close(self) -> None:
        self._stop_master()
        if self._tmp is not None:
            for entry in self._tmp.iterdir():
                entry.unlink(missing_ok=True)
            self._tmp.rmdir()
            self._tmp = None

    def __enter__(self) -> "Connection":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def socket(self) -> str:
        assert self._tmp is not None, "open the connection first"
        return str(self._tmp / "master")

    def _options(self) -> list[str]:
        port = ["-p", str(self.where.port)] if self.where.port else []
        return ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(int(self.connect_timeout), 1)}",
                "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
                "-o", f"ControlPath={self.socket}", *port]

    def _start_master(self) -> None:
        Path(self.socket).unlink(missing_ok=True)   # a master killed by a signal leaves its socket
        argv = [*self.ssh, *self._options(), "-o", "ControlMaster=yes", "-o", "ControlPersist=no",
                "-N", "--", self.where.target]
        try:
            self._master = procs.start(argv)
        except OSError as e:
            raise HostError(f"host {self.dest}: cannot run {self.ssh[0]}: {e.strerror or e}") from None
        deadline = time.monotonic() + self.connect_timeout + 10
        while time.monotonic() < deadline:
            if self._master.popen.poll() is not None:
                break
            if os.path.exists(self.socket) and self._check():
                return
            time.sleep(0.02)
        master, self._master = self._master, None
        master.stop()
        err = master.output()[1]
        raise HostError(f"host {self.dest}: unreachable: {last_line(err) or 'no answer'}")

    def _check(self) -> bool:
        done = procs.run([*self.ssh, *self._options(), "-O", "check", "--", self.where.target], timeout=5)
        return done.returncode == 0

    def _stop_master(self) -> None:
        if self._keeper is not None:
            self._keeper.popen.stdin.close()   # EOF: the keeper removes the run directory
            self._keeper.wait(timeout=5)
            self._keeper = None
        if self._master is not None:
            if self._master.popen.poll() is None:
                procs.run([*self.ssh, *self._options(), "-O", "exit", "--", self.where.target], timeout=5)
                self._master.wait(timeout=5)
            self._master.stop()
            self._master = None
        self.dir = None

    def _start_keeper(self) -> None:
        script = KEEPER.replace("$1", BASE, 1)
        self._keeper = procs.start(self._argv(["sh", "-c", script]), stdin=subprocess.PIPE)
        waited = self.connect_timeout + 10
        deadline = time.monotonic() + waited
        out = self._keeper._out.fileno()
        text = ""
        while time.monotonic() < deadline:
            ended = self._keeper.popen.poll() is not None
            text = os.pread(out, 65536, 0).decode(errors="replace")   # pread: the writer's offset stays
            lines = text.split("\n")
            marked = [i for i, line in enumerate(lines[:-1]) if line.startswith(_DIR_MARK + " ")]   # complete lines
            if marked:
                if checks.login_noise(lines[:marked[0]]):
                    break
                self.dir = lines[marked[0]][len(_DIR_MARK) + 1:].strip()
                return
            if ended:
                break
            time.sleep(0.01)
        keeper, self._keeper = self._keeper, None
        _stop(keeper)
        noise = checks.login_noise(text.split("\n"))
        if noise:
            raise HostError(checks.noise_refusal(self.dest, noise))
        err = last_line(keeper.output()[1])
        if keeper.popen.returncode in (None, -9) and not err:   # connected, but the command never started
            raise HostError(f"host {self.dest}: connected, but a command there did not start within {waited:g} s: "
                            f"its login is slow (a .bashrc or profile that waits?)")
        raise HostError(f"host {self.dest}: cannot make a directory under {BASE}: {err or 'no answer'}")

    def _check_group(self) -> None:
        """Dropbear runs a command in its connection's process group (OpenSSH's sshd gives each
        session its own): there the guard's `kill -KILL 0` would end the whole connection, so
        guarded programs start under setsid (no fork: the shell is not a group leader)."""
        done = self.shell('read -r _ _ _ _ g _ </proc/$$/stat && [ "$g" != "$$" ] && command -v setsid', timeout=30)
        self._setsid = done.returncode == 0 and bool(done.stdout.strip())

    def _argv(self, remote: Sequence[str]) -> list[str]:
        """ssh argv running REMOTE (each word quoted) through the master connection."""
        return [*self.ssh, *self._options(), "-o", "ControlMaster=no", "-T", "--", self.where.target,
                shlex.join(remote)]

    # -- programs --------------------------------------------------------------------------------
    def alive(self) -> bool:
        return self._master is not None and self._master.popen.poll() is None

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None, guard: bool = True,
            input: bytes | None = None) -> Done:
        """Run ARGV there (under the guard unless guard=False; on CPU with taskset). Never raises
        for the program's failure or a lost connection: see Done.failure."""
        if not self.alive():
            return _lost(argv, timeout, f"host {self.dest}: connection lost")
        words = [str(a) for a in argv]
        if cpu is not None:
            words = ["taskset", "-c", str(cpu), *words]
        if guard:   # the token: 24 hex digits, fresh per program (see the module docstring)
            words = ["sh", "-c", GUARD, "flagbench-guard", f"{max(timeout, 0.001):.3f}", secrets.token_hex(12),
                     *words]
            if self._setsid:
                words = ["setsid", *words]
        local_timeout = timeout + _GRACE_S if guard else timeout
        if input is None:
            # stdin stays open (a pipe only flagbench writes) until the program ends
            proc = procs.start(self._argv(words), stdin=subprocess.PIPE)
            try:
                code = proc.wait(timeout=local_timeout)
            finally:
                proc.popen.stdin.close()
            wall = time.perf_counter_ns() - proc.started
            out, err = proc.output()
        else:
            with tempfile.TemporaryFile() as f:
                f.write(input)
                f.seek(0)
                local = procs.run(self._argv(words), timeout=local_timeout, stdin=f)
            code, wall, out, err = local.returncode, local.wall_ns, local.stdout, local.stderr
        return self._result(tuple(words), code, out, err, wall, timeout, guard)

    def _result(self, argv, code, out, err, wall, timeout, guard) -> Done:
        if not guard:
            lost = f"host {self.dest}: {last_line(err) or 'connection lost'}" if code == LOST_STATUS else None
            return Done(argv, code, out, err, wall, timeout, lost)
        head, sep, tail = err.rpartition(f"\n{_MARK} ")
        if sep:
            words = tail.split()
            status = int(words[0]) if words and words[0].isdigit() and len(words[0]) < 4 else LOST_STATUS
            if status > 128 and status - 128 < 65:   # the shell's 128 + signal
                status = -(status - 128)
            left = words[4] if len(words) > 4 else "0"
            survivors = None if left == "0" else (f"{left if left.isdigit() else 'some'} processes it started "
                                                  f"still ran after it there and could not be ended")
            return Done(argv, status, out, head, wall, timeout, None, _loads(words[1:3]), survivors)
        if code is None or wall >= timeout * 1e9:
            return Done(argv, None, out, err, wall, timeout)    # the guard's (or our) timeout
        if not self.alive():
            return Done(argv, code, out, err, wall, timeout, f"host {self.dest}: connection lost")
        return Done(argv, code, out, err, wall, timeout,
                    f"host {self.dest}: {last_line(err) or f'ssh exit status {code}'}")

    def shell(self, script: str, *args: str, timeout: float = 30) -> Done:
        """A fixed sh SCRIPT with ARGS ($1...) there, unguarded (short probes)."""
        return self.run(["sh", "-c", script, "flagbench", *args], timeout=timeout, guard=False)

    # -- files -----------------------------------------------------------------------------------
    def copy(self, local: Path, remote: str, mode: str = "755", timeout: float = 600) -> None:
        """LOCAL's bytes to REMOTE (written to REMOTE.tmp, then renamed) through the connection."""
        with open(local, "rb") as f:
            done = procs.run(self._argv(["sh", "-c", _COPY, "flagbench", remote, mode]),
                             timeout=timeout, stdin=f)
        if done.returncode != 0:
            raise _file_error(done.returncode)(f"host {self.dest}: cannot copy {Path(local).name} to {remote}: "
                            f"{last_line(done.stderr) or done.failure}")

    def fetch(self, remote: str, local: Path, timeout: float = 600) -> None:
        """REMOTE's bytes into LOCAL (written to a temporary name, then renamed)."""
        tmp = Path(f"{local}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            proc = procs.start(self._argv(["cat", remote]), stdout=f)
            code = proc.wait(timeout=timeout)
            err = proc.output()[1]
        if code != 0:
            tmp.unlink(missing_ok=True)
            raise _file_error(code)(f"host {self.dest}: cannot fetch {remote}: "
                            f"{last_line(err) or ('timeout' if code is None else f'exit status {code}')}")
        os.replace(tmp, local)

    def stage(self, local: Path) -> str:
        """LOCAL in this run's directory there, named by its content (copied once)."""
        if self.dir is None:
            raise HostError(f"host {self.dest}: connection lost")
        data = Path(local).read_bytes()
        key = hashlib.sha256(data).hexdigest()[:20]
        if key not in self._staged:
            remote = f"{self.dir}/{key}-{Path(local).name}"
            self.copy(Path(local), remote)
            self._staged[key] = remote
        return self._staged[key]


def _file_error(code: int | None) -> type[HostError]:
    """A copy's or fetch's failure: ssh's own exit status means the host was lost, not the file."""
    return ConnectionLost if code == LOST_STATUS else HostError


def _stop(proc: procs.Proc) -> None:
    proc.stop()
    if proc.popen.stdin is not None:
        proc.popen.stdin.close()


def _lost(argv, timeout, why) -> Done:
    return Done(tuple(str(a) for a in argv), LOST_STATUS, "", "", 0, timeout, why)


def _loads(words: list[str]) -> tuple[float, float] | None:
    try:
        before, after = (float(w) for w in words)
    except ValueError:
        return None
    if not all(math.isfinite(x) and 0 <= x < 1e6 for x in (before, after)):   # what /proc/loadavg can say
        return None
    return before, after


