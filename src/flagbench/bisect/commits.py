"""Bisection to a commit: the first commit of good..bad where a metric moves past a threshold.

Exact metrics (insns: the bench's counted instructions; size: code bytes) are deterministic:
one build and one counted run a step, compared with the good end's value, ceil(log2 n) + 1
builds for n commits (search.first_bad). Time: each step is paired rounds of the commit and
the good end (timed.decide), printed with its interval, and the report says how likely a
step was called wrongly. A commit that does not compile, or whose bench does not run to
the end (a crash, a timeout: errors.StepFailed), is skipped and named in the summary.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from flagbench.bisect import search, timed
from flagbench.bisect.search import BAD, GOOD, SKIP
from flagbench.errors import StepFailed, UserError
from flagbench.metrics import Metric
from flagbench.textsafe import term_text

WIDTH = 100      # the summary goes to mail

CHOICES = ("insns", "size", "time")      # --metric: each the subject's declared Metric (Subject.metric)


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
    run_id: int | None = None                    # the bisection's run in the store
    measured: int = 0                            # steps measured by this process (the rest were stored)
    metric: Metric | None = None


def _describe(metric: Metric, value: float) -> str:
    return f"{value:,.2f} {metric.unit or metric.name}"


def bisect(subject, good_ref: str, bad_ref: str, opts: Options, say: Callable[[str], None], *, store,
           fresh: bool = False) -> Outcome:
    """The first bad commit of good..bad; every measured commit is a step stored in STORE (a run of
    kind bisect, bisect/stored.py), so a bisection run again measures only what it lacks."""
    from flagbench import vcs
    from flagbench.bisect.stored import StoredBisect

    if opts.metric not in CHOICES:
        raise UserError(f"--metric {opts.metric}: one of {', '.join(CHOICES)}")
    start = time.monotonic()
    repo = subject.repository()
    good = vcs.resolve(repo, good_ref)
    commits = vcs.commits(repo, good_ref, bad_ref)
    if not commits:
        raise UserError(f"{good_ref}..{bad_ref}: no commits between the good and the bad end")
    metric = subject.metric(opts.metric)
    exact = metric.exact
    extra = () if exact else (str(opts.threshold), opts.alpha, opts.max_pairs, opts.step_budget_s, opts.seed)
    steps = StoredBisect(store, subject, metric, [good, *commits], key_extra=extra, fresh=fresh,
                         provenance={"range": f"{good_ref}..{bad_ref}", "threshold": str(opts.threshold or "")})
    say(f"{len(commits)} commits in {good_ref}..{bad_ref}; at most {search.steps_bound(len(commits)) + 1} "
        f"steps; metric {metric.name} ({metric.unit}, {metric.better} is better); run {steps.run_id}")
    good_value = None
    if exact:
        good_value, why, _ = steps.value(good, lambda b: subject.cells(b, opts.metric))
        if good_value is None:
            raise UserError(f"the good end {good_ref} ({good.short}): {why}")
        if not good_value:
            raise UserError(f"the good end {good_ref} measures 0 {metric.unit}: no change relative to it")
        say(f"good {good.short}: {_describe(metric, good_value)}")
    good_build = None

    def timed_value(c):
        nonlocal good_build
        if good_build is None:
            good_build = subject.build(good)
            if good_build is None:
                raise UserError(f"the good end {good_ref} ({good.short}) does not build: {subject.why}")
        return steps.value(c, lambda b: [subject.time_cell(good_build, b, threshold_for_time, opts,
                                                           lambda text: say(f"  {c.short}: {text}"))])

    threshold = opts.threshold
    threshold_for_time = threshold or timed.Threshold(0.0, 0)
    if threshold is None:   # half of what the bad end moved: the bad end is measured first
        bad = commits[-1]
        value, why, _ = steps.value(bad, lambda b: subject.cells(b, opts.metric)) if exact else timed_value(bad)
        if value is None:
            raise UserError(f"the bad end {bad.short} {why}: give --threshold")
        ratio = value / good_value if exact else value
        if ratio == 1.0:
            raise UserError(f"the bad end {bad.short} measures the same as the good end: nothing to bisect")
        worse = (ratio < 1) if metric.higher_is_better else (ratio > 1)
        say(f"bad end {bad.short}: {(ratio - 1) * 100:+.2f} %; threshold: half of it")
        threshold = timed.Threshold(abs(ratio - 1) / 2, 1 if worse else -1)
        threshold_for_time = threshold
    say(f"threshold {threshold.said()} against the good end")
    out = Outcome(commits, search.FirstBad(len(commits), None), good_value, threshold, 0, 0.0,
                  run_id=steps.run_id, metric=metric)

    def measure(i: int) -> tuple[str, str]:
        try:
            return measured(i)
        except StepFailed as e:   # it built, its bench did not run: skipped, not the bisection
            return SKIP, f"does not run: {e}"

    def measured(i: int) -> tuple[str, str]:
        c = commits[i]
        if exact:
            v, why, _ = steps.value(c, lambda b: subject.cells(b, opts.metric))
            if v is None:
                return SKIP, why
            ratio = v / good_value if good_value else float("inf")
            verdict = BAD if threshold.past(ratio, metric.higher_is_better) else GOOD
            return verdict, f"{_describe(metric, v)} ({(ratio - 1) * 100:+.2f} %)"
        if opts.threshold is None and i == len(commits) - 1:   # the bad end's own measurement set the threshold
            return (BAD if threshold.direction else GOOD), "the bad end (measured for the threshold)"
        v, why, facts = timed_value(c)
        if v is None:
            return SKIP, why
        if facts.get("decided"):
            out.decided_by_interval += 1
        else:
            out.by_estimate += 1
        return facts.get("verdict", BAD if threshold.past(v, metric.higher_is_better) else GOOD), \
            f"{metric.name} {facts.get('detail', '')}"

    def on_step(s: search.Step) -> None:
        c = commits[s.index]
        line = f"step {len(out.lines) + 1}: {c.short} {c.subject[:50]!r}: {s.detail}: {s.verdict}"
        out.lines.append(line)
        say(line)

    out.found = search.first_bad(len(commits), measure, on_step=on_step)
    out.builds, out.seconds, out.measured = subject.builds, time.monotonic() - start, steps.measured
    return out


def summary(out: Outcome, opts: Options) -> list[str]:
    """The result lines: the first bad commit (or the candidates), cost, and for time the error bound."""
    f, commits = out.found, out.commits
    lines = []
    if f.first is not None:
        c = commits[f.first]
        parent = "the good end" if f.first == 0 else commits[f.first - 1].short
        lines.append(_fit(f"first bad commit: {c.sha} {term_text(c.subject)}"))
        name = out.metric.name if out.metric else opts.metric
        lines.append(f"  (its parent {parent} is good; metric {name}, threshold {out.threshold.said()})")
    elif f.candidates:
        lines += _wrapped("first bad commit is one of: ", [commits[i].short for i in f.candidates])
    if f.note:
        lines.append(f.note)
    for s in f.steps:
        if s.verdict == SKIP:
            lines.append(_fit(f"skipped {commits[s.index].short}: {term_text(s.detail)}"))
    lines.append(f"{len(commits)} commits, {len(f.steps)} steps, {out.builds} builds (good end included), "
                 f"{out.seconds:.0f} s; run {out.run_id}: {out.measured} steps measured now, the rest stored")
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
    out): 0 good, 1 bad, 125 does not build. Measured by the engine into a store of its own
    (bisect/stored.once): git bisect keeps the steps, not flagbench."""
    opts = opts or Options(metric=metric)
    declared = subject.metric(metric)
    b = subject.build(None, column="worktree")
    if b is None:
        say(f"does not build: {subject.why}: skip (125)")
        return 125
    work = subject.workdir / "run-step"
    try:
        return _step_verdict(subject, b, metric, declared, threshold, good_value, good_ref, opts, say, work)
    except StepFailed as e:   # it built, its bench did not run to the end: git bisect skips it
        say(f"does not run: {e}: skip (125)")
        return 125


def _step_verdict(subject, b, metric: str, declared, threshold, good_value, good_ref, opts, say, work) -> int:
    from flagbench import vcs
    from flagbench.bisect.stored import once
    if declared.exact:
        if good_value is None:
            if good_ref is None:
                raise UserError("--run-step needs --good-value V or --good REF (the good end's measurement)")
            gb = subject.build(vcs.resolve(subject.repository(), good_ref), column="good")
            if gb is None:
                raise UserError(f"the good end {good_ref} does not build: {subject.why}")
            try:
                good_value = once(subject.cells(gb, metric), declared.name, work)
            except StepFailed as e:   # the good end's failure is the bisection's, not the step's
                raise UserError(f"the good end {good_ref} does not run: {e}") from None
            if not good_value:
                raise UserError(f"the good end {good_ref} measures 0 {declared.unit}: no change relative to it")
        v = once(subject.cells(b, metric), declared.name, work)
        ratio = v / good_value
        verdict = BAD if threshold.past(ratio, declared.higher_is_better) else GOOD
        say(f"{_describe(declared, v)} against {good_value:,.2f} ({(ratio - 1) * 100:+.2f} %): {verdict}")
    else:
        if good_ref is None:
            raise UserError("--run-step on time needs --good REF: each step is timed against the good end")
        gb = subject.build(vcs.resolve(subject.repository(), good_ref), column="good")
        if gb is None:
            raise UserError(f"the good end {good_ref} does not build: {subject.why}")
        facts: dict = {}
        once([subject.time_cell(gb, b, threshold, opts, None, keep=facts)], declared.name, work)
        verdict = facts["verdict"]
        say(f"{declared.name} {facts['detail']}: {verdict}")
    return 1 if verdict == BAD else 0
