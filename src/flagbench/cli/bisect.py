"""`flagbench bisect EXPERIMENT`: the first commit where a metric moves, or the objects that carry a change.

To a commit: --good REF --bad REF (the experiment's sources are in a git repository; each
commit is read from an export in the cache, the checkout is never touched). --metric insns
(exact counts: one build and one counted run a step) or size (code bytes), or time (paired
rounds against the good end, each step with its interval). To an object: --objects [A B],
which objects of variant B carry its change against A (C: the harness linked from mixes;
kernel: A's O= relinked with B's objects and booted). As a `git bisect run` script:
--run-step measures the sources as checked out and exits 0 good, 1 bad, 125 does not build,
255 on bad input (so git bisect stops instead of calling the commit bad). On insns the threshold
applies to the attributed change (the delta in functions whose code changed, plus the rest beyond
the A/A floor: docs/attribution.md); --on total applies it to the total.
"""
from __future__ import annotations

import sys
from pathlib import Path

EXIT_ABORT = 255     # git bisect run: anything above 127 stops the bisection


def _is_step(argv) -> bool:
    """--run-step among ARGV, as argparse reads it (an unambiguous prefix such as --run counts)."""
    return any(a.startswith("--r") and "--run-step".startswith(a.split("=", 1)[0]) for a in argv or ())


def _step_parser(p):
    """P's usage errors exit 255 when --run-step is among the arguments: git bisect run reads
    exit 2 as "bad" and would name a wrong commit; 255 stops it."""
    base = type(p)

    class StepParser(base):
        step = False

        def parse_known_args(self, args=None, namespace=None):
            args = list(args if args is not None else sys.argv[1:])
            self.step = _is_step(args)
            ns, extras = base.parse_known_args(self, args, namespace)
            if extras and self.step:   # the top parser would say it, with exit 2
                self.error(f"unrecognized arguments: {' '.join(extras)}")
            return ns, extras

        def error(self, message: str):  # noqa: D102 - argparse API
            if "--threshold" in message:
                message += " (a negative value is written --threshold=-5%)"
            self.exit(EXIT_ABORT if self.step else 2, f"{self.prog}: error: {message}\n")
    p.__class__ = StepParser
    return p


def register(sub):
    p = _step_parser(sub.add_parser(
        "bisect", help="the first commit where a metric moves, or the objects that carry a change",
        description=__doc__.split("\n\n")[1].replace("\n", " ")))
    p.add_argument("experiment", help="experiment directory (with experiment.toml) or .toml file")
    p.add_argument("--good", metavar="REF", help="a commit where the metric has its old value")
    p.add_argument("--bad", metavar="REF", help="a later commit where it has moved")
    p.add_argument("--metric", choices=("insns", "size", "time"), default="insns",
                   help="insns: exact counts of the bench (default); size: code bytes; time: paired rounds")
    p.add_argument("--bench", metavar="NAME", help="the bench that measures (default: the first)")
    p.add_argument("--threshold", metavar="PCT",
                   help="a step is bad when the metric moved past this against the good end: 5%% (either way), "
                        "+5%% (up only), -5%% (down only, written --threshold=-5%%); a bare number is percent "
                        "too (5 is 5%%); default half of what the bad end moved")
    p.add_argument("--on", choices=("attributed", "total"),
                   help="insns: what the threshold applies to. attributed (the default): the count delta in "
                        "functions whose code changed, plus whatever of the rest lies beyond the good end's A/A "
                        "floor (the good end relinked: layout only), so a commit that only moves layout is not "
                        "named; total: the whole count, as measured. Size and time take their totals")
    p.add_argument("--variant", help="commits: the variant built (default: the first)")
    p.add_argument("--target", help="the target (default: the first)")
    p.add_argument("--compiler", help="the compiler (default: the target's first)")
    p.add_argument("--alpha", type=float, default=0.05, help="time: chance per step of a wrong call (default 0.05)")
    p.add_argument("--pairs", type=int, default=64, metavar="N", help="time: at most N paired rounds a step (default 64)")
    p.add_argument("--step-budget", default="5m", metavar="TIME", help="time: measuring time per step (default 5m)")
    p.add_argument("--seed", type=int, help="time: seed of the rounds' random order")
    p.add_argument("--objects", nargs="*", metavar="VARIANT",
                   help="bisect to objects: which of B's objects carry its change against A (default the first two "
                        "variants); --metric insns or size")
    p.add_argument("--share", default="80%", metavar="PCT",
                   help="objects: halve while one half carries this much of the effect (default 80%%)")
    p.add_argument("--run-step", action="store_true",
                   help="one `git bisect run` step on the sources as checked out: exit 0 good, 1 bad, 125 skip")
    p.add_argument("--good-value", type=float, metavar="V", help="--run-step on insns/size: the good end's value")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiler jobs (default 2)")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"),
                   help="results database the steps are stored in (default ./flagbench.db): run again, a "
                        "bisection measures only the commits it has not measured")
    p.add_argument("--fresh", action="store_true", help="measure every step again instead of reading stored ones")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def run(args) -> int:
    from flagbench import procs
    from flagbench.errors import UserError
    from flagbench.textsafe import term_text

    procs.install()
    if not args.run_step:
        return _run(args)
    try:
        return _run(args)
    except UserError as e:    # exit 2 would read as "bad" to git bisect run
        print(f"flagbench bisect: {term_text(str(e))}", file=sys.stderr)
        return EXIT_ABORT
    except Exception as e:    # a crash (exit 1) too: stop the bisection rather than call the commit bad
        print(f"flagbench bisect: internal error: {type(e).__name__}: {term_text(str(e))}", file=sys.stderr)
        return EXIT_ABORT


def _run(args) -> int:
    from flagbench import procs, spec
    from flagbench.bisect import commits, timed
    from flagbench.errors import UserError
    from flagbench.run.until import parse_budget
    from flagbench.textsafe import sayer, term_text

    say = sayer("flagbench bisect: ", quiet=args.quiet)
    _check_numbers(args)
    exp = spec.load(Path(args.experiment))
    try:
        threshold = timed.parse_threshold(args.threshold) if args.threshold else None
        share = timed.parse_threshold(args.share).size
    except ValueError as e:
        raise UserError(str(e)) from None
    if share > 1:
        raise UserError(f"--share {args.share}: at most 100%")
    if args.objects is not None:
        return _objects(args, exp, share, say)
    if not 0 < args.alpha < 1:
        raise UserError("--alpha must lie between 0 and 1")
    if args.pairs < 8:
        raise UserError("--pairs must be at least 8 (the first look at the interval)")
    opts = commits.Options(metric=args.metric, threshold=threshold, alpha=args.alpha, max_pairs=args.pairs,
                           step_budget_s=parse_budget(args.step_budget), seed=args.seed, on=args.on)
    with procs.owned_dir("flagbench-bisect") as workdir:
        subject = _subject(args, exp, workdir)
        if args.run_step:
            if threshold is None:
                raise UserError("--run-step needs --threshold (a step alone cannot see the bad end)")
            return commits.run_step(subject, args.metric, threshold, good_value=args.good_value,
                                    good_ref=args.good, opts=opts, say=say)
        if not (args.good and args.bad):
            raise UserError("bisect to a commit needs --good REF and --bad REF (or --objects, or --run-step)")
        from flagbench.store import Store
        with Store(args.db) as store, store.writer(f"flagbench bisect {exp.path}"):
            out = commits.bisect(subject, args.good, args.bad, opts, say, store=store, fresh=args.fresh)
    for line in commits.summary(out, opts):
        print(term_text(line))
    return 0 if out.found.first is not None else 1


def _check_numbers(args) -> None:
    """Numbers argparse takes as any float or int, checked before anything is built."""
    import math
    from flagbench.errors import UserError
    if args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: at least 1")
    v = args.good_value
    if v is not None and not (math.isfinite(v) and v > 0):
        raise UserError(f"--good-value {v:g}: the good end's count or size, a number above 0")


def _subject(args, exp, workdir):
    from flagbench import subject
    from flagbench.bisect.csubject import CSubject
    from flagbench.bisect.ksubject import KernelSubject
    from flagbench.bisect.objects import choose_bench

    bisected = {"c": CSubject, "kernel": KernelSubject}[subject.of(exp).kind]
    return bisected(exp, choose_bench(exp, args.bench, guest=bisected.guest, required=args.metric != "size"),
                    variant=args.variant, target=args.target, compiler=args.compiler, workdir=workdir, jobs=args.jobs)


def _objects(args, exp, share: float, say) -> int:
    from flagbench import procs
    from flagbench.bisect.objects import bisect_objects, summary
    from flagbench.errors import UserError
    from flagbench.textsafe import term_text

    if args.metric == "time":
        raise UserError("--objects measures exact counts (insns) or size; time is not bisected to objects yet")
    from flagbench import subject
    parent = subject.of(exp).scratch_parent()   # mixes beside the builds: one file system, links work
    with procs.owned_dir("flagbench-bisect", parent) as workdir:
        out = bisect_objects(exp, args.objects, metric=args.metric, bench=args.bench, share=share,
                             workdir=workdir, say=say, jobs=args.jobs)
        for line in summary(out):
            print(term_text(line))
    return 0
