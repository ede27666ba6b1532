"""`flagbench check EXP`: a patch or series on stdin measured and judged by the experiment's
[check] budgets; prints b4's check JSON or patchwork's check (docs/mail.md)."""
from __future__ import annotations

from pathlib import Path

from flagbench.export import choices, described

FORMATS = choices("b4", "patchwork", "checkpatch")


def register(sub):
    p = sub.add_parser(
        "check", help="a patch or series on stdin measured against its base: b4's or patchwork's check",
        description="Read a patch or a series (mails) on stdin, as b4 runs a check command, apply it with "
        "git am in a clone flagbench owns, measure it against its base (size, asm, exact counts) and print "
        "b4's check JSON (status from the experiment's [check] budgets) or, with --format patchwork, the "
        "check a CI posts to patchwork. Nothing is posted anywhere.")
    p.add_argument("experiment", help="the experiment (directory or .toml)")
    p.add_argument("--format", choices=FORMATS, default="b4", help=f"{described(FORMATS)} (default b4)")
    p.add_argument("--base", metavar="REF", help="the base when the mail names no base-commit:")
    p.add_argument("--url", default="", help="the url the check points at (a report you publish)")
    p.add_argument("--context", help="patchwork's context (default flagbench-EXPERIMENT)")
    p.add_argument("--pending", action="store_true", help="with --format patchwork: print the pending check a "
                   "CI posts before measuring (stdin is not read)")
    p.add_argument("--variant", help="the variant each patch is built as (default: the first)")
    p.add_argument("--target", help="the target (default: the experiment's first)")
    p.add_argument("--compiler", help="the compiler (default: the target's first)")
    p.add_argument("--jobs", "-j", type=int, help="make -jN / parallel compiles (default: the CPUs)")
    p.add_argument("--db", type=Path, help="results database (default: check.db in flagbench's cache, not "
                   "the directory b4 runs it in: the user's checkout)")
    p.epilog = ("The cache is FLAGBENCH_CACHE, else $XDG_CACHE_HOME/flagbench (~/.cache/flagbench), not ./.cache: "
                "b4 runs a check command in the user's checkout.")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p


def run(args) -> int:
    import json
    import os
    import sys

    from flagbench import cache
    if not os.environ.get(cache.CACHE_ENV):   # b4 runs us in the user's checkout: not ./.cache there
        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        os.environ[cache.CACHE_ENV] = str(home / "flagbench")
    from flagbench import spec
    from flagbench.cache import cache_dir
    from flagbench.errors import UserError
    from flagbench.mail import check, parse
    from flagbench.mail.run import measure

    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    exp = spec.load(args.experiment)    # a bad experiment is its line before stdin is read
    if args.pending:
        if args.format != "patchwork":
            raise UserError("--pending is patchwork's state: with --format patchwork")
        print(json.dumps(check.patchwork(exp.name, check.Verdict("pending", "flagbench is measuring"),
                                         args.url, args.context), indent=1))
        return 0
    if sys.stdin is not None and sys.stdin.isatty():
        raise UserError("check reads a patch or a series on stdin (as b4 hands it): flagbench check EXP < FILE")
    mail = parse.load("-", allow_cover=True)
    if not mail.patches:    # b4's per-series check hands over the cover letter alone
        verdict = check.Verdict("pass", "a cover letter: nothing to measure in it (flagbench checks each patch, "
                                "or the series as one mbox)")
        return _print(args, check, verdict)
    db = args.db or cache_dir() / "mail" / "check.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    measured = measure(args.experiment, "-", mail=mail, base=args.base, variant=args.variant,
                       target=args.target, compiler=args.compiler, jobs=args.jobs, progress=not args.quiet, db=db)
    verdict = check.judge(measured)
    if measured.status > 1:     # interrupted: what was measured is stored
        return measured.status
    return _print(args, check, verdict)


def _print(args, check, verdict) -> int:
    import json
    import sys

    from flagbench import export, spec

    sys.stdout.write(export.render(args.format, {
        "b4": lambda: json.dumps(check.b4_json(verdict, args.url), indent=1) + "\n",
        "patchwork": lambda: json.dumps(check.patchwork(spec.load(args.experiment).name, verdict, args.url,
                                                        args.context), indent=1) + "\n",
        "checkpatch": lambda: check.checkpatch_lines(verdict)}))
    return 1 if verdict.status == "fail" else 0
