"""Profiles of an experiment's micro benches: for every build (variant x target x compiler) of
each one, the harness program linked as `flagbench run` links it and profiled (run/profiled.py):
an exact profile, and on x86_64 a perf one where perf works.

Each profile is kept in the results database (Store.put_profile, keyed by the experiment's
hash), so a second `flagbench profile` prints without measuring. The caller holds the store's
writer lock, as every writer of the database does.
"""
from __future__ import annotations

from pathlib import Path

from flagbench.profile import Profile
from flagbench.run.profiled import HOST, exact_profile, perf_profile


def _kept(store, experiment_hash: str, key: dict) -> Profile | None:
    found = store.profiles(experiment_hash, key)
    try:
        return Profile.from_json(found[0]) if found else None
    except ValueError:   # damaged: measured again, and replaced
        return None


def profile_experiment(exp, builds, benches, *, store, workdir: Path, fresh: bool = False, say=print,
                       perf: bool = True) -> tuple[list[Profile], list[str]]:
    """Every micro bench of `benches` on every build: an exact profile, and a perf one on x86_64."""
    from flagbench.run.harness import MICRO_C, Program, link_with_build
    from flagbench.toolchains import get_target

    notes: list[str] = []
    out: list[Profile] = []
    for bench in benches:
        if bench.kind != "micro":
            notes.append(f"bench {bench.name}: profiles are taken of micro benches only (kind {bench.kind})")
            continue
        for b in builds:
            target, compiler, variant = b.cell.target, b.cell.compiler, b.cell.variant.name
            if bench.targets is not None and target not in bench.targets:
                continue
            if not get_target(target).runnable:
                notes.append(f"{target}: objects only, no profile")
                continue
            sources = ["callgrind" if target == HOST else "qemu-plugin"] + (["perf"] if perf and target == HOST
                                                                             else [])
            if perf and target != HOST:
                notes.append(f"{target}: no time profile (its programs run under qemu, whose time is not "
                             f"theirs); the exact profile only")
            key = {"bench": bench.name, "target": target, "compiler": compiler, "variant": variant}
            have = {s: None if fresh else _kept(store, exp.hash, {**key, "source": s}) for s in sources}
            if all(have.values()):
                out += list(have.values())
                continue
            where = workdir / bench.name / variant / target / compiler
            where.mkdir(parents=True, exist_ok=True)
            exe = link_with_build(b, Program(MICRO_C, (f"-DFB_FN={bench.function}",), f"micro-{bench.function}"),
                                  where)
            for source in sources:
                if have[source]:
                    out.append(have[source])
                    continue
                say(f"{source} profile of {bench.name} {variant}/{target}/{compiler}")
                if source == "perf":
                    got = perf_profile(exe, where, bench.timeout)
                    if isinstance(got, str):
                        notes.append(got)
                        continue
                    symbols, total = got
                    p = Profile(bench.name, target, compiler, variant, False, "perf", total, symbols)
                else:
                    symbols, total, source = exact_profile(exe, target, bench.count_iters, where, bench.timeout)
                    p = Profile(bench.name, target, compiler, variant, True, source, total, symbols)
                store.put_profile(exp.hash, p.to_json())
                out.append(p)
    return out, list(dict.fromkeys(notes))
