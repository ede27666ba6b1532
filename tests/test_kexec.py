"""Kernels on a real machine: `flagbench run EXP --host box` against the kexec test box
(tests/testbox_util.py: a qemu-system TCG machine with dropbear and kexec, reached by ssh on
127.0.0.1 like any server). flagbench takes the box's own config (config = "host"), builds
the variants, kexecs the box into each in rounds A B B A, checks each booted kernel by its
build identity, runs the will-it-scale testcase there, and restores the box's kernel: at the
end, on SIGTERM, and (after kill -9) at the start of the next run, which resumes the killed one
to the exact sample count. The samples are the run engine's (run/hostrun.py makes the cells,
hosts/kexec.KexecHost is their place): the engine's round order itself is tested in-process
with a fake place (tests/test_places.py), and a whole run of rounds A B, B A with the box as a
labgrid place's NetworkService (tests/test_labgrid.py: the same kexec host behind a lease)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, ROOT, flagbench, wait_until
from testbox_util import booted_box

from flagbench.cache import cache_dir
from flagbench.hosts import kexec
from flagbench.hosts.ssh import label

BOOT_FRAGMENT = ROOT / "src" / "flagbench" / "run" / "guest" / "boot-x86_64.config"


EXPERIMENT = DATA / "kexec"


def _experiment(dir: Path | None = None, config: str = "host") -> Path:
    """The test experiment: tests/data/kexec itself (its kernels built once for every test and
    session), or a copy in DIR with another config (nothing built from it)."""
    if dir is None:
        return EXPERIMENT
    dir.mkdir(parents=True, exist_ok=True)
    text = (EXPERIMENT / "experiment.toml").read_text().replace('config = "host"', f'config = "{config}"')
    for rel in ("../../../src/flagbench/run/guest/boot-x86_64.config", "../kernel/one-function.patch",
                "../wis_getppid.c"):
        text = text.replace(f'"{rel}"', f'"{(EXPERIMENT / rel).resolve()}"')
    (dir / "experiment.toml").write_text(text)
    return dir


def _env(box) -> dict:
    return {"FLAGBENCH_SSH": box.ssh_env}


def _samples(db: Path) -> list[dict]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT bench, cell, metric, value, provenance FROM samples").fetchall()
    return [{"bench": b, "cell": cell, "metric": m, "value": v, "prov": json.loads(p)} for b, cell, m, v, p in rows]


def _identities(exp: Path, box) -> dict[str, str]:
    """variant -> (build identity, cached), from `flagbench build --host box --format json`."""
    done = flagbench("build", exp, "--host", box.alias, "--format", "json", "-q", env=_env(box), timeout=3600)
    assert done.returncode == 0, done.stderr
    return {c["variant"]: (c["identity"], c["cached"]) for c in json.loads(done.stdout)["cells"]}


def test_refusal_reasons():
    ok = {"uid": "0", "kexec": "/usr/sbin/kexec", "disabled": "0", "lockdown": "[none] integrity confidentiality"}
    assert kexec.refusal(ok) == []
    assert "kexec_load_disabled" in kexec.refusal({**ok, "disabled": "1"})[0]
    assert "locked down (integrity" in kexec.refusal({**ok, "lockdown": "none [integrity] confidentiality"})[0]
    assert "no kexec" in kexec.refusal({**ok, "kexec": ""})[0]
    assert "root" in kexec.refusal({**ok, "uid": "1000"})[0]


def _on_variant(box, original: str) -> bool:
    """The box answers on another flagbench build than its own (identities are hashes)."""
    v = box.version()
    return "(flagbench@fb-" in v and v != original


def _start(args, env) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env}
    return subprocess.Popen([sys.executable, "-m", "flagbench", *map(str, args)], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kexec_started(alias: str, since: float) -> bool:
    """flagbench has recorded a kexec away from the box's own kernel (hosts/kexec.py writes this
    just before kexec -e): from here to the run's end lie boots, samples and a restore, so a
    signal sent now lands mid-run however fast the box answers (an ssh poll of /proc/version
    could miss the variant's short stay)."""
    state = cache_dir() / "hosts" / label(alias) / "state.json"
    try:
        return state.stat().st_mtime >= since and json.loads(state.read_text()).get("moved", False)
    except (OSError, ValueError):
        return False


def _kexec_samples(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as c:
            return c.execute("SELECT count(*) FROM samples WHERE bench LIKE '% (kexec)'").fetchone()[0]
    except sqlite3.OperationalError:   # not made yet
        return 0


@pytest.mark.slow
def test_killed_run_leaves_the_box_restored(tmp_path):
    """SIGTERM mid-run: flagbench restores the box before it exits 143. kill -9 mid-run, after
    the first samples on the box: the box stays on the variant, and the same command again
    restores it first and resumes the run to the exact sample count."""
    exp = _experiment()
    with booted_box(tmp_path / "box", alias="box-killed") as box:
        original = box.version()
        _identities(exp, box)        # built (and cached) before the clock matters
        for sig, status in ((signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)):
            db = tmp_path / f"{sig}.db"
            started = time.time()
            proc = _start(["run", exp, "--host", "box-killed", "--rounds", "2", "--db", db], _env(box))
            try:
                if sig == signal.SIGKILL:
                    wait_until(lambda: _kexec_samples(db) >= 1 or proc.poll() is not None, 2400,
                               "the first sample on the box", every=0.2)
                else:
                    wait_until(lambda: _kexec_started(box.alias, started) or proc.poll() is not None, 2400,
                               "a kexec into a variant kernel", every=0.2)
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                proc.send_signal(sig)
                _, err = proc.communicate(timeout=600)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            assert proc.returncode == status, err[-2000:]
            if sig == signal.SIGTERM:
                assert box.version() == original and "is back on its own kernel" in err, err[-2000:]
            else:
                wait_until(lambda: _on_variant(box, original), 300, "the box on a variant after kill -9",
                           every=1)   # left there
        killed = tmp_path / f"{signal.SIGKILL}.db"
        taken = _kexec_samples(killed)
        assert 1 <= taken < 8
        done = flagbench("run", exp, "--host", "box-killed", "--rounds", "2", "--db", killed,   # the same command
                         env=_env(box), timeout=3600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "left there by an interrupted run: restoring" in done.stderr
        assert box.version() == original
        samples = [s for s in _samples(killed) if s["bench"] == "getppid on box-killed (kexec)"]
        # 2 variants x 2 rounds x 2 samples, whatever the kill left: each cell numbered 1..4 once
        by_cell: dict[str, list[int]] = {}
        for s in samples:
            by_cell.setdefault(s["cell"], []).append(s["prov"]["sample"])
        assert len(samples) == 8 and sorted(map(sorted, by_cell.values())) == [[1, 2, 3, 4]] * 2, by_cell
        assert len({s["prov"]["round"].split(".")[0] for s in samples}) == 2   # the killed session's, and the resumed one's


@pytest.mark.slow
def test_box_that_cannot_kexec_is_refused_before_building(tmp_path):
    exp = _experiment(tmp_path / "exp", "tinyconfig")
    (exp / "experiment.toml").write_text((exp / "experiment.toml").read_text().replace(
        "patched = { patches", 'never = { kcflags = ["-O1"], patches'))
    with booted_box(tmp_path / "box") as box:
        assert box.run("sh", "-c", "rm /usr/sbin/kexec; echo 1 > /proc/sys/kernel/kexec_load_disabled").returncode == 0
        done = flagbench("run", exp, "--host", "box", "--db", tmp_path / "fb.db", env=_env(box), timeout=600)
    assert done.returncode == 2, done.stderr
    assert "no kexec there" in done.stderr and "kexec_load_disabled = 1" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "configuring" not in done.stderr      # nothing was built


@pytest.fixture
def sshd_box(tmp_path, monkeypatch, object_cache):
    """This machine's own sshd as a host: inspected and read from, never kexec'd."""
    from sshd_util import sshd_server
    with sshd_server(tmp_path / "sshd", alias="box") as server:
        monkeypatch.setenv("FLAGBENCH_SSH", server.ssh_env)
        yield server


def test_inspect_and_host_config_over_ssh(sshd_box, tmp_path):
    import gzip

    from flagbench import spec, subject
    from flagbench.hosts.ssh import Connection

    with Connection("box") as conn:
        host, _ = kexec.inspect(conn)
    assert host.release == os.uname().release and host.machine == os.uname().machine
    assert host.version == Path("/proc/version").read_text().strip()
    if not Path("/proc/config.gz").exists():
        pytest.skip("this kernel has no /proc/config.gz")
    exp = spec.load(_experiment(tmp_path / "exp", "host:box"))
    assert exp.kernel.config == "host:box"
    got = subject.of(exp).with_host_config(None)
    assert Path(got.kernel.config).read_bytes() == gzip.decompress(Path("/proc/config.gz").read_bytes())
    assert got.kernel.hash != exp.kernel.hash


def test_host_config_needs_a_host(tmp_path, object_cache):
    done = flagbench("build", _experiment(tmp_path / "exp", "host"), cache=object_cache)
    assert done.returncode == 2 and "--host" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_the_check_exits_0_on_a_host_without_systemd(sshd_box):
    """The kexec check's last probe (systemd) fails where there is none: the script still says 0."""
    from flagbench.hosts.ssh import Connection
    if Path("/run/systemd/system").is_dir():
        pytest.skip("this machine runs systemd")
    with Connection("box") as conn:
        done = conn.shell(kexec.CHECK, timeout=60)
    assert done.returncode == 0 and "release=" in done.stdout, done


def test_a_moved_host_whose_kernel_copy_is_gone_says_what_to_do_by_hand(sshd_box):
    """The state file says a killed run left the host on another kernel, but flagbench's copy of
    the host's own kernel is gone: restoring is impossible, and the one line says what to do."""
    from flagbench.hosts.ssh import Connection, HostError
    with Connection("box") as conn:
        k = kexec.Kexec(conn)
        own, _ = kexec.inspect(conn)
        k.original = kexec.HostKernel(**{**own.__dict__, "version": "Linux version 0.0.1 (gone@before)",
                                         "release": "0.0.1"})
        k.dir.mkdir(parents=True, exist_ok=True)
        k._write_state(True)
        assert not (k.dir / "vmlinuz").exists()
        left, moved = k._read_state()
        assert moved and left.release == "0.0.1"
        with pytest.raises(HostError) as e:
            k.restore()
    message = str(e.value)
    assert "\n" not in message and "by hand" in message and "0.0.1" in message and str(k.state_file) in message
