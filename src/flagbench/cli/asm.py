"""`flagbench asm OLD NEW [FUNCTION...]` or `flagbench asm EXPERIMENT [FUNCTION...]`: which
functions changed between two builds, how (side by side) and what that does to the
instruction mix."""
from __future__ import annotations

import sys

from flagbench.export import choices

FORMATS = choices("text", "md", "json")   # asm.render's


def register(sub):
    p = sub.add_parser("asm", help="per-function disassembly diff and instruction mix of two builds",
                       usage="flagbench asm [options] (OLD NEW | EXPERIMENT) [FUNCTION ...]",
                       description="Compare two objects or executables, or two variant builds of an "
                       "experiment, function by function. The disassembly is normalised so that layout "
                       "alone (addresses, alignment padding, relocation offsets) makes no difference. "
                       "Name functions to see them side by side.")
    p.add_argument("inputs", nargs="+", metavar="OLD NEW | EXPERIMENT",
                   help="two ELF files (baseline first), or an experiment directory or .toml file "
                   "followed by the functions to show side by side")
    p.add_argument("--variants", metavar="A,B", help="experiment: the two variants (default: the first two)")
    p.add_argument("--target", help="experiment: the target (default: its first)")
    p.add_argument("--compiler", help="experiment: the compiler (default: the target's first)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--limit", type=int, default=50, help="changed/added/removed functions listed (text, md)")
    p.add_argument("--changed-only", action="store_true",
                   help="json: leave out functions that are the same (they are still counted)")
    p.__class__ = _intermixed(type(p))
    return p


def _intermixed(parser_class):
    """The parser class, taking positionals after options too (`asm EXP --target hppa f`):
    argparse's own parse_known_args stops at the first option after the positionals."""

    class Intermixed(parser_class):
        _inside = False

        def parse_known_args(self, args=None, namespace=None):
            if self._inside:   # parse_known_intermixed_args calls back here
                return super().parse_known_args(args, namespace)
            self._inside = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._inside = False

    return Intermixed


def run(args) -> int:
    from flagbench.asm.disasm import gc_paused

    # the comparison and its mixes, too, make objects by the million; the command ends after
    with gc_paused(freeze=True):
        return _run(args)


def _run(args) -> int:
    from flagbench.asm import render
    from flagbench.errors import UserError
    from flagbench.cli import is_experiment

    if args.limit < 0:
        raise UserError(f"--limit {args.limit}: give 0 or more functions to list")
    if is_experiment(args.inputs[0]):
        c, functions, notes = _experiment(args)
    else:
        from flagbench.asm.compare import compare_files as compare

        used = [f"--{k}" for k in ("variants", "target", "compiler") if getattr(args, k) is not None]
        if used:
            raise UserError(f"{', '.join(used)} go with an experiment, not with two ELF files")
        if len(args.inputs) < 2:
            raise UserError(f"{args.inputs[0]}: give two ELF files (OLD NEW) or an experiment directory")
        functions, notes = args.inputs[2:], []
        c = compare(args.inputs[0], args.inputs[1], mix_each=_mix_each(args))
    for name in functions:
        c.get(name)   # every named function must exist before anything is printed
    if c.warning and args.format != "text":   # text prints it with the comparison
        notes.append(f"warning: {c.warning}")
    for note in notes:
        print(f"flagbench asm: {note}", file=sys.stderr)
    from flagbench import export
    out = export.render(args.format, {
        "json": lambda: render.to_json(c, functions, everything=not args.changed_only) + "\n",
        "md": lambda: render.to_markdown(c, functions, args.limit),
        "text": lambda: render.print_text(c, functions, args.limit)})   # printed there: coloured on a terminal
    sys.stdout.write(out or "")
    return 0


def _mix_each(args) -> bool:
    """Whether every function's own mix is shown (json); text and markdown show the totals and
    the few functions listed, whose mixes `render.Mixes` makes when asked."""
    return args.format == "json"


def _experiment(args):
    """The comparison of an experiment's two variant builds (all their objects as one set, or
    the two vmlinux function by function), the functions to show and the notes."""
    from flagbench.asm.compare import compare, compare_object_sets
    from flagbench.subject import pair

    p = pair(args.inputs[0], args.variants, args.target, args.compiler)
    labels = {"old_label": p.old.cell.key, "new_label": p.new.cell.key}
    if p.kernel:
        c = compare(p.old.vmlinux, p.new.vmlinux, mix_each=_mix_each(args))
        c.old.label, c.new.label = labels["old_label"], labels["new_label"]
    else:
        c = compare_object_sets(p.files(p.old), p.files(p.new), **labels)
    return c, args.inputs[1:], p.notes
