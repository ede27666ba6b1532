"""Places of a labgrid lab as the run's machines: `flagbench run EXP --place NAME` (repeatable;
`places = [...]` in the experiment; `--place TAG=VALUE` for any place so tagged).

    with leased(["board-7", "arch=x86_64"], wait_s=600, say=say) as leases:
        dests = [lease.dest for lease in leases]     # ssh destinations: everything --host does

Every place is reserved, waited for (bounded, the holder said), acquired and powered on before
anything is built; its shell is its NetworkService over ssh, so from there on it is a host like
any --host (user programs timed there, kernels booted by kexec). All are released when the run
ends, fails or is stopped by a signal; a run killed with -9 leaves them to the next (lab_state).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from flagbench.errors import UserError
from flagbench.hosts.labgrid import WAIT_S, Lab, Lease


def parse_wait(text: str) -> float:
    """--place-wait: a time as --budget takes it (300, 90s, 10m, 1h), or 0: do not wait at all.

    >>> parse_wait("0"), parse_wait("0s"), parse_wait("90s"), parse_wait("10m")
    (0.0, 0.0, 90.0, 600.0)
    """
    import math
    t = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(t[-1:])
    try:
        value = float(t[:-1] if scale else t) * (scale or 1)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):
        raise UserError(f"--place-wait {text!r}: give a time such as 0, 300, 90s, 10m or 1h")
    return value


@contextmanager
def leased(specs: Sequence[str], *, wait_s: float = WAIT_S,
           say: Callable[[str], None] = lambda s: None) -> Iterator[list[Lease]]:
    """Every place SPECS names, held (and powered) for the block; released after it."""
    names = [s for s in specs if "=" not in s]     # a TAG=VALUE twice asks for two places so tagged
    if len(set(names)) != len(names):
        raise UserError(f"--place names {next(s for s in names if names.count(s) > 1)} twice")
    with Lab.connect(say) as lab:
        lab.check(specs)
        leases = []
        for spec in specs:
            lease = lab.lease(spec, wait_s=wait_s)
            lease.power_on()
            say(f"place {lease.place}: its shell is {lease.dest} (NetworkService)")
            leases.append(lease)
        yield leases


def places_for(leases: Sequence[Lease], subject, say: Callable[[str], None]) -> list:
    """The run's places for the held LEASES, for SUBJECT (subject.py: whether they boot its
    kernels): hosts/factory.py's lab_places."""
    from flagbench.hosts.factory import lab_places
    return lab_places(leases, subject, say)
