"""Process supervision: nothing flagbench starts outlives it, its timeout or a signal.

Every program flagbench runs (compilers, harnesses, callgrind, qemu-user, will-it-scale
drivers, make and qemu-system for kernels) goes through `run` (wait for it, with a hard
wall-time bound) or `start` (a handle for programs read while they run). Each child

- runs in its own session and process group, so one kill reaches all it forked;
- has PR_SET_PDEATHSIG = SIGKILL, so it dies if flagbench dies, even by kill -9
  (the signal follows the *thread* that started it: call `run`/`start` from a thread
  that lives at least as long as the child);
- writes stdout/stderr to files, not pipes, so a grandchild that keeps a pipe open
  cannot make flagbench wait for it.

flagbench itself is a child subreaper (PR_SET_CHILD_SUBREAPER): a grandchild that
leaves its group (setsid, a daemon) is reparented to flagbench instead of init, and is
killed when the program that started it ends. `install()` turns that on and handles
SIGTERM, SIGHUP and SIGINT: every live child tree is killed and `Terminated` (a
KeyboardInterrupt) is raised in the main thread, so `finally` blocks remove temporary
directories and the store keeps every sample; the CLI then exits 128 + the signal.

A parent-death signal reaches only the direct child, and a kill -9 leaves flagbench no
time to kill anything. So every child also carries a token in its environment
(FLAGBENCH_OWNER=<pid><start time>, fixed-length: the environment's size moves instruction
counts), inherited by all it starts, setsid or not; and a watchdog process (in its own
session, not a child that dies with flagbench) holds a pipe from flagbench: when flagbench
is gone, for whatever reason, it kills every process that carries its token. As a
backstop, `install()` kills the leftovers of dead flagbenches, and `take_over(record)`
ends what the last owner of a resource (a kernel build's O= directory) left running.

>>> done = run(["/bin/sh", "-c", "echo hi; exit 3"], timeout=10)
>>> done.returncode, done.stdout, done.failure
(3, 'hi\\n', 'exit status 3')
>>> run(["/bin/sleep", "5"], timeout=0.2).failure
'timeout after 0.2 s'
"""
from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_libc = ctypes.CDLL(None, use_errno=True)
_lock = threading.RLock()        # Popen creation vs orphan scans: a fresh child is never an "orphan"
_live: dict[int, "Proc"] = {}    # pid -> handle of every child started here and not yet ended
_subreaper = False
_terminating: int | None = None  # the signal being handled: no new program starts
_previous: dict = {}              # the handlers install() replaced, for uninstall()
_forking = False                 # the main thread is inside Popen: at-fork hooks may be running
OWNER_VAR = "FLAGBENCH_OWNER"
DETACHED_VAR = "FLAGBENCH_DETACHED"   # a server started to outlive flagbench (`detached`)
_tokens: dict[int, str] = {}
_watch: dict = {}                # {"pid": our pid, "proc": the watchdog's Popen, "fd": the pipe we hold}


class Terminated(KeyboardInterrupt):
    """flagbench got SIGTERM, SIGHUP or SIGINT; its children are already dead."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


@dataclass
class Done:
    """How a program ended. `returncode` None: killed at its deadline."""
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    wall_ns: int
    timeout: float | None

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def failure(self) -> str | None:
        """None when it exited 0, else "timeout after N s", "SIGSEGV", "exit status 3"."""
        if self.returncode is None:
            return f"timeout after {self.timeout:g} s"
        if self.returncode < 0:
            return signal_name(-self.returncode)
        return f"exit status {self.returncode}" if self.returncode else None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Deadline:
    """A wall-time budget shared by several programs (a counted cell runs two)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.0)


def install() -> None:
    """Make this process a subreaper and route SIGTERM/SIGHUP/SIGINT through `Terminated`.
    Call once, from the main thread, before starting anything (the CLI verbs that run
    programs do)."""
    global _subreaper
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
        _subreaper = True
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            previous = signal.signal(signum, _on_signal)
            if previous is not _on_signal:
                _previous[signum] = previous
    if not _tokens:   # once: what dead flagbenches left running (a scan of /proc, ~50 ms)
        sweep_leftovers()
        _token()


def _on_signal(signum, frame) -> None:
    global _terminating
    _terminating = signum
    kill_all()
    if _forking:   # an exception raised inside an at-fork hook (logging's lock) is lost: Proc raises it
        return
    raise Terminated(signum)


def forget_signal() -> None:
    """Let programs start again for good: a process that goes on after a handled signal (a test
    that interrupts a run in-process, then resumes it as a new command would)."""
    global _terminating
    _terminating = None


def uninstall() -> None:
    """Undo install() in a process that goes on with other work (a test suite): no longer a
    subreaper, whose kill_orphans would take the servers it started itself for orphans,
    the signal handlers it had before, no signal pending."""
    global _subreaper
    if _subreaper:
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        _subreaper = False
    if threading.current_thread() is threading.main_thread():
        for signum, handler in _previous.items():
            signal.signal(signum, handler)
    _previous.clear()
    forget_signal()


@contextmanager
def after_signal() -> Iterator[int | None]:
    """Inside: programs may start again after a signal, for a cleanup that must run some
    (kexec a host back into its own kernel); it yields the signal (None: there was none), so
    a cleanup can be brief after one. The signal is still the caller's to re-raise; a second
    one inside raises Terminated as usual."""
    global _terminating
    saved, _terminating = _terminating, None
    try:
        yield saved
    finally:
        _terminating = _terminating or saved


def _child_setup(cpu: int | None, parent: int):
    def setup():   # runs in the child between fork and exec: async-signal-safe calls only
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:     # the parent died before prctl took effect
            os._exit(137)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
    return setup


def _capture(name: str):
    """A file in memory for what a program writes: in TMPDIR, a full disk would swallow the very
    message that says so ("No space left on device")."""
    return open(os.memfd_create(f"flagbench-{name}", os.MFD_CLOEXEC), "w+b")


class Proc:
    """A running program in its own process group; `stop()` kills the whole tree."""

    def __init__(self, argv: Sequence[str], *, cwd=None, env: Mapping[str, str] | None = None,
                 cpu: int | None = None, stdin=subprocess.DEVNULL, stdout=None, stderr=None):
        if _terminating is not None:
            raise Terminated(_terminating)
        self.argv = tuple(str(a) for a in argv)
        self._out = stdout if stdout is not None else _capture("stdout")
        self._err = stderr if stderr is not None else _capture("stderr")
        self._own_files = (stdout is None, stderr is None)
        env = {**(os.environ if env is None else env), OWNER_VAR: _token()}
        env.pop(DETACHED_VAR, None)    # what flagbench runs is never one of the servers it keeps
        _watchdog()
        self.started = time.perf_counter_ns()
        global _forking
        main = threading.current_thread() is threading.main_thread()
        with _lock:
            _forking = _forking or main
            try:
                self.popen = subprocess.Popen(self.argv, cwd=cwd, env=env,
                                              stdin=stdin, stdout=self._out, stderr=self._err,
                                              start_new_session=True,
                                              preexec_fn=_child_setup(cpu, os.getpid()))
                _live[self.popen.pid] = self
            finally:
                if main:
                    _forking = False
        self.pid = self.popen.pid
        if _terminating is not None:   # the signal came while forking
            self.stop()
            raise Terminated(_terminating)

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None when it still ran at `timeout` (then it is killed).
        The group and any orphan it left are killed either way."""
        try:
            code = self.popen.wait() if self.exited(timeout) else None
        except BaseException:
            self.stop()
            raise
        self.stop()
        return code

    def exited(self, timeout: float | None) -> bool:
        """Wait until the program exits (True) or `timeout` passes (False), without reaping it.
        A pidfd wakes at the exit; Popen.wait(timeout) polls with sleeps of up to 50 ms, which
        would add tens of milliseconds to every wall time measured."""
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            try:
                self.popen.wait(timeout=None if timeout is None else max(timeout, 0.0))
                return True
            except subprocess.TimeoutExpired:
                return False
        try:
            wait = None if timeout is None else max(timeout, 0.0)
            return bool(select.select([fd], [], [], wait)[0])
        finally:
            os.close(fd)

    def stop(self) -> None:
        """Kill the process group, reap the child, kill orphans reparented to us, and wait
        (a little) until the rest of the group is gone too."""
        kill_group(self.pid)
        try:
            self._reap()
        finally:
            with _lock:
                _live.pop(self.pid, None)
            kill_orphans()
            _wait_group_gone(self.pid)

    def _reap(self) -> None:
        """Wait for the (killed) child without Popen's lock: a signal handler that raised just
        after Popen.wait took it leaves it held, and Popen.wait() would then block forever."""
        if self.popen.returncode is not None:
            return
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:   # Popen reaped it already
            return
        self.popen.returncode = os.waitstatus_to_exitcode(status)

    def output(self) -> tuple[str, str]:
        """What it wrote (call after it ended)."""
        texts = []
        for f in (self._out, self._err):
            try:
                f.seek(0)
                texts.append(f.read().decode(errors="replace"))
            except (AttributeError, OSError, ValueError):
                texts.append("")
        for own, f in zip(self._own_files, (self._out, self._err)):
            if own:
                f.close()
        return texts[0], texts[1]

    def __enter__(self) -> "Proc":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(argv: Sequence[str], **kw) -> Proc:
    """Start a program (see Proc); use it as a context manager so it is always stopped."""
    return Proc(argv, **kw)


def run(argv: Sequence[str], *, timeout: float, cwd=None, env: Mapping[str, str] | None = None,
        cpu: int | None = None, stdin=subprocess.DEVNULL) -> Done:
    """Run a program to its end, or kill it with all it started after `timeout` seconds
    of wall time. Never raises for the program's own failure (see Done.failure); OSError
    when it cannot be started."""
    proc = Proc(argv, cwd=cwd, env=env, cpu=cpu, stdin=stdin)
    code = proc.wait(timeout=max(timeout, 0.0))
    wall = time.perf_counter_ns() - proc.started
    out, err = proc.output()
    return Done(proc.argv, code, out, err, wall, timeout)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_group_gone(pgid: int, within: float = 1.0) -> None:
    """SIGKILL is delivered asynchronously: a grandchild still in the group may run a moment
    after the child is reaped. Wait until the group is empty (its last members reaped by us as
    subreaper, or by init), for at most WITHIN seconds."""
    end = time.monotonic() + within
    while True:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if time.monotonic() > end:
            return
        kill_orphans()
        time.sleep(0.002)


def kill_all() -> None:
    """Kill every live child tree (signal handlers, exit paths)."""
    with _lock:
        pids = list(_live)
    for pid in pids:
        kill_group(pid)
    kill_orphans()


def kill_orphans() -> None:
    """Kill and reap processes reparented to us (we are a subreaper) that no live handle
    owns: what a program left behind after leaving its process group. Children that
    share our own session were started by other means (a forked reader) and are left alone."""
    if not _subreaper:
        return
    me, session = os.getpid(), os.getsid(0)
    with _lock:
        owned = set(_live) | ({_watch["proc"].pid} if _watch.get("pid") == me else set())
        orphans = [pid for pid in _children(me) if pid not in owned and _sid(pid) not in (session, None)
                   and not _detached(pid)]
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def detached(argv: Sequence[str], *, cwd=None, env: Mapping[str, str] | None = None,
             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    """Start a server meant to outlive flagbench (the box's qemu, its lab's coordinator and
    exporter): its own session, no parent-death signal, no owner token (no watchdog or sweep
    ends it) and FLAGBENCH_DETACHED in its environment, so `kill_orphans` leaves it alone, also
    once it is reparented to a flagbench that is a subreaper (started by a program flagbench ran,
    such as a power command labgrid runs). Whoever starts it stops it, by pid and start time.
    Without the mark, the first program flagbench ran after it (an ssh -O check) ended it as an
    orphan: a plain Popen'd child in another session is just what kill_orphans looks for. Its
    output goes to STDOUT/STDERR (a log file; default nowhere: never a pipe of flagbench's)."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != OWNER_VAR}
    env[DETACHED_VAR] = "1"
    return subprocess.Popen([str(a) for a in argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=stderr, start_new_session=True)


def _detached(pid: int) -> bool:
    """PID was started by `detached` (its mark, and no owner's token)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{DETACHED_VAR}=1".encode() in env and not any(e.startswith(f"{OWNER_VAR}=".encode()) for e in env)


def _children(parent: int) -> list[int]:
    try:
        text = Path(f"/proc/{parent}/task/{parent}/children").read_text()
        threads = [t for t in os.listdir(f"/proc/{parent}/task") if t != str(parent)]
    except OSError:
        threads, text = [], ""
    pids = [int(p) for p in text.split()]
    for tid in threads:    # a reparented orphan may hang under any of our threads
        try:
            pids += [int(p) for p in Path(f"/proc/{parent}/task/{tid}/children").read_text().split()]
        except OSError:
            pass
    return sorted(set(pids))


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


# -- what outlives a kill -9: the token and the watchdog -----------------------------------------

def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (pid and this name one process)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _token() -> str:
    """This process's token: 24 hex digits, whatever the pid and start time."""
    pid = os.getpid()
    if pid not in _tokens:
        _tokens[pid] = f"{pid:08x}{(_start_time(pid) or 0) & (2**64 - 1):016x}"
    return _tokens[pid]


def _owner_alive(token: str) -> bool:
    try:
        pid, start = int(token[:8], 16), int(token[8:], 16)
    except ValueError:
        return False
    return _start_time(pid) == start


def tokened() -> dict[int, str]:
    """pid -> owner token of every process here that carries one (those we may read)."""
    key = f"{OWNER_VAR}=".encode()
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(key):
                out[int(name)] = item[len(key):].decode(errors="replace")
    return out


def end_owned_by(token: str, within: float = 10.0) -> list[int]:
    """SIGKILL every process carrying TOKEN (again, until a scan finds none: a dying make may
    still fork); the pids found."""
    found: list[int] = []
    end = time.monotonic() + within
    while time.monotonic() < end:
        pids = [pid for pid, t in tokened().items() if t == token and pid != os.getpid() and _running(pid)]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        found += [p for p in pids if p not in found]
        time.sleep(0.01)
    return sorted(found)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def sweep_leftovers() -> list[int]:
    """Kill what flagbenches that are no longer running left behind (their watchdog died too)."""
    dead = {t for t in tokened().values() if not _owner_alive(t)}
    return [pid for t in sorted(dead) for pid in end_owned_by(t)]


def record_owner(record: Path) -> None:
    """Write this process's token to RECORD (a resource it is about to use)."""
    tmp = record.with_name(f".{record.name}.{os.getpid()}")
    tmp.write_text(_token() + "\n")
    os.replace(tmp, record)


def take_over(record: Path) -> list[int]:
    """Before using a resource whose last user is named in RECORD (call it under the resource's
    lock): if that flagbench is dead, end every process it left (a make still compiling in a
    kernel's O= directory); then RECORD names this process. The pids ended."""
    try:
        last = record.read_text().strip()
    except OSError:
        last = ""
    ended = end_owned_by(last) if last and last != _token() and not _owner_alive(last) else []
    record_owner(record)
    return ended


# Runs in the watchdog (python -I -S -c): argv[1] is the token; stdin is the pipe from
# flagbench, which nobody else holds. EOF: flagbench is gone; kill what carries the token.
_WATCHDOG = """
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
while os.read(0, 4096):
    pass
key = ("FLAGBENCH_OWNER=" + sys.argv[1]).encode()
for _ in range(1000):
    found = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if key in f.read().split(b"\\0"):
                    os.kill(int(name), signal.SIGKILL)
                    found += 1
        except OSError:
            pass
    if not found:
        break
    time.sleep(0.01)
"""


def _watchdog() -> None:
    """Start this process's watchdog once (again in a forked child that starts programs)."""
    with _lock:
        if _watch.get("pid") == os.getpid():
            return
        r, w = os.pipe()
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG, _token()], stdin=r,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                                    start_new_session=True, env={})
        except OSError:    # no watchdog: the token and the next run's sweep remain
            os.close(w)
            return
        finally:
            os.close(r)
        _watch.update(pid=os.getpid(), proc=proc, fd=w)


def adopt_environment() -> None:
    """Programs a library starts itself (labgrid's QEMUDriver runs qemu with its own Popen) carry
    this process's owner token from now on: the watchdog, and the next run's sweep, end them
    after a kill -9 as they end what `start` started."""
    os.environ[OWNER_VAR] = _token()
    _watchdog()


def watchdog_pid() -> int | None:
    return _watch["proc"].pid if _watch.get("pid") == os.getpid() else None


def _forget_watchdog_in_child() -> None:
    """A forked child must not hold the pipe (flagbench's death would go unseen while it runs)."""
    fd = _watch.pop("fd", None)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    _watch.clear()


os.register_at_fork(after_in_child=_forget_watchdog_in_child)


# -- directories that die with their owner -------------------------------------------------------

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(parent: Path, prefix: str) -> None:
    """Remove `prefix-PID-*` entries of `parent` whose PID is dead (left by a kill -9)."""
    try:
        entries = list(Path(parent).glob(f"{prefix}-*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(prefix) + 1:].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


@contextmanager
def owned_dir(prefix: str, parent: Path | None = None) -> Iterator[Path]:
    """A temporary directory `PARENT/PREFIX-PID-XXXX`, removed on exit; ones a killed
    flagbench left behind are removed the next time one is made."""
    parent = Path(parent or tempfile.gettempdir())
    sweep(parent, prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
