"""Where every place of a run (and of `doctor`, and the box) is made: one function per way a
user names a machine, one rule for which kind of place it becomes.

    ssh_places(subject, ["box", "root@10.0.0.5"], say)   # --host / `hosts = [...]`
    lab_places(leases, subject, say)                      # --place (hosts/lab_place.leased)
    checked_place("box")                              # `doctor --host`: a shell and its facts
    box_place(box)                                    # `flagbench box`'s machine, through its ssh config

SUBJECT is what the places measure (subject.py: the experiment's C objects or kernel tree).
The rule: a subject whose builds boot (a kernel's guest benches) boots each variant on the
machine, so its place is a booting one (a KexecHost, or a LabBootHost where a lab board boots from an image
by power cycle), one machine at a time; anything else is an SshHost that times programs.
Every place reaches its machine through hosts/ssh.py's Connection; `boot_kind` says how a
booting place boots (the rows' "(kexec)", "(power cycle)").
"""
from __future__ import annotations

from typing import Callable, Sequence

from flagbench.errors import UserError

Say = Callable[[str], None]


def ssh_places(subject, dests: Sequence[str], say: Say) -> list:
    """The places of --host DEST...: one KexecHost when the experiment boots kernels, else an
    SshHost each; not opened yet."""
    from flagbench.hosts.remote import SshHost
    if len(set(dests)) != len(dests):
        raise UserError(f"--host names {next(d for d in dests if dests.count(d) > 1)} twice")
    if dests and subject.boots():
        if len(dests) > 1:
            raise UserError(f"{subject.exp.path}: guest benches boot kernels by kexec on one --host at a time "
                            f"(given: {', '.join(dests)})")
        from flagbench.hosts.kexec import KexecHost
        return [KexecHost(dests[0], say=say)]
    return [SshHost(d) for d in dests]


def lab_places(leases: Sequence, subject, say: Say) -> list:
    """The places of held lab places (hosts/lab_place.py), named by the place in tables: for
    kernels a LabBootHost where the place boots from an image (labgrid's QEMUDriver: each
    variant by power cycle), else a KexecHost; for the rest an SshHost. Each reaches the
    place's NetworkService with the ssh client its lease says (through the exporter if so)."""
    from flagbench.hosts.kexec import KexecHost
    from flagbench.hosts.lab_boot import LabBootHost, boot_driver
    from flagbench.hosts.remote import SshHost
    from flagbench.hosts.ssh import Connection, label

    kernels = subject.boots()
    if kernels and len(leases) > 1:
        raise UserError(f"{subject.exp.path}: guest benches boot kernels on one --place at a time "
                        f"(given: {', '.join(lease.place for lease in leases)})")
    out = []
    for lease in leases:
        if kernels and boot_driver(lease) is not None:
            out.append(LabBootHost(lease, say))
            continue
        host = KexecHost(lease.dest, say=say) if kernels else SshHost(lease.dest)
        _through(host, Connection(lease.dest, ssh=lease.ssh))
        host.name = label(lease.place)
        out.append(host)
    return out


def checked_place(dest: str):
    """The place `doctor --host DEST` opens to read its facts (an SshHost)."""
    from flagbench.hosts.remote import SshHost
    return SshHost(dest)


def box_place(box, *, kexec: bool = False, say: Say = lambda s: None):
    """The box (run/guest/box.py) as a place: its alias through its own ssh config, with
    flagbench's ssh client (hosts/ssh.py); a KexecHost with KEXEC."""
    from flagbench.hosts.kexec import KexecHost
    from flagbench.hosts.remote import SshHost

    host = KexecHost(box.alias, say=say) if kexec else SshHost(box.alias)
    _through(host, box.connection())     # the Connection the box's own boot and run use
    return host


def box_connection(box):
    """flagbench's ssh client to the box (run/guest/box.py) through the box's own ssh config, not
    opened: what its boot wait, its commands and its place use."""
    from flagbench.hosts.ssh import Connection
    return Connection(box.alias, ssh=box.ssh)


def _through(host, conn) -> None:
    """HOST reaches its machine through CONN (a KexecHost's kexec too)."""
    host.conn = conn
    if hasattr(host, "kexec"):
        host.kexec.conn = conn
