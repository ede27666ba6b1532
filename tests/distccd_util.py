"""Throwaway distccd's (Debian's distcc) for the distcc tests: 127.0.0.1 only, a free port each,
their log in a file the test reads, stopped (with every worker they forked) by the test.

    with distccd(tmp_path / "a") as host:               # "127.0.0.1:PORT/2"
        ...
    with distccd(tmp_path / "old", compiler="gcc-11"):   # its gcc is another version
        ...
    compiles_done(tmp_path / "a")                       # COMPILE_OK jobs in that daemon's own log

Another machine's gcc, on this one: the daemon runs in a mount namespace of its own (root and
util-linux's unshare) where gcc's executable is bind-mounted over by a script running COMPILER,
so `gcc`, `x86_64-linux-gnu-gcc` and `/usr/bin/gcc` (what ccache sends) all run gcc-11 there,
and nothing changes outside. As root distccd drops to its own user: the script lives in a
world-readable directory of its own under /tmp, removed with the daemon.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from redis_util import free_port

LOG = "distccd.log"


def missing() -> str | None:
    if shutil.which("distccd") is None or shutil.which("distcc") is None:
        return "distcc is not installed (scripts/install-deps)"
    return None


@contextlib.contextmanager
def distccd(workdir: Path, *, compiler: str | None = None, slots: int = 2) -> Iterator[str]:
    """A distccd on 127.0.0.1; with COMPILER, every gcc it runs is that compiler instead."""
    why = missing()
    if why:
        pytest.skip(why)
    workdir.mkdir(parents=True, exist_ok=True)
    wrapper_dir, prefix = None, []
    if compiler:
        if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which(compiler) is None:
            pytest.skip(f"a distccd with another gcc needs root, unshare and {compiler}")
        wrapper_dir = Path(tempfile.mkdtemp(prefix="fb-distccd-"))
        wrapper_dir.chmod(0o755)
        wrapper = wrapper_dir / "gcc"
        wrapper.write_text(f"#!/bin/sh\nexec {os.path.realpath(shutil.which(compiler))} \"$@\"\n")
        wrapper.chmod(0o755)
        # unshare execs (no fork): the daemon is still our child, in its own session
        prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                  'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh",
                  str(wrapper), os.path.realpath(shutil.which("gcc"))]
    port = free_port()
    argv = [*prefix, "distccd", "--daemon", "--no-detach", "--log-stderr", "--log-level", "info",
            "--allow", "127.0.0.1", "--listen", "127.0.0.1", "--port", str(port), "--jobs", str(slots)]
    with open(workdir / LOG, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True,
                                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TMPDIR": "/tmp"})
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"distccd did not start: {(workdir / LOG).read_text()[-500:]}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}/{slots}"
    finally:
        _stop(proc)
        if wrapper_dir:
            shutil.rmtree(wrapper_dir, ignore_errors=True)


def _stop(proc: subprocess.Popen) -> None:
    """The daemon and its preforked workers (its process group), gone before we return."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while alive_in_group(proc.pid) and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.05)


def alive_in_group(pgid: int) -> list[int]:
    """Processes of group PGID that still run (zombies waiting for init to reap them do not)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def compiles_done(workdir: Path) -> int:
    """Compiles the daemon itself says it finished (its job summaries)."""
    return (workdir / LOG).read_text(errors="replace").count(" COMPILE_OK ")
