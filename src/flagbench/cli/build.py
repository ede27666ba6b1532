"""`flagbench build EXPERIMENT`: compile every variant x target x compiler cell to objects.

Each cell gets its own directory; objects are cached by the content of sources,
flags and tool versions, so building an unchanged experiment again runs no
compiler. Progress goes to stderr, the list of cells to stdout. With distcc hosts ([build]
distcc, or FLAGBENCH_DISTCC_HOSTS) compiles are sent to those that compile as this machine
does, and each cell says how many went where.
"""
from __future__ import annotations

from flagbench.export import choices, described

FORMATS = choices("text", "json")


def register(sub):
    p = sub.add_parser("build", help="compile an experiment's variants for its targets and compilers",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("experiment", help="experiment directory (with experiment.toml) or .toml file")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiler jobs (default 2)")
    p.add_argument("--format", choices=FORMATS, default="text", help=f"{described(FORMATS)} (default text)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr, one line per cell")
    p.add_argument("--host", metavar="DEST", help="the ssh host whose kernel config `config = \"host\"` takes")
    return p


def run(args) -> int:
    import sys

    from flagbench import build, export, pipeline, procs, spec, subject as subjects
    from flagbench.errors import UserError
    from flagbench.textsafe import sayer

    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    procs.install()
    exp = subjects.of(spec.load(args.experiment)).with_host_config(args.host)   # `config = "host"`
    subject = subjects.of(exp)
    notes = list(exp.notes)

    say = sayer("flagbench build: ", quiet=args.quiet)

    kernels = subject.kernels(jobs=args.jobs, progress=not args.quiet)   # vmlinux, image, .config, ...
    builds = build.build(exp, jobs=args.jobs, progress=say, notes=notes) if exp.sources else []
    if subject.kind == "c":   # objects without the benches' functions are wrong (a kernel's benches boot)
        pipeline.check_symbols(exp, exp.benches, builds)
    sys.stdout.write(export.render(args.format, {
        "text": lambda: _text(kernels, builds, notes, args.quiet),
        "json": lambda: _json(exp, notes, kernels, builds)}))
    return 0 if all(k.ok for k in kernels) else 1


def _json(exp, notes: list, kernels, builds) -> str:
    import json

    from flagbench.kbuild.build import as_json
    cells = [as_json(k) for k in kernels] + [_c_cell(b, kind=bool(kernels)) for b in builds]
    return json.dumps({"experiment": exp.name, "path": str(exp.path), "hash": exp.hash, "notes": notes,
                       "cells": cells}, indent=2) + "\n"


def _text(kernels, builds, notes: list, quiet: bool) -> str:
    """The cells, a block each (with -q a line each), then the notes."""
    from flagbench.textsafe import term_text
    out = _kernel_lines(kernels, quiet)
    width = max(len(b.cell.key) for b in builds) if builds else 0
    for b in builds:
        state = "cached" if b.cached else "built"
        out.append(f"{b.cell.key:<{width}}  {state:<6}  {b.dir}" + ("  (C sources)" if kernels else ""))
        if quiet:   # one line per cell: what was built and where
            continue
        out.append(f"{'':<{width}}  objects {' '.join(o.name for o in b.objects)}")
        out.append(f"{'':<{width}}  cflags  {' '.join(b.cflags)}")
        out.extend(f"{'':<{width}}  tool    {tool}: {version}" for tool, version in b.tools.items())
        out.extend(f"{'':<{width}}  {usage.line()}" for usage in (b.ccache, b.distcc) if usage)
    out.extend(f"note: {term_text(note)}" for note in notes if not quiet)
    return "".join(f"{line}\n" for line in out)


def _c_cell(b, kind: bool) -> dict:
    """A C cell in `--format json`; beside kernel cells it says it is one (kind "c")."""
    return {"cell": b.cell.key, **({"kind": "c"} if kind else {}), "variant": b.cell.variant.name,
            "target": b.cell.target, "compiler": b.cell.compiler, "dir": str(b.dir),
            "objects": [str(o) for o in b.objects], "cflags": list(b.cflags), "tools": b.tools, "cached": b.cached,
            "ccache": b.ccache.as_dict() if b.ccache else None, "distcc": b.distcc.as_dict() if b.distcc else None}


def _kernel_lines(kernels, quiet: bool = False) -> list[str]:
    """Kernel cells and their artifacts, one block each (a failed one shows its error lines)."""
    from flagbench.textsafe import term_text
    width, out = max((len(k.cell.key) for k in kernels), default=0), []
    for k in kernels:
        if not k.ok or k.cached:
            state = "FAILED" if not k.ok else "cached"
        else:
            seeded = f", from {k.seeded_from.parent.name}/{k.seeded_from.name}" if k.seeded_from else ""
            state = f"built in {k.seconds:.0f} s ({k.compiled} compiled{seeded})"
        out.append(f"{k.cell.key:<{width}}  {state}  {k.dir}")
        if quiet and k.ok:
            continue
        if k.ok:
            out.append(f"{'':<{width}}  vmlinux {k.vmlinux}" + (f"  image {k.image}" if k.image else ""))
            if k.modules:
                out.append(f"{'':<{width}}  modules {len(k.modules)}")
        else:
            for line in (k.error or "").splitlines():   # the compiler's lines: text, not escapes
                out.append(f"{'':<{width}}  {term_text(line)}")
        out.append(f"{'':<{width}}  tree {term_text(k.tree)}")   # a commit's subject is in it
        if k.ccache:
            out.append(f"{'':<{width}}  {k.ccache.line()}")
        if k.distcc:
            out.append(f"{'':<{width}}  {k.distcc.line()}")
        for tool, version in k.tools.items():
            out.append(f"{'':<{width}}  tool    {tool}: {version}")
    return out
