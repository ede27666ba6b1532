"""`flagbench run --host` end to end against real OpenSSH servers on 127.0.0.1 (tests/sshd_util.py):
real builds, programs copied to and run on the "host", the store, resume, faults and signals."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from conftest import ROOT, flagbench
from flagbench.store import Store
from sshd_util import free_port, running, sshd_server

SPIN_C = r"""
#include <stdint.h>
#define STR(x) #x
#define XSTR(x) STR(x)
/* "more" executes exactly 8 instructions more per iteration than "base"; HANG never returns. */
uint64_t spin(uint64_t n)
{
    uint64_t acc = 1;
    while (HANG) __asm__ volatile("");
    for (uint64_t i = 0; i < n; i++) {
        __asm__ volatile(".rept " XSTR(WORK) "\n\tnop\n\t.endr");
        acc = acc * 3 + i;
    }
    return acc;
}
uint64_t spin2(uint64_t n) { return spin(n); }
"""


def experiment(dir: Path, *, samples: int = 3, hang: int = 0, benches=("spin",), metrics='["time", "insns"]') -> Path:
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "spin.c").write_text(SPIN_C)
    text = textwrap.dedent(f"""
        sources = ["spin.c"]
        targets = ["x86_64"]
        cflags = ["-O1", "-DHANG={hang}"]

        [variants]
        base = {{ defines = {{ WORK = 0 }} }}
        more = {{ defines = {{ WORK = 8 }} }}
        """)
    for name in benches:
        text += textwrap.dedent(f"""
            [[bench]]
            name = "{name}"
            kind = "micro"
            function = "{name}"
            metrics = {metrics}
            samples = {samples}
            timeout = 300
            """)
    (dir / "experiment.toml").write_text(text)
    return dir


def run(*args, cwd: Path, ssh: str | None = None, timeout: float = 600):
    env = {"XDG_CACHE_HOME": str(cwd / "xdg"), **({"FLAGBENCH_SSH": ssh} if ssh else {})}
    cache = Path(os.environ.get("FLAGBENCH_CACHE", cwd / "cache"))
    return flagbench("run", *map(str, args), cwd=cwd, clean_env=True, cache=cache, env=env, timeout=timeout)


def start(*args, cwd: Path, ssh: str) -> subprocess.Popen:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"), "FLAGBENCH_SSH": ssh,
           "XDG_CACHE_HOME": str(cwd / "xdg"),
           "FLAGBENCH_CACHE": os.environ.get("FLAGBENCH_CACHE", str(cwd / "cache"))}
    return subprocess.Popen([sys.executable, "-m", "flagbench", "run", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def samples(db: Path) -> list[dict]:
    with Store(db, create=False) as store:
        return store.samples(store.runs()[-1]["id"])


def fleet_config(tmp_path: Path, *boxes) -> str:
    """One ssh config naming every box (each server wrote its own)."""
    config = tmp_path / "fleet_config"
    config.write_text("".join(b.config.read_text() for b in boxes))
    return f"ssh -F {config}"


def remote_programs(box) -> list[int]:
    """Processes running a program from the box's flagbench directory."""
    return running(f"{box.home}/.flagbench/run-")


def run_dirs(box) -> list[Path]:
    return sorted((box.home / ".flagbench").glob("run-*"))


def wait_for(predicate, within: float = 60) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_host_run_names_the_host_and_counts_equal_a_local_run(tmp_path):
    exp = experiment(tmp_path / "exp")
    with sshd_server(tmp_path / "box", alias="box") as box:
        remote = run(exp, "--db", tmp_path / "remote.db", "--host", "box", cwd=tmp_path, ssh=box.ssh_env)
        assert remote.returncode == 0, remote.stderr
        header = " ".join(remote.stdout.split())      # the run line wraps at 200 columns
        assert "timed on box (x86_64" in header and "exact counts taken here" in header
        assert not run_dirs(box)                 # the host's directory went with the run
        assert not remote_programs(box)
    local = run(exp, "--db", tmp_path / "local.db", cwd=tmp_path)
    assert local.returncode == 0, local.stderr

    got = samples(tmp_path / "remote.db")
    timed = [s for s in got if s["metric"] == "ns_per_iter"]
    assert sorted({s["cell"] for s in timed}) == ["base/x86_64/gcc:host=box", "more/x86_64/gcc:host=box"]
    assert len(timed) == 6 and all(s["value"] > 0 for s in timed)
    assert {s["provenance"]["executor"] for s in timed} == {"ssh:box"}
    assert all(len(s["provenance"]["host_load"]) == 2 for s in timed)
    counts = lambda rows: {s["cell"]: s["value"] for s in rows if s["metric"] == "insns_per_iter"}  # noqa: E731
    assert counts(got) == counts(samples(tmp_path / "local.db"))
    assert counts(got)["more/x86_64/gcc"] - counts(got)["base/x86_64/gcc"] == 8
    with Store(tmp_path / "remote.db", create=False) as store:
        hosts = store.run(store.runs()[-1]["id"])["provenance"]["hosts"]
    assert hosts["box"]["machine"] == os.uname().machine and hosts["box"]["cpus"] == os.cpu_count()
    with Store(tmp_path / "local.db", create=False) as store:   # the loopback box is this machine: read alike
        here = store.run(store.runs()[-1]["id"])["provenance"]
    assert hosts["box"]["cpu_features"] == here["cpu_features"]
    assert {"kernel", "cpu", "governor", "isolated", "perf_event_paranoid"} <= hosts["box"].keys() | {"governor"}


@pytest.mark.slow
def test_fleet_shares_cells_and_replicate_times_each_on_every_host(tmp_path):
    exp = experiment(tmp_path / "exp", benches=("spin", "spin2"), metrics='["time"]')
    with sshd_server(tmp_path / "b1", alias="b1") as b1, sshd_server(tmp_path / "b2", alias="b2") as b2:
        ssh = fleet_config(tmp_path, b1, b2)
        shared = run(exp, "--db", tmp_path / "shared.db", "--host", "b1", "--host", "b2", cwd=tmp_path, ssh=ssh)
        assert shared.returncode == 0, shared.stderr
        cells = {(s["bench"], s["cell"]) for s in samples(tmp_path / "shared.db")}
        hosts = {bench: {c.split("host=")[1] for b, c in cells if b == bench} for bench in ("spin", "spin2")}
        assert hosts["spin"] | hosts["spin2"] == {"b1", "b2"}     # each row on one host, A and B together
        assert len(hosts["spin"]) == len(hosts["spin2"]) == 1
        both = run(exp, "--db", tmp_path / "both.db", "--host", "b1", "--host", "b2", "--replicate", "--cpu", "0",
                   "--format", "json", cwd=tmp_path, ssh=ssh)
        assert both.returncode == 0, both.stderr
        cells = {s["cell"] for s in samples(tmp_path / "both.db") if s["bench"] == "spin"}
        assert cells == {f"{v}/x86_64/gcc:host={h}" for v in ("base", "more") for h in ("b1", "b2")}


@pytest.mark.slow
def test_a_host_that_drops_fails_its_cells_and_the_same_command_resumes(tmp_path):
    exp = experiment(tmp_path / "exp", samples=60, benches=("spin", "spin2"), metrics='["time"]')
    db = tmp_path / "fb.db"
    with ExitStack() as stack:
        b1 = stack.enter_context(sshd_server(tmp_path / "b1", alias="b1"))
        b2 = stack.enter_context(sshd_server(tmp_path / "b2", alias="b2"))
        ssh = fleet_config(tmp_path, b1, b2)
        args = (exp, "--db", db, "--host", "b1", "--host", "b2", "--format", "json")
        proc = start(*args, cwd=tmp_path, ssh=ssh)
        # the run is sampling on b2 once a program was copied there
        assert wait_for(lambda: any(d.glob("*-micro-*") for d in run_dirs(b2)), within=300), proc.stderr.read()
        time.sleep(1)
        b2.stop()
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, err
        failed = json.loads(out)["failures"]
        assert failed and all(f["reason"].startswith("host b2: ") for f in failed), failed
        assert all("run again to resume" in f["reason"] for f in failed)
        ok = {s["cell"] for s in samples(db) if "host=b1" in s["cell"]}
        assert len(ok) == 2                       # the other host's cells went on
        n_before = len(samples(db))

        b2 = stack.enter_context(sshd_server(tmp_path / "b2", alias="b2"))   # back, on a new port
        ssh = fleet_config(tmp_path, b1, b2)
        again = run(*args, cwd=tmp_path, ssh=ssh)
        assert again.returncode == 0, again.stderr
        after = samples(db)
        timed = {}
        for s in after:
            timed[s["cell"]] = timed.get(s["cell"], 0) + 1
        assert set(timed.values()) == {60} and len(timed) == 4      # every cell complete, nothing twice
        assert len(after) > n_before and not json.loads(again.stdout)["failures"]


def test_an_unreachable_host_is_one_line_before_anything_builds(tmp_path):
    exp = experiment(tmp_path / "exp")
    dest = f"ssh://root@127.0.0.1:{free_port()}"     # nothing listens there
    done = run(exp, "--db", tmp_path / "fb.db", "--host", dest, cwd=tmp_path, timeout=60,
               ssh="ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and dest in lines[0] and "Connection refused" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "fb.db").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_nothing_keeps_running_on_the_host_after_a_signal(tmp_path, sig):
    exp = experiment(tmp_path / "exp", hang=1, metrics='["time"]')
    with sshd_server(tmp_path / "box", alias="box") as box:
        proc = start(exp, "--db", tmp_path / "fb.db", "--host", "box", cwd=tmp_path, ssh=box.ssh_env)
        assert wait_for(lambda: remote_programs(box), within=300), proc.stderr.read()
        dirs = run_dirs(box)
        assert dirs
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        assert proc.returncode == (143 if sig == signal.SIGTERM else -9)
        assert wait_for(lambda: not remote_programs(box), within=30), remote_programs(box)
        assert wait_for(lambda: not any(d.exists() for d in dirs), within=30)


def test_doctor_host_says_what_the_host_takes_and_what_is_noisy(tmp_path):
    with sshd_server(tmp_path / "box", alias="box") as box:
        done = flagbench("doctor", "--host", "box", "--format", "json", env={"FLAGBENCH_SSH": box.ssh_env},
                         timeout=120)
        assert done.returncode == 0, done.stderr
        [report] = json.loads(done.stdout)
        assert report["reachable"] and report["takes"] == [os.uname().machine]
        assert report["facts"]["cpus"] == os.cpu_count()
        assert report["facts"]["perf_event_paranoid"] == Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
        if not Path("/sys/devices/system/cpu/isolated").read_text().strip():
            assert any(n["what"] == "no isolated CPU" and "isolcpus" in n["fix"] for n in report["noise"])
        # kexec readiness, against this machine's own files (the host is this machine)
        image = Path(f"/boot/vmlinuz-{os.uname().release}")
        assert report["kexec"]["image"] == (str(image) if image.exists() else "")
        if not image.exists():
            assert not report["kexec"]["ready"] and any(str(image) in r for r in report["kexec"]["refusal"])
        text = flagbench("doctor", "--host", "box", env={"FLAGBENCH_SSH": box.ssh_env}, timeout=120)
        assert text.returncode == 0 and "box: reachable" in text.stdout and "fix:" in text.stdout
        first = text.stdout.splitlines()[0]
        assert first.startswith("box: reachable (") and first.endswith(f" s to connect); hostname {os.uname().nodename}")
        assert "  kexec     " in text.stdout
        exp = experiment(tmp_path / "exp")
        cpu = run(exp, "--db", tmp_path / "fb.db", "--host", "box", "--cpu", "999", cwd=tmp_path, ssh=box.ssh_env)
        assert cpu.returncode == 2 and cpu.stderr.strip().endswith(f"--cpu 999: it has {os.cpu_count()} CPUs")
    gone = flagbench("doctor", "--host", "box", env={"FLAGBENCH_SSH": box.ssh_env}, timeout=120)
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1 and "host box: unreachable" in gone.stderr


def test_hosts_in_the_experiment_file(tmp_path):
    from flagbench import spec
    exp = experiment(tmp_path / "exp")
    text = (exp / "experiment.toml").read_text()
    (exp / "experiment.toml").write_text('hosts = ["board", "ssh://me@10.0.0.5:2222"]\n' + text)
    assert spec.load(exp).hosts == ("board", "ssh://me@10.0.0.5:2222")
    (exp / "experiment.toml").write_text('hosts = ["-oProxyCommand=x"]\n' + text)
    with pytest.raises(spec.UserError, match=r"experiment.toml:1: host '-oProxyCommand=x'"):
        spec.load(exp)


def test_a_will_it_scale_testcase_runs_on_the_host(tmp_path):
    exp = experiment(tmp_path / "exp", metrics='["time"]')
    (exp / "getppid.c").write_text((ROOT / "tests" / "data" / "wis_getppid.c").read_text())
    with open(exp / "experiment.toml", "a") as f:
        f.write('\n[[bench]]\nname = "getppid"\nkind = "wis"\ntestcase = "getppid.c"\ntasks = [1]\n'
                'modes = ["processes"]\nduration = 1\nwarmup_seconds = 0\nsamples = 2\n')
    with sshd_server(tmp_path / "box", alias="box") as box:
        done = run(exp, "--db", tmp_path / "fb.db", "--host", "box", "--bench", "getppid", cwd=tmp_path,
                   ssh=box.ssh_env)
        assert done.returncode == 0, done.stderr
    rates = [s for s in samples(tmp_path / "fb.db") if s["metric"] == "per_second"]
    assert {s["cell"] for s in rates} == {f"{v}/x86_64/gcc:host=box,mode=processes,tasks=1" for v in ("base", "more")}
    assert len(rates) == 4 and all(s["value"] > 0 and s["provenance"]["executor"] == "ssh:box" for s in rates)


def test_until_samples_on_the_host_in_pairs_while_counts_stay_here(tmp_path):
    """Timed cells on the host's lane, the exact counts on this machine's: `--until` adds rounds on
    the host, paired, and every sample knows how long its run took there."""
    exp = experiment(tmp_path / "exp")
    with sshd_server(tmp_path / "box", alias="box") as box:
        done = run(exp, "--db", tmp_path / "fb.db", "--host", "box", "--until", "50%", "--budget", "5m",
                   "--format", "json", cwd=tmp_path, ssh=box.ssh_env)
        assert done.returncode == 0, done.stderr
    assert "every row is resolved to +-50.0 % or better" in done.stderr
    [timed] = [t for t in json.loads(done.stdout)["tables"] if t["metric"] == "ns_per_iter"]
    change = timed["rows"][0]["comparisons"]["more"]
    assert change["paired"] and change["n_old"] >= 6                # 3 samples asked, rounds added
    got = [s for s in samples(tmp_path / "fb.db") if s["metric"] == "ns_per_iter"]
    assert all(s["provenance"]["contention"]["wall_s"] > 0 and s["provenance"]["round"] for s in got)
    assert len([s for s in samples(tmp_path / "fb.db") if s["metric"] == "insns_per_iter"]) == 2   # counted once
