"""`flagbench series EXP BASE..HEAD`: a row per commit of a series (size, asm, exact counts)."""
from __future__ import annotations

FORMATS = ("text", "md", "json", "html")


def register(sub):
    p = sub.add_parser(
        "series", help="each commit of BASE..HEAD built and compared with the one before and the base",
        description="Build the base and each commit of `git rev-list --reverse BASE..HEAD` (a kernel: one "
        "O= directory walked commit by commit; C: the sources read at each commit) and print a row per "
        "commit: bloat-o-meter's total delta, functions added/removed/grown/shrunk, padding, functions "
        "whose code changed, and the exact counts of the experiment's counted benches. The repository is "
        "the kernel's `source = PATH`, or the one holding the C sources; it is never checked out.")
    p.add_argument("experiment", help="the experiment (directory or .toml)")
    p.add_argument("range", metavar="BASE..HEAD", nargs="?", help="the series: BASE..HEAD (HEAD defaults to HEAD)")
    p.add_argument("--mbox", action="append", metavar="FILE", help="the series as mails (an mbox, a maildir, "
                   "or - for stdin), applied with git am in a clone flagbench owns; twice: v1 against v2 "
                   "(docs/mail.md)")
    p.add_argument("--base", metavar="REF", help="with --mbox: the base when the mails name no base-commit:")
    p.add_argument("--variant", help="the variant each commit is built as (default: the first)")
    p.add_argument("--target", help="the target (default: the experiment's first)")
    p.add_argument("--compiler", help="the compiler (default: the target's first)")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    p.add_argument("--jobs", "-j", type=int, help="make -jN / parallel compiles (default: the CPUs)")
    p.add_argument("--no-asm", action="store_true", help="skip the function-by-function comparison")
    p.add_argument("--no-counts", action="store_true", help="skip the counted benches")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p


def run(args) -> int:
    import sys

    from flagbench.errors import UserError
    from flagbench.series import run_series
    from flagbench.series_table import render

    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if args.mbox or args.range is None:
        from flagbench.mail.face import series_from_mail
        return series_from_mail(args)
    series = run_series(args.experiment, args.range, variant=args.variant, target=args.target,
                        compiler=args.compiler, jobs=args.jobs, progress=not args.quiet,
                        asm=not args.no_asm, counts=not args.no_counts)
    sys.stdout.write(render(series, args.format))
    return 0 if all(r.built for r in series.rows[:1]) else 1
