"""What flagbench checks before it trusts a host, and what comes back from one.

- `destination(dest)`: an ssh destination as ssh's argv takes it. flagbench parses
  `ssh://[user@]host[:port]` itself (host may be a bracketed IPv6 address): ssh's own URL
  parser takes no brackets and answers anything odd with its usage text, which is no reason
  to show anyone. A destination with a control character, a space, or a host part starting
  with '-' (an option to ssh) is bad input in one line.
- `login_noise(lines)`: what a login printed before flagbench's own first line (a chatty
  .bashrc, a ForceCommand banner). flagbench refuses such a host: the program's output there
  could not be told from the login's.
- `untaken(hosts, targets)`: the targets no host is of: said in one line, and a run never
  names a host for samples taken on this machine.
- `local_cpu(cpu)`: --cpu N for a program timed here must be a CPU this process may use.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from flagbench.errors import UserError

SHAPES = "an ssh alias, user@host or ssh://user@host:port"
_URL = re.compile(r"ssh://(?:(?P<user>[^@/]*)@)?(?P<host>\[[^\]/]*\]|[^:/\[\]]*)(?::(?P<port>[^/]*))?/?")


@dataclass(frozen=True)
class Destination:
    target: str               # what follows ssh's "--": "user@host" or an alias
    port: int | None = None   # from an ssh:// URL: handed to ssh as -p


def destination_problem(dest: object) -> str | None:
    """Why DEST is no ssh destination flagbench will hand to ssh, or None."""
    try:
        destination(dest)
    except UserError as e:
        return str(e)
    return None


def destination(dest: object) -> Destination:
    """DEST (see the module docstring) as ssh's argv takes it; UserError in one line when it is none."""
    if not isinstance(dest, str) or not dest:
        raise UserError(f"{dest!r} is not an ssh destination ({SHAPES})")
    shown = repr(dest)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in dest):
        raise UserError(f"{shown} is not an ssh destination: it holds a space or a control character")
    if dest.startswith("-"):
        raise UserError(f"{shown} is not an ssh destination: it starts with '-' (an option to ssh)")
    if not dest.startswith("ssh://"):
        if "://" in dest:
            raise UserError(f"{shown} is not an ssh destination ({SHAPES})")
        return Destination(dest)
    m = _URL.fullmatch(dest)
    if not m:
        raise UserError(f"{shown} is not an ssh URL (ssh://user@host:port)")
    user, host, port = m.group("user"), m.group("host"), m.group("port")
    if host.startswith("["):
        host = host[1:-1]
    if not host or host.startswith("-") or (user is not None and (not user or user.startswith("-"))):
        raise UserError(f"{shown} is not an ssh URL: its user or host is empty or starts with '-'")
    number = None
    if port is not None:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UserError(f"{shown}: port {port!r} is not 1..65535")
        number = int(port)
    return Destination(f"{user}@{host}" if user else host, number)


def login_noise(lines: list[str]) -> str | None:
    """The first line a login printed before flagbench's marker (None: it printed nothing)."""
    for line in lines:
        if line.strip():
            return line.strip()[:120]
    return None


def noise_refusal(dest: str, noise: str) -> str:
    return (f"host {dest}: its login prints to stdout ({noise!r}): flagbench cannot tell a program's output "
            f"from it; make the login quiet for commands (a .bashrc or profile that echoes, a ForceCommand "
            f"banner: print only when the shell is interactive, [ -t 1 ])")


def untaken(hosts, targets) -> list[str]:
    """The TARGETS no host is of (their samples, if any, are taken on this machine)."""
    return [t for t in targets if not any(h.machine() == t for h in hosts)]


def untaken_note(hosts, targets: list[str], here: str) -> str:
    """One line: the targets no --host takes, and what happens to them instead."""
    machines = ", ".join(f"{h.name} is {h.facts.get('machine') or '?'}" for h in hosts)
    instead = [f"{here} is timed on this machine" if here in targets else "",
               "the others are only counted here" if any(t != here for t in targets) else ""]
    return f"no --host takes {', '.join(targets)} ({machines}): {'; '.join(w for w in instead if w)}"


def local_cpu(cpu: int | None) -> None:
    """--cpu N must be a CPU this process may run on, for programs timed here."""
    if cpu is None:
        return
    try:
        usable = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = list(range(os.cpu_count() or 1))
    if cpu not in usable:
        raise UserError(f"--cpu {cpu}: this machine has {os.cpu_count()} CPUs"
                        + (f" (usable here: {_ranges(usable)})" if len(usable) != os.cpu_count() else ""))


def _ranges(cpus: list[int]) -> str:
    """CPU numbers as ranges.

    >>> _ranges([0, 1, 2, 5])
    '0-2,5'
    """
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(f"{start}-{c}" if c != start else str(c))
            start = None
    return ",".join(out)
