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


@pytest.fixture
def experiment(tmp_path):
    (tmp_path / "loop.c").write_text(LOOP_C)
    (tmp_path / "experiment.toml").write_text(textwrap.dedent("""
        sources = ["loop.c"]
        targets = ["x86_64", "loongarch64"]
        cflags = ["-O1"]

        [variants]
        base = { defines = { WORK = 0 } }
        more = { defines = { WORK = 8 } }

        [[bench]]
        name = "spin"
        kind = "micro"
        function = "spin"
        metrics = ["time", "insns", "perf"]
        samples = 3
        """))
    return tmp_path


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
