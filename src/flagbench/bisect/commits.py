"""Bisection to a commit: the first commit of good..bad where a metric moves past a threshold.

Exact metrics (insns: the bench's counted instructions; size: code bytes) are deterministic:
one build and one counted run a step, compared with the good end's value, ceil(log2 n) + 1
builds for n commits (search.first_bad). Time: each step is paired rounds of the commit and
the good end (timed.decide), printed with its interval, and the report says how likely a
step was called wrongly. A commit that does not compile, or whose bench does not run to
the end (a crash, a timeout: errors.StepFailed), is skipped and named in the summary.

On insns the threshold applies by default to the attributed change (bisect/attributed.py: the
count delta in functions whose code changed, plus whatever of the rest lies beyond the good
end's A/A floor), so a commit that only moves layout is not named; `on="total"` (--on total)
takes the total as it is. Size and time take their totals.
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
ON = ("attributed", "total")             # --on: what an insns threshold applies to


@dataclass
class Options:
    metric: str = "insns"
    threshold: timed.Threshold | None = None    # None: half the bad end's change
    alpha: float = 0.05                          # per timed step
    max_pairs: int = 64
    step_budget_s: float = 300.0
    seed: int | None = None
    on: str | None = None                        # ON; None: attributed where it applies (insns), else total


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
    floor: float | None = None                   # attributed: the good end's A/A floor


def _attributing(subject, opts: Options, say: Callable[[str], None]) -> bool:
    """Whether the threshold applies to the attributed change (opts.on, and what the subject can)."""
    from flagbench.bisect.attributed import supports
    if opts.on not in (None, *ON):
        raise UserError(f"--on {opts.on}: one of {', '.join(ON)}")
    if opts.on == "total":
        return False
    if opts.metric != "insns":
        if opts.on == "attributed":
            raise UserError(f"--on attributed splits exact counts (--metric insns); {opts.metric} takes its total")
        return False
    why = supports(subject)
    if why:
        if opts.on == "attributed":
            raise UserError(f"--on attributed: {why}")
        say(f"the threshold applies to the total: {why}")
        return False
    return True


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
    attributing = _attributing(subject, opts, say)
    if attributing:
        from flagbench.bisect.attributed import ATTRIBUTED
        metric = ATTRIBUTED
    exact = metric.exact
    extra = () if exact else (str(opts.threshold), opts.alpha, opts.max_pairs, opts.step_budget_s, opts.seed)
    steps = StoredBisect(store, subject, metric, [good, *commits], key_extra=extra, fresh=fresh,
                         provenance={"range": f"{good_ref}..{bad_ref}", "threshold": str(opts.threshold or "")})
    say(f"{len(commits)} commits in {good_ref}..{bad_ref}; at most {search.steps_bound(len(commits)) + 1} "
        f"steps; metric {metric.name} ({metric.unit}, {metric.better} is better); run {steps.run_id}")
    good_value = None
    good_end = None
    if attributing:   # first: a kernel's walked O= directory holds only the last commit built
        from flagbench.bisect.attributed import GoodEnd, step_cell
        gb = subject.build(good)
        if gb is None:
            raise UserError(f"the good end {good_ref} ({good.short}) does not build: {subject.why}")
        good_end = GoodEnd(subject, gb)

    def counted_cells(b):
        """The engine cells of a step on an exact metric: the total's, or the attributed one's.
        Called only for a step the store lacks: a rerun whose steps are stored never profiles
        the good end again (a kernel's: two boots)."""
        if not attributing:
            return subject.cells(b, opts.metric)
        try:
            good_end.prepare()   # its counts and floor: their failures are the bisection's, not a step's
        except StepFailed as e:
            raise UserError(f"the good end {good_ref} ({good.short}) does not run: {e}") from None
        return [step_cell(subject, good_end, b)]

    if exact:
        good_value, why, facts = steps.value(good, counted_cells)
        if good_value is None:
            raise UserError(f"the good end {good_ref} ({good.short}): {why}")
        if attributing and isinstance(facts.get("floor"), (int, float)):
            say(f"good {good.short}: A/A floor {facts['floor']:,.2f} {metric.unit} ({subject.floor_how}); "
                "the threshold applies to the attributed change (--on total: the total)")
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
        value, why, facts = steps.value(bad, counted_cells) if exact else timed_value(bad)
        if value is None:
            raise UserError(f"the bad end {bad.short} {why}: give --threshold")
        ratio = value / good_value if exact else value
        if ratio == 1.0 and attributing:
            total = facts.get("total")
            moved = f" (its total moved {(total / good_value - 1) * 100:+.2f} %)" if total else ""
            raise UserError(f"the bad end {bad.short} has no attributed change{moved}: nothing to bisect on it; "
                            "--on total bisects the total")
        if ratio == 1.0:
            raise UserError(f"the bad end {bad.short} measures the same as the good end: nothing to bisect")
        worse = (ratio < 1) if metric.higher_is_better else (ratio > 1)
        say(f"bad end {bad.short}: {(ratio - 1) * 100:+.2f} %{' attributed' * attributing}; threshold: half of it")
        threshold = timed.Threshold(abs(ratio - 1) / 2, 1 if worse else -1)
        threshold_for_time = threshold
    say(f"threshold {threshold.said()} against the good end")
    out = Outcome(commits, search.FirstBad(len(commits), None), good_value, threshold, 0, 0.0,
                  run_id=steps.run_id, metric=metric)
    causes: dict[int, str] = {}

    def measure(i: int) -> tuple[str, str]:
        try:
            return measured(i)
        except StepFailed as e:   # it built, its bench did not run: skipped, not the bisection
            return SKIP, f"does not run: {e}"

    def measured(i: int) -> tuple[str, str]:
        c = commits[i]
        if exact:
            v, why, facts = steps.value(c, counted_cells)
            if v is None:
                return SKIP, why
            ratio = v / good_value if good_value else float("inf")
            verdict = BAD if threshold.past(ratio, metric.higher_is_better) else GOOD
            if not attributing:
                return verdict, f"{_describe(metric, v)} ({(ratio - 1) * 100:+.2f} %)"
            if isinstance(facts.get("cause"), str):
                causes[i] = facts["cause"]
            if isinstance(facts.get("floor"), (int, float)):
                out.floor = facts["floor"]
            return verdict, _attributed_detail(metric, v, ratio, facts.get("total"), good_value)
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
        if s.index in causes:
            say(_fit(f"  {causes[s.index]}"))

    out.found = search.first_bad(len(commits), measure, on_step=on_step)
    out.builds, out.seconds, out.measured = subject.builds, time.monotonic() - start, steps.measured
    if good_end is not None and good_end._floor is not None:
        out.floor = good_end.floor
    return out


def _attributed_detail(metric: Metric, value: float, ratio: float, total, good_value: float) -> str:
    """`attributed +3.12 % (1,234.00 insns), total +96.00 %`: what a step's verdict rests on, and the total."""
    text = f"attributed {(ratio - 1) * 100:+.2f} % ({_describe(metric, value)})"
    if isinstance(total, (int, float)) and good_value:
        text += f", total {(total / good_value - 1) * 100:+.2f} %"
    return text


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
    if out.metric is not None and out.metric.name == "attributed_insns_per_iter":
        floor = "" if out.floor is None else f" {out.floor:,.{0 if float(out.floor).is_integer() else 1}f}"
        lines.append(_fit(f"threshold on the attributed change: changed code's counts + the rest beyond the A/A "
                          f"floor{floor}"))
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
    if declared.exact and good_ref is not None and _attributing(subject, opts, say):
        return _attributed_step(subject, b, good_ref, threshold, say, work)
    if declared.exact:
        if opts.on is None and metric == "insns" and good_ref is None:
            say("the threshold applies to the total: the attributed change needs --good REF")
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


def _attributed_step(subject, b, good_ref: str, threshold, say, work) -> int:
    """A `git bisect run` step on the attributed change against the good end (built, profiled and
    relinked for its floor here: git bisect keeps no value between steps)."""
    from flagbench import vcs
    from flagbench.bisect.attributed import ATTRIBUTED, GoodEnd, step_cell
    from flagbench.bisect.stored import once
    gb = subject.build(vcs.resolve(subject.repository(), good_ref), column="good")
    if gb is None:
        raise UserError(f"the good end {good_ref} does not build: {subject.why}")
    good = GoodEnd(subject, gb)
    try:
        good.prepare()
    except StepFailed as e:   # the good end's failure is the bisection's, not the step's
        raise UserError(f"the good end {good_ref} does not run: {e}") from None
    if not good.counted.total:
        raise UserError(f"the good end {good_ref} counts 0 instructions: no change relative to it")
    facts: dict = {}
    v = once([step_cell(subject, good, b)], ATTRIBUTED.name, work, keep=facts)
    ratio = v / good.counted.total
    verdict = BAD if threshold.past(ratio, ATTRIBUTED.higher_is_better) else GOOD
    say(f"{_attributed_detail(ATTRIBUTED, v, ratio, facts.get('total'), good.counted.total)} against "
        f"{good.counted.total:,.2f}: {verdict}")
    if isinstance(facts.get("cause"), str):
        say(_fit(f"  {facts['cause']}"))
    return 1 if verdict == BAD else 0
