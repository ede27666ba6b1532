"""`flagbench series EXP BASE..HEAD`: a row per commit of a series (size, asm, exact counts, time)."""
from __future__ import annotations

import sys
from pathlib import Path

from flagbench.export import choices, described

FORMATS = choices("text", "md", "json", "html")     # series_table.FORMATS (not imported here: startup)


def register(sub):
    p = sub.add_parser(
        "series", help="each commit of BASE..HEAD built and compared with its first parent and the base",
        description="Build the base and each commit of `git rev-list --reverse BASE..HEAD` (a kernel: one "
        "O= directory walked commit by commit; C: the sources read at each commit) and print a row per "
        "commit against its first parent: bloat-o-meter's total delta, functions added/removed/grown/shrunk, "
        "padding, functions whose code changed, and the exact counts of the experiment's counted benches; "
        "with --host or --place, each commit timed against its first parent in paired rounds there. The "
        "repository is the kernel's `source = PATH`, or the one holding the C sources; it is never checked "
        "out. The series is a run of the results database: run again, it resumes; `flagbench report RUN` "
        "prints it again.")
    p.add_argument("experiment", help="the experiment (directory or .toml)")
    p.add_argument("range", metavar="BASE..HEAD", nargs="?", help="the series: BASE..HEAD (HEAD defaults to HEAD)")
    p.add_argument("--mbox", action="append", metavar="FILE", help="the series as mails (an mbox, a maildir, "
                   "or - for stdin), applied with git am in a clone flagbench owns; twice: v1 against v2 "
                   "(docs/mail.md)")
    p.add_argument("--base", metavar="REF", help="with --mbox: the base when the mails name no base-commit:")
    p.add_argument("--variant", help="the variant each commit is built as (default: the first)")
    p.add_argument("--target", help="the target (default: the experiment's first)")
    p.add_argument("--compiler", help="the compiler (default: the target's first)")
    p.add_argument("--format", choices=FORMATS, default="text", help=f"{described(FORMATS)} (default text)")
    p.add_argument("--jobs", "-j", type=int, help="make -jN / parallel compiles (default: the CPUs)")
    p.add_argument("--no-asm", action="store_true", help="skip the function-by-function comparison")
    p.add_argument("--no-counts", action="store_true", help="skip the counted benches")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"), help="results database (default ./flagbench.db)")
    p.add_argument("--fresh", action="store_true", help="measure again instead of resuming the stored run")
    p.add_argument("--host", action="append", default=[], metavar="[USER@]HOST",
                   help="time each commit against its first parent in paired rounds on this ssh host")
    p.add_argument("--place", action="append", default=[], metavar="NAME",
                   help="... or on this place of the labgrid lab at LG_COORDINATOR")
    p.add_argument("--place-wait", default="10m", metavar="TIME",
                   help="with --place: how long to wait for a place someone else holds (default 10m)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p


def run(args) -> int:
    from flagbench import procs
    from flagbench.errors import UserError

    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if args.mbox or args.range is None:
        from flagbench.cli.series_mail import series_from_mail
        return series_from_mail(args)
    procs.install()
    from flagbench.cli.fleet import opened
    from flagbench.series_cells import run_series
    from flagbench.series_table import render

    try:
        with opened(args, "series") as fleet:
            series, status = run_series(args.experiment, args.range, db=args.db, variant=args.variant,
                                        target=args.target, compiler=args.compiler, jobs=args.jobs,
                                        progress=not args.quiet, asm=not args.no_asm, counts=not args.no_counts,
                                        fresh=args.fresh, fleet=fleet)
    except procs.Terminated as e:
        print(f"flagbench series: {e}: stopped; run again to resume", file=sys.stderr)
        return e.exit_status
    if status > 1:    # interrupted: what was measured is stored, the table would be partial
        print(f"flagbench series: stopped; run {series.run_id} keeps what was measured: run again to resume",
              file=sys.stderr)
        return status
    sys.stdout.write(render(series, args.format))
    from flagbench.series import exit_status
    return exit_status(series)
