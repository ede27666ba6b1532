"""Boot a kernel on a real machine by kexec, over its ssh connection (hosts/ssh.py), and
come back to the kernel it was running.

`KexecHost` is the place (run/places.py) the run engine drives: an ssh host (hosts/remote.py)
opened once per run, whose enter(variant, build) boots that variant's kernel, and whose
close() brings its own kernel back. Underneath, on one connection:

    k = Kexec(conn, say)
    k.prepare()                      # refuses a host that cannot kexec; remembers its kernel
    try:
        k.boot(image, initrd, "fb-1a2b3c4d5e6f7a8b")      # copy, kexec -l, kexec -e, wait, verify
        ...                                                 # run programs there
    finally:
        k.restore()                  # kexec back into the kernel it ran (or reboot), and say so

A host can kexec when `kexec` is installed, flagbench logs in as root, and neither
/proc/sys/kernel/kexec_load_disabled nor a lockdown mode (Secure Boot) forbids loading an
unsigned kernel; `refusal` says which is missing before anything is built.

The kernel a host ran is remembered locally (<cache>/hosts/NAME/: its /proc/version, command
line, and copies of /boot/vmlinuz-RELEASE and /boot/initrd.img-RELEASE fetched from it),
because a host whose root is in RAM forgets its /boot at the first kexec, and because a
flagbench killed with -9 cannot restore anything: the state file says a kexec away from that
kernel was started and not undone, and the next `prepare` on that host restores it first.
A host found on another kernel with no such mark changed it itself: that one is remembered.

Every wait is bounded: a kernel that does not answer ssh in `wait_s` (or answers as another
build) is a HostError carrying the last ssh error.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from flagbench import procs
from flagbench.cache import cache_dir
from flagbench.hosts.booting import BootingPlace, wait_for_boot
from flagbench.hosts.remote import SshHost, connection
from flagbench.hosts.ssh import Connection, HostError
from flagbench.textsafe import last_line

WAIT_S = 300                 # kexec -e to ssh answering on the new kernel (≈3 s on the test box, minutes on servers)
STILL_OLD_S = 60             # the old kernel still answering this long after kexec -e: it did not take
SBIN = "PATH=/usr/local/sbin:/usr/sbin:/sbin:$PATH; export PATH; "

CHECK = SBIN + r"""echo "uid=$(id -u)"
echo "kexec=$(command -v kexec)"
echo "disabled=$(cat /proc/sys/kernel/kexec_load_disabled 2>/dev/null)"
echo "lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)"
echo "release=$(uname -r)"
echo "machine=$(uname -m)"
echo "version=$(cat /proc/version)"
echo "cmdline=$(cat /proc/cmdline)"
for f in /boot/vmlinuz-$(uname -r) /boot/initrd.img-$(uname -r) /boot/config-$(uname -r) /proc/config.gz; do
  [ -r "$f" ] && echo "file=$f"
done
[ -d /run/systemd/system ] && echo "systemd=1"
true   # no systemd is an answer, not a failure of the check
"""
# kexec -e from a shell that outlives the ssh session (setsid); systemd shuts down cleanly first
EXEC = SBIN + ("if [ -d /run/systemd/system ]; then setsid systemctl kexec </dev/null >/dev/null 2>&1 & "
               "else setsid kexec -e </dev/null >/dev/null 2>&1 & fi; sleep 0.2")


@dataclass(frozen=True)
class HostKernel:
    """What a host is running and what flagbench needs to come back to it."""
    dest: str
    release: str
    machine: str
    version: str               # /proc/version
    cmdline: str
    image: str                 # /boot/vmlinuz-RELEASE there, or ""
    initrd: str                # /boot/initrd.img-RELEASE there, or ""
    config: str                # /proc/config.gz or /boot/config-RELEASE there, or ""
    systemd: bool


def inspect(conn: Connection, timeout: float = 60) -> tuple[HostKernel, list[str]]:
    """The host's running kernel, and why it cannot kexec (empty: it can)."""
    done = conn.shell(CHECK, timeout=timeout)
    if done.failure and "release=" not in done.stdout:
        raise HostError(f"host {conn.dest}: cannot inspect its kernel: {done.failure}: {done.stderr.strip()[-200:]}")
    facts: dict[str, str] = {}
    files = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "file":
            files.append(value)
        else:
            facts[key] = value.strip()
    release = facts.get("release", "")

    def has(path: str) -> str:
        return path if path in files else ""
    host = HostKernel(conn.dest, release, facts.get("machine", ""), facts.get("version", ""), facts.get("cmdline", ""),
                      has(f"/boot/vmlinuz-{release}"), has(f"/boot/initrd.img-{release}"),
                      has("/proc/config.gz") or has(f"/boot/config-{release}"), facts.get("systemd") == "1")
    return host, refusal(facts)


def refusal(facts: dict[str, str]) -> list[str]:
    """Why a host with these facts cannot be kexec'd by flagbench."""
    out = []
    if facts.get("uid") != "0":
        out.append("flagbench must log in as root to kexec (uid is " + (facts.get("uid") or "unknown") + ")")
    if not facts.get("kexec"):
        out.append("no kexec there (apt-get install kexec-tools)")
    if facts.get("disabled") == "1":
        out.append("kexec is disabled (/proc/sys/kernel/kexec_load_disabled = 1; only a reboot clears it)")
    lockdown = facts.get("lockdown", "")
    if "[" in lockdown:
        mode = lockdown.split("[", 1)[1].split("]", 1)[0]
        if mode != "none":
            out.append(f"the kernel is locked down ({mode}, Secure Boot): it loads only signed kernels by kexec")
    return out


class Kexec:
    def __init__(self, conn: Connection, say: Callable[[str], None] = lambda s: None, wait_s: float = WAIT_S):
        self.conn, self.say, self.wait_s = conn, say, wait_s
        self.dir = cache_dir() / "hosts" / conn.name
        self.host: HostKernel | None = None        # what prepare() found it running
        self.original: HostKernel | None = None
        self.moved = False          # a kexec was started since prepare/restore
        self.running = ""           # /proc/version there as last read (after boot(): the variant's)

    # -- the kernel to come back to ---------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    def prepare(self) -> HostKernel:
        """Check the host, restore it first if a killed run left it on another kernel, and keep
        what restoring it needs; the kernel it runs then (its own). HostError when it cannot kexec."""
        host, problems = inspect(self.conn)
        if problems:
            raise HostError(f"host {self.conn.dest} cannot boot kernels by kexec: {'; '.join(problems)}")
        left, moved = self._read_state()
        if left and left.version != host.version and moved:
            self.say(f"{self.conn.dest} runs {_ident(host.version)}, left there by an interrupted run: "
                     f"restoring its kernel {left.release} first")
            self.original, self.moved = left, True
            self.restore()
            host, _ = inspect(self.conn)   # what it runs now (its /boot and config may differ from the variant's)
        elif host.image:              # fresh copies: its initrd may have changed since
            self.dir.mkdir(parents=True, exist_ok=True)
            self.conn.fetch(host.image, self.dir / "vmlinuz")
            if host.initrd:
                self.conn.fetch(host.initrd, self.dir / "initrd.img")
            else:
                (self.dir / "initrd.img").unlink(missing_ok=True)
            self.original = host
            self._write_state(False)
        elif not left or left.version != host.version:
            raise HostError(f"host {self.conn.dest}: no /boot/vmlinuz-{host.release} there: flagbench could not "
                            "come back to the running kernel")
        self.original = self._read_state()[0]
        self.host = host
        return host

    def _read_state(self) -> tuple[HostKernel | None, bool]:
        """The kernel remembered for this host, and whether a kexec away from it was started
        and not undone (then the next run restores it)."""
        try:
            data = json.loads(self.state_file.read_text())
            moved = bool(data.pop("moved", False))
            return HostKernel(**data), moved
        except (OSError, ValueError, TypeError):
            return None, False

    def _write_state(self, moved: bool) -> None:
        self.moved = moved
        tmp = self.state_file.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps({**self.original.__dict__, "moved": moved}, indent=1))
        os.replace(tmp, self.state_file)

    # -- booting --------------------------------------------------------------------------------
    def boot(self, image: Path, initrd: Path | None, identity: str, cmdline: str | None = None) -> float:
        """Boot IMAGE there and wait until it answers as IDENTITY (in /proc/version); the
        seconds from kexec -e to that answer."""
        before = self.version()
        self._load(image, initrd, cmdline if cmdline is not None else self.original.cmdline)
        self._write_state(True)
        started = time.monotonic()
        self.conn.shell(EXEC, timeout=20)

        def answered(version: str) -> bool:
            if identity in version:
                return True
            if version == before and time.monotonic() - started < STILL_OLD_S:
                return False              # the old kernel is still shutting down
            raise HostError(f"host {self.conn.dest} runs {_ident(version)} after kexec, not {identity}"
                            + (" (kexec -e did not take)" if version == before else ""))
        return self._wait(started, answered, f"answer after kexec into {identity}")

    def version(self) -> str:
        done = self.conn.shell("cat /proc/version", timeout=30)
        if done.failure:
            raise HostError(f"host {self.conn.dest}: {done.failure}")
        self.running = done.stdout.strip()
        return self.running

    def _load(self, image: Path, initrd: Path | None, cmdline: str) -> None:
        remote = f"{self.conn.dir}/kexec-image"
        self.conn.copy(image, remote, mode="644")
        args = [remote, f"--command-line={cmdline}"]
        if initrd is not None:
            self.conn.copy(initrd, f"{self.conn.dir}/kexec-initrd", mode="644")
            args.append(f"--initrd={self.conn.dir}/kexec-initrd")
        errors = []
        for syscall in (["-s"], []):   # kexec_file_load, then kexec_load (kernels built without it)
            done = self.conn.shell(SBIN + 'exec kexec "$@"', *syscall, "-l", *args, timeout=120)
            if not done.failure:
                return
            errors.append(last_line(done.stderr) or done.failure)
        raise HostError(f"host {self.conn.dest}: kexec cannot load {image.name}: {' / '.join(errors)}")

    def _wait(self, started: float, answered: Callable[[str], bool], what: str) -> float:
        """Seconds from STARTED until the host answers ssh with a /proc/version ANSWERED takes
        (which may raise: the wrong kernel came up); a HostError after wait_s (hosts/booting.py)."""
        self.running, seconds = wait_for_boot(self.conn, answered, within=self.wait_s, what=what,
                                              who=f"host {self.conn.dest}", started=started)
        return seconds

    def restore(self) -> str:
        """kexec back into the kernel the host ran when prepare() found it (its own image and
        initrd, the command line it had); a host that cannot be reached is a HostError."""
        o = self.original
        if o is None or not self.moved:
            return ""
        initrd = self.dir / "initrd.img"
        if not (self.dir / "vmlinuz").is_file():   # the cache was cleaned while the host was away
            raise HostError(f"host {self.conn.dest} may still run a kernel flagbench booted, and flagbench's copy of "
                            f"its own kernel {o.release} ({self.dir / 'vmlinuz'}) is gone: boot it into {o.release} "
                            f"by hand (reboot, or kexec its /boot/vmlinuz-{o.release}), then remove {self.state_file}")
        self.say(f"restoring {self.conn.dest} to its own kernel {o.release}")
        try:
            # a fresh connection and run directory: a signal may have come while the host was
            # rebooting, and a kexec'd host's run directory went with its old kernel
            self.conn.reopen()
            if self.version() == o.version:
                seconds = 0.0
            else:
                self._load(self.dir / "vmlinuz", initrd if initrd.exists() else None, o.cmdline)
                started = time.monotonic()
                self.conn.shell(EXEC, timeout=20)
                seconds = self._wait(started, lambda version: version == o.version,
                                     "come back on its kernel")
        except HostError as e:
            raise HostError(f"{e}: could not restore its kernel {o.release}: kexec or reboot it by hand") from None
        self._write_state(False)
        message = f"{self.conn.dest} is back on its own kernel {o.release} ({_ident(o.version)})"
        self.say(message + (f", {seconds:.1f} s after kexec" if seconds else ""))
        return message

def _ident(version: str) -> str:
    """The part of /proc/version that names a build: "6.1.192 (flagbench@fb-1a2b3c4d5e6f7a8b)"."""
    words = version.split()
    return " ".join(words[2:4]) if len(words) >= 4 else version


# -- the place the engine drives --------------------------------------------------------------
class KexecHost(BootingPlace):
    """An ssh host that runs each variant's own kernel: the run engine calls enter(variant,
    build) before the samples of that variant's visit (rounds A B, B A, ...), and close() once,
    after a signal too, kexecs it back into its own kernel (and says so). enter() is
    BootingPlace's; boot() here is a kexec."""

    boot_kind = "kexec"             # how enter() boots a variant: the rows say it
    seconds_key = "kexec_seconds"

    def __init__(self, dest: str, say: Callable[[str], None] = lambda s: None, wait_s: float = WAIT_S):
        super().__init__(dest, say)
        self.kexec = Kexec(self.conn, say, wait_s)
        self.kernel: HostKernel | None = None    # its own kernel, as open() found it

    @property
    def running(self) -> str:
        return self.kexec.running

    def open(self) -> "KexecHost":
        """Connect, refuse a host that cannot kexec (before anything is built), restore one an
        interrupted run left on another kernel, and keep what restoring it needs."""
        super().open()
        try:
            self.kernel = self.kexec.prepare()
        except BaseException:
            self.conn.close()
            raise
        return self

    def boot(self, variant: str, build) -> float:
        return self.kexec.boot(Path(build.image), self._initrd(), build.identity)

    def _initrd(self) -> Path | None:
        """The host's own initramfs, for every variant (its root, its modules): kept by prepare()."""
        path = self.kexec.dir / "initrd.img"
        return path if path.exists() else None

    def close(self) -> None:
        """Back to its own kernel whatever happened (Ctrl-C and SIGTERM too), then disconnect. A
        host that cannot be brought back is said, and kept in `stranded` (the run fails), but the
        report of what was measured is still made."""
        try:
            with procs.after_signal():
                self.kexec.restore()
        except HostError as e:
            self.stranded = str(e)
            self.say(self.stranded)
        finally:
            self.conn.close()


# -- building for a host ----------------------------------------------------------------------
def host_config_file(where, config: str, dest: str | None, host: SshHost | None = None) -> Path:
    """The config file of `config = "host"` (the config of DEST, the --host) or `"host:SOURCE"`:
    the config that machine's kernel runs with (/proc/config.gz, else /boot/config-RELEASE), kept
    in the cache by content, so a second run builds nothing new while the host's kernel stays.
    HOST: DEST already opened this run (a KexecHost, restored first if a killed run left it on
    another kernel: its config is the one wanted); another SOURCE is connected to here. WHERE
    (the experiment's file) names the mistake of a missing DEST."""
    from flagbench.errors import UserError

    source = config[len("host:"):] if config.startswith("host:") else dest
    if not source:
        raise UserError(f"{where}: config = \"host\" takes the config of the --host machine: give --host DEST "
                        "(or write config = \"host:DEST\")")
    if host is not None and host.dest == source:
        return _fetch_config(host.conn, getattr(host, "kernel", None) or inspect(host.conn)[0])
    with connection(source) as conn:
        return _fetch_config(conn, inspect(conn)[0])


def _fetch_config(conn: Connection, host: HostKernel) -> Path:
    import gzip
    import hashlib

    if not host.config:
        raise HostError(f"host {conn.dest}: its kernel's config is in neither /proc/config.gz nor "
                        f"/boot/config-{host.release}")
    out = cache_dir() / "hosts" / "configs"
    out.mkdir(parents=True, exist_ok=True)
    raw = out / f".fetch-{os.getpid()}"
    conn.fetch(host.config, raw)
    data = raw.read_bytes()
    raw.unlink()
    if host.config.endswith(".gz"):
        data = gzip.decompress(data)
    path = out / f"{host.release}-{hashlib.sha256(data).hexdigest()[:12]}.config"   # by content: any alias, same cells
    if not path.exists():
        path.write_bytes(data)
    return path
