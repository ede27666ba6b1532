"""labgrid's client modules and the words flagbench says about a lab: the floor hosts/labgrid.py
(sessions, leases) and hosts/lab_state.py (what a killed run left held) both stand on.

    client, common, pb = api()       # labgrid.remote's client, common and protobuf modules
    address = coordinator()          # LG_COORDINATOR as HOST:PORT, checked (a UserError if not)
"""
from __future__ import annotations

import logging
import os
import urllib.parse

from flagbench.errors import UserError
from flagbench.hosts.ssh import HostError
from flagbench.textsafe import last_line

COORDINATOR_VAR = "LG_COORDINATOR"
DEFAULT_COORDINATOR = "127.0.0.1:20408"     # labgrid's own default
DEFAULT_PORT = 20408


class LabError(HostError):
    """The lab or one of its places cannot be used: one line naming it."""


def api():
    """labgrid's modules, or the one line that says how to get them."""
    # gRPC's fork handlers run in every child flagbench forks (compilers, ssh) while the
    # session's threads are in gRPC: they log, and crashed children (SIGSEGV before exec) here
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        from labgrid.remote import client, common
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb
    except ImportError as e:
        raise UserError(f"--place needs labgrid 26.0.1 (pip install 'flagbench[lab]'): {e}") from None
    return client, common, pb


def coordinator(value: str | None = None) -> str:
    """LG_COORDINATOR (or VALUE) as labgrid takes it, HOST[:PORT], checked here: labgrid's own
    parsing raises a ValueError on a port out of range or a bracket left open.

    >>> coordinator("10.0.0.1"), coordinator("[::1]:3000")
    ('10.0.0.1', '[::1]:3000')
    """
    address = value if value is not None else (os.environ.get(COORDINATOR_VAR) or DEFAULT_COORDINATOR)
    try:
        parts = urllib.parse.urlsplit(f"//{address}")
        parts.port         # raises on a port out of range or not a number
        ok = bool(parts.hostname) and not parts.path and not parts.query and not parts.fragment \
            and "@" not in address
    except ValueError:
        ok = False
    if not ok:
        raise UserError(f"{COORDINATOR_VAR}={address!r}: not HOST or HOST:PORT (a port 1-65535; "
                        f"IPv6 as [::1]:{DEFAULT_PORT})")
    if parts.port == 0:
        raise UserError(f"{COORDINATOR_VAR}={address!r}: port 0 is no coordinator's port")
    return address


class Quiet(logging.Handler):
    """labgrid's client logs its errors on the root logger ("ERROR:root:coordinator is
    unavailable: ..."), which prints them before flagbench's own line: they are kept here instead,
    the last one added to that line."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record) -> None:
        self.lines.append(last_line(record.getMessage(), ""))

    def __enter__(self) -> "Quiet":
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)


def one_line(e: BaseException) -> str:
    """An exception from labgrid or gRPC as one line of a message: its last line, or its type."""
    return last_line(str(e), type(e).__name__)


def ago(seconds: float) -> str:
    """
    >>> ago(42), ago(600), ago(7300)
    ('42 s', '10 min', '2.0 h')
    """
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
