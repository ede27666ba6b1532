"""Places: where a timed benchmark program runs. One interface, whatever the place is.

    Place.name         "local", or the host's label in tables ("board", "root@10.0.0.5")
    Place.machine()    the target its programs must be built for ("x86_64", "aarch64", ...)
    Place.stage(path)  the path the program has there (copied once, by content, to a host)
    Place.run(argv, timeout=, cpu=)   one run there: a procs.Done (exit status, stdout, ...)

`Local` is this machine. `SshHost` is a machine reached over ssh (hosts/ssh.py): every
sample is one run of the program there, under a guard that dies with the connection. A
kernel swapped in by kexec is an SshHost whose connection was reopened. The timed
executor (executors.NativeExecutor) takes a place; everything above it asks the place,
not which kind it is. Exact counts (callgrind, qemu + plugin) are the same on every
machine and always run here.

A `Fleet` is the hosts a run uses: each table row (all its variants, so A and B always
meet on one machine) goes to one host of its architecture in turn, or to every host with
`replicate`.
"""
from __future__ import annotations

import itertools
import platform
from pathlib import Path
from typing import Protocol, Sequence

from flagbench import procs
from flagbench.errors import UserError

FIXED_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
FIXED_CWD = "/"
RESUME = "; run again to resume"    # a failure of the place, not of the program

# `uname -m` -> flagbench target (toolchains.TARGETS)
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
            "armv7l": "arm", "armv8l": "arm", "armv6l": "arm", "riscv64": "riscv64",
            "loongarch64": "loongarch64", "parisc": "hppa", "parisc64": "hppa"}


def target_of(machine: str) -> str | None:
    """The target whose static programs run on a `uname -m` machine (None: none of ours)."""
    return MACHINES.get(machine)


class Place(Protocol):
    name: str
    remote: bool

    def machine(self) -> str: ...

    def stage(self, path: Path) -> str: ...

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None) -> procs.Done: ...


class Local:
    """This machine: programs run where they were linked, in the fixed env and cwd."""

    name = "local"
    remote = False

    def machine(self) -> str:
        return target_of(platform.machine()) or platform.machine()

    def stage(self, path: Path) -> str:
        return str(path)

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None, **kw) -> procs.Done:
        try:
            return procs.run(list(argv), timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV, cpu=cpu, **kw)
        except OSError as e:
            raise UserError(f"{argv[0]}: cannot run: {e.strerror or e}") from None


LOCAL = Local()


class SshHost:
    """A machine over ssh: one multiplexed connection, its facts read once when opened."""

    remote = True

    def __init__(self, dest: str):
        from flagbench.hosts.ssh import Connection
        self.conn = Connection(dest)
        self.dest, self.name = dest, self.conn.name
        self.facts: dict = {}
        self.down: str | None = None     # why it is given up on, after a failed reconnect
        self.last_load: tuple[float, float] | None = None

    def open(self) -> "SshHost":
        from flagbench.hosts.facts import read_facts
        self.conn.open()
        self.facts = read_facts(self.conn)
        return self

    def close(self) -> None:
        self.conn.close()

    def machine(self) -> str:
        return target_of(self.facts.get("machine", "")) or self.facts.get("machine", "?")

    def perf_events(self) -> tuple[str, ...]:
        """The perf events that count there (empty: no perf, or it may not count)."""
        return tuple(self.facts.get("perf_events", ()))

    def _ready(self) -> None:
        """Reconnect once if the connection dropped; a host that stays away is given up on."""
        from flagbench.hosts.ssh import HostError
        if self.down:
            raise UserError(self.down + RESUME)
        if not self.conn.alive():
            try:
                self.conn.reopen()
            except HostError as e:
                self.down = str(e)
                raise UserError(self.down + RESUME) from None

    def stage(self, path: Path) -> str:
        self._ready()
        return self.conn.stage(path)

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None) -> procs.Done:
        self._ready()
        done = self.conn.run(argv, timeout=timeout, cpu=cpu)
        self.last_load = done.load
        if done.lost:
            raise UserError(done.lost + RESUME)
        return done


class Fleet:
    """The hosts of a run, and which of them times each table row."""

    def __init__(self, hosts: Sequence[SshHost], replicate: bool = False):
        self.hosts, self.replicate = list(hosts), replicate
        self._turn: dict[str, itertools.cycle] = {}
        self._chosen: dict[tuple, list] = {}

    def targets(self) -> set[str]:
        return {h.machine() for h in self.hosts}

    def places_for(self, target: str, row: tuple) -> list:
        """The hosts that time ROW (bench, target, compiler, params) of TARGET: one in turn,
        or all with `replicate`; [] when no host is of that architecture."""
        hosts = [h for h in self.hosts if h.machine() == target]
        if not hosts:
            return []
        if self.replicate:
            return hosts
        if row not in self._chosen:
            turn = self._turn.setdefault(target, itertools.cycle(hosts))
            self._chosen[row] = [next(turn)]
        return self._chosen[row]

    def open(self) -> "Fleet":
        """Connect to every host (each failure: one line naming it, before anything builds)."""
        try:
            for host in self.hosts:
                host.open()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for host in self.hosts:
            host.close()

    def provenance(self) -> dict:
        return {h.name: {"dest": h.dest, **h.facts} for h in self.hosts}
