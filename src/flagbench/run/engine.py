"""The run engine: measure benchmark cells in interleaved, randomised rounds and store
every sample the moment it is taken.

A cell is one column-and-row of a result table: a benchmark, a variant (the column),
target and compiler, and parameters (the row: size, alignment, task count, ...). It
carries up to two jobs, plain callables that run a program and hand back values:
- `counted`, run once: exact counts (callgrind, qemu + plugin) need no repetition;
- `timed`, run `warmup + samples` times: each round visits every unfinished cell once
  in a fresh random order, the variants of one table row back to back (noise.paired_round),
  so drifts and bursts of load hit all variants alike; the first `warmup` runs of each
  cell are thrown away. Each timed sample records the contention it ran under
  (noise.Contention: CPU time against wall time) and its round ("round" in its provenance),
  so the verdict can weigh the one and compare the variants round by round (stats.change).
The values one job emits go to the Store in one transaction when the job ends, so a
run killed by Ctrl-C, SIGTERM, SIGKILL or a crash keeps every finished sample and no
part of one (a will-it-scale sample is a whole run of several per-second values).
Running the same experiment again continues its latest run: finished cells (ok or
failed) are skipped, a half-measured cell takes only the samples it still lacks (after
a fresh warm-up), numbered on from the ones it has. With `until` (run/until.py) the rows
whose interval is still wide get more rounds, finished cells of a resumed run included,
until they are narrow enough or the budget is spent.

A job that fails (signal, timeout, exit status, garbage output, a missing runner)
fails its cell with that reason; the other cells go on. Exit status: 0 all cells ok,
1 some failed, 128 + the signal when interrupted (130 for Ctrl-C, 143 for SIGTERM).
"""
from __future__ import annotations

import os
import queue
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from flagbench.errors import NotHere, PlaceLost, UserError
from flagbench.metrics import Metric
from flagbench.provenance import ProvenanceError, SampleRecord
from flagbench.run import noise
from flagbench.run.until import Need, Until, needs, runs, seconds_per_round
from flagbench.store import Store

# emit(metric, value[, unit][, facts]): METRIC a metrics.Metric (its declaration is stored with the
# run: the verdict's direction comes from it) or, for a program's own lines, a name and its unit;
# FACTS go into that sample's provenance
Emit = Callable[..., None]

Job = Callable[[Emit], "str | None"]              # one invocation; returns a failure reason or None

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
_FORBIDDEN = {"head": "/:", "param": ",=:"}


@dataclass
class BenchCell:
    bench: str
    variant: str                   # the table column (a variant, or an implementation)
    target: str
    compiler: str
    params: dict = field(default_factory=dict)     # the table row, in order
    timed: Job | None = None
    counted: Job | None = None
    samples: int = 10
    warmup: int = 1
    executor: str = "native"       # what measures `timed`
    count_executor: str = ""       # what measures `counted`
    timed_metric: str | None = None     # a metric `timed` always emits: counts half-done cells
    counted_metric: str | None = None   # likewise for `counted`
    per_invocation: int = 1        # values of timed_metric one `timed` run emits
    check: Callable[[], "str | None"] | None = None  # gate before the first job (memcheck)
    provenance: dict = field(default_factory=dict)   # flags, tool versions, function, ...
    place: Any = None              # the run/places.Place `timed` runs on (None: here); places run side by side
    boot: Any = None               # what place.enter() boots for this cell's variant (a kernel build)
    per_visit: int = 0             # on a place that boots: samples per visit (boot) of the variant; 0: all

    @property
    def lane(self) -> str:
        """The place's name, "" for this machine: cells of one lane run one after another."""
        return "" if self.place is None or not self.place.remote else self.place.name

    @property
    def key(self) -> str:
        """The store's cell key: "variant/target/compiler[:k=v,...]"."""
        for part in (self.variant, self.target, self.compiler):
            if not part or any(c in part for c in _FORBIDDEN["head"]):
                raise UserError(f"{self.bench}: {part!r} cannot name a variant, target or compiler "
                                f"(empty, or contains one of {_FORBIDDEN['head']!r})")
        items = []
        for k, v in self.params.items():
            if any(c in f"{k}{v}" for c in _FORBIDDEN["param"]):
                raise UserError(f"{self.bench}: parameter {k}={v} contains one of {_FORBIDDEN['param']!r}")
            items.append(f"{k}={v}")
        head = f"{self.variant}/{self.target}/{self.compiler}"
        return f"{head}:{','.join(items)}" if items else head


@dataclass
class RunOutcome:
    run_id: int
    status: int                    # EXIT_OK, EXIT_FAILED or EXIT_INTERRUPTED
    skipped: int                   # cells already finished in the resumed run
    samples: int                   # values stored by this call
    failed: list[tuple[str, str, str]]   # (bench, cell, reason) of the requested cells
    unresolved: list[Need] = field(default_factory=list)   # with `until`: rows still too wide at the end


@dataclass
class _State:
    cell: BenchCell
    key: str
    jobs: list[str]                # "count", "warm", "sample" still to do, in order
    checked: bool = False
    taken: int = 0                 # timed samples stored so far (earlier sessions included)
    round: str = ""                # the round the next job runs in: samples of one round are a pair
    extra: bool = False            # its sample jobs are `until`'s extra rounds
    dropped: bool = False          # a lane cut them short (the budget ran out): not finished yet


def _plan(st: _State, stored: Counter, last: int) -> None:
    """The jobs a cell still needs; `last` is the number of its latest stored sample."""
    cell, jobs = st.cell, []
    if cell.counted is not None and not (cell.counted_metric and stored[cell.counted_metric]):
        jobs.append("count")
    if cell.timed is not None:
        have = stored[cell.timed_metric] // max(cell.per_invocation, 1) if cell.timed_metric else 0
        need = max(cell.samples - have, 0)
        if need:
            jobs += ["warm"] * cell.warmup + ["sample"] * need
        st.taken = last   # new samples are numbered on: one number, one run of the program
    st.jobs = jobs


def run_cells(store: Store, cells: list[BenchCell], *, experiment: str, experiment_hash: str,
              provenance: dict | None = None, fresh: bool = False, seed: int | None = None,
              progress: bool = True, console=None, until: Until | None = None) -> RunOutcome:
    """Measure `cells` into `store`; resume the experiment's latest run unless `fresh`;
    with `until`, sample on where an interval is still wide."""
    states: dict[tuple[str, str], _State] = {}
    for cell in cells:
        ident = (cell.bench, cell.key)
        if ident in states:
            raise UserError(f"two benchmark cells are both {cell.bench} {cell.key}")
        if cell.samples < 1 or cell.warmup < 0:
            raise UserError(f"{cell.bench}: samples must be >= 1 and warmup >= 0")
        states[ident] = _State(cell, cell.key, [])

    seed = random.SystemRandom().randrange(2**32) if seed is None else seed
    run_id = None if fresh else store.latest_run(experiment_hash)
    if run_id is None:
        run_id = store.start_run(experiment, experiment_hash, {**(provenance or {}), "seed": seed})
        done, stored, last = set(), defaultdict(Counter), defaultdict(int)
    else:
        # a cell whose place failed it (a host that dropped) is measured again, from where it stopped
        done = {(c["bench"], c["cell"]) for c in store.cells(run_id)
                if not (c["status"] == "failed" and PlaceLost.was(c["reason"]))}
        stored, last = defaultdict(Counter), defaultdict(int)
        for s in store.samples(run_id):
            stored[(s["bench"], s["cell"])][s["metric"]] += 1
            if (s["provenance"] or {}).get("job") == "sample":
                last[(s["bench"], s["cell"])] = max(last[(s["bench"], s["cell"])], s["provenance"].get("sample") or 0)

    todo = {ident: st for ident, st in states.items() if ident not in done}
    for ident, st in states.items():
        _plan(st, stored[ident], last[ident])
        if ident not in todo:
            st.jobs = []
    failed_before = {(c["bench"], c["cell"]) for c in store.cells(run_id) if c["status"] == "failed"} if done else set()
    runner = _Runner(store, run_id, experiment_hash, seed, console if console is not None else _stderr_console())
    if until is not None:   # every measured cell may take more rounds, a resumed run's finished ones too
        runner.until = until
        runner.extendable = [st for ident, st in states.items() if ident not in failed_before
                             and st.cell.timed is not None and st.cell.timed_metric]
    status = runner.run(todo, progress)

    failed = [(c["bench"], c["cell"], c["reason"] or "") for c in store.cells(run_id)
              if c["status"] == "failed" and (c["bench"], c["cell"]) in states]
    if status == EXIT_OK:   # not interrupted
        status = EXIT_FAILED if failed else EXIT_OK
    return RunOutcome(run_id, status, len(states) - len(todo), runner.stored, failed, runner.unresolved)


def _stderr_console():
    from rich.console import Console
    return Console(stderr=True)


class _Runner:
    def __init__(self, store: Store, run_id: int, experiment_hash: str, seed: int, console):
        self.store, self.run_id, self.hash = store, run_id, experiment_hash
        self.rng = random.Random(seed)
        self.console = console
        self.stored = 0
        # names this session's rounds apart from a resumed run's earlier ones (not from `seed`:
        # a user may pass the same seed twice)
        self.session = f"{random.SystemRandom().randrange(16 ** 8):08x}"
        self.until: Until | None = None
        self.extendable: list[_State] = []
        self.unresolved: list[Need] = []
        self.started = time.monotonic()
        self.declared: dict[str, Metric] = {}                # what the jobs' metrics are, as they emitted them
        self.stored_declarations: set[str] = set()
        self.rounds = 0                                      # rounds of this session, for the samples' "round"
        self.lane_rounds: Counter = Counter()                # ... and of each lane

    def run(self, todo: dict[tuple[str, str], _State], show: bool) -> int:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)
        for st in todo.values():
            if not st.jobs:   # every sample was stored before an interruption: only the mark is missing
                self.store.finish_cell(self.run_id, st.cell.bench, st.key, "ok")
        active = [st for st in todo.values() if st.jobs]
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[cells]} cells left"), TimeElapsedColumn())
        quiet = not show or (not active and self.until is None)   # a resumed run with nothing left: no bar
        with Progress(*columns, console=self.console, disable=quiet, transient=False) as bar:
            task = bar.add_task("measuring", total=sum(len(st.jobs) for st in active), cells=len(active))

            def starting(st: _State) -> None:
                bar.update(task, description=f"{st.cell.bench} {st.key} ({st.jobs[0]})")

            def grew(states: list[_State]) -> None:
                bar.update(task, total=bar.tasks[0].total + sum(len(st.jobs) for st in states))

            def advance(st: _State, before: int) -> None:
                bar.update(task, description=f"{st.cell.bench} {st.key}", advance=before - len(st.jobs))
                if not st.jobs:
                    bar.update(task, cells=sum(1 for s in active if s.jobs))
            try:
                while True:   # with `until`, once more after the planned samples (even if none were left)
                    if len({st.cell.lane for st in active}) > 1 or any(_boots(st) for st in active):
                        self._lanes(active, advance)
                        for st in active:   # extra rounds a lane dropped when the budget ran out
                            self._drop_extra(st)
                    elif active:
                        self._rounds(active, starting, advance, grew)
                    active = self._extend()
                    if not active:
                        break
                    grew(active)
            except KeyboardInterrupt as e:   # Ctrl-C, or procs.Terminated (SIGTERM, SIGHUP)
                bar.stop()
                self.console.print(f"interrupted: {self.stored} samples of this session are stored in run "
                                   f"{self.run_id}; run again to resume", markup=False, highlight=False)
                return getattr(e, "exit_status", EXIT_INTERRUPTED)
        return EXIT_OK

    def _rounds(self, active: list[_State], starting, progress, grew) -> None:
        """Rounds on this machine until every cell's jobs are done; with `until`, the rows whose
        batch is done are looked at again at once (a cheap row need not wait for a slow one), and a
        round does not start once the budget is spent (the extra rounds are dropped, the cells finish)."""
        while active:
            if self.until is not None and self._spent():
                for st in active:
                    self._drop_extra(st)
                active = [st for st in active if st.jobs]
            self.rounds += 1
            for st in noise.paired_round(active, _row, self.rng):
                st.round = f"{self.session}.{self.rounds}"
                starting(st)
                before = len(st.jobs)
                self._step(st)
                progress(st, before)   # a failure skips the rest
            idle = any(not st.jobs for st in active)
            active = [st for st in active if st.jobs]
            if self.until is not None and idle and active:   # rows done while slower ones go on: on with them now
                more = self._extend()
                grew(more)
                active += more

    def _spent(self) -> bool:
        return time.monotonic() - self.started >= self.until.budget_s

    def _drop_extra(self, st: _State) -> None:
        """An extended cell whose extra rounds are cut short by the budget is finished as it stands."""
        if st.extra and (st.jobs or st.dropped):
            st.jobs.clear()
            self.store.finish_cell(self.run_id, st.cell.bench, st.key, "ok")

    def _extend(self) -> list[_State]:
        """With `until`: the rows still wider than asked get more rounds, the cheapest rows first, as
        many as fit in what is left of the budget; returns their cells, now with sample jobs again."""
        if self.until is None:
            return []
        states = [st for st in self.extendable if not st.jobs]
        cells = {(st.cell.bench, st.key): (_row(st), st.cell.variant, st.cell.timed_metric, _label(st))
                 for st in states}
        taken = runs(self.store.samples(self.run_id), {ident: metric for ident, (_, _, metric, _) in cells.items()})
        self.unresolved = needs(taken, cells, self.until)
        left = self.until.budget_s - (time.monotonic() - self.started)
        if not self.unresolved or left <= 0:
            return []
        by_row: dict[tuple, list[_State]] = defaultdict(list)
        for st in states:
            by_row[_row(st)].append(st)
        cost = {n.row: seconds_per_round([taken.get((st.cell.bench, st.key), []) for st in by_row[n.row]])
                for n in self.unresolved}
        grown = []
        for n in sorted(self.unresolved, key=lambda n: cost[n.row]):   # cheap rows first: most rows resolved
            extra = n.extra if cost[n.row] <= 0 else min(n.extra, int(left / cost[n.row]))
            if extra < 1:
                continue
            left -= extra * cost[n.row]
            for st in by_row[n.row]:
                st.jobs, st.extra, st.dropped = ["sample"] * extra, True, False
                grown.append(st)
        return grown

    def _step(self, st: _State) -> None:
        self._record(st, *self._work(st))

    def _work(self, st: _State) -> tuple[list[tuple], str | None]:
        """Run the cell's next job (its gate first): the values it emitted and its failure.
        Touches no store, so lanes may run it in their own threads."""
        cell = st.cell
        if not st.checked and cell.check is not None:
            st.checked = True
            reason = _guard(cell.check)
            if reason:
                return [], reason
        st.checked = True
        kind = st.jobs.pop(0)
        job, executor = (cell.counted, cell.count_executor) if kind == "count" else (cell.timed, cell.executor)
        if kind == "sample":
            st.taken += 1
        values: list[tuple] = []
        start = noise.mark()
        reason = _guard(lambda: job(self._emitter(st, kind, executor, values)))
        if kind == "sample":   # a remote program's CPU time is not ours to see: only its wall time
            contention = {"wall_s": round(time.monotonic() - start.wall, 4)} if cell.lane else noise.since(start).as_dict()
            values[:] = [(*value[:-1], value[-1].with_contention(contention)) for value in values]
        return values, reason

    def _record(self, st: _State, values: list[tuple], reason: str | None) -> None:
        new = [m for name, m in list(self.declared.items()) if name not in self.stored_declarations]
        if new:   # before the samples: a sample is never stored without its metric's declaration
            self.store.declare_metrics(self.run_id, new)
            self.stored_declarations.update(m.name for m in new)
        self.store.add_samples(self.run_id, values)   # the job's values together, or none of them
        self.stored += len(values)
        if reason:
            return self._fail(st, reason)
        if not st.jobs:
            self.store.finish_cell(self.run_id, st.cell.bench, st.key, "ok")

    def _lanes(self, active: list[_State], progress) -> None:
        """Cells of several places (ssh hosts; "" is this machine) at once: one thread per
        place interleaves its own cells and runs their jobs; this thread stores every
        result as it comes, in order, and says when a cell failed (the other lanes go on)."""
        lanes: dict[str, list[_State]] = defaultdict(list)
        for st in active:
            lanes[st.cell.lane].append(st)
        results: queue.Queue = queue.Queue()
        stop = threading.Event()

        def handed(st: _State, outcome: tuple) -> None:
            """OUTCOME of ST's next job to this (the main) thread; back once it is stored, or
            once this thread stopped taking results: a signal may come between its taking an
            outcome and storing it, and the lane must not wait for that store for ever."""
            recorded = threading.Event()
            results.put((st, len(st.jobs), outcome, recorded))
            while not recorded.wait(0.2):
                if stop.is_set():
                    return

        def take(st: _State) -> None:   # the cell's next job, stored by this (the main) thread
            handed(st, self._work(st))

        def lose(states: list[_State], reason: str) -> None:   # the place failed them all
            for st in states:
                if st.jobs:
                    handed(st, ([], reason))

        def lane(states: list[_State], seed: int, name: str) -> None:
            rng = random.Random(seed)
            place = states[0].cell.place
            try:
                while states and not stop.is_set():
                    if self.until is not None and self._spent():
                        for st in states:
                            if st.extra and st.jobs:   # the main thread finishes these cells
                                st.jobs, st.dropped = [], True
                        states = [st for st in states if st.jobs]
                        if not states:
                            break
                    rounds = self.lane_rounds[name] = self.lane_rounds[name] + 1
                    if place is not None and place.boots:
                        self._visit_round(states, rounds, name, rng, take, lose, stop)
                    else:
                        for st in noise.paired_round(states, _row, rng):
                            if stop.is_set():
                                break
                            st.round = f"{self.session}.{name}.{rounds}"
                            if st.jobs:
                                take(st)
                    states = [st for st in states if st.jobs]
            except KeyboardInterrupt:   # procs refuses new programs once a signal came: stop here
                pass
            except Exception as e:      # never a silent death: the main thread fails what is left
                results.put(("lane", [st for st in states if st.jobs], f"lane {name or 'here'}: {_crash(e)}"))
            finally:
                results.put(None)

        threads = [threading.Thread(target=lane, args=(sts, self.rng.randrange(2**32), name), daemon=True)
                   for name, sts in lanes.items()]
        for t in threads:
            t.start()
        running = len(threads)
        try:
            while running:
                item = results.get()
                if item is None:
                    running -= 1
                    continue
                if item[0] == "lane":   # a lane that died: its unfinished cells fail, saying why
                    for st in item[1]:
                        before = len(st.jobs)
                        self._fail(st, item[2])
                        progress(st, before)
                    continue
                st, before, (values, reason), recorded = item
                self._record(st, values, reason)
                recorded.set()
                progress(st, before)
        finally:
            stop.set()
            while running:   # let every lane see `stop`; a job still running ends with its programs
                item = results.get()
                if item is None:
                    running -= 1
                elif item[0] != "lane":
                    item[3].set()

    def _visit_round(self, states: list[_State], rounds: int, name: str, rng: random.Random,
                     take, lose, stop: threading.Event) -> None:
        """One round on a place that boots (kexec, a board): the variants in their column order,
        reversed every other round (A B, B A, ...), each entered once; then each of its cells, in
        random order, takes its warm-ups and `per_visit` samples. A drift of the machine hits the
        variants alike, and boot-to-boot variance is in the samples, not hidden."""
        place = states[0].cell.place
        variants = list(dict.fromkeys(st.cell.variant for st in states))
        for variant in (variants if rounds % 2 else variants[::-1]):
            mine = [st for st in states if st.cell.variant == variant and st.jobs]
            if not mine or stop.is_set():
                continue
            try:
                place.enter(variant, mine[0].cell.boot)
            except NotHere as e:      # this variant may not go there; the others still do
                lose(mine, str(e))
                continue
            except UserError as e:   # nothing more is measured there this run; a resumed run goes on
                lose(states, str(e if isinstance(e, PlaceLost) else PlaceLost(str(e))))
                return
            rng.shuffle(mine)
            for st in mine:
                st.round, taken = f"{self.session}.{name}.{rounds}", 0
                while st.jobs and not stop.is_set():
                    if st.jobs[0] == "sample":
                        if st.cell.per_visit and taken >= st.cell.per_visit:
                            break
                        taken += 1
                    take(st)

    def _emitter(self, st: _State, kind: str, executor: str, values: list[tuple]) -> Emit:
        cell = st.cell
        if kind == "warm":
            return lambda metric, value, unit=None, facts=None: None
        record = partial(SampleRecord, self.hash, cell.variant, cell.target, cell.compiler, executor or "unknown",
                         kind, st.taken if kind == "sample" else 0, cell.warmup,
                         round=st.round if kind == "sample" and st.round else None)

        def emit(metric: "Metric | str", value: float, unit: str | None = None, facts: dict | None = None) -> None:
            if isinstance(metric, Metric):
                known = self.declared.setdefault(metric.name, metric)
                if known != metric:
                    raise UserError(f"metric {metric.name} declared two ways: {known} and {metric}")
                metric, unit = metric.name, metric.unit
            place = cell.place.sample_facts() if cell.place is not None else {}   # the job may add to cell.provenance
            try:
                prov = record(time=time.time(), loadavg=_loadavg(), cell=dict(cell.provenance), place=place,
                              facts=dict(facts or {}))
            except ProvenanceError as e:   # a defect, shown as the cell's failure rather than stored
                raise UserError(str(e)) from None
            values.append((cell.bench, st.key, metric, value, unit or "", executor or "unknown", prov))
        return emit

    def _fail(self, st: _State, reason: str) -> None:
        st.jobs.clear()
        self.store.finish_cell(self.run_id, st.cell.bench, st.key, "failed", reason)
        self.console.print(f"failed: {st.cell.bench} {st.key}: {reason}", markup=False, highlight=False)


def _row(st: _State) -> tuple:
    """The table row a cell belongs to: its variants are compared with each other."""
    cell = st.cell
    return cell.bench, cell.target, cell.compiler, tuple(cell.params.items())


def _boots(st: _State) -> bool:
    return st.cell.place is not None and st.cell.place.boots


def _label(st: _State) -> str:
    """A row as a reader names it: "bench k=v,... (target/compiler)"."""
    params = ",".join(f"{k}={v}" for k, v in st.cell.params.items())
    return f"{st.cell.bench}{' ' + params if params else ''} ({st.cell.target}/{st.cell.compiler})"


def _guard(fn: Callable[[], "str | None"]) -> str | None:
    """A job's failure reason; a missing tool or unusable file is a failure of that cell too,
    and so is any other exception (a bug): it fails the cell and says so, it never kills a lane."""
    try:
        return fn()
    except (UserError, OSError) as e:
        return str(e) or type(e).__name__
    except Exception as e:
        return _crash(e)


def _crash(e: Exception) -> str:
    """An unexpected exception as a cell's failure reason, in one line."""
    import traceback
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    where = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
    return f"flagbench error {type(e).__name__}{where}: {str(e).splitlines()[0] if str(e) else ''} (a bug: please report it)"


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
