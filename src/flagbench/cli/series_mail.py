"""What `flagbench series EXP --mbox FILE [--mbox FILE]` does: mail/'s face (cli/series.py
hands it over)."""
from __future__ import annotations

import json
import sys

from flagbench.errors import UserError


def _timed(args, measure_all):
    """MEASURE_ALL(fleet): with --host/--place, every version's patches timed there (each against
    the one before it, in paired rounds: series_cells), the places held for all of them."""
    from flagbench.cli.fleet import opened

    with opened(args, "series") as fleet:
        return measure_all(fleet)


def series_from_mail(args) -> int:
    from flagbench import procs
    from flagbench.mail import parse
    from flagbench.mail.run import as_json, by_authors, measure, with_authors
    from flagbench.series import exit_status
    from flagbench.series_table import render

    if args.range is not None and args.mbox:
        raise UserError("give BASE..HEAD or --mbox FILE, not both")
    if not args.mbox:
        raise UserError("name the series: BASE..HEAD, or --mbox FILE (an mbox, a maildir, or -)")
    if len(args.mbox) > 2:
        raise UserError("--mbox at most twice: v1 and v2 of a series")
    if args.mbox.count("-") > 1:
        raise UserError("--mbox -: stdin can be read once")
    if len(args.mbox) == 2:
        from flagbench.mail.match import VERSION_FORMATS
        if args.format not in VERSION_FORMATS:
            raise UserError(f"--format {args.format}: v1 against v2 is written as {', '.join(VERSION_FORMATS)}")
    mails = [parse.load(m) for m in args.mbox]     # all of them read (and refused) before any build
    kw = dict(base=args.base, variant=args.variant, target=args.target, compiler=args.compiler,
              jobs=args.jobs, progress=not args.quiet, asm=not args.no_asm, counts=not args.no_counts,
              db=args.db, fresh=args.fresh)
    try:
        runs = _timed(args, lambda fleet: [measure(args.experiment, m, mail=mail, fleet=fleet, **kw)
                                           for m, mail in zip(args.mbox, mails)])
    except procs.Terminated as e:
        print(f"flagbench series: {e}: stopped; run again to resume", file=sys.stderr)
        return e.exit_status
    stopped = next((r.status for r in runs if r.status > 1), 0)
    if stopped:     # interrupted: what was measured is stored, the table would be partial
        print("flagbench series: stopped; run again to resume", file=sys.stderr)
        return stopped
    if len(runs) == 1:
        run = runs[0]
        if args.format == "json":
            sys.stdout.write(json.dumps(as_json(run), indent=1) + "\n")
        else:
            plain = args.format in ("text", "md")     # md shows the text table as code
            sys.stdout.write(render(by_authors(run) if plain else with_authors(run), args.format))
        return exit_status(run.series)
    from flagbench.mail.match import compare_versions, render_versions

    versions = compare_versions(*runs)
    sys.stdout.write(render_versions(versions, args.format))
    return max(exit_status(r.series) for r in runs)
