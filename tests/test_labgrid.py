"""`flagbench run --place` against a real labgrid lab on 127.0.0.1 (tests/lab_util.py): labgrid's
coordinator and exporter, a place whose NetworkService is the sshd test server (or the kexec
test box), power through labgrid's ExternalPowerDriver running a script the test writes, a
second labgrid user holding the place while flagbench waits, release checked with the
coordinator after the end, SIGTERM and kill -9."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, flagbench, wait_until as wait_for
from lab_util import test_lab
from sshd_util import sshd_server
from test_hosts_run import experiment, samples

pytest.importorskip("labgrid", reason="make venv installs flagbench[lab] (labgrid 26.0.1)")

POWER = """#!/bin/sh
echo "$1 $2" >> "$(dirname "$0")/power.log"
"""


def ssh_config(tmp_path: Path, box) -> str:
    """FLAGBENCH_SSH for the place's NetworkService as labgrid gives it (127.0.0.1, its port)."""
    text = box.config.read_text().replace(f"Host {box.alias}\n", "Host 127.0.0.1\n")
    path = tmp_path / "lab_ssh_config"
    path.write_text(text)
    return f"ssh -F {path}"


def lab_env(tmp_path: Path, *places: str) -> Path:
    """LG_ENV: each place a target with an ExternalPowerDriver running the test's script."""
    import yaml
    script = tmp_path / "power.sh"
    script.write_text(POWER)
    script.chmod(0o755)
    targets = {p: {"resources": {"RemotePlace": {"name": p}},
                   "drivers": {"ExternalPowerDriver": {"cmd_on": f"{script} on {p}", "cmd_off": f"{script} off {p}",
                                                       "delay": 0.0}}}
               for p in places}
    path = tmp_path / "lab_env.yaml"
    path.write_text(yaml.safe_dump({"targets": targets}))
    return path


def power_log(tmp_path: Path) -> list[str]:
    path = tmp_path / "power.log"
    return path.read_text().splitlines() if path.exists() else []


def env_for(lab, tmp_path: Path, box, *places: str) -> dict:
    return {**lab.env, "LG_ENV": str(lab_env(tmp_path, *places)), "FLAGBENCH_SSH": ssh_config(tmp_path, box),
            "XDG_CACHE_HOME": str(tmp_path / "xdg")}


def own_cache(tmp_path: Path) -> Path:
    """FLAGBENCH_CACHE as the caller set it, else the test's own."""
    return Path(os.environ.get("FLAGBENCH_CACHE", tmp_path / "cache"))


def run(tmp_path: Path, env: dict, *args, timeout: float = 900, cache: Path | None = None):
    cache = cache or own_cache(tmp_path)
    return flagbench("run", *map(str, args), cwd=tmp_path, clean_env=True, cache=cache, env=env, timeout=timeout)


def start(tmp_path: Path, env: dict, *args) -> subprocess.Popen:
    full = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"),
            "FLAGBENCH_CACHE": str(own_cache(tmp_path)), **env}
    return subprocess.Popen([sys.executable, "-m", "flagbench", "run", *map(str, args)], cwd=tmp_path, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen, timeout: float = 120) -> str:
    """PROC's stderr once it has ended and nothing holds its pipes. A process it started that
    outlived it and holds them fails the test by name (a CI run once waited here 120 s after a
    kill -9, with no word of what held on)."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        held = pipe_holders(proc)
        raise AssertionError(f"flagbench {'ended: ' + str(proc.poll()) if proc.poll() is not None else 'still runs'}; "
                             f"{timeout} s later its stdout/stderr are held by: {held or 'nothing found'}") from None


def pipe_holders(proc: subprocess.Popen) -> list[str]:
    """'PID: command line' of every process with PROC's stdout or stderr pipe open (the test's excepted)."""
    pipes = {f"pipe:[{os.fstat(f.fileno()).st_ino}]" for f in (proc.stdout, proc.stderr) if f is not None}
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            if links & pipes:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{pid}: {cmd.strip()[:200]}")
        except OSError:
            continue
    return out


def kernel_cache() -> Path:
    """The session's cache, where this module and tests/test_kexec.py build the same experiment's
    kernels once, whichever comes first (a fresh cache per test built them cold again: minutes of
    the suite's budget)."""
    from flagbench.build import cache_dir
    return cache_dir()


def me() -> str:
    import getpass
    import socket
    return f"{socket.gethostname()}/{getpass.getuser()}"


@pytest.fixture(scope="module")
def lab_box(tmp_path_factory):
    """A lab with one exporter whose place b1 (arch=x86_64) is the sshd test server."""
    dir = tmp_path_factory.mktemp("lab")
    with sshd_server(dir / "box", alias="box") as box, test_lab(dir / "lab") as lab:
        lab.export("exp1", {"board1": {"NetworkService": {"address": "127.0.0.1", "port": box.port,
                                                          "username": "root"}}})
        lab.place("b1", "exp1/board1/*", arch="x86_64", board="sshd")
        yield lab, box


@pytest.mark.slow
def test_a_held_place_is_waited_for_then_timed_powered_and_released(lab_box, tmp_path):
    lab, box = lab_box
    exp = experiment(tmp_path / "exp")
    env = env_for(lab, tmp_path, box, "b1")
    lab.client("-p", "b1", "acquire", user="alice")
    assert lab.acquired("b1").endswith("/alice")
    releaser = threading.Timer(6.0, lambda: lab.client("-p", "b1", "release", user="alice"))
    releaser.start()
    try:
        done = run(tmp_path, env, exp, "--db", tmp_path / "fb.db", "--place", "b1", "--format", "json")
    finally:
        releaser.cancel()
        releaser.join()
    assert done.returncode == 0, done.stderr
    assert "place b1: waiting for it (b1 held by " in done.stderr and "/alice for " in done.stderr, done.stderr
    waited = [line for line in done.stderr.splitlines() if "ours after waiting" in line]
    assert len(waited) == 1 and int(waited[0].split("waiting ")[1].split()[0]) >= 4, done.stderr
    assert power_log(tmp_path) == ["on b1"]
    assert lab.acquired("b1") is None                     # released, as the coordinator says
    got = samples(tmp_path / "fb.db")
    timed = [s for s in got if s["metric"] == "ns_per_iter"]
    assert len(timed) == 6 and all(s["value"] > 0 for s in timed)
    assert {s["provenance"]["executor"] for s in timed} == {"ssh:b1"}       # named by the place
    assert {s["cell"] for s in timed} == {"base/x86_64/gcc:host=b1", "more/x86_64/gcc:host=b1"}
    counts = {s["cell"]: s["value"] for s in got if s["metric"] == "insns_per_iter"}
    assert counts["more/x86_64/gcc"] - counts["base/x86_64/gcc"] == 8


@pytest.mark.slow
def test_a_tag_takes_any_place_so_tagged_and_unknown_ones_are_bad_input(lab_box, tmp_path):
    lab, box = lab_box
    exp = experiment(tmp_path / "exp", samples=1)
    env = env_for(lab, tmp_path, box, "b1")
    done = run(tmp_path, env, exp, "--db", tmp_path / "fb.db", "--place", "board=sshd")
    assert done.returncode == 0, done.stderr
    assert "place b1: acquired by" in done.stderr and lab.acquired("b1") is None
    for places, words in ((["nosuch"], "no place of the lab"), (["arch=sparc"], "tagged so"),
                          (["board=sshd", "board=sshd"], "board=sshd 2 times: the lab has 1 place(s) so tagged (b1)"),
                          (["b1", "b1"], "--place names b1 twice")):
        bad = run(tmp_path, env, exp, "--db", tmp_path / "fb.db", *(w for p in places for w in ("--place", p)))
        assert bad.returncode == 2 and words in bad.stderr, bad.stderr
        assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, bad.stderr
        assert lab.acquired("b1") is None


@pytest.mark.slow
def test_a_place_held_too_long_is_given_up_on(lab_box, tmp_path):
    lab, box = lab_box
    exp = experiment(tmp_path / "exp", samples=1)
    lab.client("-p", "b1", "acquire", user="bob")
    try:
        done = run(tmp_path, env_for(lab, tmp_path, box, "b1"), exp, "--db", tmp_path / "fb.db",
                   "--place", "b1", "--place-wait", "3s")
    finally:
        lab.client("-p", "b1", "release", user="bob")
    assert done.returncode == 2, done.stderr
    assert "still b1 held by" in done.stderr and "/bob" in done.stderr and "--place-wait" in done.stderr
    assert "Traceback" not in done.stderr
    assert "b1" not in lab.reservations()             # our reservation cancelled


@pytest.mark.slow
def test_sigterm_and_kill_9_leave_the_place_released(lab_box, tmp_path):
    """SIGTERM: flagbench releases the place before it exits 143. kill -9: the coordinator
    still has it acquired, and the next run releases it first, saying so."""
    lab, box = lab_box
    exp = experiment(tmp_path / "exp", samples=2000)
    env = env_for(lab, tmp_path, box, "b1")
    for sig, status in ((signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)):
        proc = start(tmp_path, env, exp, "--db", tmp_path / f"{sig.name}.db", "--place", "b1")
        try:
            wait_for(lambda: lab.acquired("b1") is not None or proc.poll() is not None, 120, "the place acquired")
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(2)
            proc.send_signal(sig)
            err = finished(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == status, err
        if sig == signal.SIGTERM:
            assert lab.acquired("b1") is None and "place b1: released" in err, err
        else:
            assert lab.acquired("b1") == me()              # nobody released it
    done = run(tmp_path, env, experiment(tmp_path / "exp2", samples=1), "--db", tmp_path / "next.db",
               "--place", "b1")
    assert done.returncode == 0, done.stderr
    assert "that was killed" in done.stderr and "place b1: released; it was held as" in done.stderr, done.stderr
    assert lab.acquired("b1") is None


@pytest.mark.slow
def test_kernels_are_kexeced_on_a_place(tmp_path):
    """The kexec test box as a place's NetworkService: the variants booted there by kexec in
    rounds A B, B A, each checked by its build identity, the box inspected and its kernel
    fetched once, its kernel restored, the place released. (The one kexec rounds test: the
    place is a kexec host like any --host, whose killed and resumed runs tests/test_kexec.py has.)"""
    import shlex

    from sshd_util import logged_ssh, remote_commands
    from test_kexec import EXPERIMENT as KEXEC_EXPERIMENT, _samples
    from testbox_util import booted_box

    with booted_box(tmp_path / "box", alias="box") as box, test_lab(tmp_path / "lab") as lab:
        lab.export("exp1", {"box": {"NetworkService": {"address": "127.0.0.1", "port": box.port,
                                                       "username": "root"}}})
        lab.place("kx", "exp1/box/*", arch="x86_64")
        original = box.version()
        release = box.run("uname", "-r").stdout.strip()
        env = env_for(lab, tmp_path, box, "kx")
        log = tmp_path / "ssh.log"                 # every command the run sends the box
        env["FLAGBENCH_SSH"] = logged_ssh(log, shlex.split(env["FLAGBENCH_SSH"]))
        done = run(tmp_path, env, KEXEC_EXPERIMENT, "--db", tmp_path / "fb.db", "--place", "kx", "--rounds", "2",
                   "--format", "json", timeout=3600, cache=kernel_cache())
        assert done.returncode == 0, done.stderr[-3000:]
        assert box.version() == original and "is back on its own kernel" in done.stderr
        assert power_log(tmp_path) == ["on kx"] and lab.acquired("kx") is None
        sent = remote_commands(log)
        assert sum("kexec_load_disabled" in c for c in sent) == 1, sent
        assert sent.count(f"cat /boot/vmlinuz-{release}") == 1, sent
        assert sent.count(f"cat /boot/initrd.img-{release}") == 1, sent
        got = [s for s in _samples(tmp_path / "fb.db") if s["bench"] == "getppid on kx (kexec)"]
        assert len(got) == 8                              # 2 variants x 2 rounds x 2 samples
        assert all(s["metric"] == "per_second" and s["value"] > 0 for s in got)
        assert all("contention" in s["prov"] and s["prov"]["job"] == "sample" for s in got)   # the engine took them
        one_kernel_per_variant(got, not_this=original)
        boots: dict[int, set] = {}
        for s in got:
            boots.setdefault(s["prov"]["boot"], set()).add(s["cell"].split("/")[0])
        assert [boots[i] for i in range(4)] == [{"default"}, {"patched"}, {"patched"}, {"default"}]
        assert len({s["prov"]["round"] for s in got}) == 2
        text = json.dumps(json.loads(done.stdout))
        assert "getppid on kx (kexec)" in text and "kernel_insns_per_iter" in text   # real time beside TCG counts


def one_kernel_per_variant(samples: list[dict], not_this: str) -> dict[str, str]:
    """variant -> the build identity its samples' kernel said in /proc/version: one per variant,
    a different one for each, none the place's own kernel (NOT_THIS, its /proc/version)."""
    said: dict[str, set] = {}
    for s in samples:
        m = re.search(r"\(flagbench@(fb-[0-9a-f]+)\)", s["prov"]["kernel"])
        assert m, s["prov"]["kernel"]
        said.setdefault(s["cell"].split("/")[0], set()).add(m.group(1))
    assert all(len(ids) == 1 for ids in said.values()), said
    kernels = {variant: ids.pop() for variant, ids in said.items()}
    assert len(set(kernels.values())) == len(kernels) and not any(k in not_this for k in kernels.values()), kernels
    return kernels


def qemu_board(tmp_path: Path, lab, place: str = "qb"):
    """A board without kexec: labgrid's QEMUDriver boots the test box's kernel (its own image)
    with the box's initramfs; its NetworkService is qemu's forwarded ssh port. (LG_ENV, ssh)"""
    import yaml
    from sshd_util import free_port
    from flagbench.run.guest.box import QEMU, _host_key_line, kernel_cmdline, make_initramfs
    from flagbench.run.guest.box import kernel as box_kernel

    kernel = box_kernel()
    dir = tmp_path / "board"
    dir.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(dir / "id")], check=True)
    initrd = make_initramfs(dir, (dir / "id.pub").read_text())
    port = free_port()
    (dir / "known_hosts").write_text(_host_key_line(dir, port))
    (dir / "ssh_config").write_text(
        f"Host 127.0.0.1\n  User root\n  IdentityFile {dir / 'id'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {dir / 'known_hosts'}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
    lab.export(f"exp-{place}", {place: {"NetworkService": {"address": "127.0.0.1", "port": port, "username": "root"}}})
    lab.place(place, f"exp-{place}/{place}/*", arch="x86_64", boot="image")
    qemu = {"qemu_bin": "qemu", "machine": "pc", "cpu": "max", "memory": "512M", "kernel": "kernel",
            "boot_args": kernel_cmdline(), "extra_args": f"-nodefaults -smp 1 -no-reboot -initrd {initrd} -netdev "
                                                f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22 -device virtio-net-pci,netdev=n0"}
    env = {"targets": {place: {"resources": {"RemotePlace": {"name": place}}, "drivers": {"QEMUDriver": qemu}}},
           "tools": {"qemu": subprocess.run(["which", QEMU], capture_output=True, text=True).stdout.strip()},
           "images": {"kernel": str(kernel.image)}}
    (dir / "env.yaml").write_text(yaml.safe_dump(env))
    return {**lab.env, "LG_ENV": str(dir / "env.yaml"), "FLAGBENCH_SSH": f"ssh -F {dir / 'ssh_config'}",
            "XDG_CACHE_HOME": str(tmp_path / "xdg")}, kernel


def qemus(marker: str) -> list[int]:
    from sshd_util import running
    return [pid for pid in running("/usr/bin/qemu-system") if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()]


@pytest.mark.slow
def test_a_board_without_kexec_boots_each_variant_by_power_cycle(tmp_path):
    """QEMUDriver as the board: rounds A B B A, each boot a power cycle with the variant's kernel
    as the board's image, the identity checked; the board back on its own image, qemu ended."""
    from test_kexec import EXPERIMENT as KEXEC_EXPERIMENT, _samples

    with test_lab(tmp_path / "lab") as lab:
        env, kernel = qemu_board(tmp_path, lab)
        marker = str(tmp_path / "board")
        done = run(tmp_path, env, KEXEC_EXPERIMENT, "--db", tmp_path / "fb.db", "--place", "qb", "--rounds", "2",
                   timeout=3600, cache=kernel_cache())
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stderr.count("power-cycle place qb into") == 4, done.stderr
        assert "place qb is back on its own image" in done.stderr and lab.acquired("qb") is None
        assert not qemus(marker)                            # labgrid's qemu ended with the run
        got = [s for s in _samples(tmp_path / "fb.db") if s["bench"] == "getppid on qb (power cycle)"]
        assert len(got) == 8                               # 2 variants x 2 rounds x 2 samples
        one_kernel_per_variant(got, not_this=kernel.identity)
        boots = {}
        for s in got:
            variant = s["cell"].split("/")[0]
            assert s["value"] > 0 and s["prov"]["identity"] in s["prov"]["kernel"]
            assert s["prov"]["place"] == "qb" and s["prov"]["power_cycle_seconds"] > 0
            boots.setdefault(s["prov"]["boot"], set()).add(variant)
        assert [boots[i] for i in range(4)] == [{"default"}, {"patched"}, {"patched"}, {"default"}]


@pytest.mark.slow
def test_a_fleet_of_places_shares_rows_and_a_place_that_drops_out_is_resumed(tmp_path):
    """Two places of one architecture share the rows as an ssh fleet does; one whose board
    drops out mid-run fails its rows as resumable, the other goes on, and the same command
    measures the rest once the board is back."""
    from contextlib import ExitStack

    from test_hosts_run import run_dirs

    exp = experiment(tmp_path / "exp", samples=60, benches=("spin", "spin2"), metrics='["time"]')
    db = tmp_path / "fb.db"

    def config(*boxes) -> str:     # the NetworkServices name ssh aliases: a board back on a new port keeps its name
        path = tmp_path / "fleet_config"
        path.write_text("".join(b.config.read_text() for b in boxes))
        return f"ssh -F {path}"

    with ExitStack() as stack:
        b1 = stack.enter_context(sshd_server(tmp_path / "b1", alias="b1"))
        b2 = stack.enter_context(sshd_server(tmp_path / "b2", alias="b2"))
        lab = stack.enter_context(test_lab(tmp_path / "lab"))
        for n in ("1", "2"):
            lab.export(f"exp{n}", {f"board{n}": {"NetworkService": {"address": f"b{n}", "username": "root"}}})
            lab.place(f"p{n}", f"exp{n}/board{n}/*", arch="x86_64")
        env = {**lab.env, "LG_ENV": str(lab_env(tmp_path, "p1", "p2")), "FLAGBENCH_SSH": config(b1, b2)}
        args = (exp, "--db", db, "--place", "p1", "--place", "p2", "--format", "json")
        proc = start(tmp_path, env, *args)
        try:
            wait_for(lambda: any(d.glob("*-micro-*") for d in run_dirs(b2)) or proc.poll() is not None, 300,
                     "a program copied to p2")
            time.sleep(1)
            b2.stop()
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1, err
        failed = json.loads(out)["failures"]
        assert failed and all("run again to resume" in f["reason"] for f in failed), [f["reason"] for f in failed]
        assert {s["cell"].split("host=")[1] for s in samples(db)} <= {"p1", "p2"}
        assert lab.acquired("p1") is None and lab.acquired("p2") is None
        b2 = stack.enter_context(sshd_server(tmp_path / "b2", alias="b2"))    # back, on a new port
        env["FLAGBENCH_SSH"] = config(b1, b2)
        again = run(tmp_path, env, *args)
        assert again.returncode == 0, again.stderr
        counts: dict = {}
        for s in samples(db):
            counts[s["cell"]] = counts.get(s["cell"], 0) + 1
        assert set(counts.values()) == {60} and len(counts) == 4, counts   # every cell complete, nothing twice
        assert {c.split("host=")[1] for c in counts} == {"p1", "p2"}


@pytest.mark.slow
def test_a_board_that_does_not_come_up_is_cycled_back_and_its_console_shown(tmp_path, monkeypatch):
    """A boot that fails (an image its boot cannot load; a kernel that is not the variant's) is
    the place's failure: the board is power-cycled back into its own image and the reason
    carries the last lines of its serial console."""
    from types import SimpleNamespace

    from flagbench.errors import PlaceLost
    from flagbench.hosts.lab_boot import LabBootHost
    from flagbench.hosts.lab_place import leased

    with test_lab(tmp_path / "lab") as lab:
        env, kernel = qemu_board(tmp_path, lab)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        said: list[str] = []
        garbage = tmp_path / "garbage.img"
        garbage.write_bytes(b"not a kernel\n" * 100)
        with leased(["qb"], say=said.append) as (lease,):
            host = LabBootHost(lease, said.append, wait_s=120).open()
            try:
                with pytest.raises(PlaceLost) as bad:
                    host.enter("broken", SimpleNamespace(image=garbage, identity="fb-broken-000000000000"))
                assert "cannot boot garbage.img" in str(bad.value), bad.value
                assert "box: cmdline" not in str(bad.value)   # the console tail is this boot's, not the last one's
                with pytest.raises(PlaceLost) as other:      # its own kernel, not the variant's build
                    host.enter("never", SimpleNamespace(image=kernel.image, identity="fb-never-000000000000"))
                why = str(other.value)
                assert "not fb-never-000000000000" in why and "last console lines: " in why, why
                assert "(nothing on the serial console)" not in why and "run again to resume" in why
                assert said.count("place qb: power-cycled back into its own image") == 2, said
                assert "Linux" in host.conn.shell("cat /proc/version", timeout=60).stdout   # usable again
            finally:
                host.close()
        assert lab.acquired("qb") is None
        assert not qemus(str(tmp_path / "board"))


@pytest.fixture(scope="module")
def api_lab(tmp_path_factory):
    """A coordinator and an exporter whose place `p` has a NetworkService nobody answers on:
    enough for reservations, acquiring and releasing, no ssh (~30 s to start at load 20)."""
    with test_lab(tmp_path_factory.mktemp("api-lab")) as lab:
        lab.export("e", {"g": {"NetworkService": {"address": "127.0.0.1", "port": 2222, "username": "fb"}}})
        lab.place("p", "e/g/*", arch="x86_64")
        yield lab


@pytest.fixture
def small_lab(api_lab, monkeypatch, object_cache):
    monkeypatch.setenv("LG_COORDINATOR", api_lab.address)
    monkeypatch.delenv("LG_ENV", raising=False)
    return api_lab


@pytest.mark.slow
def test_the_api_waits_for_a_held_place_and_gives_up_saying_who(small_lab):
    from flagbench.hosts.labgrid import Lab, LabError

    lab = small_lab
    lab.client("-p", "p", "acquire", user="carol")
    said: list[str] = []
    with Lab.connect(said.append) as client:
        with pytest.raises(LabError) as e:
            client.lease("p", wait_s=1.5)
        assert "still p held by" in str(e.value) and "/carol for " in str(e.value)
    assert any("waiting for it (p held by" in s for s in said), said
    assert lab.acquired("p").endswith("/carol") and "owner" not in lab.reservations()   # ours cancelled
    lab.client("-p", "p", "release", user="carol")
    with Lab.connect(said.append) as client:
        lease = client.lease("arch=x86_64", wait_s=10)
        assert lease.place == "p" and lease.dest == "ssh://fb@127.0.0.1:2222" and lease.waited < 10
        assert lab.acquired("p") == me()
    assert lab.acquired("p") is None and "place p: released" in said


@pytest.mark.slow
def test_a_place_a_killed_run_held_is_released_by_the_next(small_lab, object_cache):
    """A note whose flagbench is gone (kill -9): the next session releases the place it held."""
    from flagbench.hosts import lab_state
    from flagbench.hosts.labgrid import Lab

    lab = small_lab
    lab.client("-p", "p", "acquire")                       # as this user, like the killed run
    dead_note(lab, "TOKEN1", changed=changed_of(lab, "p"))
    said: list[str] = []
    with Lab.connect(said.append):
        pass
    assert lab.acquired("p") is None
    assert any("place p: released; it was held as" in s and "that was killed" in s for s in said), said
    assert not list(lab_state.state_dir().glob("*.json"))


def dead_note(lab, token: str, changed) -> None:
    """The note a run killed with -9 leaves (hosts/lab_state.py) for place p."""
    from flagbench.hosts import lab_state
    lab_state.state_dir().mkdir(parents=True, exist_ok=True)
    (lab_state.state_dir() / f"{token}.json").write_text(json.dumps(
        {"coordinator": lab.address, "user": me(), "spec": "p", "token": token, "place": "p", "changed": changed,
         "owner": "7fffffff0000000000000001", "pid": 2**31 - 1, "since": time.time() - 90}))


def changed_of(lab, place: str) -> float:
    """The coordinator's `changed` time of PLACE, through labgrid's own client session."""
    from labgrid.remote import client
    session = client.start_session(lab.address)
    try:
        return session.places[place].changed
    finally:
        session.loop.run_until_complete(session.stop())
        session.loop.run_until_complete(session.close())


@pytest.mark.slow
def test_a_place_acquired_again_by_hand_after_a_kill_is_left_alone(small_lab, object_cache):
    """The killed run's acquisition was released by hand and the user took the place again: the
    next run (which wants another place, or none) must not release the user's own hold."""
    from flagbench.hosts import lab_state
    from flagbench.hosts.labgrid import Lab

    lab = small_lab
    lab.client("-p", "p", "acquire")                   # the killed run's acquisition ...
    killed_at = changed_of(lab, "p")
    time.sleep(0.05)
    lab.client("-p", "p", "release")                   # ... released by hand, taken again by hand
    lab.client("-p", "p", "acquire")
    dead_note(lab, "TOKEN2", changed=killed_at)
    said: list[str] = []
    try:
        with Lab.connect(said.append):
            pass
        assert lab.acquired("p") == me(), said
        assert any(s.startswith(f"place p: left to {me()}, who acquired it after") for s in said), said
        assert not any("released" in s for s in said), said
        assert not list(lab_state.state_dir().glob("*.json"))
    finally:
        lab.client("-p", "p", "release")


@pytest.mark.parametrize("address", ["127.0.0.1:99999", "[::1", "host:port", "a@b:1"])
def test_a_bad_coordinator_address_is_one_line_and_exit_2(tmp_path, address):
    done = flagbench("run", ROOT / "cases" / "memcpy-strategy", "--place", "p", "--db", tmp_path / "db",
                     env={"LG_COORDINATOR": address}, cache=tmp_path / "cache")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"flagbench run: LG_COORDINATOR={address!r}: not HOST or HOST:PORT"), done.stderr


def test_an_unreachable_coordinator_is_flagbenchs_one_line_and_place_wait_0_is_taken(tmp_path):
    from redis_util import free_port
    done = flagbench("run", ROOT / "cases" / "memcpy-strategy", "--place", "p", "--place-wait", "0",
                     "--db", tmp_path / "db", env={"LG_COORDINATOR": f"127.0.0.1:{free_port()}"},
                     cache=tmp_path / "cache")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr      # no "ERROR:root:" before it
    assert done.stderr.startswith("flagbench run: labgrid coordinator 127.0.0.1:"), done.stderr
    assert "unreachable" in done.stderr and "Connection refused" in done.stderr, done.stderr
    bad = flagbench("run", ROOT / "cases" / "memcpy-strategy", "--place", "p", "--place-wait", "-1",
                    "--db", tmp_path / "db", cache=tmp_path / "cache")
    assert bad.returncode == 2 and bad.stderr.startswith("flagbench run: --place-wait '-1'"), bad.stderr


@pytest.mark.slow
def test_a_coordinator_gone_mid_run_says_not_released_once(tmp_path, object_cache, monkeypatch):
    from flagbench.hosts.labgrid import Lab, LabError

    with test_lab(tmp_path / "lab") as lab:
        lab.export("e", {"g": {"NetworkService": {"address": "127.0.0.1", "port": 2222, "username": "fb"}}})
        lab.place("q", "e/g/*")
        monkeypatch.setenv("LG_COORDINATOR", lab.address)
        monkeypatch.delenv("LG_ENV", raising=False)
        said: list[str] = []
        with pytest.raises(LabError) as e:
            with Lab.connect(said.append) as client:
                client.lease("q", wait_s=10)
                lab.stop()                                  # the coordinator goes away mid-run
    lines = [*said, str(e.value)]
    assert sum("not released" in line for line in lines) == 1, lines
    assert str(e.value).startswith("place q: not released: labgrid coordinator"), lines


@pytest.mark.slow
def test_the_box_lab_is_a_lab_to_try_place_on(tmp_path):
    """run/guest/box_lab.py (`flagbench box start --lab`) around a box: here the sshd test server
    answering as the ssh alias "box" stands in for the qemu box (no kernel build). A run with
    --place box is reserved, acquired, timed there and released; stop_lab leaves no labgrid."""
    from flagbench.run.guest import box_lab as lab_box
    from flagbench.run.guest.box_state import start_time_of
    from test_hosts_run import experiment as host_experiment

    with sshd_server(tmp_path / "box", alias="box") as box:
        lab = lab_box.start_lab(tmp_path / "lab", alias="box", arch=os.uname().machine)
        try:
            pids = [p["pid"] for p in json.loads((tmp_path / "lab" / lab_box.STATE).read_text())["processes"].values()]
            assert len(pids) == 2 and all(start_time_of(pid) for pid in pids)
            assert lab_box.load_lab(tmp_path / "lab").address == lab.address == lab.exports["LG_COORDINATOR"]
            exp = host_experiment(tmp_path / "exp", samples=2)
            env = {**lab.exports, "FLAGBENCH_SSH": box.ssh_env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
            done = run(tmp_path, env, exp, "--db", tmp_path / "fb.db", "--place", "box", "--format", "json")
            assert done.returncode == 0, done.stderr[-3000:]
            assert "place box: acquired by" in done.stderr and "place box: released" in done.stderr, done.stderr
            assert "its shell is root@box (NetworkService)" in done.stderr, done.stderr
            taken = samples(tmp_path / "fb.db")
            assert sum(s["cell"].endswith(":host=box") for s in taken) >= 4, taken[:2]   # 2 variants x 2 samples
        finally:
            assert lab_box.stop_lab(tmp_path / "lab")
        assert not any(start_time_of(pid) for pid in pids)          # nothing of the lab outlives stop
        assert lab_box.load_lab(tmp_path / "lab") is None and not lab_box.stop_lab(tmp_path / "lab")
