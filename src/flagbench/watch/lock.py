"""One watcher per repository and experiment: an flock on a file in flagbench's cache that
also says who holds it (pid, host, since, command), for the second watcher's one line."""
from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

from flagbench.errors import UserError


@contextmanager
def held(path: Path, what: str):
    """Hold PATH's lock while the block runs; UserError naming the holder if another has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            try:
                who = json.loads(f.read() or "{}")
            except ValueError:
                who = {}
            raise UserError(f"{what} is watched already: pid {who.get('pid', '?')} on {who.get('host', '?')} "
                            f"since {who.get('since', '?')} ({who.get('command', '?')}); lock {path}") from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                            "since": datetime.datetime.now().isoformat(timespec="seconds"),
                            "command": " ".join(["flagbench", *sys.argv[1:]])[:200]}))
        f.flush()
        yield
    finally:
        f.close()   # closing drops the lock
