"""A labgrid lab on 127.0.0.1 around the box, to try `--place` without hardware
(`flagbench box start --lab`): labgrid's own coordinator and exporter, one place.

    lab = start_lab(box_dir / "lab", alias="box", arch="x86_64")   # running, the place made
    lab.exports        # {"LG_COORDINATOR": "127.0.0.1:PORT"}; the place is named like the box
    stop_lab(box_dir / "lab")                                       # both processes gone

What it writes is what a lab admin writes for a real board (docs/places.md shows the same):
- exporter.yaml: one group named like the place with a NetworkService, the board's sshd (for
  the box: its ssh alias, so flagbench's ssh reaches it through the box's ssh config);
- the place: `labgrid-client -p NAME create`, `add-match EXPORTER/NAME/*`, `set-tags arch=...`;
- env.yaml (LG_ENV), given POWER: the place's target with labgrid's ExternalPowerDriver running
  `flagbench box power on|off|cycle` on the box (its qemu stopped, booted again on its own
  kernel), as a lab's environment config switches a board's PDU. Variants of a kernel
  experiment still boot by kexec there: labgrid hands a variant's image only to a QEMUDriver
  it runs itself, and the box's qemu is `flagbench box`'s (docs/places.md).
The coordinator and the exporter are procs.detached servers (own sessions, no owner token: they
outlive `box start`, like the box's qemu); lab.json keeps their pids and start times, and
`stop_lab` ends them (checked by start time: a reused pid is never hit).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from flagbench.errors import UserError

STATE = "lab.json"
ENV = "env.yaml"
READY_S = 60.0
EXPORTER = "flagbench-box"


@dataclass
class BoxLab:
    dir: Path
    address: str
    place: str

    @property
    def exports(self) -> dict[str, str]:
        env = self.dir / ENV
        return {"LG_COORDINATOR": self.address, **({"LG_ENV": str(env)} if env.is_file() else {})}


def exporter_config(place: str, dest: str, username: str = "root", port: int = 22) -> str:
    """exporter.yaml: the group PLACE with the board's sshd as its NetworkService."""
    return (f"{place}:\n  NetworkService:\n    address: {json.dumps(dest)}\n    username: {json.dumps(username)}\n"
            f"    port: {port}\n")


def environment_config(place: str, power: list[str]) -> str:
    """env.yaml: target PLACE (its RemotePlace) with an ExternalPowerDriver running POWER, whose
    word SWITCH becomes on, off or cycle."""
    import shlex

    import yaml
    cmds = {f"cmd_{switch}": shlex.join(switch if w == "SWITCH" else w for w in power)
            for switch in ("on", "off", "cycle")}
    return yaml.safe_dump({"targets": {place: {"resources": {"RemotePlace": {"name": place}},
                                               "drivers": {"ExternalPowerDriver": {**cmds, "delay": 0.0}}}}},
                          sort_keys=False, width=1000)


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if not found:
        raise UserError(f"--lab needs labgrid 26.0.1's {name} (pip install 'flagbench[lab]')")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(dir: Path, alias: str, arch: str, power: list[str] | None = None) -> BoxLab:
    """Coordinator, exporter and place ALIAS (tag arch=ARCH) for the box reached as ALIAS; with
    POWER (argv, SWITCH for on/off/cycle) an env.yaml whose driver switches the box."""
    from flagbench.procs import detached
    from flagbench.run.guest.box_state import start_time_of
    dir = Path(dir)
    stop_lab(dir)
    dir.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGBENCH_OWNER", "LG_ENV")}
    env["LG_COORDINATOR"] = address
    (dir / "exporter.yaml").write_text(exporter_config(alias, alias))
    (dir / ENV).unlink(missing_ok=True)
    if power:
        (dir / ENV).write_text(environment_config(alias, power))
    procs = {}
    try:
        for name, argv in (("coordinator", [_tool("labgrid-coordinator"), "-l", address]),
                           ("exporter", [_tool("labgrid-exporter"), "-c", address, "-n", EXPORTER, "--hostname",
                                         "127.0.0.1", str(dir / "exporter.yaml")])):
            with open(dir / f"{name}.log", "wb") as log:   # outlives `box start`, as the box's qemu
                procs[name] = detached(argv, cwd=dir, env=env, stdout=log, stderr=log)
            _write(dir, {n: {"pid": p.pid, "start_time": start_time_of(p.pid)} for n, p in procs.items()}, address)
            if name == "coordinator":
                _wait(dir, procs[name], lambda: "Coordinator ready" in (dir / "coordinator.log").read_text(
                    errors="replace"), "labgrid-coordinator")
            else:
                _wait(dir, procs[name], lambda: f"{EXPORTER}/{alias}/" in _client(env, "resources", check=False),
                      "labgrid-exporter")
        _client(env, "-p", alias, "create")
        _client(env, "-p", alias, "add-match", f"{EXPORTER}/{alias}/*")
        _client(env, "-p", alias, "set-tags", f"arch={arch}")
    except BaseException:
        stop_lab(dir)
        raise
    (dir / "place").write_text(alias + "\n")
    return BoxLab(dir, address, alias)


def _write(dir: Path, processes: dict, address: str) -> None:
    tmp = dir / f".{STATE}.{os.getpid()}"
    tmp.write_text(json.dumps({"address": address, "processes": processes}, indent=1))
    os.replace(tmp, dir / STATE)


def _wait(dir: Path, proc: subprocess.Popen, ready, what: str) -> None:
    end = time.monotonic() + READY_S
    while not ready():
        if proc.poll() is not None or time.monotonic() > end:
            log = (dir / f"{what.split('-')[1]}.log").read_text(errors="replace").strip().splitlines()
            raise UserError(f"the box's lab: {what} did not start: {log[-1] if log else 'no output'}")
        time.sleep(0.2)


def _client(env: dict, *args: str, check: bool = True) -> str:
    done = subprocess.run([_tool("labgrid-client"), *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60)
    if check and done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise UserError(f"the box's lab: labgrid-client {' '.join(args)}: {lines[-1] if lines else done.returncode}")
    return done.stdout


def load_lab(dir: Path) -> BoxLab | None:
    """The lab in DIR while its coordinator runs, else None."""
    from flagbench.run.guest.box_state import start_time_of
    try:
        state = json.loads((Path(dir) / STATE).read_text())
        coordinator = state["processes"]["coordinator"]
        place = (Path(dir) / "place").read_text().strip()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if start_time_of(coordinator["pid"]) != coordinator["start_time"]:
        return None
    return BoxLab(Path(dir), state["address"], place)


def stop_lab(dir: Path) -> bool:
    """End the lab's exporter and coordinator (their process groups); False: none ran."""
    from flagbench.run.guest.box_state import kill, start_time_of
    path = Path(dir) / STATE
    try:
        processes = json.loads(path.read_text())["processes"]
    except (OSError, ValueError, KeyError, TypeError):
        path.unlink(missing_ok=True)
        return False
    stopped = False
    for name in ("exporter", "coordinator"):
        p = processes.get(name) if isinstance(processes, dict) else None
        if isinstance(p, dict) and isinstance(p.get("pid"), int) and p.get("start_time") is not None \
                and start_time_of(p["pid"]) == p["start_time"]:
            kill(p["pid"])
            stopped = True
    path.unlink(missing_ok=True)
    return stopped
