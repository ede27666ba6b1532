"""`flagbench run EXPERIMENT`: build the variants, run the benchmarks, store every sample, print the tables.

A second run of an unchanged experiment resumes its latest run in the database: finished
cells are not measured again (`--fresh` starts over). Exit 0 when every cell ran, 1 when
some failed (the tables say which and why), 2 for bad input, 128 + the signal on SIGINT,
SIGTERM or SIGHUP (every program it started is killed, every sample taken is kept).
With --host DEST (repeatable) the timed benches run on those machines over ssh, exact counts
here; a host that cannot be reached is bad input, before anything builds.

The work is done by flagbench.pipeline; this module only parses and prints.
"""
from __future__ import annotations

import sys
from pathlib import Path

from flagbench.export import choices

FORMATS = choices("text", "md", "json", "csv")   # report's, but html: `report RUN --format html`


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
    p.add_argument("--host", action="append", metavar="DEST", default=[],
                   help="time the benches on this machine over ssh (an ssh alias, user@host, ssh://user@host:port; "
                        "repeatable: a fleet shares the cells; FLAGBENCH_SSH replaces the ssh command)")
    p.add_argument("--place", action="append", metavar="NAME", default=[],
                   help="time the benches on this place of the labgrid lab at LG_COORDINATOR (NAME, or TAG=VALUE "
                        "for any place so tagged; repeatable): reserved, waited for, acquired, powered on, reached "
                        "over ssh through its NetworkService, released at the end")
    p.add_argument("--place-wait", default="10m", metavar="TIME",
                   help="with --place: how long to wait for a place someone else holds (default 10m; 0: not at all)")
    p.add_argument("--replicate", action="store_true", help="with several --host: every host times every cell")
    p.add_argument("--cpu", type=int, metavar="N", help="pin the timed programs to CPU N (taskset on a host)")
    p.add_argument("--aa-control", action="store_true",
                   help="measure each bench's baseline twice (A/A): only changes beyond its reach are called")
    p.add_argument("--until", metavar="PCT",
                   help="after the samples, keep sampling the rows whose 95 %% interval is wider than +-PCT "
                        "(e.g. 2%%), round after round, until it is not or the --budget is spent; a run resumed "
                        "with --until sharpens its rows")
    p.add_argument("--budget", default="10m", metavar="TIME",
                   help="with --until: the measuring time allowed, the first samples included (300, 90s, 10m, 1h; "
                        "default 10m)")
    p.add_argument("--layout-check", action="store_true",
                   help="build every variant again with each function aligned to 64 bytes and measure it the same "
                        "way: the verdicts say whether the effect survives alignment (a layout effect does not; "
                        "the same as layout_check = true in the experiment file)")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--rounds", type=int, default=2, metavar="N",
                   help="kernel experiments with --host: boot every variant there by kexec N times, A B B A ... "
                        "(default 2); the guest benches run there, the host's kernel is restored at the end")
    return p


def run(args) -> int:
    from flagbench import procs

    procs.install()
    from flagbench import spec, subject
    exp = spec.load(Path(args.experiment))
    places = args.place or list(exp.places)
    if places:   # the lab's places are held around the whole run (hosts/lab_place.py)
        from flagbench.hosts.lab_place import leased, parse_wait, places_for
        from flagbench.textsafe import sayer
        say = sayer("flagbench run: ")
        try:
            with leased(places, wait_s=parse_wait(args.place_wait), say=say) as leases:
                return _run(args, places_for(leases, subject.of(exp), say))
        except procs.Terminated as e:
            print(f"flagbench run: {e}: stopped", file=sys.stderr)
            return e.exit_status
    return _run(args)


def _run(args, places=()) -> int:
    from flagbench import pipeline, procs
    from flagbench.run.until import parse_budget, parse_width

    opts = pipeline.Options(places=tuple(places), db=args.db, benches=args.bench, samples=args.samples, fresh=args.fresh,
                            jobs=args.jobs, seed=args.seed, fmt=args.format, hosts=tuple(args.host),
                            replicate=args.replicate, cpu=args.cpu, aa_control=args.aa_control,
                            rounds=args.rounds, until=None if args.until is None else parse_width(args.until),
                            budget_s=parse_budget(args.budget), layout_check=args.layout_check)
    try:
        outcome, text = pipeline.run(Path(args.experiment), opts)
    except procs.Terminated as e:    # a signal before measuring started: nothing was stored
        print(f"flagbench run: {e}: stopped", file=sys.stderr)
        return e.exit_status
    print(text, end="")
    return outcome.status
