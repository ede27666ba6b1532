"""`flagbench size OLD NEW`: symbol and section size deltas, bloat-o-meter compatible, padding-aware."""
from __future__ import annotations

FORMATS = ("text", "bom", "md", "json", "csv")


def register(sub):
    p = sub.add_parser(
        "size", help="symbol/section size deltas of two ELF files or archives (bloat-o-meter compatible)",
        description="Compare two ELF files (objects, executables, vmlinux, .ko) or static archives. "
        "--format=bom prints exactly what the kernel's scripts/bloat-o-meter prints; the default "
        "text adds sections, padding between functions and .cold code.")
    p.add_argument("old", help="the baseline ELF file or .a archive")
    p.add_argument("new", help="the changed ELF file or .a archive")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("-c", dest="mode", action="store_const", const="c",
                      help="bom: separate tables for functions, data and read-only data")
    mode.add_argument("-d", dest="mode", action="store_const", const="d", help="bom: data only")
    mode.add_argument("-t", dest="mode", action="store_const", const="t", help="bom: functions only")
    mode.add_argument("--kind", choices=("functions", "data", "rodata"),
                      help="only these symbols (nm letters tTwW, dDbBvV, rR)")
    for kind in ("functions", "data", "rodata"):
        mode.add_argument(f"--{kind}", dest="kind", action="store_const", const=kind,
                          help=f"same as --kind {kind}")
    p.add_argument("--match", metavar="REGEX", help="only symbols whose name matches REGEX")
    p.add_argument("--top", metavar="N", type=int, help="only the N largest changes")
    return p


def run(args) -> int:
    import re
    import sys

    from flagbench import size
    from flagbench.errors import UserError

    try:
        match = re.compile(args.match) if args.match else None
    except re.error as e:
        raise UserError(f"--match {args.match!r}: {e}") from None
    if args.top is not None and args.top < 0:
        raise UserError("--top must be 0 or more")
    types = size.KINDS[args.kind] if args.kind else None
    if args.format == "bom":
        sys.stdout.write(size.bom(args.old, args.new, args.mode, match, args.top, types))
        return 0
    if args.mode:
        raise UserError(f"-{args.mode} goes with --format=bom; use --kind for the other formats")
    comparison = size.compare(args.old, args.new, types=types, match=match)
    sys.stdout.write(size.render(comparison, args.format, args.top))
    return 0
