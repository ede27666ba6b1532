"""hosts/factory.py: every place of a run, of `doctor` and of the box made in one place, by one
rule. The kinds are checked on experiments as spec.load reads them; the box's place is opened
against a real OpenSSH server (tests/sshd_util.py) through the box's own ssh config."""
from __future__ import annotations

import os
from pathlib import Path
import pytest

from conftest import ROOT
from flagbench import spec, subject
from flagbench.errors import UserError
from flagbench.hosts.factory import box_place, checked_place, ssh_places
from flagbench.hosts.kexec import KexecHost
from flagbench.hosts.lab_boot import LabBootHost
from flagbench.hosts.remote import SshHost
from flagbench.run.guest import box as kbox
from sshd_util import sshd_server

KEXEC_EXPERIMENT = ROOT / "tests" / "data" / "kexec"     # test_kexec.py's: guest benches of a kernel


def test_plain_experiments_get_an_ssh_host_per_dest(tmp_path):
    exp = subject.of(spec.load(ROOT / "cases" / "memcpy-strategy"))
    places = ssh_places(exp, ["a", "ssh://me@10.0.0.5:2222"], print)
    assert [type(p) for p in places] == [SshHost, SshHost] and [p.dest for p in places] == ["a", "ssh://me@10.0.0.5:2222"]
    with pytest.raises(UserError, match="--host names a twice"):
        ssh_places(exp, ["a", "b", "a"], print)


def test_guest_benches_get_one_kexec_host():
    exp = subject.of(spec.load(KEXEC_EXPERIMENT))
    [place] = ssh_places(exp, ["board"], print)
    assert type(place) is KexecHost and place.boot_kind == "kexec" and place.kexec.conn is place.conn
    with pytest.raises(UserError, match="one --host at a time"):
        ssh_places(exp, ["a", "b"], print)


def test_booting_places_say_how_they_boot():
    assert KexecHost.boot_kind == "kexec" and LabBootHost.boot_kind == "power cycle"
    assert not hasattr(SshHost, "boot_kind")


def test_the_box_is_a_place_through_hosts_ssh(tmp_path):
    with sshd_server(tmp_path / "srv", alias="box") as server:
        b = kbox.Box(server.dir, server.port, pid=0, alias="box")     # its ssh_config: the server's
        place = b.place().open()
        try:
            assert type(place) is SshHost and place.conn.ssh == ["ssh", "-F", str(server.config)]
            assert place.machine() == os.uname().machine and place.facts["cpus"] == os.cpu_count()
            done = place.run(["/bin/echo", "hi"], timeout=30)
            assert done.returncode == 0 and done.stdout == "hi\n"
        finally:
            place.close()
        kexec = b.place(kexec=True)
        assert type(kexec) is KexecHost and kexec.conn.ssh == kexec.kexec.conn.ssh == b.ssh
        done = b.run("sh", "-c", "echo $1; exit 3", "sh", "a b")     # Box.run: a Connection of its own
        assert (done.returncode, done.stdout) == (3, "a b\n")
        assert b.version() == Path("/proc/version").read_text().strip()
    assert b.version() == ""                                         # the box does not answer


def test_doctor_checks_an_ssh_host():
    assert type(checked_place("box")) is SshHost


def test_one_wait_for_boot_for_every_booting_place(tmp_path):
    """hosts/booting.py against a real sshd: it reconnects each try until ANSWERED takes the
    machine's /proc/version; a machine that never answers as asked is one HostError naming it."""
    from flagbench.hosts.booting import wait_for_boot
    from flagbench.hosts.ssh import Connection, HostError

    proc_version = Path("/proc/version").read_text().strip()
    with sshd_server(tmp_path / "srv", alias="box") as server:
        conn = Connection("box", ssh=server.ssh)
        try:
            seen: list[str] = []
            version, seconds = wait_for_boot(conn, lambda v: seen.append(v) or len(seen) == 3, within=120,
                                             what="answer", who="host box")
            assert version == proc_version and seen == [proc_version] * 3 and seconds > 0
            with pytest.raises(HostError) as e:
                wait_for_boot(conn, lambda v: False, within=2, what="answer as fb-0000", who="place p")
            assert str(e.value) == "place p did not answer as fb-0000 within 2 s; last ssh error: no answer yet"
            with pytest.raises(HostError, match="^gone for good$"):
                wait_for_boot(conn, lambda v: True, within=60, what="answer", who="x", gone=lambda: "gone for good")
        finally:
            conn.close()


def test_the_box_waits_through_hosts_ssh_and_says_when_its_qemu_is_gone(tmp_path):
    from flagbench.errors import UserError
    import subprocess
    with sshd_server(tmp_path / "srv", alias="box") as server:
        b = kbox.Box(server.dir, server.port, pid=0, alias="box")
        qemu = subprocess.Popen(["sleep", "600"])          # stands in for a running qemu
        try:
            assert kbox.wait_ssh(b, qemu, within=120) == Path("/proc/version").read_text().strip()
        finally:
            qemu.kill()
            qemu.wait()
        with pytest.raises(UserError, match="^the box's qemu exited"):
            kbox.wait_ssh(b, qemu, within=120)
    qemu = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(UserError, match=r"^the box did not answer ssh within 3 s; last ssh error: .*; console: "):
            kbox.wait_ssh(b, qemu, within=3)
    finally:
        qemu.kill()
        qemu.wait()


def test_one_enter_for_every_booting_place():
    """BootingPlace.enter, with a boot() that stands in for kexec / power cycle: what every
    booting place does around its own way of booting (a fake place for the engine's side)."""
    from types import SimpleNamespace
    from flagbench.errors import NotHere, PlaceLost
    from flagbench.hosts.booting import BootingPlace
    from flagbench.hosts.ssh import HostError

    assert issubclass(KexecHost, BootingPlace) and issubclass(LabBootHost, BootingPlace)

    class Bench(BootingPlace):
        boot_kind, seconds_key, running = "kexec", "kexec_seconds", "Linux version 6.1 fb-00ff"

        def boot(self, variant, build):
            if variant == "broken":
                raise HostError("host board did not answer")
            return 2.25

    said: list[str] = []
    place = Bench("board", say=said.append)
    build = SimpleNamespace(identity="fb-00ff")
    place.enter("patched", build)
    assert said == ["boot 0: kexec board into patched (fb-00ff)", "board answers as fb-00ff 2.2 s after kexec"]
    assert place.visit == {"host": "board", "boot": 0, "kernel": "Linux version 6.1 fb-00ff",
                                    "kexec_seconds": 2.25, "identity": "fb-00ff"}
    with pytest.raises(PlaceLost, match="^board: variant none has no kernel to boot there"):
        place.enter("none", None)
    with pytest.raises(PlaceLost, match=r"^boot 1 \(broken\): host board did not answer"):
        place.enter("broken", build)
    assert place.visit == {} and place.down.startswith("boot 1")
    place.tried = lambda v: "Kernel panic" if v == "panics" else None
    with pytest.raises(NotHere, match="panicked in flagbench's qemu boot"):
        place.enter("panics", build)
    assert place.booted == 2          # the refused ones were not boots
