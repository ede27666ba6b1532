"""Bisection to a commit: the first commit of good..bad where a metric moves past a threshold.

Exact metrics (insns: the bench's counted instructions; size: code bytes) are deterministic:
one build and one counted run a step, compared with the good end's value, ceil(log2 n) + 1
builds for n commits (search.first_bad). Time: each step is paired rounds of the commit and
the good end (timed.decide), printed with its interval, and the report says how likely a
step was called wrongly. A commit that does not compile, or whose bench does not run to
the end (a crash, a timeout: subject.StepFailed), is skipped and named in the summary.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from flagbench.bisect import search, timed
from flagbench.bisect.search import BAD, GOOD, SKIP
from flagbench.bisect.subject import StepFailed
from flagbench.errors import UserError
from flagbench.textsafe import term_text

WIDTH = 100      # the summary goes to mail

EXACT_METRICS = ("insns", "size")
METRICS = (*EXACT_METRICS, "time")
UNITS = {"insns": "insns/iter", "size": "code bytes", "time": "ns/iter"}


@dataclass
class Options:
    metric: str = "insns"
    threshold: timed.Threshold | None = None    # None: half the bad end's change
    alpha: float = 0.05                          # per timed step
    max_pairs: int = 64
    step_budget_s: float = 300.0
    seed: int | None = None


@dataclass
class Outcome:
    commits: list                                # the range, oldest first (vcs.Commit)
    found: search.FirstBad
    good_value: float | None
    threshold: timed.Threshold
    builds: int
    seconds: float
    lines: list[str] = field(default_factory=list)
    decided_by_interval: int = 0                 # timed steps called by their interval
    by_estimate: int = 0                         # timed steps called by their estimate (budget spent)


def bisect(subject, good_ref: str, bad_ref: str, opts: Options, say: Callable[[str], None]) -> Outcome:
    from flagbench import vcs

    if opts.metric not in METRICS:
        raise UserError(f"--metric {opts.metric}: one of {', '.join(METRICS)}")
    start = time.monotonic()
    repo = subject.repository()
    good = vcs.resolve(repo, good_ref)
    commits = vcs.commits(repo, good_ref, bad_ref)
    if not commits:
        raise UserError(f"{good_ref}..{bad_ref}: no commits between the good and the bad end")
    say(f"{len(commits)} commits in {good_ref}..{bad_ref}; at most {search.steps_bound(len(commits)) + 1} "
        f"steps; metric {opts.metric}")
    good_build = subject.build(good, column="good")
    if good_build is None:
        raise UserError(f"the good end {good_ref} ({good.short}) does not build: {subject.why}")
    exact = opts.metric in EXACT_METRICS
    good_value = subject.count(good_build, opts.metric) if exact else None
    if exact:
        say(f"good {good.short}: {good_value:,.2f} {UNITS[opts.metric]}")
        if not good_value:
            raise UserError(f"the good end {good_ref} measures 0 {UNITS[opts.metric]}: no change relative to it")
    threshold = opts.threshold
    if threshold is None:   # half of what the bad end moved: the bad end is measured first
        threshold = _bad_end_threshold(subject, good_build, good_value, commits[-1], opts, say)
    say(f"threshold {threshold} against the good end")
    out = Outcome(commits, search.FirstBad(len(commits), None), good_value, threshold, 0, 0.0)

    def measure(i: int) -> tuple[str, str]:
        try:
            return measured(i)
        except StepFailed as e:   # it built, its bench did not run: skipped, not the bisection
            return SKIP, f"does not run: {e}"

    def measured(i: int) -> tuple[str, str]:
        c = commits[i]
        b = subject.build(c)
        if b is None:
            return SKIP, f"does not build: {subject.why}"
        if exact:
            v = subject.count(b, opts.metric)
            ratio = v / good_value if good_value else float("inf")
            return (BAD if threshold.past(ratio) else GOOD), f"{v:,.2f} {UNITS[opts.metric]} ({(ratio - 1) * 100:+.2f} %)"
        good_job, job = subject.timed_jobs(good_build, b)
        step = timed.decide(good_job, job, threshold, alpha=opts.alpha, max_pairs=opts.max_pairs,
                            budget_s=opts.step_budget_s, seed=opts.seed,
                            progress=lambda text: say(f"  {c.short}: {text}"))
        if step.decided:
            out.decided_by_interval += 1
        else:
            out.by_estimate += 1
        return step.verdict, f"{UNITS['time']} {step.describe()}"

    def on_step(s: search.Step) -> None:
        c = commits[s.index]
        line = f"step {len(out.lines) + 1}: {c.short} {c.subject[:50]!r}: {s.detail}: {s.verdict}"
        out.lines.append(line)
        say(line)

    out.found = search.first_bad(len(commits), measure, on_step=on_step)
    out.builds, out.seconds = subject.builds, time.monotonic() - start
    return out


def _bad_end_threshold(subject, good_build, good_value, bad_commit, opts: Options, say) -> timed.Threshold:
    """Half the bad end's change, in its direction."""
    b = subject.build(bad_commit)
    if b is None:
        raise UserError(f"the bad end {bad_commit.short} does not build ({subject.why}): give --threshold")
    if opts.metric in EXACT_METRICS:
        ratio = subject.count(b, opts.metric) / good_value
    else:
        good_job, job = subject.timed_jobs(good_build, b)
        ratio = timed.decide(good_job, job, timed.Threshold(0.0, 0), alpha=opts.alpha, max_pairs=opts.max_pairs,
                             budget_s=opts.step_budget_s, seed=opts.seed).estimate
    if ratio == 1.0:
        raise UserError(f"the bad end {bad_commit.short} measures the same as the good end: nothing to bisect")
    size = abs(ratio - 1) / 2
    say(f"bad end {bad_commit.short}: {(ratio - 1) * 100:+.2f} %; threshold: half of it")
    return timed.Threshold(size, 1 if ratio > 1 else -1)


def summary(out: Outcome, opts: Options) -> list[str]:
    """The result lines: the first bad commit (or the candidates), cost, and for time the error bound."""
    f, commits = out.found, out.commits
    lines = []
    if f.first is not None:
        c = commits[f.first]
        parent = "the good end" if f.first == 0 else commits[f.first - 1].short
        lines.append(_fit(f"first bad commit: {c.sha} {term_text(c.subject)}"))
        lines.append(f"  (its parent {parent} is good; metric {opts.metric}, threshold {out.threshold})")
    elif f.candidates:
        lines += _wrapped("first bad commit is one of: ", [commits[i].short for i in f.candidates])
    if f.note:
        lines.append(f.note)
    for s in f.steps:
        if s.verdict == SKIP:
            lines.append(_fit(f"skipped {commits[s.index].short}: {term_text(s.detail)}"))
    lines.append(f"{len(commits)} commits, {len(f.steps)} steps, {out.builds} builds (good end included), "
                 f"{out.seconds:.0f} s")
    if opts.metric == "time":
        k = out.decided_by_interval
        lines.append(f"each step decided by its interval was called wrongly with chance <= {opts.alpha:g} "
                     f"(alpha per step, split over its looks); over its {k} such steps <= "
                     f"{min(1.0, k * opts.alpha):.2g} (union bound)")
        if out.by_estimate:
            lines.append(f"{out.by_estimate} steps spent their budget undecided and were called by their "
                         "estimate: their error is not bounded (raise --pairs or --step-budget)")
    return lines


def _fit(line: str, width: int = WIDTH) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def _wrapped(head: str, words: list[str], width: int = WIDTH) -> list[str]:
    """HEAD and WORDS joined by ", ", broken into lines of at most WIDTH columns."""
    lines, line = [], head
    for i, w in enumerate(words):
        piece = w + ("," if i < len(words) - 1 else "")
        if len(line) + len(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = " " * 2
        line += piece + " "
    return lines + [line.rstrip()]


def run_step(subject, metric: str, threshold: timed.Threshold, *, good_value: float | None = None,
             good_ref: str | None = None, opts: Options | None = None, say: Callable[[str], None]) -> int:
    """One `git bisect run` step on the sources as they are on disk (git bisect checked them
    out): 0 good, 1 bad, 125 does not build."""
    from flagbench import vcs

    opts = opts or Options(metric=metric)
    b = subject.build(None, column="worktree")
    if b is None:
        say(f"does not build: {subject.why}: skip (125)")
        return 125
    try:
        return _step_verdict(subject, b, metric, threshold, good_value, good_ref, opts, say)
    except StepFailed as e:
        say(f"does not run: {e}: skip (125)")
        return 125


def _step_verdict(subject, b, metric, threshold, good_value, good_ref, opts, say) -> int:
    from flagbench import vcs
    if metric in EXACT_METRICS:
        if good_value is None:
            if good_ref is None:
                raise UserError("--run-step needs --good-value V or --good REF (the good end's measurement)")
            gb = subject.build(vcs.resolve(subject.repository(), good_ref), column="good")
            if gb is None:
                raise UserError(f"the good end {good_ref} does not build: {subject.why}")
            try:
                good_value = subject.count(gb, metric)
            except StepFailed as e:   # the good end's failure is the bisection's, not the step's
                raise UserError(f"the good end {good_ref} does not run: {e}") from None
            if not good_value:
                raise UserError(f"the good end {good_ref} measures 0 {UNITS[metric]}: no change relative to it")
        v = subject.count(b, metric)
        ratio = v / good_value
        verdict = BAD if threshold.past(ratio) else GOOD
        say(f"{v:,.2f} {UNITS[metric]} against {good_value:,.2f} ({(ratio - 1) * 100:+.2f} %): {verdict}")
    else:
        if good_ref is None:
            raise UserError("--run-step on time needs --good REF: each step is timed against the good end")
        gb = subject.build(vcs.resolve(subject.repository(), good_ref), column="good")
        if gb is None:
            raise UserError(f"the good end {good_ref} does not build: {subject.why}")
        good_job, job = subject.timed_jobs(gb, b)
        step = timed.decide(good_job, job, threshold, alpha=opts.alpha, max_pairs=opts.max_pairs,
                            budget_s=opts.step_budget_s, seed=opts.seed)
        verdict = step.verdict
        say(f"{UNITS['time']} {step.describe()}: {verdict}")
    return 1 if verdict == BAD else 0

