"""`flagbench build EXPERIMENT`: compile every variant x target x compiler cell to objects.

Each cell gets its own directory; objects are cached by the content of sources,
flags and tool versions, so building an unchanged experiment again runs no
compiler. Progress goes to stderr, the list of cells to stdout.
"""
from __future__ import annotations

import sys


def register(sub):
    p = sub.add_parser("build", help="compile an experiment's variants for its targets and compilers",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("experiment", help="experiment directory (with experiment.toml) or .toml file")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiler jobs (default 2)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def run(args) -> int:
    import json

    from flagbench import build, pipeline, procs, spec
    from flagbench.errors import UserError

    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    procs.install()
    exp = spec.load(args.experiment)
    notes = list(exp.notes)

    def say(text: str) -> None:
        if not args.quiet:
            print(f"flagbench build: {text}", file=sys.stderr)

    if exp.kernel is not None:   # kernel cells (kernel/kbuild.py): vmlinux, image, .config, ...
        from flagbench.kernel import kbuild
        kernels = kbuild.build_kernels(exp, jobs=args.jobs, progress=not args.quiet)
        c_builds = build.build(exp, jobs=args.jobs, progress=say, notes=notes) if exp.sources else []
        return kbuild.print_builds(exp, kernels, c_builds, notes, args.format)
    builds = build.build(exp, jobs=args.jobs, progress=say, notes=notes)
    pipeline.check_symbols(exp, exp.benches, builds)   # objects without the benches' functions are wrong
    if args.format == "json":
        print(json.dumps({
            "experiment": exp.name, "path": str(exp.path), "hash": exp.hash, "notes": notes,
            "cells": [{"cell": b.cell.key, "variant": b.cell.variant.name, "target": b.cell.target,
                       "compiler": b.cell.compiler, "dir": str(b.dir), "objects": [str(o) for o in b.objects],
                       "cflags": list(b.cflags), "tools": b.tools, "cached": b.cached} for b in builds],
        }, indent=2))
        return 0
    width = max(len(b.cell.key) for b in builds) if builds else 0
    for b in builds:
        state = "cached" if b.cached else "built"
        print(f"{b.cell.key:<{width}}  {state:<6}  {b.dir}")
        print(f"{'':<{width}}  objects {' '.join(o.name for o in b.objects)}")
        print(f"{'':<{width}}  cflags  {' '.join(b.cflags)}")
        for tool, version in b.tools.items():
            print(f"{'':<{width}}  {tool}: {version}")
    for note in notes:
        print(f"note: {note}")
    return 0
