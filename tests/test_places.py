"""The engine's own logic with a fake place (beside the real ones: this machine, sshd hosts,
the kexec box): a place that boots visits the variants in rounds A B, B A, ... and takes
`per_visit` samples of each cell per boot; a place that fails is resumed where it stopped; a
run interrupted mid-boot resumes to the exact sample count. The programs run are real
(/bin/true through procs); only the booting is pretend, and recorded."""
from __future__ import annotations

import io
import os
import signal
from collections import Counter
from dataclasses import dataclass

from rich.console import Console

from flagbench import procs
from flagbench.errors import NotHere, PlaceLost
from flagbench.run.engine import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BenchCell, run_cells
from flagbench.run.places import LOCAL
from flagbench.store import Store


@dataclass(frozen=True)
class Kernel:
    name: str


class FakeBoard:
    """A place whose enter() 'boots' a variant: it records the order, and can fail or be
    interrupted at a given boot. Programs run on this machine."""

    remote = True
    boots = True

    def __init__(self, name: str = "board", fail_at: int | None = None, interrupt_at: int | None = None,
                 refuse: frozenset = frozenset()):
        self.name, self.fail_at, self.interrupt_at, self.refuse = name, fail_at, interrupt_at, refuse
        self.entered: list[str] = []
        self.running: str | None = None

    def open(self):
        return self

    def close(self) -> None:
        pass

    def machine(self) -> str:
        return LOCAL.machine()

    def enter(self, variant: str, boot: Kernel) -> None:
        assert boot.name == f"kernel-{variant}"
        if variant in self.refuse:   # as KexecHost does for a kernel that panicked under qemu
            raise NotHere(f"not booted on {self.name}: its kernel panicked in flagbench's qemu boot")
        n = len(self.entered)
        self.entered.append(variant)
        if n == self.fail_at:
            raise PlaceLost(f"{self.name}: boot {n} did not answer")
        if n == self.interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)    # Ctrl-C while it boots
        self.running = variant

    def stage(self, path):
        return str(path)

    def run(self, argv, *, timeout: float, cpu=None):
        return LOCAL.run(argv, timeout=timeout, cpu=cpu)

    def sample_facts(self) -> dict:
        return {"boot": len(self.entered) - 1, "running": self.running}


def quiet() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=200)


def cells(place, samples: int = 4, per_visit: int = 2, rows=("1", "2")) -> list[BenchCell]:
    def job(emit):
        done = place.run(["/bin/true"], timeout=10)
        if done.failure:
            return done.failure
        emit("seconds", done.wall_ns / 1e9, "s", {"ran_on": place.running})
        return None
    return [BenchCell("getppid on board", v, "x86_64", "gcc", {"tasks": t}, timed=job, timed_metric="seconds",
                      samples=samples, per_visit=per_visit, warmup=0, executor="fake", place=place,
                      boot=Kernel(f"kernel-{v}"))
            for v in ("A", "B") for t in rows]


def run(store, place, **kw):
    return run_cells(store, cells(place, **kw), experiment="e", experiment_hash="h", console=quiet(),
                     progress=False, seed=1)


def samples(store, run_id):
    return [s for s in store.samples(run_id) if s["provenance"].get("job") == "sample"]


def test_a_place_that_boots_is_visited_in_rounds_abba(tmp_path):
    board = FakeBoard()
    with Store(tmp_path / "fb.db") as store:
        out = run(store, board)
        assert out.status == EXIT_OK and out.failed == []
        # 4 samples a cell, 2 per boot: two rounds, A B then B A, each variant booted twice
        assert board.entered == ["A", "B", "B", "A"]
        got = samples(store, out.run_id)
        assert len(got) == 2 * 2 * 4
        for s in got:   # each sample was taken while its own variant ran, and says which boot
            variant = s["cell"].split("/")[0]
            assert s["provenance"]["ran_on"] == variant == board.entered[s["provenance"]["boot"]]
        per_boot = Counter((s["provenance"]["boot"], s["cell"]) for s in got)
        assert set(per_boot.values()) == {2}
        # both variants of a round share its round mark: stats compare them round by round
        rounds = {s["provenance"]["round"] for s in got}
        assert len(rounds) == 2


def test_a_variant_the_place_refuses_fails_alone_and_is_never_booted(tmp_path):
    board = FakeBoard(refuse=frozenset({"B"}))
    with Store(tmp_path / "fb.db") as store:
        out = run(store, board)
        assert out.status == EXIT_FAILED
        assert board.entered == ["A", "A"]          # B never went onto the board
        assert sorted(key for _, key, _ in out.failed) == ["B/x86_64/gcc:tasks=1", "B/x86_64/gcc:tasks=2"]
        assert all("panicked" in reason and not PlaceLost.was(reason) for _, _, reason in out.failed)
        assert Counter(s["cell"] for s in samples(store, out.run_id)) == {
            "A/x86_64/gcc:tasks=1": 4, "A/x86_64/gcc:tasks=2": 4}


def test_a_place_lost_mid_run_is_resumed_to_the_exact_count(tmp_path):
    with Store(tmp_path / "fb.db") as store:
        first = run(store, FakeBoard(fail_at=2))      # the third boot (B of round 2) fails
        assert first.status == EXIT_FAILED
        assert all(PlaceLost.was(reason) for _, _, reason in first.failed) and len(first.failed) == 4
        assert len(samples(store, first.run_id)) == 2 * 2 * 2   # round 1 kept
        board = FakeBoard()
        again = run(store, board)
        assert again.status == EXIT_OK and again.run_id == first.run_id
        assert board.entered == ["A", "B"]   # what was left: one more visit of each
        got = samples(store, again.run_id)
        assert Counter(s["cell"] for s in got) == {c.key: 4 for c in cells(board)}
        assert sorted(s["provenance"]["sample"] for s in got if s["cell"] == "A/x86_64/gcc:tasks=1") == [1, 2, 3, 4]


def test_an_interrupt_during_a_boot_keeps_what_was_taken_and_resumes(tmp_path):
    procs.install()   # as the CLI does: the signal goes through procs' handler
    with Store(tmp_path / "fb.db") as store:
        first = run(store, FakeBoard(interrupt_at=1))    # Ctrl-C while B boots in round 1
        assert first.status == EXIT_INTERRUPTED
        procs.forget_signal()   # the resume is a new command: a new process
        kept = Counter(s["cell"] for s in samples(store, first.run_id))
        assert kept["A/x86_64/gcc:tasks=1"] == kept["A/x86_64/gcc:tasks=2"] == 2 and max(kept.values()) == 2
        board = FakeBoard()
        again = run(store, board)
        assert again.status == EXIT_OK
        got = Counter(s["cell"] for s in samples(store, again.run_id))
        assert got == {c.key: 4 for c in cells(board)}


def test_places_that_do_not_boot_are_never_entered(tmp_path):
    class Host(FakeBoard):
        boots = False

    host = Host()
    with Store(tmp_path / "fb.db") as store:
        out = run(store, host, per_visit=0)
        assert out.status == EXIT_OK and host.entered == []
        assert len(samples(store, out.run_id)) == 16


def test_only_hosts_open_ssh_connections():
    """Every place reaches a machine through hosts/ (one connection per host per run): no other
    module constructs an ssh Connection."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "flagbench"
    opened = []
    for path in src.rglob("*.py"):
        if path.parent.name == "hosts":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Connection":
                opened.append(f"{path.relative_to(src)}:{node.lineno}")
    assert opened == []


def test_a_host_whose_clock_moves_in_ticks_is_refused_for_timing(tmp_path):
    """A host on a tick-counting clocksource (jiffies: a TSC its kernel marked unstable, as the
    qemu box's did under load before it booted with tsc=reliable) reads a timed call as whole
    ticks or 0: the run stops at its open, one line naming the host and the clocksource; the
    same host on a TSC is taken."""
    import pytest

    from flagbench import pipeline, spec
    from flagbench.errors import UserError

    (tmp_path / "x.c").write_text("unsigned long x(unsigned long n) { return n; }\n")
    (tmp_path / "experiment.toml").write_text(
        f'sources = ["x.c"]\ntargets = ["{LOCAL.machine()}"]\n[variants]\na = {{}}\n'
        '[[bench]]\nname = "x"\nkind = "micro"\nfunction = "x"\nmetrics = ["time"]\n')
    exp = spec.load(tmp_path)

    class Host(FakeBoard):
        boots = False

        def __init__(self, clocksource: str):
            super().__init__(name=f"on-{clocksource}")
            self.dest = self.name
            self.facts = {"machine": LOCAL.machine(), "clocksource": clocksource, "cpus": 1}

    said: list[str] = []
    with pytest.raises(UserError) as refused:
        with pipeline.open_fleet(exp, pipeline.Options(places=[Host("refined-jiffies")]), said.append):
            pass
    assert str(refused.value).startswith("host on-refined-jiffies: its clocksource is refined-jiffies: "), refused.value
    assert str(refused.value).endswith(": not a host to time on")
    with pipeline.open_fleet(exp, pipeline.Options(places=[Host("tsc")]), said.append) as fleet:
        assert [h.name for h in fleet.hosts] == ["on-tsc"]
