"""One typed, checked provenance record per sample (provenance.SampleRecord): wrong types and
metadata that disagrees are refused; the engine fails the cell that produced them (the others go
on), and what it stores reads as flagbench's flat provenance always did."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from flagbench.provenance import ProvenanceError, SampleRecord
from flagbench.run.engine import EXIT_FAILED, BenchCell, run_cells
from flagbench.store import Store

from test_places import FakeBoard, Kernel


def record(**kw):
    args = dict(experiment_hash="h", variant_column="A", target="x86_64", compiler="gcc", executor="native",
                job="sample", sample=1, warmup_dropped=1, time=1.0)
    return SampleRecord(**{**args, **kw})


@pytest.mark.parametrize("bad, words", [
    ({"sample": 0}, "numbered from 1"),
    ({"job": "count", "sample": 2}, "numbered from 1"),
    ({"job": "warm"}, "job must be"),
    ({"target": 64}, "target must be text"),
    ({"time": float("nan")}, "time must be seconds"),
    ({"job": "count", "sample": 0, "round": "s.1"}, "round must be"),
    ({"place": {"boot": object()}}, "place cannot be stored"),
    ({"cell": {"target": "aarch64"}}, "target is 'x86_64' in the record and 'aarch64' in the cell's"),
    ({"cell": {"host": "a"}, "place": {"host": "b"}}, "host is 'a' in the cell's and 'b' in the place's"),
])
def test_wrong_types_and_disagreements_are_refused(bad, words):
    with pytest.raises(ProvenanceError, match=words.replace("(", r"\(")):
        record(**bad)


def test_agreeing_sources_are_one_flat_object():
    r = record(round="s.1", cell={"target": "x86_64", "flags": ["-O2"]}, place={"boot": 2}, facts={"ns": 5},
               loadavg=(0.5, 0.4, 0.3))
    assert r.with_contention({"wall_s": 0.1}).to_json() == {
        "experiment_hash": "h", "variant_column": "A", "target": "x86_64", "compiler": "gcc", "executor": "native",
        "job": "sample", "sample": 1, "warmup_dropped": 1, "time": 1.0, "round": "s.1", "loadavg": [0.5, 0.4, 0.3],
        "contention": {"wall_s": 0.1}, "flags": ["-O2"], "boot": 2, "ns": 5}


def test_a_place_that_contradicts_its_cell_fails_that_cell_only(tmp_path):
    class Liar(FakeBoard):
        def sample_facts(self):
            return {"target": "aarch64"}     # says it runs another architecture than the cell's

    def job(place):
        def run(emit):
            emit("seconds", place.run(["/bin/true"], timeout=10).wall_ns / 1e9, "s")
        return run
    liar, honest = Liar("liar"), FakeBoard("honest")
    cells = [BenchCell("b", "A", "x86_64", "gcc", timed=job(p), timed_metric="seconds", samples=2, warmup=0,
                       place=p, boot=Kernel("kernel-A")) for p in (liar, honest)]
    cells[1].params = {"host": "honest"}
    with Store(tmp_path / "fb.db") as store:
        out = run_cells(store, cells, experiment="e", experiment_hash="h", console=Console(file=io.StringIO()),
                        progress=False, seed=1)
        assert out.status == EXIT_FAILED
        assert [(b, reason) for b, _, reason in out.failed] == [
            ("b", "sample provenance: target is 'x86_64' in the record and 'aarch64' in the place's")]
        stored = store.samples(out.run_id)
        assert len(stored) == 2 and all(s["provenance"]["running"] == "A" for s in stored)
