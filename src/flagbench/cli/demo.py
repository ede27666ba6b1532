"""`flagbench demo`: the bundled case studies end to end.

For each case (cases/<name>/experiment.toml): build every cell, then for each target and
compiler the baseline variant against each other variant: `size` (symbols, sections,
padding) and `asm` (function list, instruction mix, the case's `show` functions side by
side); then `run` its benchmarks into the SQLite store (resuming what an earlier demo
measured). Everything goes into one Markdown report, printed and written to --out.
"""
from __future__ import annotations

import sys
from pathlib import Path


def default_cases_dir() -> Path:
    """cases/ of the checkout this package runs from (an editable install), else ./cases."""
    here = Path(__file__).resolve().parents[3] / "cases"
    return here if here.is_dir() else Path("cases")


def register(sub):
    p = sub.add_parser("demo", help="run the bundled case studies end to end and write their report",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("cases", nargs="*", metavar="CASE", help="case names (default: every case)")
    p.add_argument("--cases-dir", type=Path, default=None, help="where the cases are (default: the bundled ones)")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"), help="results database (default ./flagbench.db)")
    p.add_argument("--out", type=Path, default=Path("out/demo.md"), help="report file (default out/demo.md)")
    p.add_argument("--samples", type=int, default=None,
                   help="timed samples per cell (default: each bench's own, 10 unless its file says)")
    p.add_argument("--fresh", action="store_true", help="measure again instead of resuming earlier demo runs")
    return p


def run(args) -> int:
    from flagbench.errors import UserError

    root = args.cases_dir or default_cases_dir()
    found = sorted(p.parent for p in root.glob("*/experiment.toml"))
    if not found:
        raise UserError(f"{root}: no case studies (*/experiment.toml) here; give --cases-dir")
    unknown = set(args.cases) - {p.name for p in found}
    if unknown:
        raise UserError(f"no case named {', '.join(sorted(unknown))} (cases: {', '.join(p.name for p in found)})")
    chosen = [p for p in found if not args.cases or p.name in args.cases]
    status, parts = 0, ["# flagbench demo", ""]
    for case in chosen:
        text, case_status = demo_case(case, args)
        parts.append(text)
        status = max(status, case_status)
        print(text, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(parts))
    print(f"report written to {args.out}; samples in {args.db} (`flagbench report --list --db {args.db}`)",
          file=sys.stderr)
    return status


def demo_case(case: Path, args) -> tuple[str, int]:
    from flagbench import build, spec
    from flagbench.cli.run import run_experiment

    exp = spec.load(case)
    say = lambda text: print(f"flagbench demo: {exp.name}: {text}", file=sys.stderr, flush=True)  # noqa: E731
    notes = list(exp.notes)
    builds = build.build(exp, jobs=2, notes=notes, skip_missing=True, progress=say)
    out = [f"## {exp.name}", "", exp.description, ""]
    out += [f"- note: {n}" for n in notes] + ([""] if notes else [])
    by_pair: dict[tuple[str, str], list] = {}
    for b in builds:
        by_pair.setdefault((b.cell.target, b.cell.compiler), []).append(b)
    for (target, compiler), cells in by_pair.items():
        base = cells[0]
        for other in cells[1:]:
            title = f"{other.cell.variant.name} vs {base.cell.variant.name} · {target}/{compiler}"
            out += [f"### {title}", ""] + _size_section(base, other) + _asm_section(base, other, exp.show)
    if exp.benches:
        outcome, tables = run_experiment(case, db=args.db, samples=args.samples, fresh=args.fresh, fmt="md")
        out += ["### benchmarks", "", tables]
        return "\n".join(out), outcome.status
    return "\n".join(out), 0


def _size_section(old, new) -> list[str]:
    from flagbench import build, size

    c = size.compare(str(build.archive(old)), str(build.archive(new)))
    return [size.render(c, "md", 10), ""]


def _asm_section(old, new, show: tuple[str, ...]) -> list[str]:
    """Per object: the changed functions, the mix, and the case's chosen functions side by side."""
    from flagbench.asm import render
    from flagbench.asm.compare import compare

    out = []
    for a, b in zip(old.objects, new.objects):
        c = compare(a, b)
        names = {d.name for d in c.functions}
        chosen = [f for f in show if f in names]
        if chosen or c.counts()["changed"] or c.counts()["added"] or c.counts()["removed"]:
            out += [render.to_markdown(c, chosen, 20), ""]
    return out or ["asm: every function is the same", ""]
