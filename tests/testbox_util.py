"""The kexec test box: a small x86_64 machine under qemu-system (TCG) that flagbench reaches
by ssh and kexecs exactly as it would a real server.

    from testbox_util import booted_box
    with booted_box(tmp_path) as box:          # booted, answering ssh
        env = {"FLAGBENCH_SSH": box.ssh_env} # "ssh -F CONFIG": the alias "box" resolves through it
        ...                                  # flagbench run EXP --host box
    # qemu stopped

Everything comes from Debian packages: the kernel is the test kernel's tinyconfig + boot
fragment + tests/data/testbox/box.config (virtio-net, sockets, kexec, /proc/config.gz), built
by flagbench's own kernel build (cached); the userland is an initramfs written here with
flagbench.kernel.initramfs: busybox-static, kexec-tools' kexec and dropbear-bin's dropbear with
the shared libraries and loader `ldd` names, a dropbearkey host key and the test's client key.
Networking is qemu's user net forwarding 127.0.0.1:PORT to the box's port 22 (nothing else is
reachable either way). `-cpu max` gives TCG's RDRAND, and random.trust_cpu=on lets the crng
(and so dropbear) start at once after every kexec.

Like a Debian host, the box keeps its kernel and initramfs as /boot/vmlinuz-RELEASE and
/boot/initrd.img-RELEASE (copied in once it answers: an initramfs cannot hold itself); a
kexec'd kernel starts from the same initramfs, so they are there only until the first kexec,
which is why flagbench keeps its own copy of what it restores.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from flagbench import spec
from flagbench.build import cache_dir
from flagbench.kernel import initramfs as cpio
from flagbench.kernel import source
from flagbench.kernel.kbuild import KernelBuild, build_kernels

from kernel_util import missing_tools
from sshd_util import SshClient

EXPERIMENT = Path(__file__).resolve().parent / "data" / "testbox"
QEMU = "qemu-system-x86_64"
CMDLINE = "console=ttyS0 random.trust_cpu=on panic=-1"
BOOT_WAIT_S = 180
PROGRAMS = {"/usr/sbin/kexec": "usr/sbin/kexec", "/usr/sbin/dropbear": "usr/sbin/dropbear"}

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
class TestBox(SshClient):
    dir: Path
    port: int
    kernel: KernelBuild
    initrd: Path
    proc: subprocess.Popen
    console: Path
    alias: str = "box"

    __test__ = False

    @property
    def config(self) -> Path:
        return self.dir / "ssh_config"

    def run(self, *words: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """A command on the box, through plain ssh (not flagbench's connection)."""
        return subprocess.run([*self.ssh, self.alias, shlex.join(words)], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def version(self) -> str:
        """/proc/version there, or "" while it does not answer."""
        try:
            return self.run("cat", "/proc/version", timeout=30).stdout.strip()
        except subprocess.TimeoutExpired:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def box_kernel() -> KernelBuild:
    missing = missing_tools() + [t for t in (QEMU, "busybox", "dropbear", "dropbearkey", "ssh-keygen")
                                 if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if not Path("/usr/sbin/kexec").exists():
        missing.append("kexec-tools")
    if missing:
        pytest.skip(f"the kexec test box needs {', '.join(missing)} (scripts/install-deps)")
    exp = spec.load(EXPERIMENT)
    with source.locked(cache_dir() / "kernel" / "test-box.lock"):
        (build,) = build_kernels(exp, jobs=2, progress=False)
    assert build.ok, build.error
    return build


def _libraries(program: str) -> list[str]:
    """The shared libraries and loader a dynamic program needs, from ldd."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.splitlines():
        words = line.split()
        path = words[2] if "=>" in words and len(words) > 2 else words[0]
        if path.startswith("/"):
            paths.append(path)
    return paths


def make_initramfs(dir: Path, client_pub: str) -> Path:
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_key_line(dir: Path, port: int) -> str:
    out = subprocess.run(["dropbearkey", "-y", "-f", str(dir / "host_key")], capture_output=True, text=True,
                         check=True).stdout
    key = next(line for line in out.splitlines() if line.startswith("ssh-"))
    return f"[127.0.0.1]:{port} {' '.join(key.split()[:2])}\n"


def wait_ssh(box: TestBox, within: float = BOOT_WAIT_S) -> str:
    """/proc/version once ssh answers (slirp accepts TCP before the box listens: ask for real)."""
    end = time.monotonic() + within
    last = ""
    while time.monotonic() < end:
        if box.proc.poll() is not None:
            raise RuntimeError(f"qemu exited: {box.console.read_text(errors='replace')[-800:]}")
        try:
            done = box.run("cat", "/proc/version", timeout=20)
            if done.returncode == 0 and "Linux" in done.stdout:
                return done.stdout.strip()
            last = done.stderr.strip()
        except subprocess.TimeoutExpired:
            last = "timeout"
        time.sleep(0.5)
    raise RuntimeError(f"the box did not answer ssh in {within} s ({last}); console: "
                       f"{box.console.read_text(errors='replace')[-800:]}")


@contextlib.contextmanager
def booted_box(dir: Path, alias: str = "box") -> Iterator[TestBox]:
    kernel = box_kernel()
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(dir / "id")], check=True)
    initrd = make_initramfs(dir, (dir / "id.pub").read_text())
    port = _free_port()
    (dir / "known_hosts").write_text(_host_key_line(dir, port))
    (dir / "ssh_config").write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {dir / 'id'}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {dir / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
        "  LogLevel ERROR\n  ConnectTimeout 10\n")
    console = dir / "console.log"
    argv = [QEMU, "-M", "pc", "-m", "512M", "-cpu", "max", "-smp", "1", "-nodefaults", "-display", "none",
            "-no-reboot", "-serial", f"file:{console}", "-kernel", str(kernel.image), "-initrd", str(initrd),
            "-append", CMDLINE, "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
            "-device", "virtio-net-pci,netdev=n0"]
    with open(dir / "qemu.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    box = TestBox(dir, port, kernel, initrd, proc, console, alias)
    try:
        wait_ssh(box)
        release = box.run("uname", "-r").stdout.strip()
        for local, remote in ((kernel.image, f"/boot/vmlinuz-{release}"), (initrd, f"/boot/initrd.img-{release}")):
            with open(local, "rb") as f:
                done = subprocess.run([*box.ssh, alias, shlex.join(["sh", "-c", 'cat > "$1"', "sh", remote])], stdin=f, capture_output=True,
                                      timeout=120)
            assert done.returncode == 0, done.stderr
        yield box
    finally:
        box.stop()
