"""The run engine: interleaved rounds, warm-up dropped, every sample stored as taken,
resume after a run killed with SIGKILL, failing cells recorded while others go on,
and an A/A comparison of one binary against itself coming out `~`.

Programs measured are real binaries built here; never asserted on time."""
from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from flagbench import stats
from flagbench.errors import UserError
from flagbench.run.harness import link_with_build
from flagbench.run.engine import EXIT_FAILED, EXIT_OK, BenchCell, run_cells
from flagbench.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_harness import (DATA, SPIN5, asm_source, cache, cells_for_bench, make_build,  # noqa: E402,F401
                          need)  # (cache: autouse fixture)

SRC = Path(__file__).resolve().parents[1] / "src"

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    if (!strcmp(mode, "segv")) *(volatile int *)0 = 1;
    if (!strcmp(mode, "hang")) for (;;) pause();
    if (!strcmp(mode, "sleep")) usleep(60000);
    if (!strcmp(mode, "garbage")) { puts("not a metric line at all"); return 0; }
    printf("value 42\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    need("gcc")
    d = tmp_path_factory.mktemp("prog")
    (d / "p.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(d / "p"), str(d / "p.c")], check=True)
    return d / "p"


def quiet() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=200)


def program_cell(program: Path, variant: str, mode: str = "ok", timeout: float = 2, **kw) -> BenchCell:
    from flagbench.run.executors import NativeExecutor

    def timed(emit):
        m = NativeExecutor(cpu=None).measure([str(program), mode], timeout=timeout)
        if not m.ok:
            return m.failure
        emit("wall_ns", m.metrics["wall_ns"], "ns")
        return None
    return BenchCell(bench="prog", variant=variant, target="x86_64", compiler="gcc", timed=timed,
                     timed_metric="wall_ns", **kw)


def test_rounds_interleave_and_warmup_is_dropped(tmp_path):
    order: list[str] = []
    calls: Counter = Counter()

    def job_for(name):
        def job(emit):
            calls[name] += 1
            order.append(name)
            emit("calls", calls[name], "n")   # the value says which invocation of the cell it was
        return job
    cells = [BenchCell(bench="b", variant=v, target="x86_64", compiler="gcc", timed=job_for(v),
                       samples=5, warmup=2) for v in ("A", "B", "C")]
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", seed=7, console=quiet())
        samples = store.samples(out.run_id)
    assert out.status == EXIT_OK and out.failed == []
    rounds = [order[i:i + 3] for i in range(0, len(order), 3)]
    assert len(rounds) == 7 and all(sorted(r) == ["A", "B", "C"] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1           # a fresh order each round
    for v in "ABC":                                      # invocations 1 and 2 were the warm-up
        assert [s["value"] for s in samples if s["variant"] == v] == [3, 4, 5, 6, 7]
    assert {s["provenance"]["experiment_hash"] for s in samples} == {"h"}


def test_counted_once_and_cells_of_different_length(tmp_path):
    counted = Counter()

    def count(emit):
        counted["n"] += 1
        emit("insns_per_iter", 5.0, "insns")
    cells = [BenchCell(bench="b", variant="A", target="aarch64", compiler="gcc", counted=count,
                       count_executor="qemu-aarch64", counted_metric="insns_per_iter"),
             BenchCell(bench="b", variant="B", target="aarch64", compiler="gcc", counted=count,
                       count_executor="qemu-aarch64",
                       timed=lambda emit: emit("t", 1.0, "ns"), samples=3, warmup=1)]
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", seed=1, console=quiet())
        by_metric = Counter((s["variant"], s["metric"]) for s in store.samples(out.run_id))
        executors = {s["executor"] for s in store.samples(out.run_id) if s["metric"] == "insns_per_iter"}
    assert counted["n"] == 2 and executors == {"qemu-aarch64"}
    assert by_metric == {("A", "insns_per_iter"): 1, ("B", "insns_per_iter"): 1, ("B", "t"): 3}


def test_crash_hang_and_garbage_fail_their_cells_only(program, tmp_path):
    cells = [program_cell(program, "ok", samples=3),
             program_cell(program, "segv", "segv", samples=3),
             program_cell(program, "hang", "hang", samples=3),
             program_cell(program, "garbage", "garbage", samples=3)]
    console = quiet()
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", console=console)
        status = {c["cell"].split("/")[0]: (c["status"], c["reason"]) for c in store.cells(out.run_id)}
        kept = Counter(s["variant"] for s in store.samples(out.run_id))
    assert out.status == EXIT_FAILED
    assert status["ok"] == ("ok", None) and kept == {"ok": 3}
    assert status["segv"] == ("failed", "SIGSEGV")
    assert status["hang"] == ("failed", "timeout after 2 s")
    assert status["garbage"][0] == "failed" and status["garbage"][1].startswith("garbage output")
    assert "failed: prog segv/x86_64/gcc: SIGSEGV" in console.file.getvalue()


def test_check_gate_fails_the_cells_of_a_broken_implementation(tmp_path):
    build = make_build(tmp_path, "x86_64", "O2", [DATA / "memcpy_good.c", DATA / "memcpy_broken.c"],
                       ["-fno-tree-loop-distribute-patterns"])
    cells = cells_for_bench({"name": "copy", "kind": "memcpy", "functions": ["good_memcpy", "memcpy_one_alignment"],
                             "sizes": [32, 100], "alignments": [[3, 1]], "metrics": ["time"], "samples": 2},
                            [build], root=tmp_path, workdir=tmp_path / "w")
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", console=quiet())
        result = {c["cell"]: (c["status"], c["reason"]) for c in store.cells(out.run_id)}
        measured = Counter(s["cell"] for s in store.samples(out.run_id))
    assert out.status == EXIT_FAILED
    good = [k for k in result if k.startswith("good_memcpy/")]
    bad = [k for k in result if k.startswith("memcpy_one_alignment/")]
    assert len(good) == len(bad) == 2
    assert all(result[k] == ("ok", None) and measured[k] == 2 for k in good)
    assert all(result[k][0] == "failed" and "dst_align 5 src_align 17 len 8: byte 7" in result[k][1]
               and measured[k] == 0 for k in bad)


def test_aa_same_binary_twice_is_not_different(tmp_path):
    build = make_build(tmp_path, "x86_64", "A", [asm_source(tmp_path, "spin5", SPIN5["x86_64"])])
    twin = type(build)(**{**vars(build), "cell": type(build.cell)(**{**vars(build.cell),
                                                                    "variant": type(build.cell.variant)(name="A2")})})
    linked: dict = {}

    def link_once(b, program, out_dir):   # literally one executable for both variants
        key = (program, b.objects)
        if key not in linked:
            linked[key] = link_with_build(b, program, out_dir)
        return linked[key]
    cells = cells_for_bench({"name": "spin", "kind": "micro", "function": "spin5", "samples": 10, "warmup": 1},
                            [build, twin], root=tmp_path, workdir=tmp_path / "w", link=link_once)
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="aa", experiment_hash="aa", seed=3, console=quiet())
        samples = store.samples(out.run_id)
    assert out.status == EXIT_OK
    values = lambda v, metric: [s["value"] for s in samples if s["variant"] == v and s["metric"] == metric]  # noqa: E731
    assert len(values("A", "ns_per_iter")) == len(values("A2", "ns_per_iter")) == 10
    # alpha 0.001: the nominal 5 % false-positive rate is measured by bench/aa_false_positive.py;
    # here a systematic bias between the two positions would show.
    assert stats.change(values("A", "ns_per_iter"), values("A2", "ns_per_iter"), alpha=0.001).verdict == "~"
    assert values("A", "insns_per_iter") == values("A2", "insns_per_iter") == [5.0]


RESUMABLE = """
import json, sys
sys.path.insert(0, {src!r})
from flagbench.run.engine import BenchCell, run_cells
from flagbench.run.executors import NativeExecutor
from flagbench.store import Store

LOG = {log!r}

def cell(name, samples):
    def timed(emit):
        with open(LOG, "a") as f:
            f.write(name + "\\n")
        m = NativeExecutor(cpu=None).measure([{prog!r}, "sleep"], timeout=10)
        if not m.ok:
            return m.failure
        emit("wall_ns", m.metrics["wall_ns"], "ns")
    return BenchCell(bench="r", variant=name, target="x86_64", compiler="gcc", timed=timed,
                     timed_metric="wall_ns", samples=samples, warmup=1)

cells = [cell("short1", 1), cell("short2", 1), cell("long1", 6), cell("long2", 6)]
with Store({db!r}) as store:
    out = run_cells(store, cells, experiment="resume", experiment_hash="fixed-hash", seed=5, progress=False)
print(json.dumps({{"run": out.run_id, "status": out.status, "skipped": out.skipped}}))
"""


def test_resume_after_kill_9(program, tmp_path):
    db, log = tmp_path / "fb.db", tmp_path / "jobs.log"
    script = tmp_path / "resumable.py"
    script.write_text(RESUMABLE.format(src=str(SRC), log=str(log), prog=str(program), db=str(db)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    finished = samples = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    finished = con.execute("SELECT count(*) FROM cells").fetchone()[0]
                    samples = con.execute("SELECT count(*) FROM samples WHERE cell LIKE 'long%'").fetchone()[0]
            except sqlite3.OperationalError:
                pass   # the tables are being created
        if finished >= 2 and samples >= 2:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert finished >= 2 and samples >= 2, "the first run never got far enough"

    with Store(db) as store:
        run = store.latest_run("fixed-hash")
        before = {(s["cell"], s["id"]) for s in store.samples(run)}
        done_before = store.finished_cells(run)
    assert done_before and len(done_before) < 4
    log_lines = len(log.read_text().splitlines())

    again = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    outcome = json.loads(again.stdout)
    assert outcome == {"run": run, "status": 0, "skipped": len(done_before)}

    with Store(db) as store:
        after = store.samples(run)
        assert store.finished_cells(run) == {("r", f"{v}/x86_64/gcc") for v in ("short1", "short2", "long1", "long2")}
    assert before <= {(s["cell"], s["id"]) for s in after}            # nothing measured was lost
    per_cell = Counter(s["cell"].split("/")[0] for s in after)
    assert per_cell == {"short1": 1, "short2": 1, "long1": 6, "long2": 6}  # only what was missing
    rerun = Counter(log.read_text().splitlines()[log_lines:])
    for _, cell in done_before:                                       # finished cells were not run again
        assert rerun[cell.split("/")[0]] == 0


def test_fresh_starts_a_new_run_and_bad_cells_are_refused(tmp_path):
    cell = BenchCell(bench="b", variant="A", target="x86_64", compiler="gcc",
                     timed=lambda emit: emit("t", 1.0, "ns"), samples=1, warmup=0)
    with Store(tmp_path / "fb.db") as store:
        first = run_cells(store, [cell], experiment="e", experiment_hash="h", console=quiet())
        resumed = run_cells(store, [cell], experiment="e", experiment_hash="h", console=quiet())
        fresh = run_cells(store, [cell], experiment="e", experiment_hash="h", fresh=True, console=quiet())
        assert (resumed.run_id, resumed.skipped, resumed.samples) == (first.run_id, 1, 0)
        assert fresh.run_id != first.run_id and fresh.samples == 1
        with pytest.raises(UserError, match="two benchmark cells"):
            run_cells(store, [cell, cell], experiment="e", experiment_hash="x", console=quiet())
        bad = BenchCell(bench="b", variant="a/b", target="x86_64", compiler="gcc")
        with pytest.raises(UserError, match="cannot name a variant"):
            run_cells(store, [bad], experiment="e", experiment_hash="y", console=quiet())


def test_a_sample_of_several_values_is_stored_whole_and_numbered_on_after_a_kill(tmp_path):
    """Issue 11: a will-it-scale measurement killed with kill -9 and resumed stored 6 samples
    where 4 were asked, two labelled sample 1. A job's values are one transaction, and a
    resumed cell numbers its samples on from the ones it has."""
    calls = []

    def timed(emit):            # one sample = 3 values (per-second rates of one run)
        calls.append(1)
        emit("per_second", 1.0, "iter/s")
        emit("per_second", 2.0, "iter/s")
        if len(calls) == 2:     # the second run is killed half way through
            raise KeyboardInterrupt
        emit("per_second", 3.0, "iter/s")
        return None

    cell = BenchCell(bench="w", variant="A", target="x86_64", compiler="gcc", timed=timed, samples=2,
                     warmup=0, timed_metric="per_second", per_invocation=3)
    with Store(tmp_path / "fb.db") as store:
        first = run_cells(store, [cell], experiment="e", experiment_hash="h", console=quiet())
        assert first.status == 130
        assert [s["value"] for s in store.samples(first.run_id)] == [1.0, 2.0, 3.0]   # not the half run
        again = run_cells(store, [cell], experiment="e", experiment_hash="h", console=quiet())
        stored = store.samples(again.run_id)
    assert again.run_id == first.run_id and again.status == EXIT_OK
    assert len(stored) == 2 * 3                                  # the count asked for, not more
    assert Counter(s["provenance"]["sample"] for s in stored) == {1: 3, 2: 3}


# -- paired rounds and --until ----------------------------------------------------------------

def noisy_cell(variant: str, row: str, spread: float, samples: int = 10) -> BenchCell:
    """A cell whose values are 100 ns with lognormal noise of `spread` (a seeded generator per cell:
    the engine's scheduling is under test here, not a program's speed)."""
    import math
    import random
    rng = random.Random(f"{variant}/{row}")

    def timed(emit):
        emit("t", 100 * math.exp(rng.gauss(0, spread)), "ns")
    return BenchCell(bench="b", variant=variant, target="x86_64", compiler="gcc", params={"row": row},
                     timed=timed, timed_metric="t", samples=samples, warmup=0)


def until_cells() -> list[BenchCell]:
    return [noisy_cell(v, row, spread) for v in ("A", "B") for row, spread in (("quiet", 0.001), ("noisy", 0.05))]


def per_column(samples) -> Counter:
    return Counter((s["variant"], s["params"]["row"]) for s in samples)


def test_a_rows_variants_share_each_round(tmp_path):
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, until_cells(), experiment="e", experiment_hash="h", seed=2, console=quiet())
        samples = store.samples(out.run_id)
    for row in ("quiet", "noisy"):
        rounds = {v: [s["provenance"]["round"] for s in samples if s["params"]["row"] == row and s["variant"] == v]
                  for v in "AB"}
        assert len(set(rounds["A"])) == 10 and set(rounds["A"]) == set(rounds["B"])
    from flagbench.report.tables import build_tables
    [table] = build_tables(samples, ["A", "B"])
    assert all(r.changes["B"].paired for r in table.rows)


def test_until_samples_on_only_where_the_interval_is_wide(tmp_path):
    from flagbench.report.tables import build_tables
    from flagbench.run.until import Until
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, until_cells(), experiment="e", experiment_hash="h", seed=2, console=quiet(),
                        until=Until(0.02, 600, ("A", "B")))
        samples = store.samples(out.run_id)
    counts = per_column(samples)
    assert out.status == EXIT_OK and out.unresolved == []
    assert counts[("A", "quiet")] == counts[("B", "quiet")] == 10        # narrow already: left alone
    assert counts[("A", "noisy")] == counts[("B", "noisy")] > 10        # in pairs, until narrow
    [table] = build_tables(samples, ["A", "B"])
    noisy = next(r for r in table.rows if r.params["row"] == "noisy").changes["B"]
    assert noisy.paired and noisy.ci_high / noisy.ci_low <= 1.02 ** 2
    numbers = [s["provenance"]["sample"] for s in samples if s["variant"] == "A" and s["params"]["row"] == "noisy"]
    assert numbers == list(range(1, len(numbers) + 1))


def test_until_stops_at_its_budget_and_names_the_rows_left_wide(tmp_path):
    from flagbench.run.until import Until, until_note
    with Store(tmp_path / "fb.db") as store:
        until = Until(0.005, 1e-6, ("A", "B"))
        out = run_cells(store, until_cells(), experiment="e", experiment_hash="h", seed=2, console=quiet(),
                        until=until)
        counts = per_column(store.samples(out.run_id))
    assert set(counts.values()) == {10}
    assert [n.label for n in out.unresolved] == ["b row=noisy (x86_64/gcc)"]   # the quiet row is narrow
    assert until_note(until, out.unresolved).startswith("1 row is still wider than +-0.5 % after the 1e-06 s budget")


def test_until_sharpens_a_finished_run_when_resumed(tmp_path):
    from flagbench.run.until import Until
    with Store(tmp_path / "fb.db") as store:
        first = run_cells(store, until_cells(), experiment="e", experiment_hash="h", seed=2, console=quiet())
        again = run_cells(store, until_cells(), experiment="e", experiment_hash="h", seed=2, console=quiet(),
                          until=Until(0.02, 600, ("A", "B")))
        samples = store.samples(again.run_id)
    assert again.run_id == first.run_id and again.skipped == 4 and again.samples > 0
    counts = per_column(samples)
    assert counts[("A", "quiet")] == 10 and counts[("A", "noisy")] == counts[("B", "noisy")] > 10
    for v in "AB":
        numbers = [s["provenance"]["sample"] for s in samples if s["variant"] == v and s["params"]["row"] == "noisy"]
        assert numbers == list(range(1, len(numbers) + 1))   # numbered on, no run counted twice


class _Named:
    """A remote place of that name whose jobs run nothing there: a lane of its own."""
    remote, boots = True, False

    def __init__(self, name: str):
        self.name = name

    def sample_facts(self) -> dict:
        return {}


def _at(lane: str):
    return _Named(lane) if lane else None


@pytest.mark.parametrize("lanes", [("",), ("box1", "box2")])
def test_an_exception_in_a_job_fails_its_cell_and_says_why(tmp_path, lanes):
    """A bug in a job (a division by a host's `iters 0`) fails that cell with its reason; the
    other cells, on its lane and on others, go on, and the run exits 1."""
    def good(emit):
        emit("t", 1.0, "ns")

    def broken(emit):
        emit("t", 1.0 / 0, "ns")
    cells = [BenchCell(bench="b", variant=v, target="x86_64", compiler="gcc", params={"host": lane} if lane else {},
                       timed=broken if (v, lane) == ("B", lanes[0]) else good, samples=2, warmup=0, place=_at(lane),
                       timed_metric="t")
             for lane in lanes for v in ("A", "B")]
    console = quiet()
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", seed=3, console=console)
        status = {c["cell"]: (c["status"], c["reason"] or "") for c in store.cells(out.run_id)}
        kept = Counter(s["cell"] for s in store.samples(out.run_id))
    assert out.status == EXIT_FAILED
    assert len(status) == len(cells)          # every cell finished, none vanished with a thread
    [(bad, reason)] = [(k, r) for k, (st, r) in status.items() if st == "failed"]
    assert bad.startswith("B/") and "ZeroDivisionError" in reason, reason
    assert sum(kept.values()) == 2 * (len(cells) - 1)
    assert "ZeroDivisionError" in console.file.getvalue()


def test_a_signal_between_taking_a_lanes_result_and_storing_it_ends_the_run(tmp_path, monkeypatch):
    """SIGTERM (procs.Terminated, a KeyboardInterrupt) raised in the storing thread after it took
    a lane's result: the run ends, interrupted, and its lanes with it. It once waited for ever:
    the lane for that store, the storing thread for the lane to end (a labgrid run under load)."""
    import threading

    from flagbench import procs
    from flagbench.run import engine
    real = engine._Runner._record
    calls = []

    def record(self, st, values, reason):
        calls.append(st.key)
        if len(calls) == 2:     # the first stored; the signal comes as the second is taken
            raise procs.Terminated(signal.SIGTERM)
        return real(self, st, values, reason)
    monkeypatch.setattr(engine._Runner, "_record", record)
    cells = [BenchCell(bench="b", variant=v, target="x86_64", compiler="gcc", params={"host": lane},
                       timed=lambda emit: emit("t", 1.0, "ns"), samples=50, warmup=0, place=_at(lane), timed_metric="t")
             for lane in ("box1", "box2") for v in ("A", "B")]
    out = []
    with Store(tmp_path / "fb.db") as store:
        worker = threading.Thread(target=lambda: out.append(run_cells(store, cells, experiment="e", experiment_hash="h",
                                                                      seed=3, console=quiet())), daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "the run waits for ever after the signal"
        stored = len(store.samples(out[0].run_id))
    assert out[0].status == 128 + signal.SIGTERM and stored == 1
    assert not [t for t in threading.enumerate() if t.name.endswith("(lane)")]


def test_a_lane_that_dies_fails_its_cells_and_says_why(tmp_path, monkeypatch):
    """An exception in a lane's own loop (not in a job): the lane's unfinished cells fail with it."""
    from flagbench.run import noise
    real = noise.paired_round

    def paired_round(states, row, rng):
        if states and states[0].cell.lane == "box2":
            raise RuntimeError("lane broke")
        return real(states, row, rng)
    monkeypatch.setattr(noise, "paired_round", paired_round)
    cells = [BenchCell(bench="b", variant=v, target="x86_64", compiler="gcc", params={"host": lane},
                       timed=lambda emit: emit("t", 1.0, "ns"), samples=2, warmup=0, place=_at(lane), timed_metric="t")
             for lane in ("box1", "box2") for v in ("A", "B")]
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", seed=3, console=quiet())
        status = {c["cell"]: (c["status"], c["reason"] or "") for c in store.cells(out.run_id)}
    assert out.status == EXIT_FAILED and len(status) == 4
    assert all(st == ("ok", "") for k, st in status.items() if "box1" in k)
    assert all(st[0] == "failed" and "RuntimeError" in st[1] and "lane broke" in st[1]
               for k, st in status.items() if "box2" in k), status
