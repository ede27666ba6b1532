"""The box: a small x86_64 machine under qemu-system (TCG) that flagbench reaches by ssh and
kexecs exactly as it would a real server, so the real-machine path (`--host`, kexec) can be
tried without hardware. `flagbench box start|stop|status|ssh-config` and the tests use it.

    b = box.start(box.home())          # built (cached), booted, answering ssh on 127.0.0.1:PORT
    b.ssh_env                          # "ssh -F DIR/ssh_config": FLAGBENCH_SSH for --host box
    box.stop(box.home())               # qemu killed, nothing left running

Everything comes from Debian packages: the kernel is tinyconfig + the boot fragment +
box-x86_64.config (virtio-net, sockets, kexec, /proc/config.gz), built by flagbench's own
kernel build (cached); the userland is an initramfs written here: busybox-static, kexec-tools'
kexec and dropbear-bin's dropbear with the shared libraries and loader `ldd` names, a
dropbearkey host key and a client key made for this box. Networking is qemu's user net
forwarding 127.0.0.1:PORT (a free port) to the box's port 22: nothing else is reachable either
way. `-cpu max` gives TCG's RDRAND, and random.trust_cpu=on lets the crng (and so dropbear)
start at once after every kexec. Its clock is the TSC, whatever the load here: under TCG the
guest's TSC is this machine's, so the box is told its rate (tsc_early_khz=, measured by
host_tsc.py: no calibration against the emulated PIT, which failed under load) and to trust it
(tsc=reliable: the clocksource watchdog's reference is jiffies, whose ticks come late under
load). Without them, booted on a busy machine, the box kept time with refined-jiffies in 2 of 3
boots (clock reads in 4 ms steps; a timed bench there read "ns 0").

Like a Debian host, the box keeps its kernel and initramfs as /boot/vmlinuz-RELEASE and
/boot/initrd.img-RELEASE (copied in once it answers: an initramfs cannot hold itself).

The box's state (state.json: qemu's pid and start time, the port, and "ready" once its kernel
is in /boot; the keys, ssh_config, console.log) lives in its directory, by default
<cache>/box/NAME. One `start` at a time per box (start.lock, naming its pid); a box whose
start was killed before "ready" is not a box: `status` says so and the next `start` stops its
qemu and starts over. A state.json that cannot be read is one line naming it; `stop` clears it
(finding the box's qemu by its command line). qemu is a procs.detached server (its own session,
no owner token, left alone by procs' orphan scan), so it outlives `box start` (that is the point)
and no later flagbench sweeps it up as a leftover; `stop` kills its process group, checked by pid
and start time so a reused pid is never hit. flagbench reaches the box as any host, through
hosts/ssh.py's Connection with the box's ssh config (its boot waited for by hosts/booting.py).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from flagbench import procs
from flagbench.build import cache_dir
from flagbench.errors import UserError
from flagbench.run.guest import initramfs as cpio
from flagbench.run.guest.host_tsc import tsc_khz
# its state on disk (state.json, start.lock, its qemu): box_state.py; named here as before
from flagbench.run.guest.box_state import QEMU, STATE, BoxStateError, read_state, starting, stop, unfinished  # noqa: F401
from flagbench.run.guest.box_state import StartLock as _StartLock, qemu_alive as _qemu_alive
from flagbench.run.guest.box_state import start_time_of as _start_time, write_state as _write_state

CMDLINE = "console=ttyS0 random.trust_cpu=on tsc=reliable panic=-1"
BOOT_WAIT_S = 180
PROGRAMS = {"/usr/sbin/kexec": "usr/sbin/kexec", "/usr/sbin/dropbear": "usr/sbin/dropbear"}
HERE = Path(__file__).resolve().parent
FRAGMENTS = (HERE / "boot-x86_64.config", HERE / "box-x86_64.config")

INIT = """#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /root /var/tmp /usr/bin /usr/sbin /sbin /boot
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
echo "box: $(cat /proc/version)"
echo "box: cmdline $(cat /proc/cmdline)"
/usr/sbin/dropbear -F -E -s -r /etc/dropbear/host_key -p 22 &
while true; do sleep 3600; done
"""


@dataclass
class Box:
    dir: Path
    port: int
    pid: int
    alias: str = "box"

    @property
    def config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def console(self) -> Path:
        return self.dir / "console.log"

    @property
    def ssh(self) -> list[str]:
        return ["ssh", "-F", str(self.config)]

    @property
    def ssh_env(self) -> str:
        """FLAGBENCH_SSH's value for this box: `--host ALIAS` then resolves through its config."""
        return shlex.join(self.ssh)

    def running(self) -> bool:
        return _qemu_alive(self.dir, self.pid)

    def connection(self):
        """flagbench's ssh client to the box through its own config (hosts/ssh.py), not opened."""
        from flagbench.hosts.factory import box_connection
        return box_connection(self)

    def run(self, *words: str, timeout: float = 60):
        """A command on the box (an ssh.Done: returncode, stdout, stderr) through a Connection of
        its own; a HostError when the box does not answer."""
        with self.connection() as conn:
            return conn.run(list(words), timeout=timeout, guard=False)

    def version(self) -> str:
        """/proc/version there, or "" while it does not answer."""
        from flagbench.hosts.ssh import HostError
        try:
            done = self.run("cat", "/proc/version", timeout=30)
        except HostError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    def stop(self) -> None:
        stop(self.dir)

    def place(self, *, kexec: bool = False, say: Callable[[str], None] = lambda s: None):
        """The box as a run's place (hosts/factory.py): flagbench's ssh client through its config;
        a KexecHost with KEXEC (kernel experiments boot their variants there)."""
        from flagbench.hosts.factory import box_place
        return box_place(self, kexec=kexec, say=say)


def home(name: str = "box") -> Path:
    return cache_dir() / "box" / name


def missing() -> list[str]:
    """What the box needs that is not installed (scripts/install-deps installs it all)."""
    need = ["make", "gcc", "ccache", "flex", "bison", "bc", "patch", "tar", QEMU, "busybox", "dropbear",
            "dropbearkey", "ssh", "ssh-keygen", "ldd"]
    out = [t for t in need if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if not Path("/usr/sbin/kexec").exists():
        out.append("kexec (kexec-tools)")
    if not Path("/usr/src/linux-source-6.1.tar.xz").is_file():
        out.append("linux-source-6.1")
    return out


def experiment_file() -> Path:
    """The box kernel's experiment, written into the cache (fragments by absolute path): one
    place, so the box's cell is built once for `flagbench box` and the tests alike."""
    path = cache_dir() / "box" / "kernel" / "experiment.toml"
    text = ("# The box's own kernel (flagbench.kernel.box): tinyconfig + boot + box fragments.\n"
            'name = "box"\ndescription = "tinyconfig x86_64 + boot + network, kexec, ikconfig: a host to kexec"\n'
            'targets = ["x86_64"]\n\n[kernel]\nsource = "debian:6.1"\nconfig = "tinyconfig"\n'
            f"fragments = [{', '.join(json.dumps(str(f)) for f in FRAGMENTS)}]\n\n[variants]\nbox = {{}}\n")
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def kernel(progress: bool = False):
    """The box's kernel, built (or cached); a UserError naming what is missing or what failed."""
    from flagbench import spec
    from flagbench.kbuild.build import build_kernels
    lacking = missing()
    if lacking:
        raise UserError(f"the box needs {', '.join(lacking)} (scripts/install-deps)")
    exp = spec.load(experiment_file())
    (build,) = build_kernels(exp, jobs=None, progress=progress)   # its cell's lock: built once
    if not build.ok:
        raise UserError(f"the box's kernel did not build: {(build.error or '').splitlines()[0]}")
    return build


def _libraries(program: str) -> list[str]:
    """The shared libraries and loader a dynamic program needs, from ldd."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.splitlines():
        words = line.split()
        path = words[2] if "=>" in words and len(words) > 2 else (words[0] if words else "")
        if path.startswith("/"):
            paths.append(path)
    return paths


def make_initramfs(dir: Path, client_pub: str) -> Path:
    """DIR/box.cpio: busybox, kexec, dropbear (with a new host key in DIR) and CLIENT_PUB as root's key."""
    (dir / "host_key").unlink(missing_ok=True)
    subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(dir / "host_key")], check=True, capture_output=True)
    entries: dict[str, cpio.Entry] = {}

    def add_dirs(path: str) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            entries.setdefault(d, cpio.directory(d))

    def add(path: str, entry: cpio.Entry) -> None:
        add_dirs(path)
        entries[path] = entry

    for d in ("dev", "proc", "sys", "tmp", "root", "var/tmp", "boot", "etc/dropbear"):
        add_dirs(d + "/x")
    add("dev/console", cpio.char_device("dev/console", 5, 1))
    add("init", cpio.file("init", INIT.encode()))
    add("bin/busybox", cpio.file("bin/busybox", Path(shutil.which("busybox")).read_bytes()))
    for program, where in PROGRAMS.items():
        add(where, cpio.file(where, Path(program).read_bytes()))
        for lib in _libraries(program):
            real = Path(os.path.realpath(lib))
            add(lib.lstrip("/"), cpio.file(lib.lstrip("/"), real.read_bytes()))
    add("etc/passwd", cpio.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", executable=False))
    add("etc/group", cpio.file("etc/group", b"root:x:0:\n", executable=False))
    add("etc/shells", cpio.file("etc/shells", b"/bin/sh\n", executable=False))
    add("etc/dropbear/host_key", cpio.Entry("etc/dropbear/host_key", 0o100600, (dir / "host_key").read_bytes()))
    add("root/.ssh/authorized_keys", cpio.Entry("root/.ssh/authorized_keys", 0o100600, client_pub.encode()))
    # the kernel wants parents before children
    data = cpio.newc([entries[k] for k in sorted(entries, key=lambda p: (p.count("/"), p))])
    path = dir / "box.cpio"
    path.write_bytes(data)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_key_line(dir: Path, port: int) -> str:
    out = subprocess.run(["dropbearkey", "-y", "-f", str(dir / "host_key")], capture_output=True, text=True,
                         check=True).stdout
    key = next(line for line in out.splitlines() if line.startswith("ssh-"))
    return f"[127.0.0.1]:{port} {' '.join(key.split()[:2])}\n"


def ssh_config(dir: Path, alias: str, port: int) -> str:
    return (f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {dir / 'id'}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {dir / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
            "  LogLevel ERROR\n  ConnectTimeout 10\n")


def kernel_cmdline() -> str:
    """The box's kernel command line: CMDLINE and this machine's TSC rate (see the module doc);
    a board of the box's kernel that labgrid's QEMUDriver boots takes it too."""
    khz = tsc_khz(cache_dir() / "box")
    return CMDLINE + (f" tsc_early_khz={khz}" if khz else "")


def qemu_argv(image: Path, initrd: Path, port: int, console: Path, append: str = CMDLINE) -> list[str]:
    return [QEMU, "-M", "pc", "-m", "512M", "-cpu", "max", "-smp", "1", "-nodefaults", "-display", "none",
            "-no-reboot", "-serial", f"file:{console}", "-kernel", str(image), "-initrd", str(initrd),
            "-append", append, "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
            "-device", "virtio-net-pci,netdev=n0"]


def load(dir: Path) -> Box | None:
    """The box whose state is in DIR, if its qemu still runs and its start finished (BoxStateError:
    a damaged state)."""
    state = read_state(dir)
    if state is None or not state.get("ready"):
        return None
    b = Box(Path(dir), state["port"], state["pid"], state.get("alias", "box"))
    return b if _qemu_alive(Path(dir), b.pid, state.get("start_time")) else None


def start(dir: Path, alias: str = "box", say: Callable[[str], None] = lambda s: None,
          progress: bool = False) -> Box:
    """Boot the box with its state in DIR and wait until it answers ssh; a box already running
    there is returned as it is. Anything that fails (or a signal) stops qemu again. One start
    at a time (a second is told who starts it); what a killed start left is stopped first."""
    dir = Path(dir)
    with _StartLock(dir):
        running = load(dir)
        if running is not None:
            return running
        if stop(dir):        # a start killed before the box was ready left its qemu running
            say("stopped the qemu a start killed before the box was ready left running")
        try:
            return _boot(dir, alias, say, progress)
        except subprocess.CalledProcessError as e:     # ssh-keygen, dropbearkey, ldd
            words = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise UserError(f"the box: {Path(str(e.cmd[0])).name} failed: "
                            f"{words.strip().splitlines()[-1] if words.strip() else e}") from None


def power(dir: Path, alias: str, switch: str, say: Callable[[str], None] = lambda s: None) -> Box | None:
    """The box's power as a lab switches a board's (`flagbench box power on|off|cycle`, the
    labgrid place's ExternalPowerDriver): off stops its qemu (its lab stays), on boots it
    (its own kernel; a box already on is left as it is), cycle both. The box that runs after."""
    dir = Path(dir)
    if switch in ("off", "cycle"):
        with _StartLock(dir):        # never the qemu of a start under way: told who starts it
            if stop(dir):
                say("powered off (its qemu stopped)")
    return start(dir, alias, say) if switch in ("on", "cycle") else None


def _boot(dir: Path, alias: str, say: Callable[[str], None], progress: bool) -> Box:
    build = kernel(progress)
    dir.mkdir(parents=True, exist_ok=True)
    for name in ("id", "id.pub", STATE):
        (dir / name).unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"flagbench {alias}", "-f",
                    str(dir / "id")], check=True, capture_output=True)
    initrd = make_initramfs(dir, (dir / "id.pub").read_text())
    port = free_port()
    (dir / "known_hosts").write_text(_host_key_line(dir, port))
    (dir / "ssh_config").write_text(ssh_config(dir, alias, port))
    console = dir / "console.log"
    # procs.detached: its own session, no owner token, left alone by procs' orphan scan: it
    # outlives `box start` (the point), and no flagbench ends it (a plain Popen'd qemu was
    # killed as an orphan by the first program run after it: Connection's ssh -O check)
    with open(dir / "qemu.log", "wb") as log:
        argv = qemu_argv(build.image, initrd, port, console, kernel_cmdline())
        proc = procs.detached(argv, stdout=log, stderr=log, cwd=dir)
    state = {"pid": proc.pid, "start_time": _start_time(proc.pid), "port": port, "alias": alias,
             "kernel": str(build.image), "identity": build.identity, "ready": False}
    _write_state(dir, state)
    b = Box(dir, port, proc.pid, alias)
    conn = b.connection()
    try:
        say(f"booting the box (qemu pid {proc.pid}, ssh on 127.0.0.1:{port})")
        started = time.monotonic()
        wait_ssh(b, proc, conn=conn)
        say(f"the box answers ssh after {time.monotonic() - started:.1f} s; copying its kernel to /boot")
        release = conn.shell("uname -r").stdout.strip()
        for local, remote in ((build.image, f"/boot/vmlinuz-{release}"), (initrd, f"/boot/initrd.img-{release}")):
            conn.copy(Path(local), remote, mode="644", timeout=120)
        _write_state(dir, {**state, "ready": True})      # from here on it is a box
    except BaseException:
        stop(dir)
        raise
    finally:
        conn.close()
    return b


def wait_ssh(b: Box, proc: subprocess.Popen | None = None, within: float = BOOT_WAIT_S, conn=None) -> str:
    """/proc/version once ssh answers (slirp accepts TCP before the box listens: ask for real),
    with hosts/booting.py's wait through CONN (default: a Connection of the box's own, closed
    after); a UserError when its qemu exits meanwhile or it does not answer WITHIN seconds."""
    from flagbench.hosts.booting import wait_for_boot
    from flagbench.hosts.ssh import HostError

    def gone() -> str | None:
        if (proc.poll() is not None) if proc else not b.running():
            return f"the box's qemu exited: {_tail(b.dir / 'qemu.log')} {_tail(b.console)}"
        return None

    own = conn is None
    conn = b.connection() if own else conn
    try:
        return wait_for_boot(conn, lambda v: "Linux" in v, within=within, what="answer ssh", who="the box",
                             gone=gone)[0]
    except HostError as e:
        raise UserError(str(e) if "qemu exited" in str(e) else f"{e}; console: {_tail(b.console)}") from None
    finally:
        if own:
            conn.close()


def _tail(path: Path, n: int = 300) -> str:
    try:
        return " / ".join(path.read_text(errors="replace")[-n:].splitlines())
    except OSError:
        return ""


