"""`flagbench asm OLD NEW [FUNCTION...]`: which functions changed between two builds, how
(side by side) and what that does to the instruction mix."""
from __future__ import annotations

FORMATS = ("text", "md", "json")


def register(sub):
    p = sub.add_parser("asm", help="per-function disassembly diff and instruction mix of two ELF files",
                       description="Compare two objects or executables function by function. The "
                       "disassembly is normalised so that layout alone (addresses, alignment padding, "
                       "relocation offsets) makes no difference. Name functions to see them side by side.")
    p.add_argument("old", help="the baseline object or executable")
    p.add_argument("new", help="the changed object or executable")
    p.add_argument("functions", nargs="*", metavar="FUNCTION", help="functions to show side by side")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--limit", type=int, default=50, help="changed/added/removed functions listed (text, md)")
    p.add_argument("--changed-only", action="store_true",
                   help="json: leave out functions that are the same (they are still counted)")
    return p


def run(args) -> int:
    from flagbench.asm import render
    from flagbench.asm.compare import compare

    # TODO(lead): `flagbench asm EXPERIMENT --variants A,B` once build.py lands (see the report).
    c = compare(args.old, args.new)
    for name in args.functions:
        c.get(name)   # every named function must exist before anything is printed
    if c.warning and args.format != "text":
        import sys
        print(f"flagbench asm: warning: {c.warning}", file=sys.stderr)
    if args.format == "json":
        print(render.to_json(c, args.functions, everything=not args.changed_only))
    elif args.format == "md":
        print(render.to_markdown(c, args.functions, args.limit), end="")
    else:
        render.print_text(c, args.functions, args.limit)
    return 0
