"""Timed benches of a commit against the commit before it, on one place: the engine's
interleaved, randomised samples of the two builds (paired rounds), stored as a run.

Only commits whose exact layers moved what a bench executes are timed (loop.py decides);
C experiments' host benches only (a kernel's guest benches are timed by `flagbench run`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flagbench import procs


def timed_benches(exp) -> list:
    return [replace(b, metrics=("time",)) for b in exp.benches
            if "time" in b.metrics and not b.guest and exp.kernel is None]


def time_pair(subject, dexp, old_row, new_row, store, *, fleet=None, key: str, samples: int | None,
              notes: list[str]) -> dict[str, dict]:
    """{metric label: {"base": [...], "head": [...], "unit": U}} of the timed benches."""
    from flagbench.pipeline import host_cells
    from flagbench.run.engine import run_cells

    benches = [b if samples is None else replace(b, samples=samples) for b in timed_benches(dexp)]
    if not benches or not (old_row.built and new_row.built):
        return {}
    with procs.owned_dir("flagbench-watch") as workdir:
        cells = host_cells(dexp, benches, [old_row.build, new_row.build], Path(workdir), notes, fleet)
        if not cells:
            return {}
        outcome = run_cells(store, cells, experiment=dexp.name,
                            experiment_hash=f"watch-timed {key} {old_row.commit.sha} {new_row.commit.sha}",
                            provenance={"variants": [old_row.commit.short, new_row.commit.short],
                                        "notes": notes, "commits": {r.commit.short: r.commit.as_dict()
                                                                    for r in (old_row, new_row)}},
                            progress=False)
    out: dict[str, dict] = {}
    for s in store.samples(outcome.run_id):
        if (s["provenance"] or {}).get("job") not in (None, "sample"):
            continue
        side = {old_row.commit.short: "base", new_row.commit.short: "head"}.get(s["variant"])
        if side is None or s["unit"] in ("insns",):
            continue
        label = f"{s['bench']} {s['metric']}"
        entry = out.setdefault(label, {"base": [], "head": [], "unit": s["unit"], "run": outcome.run_id})
        entry[side].append(s["value"])
    return out
