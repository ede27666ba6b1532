"""The box's state on disk (run/guest/box.py): DIR/state.json, read and checked; DIR/start.lock,
one `box start` at a time; its qemu found, checked by pid and start time (a reused pid is never
hit) and stopped with its process group.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from pathlib import Path

from flagbench.errors import UserError

QEMU = "qemu-system-x86_64"
STATE = "state.json"
LOCK = "start.lock"


class BoxStateError(UserError):
    """DIR/state.json cannot be read as a box's state: one line, and how to clear it."""


def read_state(dir: Path) -> dict | None:
    """DIR's state.json, checked: None when there is none; BoxStateError when it is damaged."""
    path = Path(dir) / STATE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise BoxStateError(f"{path}: {e.strerror or e}: `flagbench box stop` clears it") from None
    try:
        state = json.loads(text)
        if not isinstance(state, dict):
            raise ValueError("not an object")
        for key in ("pid", "port"):
            if type(state.get(key)) is not int or state[key] <= 0:
                raise ValueError(f"{key!r} is not a number")
        if state.get("start_time") is not None and type(state["start_time"]) is not int:
            raise ValueError("'start_time' is not a number")
        if not isinstance(state.get("alias", "box"), str):
            raise ValueError("'alias' is not a name")
    except ValueError as e:
        name = Path(dir).name
        raise BoxStateError(f"{path} is damaged ({e}): `flagbench box stop{'' if name == 'box' else ' --name ' + name}` "
                            "clears it") from None
    return state


def unfinished(dir: Path) -> str | None:
    """Why DIR holds a box that is not one: a start still running (its pid), or a start that
    was killed before the box was ready while its qemu runs on; None otherwise."""
    holder = starting(dir)
    if holder:
        return f"being started by {holder}"
    state = read_state(dir)
    if state and not state.get("ready") and qemu_alive(Path(dir), state["pid"], state.get("start_time")):
        return (f"a start was stopped before the box was ready (its qemu, pid {state['pid']}, still runs: "
                "`box stop` ends it, `box start` starts over)")
    return None


def starting(dir: Path) -> str | None:
    """Who holds DIR's start lock ("pid N (flagbench box start)"), or None when nobody does."""
    path = Path(dir) / LOCK
    if not path.exists():
        return None
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            return f.read().strip() or "another process"
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


class StartLock:
    """DIR's start lock, held by this process for one `start` (the file names its pid); a second
    start is told who holds it, at once."""

    def __init__(self, dir: Path):
        self.path = Path(dir) / LOCK

    def __enter__(self) -> "StartLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            who = self.file.read().strip() or "another process"
            self.file.close()
            raise UserError(f"the box in {self.path.parent} is being started by {who}: "
                            "wait for it (`flagbench box status`)") from None
        self.file.truncate(0)
        self.file.write(f"pid {os.getpid()} (flagbench box start, since {time.strftime('%H:%M:%S')})\n")
        self.file.flush()
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()        # the lock goes with the file; a kill -9 lets it go as well


def write_state(dir: Path, state: dict) -> None:
    tmp = dir / f".{STATE}.{os.getpid()}"
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, dir / STATE)


def stop(dir: Path) -> bool:
    """Kill the box's qemu (its whole process group) and wait until it is gone; False: none ran.
    A damaged state.json is cleared: the box's qemu is then found by its command line."""
    dir = Path(dir)
    try:
        state = read_state(dir)
        pids = [(state["pid"], state.get("start_time"))] if state else []
    except BoxStateError:
        pids = [(pid, None) for pid in qemus_of(dir)]
    alive = False
    for pid, start_time in pids:
        if qemu_alive(dir, pid, start_time):
            alive = True
            kill(pid)
    (dir / STATE).unlink(missing_ok=True)
    return alive


def kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 30
    while start_time_of(pid) is not None and time.monotonic() < end:
        try:   # our child (tests, box start that failed): reap it
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            pass
        time.sleep(0.05)


def qemus_of(dir: Path) -> list[int]:
    """The pids of qemus running on DIR's files (its state lost)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and qemu_alive(dir, int(entry.name)):
            out.append(int(entry.name))
    return out


def start_time_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def qemu_alive(dir: Path, pid: int, start_time: int | None = None) -> bool:
    """PID is this box's qemu: alive (not a zombie), started when recorded, running QEMU on DIR's files."""
    now = start_time_of(pid)
    if now is None or (start_time is not None and now != start_time):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return Path(argv[0].decode(errors="replace")).name == QEMU and any(str(dir).encode() in a for a in argv)
