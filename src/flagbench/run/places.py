"""Places: where a timed benchmark program runs. One interface, whatever the place is; the
run engine (run/engine.py) drives every one of them alike.

The protocol (a new kind of place, such as a lab board, implements exactly this):

    name: str          "local", or the host's label in tables ("board", "root@10.0.0.5");
                       also the engine's lane: cells of one place run one after another in
                       one thread, places side by side
    remote: bool       False only for this machine (its CPU time is ours to see)
    boots: bool        True when enter() changes what the place runs (a kernel booted by
                       kexec, a board powered up into an image): the engine then visits the
                       variants in rounds A B, B A, A B ... and calls enter() before each visit
    open() -> self     connect / reserve / inspect, once per run, before anything is built;
                       bad input or an unreachable place: a UserError naming it
    close()            give back what open() took (a kexec'd host goes back to its own
                       kernel); called once, also after a signal (inside procs.after_signal)
    machine() -> str   the target its programs must be built for ("x86_64", "aarch64", ...)
    enter(variant, boot)   make the place run VARIANT before that variant's samples: BOOT is
                       what the cells of that variant carry in BenchCell.boot (for kexec a
                       kbuild.build.KernelBuild: its image and build identity); a no-op
                       where `boots` is False. A failure of the place raises
                       errors.PlaceLost: the engine fails the place's unfinished cells as
                       resumable, and the same command measures them again later
    stage(path) -> str the path the program has there (copied once, by content, to a host)
    run(argv, timeout=, cpu=) -> procs.Done   one run there; a lost connection is PlaceLost
    sample_facts() -> dict  what each sample taken there records beside its value (a host's
                       load, the boot it ran in); {} when nothing. JSON values; a key the cell's
                       own provenance has with another value fails the sample (provenance.py)

`Local` is this machine. `hosts.remote.SshHost` is a machine reached over ssh: every sample
is one run of the program there, under a guard that dies with the connection.
`hosts.kexec.KexecHost` is an SshHost whose enter() boots the variant's kernel by kexec.
The timed executor (executors.NativeExecutor) takes a place; everything above it asks the
place, not which kind it is. Exact counts (callgrind, qemu + plugin) are the same on every
machine and always run here.

A `Fleet` is the hosts a run uses: each table row (all its variants, so A and B always
meet on one machine) goes to one host of its architecture in turn, or to every host with
`replicate`.
"""
from __future__ import annotations

import itertools
import platform
from pathlib import Path
from typing import Any, Protocol, Sequence

from flagbench import procs
from flagbench.errors import PlaceLost, UserError
from flagbench.targets import target_of

FIXED_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
FIXED_CWD = "/"


class Place(Protocol):
    name: str
    remote: bool
    boots: bool

    def open(self) -> "Place": ...

    def close(self) -> None: ...

    def machine(self) -> str: ...

    def enter(self, variant: str, boot: Any) -> None: ...

    def stage(self, path: Path) -> str: ...

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None) -> procs.Done: ...

    def sample_facts(self) -> dict: ...


class Local:
    """This machine: programs run where they were linked, in the fixed env and cwd."""

    name = "local"
    remote = False
    boots = False

    def open(self) -> "Local":
        return self

    def close(self) -> None:
        pass

    def machine(self) -> str:
        return target_of(platform.machine()) or platform.machine()

    def enter(self, variant: str, boot: Any) -> None:
        pass

    def stage(self, path: Path) -> str:
        return str(path)

    def run(self, argv: Sequence[str], *, timeout: float, cpu: int | None = None, **kw) -> procs.Done:
        try:
            return procs.run(list(argv), timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV, cpu=cpu, **kw)
        except OSError as e:
            raise UserError(f"{argv[0]}: cannot run: {e.strerror or e}") from None

    def sample_facts(self) -> dict:
        return {}


LOCAL = Local()


class Fleet:
    """The hosts of a run, and which of them times each table row."""

    def __init__(self, hosts: Sequence[Place], replicate: bool = False):
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
        """Every host closed, the others too when one fails to (a kexec'd host restored), after a signal too."""
        errors = []
        with procs.after_signal():
            for host in self.hosts:
                try:
                    host.close()
                except UserError as e:
                    errors.append(e)
        if errors:
            raise errors[0]

    def provenance(self) -> dict:
        return {h.name: {"dest": getattr(h, "dest", h.name), **getattr(h, "facts", {})} for h in self.hosts}
