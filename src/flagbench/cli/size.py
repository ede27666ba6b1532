"""`flagbench size OLD NEW`: symbol and section size deltas, bloat-o-meter compatible, padding-aware."""

from flagbench.export import choices

FORMATS = choices("text", "bom", "md", "json", "csv")   # bom: cli's own; the rest size.render's
BOM_RULES = ("tree", "newest", "6.1", "6.12")      # size/rules.py's BOM_VERSIONS, and a tree's own


def register(sub):
    p = sub.add_parser(
        "size", help="symbol/section size deltas of two ELF files or archives (bloat-o-meter compatible)",
        description="Compare two ELF files (objects, executables, vmlinux, .ko) or static archives. "
        "--format=bom prints exactly what the kernel's scripts/bloat-o-meter prints: for two files the "
        "newest script's rules (Linux 6.12's, weak symbols w/W/v/V counted), or an older script's with "
        "--bom-rules 6.1 (the script scripts/install-deps puts in .cache/bloat-o-meter); for a kernel "
        "experiment the tree's own script. The default text adds sections, padding between functions "
        "and .cold code.")
    p.add_argument("old", help="the baseline ELF file or .a archive, or an experiment (directory or .toml)")
    p.add_argument("new", nargs="?", help="the changed ELF file or .a archive (none with an experiment)")
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
    exp = p.add_argument_group("experiment (two variant builds: objects archived, or a kernel's vmlinux)")
    exp.add_argument("--variants", metavar="A,B", help="the two variants (default: the first two)")
    exp.add_argument("--target", help="the target (default: the experiment's first)")
    exp.add_argument("--compiler", help="the compiler (default: the target's first)")
    exp.add_argument("--objects", action="store_true", help="kernel: which built objects' code changed, ranked")
    exp.add_argument("--summary", action="store_true", help="kernel: the short summary to paste under a patch")
    p.add_argument("--bom-rules", choices=BOM_RULES, metavar="RULES",
                   help="whose scripts/bloat-o-meter --format=bom follows: a kernel version's for two files "
                        "(6.1: weak symbols not counted; 6.12 or newest: counted, the default), or for a "
                        "kernel experiment its tree's own (tree, the default) or the newest")
    return p


def quick(argv: list[str]):
    """`size [--format=F] OLD NEW` (two files, no other option): run() without argparse, as a
    handler for `cli.main`; None for anything else (the parser's defaults, help and errors)."""
    fmt = "text"
    if argv[:1] == ["--format"] and len(argv) == 4:
        fmt, argv = argv[1], argv[2:]
    elif len(argv) == 3 and argv[0].startswith("--format="):
        fmt, argv = argv[0][len("--format="):], argv[1:]
    if len(argv) != 2 or fmt not in FORMATS or any(a.startswith("-") or not a for a in argv):
        return None
    from flagbench.cli import is_experiment
    if any(map(is_experiment, argv)):
        return None
    args = _Args(old=argv[0], new=argv[1], format=fmt, mode=None, kind=None, match=None, top=None,
                 variants=None, target=None, compiler=None, objects=False, summary=False, bom_rules=None)
    return lambda: run(args)


class _Args:
    """What argparse would have made of the quick path's arguments (not types.SimpleNamespace:
    its import is a hundredth of the command on a vmlinux pair)."""

    def __init__(self, **values):
        self.__dict__.update(values)


def run(args) -> int:
    import sys

    from flagbench import size

    if _experiment(args):   # a kernel's --objects / --summary printed; else args.old/new are now files
        return 0
    match = None
    if args.match:
        import re
        try:
            match = re.compile(args.match)
        except re.error as e:
            _bad(f"--match {args.match!r}: {e}")
    if args.top is not None and args.top < 0:
        _bad("--top must be 0 or more")
    types = size.SYMBOL_KINDS[args.kind] if args.kind else getattr(args, "kind_types", None)
    if args.format == "bom":
        out = _bom(args, match, types)
        if sys.stdout.isatty():   # byte for byte bloat-o-meter, except control characters on a terminal
            from flagbench.textsafe import term_text
            out = "\n".join(map(term_text, out.split("\n")))
        sys.stdout.write(out)
        return 0
    if args.mode:
        _bad(f"-{args.mode} goes with --format=bom; use --kind for the other formats")
    if args.bom_rules:
        _bad(f"--bom-rules {args.bom_rules} goes with --format=bom for two files")
    comparison = size.compare(args.old, args.new, types=types, match=match)
    from flagbench.size.render import render
    sys.stdout.write(render(comparison, args.format, args.top))
    return 0


def _bad(message: str):
    """Raise errors.UserError(MESSAGE), imported here: when nothing is wrong, the quick path has
    no need of flagbench.errors (its classes are a fiftieth of the command on a vmlinux pair)."""
    from flagbench.errors import UserError
    raise UserError(message) from None


def _bom(args, match, types) -> str:
    """bloat-o-meter's output for two files under --bom-rules (size/rules.py's BOM_VERSIONS)."""
    from flagbench import size
    from flagbench.size.rules import BOM_VERSIONS, bom_tables

    rules = args.bom_rules or "newest"
    if rules not in BOM_VERSIONS:
        _bad(f"--bom-rules {rules}: two files have no kernel tree; give the version of the "
             f"script to follow ({', '.join(BOM_VERSIONS)})")
    if BOM_VERSIONS[rules] is BOM_VERSIONS["newest"]:
        return size.bom(args.old, args.new, args.mode, match, args.top, types)
    if types:     # --kind under an older script: its letters without the weak ones it did not count
        tables = (("Function" if "t" in types else "Data", "".join(c for c in types if c not in "wWvV")),)
    else:
        tables = bom_tables(rules, args.mode)
    out = []
    for label, letters in tables:
        text = size.bom(args.old, args.new, None, match, args.top, letters)
        out.append(text.replace("%-40s" % "Function", "%-40s" % label, 1))    # the table's own label
    return "".join(out)


def _experiment(args) -> bool:
    """With an experiment, build its two chosen cells and point args.old/args.new at what
    to compare (the objects as archives; a kernel's vmlinux). True when a kernel-only output
    (--objects, --summary) was printed instead."""
    from flagbench.cli import is_experiment

    chosen = [f"--{k.replace('_', '-')}" for k in ("variants", "target", "compiler", "objects", "summary")
              if getattr(args, k)]
    if not is_experiment(args.old):
        if chosen:
            _bad(f"{', '.join(chosen)} go with an experiment, not with two ELF files")
        if args.new is None:
            _bad(f"{args.old}: give two ELF files (OLD NEW) or an experiment directory")
        return False
    from flagbench.errors import UserError
    if args.new is not None:
        raise UserError(f"{args.old} is an experiment: give it alone (choose with --variants A,B)")
    from flagbench import spec, subject
    import re
    import sys

    exp = spec.load(args.old)
    if subject.of(exp).kind == "c" and (args.objects or args.summary or args.bom_rules):
        raise UserError(f"{exp.path}: --objects, --summary and --bom-rules go with a kernel experiment")
    if args.bom_rules not in (None, "tree", "newest"):
        raise UserError(f"--bom-rules {args.bom_rules} is for two files; a kernel experiment takes tree or newest")
    pair = subject.pair(exp, args.variants, args.target, args.compiler)
    if not pair.kernel:
        from flagbench.build import archive
        _name_pair(args, pair)
        args.old, args.new = str(archive(pair.old)), str(archive(pair.new))
        return False

    from flagbench.size import summary
    rules = args.bom_rules or "tree"
    label, legacy = summary.rules_of(pair.old.src, rules)
    _name_pair(args, pair, f"bloat-o-meter rules: {label}")
    if args.summary:
        sys.stdout.write(summary.render(summary.summarize(pair.old, pair.new, rules=rules)))
        return True
    if args.objects:
        from flagbench.size import objects
        changes, total = objects.compare(pair.old.dir, pair.new.dir)
        sys.stdout.write(objects.render(changes, total, top=args.top or 30))
        return True
    if args.format == "bom" and not args.kind:   # as the tree's own scripts/bloat-o-meter prints it
        from flagbench.size.summary import tree_bom
        try:
            match = re.compile(args.match) if args.match else None
        except re.error as e:
            raise UserError(f"--match {args.match!r}: {e}") from None
        sys.stdout.write(tree_bom(pair.old.vmlinux, pair.new.vmlinux, pair.old.src, args.mode, match, args.top,
                                  rules=rules))
        return True
    if legacy and not args.kind:   # the same rules as the summary and --format=bom: one total
        args.kind_types = summary.LEGACY_BOM_TABLES[None][0][1]
    args.old, args.new = str(pair.old.vmlinux), str(pair.new.vmlinux)
    args.bom_rules = None        # said for the tree above; the files' own rules are not asked for
    return False


def _name_pair(args, pair, *more: str) -> None:
    """Which two cells were compared (as `asm` says), on stdout before a text table, else on stderr."""
    import sys
    lines = [f"old: {pair.old.cell.key}", f"new: {pair.new.cell.key}", *more]
    for note in pair.notes:
        print(f"flagbench size: {note}", file=sys.stderr)
    if args.format == "text" and not (args.summary or args.objects):
        print("\n".join(lines))
    else:
        print("\n".join(f"flagbench size: {line}" for line in lines), file=sys.stderr)
