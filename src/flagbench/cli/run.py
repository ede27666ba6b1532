"""`flagbench run EXPERIMENT`: build the variants, run the benchmarks, store every sample, print the tables.

A second run of an unchanged experiment resumes its latest run in the database: finished
cells are not measured again (`--fresh` starts over). Exit 0 when every cell ran, 1 when
some failed (the tables say which and why), 2 for bad input, 130 on Ctrl-C.
"""
from __future__ import annotations

import sys
from pathlib import Path

FORMATS = ("text", "md", "json", "csv")


def register(sub):
    p = sub.add_parser("run", help="build an experiment's variants and run its benchmarks",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("experiment", help="experiment directory (with experiment.toml) or .toml file")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"), help="results database (default ./flagbench.db)")
    p.add_argument("--bench", action="append", metavar="NAME", help="only this benchmark (repeatable)")
    p.add_argument("--samples", type=int, metavar="N", help="timed samples per cell (overrides the file)")
    p.add_argument("--fresh", action="store_true", help="start a new run instead of resuming the latest")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiler jobs (default 2)")
    p.add_argument("--seed", type=int, help="seed of the randomised sample order")
    p.add_argument("--format", choices=FORMATS, default="text")
    return p


def run(args) -> int:
    from flagbench.errors import UserError

    if args.samples is not None and args.samples < 1:
        raise UserError("--samples must be at least 1")
    outcome, text = run_experiment(Path(args.experiment), db=args.db, benches=args.bench, samples=args.samples,
                                   fresh=args.fresh, jobs=args.jobs, seed=args.seed, fmt=args.format)
    print(text, end="")
    return outcome.status


def run_experiment(path: Path, *, db: Path, benches=None, samples=None, fresh=False, jobs=2, seed=None,
                   fmt="text", quiet=False):
    """Build, measure and report one experiment; returns (RunOutcome, report text)."""
    import tempfile

    from flagbench import build, spec
    from flagbench.errors import UserError
    from flagbench.report import report_run
    from flagbench.run.benches import cells_for_bench, column_order
    from flagbench.run.engine import run_cells
    from flagbench.store import Store

    exp = spec.load(path)
    chosen = [b for b in exp.benches if not benches or b["name"] in benches]
    unknown = set(benches or ()) - {b["name"] for b in exp.benches}
    if unknown:
        raise UserError(f"{exp.path}: no bench named {', '.join(sorted(unknown))} "
                        f"(benches: {', '.join(b['name'] for b in exp.benches) or 'none'})")
    if not chosen:
        raise UserError(f"{exp.path}: no [[bench]] to run")
    notes = list(exp.notes)
    say = (lambda text: None) if quiet else (lambda text: print(f"flagbench run: {text}", file=sys.stderr))
    builds = build.build(exp, jobs=jobs, progress=None if quiet else say)
    with tempfile.TemporaryDirectory(prefix="flagbench-run-") as workdir, Store(db) as store:
        cells = []
        for bench in chosen:
            if samples is not None:
                bench = {**bench, "samples": samples}
            cells += cells_for_bench(bench, builds, root=exp.root, workdir=Path(workdir), notes=notes)
        for note in notes:
            say(note)
        order = column_order(exp.benches, [v.name for v in exp.variants])
        outcome = run_cells(store, cells, experiment=exp.name, experiment_hash=exp.hash,
                            provenance={"variants": order, "experiment_path": str(exp.path), "notes": notes},
                            fresh=fresh, seed=seed, progress=not quiet)
        if outcome.skipped:
            say(f"resumed run {outcome.run_id}: {outcome.skipped} cells were already finished (--fresh to redo)")
        return outcome, report_run(store, outcome.run_id, fmt)
