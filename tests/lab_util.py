"""A labgrid lab on 127.0.0.1 for tests: labgrid's own coordinator and exporter (PyPI labgrid
26.0.1, from the venv), places made with labgrid-client as a lab admin makes them.

    with test_lab(tmp_path / "lab") as lab:                 # coordinator ready, stopped after
        lab.export("exp1", {"board": {"NetworkService": {"address": "127.0.0.1", "port": 2222,
                                                         "username": "root"}}})
        lab.place("b1", "exp1/board/*", arch="x86_64")      # create + add-match + set-tags
        lab.client("-p", "b1", "acquire", user="alice")     # another user holds it
        lab.acquired("b1")                                  # "host/user" or None, the coordinator's word
        env = lab.env                                       # LG_COORDINATOR for flagbench
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from conftest import stop_server
from sshd_util import free_port

BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (make venv installs flagbench[lab]: labgrid 26.0.1)")
    return str(path)


@dataclass
class TestLab:
    dir: Path
    address: str
    coordinator: subprocess.Popen
    exporters: dict = field(default_factory=dict)

    __test__ = False

    @property
    def env(self) -> dict:
        return {"LG_COORDINATOR": self.address}

    def client(self, *args: str, user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, **self.env, **({"LG_USERNAME": user} if user else {})}
        env.pop("LG_ENV", None)
        done = subprocess.run([_tool("labgrid-client"), *args], capture_output=True, text=True, env=env,
                              timeout=60, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise AssertionError(f"labgrid-client {' '.join(args)}: {done.stderr}")
        return done

    def export(self, name: str, config: dict) -> None:
        """An exporter NAME exporting CONFIG (group -> resources), once its resources are seen."""
        import yaml
        path = self.dir / f"exporter-{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        log = open(self.dir / f"exporter-{name}.log", "ab")
        proc = subprocess.Popen([_tool("labgrid-exporter"), "-c", self.address, "-n", name, "--hostname",
                                 "127.0.0.1", str(path)], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.exporters[name] = proc
        group = next(iter(config))
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise RuntimeError(f"exporter {name} exited: {(self.dir / f'exporter-{name}.log').read_text()}")
            if f"{name}/{group}/" in self.client("resources", check=False).stdout:
                return
            time.sleep(0.2)
        raise RuntimeError(f"exporter {name}'s resources did not appear")

    def stop_exporter(self, name: str) -> None:
        stop_server(self.exporters.pop(name))

    def place(self, name: str, match: str, **tags: str) -> None:
        self.client("-p", name, "create")
        self.client("-p", name, "add-match", match)
        if tags:
            self.client("-p", name, "set-tags", *(f"{k}={v}" for k, v in tags.items()))

    def acquired(self, name: str) -> str | None:
        """Who holds place NAME, as the coordinator says (`labgrid-client show`)."""
        for line in self.client("-p", name, "show").stdout.splitlines():
            if line.strip().startswith("acquired:"):
                value = line.split(":", 1)[1].strip()
                return None if value == "None" else value
        raise AssertionError(f"no 'acquired:' line for place {name}")

    def reservations(self) -> str:
        return self.client("reservations").stdout

    def stop(self) -> None:
        for name in list(self.exporters):
            self.stop_exporter(name)
        stop_server(self.coordinator)


@contextlib.contextmanager
def test_lab(dir: Path) -> Iterator[TestLab]:
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{free_port()}"
    log_path = dir / "coordinator.log"
    log = open(log_path, "ab")
    # its places.yaml and resources.yaml go to its working directory: DIR
    proc = subprocess.Popen([_tool("labgrid-coordinator"), "-l", address], cwd=dir, stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)
    lab = TestLab(dir, address, proc)
    try:
        end = time.monotonic() + 60
        while "Coordinator ready" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"labgrid-coordinator did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.1)
        yield lab
    finally:
        lab.stop()


test_lab.__test__ = False
