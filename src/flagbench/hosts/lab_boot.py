"""A labgrid place without kexec as a place that boots (run/places.py): each variant's kernel is
booted by power-cycling the place with that kernel as its image, through the place's own boot
strategy; the engine visits the variants in rounds A B, B A, ... as on a kexec host.

    host = LabBootHost(lease, say)       # a held, powered place (hosts/labgrid.py) whose target
    host.open()                          # boots from an image: waits for its shell (ssh), reads it
    host.enter("patched", build)         # off, image = build.image, on; ssh answers as build.identity
    host.close()                         # back on its own image (the environment config's)

The image goes to the place as its boot driver takes it: labgrid's QEMUDriver reads the
environment config's image named by its `kernel` when it powers on (the place's own initramfs,
command line and network stay the config's). After every boot the running kernel must say the
variant's build identity in /proc/version, as after a kexec. A board that does not answer ssh
in `wait_s` (or answers as another kernel) is power-cycled back into its own image and the run
is told why, with the last lines of its serial console (labgrid's ConsoleProtocol driver); its
rows fail as resumable (errors.PlaceLost), the other places go on.
"""
from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Callable

from flagbench import procs
from flagbench.cache import cache_dir
from flagbench.hosts.lab_api import LabError, one_line
from flagbench.hosts.labgrid import Lease
from flagbench.hosts.booting import BootingPlace, wait_for_boot
from flagbench.hosts.ssh import Connection, HostError, label

WAIT_S = 300.0               # power on to ssh answering (7 s for the test board under TCG)
CONSOLE_KEPT = 64 * 1024     # bytes of the serial console kept for a failure's message
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|[@-Z\\-_`-~])")    # a firmware's screen control


def boot_driver(lease: Lease):
    """The driver that boots LEASE's place from an image flagbench can hand over (labgrid's
    QEMUDriver with a `kernel` image), or None: that place's kernels are booted by kexec."""
    for drv in lease.get_target().drivers:
        if type(drv).__name__ == "QEMUDriver" and drv.kernel:
            return drv
    return None


class Board:
    """A place's boot driver and serial console."""

    def __init__(self, lease: Lease):
        self.lease, self.drv = lease, boot_driver(lease)
        if self.drv is None:
            raise LabError(f"place {lease.place}: no driver boots it from an image (labgrid's QEMUDriver)")
        self.images = lease.lab.env.config.data.setdefault("images", {})
        self.own = self.images.get(self.drv.kernel, "")
        self.console = bytearray()
        self.moved = False          # booted into an image not its own

    def boot(self, image: Path | None) -> None:
        """Power off, hand IMAGE over as the kernel (None: its own), power on."""
        target, drv = self.lease.get_target(), self.drv
        self.console.clear()         # a failure shows this boot's lines, not the last one's
        self.images[drv.kernel] = str(image) if image is not None else self.own
        child = getattr(drv, "_child", None)
        if child is not None and child.poll() is not None:
            drv.status = 0          # qemu ended by itself (a panic with -no-reboot): nothing to switch off
        try:
            target.deactivate(drv)   # powered off; activate() builds its command line anew
            target.activate(drv)
            drv.on()
        except Exception as e:
            raise LabError(f"place {self.lease.place}: cannot boot {Path(self.images[drv.kernel]).name}: "
                           f"{one_line(e)}") from None
        self.moved = image is not None

    def read_console(self) -> None:
        """Keep what the serial console printed since the last read."""
        import pexpect
        if not getattr(self.drv, "status", 0):
            return
        try:
            for _ in range(64):
                self.console += self.drv.read(size=4096, timeout=0.01)
                del self.console[:-CONSOLE_KEPT]
        except (pexpect.TIMEOUT, OSError, Exception):
            return

    @contextlib.contextmanager
    def draining(self):
        """Read the console all along while the board boots. QEMU writes the serial port to a
        socket only labgrid's console driver reads; unread, it fills, the emulated UART stops
        draining and the kernel waits on it for every character it prints: the test board took
        64-94 s to answer ssh instead of 7."""
        stop = threading.Event()

        def drain() -> None:
            while not stop.wait(0.05):
                self.read_console()

        reader = threading.Thread(target=drain, name="console", daemon=True)
        reader.start()
        try:
            yield
        finally:
            stop.set()
            reader.join()

    def tail(self, lines: int = 6) -> str:
        """The console's last LINES lines, as one line."""
        self.read_console()
        text = _ESCAPES.sub("", self.console.decode(errors="replace")).replace("\r", "")
        kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(kept) if kept else "(nothing on the serial console)"


class LabBootHost(BootingPlace):
    """A held place whose every variant is booted by power cycle (see the module's docstring):
    enter() is BootingPlace's; boot() here is a power cycle with the variant's image."""

    boot_kind = "power cycle"       # how enter() boots a variant: the rows say it
    seconds_key = "power_cycle_seconds"

    def __init__(self, lease: Lease, say: Callable[[str], None] = lambda s: None, wait_s: float = WAIT_S):
        super().__init__(lease.dest, say)
        self.conn = Connection(lease.dest, ssh=lease.ssh)
        self.name = label(lease.place)
        self.lease, self.wait_s = lease, wait_s
        self.board = Board(lease)
        self.kernel = None           # hosts.kexec.HostKernel: what it runs on its own image
        self.running = ""            # /proc/version there, as last read
        # there from a variant's boot until the board is back on its own image: a run killed
        # with -9 leaves it, and the next run boots the board's own image first
        self.mark = cache_dir() / "labgrid" / "boards" / f"{self.name}.variant"

    def open(self) -> "LabBootHost":
        """Its shell once it answers on its own image; its kernel and facts read."""
        from flagbench.hosts.facts import read_facts
        from flagbench.hosts.kexec import inspect
        try:
            self._wait(lambda v: True, "answer ssh after power on")
            if self.mark.exists():    # a killed run left it on a variant (a board that stays powered)
                self.say(f"place {self.lease.place} was left on a variant by an interrupted run: booting its own image")
                self.board.boot(None)
                self._wait(lambda v: True, "come back on its own image")
                self.mark.unlink(missing_ok=True)
            self.kernel, _ = inspect(self.conn)
            self.facts = read_facts(self.conn)
        except (HostError, LabError) as e:
            self.conn.close()
            raise LabError(f"{e}; last console lines: {self.board.tail()}") from None
        return self

    @property
    def where(self) -> str:
        return f"place {self.lease.place}"

    def boot(self, variant: str, build) -> float:
        """Power cycle with BUILD's image until ssh answers as BUILD; the seconds from power off."""
        started = time.monotonic()
        self.mark.parent.mkdir(parents=True, exist_ok=True)
        self.mark.write_text(f"{build.identity}\n")     # until it is back on its own image
        self.board.boot(Path(build.image))
        self._wait(lambda v: self._is(v, build.identity), f"answer as {build.identity}")
        return time.monotonic() - started

    def boot_failed(self, boot: int, variant: str, error: HostError) -> str:
        """The failure with the console's last lines, said; the board cycled back to its own image."""
        down = f"boot {boot} ({variant}): {error}; last console lines: {self.board.tail()}"
        self.say(down)
        self._recover()
        return down

    def visit_facts(self) -> dict:
        return {"place": self.lease.place}

    def _is(self, version: str, identity: str) -> bool:
        if identity not in version:
            raise HostError(f"place {self.lease.place} runs {' '.join(version.split()[2:4])} after the power "
                            f"cycle, not {identity} (its boot did not take the image)")
        return True

    def _recover(self) -> None:
        """A board that hung: power-cycled back into its own image (said; its failure is not raised)."""
        try:
            self.board.boot(None)
            self._wait(lambda v: True, "come back on its own image")
            self.mark.unlink(missing_ok=True)
            self.say(f"place {self.lease.place}: power-cycled back into its own image")
        except (HostError, LabError) as e:
            self.say(f"place {self.lease.place}: not back on its own image either: {e}")

    def _wait(self, answered: Callable[[str], bool], what: str) -> str:
        """/proc/version once ssh answers and ANSWERED takes it (it may raise); HostError after wait_s."""
        with self.board.draining():
            return self._poll(answered, what)

    def _poll(self, answered: Callable[[str], bool], what: str) -> str:
        self.running, _ = wait_for_boot(self.conn, answered, within=self.wait_s, what=what,
                                        who=f"place {self.lease.place}")
        return self.running

    def close(self) -> None:
        """Back on its own image whatever happened (a signal too), then disconnect."""
        try:
            with procs.after_signal():
                if self.board.moved:      # (a failed boot was cycled back already: not moved)
                    self.board.boot(None)
                    self._wait(lambda v: True, "come back on its own image")
                    self.say(f"place {self.lease.place} is back on its own image")
                if not self.board.moved:
                    self.mark.unlink(missing_ok=True)
        except (HostError, LabError) as e:
            self.stranded = f"place {self.lease.place}: not back on its own image: {e}"   # the run fails
            self.say(self.stranded)
        finally:
            self.conn.close()
