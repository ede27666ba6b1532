"""The one wait for a machine to come up: a kexec'd host (hosts/kexec.py), a lab board power
cycled into an image (hosts/lab_boot.py), the qemu box booting (run/guest/box.py).

    version, seconds = wait_for_boot(conn, lambda v: build.identity in v, within=300,
                                     what="answer as fb-1234", who="host box")

Every half second: a fresh master connection (the machine rebooted: the old one is dead),
then `cat /proc/version` there; ANSWERED takes the version (it may raise: the wrong kernel
came up) and says whether this is the one waited for. GONE, when given, says why waiting is
pointless (the box's qemu exited) or None. A HostError names WHO, WHAT it did not do within
the time and the last ssh error.
"""
from __future__ import annotations

import time
from typing import Callable

from flagbench.hosts.ssh import Connection, HostError

PAUSE_S = 0.5


def wait_for_boot(conn: Connection, answered: Callable[[str], bool], *, within: float, what: str, who: str,
                  started: float | None = None, gone: Callable[[], str | None] | None = None) -> tuple[str, float]:
    """/proc/version once CONN answers and ANSWERED takes it, and the seconds since STARTED
    (default: now). CONN is opened here if it never was, else reopened each try."""
    started = time.monotonic() if started is None else started
    last = "no answer yet"
    while time.monotonic() < started + within:
        time.sleep(PAUSE_S)
        if gone is not None:
            why = gone()
            if why:
                raise HostError(why)
        try:
            if conn.opened:
                conn.reopen()
            else:
                conn.open()
            done = conn.shell("cat /proc/version", timeout=30)
            if done.failure:
                raise HostError(f"host {conn.dest}: {done.failure}")
        except HostError as e:
            last = str(e)
            continue
        version = done.stdout.strip()
        if answered(version):
            return version, time.monotonic() - started
    raise HostError(f"{who} did not {what} within {within:g} s; last ssh error: {last}")
