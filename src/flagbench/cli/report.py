"""`flagbench report [RUN]`: the tables of a stored run again, as text, md, json, csv or html.

RUN is a run id (see `flagbench report --list`) or an experiment name (its latest run);
without it, the latest run in the database: only the store is read. Given an experiment as a
path (./DIR, a/b, x.toml: a word alone is a name, even where a directory has it), the whole page
a demo case gets: summary, size and asm of each pair, benchmarks (built and run, resuming what
the database has), as text, md or html.
"""
from __future__ import annotations

import os
from pathlib import Path

from flagbench.export import choices

FORMATS = choices("text", "md", "json", "csv", "html")     # report.FORMATS (not imported here: startup)


def register(sub):
    p = sub.add_parser("report", help="print the tables of a stored run (default: the latest)")
    p.add_argument("run_ref", nargs="?", metavar="RUN",
                   help="run id or experiment name (default: latest run), or an experiment directory: its whole page")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"), help="results database (default ./flagbench.db)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="html: one self-contained page with plots (inline SVG, nothing fetched)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--list", action="store_true", help="list the stored runs instead")
    return p


def _pick_run(runs: list[dict], ref: str | None, db: Path) -> int:
    from flagbench.errors import UserError

    if not runs:
        raise UserError(f"{db}: no runs stored yet")
    if ref is None:
        return runs[-1]["id"]
    if ref.isdigit():
        if any(r["id"] == int(ref) for r in runs):
            return int(ref)
        raise UserError(f"{db}: no run {ref} (runs {runs[0]['id']}..{runs[-1]['id']}; see --list)")
    named = [r["id"] for r in runs if r["experiment"] == ref]
    if not named:
        hint = f"; for the page of the experiment in ./{ref}, write ./{ref}" if os.path.isdir(ref) else ""
        raise UserError(f"{db}: no run {ref!r}: give a run id or an experiment name (see --list){hint}")
    return named[-1]


def _a_path(ref: str) -> bool:
    """REF names an experiment by path, not a stored run by name."""
    return os.sep in ref or ref.endswith(".toml")


def run(args) -> int:
    from flagbench.cli import is_experiment
    from flagbench.report import report_run
    from flagbench.store import Store

    if args.run_ref and _a_path(args.run_ref) and is_experiment(args.run_ref) and not args.list:
        return _write(args, _experiment_page(args))   # told to: builds and runs
    with Store(args.db, create=False) as store:
        runs = store.runs()
        if args.list:
            for r in runs:
                print(f"{r['id']:>4}  {r['started']}  {_kind(r):6}  {r['experiment']}  {r['experiment_hash'][:12]}  "
                      f"{r['n_samples']} samples, {r['n_failed']} failed cells{_over(r)}")
            return 0
        run_id = _pick_run(runs, args.run_ref, args.db)
        text = _commits_report(store, next(r for r in runs if r["id"] == run_id), args.format)
        if text is None:
            text = report_run(store, run_id, args.format)
    return _write(args, text)


def _kind(run: dict) -> str:
    from flagbench.series_store import kind_of
    return kind_of(run) or "run"


def _over(run: dict) -> str:
    """A series' or bisection's range, in the list."""
    from flagbench.textsafe import term_text
    prov = run["provenance"]
    return f", {term_text(str(prov['range']))}" if _kind(run) != "run" and prov.get("range") else ""


def _commits_report(store, run: dict, fmt: str) -> str | None:
    """A series' table or a bisection's steps, read from the store; None for a `flagbench run`."""
    from flagbench.errors import UserError
    from flagbench.series_store import kind_of

    kind = kind_of(run)
    if kind == "series":
        from flagbench.series import load
        from flagbench.series_table import render
        try:
            return render(load(store, run["id"]), fmt)
        except UserError as e:
            raise UserError(f"run {run['id']} is a series: {e}") from None
    if kind == "bisect":
        from flagbench.bisect.stored import report
        return report(store, run["id"], fmt)
    return None


def _experiment_page(args) -> str:
    """The page `flagbench demo` writes for a case, for any experiment."""
    from argparse import Namespace

    from flagbench import export
    from flagbench.cli.demo import gather, plain
    from flagbench.errors import UserError
    from flagbench.report.case import case_blocks
    from flagbench.report.doc import Html, Markdown

    pages = {"text": lambda section, name: plain(section), "md": lambda section, name: Markdown().render(section),
             "html": lambda section, name: Html().render(section, f"flagbench: {name}")}
    if args.format not in pages:    # before the experiment is measured
        *first, last = pages
        raise UserError(f"{args.run_ref}: an experiment's page is {', '.join(first)} or {last}, not {args.format}")
    case, _ = gather(Path(args.run_ref), Namespace(db=args.db, samples=None, fresh=False, full=True,
                                                   until=None, budget=600.0))
    section, _ = case_blocks(case)
    return export.render(args.format, {fmt: (lambda page=page: page(section, case.name)) for fmt, page in pages.items()})


def _write(args, text: str) -> int:
    from flagbench.errors import UserError
    if args.output is None:
        print(text, end="")
        return 0
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UserError(f"{args.output}: cannot write the report: {e.strerror or e}") from None
    return 0
