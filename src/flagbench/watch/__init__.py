"""`flagbench watch EXP --branch B`: the robot. Every new first-parent commit of each branch,
oldest first, gets the series' exact evidence against the commit before it, stored per commit;
timed benches only where what they execute moved; changes found over the stored history, each
with its cause, written as a report (mbox + markdown) and drawn on a static dashboard.

    gitlog.py     branch tips and first-parent chains (the user's repository only read)
    ledger.py     what was watched and measured (tables beside the store's runs)
    lock.py       one watcher per repository and experiment
    evidence.py   a commit against the one before it (series_cells' stages, a series run)
    cause.py      attribution and cause of an exact move
    edivisive.py  change points of a timed history
    bisect.py     changes inside what --stride skipped, bisected on counts
    changes.py    findings over a branch's history
    report.py     the robot's mail and markdown
    dashboard.py  the static page
    loop.py       one pass
"""
from __future__ import annotations

import hashlib
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from flagbench import procs, spec, subject as subjects
from flagbench.errors import UserError
from flagbench.textsafe import sayer
from flagbench.watch import changes, dashboard, report
from flagbench.watch.evidence import Evidence, Subject
from flagbench.watch.ledger import Ledger
from flagbench.watch.lock import held
from flagbench.watch.loop import Options, PassResult, Stop, judge_all, run_pass


@dataclass
class Outcome:
    passes: list[PassResult] = field(default_factory=list)
    findings: list[changes.Finding] = field(default_factory=list)
    new: list[tuple[changes.Finding, Path]] = field(default_factory=list)
    dashboard: Path | None = None
    stopped: bool = False


def subject_of(path, variant, target, compiler, jobs) -> tuple[Subject, Path]:
    from dataclasses import replace

    from flagbench.variants import choose

    exp = spec.load(path)
    template = exp.variant(variant) if variant else exp.variants[0]
    cell, _, _ = choose(replace(exp, variants=(template, template)), None, target, compiler)
    repo = subjects.of(exp).repository()
    if repo is None:
        raise UserError(f"{exp.path}: a watch needs the experiment's sources (or kernel tree) in a git repository")
    return Subject(exp, template, cell.target, cell.compiler, jobs), Path(repo)


def histories(ledger: Ledger, branches: list[str]) -> list[changes.History]:
    out = []
    for b in branches:
        rows = []
        for sha, _, on in ledger.members(b):
            ev = ledger.evidence(sha)
            rows.append((sha, ledger.subject(sha), on, Evidence.from_json(ev) if ev else None))
        out.append(changes.History(b, rows))
    return out


def findings_of(hs: list[changes.History], threshold_pct: float) -> list[changes.Finding]:
    out = []
    for h in hs:
        out += changes.exact_findings(h, threshold_pct, judge_all)
        out += changes.timed_findings(h, threshold_pct, judge_all)
    return out


def watch(path, opts: Options, *, db: Path, out: Path, interval: float | None, variant=None, target=None,
          compiler=None, jobs=None, quiet=False, cache_root: Path | None = None, tell=None,
          place=None) -> Outcome:
    """Passes until stopped (one with interval None); reports and the dashboard after each, and
    TELL(line) for each new finding. PLACE: opens the timing place (a context manager), once the
    watch holds its lock."""
    from flagbench.cache import cache_dir
    from flagbench.store import Store

    procs.install()
    say = sayer("flagbench watch: ", quiet=quiet)
    subject, repo = subject_of(path, variant, target, compiler, jobs)
    key = hashlib.sha256(f"{repo}\0{subject.exp.path}\0{subject.key}".encode()).hexdigest()[:16]
    result = Outcome()
    lock_path = (cache_root or cache_dir()) / "watch" / f"{key}.lock"
    with held(lock_path, f"{repo} for {subject.exp.path}"), ExitStack() as stack:
        if place is not None:
            opts.fleet = stack.enter_context(place())
        stop = stack.enter_context(Stop())
        with Store(Path(db)):   # made (or checked) as a results database before the watch adds its tables
            pass
        ledger = Ledger(Path(db), key)
        try:
            while True:
                with Store(Path(db)) as store, store.writer(f"flagbench watch {subject.exp.path}"), \
                        procs.owned_dir("flagbench-watch-profiles") as workdir:
                    p = run_pass(subject, repo, ledger, store, opts, stop, say, Path(workdir))
                result.passes.append(p)
                for note in dict.fromkeys(p.notes):
                    say(note)
                say(f"pass: {p.measured} commits measured ({p.timed} timed) in {p.seconds:.1f} s"
                    + (f"; {p.skipped} skipped by --stride, {p.bisect_steps} bisection steps" if p.skipped else "")
                    + (f", {p.seconds / (p.measured + p.bisect_steps):.2f} s a commit measured"
                       if p.measured else "")
                    + (f"; backlog {p.backlog} commits (--max-commits {opts.max_commits})" if p.backlog else ""))
                for f, mbox in _publish(subject, repo, ledger, opts, out, result, say):
                    if tell is not None:
                        tell(report.line(f, mbox))
                if p.stopped or stop.signum is not None:
                    say("stopped by a signal between two commits: what was measured is stored")
                    result.stopped = True
                    break
                if interval is None:
                    break
                deadline = time.monotonic() + interval
                while time.monotonic() < deadline and stop.signum is None:
                    time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))
                if stop.signum is not None:
                    say("stopped by a signal while waiting for the next pass")
                    result.stopped = True
                    break
        finally:
            ledger.close()
    return result


def _publish(subject: Subject, repo: Path, ledger: Ledger, opts: Options, out: Path, result: Outcome, say) -> list:
    """Reports of every finding of the history, the dashboard; the findings new this pass."""
    hs = histories(ledger, opts.branches)
    found = findings_of(hs, opts.threshold_pct)
    result.findings = found
    config = (f"{subject.template.name}: {' '.join(subject.template.cflags) or 'no extra flags'} "
              f"({subject.target}/{subject.compiler})")
    args = [a for a in (["--variant", subject.template.name], ["--target", subject.target],
                        ["--compiler", subject.compiler]) for a in a]
    new = []
    for f in found:
        try:
            mbox, fresh = report.write(f, out / "reports", repo=str(repo), config=config,
                                       command=report.reproduce(str(Path(subject.exp.path).resolve()), f, args),
                                       evidence=f"{out / 'index.html'}#c-{f.sha}")
        except OSError as e:
            raise UserError(f"--out {out}: cannot write a report: {e.strerror or e}") from None
        if fresh:
            new.append((f, mbox))
    result.new += new
    page = out / "index.html"
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = page.with_name(f".index.html.{os.getpid()}")
        tmp.write_text(dashboard.render(f"flagbench watch: {subject.exp.name} in {repo}", hs, found))
        os.replace(tmp, page)   # a browser reloading it never sees half a page
    except OSError as e:
        raise UserError(f"--out {out}: cannot write the dashboard: {e.strerror or e}") from None
    result.dashboard = page
    return new
