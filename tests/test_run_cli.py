"""`flagbench run EXPERIMENT` end to end: real builds, real harness runs, the store, resume, the report."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import flagbench as cli
from flagbench.run.executors import perf_available
from flagbench.store import Store

LOOP_C = r"""
#include <stdint.h>
#define STR(x) #x
#define XSTR(x) STR(x)
/* WORK nops per iteration: variant "more" executes exactly 8 instructions more than "base". */
uint64_t spin(uint64_t n)
{
    uint64_t acc = 1;
    for (uint64_t i = 0; i < n; i++) {
        __asm__ volatile(".rept " XSTR(WORK) "\n\tnop\n\t.endr");
        acc = acc * 3 + i;
    }
    return acc;
}
"""


def write_experiment(directory, targets='"x86_64", "loongarch64"', metrics='"time", "insns", "perf"'):
    """The spin loop, variant "more" 8 nops an iteration more than "base", 3 samples a cell."""
    (directory / "loop.c").write_text(LOOP_C)
    (directory / "experiment.toml").write_text(textwrap.dedent(f"""
        sources = ["loop.c"]
        targets = [{targets}]
        cflags = ["-O1"]

        [variants]
        base = {{ defines = {{ WORK = 0 }} }}
        more = {{ defines = {{ WORK = 8 }} }}

        [[bench]]
        name = "spin"
        kind = "micro"
        function = "spin"
        metrics = [{metrics}]
        samples = 3
        """))
    return directory


@pytest.fixture
def experiment(tmp_path):
    return write_experiment(tmp_path)


def flagbench(*args, cwd):
    """The CLI with a minimal environment, its caches under the experiment's directory."""
    return cli(*args, cwd=cwd, clean_env=True, cache=cwd / "cache", timeout=600)


def test_run_stores_every_sample_resumes_and_reports(experiment):
    db = experiment / "fb.db"
    first = flagbench("run", str(experiment), "--db", str(db), "--format", "json", cwd=experiment)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    counts = {(t["target"], r["params"]["count"]): r for t in doc["tables"] if t["exact"] for r in t["rows"]}
    for target in ("x86_64", "loongarch64"):
        insns = counts[(target, "insns_per_iter")]
        old, new = (insns["variants"][v]["median"] for v in ("base", "more"))
        assert old == int(old) and new == int(new)     # exact per-iteration counts
        assert new - old == 8                          # the 8 nops, counted exactly on every target
        assert insns["comparisons"]["more"]["verdict"] == "exact"
    [timed] = [t for t in doc["tables"] if t["metric"] == "ns_per_iter"]
    assert timed["target"] == "x86_64" and all(r["variants"]["base"]["n"] == 3 for r in timed["rows"])
    metrics = {s["metric"] for s in Store(db).samples(doc["run"]["id"])}
    if perf_available():
        assert {"task_clock_ms", "page_faults"} <= metrics
    else:
        assert "perf stat" in first.stderr and "task_clock_ms" not in metrics

    stored = len(Store(db).samples(doc["run"]["id"]))
    again = flagbench("run", str(experiment), "--db", str(db), "--format", "json", cwd=experiment)
    assert again.returncode == 0, again.stderr
    assert "resumed run" in again.stderr and json.loads(again.stdout)["run"]["id"] == doc["run"]["id"]
    assert len(Store(db).samples(doc["run"]["id"])) == stored       # nothing measured twice

    fresh = flagbench("run", str(experiment), "--db", str(db), "--fresh", "--bench", "spin", cwd=experiment)
    assert fresh.returncode == 0 and "spin · exact counts · loongarch64/clang" in fresh.stdout


def test_unknown_bench_is_one_line_exit_2(experiment):
    out = flagbench("run", str(experiment), "--db", str(experiment / "fb.db"), "--bench", "nope", cwd=experiment)
    assert out.returncode == 2 and "no bench named nope" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr



def test_until_samples_a_run_on_in_pairs_and_bad_values_are_exit_2(tmp_path):
    write_experiment(tmp_path, targets='"x86_64"', metrics='"time"')
    db = tmp_path / "fb.db"
    out = flagbench("run", str(tmp_path), "--db", str(db), "--format", "json", "--until", "50%",
                    "--budget", "5m", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "every row is resolved to +-50.0 % or better" in out.stderr   # 3 samples give no interval; 6 do
    [timed] = [t for t in json.loads(out.stdout)["tables"] if t["metric"] == "ns_per_iter"]
    [row] = timed["rows"]
    change = row["comparisons"]["more"]
    assert change["paired"] and change["n_old"] >= 6 and change["ci_low"] is not None
    for bad, says in ((("--until", "wide"), "--until 'wide'"), (("--until", "2%", "--budget", "soon"), "--budget 'soon'")):
        refused = flagbench("run", str(tmp_path), "--db", str(db), *bad, cwd=tmp_path)
        assert refused.returncode == 2 and says in refused.stderr and "Traceback" not in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1

def _in_small_tmpfs(directory, size: str):
    """argv prefix that runs a command with a tmpfs of `size` mounted on `directory` (a private
    mount namespace), or None where user namespaces are not allowed."""
    import shutil
    import subprocess
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"', str(directory)]
    return prefix if subprocess.run([*prefix, "true"], capture_output=True).returncode == 0 else None


def test_a_full_tmpdir_is_a_full_disk_not_the_experiments_fault(tmp_path):
    """A TMPDIR with room for the compiles but not for the static harness program: the link
    fails with ENOSPC. That is the disk, said as such, not an error at a line of the experiment."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    exp = tmp_path / "e"
    exp.mkdir()
    (exp / "loop.c").write_text(LOOP_C)
    (exp / "experiment.toml").write_text('sources = ["loop.c"]\n[variants]\nbase = { defines = { WORK = 0 } }\n'
                                         '[[bench]]\nname = "spin"\nkind = "micro"\nfunction = "spin"\n')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    prefix = _in_small_tmpfs(tmp, "256k")
    if prefix is None:
        pytest.skip("no user namespaces here: cannot mount a small tmpfs")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp), "FLAGBENCH_CACHE": str(tmp_path / "cache"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    argv = [*prefix, sys.executable, "-m", "flagbench", "run", str(exp), "--db", str(tmp_path / "fb.db"),
            "--samples", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]         # progress lines, then the one error line
    assert "Traceback" not in done.stderr and "disk is full" in last, done.stderr
    assert "experiment.toml:" not in last and "linking" not in last, done.stderr
    probes = list((tmp_path / "cache" / "probes").glob("*.json"))
    assert all('"message": null' in p.read_text() for p in probes)     # no verdict of a full disk kept


def test_an_a_a_will_it_scale_experiment_needs_no_sources(tmp_path):
    """Every bench compiles its own program: `run` builds nothing of the experiment's and measures."""
    import shutil

    from conftest import DATA

    shutil.copy(DATA / "wis_getppid.c", tmp_path / "getppid.c")
    (tmp_path / "experiment.toml").write_text(textwrap.dedent("""
        [variants]
        a = {}
        b = {}
        [[bench]]
        name = "getppid"
        kind = "wis"
        testcase = "getppid.c"
        modes = ["processes"]
        duration = 1
        warmup_seconds = 0
        [[bench]]
        name = "true"
        kind = "command"
        command = ["true"]
        samples = 2
        """))
    done = cli("run", tmp_path, "--db", tmp_path / "fb.db", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {(t["bench"], v): r["variants"][v]["n"] for t in json.loads(done.stdout)["tables"] for r in t["rows"]
            for v in ("a", "b")}
    assert rows[("getppid", "a")] == rows[("getppid", "b")] == 1 and rows[("true", "a")] == 2, rows
