"""A throwaway redis-server (Debian's) for ccache's remote storage: 127.0.0.1 only, a free
port, no persistence, its files under the test's directory, stopped by the test.

    with redis_server(tmp_path) as url:      # "redis://127.0.0.1:PORT"
        ...
    keys(url)                                # how many entries ccache stored
    redis_server(tmp_path, password="pw")    # AUTH required (the URL does not carry it)
"""
from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import stop_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ask(port: int, command: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(command)
        return s.recv(256)


@contextlib.contextmanager
def redis_server(workdir: Path, password: str | None = None) -> Iterator[str]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (scripts/install-deps)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(workdir), "--protected-mode", "yes", *(["--requirepass", password] if password else [])]
    with open(workdir / "redis.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if _ask(port, b"PING\r\n").startswith((b"+PONG", b"-NOAUTH")):
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {(workdir / 'redis.log').read_text()[-500:]}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        stop_server(proc)


def keys(url: str) -> int:
    """DBSIZE of the server at URL."""
    reply = _ask(int(url.rsplit(":", 1)[1]), b"DBSIZE\r\n")
    return int(reply.strip()[1:])
