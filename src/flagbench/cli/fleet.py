"""The machines a verb's --host and --place name, opened once for the whole command: a labgrid
lease for each place (held until the command ends, hosts/lab_place.py), then one fleet of places
for the engine (pipeline.open_fleet, through hosts/factory.py). series, its mail form and watch share
this; run opens its own through pipeline.run."""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path


@contextmanager
def opened(args, verb: str):
    """The fleet of ARGS.host and ARGS.place (one name or a list each); None when neither is given."""
    hosts = (args.host,) if isinstance(args.host, str) else tuple(args.host or ())
    names = [args.place] if isinstance(args.place, str) else list(args.place or ())
    if not hosts and not names:
        yield None
        return
    from flagbench import pipeline, spec, subject
    from flagbench.textsafe import sayer

    say = sayer(f"flagbench {verb}: ", quiet=args.quiet)
    exp = spec.load(Path(args.experiment))
    leases = nullcontext(())
    if names:
        from flagbench.hosts.lab_place import leased
        from flagbench.run.until import parse_budget
        leases = leased(names, wait_s=parse_budget(args.place_wait), say=say)
    with leases as held:
        places = ()
        if names:
            from flagbench.hosts.lab_place import places_for
            places = tuple(places_for(held, subject.of(exp), say))
        with pipeline.open_fleet(exp, pipeline.Options(hosts=hosts, places=places), say) as fleet:
            yield fleet
