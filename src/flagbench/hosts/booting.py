"""Places that boot kernels: one BootingPlace (its enter()), and the one wait for a machine
to come up: a kexec'd host (hosts/kexec.py), a lab board power
cycled into an image (hosts/lab_boot.py), the qemu box booting (run/guest/box.py).

    version, seconds = wait_for_boot(conn, lambda v: build.identity in v, within=300,
                                     what="answer as fb-1234", who="host box")

Every half second: a fresh master connection (the machine rebooted: the old one is dead),
then `cat /proc/version` there; ANSWERED takes the version (it may raise: the wrong kernel
came up) and says whether this is the one waited for. GONE, when given, says why waiting is
pointless (the box's qemu exited) or None. A HostError names WHO, WHAT it did not do within
the time and the last ssh error.
"""
from __future__ import annotations

import time
from typing import Callable

from flagbench.hosts.remote import SshHost
from flagbench.hosts.ssh import Connection, HostError

PAUSE_S = 0.5


def wait_for_boot(conn: Connection, answered: Callable[[str], bool], *, within: float, what: str, who: str,
                  started: float | None = None, gone: Callable[[], str | None] | None = None) -> tuple[str, float]:
    """/proc/version once CONN answers and ANSWERED takes it, and the seconds since STARTED
    (default: now). CONN is opened here if it never was, else reopened each try."""
    started = time.monotonic() if started is None else started
    last = "no answer yet"
    while time.monotonic() < started + within:
        time.sleep(PAUSE_S)
        if gone is not None:
            why = gone()
            if why:
                raise HostError(why)
        try:
            if conn.opened:
                conn.reopen()
            else:
                conn.open()
            done = conn.shell("cat /proc/version", timeout=30)
            if done.failure:
                raise HostError(f"host {conn.dest}: {done.failure}")
        except HostError as e:
            last = str(e)
            continue
        version = done.stdout.strip()
        if answered(version):
            return version, time.monotonic() - started
    raise HostError(f"{who} did not {what} within {within:g} s; last ssh error: {last}")


class BootingPlace(SshHost):
    """A place that boots each variant's kernel before its samples (run/places.py's `boots`):
    one enter() for all of them, the way of booting the subclass's `boot()`.

    KexecHost (hosts/kexec.py) kexecs the kernel; LabBootHost (hosts/lab_boot.py) power cycles a
    lab board with it as the image. enter() refuses a variant with no kernel (PlaceLost) or one
    whose kernel panicked in flagbench's own qemu boot (`tried`, NotHere), counts the boots,
    says each, turns a failed boot into PlaceLost (the rows resumable) and keeps what every
    sample of the boot records (`visit`: the boot, its kernel, how long it took, the identity).
    """
    boots = True
    boot_kind = ""          # how a variant is booted, as the rows say it: "kexec", "power cycle"
    seconds_key = ""        # the provenance key of a boot's seconds

    def __init__(self, dest: str, say: Callable[[str], None] = lambda s: None):
        super().__init__(dest)
        self.say = say
        self.booted = 0                          # boots this run
        self.visit: dict = {}                    # what each sample of the current boot records
        self.stranded = ""                       # why close() could not bring its own kernel back
        self.tried: Callable[[str], str | None] | None = None   # variant -> why it may not boot here

    # -- what a kind of booting place says and does ----------------------------------------------
    @property
    def where(self) -> str:
        return self.dest

    def boot(self, variant: str, build) -> float:
        """Make the machine run BUILD's kernel; the seconds it took (HostError: it did not)."""
        raise NotImplementedError

    def boot_failed(self, boot: int, variant: str, error: HostError) -> str:
        """Why boot BOOT failed, in one line (a subclass may also bring the machine back)."""
        return f"boot {boot} ({variant}): {error}"

    def visit_facts(self) -> dict:
        return {}

    # -- the one enter() ---------------------------------------------------------------------------
    def enter(self, variant: str, build) -> None:
        """Boot BUILD (a kbuild KernelBuild) there; a boot that fails is the place's failure."""
        from flagbench.errors import NotHere, PlaceLost
        if build is None:   # a cell without a kernel of its own has no business on this place
            raise PlaceLost(f"{self.where}: variant {variant} has no kernel to boot there")
        why = self.tried(variant) if self.tried else None
        if why:   # it panicked under qemu: on a real machine that takes the box down
            raise NotHere(f"not booted on {self.dest}: its kernel panicked in flagbench's qemu boot ({why})")
        boot = self.booted
        self.booted += 1
        self.visit = {}
        self.say(f"boot {boot}: {'power-cycle' if self.boot_kind == 'power cycle' else self.boot_kind} "
                 f"{self.where} into {variant} ({build.identity})")
        try:
            seconds = self.boot(variant, build)
        except HostError as e:
            self.down = self.boot_failed(boot, variant, e)
            raise PlaceLost(self.down) from None
        after = "power on" if self.boot_kind == "power cycle" else self.boot_kind
        self.say(f"{self.where} answers as {build.identity} {seconds:.1f} s after {after}")
        self.visit = {"host": self.dest, **self.visit_facts(), "boot": boot, "kernel": self.running,
                      self.seconds_key: round(seconds, 2), "identity": build.identity}

    def sample_facts(self) -> dict:
        return {**super().sample_facts(), **self.visit}
