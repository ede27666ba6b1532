"""A watch pass: follow each branch, measure its new commits oldest first, find the changes.

    follow     the branch's first-parent chain after its start (`--since`, else the tip's parent
               on the first pass); a rewritten branch (force-push) is followed, its old commits
               kept and marked gone (ledger.py)
    measure    per commit, at most --max-commits a pass: built, compared with the last commit
               before it that built (evidence.py), its counts judged (cause.py), timed against
               it only when what a bench executes moved; stored at once (its series run, and
               the ledger's summary); SIGTERM is taken between two commits
    bisect     with --stride, the count changes among the skipped commits (bisect.py)
    findings   changes.py over the stored history of each branch
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from flagbench import vcs
from flagbench.errors import UserError
from flagbench.watch import bisect, cause, evidence, gitlog, objects
from flagbench.watch.evidence import Evidence, Subject
from flagbench.watch.ledger import Ledger

IDENTICAL = "code identical on the measured path"


@dataclass
class Options:
    branches: list[str]
    since: str | None = None
    max_commits: int | None = None
    stride: int = 1                    # measure every STRIDE-th new commit; the gaps are bisected
    threshold_pct: float = 0.1
    timing: bool = True
    samples: int | None = None
    fleet: object = None
    objects: bool = False              # a kernel finding bisected to the objects that carry it


@dataclass
class PassResult:
    measured: int = 0
    timed: int = 0
    backlog: int = 0
    skipped: int = 0
    bisect_steps: int = 0
    stopped: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class Stop:
    """SIGTERM/SIGINT noted, acted on between two steps (a second one ends the process at once)."""
    def __init__(self):
        self.signum = None
        self._old = {}

    def __enter__(self):
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._note)
        return self

    def _note(self, signum, frame):
        if self.signum is not None:
            handler = self._old.get(signum)
            if callable(handler):
                handler(signum, frame)
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)


def follow(repo: Path, ledger: Ledger, branch: str, opts: Options, say) -> list[vcs.Commit]:
    """The branch's chain now (its start first), membership recorded; gone commits said."""
    tip = gitlog.tip(repo, branch)
    if tip is None:
        raise UserError(f"--branch {branch}: no such branch in {repo}")
    since, old_tip = ledger.branch(branch)
    if since is None:
        start = opts.since
        if start is None:
            since = gitlog.parent(repo, tip) or tip
        else:
            try:
                since = vcs.resolve(repo, start).sha
            except vcs.UnknownRef as e:
                raise UserError(f"--since: {e}") from None
    if old_tip and old_tip != tip and not gitlog.contains(repo, old_tip, tip):
        say(f"{branch} was rewritten ({old_tip[:12]} -> {tip[:12]}): following it")
    first = gitlog.describe(repo, since)
    chain = [first, *gitlog.chain(repo, tip, since)] if since != tip else [first]
    gone = ledger.set_chain(branch, [c.sha for c in chain])
    if gone:
        say(f"{len(gone)} commits no longer on {branch}, kept: {', '.join(s[:12] for s in gone[:5])}")
    ledger.set_branch(branch, since, tip)
    return chain


def run_pass(subject: Subject, repo: Path, ledger: Ledger, store, opts: Options, stop: Stop, say,
             workdir: Path) -> PassResult:
    result = PassResult()
    started = time.monotonic()
    chains = {b: follow(repo, ledger, b, opts, say) for b in opts.branches}
    todo: list[tuple[vcs.Commit, list[vcs.Commit]]] = []
    seen = set()
    for branch, chain in chains.items():
        for c in chain:
            if c.sha not in seen and ledger.evidence(c.sha) is None:
                seen.add(c.sha)
                todo.append((c, chain))
    budget = len(todo) if opts.max_commits is None else min(opts.max_commits, len(todo))
    chosen = todo[:budget]
    if opts.stride > 1:   # every STRIDE-th, and the newest; the rest are marked skipped (bisect.py)
        keep = {i for i in range(len(chosen)) if i % opts.stride == 0 or i == len(chosen) - 1}
        for i, (commit, _) in enumerate(chosen):
            if i not in keep:
                ledger.put(commit.sha, commit.subject, bisect.SKIPPED, Evidence(
                    commit.sha, error=f"{bisect.SKIPPED} (--stride {opts.stride})").to_json(), None)
        result.skipped = len(chosen) - len(keep)
        chosen = [chosen[i] for i in sorted(keep)]
    for i, (commit, chain) in enumerate(chosen):
        if stop.signum is not None:
            result.stopped = True
            break
        say(f"[{i + 1}/{len(chosen)}] {commit.short} {commit.subject[:60]}")
        ev = measure(subject, repo, ledger, store, commit, chain, opts, workdir, result.notes, say=say)
        result.measured += 1
        result.timed += bool(ev.timed)
        say(f"  {_summary(ev)}")
    result.backlog = len(todo) - result.measured - result.skipped
    for branch, chain in chains.items():
        if opts.stride > 1 and stop.signum is None:
            def one(commit, counted_in=0, chain=chain):
                ev = measure(subject, repo, ledger, store, commit, chain, opts, workdir, result.notes, counted_in,
                             say=say)
                say(f"  {commit.short} {commit.subject[:50]}: {_summary(ev)}")
                result.timed += bool(ev.timed)
                return ev
            result.bisect_steps += bisect.bisect(ledger, chain, one, say, stop)
    if stop.signum is not None:
        result.stopped = True
    result.seconds = time.monotonic() - started
    return result


def _summary(ev: Evidence) -> str:
    if not ev.built:
        return f"does not build: {ev.error[:70]}"
    moved = {k: v - ev.base_counts[k] for k, v in ev.counts.items() if k in ev.base_counts and v != ev.base_counts[k]}
    counts = ", ".join(f"{k} {d:+,.0f}" for k, d in moved.items()) or "counts same"
    return (f"size {ev.size.get('size_total', 0):+d}, {len(ev.changed)} functions changed, {counts}; "
            f"{'timed' if ev.timed else ev.timed_reason or 'not timed'} ({ev.seconds:.1f} s)")


def _previous(ledger: Ledger, commit: vcs.Commit, chain: list[vcs.Commit]) -> tuple[vcs.Commit | None, dict | None]:
    """The last commit before COMMIT on the chain that built, with its evidence."""
    shas = [c.sha for c in chain]
    for c in reversed(chain[:shas.index(commit.sha)]):
        ev = ledger.evidence(c.sha)
        if ev is not None and ev.get("built"):
            return c, ev
    return None, None


def measure(subject: Subject, repo: Path, ledger: Ledger, store, commit: vcs.Commit, chain, opts: Options,
            workdir: Path, notes: list[str], counted_in: int = 0, say=lambda _: None) -> Evidence:
    """The commit against the last one before it that built, stored (see the module doc);
    COUNTED_IN: a run that counted it already (it is compared again after a bisection)."""
    t0 = time.monotonic()
    prev, prev_ev = _previous(ledger, commit, chain)
    before = ledger.evidence(commit.sha) or {}   # measured before (compared again after a bisection)
    commits = [prev, commit] if prev is not None else [commit]
    pair = evidence.open_pair(store, subject, repo, ledger.watch, commits,
                              {c.sha: gitlog.parents(repo, c.sha) for c in commits})
    # a kernel's A/A floor: once, at the first commit watched (the configuration's, carried on)
    evidence.measure_exact(store, pair, workdir, counted_in, floor=subject.kernel and prev is None)
    evidence.copy_counts(store, pair, pair.base, (prev_ev or {}).get("run_id") or 0)
    ev = evidence.read(store, pair, (prev_ev or {}).get("counts") or {})
    if counted_in and not ev.profile:   # copied counts: the profile is the commit's stored one
        ev.profile = before.get("profile") or {}
    for m, f in (prev_ev or {}).get("floor", {}).items():
        if ev.floor.get(m) is None:
            ev.floor[m] = f
    if not ev.built:
        pass
    elif prev is None or pair.base.short not in pair.built:
        ev.compared_with = ""
        ev.profile = ev.profile or evidence.profile(store, pair, workdir)
        ev.timed_reason = "the first commit watched: the base of what follows"
    else:
        base_profile = prev_ev.get("profile") or {}
        moved = [m for m, v in ev.counts.items() if m in ev.base_counts and cause.touches(
                 ev.base_counts[m], v, ev.changed, base_profile.get(m.split(" ", 1)[0]), ev.floor.get(m))]
        if moved:   # what a bench executes moved: where its instructions go now, and its time
            ev.profile = ev.profile or evidence.profile(store, pair, workdir)
            if subject.kernel:
                ev.timed_reason = "the measured path moved: " + ", ".join(moved) + "; a kernel is counted, not timed"
            elif not opts.timing:
                ev.timed_reason = "the measured path moved; not timed (--no-time)"
            elif bisect.crosses_skipped(ledger, chain, commit, prev):
                ev.timed_reason = "compared across skipped commits: timed once bisected"
            else:
                evidence.measure_timed(store, pair, workdir, opts.fleet, opts.samples)
                ev.timed = evidence.read(store, pair, {}).timed
                ev.timed_reason = "the measured path moved: " + ", ".join(moved)
        else:
            ev.profile = ev.profile or base_profile   # the same code on the path: the same profile
            ev.timed_reason = IDENTICAL
        verdicts = judge_all(ev, base_profile, ev.profile, opts.threshold_pct)
        ev.causes = {v.metric: v.line for v in verdicts}
        moved_verdicts = [v for v in verdicts if v.moved]
        if opts.objects and subject.kernel and moved_verdicts:
            if before.get("objects") and before.get("compared_with") == ev.compared_with:
                ev.objects = before["objects"]
            else:
                say(f"  bisecting {commit.short}'s move to its objects (relinks and boots)")
                ev.objects = objects.bisect(pair, moved_verdicts[0], workdir, notes, lambda x: say(f"    {x}"))
    ev.seconds = time.monotonic() - t0
    ledger.put(commit.sha, commit.subject, "ok" if ev.built else "failed", ev.to_json(), pair.run_id)
    return ev


def judge_all(ev: Evidence, base_profile: dict, head_profile: dict | None, threshold_pct: float):
    out = []
    for metric, head in ev.counts.items():
        if metric not in ev.base_counts:
            continue
        bench = metric.split(" ", 1)[0]
        out.append(cause.judge(metric, ev.base_counts[metric], head, ev.changed,
                               base_profile.get(bench), None if head_profile is None else head_profile.get(bench),
                               threshold_pct, ev.floor.get(metric, cause.USER_FLOOR)))
    return out
