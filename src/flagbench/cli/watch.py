"""`flagbench watch EXP --branch B`: the robot (flagbench/watch/); this is its thin face."""
from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600}


def interval(text: str) -> float:
    from flagbench.errors import UserError

    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", text.strip())
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"--interval {text!r}: a duration like 30s, 5m or 1h")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


def register(sub):
    p = sub.add_parser(
        "watch", help="keep evidence for every commit of branches, find and report the changes",
        description="Follow each --branch of the repository that holds the experiment's sources: every new "
        "first-parent commit, oldest first, is built and compared with the one before it (size, changed "
        "functions, exact counts), stored; timed benches run only where what they execute moved. Changes "
        "found over the history get their cause, a report (mbox + markdown, never sent) and a dashboard "
        "(OUT/index.html). The repository is only read.")
    p.add_argument("experiment", help="the experiment (directory or .toml)")
    p.add_argument("--branch", action="append", required=True, help="a branch to follow (repeatable)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--interval", default="5m", help="poll every DURATION (default 5m)")
    when.add_argument("--once", action="store_true", help="one pass, then exit (cron, a git hook)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--host", help="time on this ssh host (default: this machine)")
    where.add_argument("--place", help="time on this place of the labgrid lab at LG_COORDINATOR")
    p.add_argument("--place-wait", default="10m", metavar="TIME",
                   help="with --place: how long to wait for a place someone else holds (default 10m)")
    p.add_argument("--since", help="on the first pass, watch from after this commit (default: the tip's parent)")
    p.add_argument("--max-commits", type=int, help="measure at most N commits a pass (the rest: backlog)")
    p.add_argument("--stride", type=int, default=1,
                   help="measure every Nth new commit (and the newest); a change in between is bisected")
    p.add_argument("--threshold", type=float, default=0.1, help="exact moves below PCT %% are no change (0.1)")
    p.add_argument("--no-time", action="store_true", help="exact layers only: no timed benches")
    p.add_argument("--objects", action="store_true",
                   help="a kernel commit whose count moved: bisect it to the objects that carry the move "
                        "(relinks and boots; named in its report)")
    p.add_argument("--samples", type=int, help="timed samples per side (default: each bench's own)")
    p.add_argument("--variant", help="the variant each commit is built as (default: the first)")
    p.add_argument("--target", help="the target (default: the experiment's first)")
    p.add_argument("--compiler", help="the compiler (default: the target's first)")
    p.add_argument("--db", default="flagbench.db", help="the results database (default ./flagbench.db)")
    p.add_argument("--out", default="flagbench-watch", help="reports and dashboard go here (default ./flagbench-watch)")
    p.add_argument("--jobs", "-j", type=int, help="parallel compiles")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return p


def run(args) -> int:
    from pathlib import Path

    from flagbench.errors import UserError
    from flagbench.cli.fleet import opened
    from flagbench.watch import watch
    from flagbench.watch.loop import Options

    if args.max_commits is not None and args.max_commits < 1:
        raise UserError("--max-commits must be at least 1")
    if args.samples is not None and not 1 <= args.samples <= 100_000:
        raise UserError("--samples must be 1..100000")
    if args.stride < 1:
        raise UserError("--stride must be at least 1")
    if args.threshold < 0:
        raise UserError("--threshold must be 0 or more")
    if len(set(args.branch)) != len(args.branch):
        raise UserError("--branch names a branch twice")
    every = None if args.once else interval(args.interval)
    opts = Options(list(args.branch), args.since, args.max_commits, args.stride, args.threshold, not args.no_time,
                   args.samples, objects=args.objects)

    def tell(text: str) -> None:   # a new finding's line, as soon as its pass ends
        print(text, flush=True)

    watch(Path(args.experiment), opts, db=Path(args.db), out=Path(args.out), interval=every,
          variant=args.variant, target=args.target, compiler=args.compiler, jobs=args.jobs, quiet=args.quiet,
          tell=tell, place=(lambda: opened(args, "watch")) if args.host or args.place else None)
    return 0


