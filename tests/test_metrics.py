"""Metrics that declare themselves: the declaration a job emits is stored with the run (schema 3),
the verdict's direction comes from it, not from the metric's name; a database of schema 2 (no
declarations) is read as before, read-only too, and migrated in place."""
from __future__ import annotations

import io
import sqlite3

import pytest
from rich.console import Console

from flagbench.errors import UserError
from flagbench.metrics import Metric, count, guess
from flagbench.report import run_tables
from flagbench.run.engine import BenchCell, run_cells
from flagbench.store import SCHEMA_VERSION, Store

# A made-up metric whose name says "time" but that is a rate: only its declaration says so.
SCORE = Metric("score_ns", "points", better="higher")


def _cells(metric, values: dict[str, list[float]]) -> list[BenchCell]:
    def job_for(variant):
        left = list(values[variant])

        def job(emit):
            emit(metric, left.pop(0)) if isinstance(metric, Metric) else emit(metric, left.pop(0), "ns")
        return job
    return [BenchCell("b", v, "x86_64", "gcc", timed=job_for(v), timed_metric="score_ns",
                      samples=len(values[v]), warmup=0) for v in values]


def _run(db, metric):
    a = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8, 100.1, 99.9, 100.3, 100.0]
    b = [x * 1.2 for x in a]     # B's number is 20 % bigger
    with Store(db) as store:
        out = run_cells(store, _cells(metric, {"A": a, "B": b}), experiment="e", experiment_hash=str(metric),
                        console=Console(file=io.StringIO()), progress=False, seed=1)
        return out.run_id, run_tables(store, out.run_id)


def test_the_verdict_comes_from_the_declaration_not_the_name(tmp_path):
    run, [table] = _run(tmp_path / "fb.db", SCORE)
    assert table.measure == SCORE
    assert table.rows[0].changes["B"].verdict == "faster"          # bigger is better, as declared
    with Store(tmp_path / "fb.db", create=False) as store:
        assert store.metrics(run) == {"score_ns": SCORE}
    # the same numbers under an undeclared name ending in _ns: guessed lower-is-better
    _, [guessed] = _run(tmp_path / "fb.db", "score_ns")
    assert guessed.rows[0].changes["B"].verdict == "slower"


def test_a_metric_declared_two_ways_is_refused(tmp_path):
    with Store(tmp_path / "fb.db") as store:
        run = store.start_run("e", "h")
        store.declare_metrics(run, [SCORE])
        store.declare_metrics(run, [SCORE])      # the same again: fine
        with pytest.raises(UserError, match="score_ns"):
            store.declare_metrics(run, [Metric("score_ns", "points")])
    with pytest.raises(ValueError):
        Metric("x", better="sideways")


def test_a_schema_2_database_reads_by_name_and_is_migrated(tmp_path):
    db = tmp_path / "fb.db"
    with Store(db) as store:
        run = store.start_run("e", "h", {"variants": ["A", "B"]})
        a = [10.0, 10.1, 9.9, 10.0, 10.2, 10.05, 9.95, 10.15, 9.85, 10.0]
        for v, values in (("A", a), ("B", [x * 1.2 for x in a])):
            for x in values:
                store.add_sample(run, "b", f"{v}/x86_64/gcc", "MB/s", x, unit="MB/s", executor="native")
            store.add_sample(run, "b", f"{v}/x86_64/gcc", "insns_per_byte", 2.0 if v == "A" else 1.5,
                             unit="insns", executor="callgrind")
    raw = sqlite3.connect(db)
    raw.executescript("DROP TABLE metrics; PRAGMA user_version=2;")
    raw.close()
    with Store(db, create=False) as store:          # read-only: nothing declared, names read as before
        assert store.metrics(run) == {}
        tables = {t.metric: t for t in run_tables(store, run)}
    assert tables["MB/s"].measure.higher_is_better and tables["MB/s"].rows[0].changes["B"].verdict == "faster"
    assert tables["exact counts"].counts["insns_per_byte"].label == "insns/byte"   # flagbench's own: as declared now
    with Store(db) as store:
        store.declare_metrics(run, [count("insns_per_byte", label="insns/byte")])
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3


def test_guess_reads_rates_and_counts():
    assert guess("per_second", "iter/s").higher_is_better and not guess("ns_per_iter", "ns").higher_is_better
    assert guess("loads_4_per_iter", "loads").exact and not guess("seconds", "s").exact
