"""`flagbench model EXPERIMENT`: an estimated cycles per iteration for A and B on cores nobody
here has, from each executed block's count (qemu plugin) and its cycles (llvm-mca-19), as a band
over an in-order and an out-of-order core model per target, beside the exact counts.

A micro bench compares its baseline variant (A) with every other variant (B); a memcpy bench
its first implementation (A) with the second, or those given with --function, at every size
and alignment. Everything modelled is labelled "model"; what the model leaves out is named.
--measure (x86_64) times A and B here as well, for the validation table. See docs/model.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

from flagbench.export import choices

FORMATS = choices("text", "md", "json")   # model.render's


def register(sub):
    p = sub.add_parser("model", help="a modelled cycle band (llvm-mca x qemu block counts) for A and B",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("experiment", help="experiment directory (with experiment.toml) or .toml file")
    p.add_argument("--bench", action="append", metavar="NAME", help="only this benchmark (repeatable)")
    p.add_argument("--target", action="append", metavar="NAME", help="only this target (repeatable)")
    p.add_argument("--function", action="append", metavar="NAME",
                   help="memcpy benches: compare this implementation with the first (repeatable)")
    p.add_argument("--size", action="append", type=int, metavar="BYTES", help="memcpy benches: only this size")
    p.add_argument("--core", action="append", metavar="MCPU",
                   help="price on this llvm-mca core instead of the target's default pair (repeatable)")
    p.add_argument("--no-cache", action="store_true", help="skip the cache simulation (faster)")
    p.add_argument("--measure", action="store_true",
                   help="x86_64: also time A and B natively here (the validation table)")
    p.add_argument("--format", choices=FORMATS, default="text")
    return p


def run(args) -> int:
    from flagbench import build, procs, spec
    from flagbench.errors import UserError
    from flagbench.model.cores import known_cores
    from flagbench.model.experiment import Options, model_experiment
    from flagbench.model.render import render
    from flagbench.textsafe import sayer

    procs.install()
    exp = spec.load(Path(args.experiment))
    from flagbench.pipeline import check_bench_names
    check_bench_names(exp, args.bench)
    known = {c for cores in known_cores().values() for c in cores}
    bad = [c for c in args.core or () if c not in known]
    if bad:
        raise UserError(f"--core {', '.join(bad)}: not one of {', '.join(sorted(known))}")
    bad = [t for t in args.target or () if t not in exp.targets]
    if bad:
        raise UserError(f"--target {', '.join(bad)}: the experiment builds {', '.join(exp.targets)}")
    if args.target:   # only the targets asked for are built
        import dataclasses
        exp = dataclasses.replace(exp, targets=tuple(t for t in exp.targets if t in args.target))
    say = sayer("flagbench model: ")
    notes = list(exp.notes)
    opts = Options(benches=tuple(args.bench or ()), functions=tuple(args.function or ()),
                   cores=tuple(args.core or ()), sizes=tuple(args.size or ()), cache=not args.no_cache,
                   measure=args.measure)
    with procs.owned_dir("flagbench-model") as workdir:
        builds = build.build(exp, jobs=2, notes=notes, skip_missing=True, progress=say)
        comparisons, more = model_experiment(exp, builds, opts, Path(workdir), say)
    print(render(comparisons, notes + more, args.format), end="")
    sys.stdout.flush()
    return 0
