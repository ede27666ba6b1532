"""A machine over ssh as a place (run/places.py): one multiplexed connection (hosts/ssh.py),
opened once per run, its facts (hosts/facts.py) read when opened. The only places that
open ssh connections live here, in hosts/."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from flagbench import procs
from flagbench.errors import PlaceLost
from flagbench.hosts.ssh import Connection, ConnectionLost, HostError
from flagbench.targets import target_of


def connection(dest: str) -> Connection:
    """A connection to DEST for a few commands (`with connection(dest) as conn:`), where no place
    of the run is that host: reading another machine's kernel config."""
    return Connection(dest)


class SshHost:
    """A machine over ssh: programs run there one at a time, each under a guard."""

    remote = True
    boots = False

    def __init__(self, dest: str):
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

    def enter(self, variant: str, boot: Any) -> None:
        pass

    def sample_facts(self) -> dict:
        return {"host_load": self.last_load}

    def _ready(self) -> None:
        """Reconnect once if the connection dropped; a host that stays away is given up on."""
        if self.down:
            raise PlaceLost(self.down)
        if not self.conn.alive():
            try:
                self.conn.reopen()
            except HostError as e:
                self.down = str(e)
                raise PlaceLost(self.down) from None

    def stage(self, path: Path) -> str:
        self._ready()
        try:
            return self.conn.stage(path)
        except ConnectionLost as e:   # the host went away mid-copy: its cells are measured on resume
            raise PlaceLost(str(e)) from None

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None) -> procs.Done:
        self._ready()
        done = self.conn.run(argv, timeout=timeout, cpu=cpu)
        self.last_load = done.load
        if done.lost:
            raise PlaceLost(done.lost)
        return done
