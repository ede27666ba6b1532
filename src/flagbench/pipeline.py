"""`flagbench run` as stages: spec -> build -> bench cells -> engine (store) -> report.

    spec.load            the experiment file, benches typed (benchspec.py)
    open_fleet           --host / `hosts`: one place per host (run/places.py), opened once,
                         before anything builds, and handed down; the host's facts go into the
                         run's provenance. A kernel experiment's --host is a KexecHost
                         (hosts/kexec.py): the engine boots each variant there by kexec
    Store.writer         one writer per results database, taken before anything is built
    build.build          variant x target x compiler objects, content-cached
    run.kinds            harness programs linked, one engine cell per table cell
    (guest benches)      kernel experiments: the kernels built once; benches with guest = true
                         run inside them under qemu-system (run/guest/guest.py) and, with --host,
                         on the host by kexec (run/hostrun.py); see _guest_cells
    run.engine           interleaved, randomised samples, each stored as it is taken
    report.report_run    the tables

The CLI verbs (cli/run.py, cli/demo.py) only parse options and print what this returns.
"""
from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from flagbench import benchspec, procs, subject as subjects
from flagbench.errors import DiskFull, UserError
from flagbench.textsafe import sayer


@dataclass
class Options:
    db: Path = Path("flagbench.db")
    benches: Sequence[str] | None = None     # only these (by name)
    samples: int | None = None               # overrides every bench's own
    fresh: bool = False
    jobs: int = 2
    seed: int | None = None
    fmt: str = "text"
    quiet: bool = False
    hosts: Sequence[str] = ()                # ssh destinations (else the experiment's `hosts`)
    places: Sequence = ()                    # places made by the caller (a lab's boards: hosts/lab_place.py)
    replicate: bool = False                  # every host times every cell
    cpu: int | None = None                   # pin timed programs to this CPU (taskset on hosts)
    aa_control: bool = False                 # each bench's baseline measured twice (run/noise.aa_control)
    rounds: int = 2                          # kexec rounds on the host: A B, B A, ...
    until: float | None = None               # sample on until each row's interval is +-this narrow (run/until.py)
    budget_s: float = 600.0                  # ... or this many seconds of measuring are spent
    layout_check: bool = False               # A and B again with every function 64-byte aligned (run/layout.py)


def run_experiment(path: Path, *, db: Path, benches=None, samples=None, fresh=False, jobs=2, seed=None,
                   fmt="text", quiet=False, until=None, budget_s=600.0):
    """Build, measure and report one experiment; returns (RunOutcome, report text)."""
    return run(Path(path), Options(db=Path(db), benches=benches, samples=samples, fresh=fresh, jobs=jobs,
                                   seed=seed, fmt=fmt, quiet=quiet, until=until, budget_s=budget_s))


def run(path: Path, opts: Options):
    from flagbench import build, spec
    from flagbench.report import report_run
    from flagbench.run.engine import run_cells
    from flagbench.run.kinds import column_order
    from flagbench.run.until import Until, until_note
    from flagbench.store import Store

    if opts.samples is not None and not 1 <= opts.samples <= 100_000:
        raise UserError("--samples must be 1..100000")
    if opts.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if opts.cpu is not None and opts.cpu < 0:
        raise UserError("--cpu must be a CPU number (0, 1, ...)")
    procs.install()   # subreaper + signal handlers (idempotent): nothing started here outlives us
    exp = spec.load(path)
    if not (opts.hosts or exp.hosts):   # programs are timed here: --cpu must be one of ours
        from flagbench.hosts.checks import local_cpu
        local_cpu(opts.cpu)
    if opts.rounds < 1:
        raise UserError("--rounds must be at least 1")
    chosen = choose(exp, opts.benches)
    chosen = [benchspec.with_samples(b, opts.samples) for b in chosen]
    notes = list(exp.notes)
    say = sayer("flagbench run: ", quiet=opts.quiet)
    with open_fleet(exp, opts, say) as fleet, Store(opts.db) as store, store.writer(f"flagbench run {exp.path}"):
        kexec_host = next((h for h in fleet.hosts if h.boots), None) if fleet else None
        host = fleet.hosts[0] if fleet and len(fleet.hosts) == 1 else None
        exp = subjects.of(exp).with_host_config(host.dest if host else None, host)   # `config = "host"`
        builds = build.build(exp, jobs=opts.jobs, progress=None if opts.quiet else say)
        check_symbols(exp, chosen, builds)
        with procs.owned_dir("flagbench-run") as workdir:
            # a host that boots the variants' kernels times their guest benches only
            cells = host_cells(exp, chosen, builds, workdir, notes, None if kexec_host else fleet, opts.cpu)
            kernels: list = []
            cells += _guest_cells(exp, chosen, workdir, notes, opts, kexec_host, kernels)
            shown = len(notes)
            for note in notes:
                say(note)
            order = column_order(exp.benches, [v.name for v in exp.variants])
            from flagbench.causes import (CHANGED_KEY, MEASURED_KEY, changed_by_cell,   # code changed: causes
                                          measured_functions)
            changed = changed_by_cell([*builds, *kernels], order, say)
            checked = {}
            if opts.layout_check or exp.layout_check:
                more, checked = _layout_check(exp, chosen, builds, workdir, notes, opts, say,
                                              None if kexec_host else fleet, kernels)
                cells += more
            if opts.aa_control:
                from flagbench.run.noise import aa_control
                cells += aa_control(cells, order)
            hosts = fleet.provenance() if fleet else {}   # those that time a target: none named for samples here
            hosts = {name: facts for name, facts in hosts.items() if name in _timing(fleet, exp.targets)}
            until = None if opts.until is None else Until(opts.until, opts.budget_s, tuple(order))
            outcome = run_cells(store, cells, experiment=exp.name, experiment_hash=_run_hash(exp, opts, fleet),
                                provenance={"variants": order, "experiment_path": str(exp.path), "notes": notes,
                                            CHANGED_KEY: changed, MEASURED_KEY: measured_functions(chosen),
                                            **_commits(exp),
                                            **({"layout_check": checked} if checked else {}),
                                            **({"hosts": hosts} if hosts else {})},
                                fresh=opts.fresh, seed=opts.seed, progress=not opts.quiet, until=until)
            if until is not None:
                say(until_note(until, outcome.unresolved))
            for note in notes[shown:]:   # what the guests' boots added while the cells ran
                say(note)
            profiled = [b for b in chosen if "profile" in b.metrics and not b.guest]
            if profiled:   # where the instructions went: stored beside the run, shown by its report
                from flagbench.profile_experiment import profile_experiment
                _, profile_notes = profile_experiment(exp, builds, profiled, store=store, workdir=workdir / "profiles",
                                                      fresh=opts.fresh, say=say)
                for note in profile_notes:
                    say(note)
        if outcome.skipped:
            say(f"resumed run {outcome.run_id}: {outcome.skipped} cells were already finished (--fresh to redo)")
        report = report_run(store, outcome.run_id, opts.fmt)
    if fleet is not None and any(getattr(h, "stranded", "") for h in fleet.hosts):   # said when it closed
        from dataclasses import replace
        outcome = replace(outcome, status=max(outcome.status, 1))
    return outcome, report


def _commits(exp) -> dict:
    """Variants that name a git commit (`ref`): each one's sha, tree and subject, as resolved."""
    commits = {v.name: v.commit.as_dict() for v in exp.variants if getattr(v, "commit", None) is not None}
    return {"commits": commits} if commits else {}


def check_bench_names(exp, names: Sequence[str] | None) -> None:
    """`--bench` names that the experiment has not are bad input (run, profile, model)."""
    unknown = sorted(set(names or ()) - {b.name for b in exp.benches})
    if unknown:
        raise UserError(f"{exp.path}: no bench named {', '.join(unknown)} "
                        f"(benches: {', '.join(b.name for b in exp.benches) or 'none'})")


def choose(exp, names: Sequence[str] | None) -> list:
    """The benches `--bench` names (all by default); unknown names are bad input."""
    check_bench_names(exp, names)
    chosen = [b for b in exp.benches if not names or b.name in names]
    if not chosen:
        raise UserError(f"{exp.path}: no [[bench]] to run")
    return chosen


def check_symbols(exp, benches, builds) -> None:
    """Every function a host bench names is defined by some object of the build: else the
    build is wrong (a typo, or a "compiler" that wrote empty objects) and that is bad
    input at the bench's line, before any program is linked."""
    from flagbench.run.kinds.context import defined_symbols, named_functions

    if not builds:
        return
    defined = set().union(*(defined_symbols(b) for b in builds))
    for bench in benches:
        missing = [f for f in named_functions(bench) if f not in defined and not bench.guest]
        if missing:
            raise UserError(f"{exp.path}:{bench.line}: bench {bench.name}: no object of the build defines "
                            f"{missing[0]} (objects: {', '.join(o.name for o in builds[0].objects)})")


@contextmanager
def open_fleet(exp, opts: Options, say):
    """The run's ssh hosts (--host, else the experiment's `hosts`), connected before anything
    builds: a host that cannot be reached is one line naming it (exit 2). None without hosts."""
    dests = list(opts.hosts or exp.hosts)
    if not dests and not opts.places:
        yield None
        return
    from flagbench.hosts import checks
    from flagbench.hosts.facts import clock_problem, perf_problem
    from flagbench.hosts.factory import ssh_places
    from flagbench.run.places import Fleet, Local

    hosts = ssh_places(subjects.of(exp), dests, say)    # a kexec host for guest benches: refused at open() if it cannot
    fleet = Fleet([*hosts, *opts.places], replicate=opts.replicate).open()
    try:
        for host in fleet.hosts:
            f = host.facts
            if opts.cpu is not None and (not f.get("taskset") or (f.get("cpus") or 0) <= opts.cpu):
                raise UserError(f"host {host.dest}: --cpu {opts.cpu}: " + (
                    "no taskset there" if not f.get("taskset") else f"it has {f.get('cpus')} CPUs"))
            takes = [t for t in exp.targets if t == host.machine()]
            clock = clock_problem(f) if takes else None
            if clock:
                raise UserError(f"host {host.dest}: {clock}: not a host to time on")
            say(f"host {host.name}: {f.get('machine')}, {f.get('cpu') or '?'} x {f.get('cpus') or '?'}, "
                f"kernel {f.get('kernel')}; times {', '.join(takes) or 'none'} of the targets "
                f"{', '.join(exp.targets)}; perf: {perf_problem(f) or 'counts ' + ', '.join(f['perf_events'])}")
        untaken = checks.untaken(fleet.hosts, exp.targets)
        if untaken:
            say(checks.untaken_note(fleet.hosts, untaken, here=Local().machine()))
        say("exact counts (insns) are taken on this machine: they do not depend on the machine")
        yield fleet
    finally:
        fleet.close()


def _timing(fleet, targets) -> set[str]:
    """The names of the fleet's hosts of one of TARGETS' architectures."""
    return {h.name for h in fleet.hosts if h.machine() in targets} if fleet else set()


def _run_hash(exp, opts: Options, fleet) -> str:
    """What a run resumes by: the experiment, and the hosts timing it."""
    if fleet is None:
        return exp.hash
    key = f"{exp.hash} hosts={sorted(h.dest for h in fleet.hosts)} replicate={opts.replicate}"
    return hashlib.sha256(key.encode()).hexdigest()


def host_cells(exp, benches, builds, workdir: Path, notes: list[str], fleet=None, cpu: int | None = None) -> list:
    """Cells of the benches that run on this machine, under qemu-user or on the fleet's
    hosts, programs linked; a bench whose programs cannot be made is bad input at its own line."""
    from flagbench.run.kinds import cells_for_bench

    cells = []
    for bench in benches:
        if bench.guest:
            continue
        try:
            cells += cells_for_bench(bench, builds, root=exp.root, workdir=workdir, notes=notes,
                                     fleet=fleet, cpu=cpu)
        except DiskFull:
            raise
        except UserError as e:
            raise UserError(f"{exp.path}:{bench.line}: {e}") from None
    return cells


def _layout_check(exp, chosen, builds, workdir: Path, notes: list[str], opts: Options, say,
                  fleet=None, kernels=()) -> tuple[list, dict]:
    """The layout check (run/layout.py): every variant built again with each function aligned to
    64 bytes and measured the same way, in the same rounds, as `V@align64` columns (a kernel's
    guest benches under qemu); with what the alignment moved, per build ("V/target/compiler" ->
    AlignmentMoved's fields and its words)."""
    from dataclasses import asdict

    from flagbench import build
    from flagbench.run.layout import aligned_column, alignment_moved
    subject = subjects.of(exp)
    aligned = subject.aligned()
    say(f"layout check: every variant again with {subject.align_words}")
    aligned_builds = build.build(aligned, jobs=opts.jobs, progress=None if opts.quiet else say)
    aligned_kernels = []
    names = {b.name for b in chosen}
    guest = [benchspec.with_samples(b, opts.samples) for b in aligned.benches if b.name in names and b.guest]
    if guest:
        from flagbench.run.guest import guest as guests
        aligned_kernels = subjects.of(aligned).guest_kernels(guest, progress=not opts.quiet)
    by_key = {b.cell.key: b for b in [*aligned_builds, *aligned_kernels]}
    checked = {}
    for b in [*builds, *kernels]:
        twin = by_key.get(f"{aligned_column(b.cell.variant.name)}/{b.cell.target}/{b.cell.compiler}")
        if twin is None or not getattr(twin, "ok", True) or not getattr(b, "ok", True):
            continue
        kernel = hasattr(b, "vmlinux")
        moved = alignment_moved([b.vmlinux], [twin.vmlinux]) if kernel else alignment_moved(b.objects, twin.objects)
        os_flag = (_config_has(b.config, "CONFIG_CC_OPTIMIZE_FOR_SIZE=y") if kernel else "-Os" in b.cflags)
        words = moved.text(os_flag=os_flag)
        checked[b.cell.key] = {**asdict(moved), "did_nothing": moved.did_nothing, "text": words}
        if moved.did_nothing:
            say(f"layout check {b.cell.key}: {words}")
    host = [benchspec.with_samples(b, opts.samples) for b in aligned.benches if b.name in names and not b.guest]
    cells = host_cells(aligned, host, aligned_builds, workdir / "aligned", notes, fleet, opts.cpu)
    if aligned_kernels:   # under qemu: no second A/A boot (the floor is the plain baseline's)
        cells += guests.guest_cells(aligned, guest, aligned_kernels, workdir=workdir / "aligned-guest", notes=notes,
                                    noise_floor=False)
    return cells, checked


def _config_has(config, line: str) -> bool:
    try:
        return line in Path(config).read_text(errors="replace").splitlines()
    except (OSError, TypeError):
        return False


def _guest_cells(exp, benches, workdir: Path, notes: list[str], opts: Options, kexec_host=None,
                 kernels: list | None = None) -> list:
    """Benches with `guest = true` run inside each variant's own kernel: the kernels are
    built once, with the boot options every variant gets alike (kernel/boot-TARGET.config,
    where the experiment does not list it already); under qemu-system each is booted once,
    when the engine first runs one of its cells (run/guest/guest.py), and on a KEXEC_HOST the
    engine boots each in rounds (run/hostrun.py). Either way they are ordinary engine cells."""
    guest = [b for b in benches if b.guest]
    if not guest:
        return []
    builds = subjects.of(exp).guest_kernels(guest, progress=not opts.quiet)
    from flagbench.run.guest import guest as guests
    from flagbench.run import hostrun

    if kernels is not None:   # the caller compares them (causes.changed_by_cell)
        kernels += builds
    booters: dict = {}
    cells = guests.guest_cells(exp, guest, builds, workdir=workdir / "guest", notes=notes, booters=booters)
    if kexec_host is not None:   # each variant is booted under qemu before the host: a panic stays here
        kexec_host.tried = lambda v: next((b.panic(v) for b in booters.values() if v in b.builds), None)
        cells += hostrun.kexec_cells(exp, guest, builds, kexec_host, rounds=opts.rounds, workdir=workdir / "host",
                                     notes=notes)
    return cells
