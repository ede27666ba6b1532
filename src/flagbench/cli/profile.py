"""`flagbench profile EXPERIMENT`: where the instructions (exact) and the time (perf samples) of
each micro bench go, per symbol, the baseline variant against each other one.

Exact profiles come from callgrind on x86_64 and from flagbench's qemu plugin on the other
targets (every executed instruction attributed to the ELF symbol containing it), per iteration
(n and 2n differenced), adding up to the instructions per iteration `flagbench run` counts.
Profiles are kept in the results database: a second call prints without measuring (--fresh).
"""
from __future__ import annotations

import sys
from pathlib import Path

from flagbench.export import choices

FORMATS = choices("text", "md", "json", "csv")   # report.profiles's


def register(sub):
    p = sub.add_parser("profile", help="per-symbol profiles (exact counts and perf time) of an experiment's "
                       "micro benches, baseline vs each variant", description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("experiment", help="experiment directory (with experiment.toml) or .toml file")
    p.add_argument("--bench", action="append", metavar="NAME", help="only this benchmark (repeatable)")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"), help="results database (default ./flagbench.db)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--fresh", action="store_true", help="measure again instead of printing stored profiles")
    p.add_argument("--no-perf", action="store_true", help="exact profiles only (no perf record)")
    return p


def run(args) -> int:
    from flagbench import build, procs, spec
    from flagbench.textsafe import sayer
    from flagbench.errors import UserError
    from flagbench.profile_experiment import profile_experiment
    from flagbench.report.profiles import render
    from flagbench.store import Store

    procs.install()
    exp = spec.load(Path(args.experiment))
    from flagbench.pipeline import check_bench_names
    check_bench_names(exp, args.bench)
    chosen = [b for b in exp.benches if not args.bench or b.name in args.bench]
    if not any(b.kind == "micro" for b in chosen):
        raise UserError(f"{exp.path}: no micro bench to profile (profiles are taken of kind micro)")
    say = sayer("flagbench profile: ")
    notes = list(exp.notes)
    with Store(args.db) as store, store.writer(f"flagbench profile {exp.path}"), \
            procs.owned_dir("flagbench-profile") as workdir:
        builds = build.build(exp, jobs=2, notes=notes, skip_missing=True, progress=say)
        profiles, more = profile_experiment(exp, builds, chosen, store=store, workdir=Path(workdir),
                                            fresh=args.fresh, say=say, perf=not args.no_perf)
    baseline = exp.variants[0].name
    print(render(profiles, baseline, args.format, more), end="")
    sys.stdout.flush()
    return 0
