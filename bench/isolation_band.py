#!/usr/bin/env python3
"""Does selective isolation shrink the layout band? From a stored run of cases/alignment.

Each relinked variant's band is the spread of its relinks' medians over its own unshifted median
(stats/layout.py). For the baseline (as built) and each other relinked variant (`isolated`: one
function of dispatch.c aligned to 4096) this prints, per bench and row: the band min..max, the
spread of the log ratios (standard deviation, the unshifted build's 1 included), the ratio of the
two spreads with a 95 % percentile bootstrap interval (the relinks resampled with replacement),
and the Fligner-Killeen verdict the report prints. A ratio interval wholly below 1 says the band
shrank; one that holds 1 says this run cannot tell.

    flagbench run cases/alignment --db DB [--layout-check]
    .venv/bin/python bench/isolation_band.py --db DB [--run N]
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
from pathlib import Path

BOOTSTRAP = 4000


def spread(ratios) -> float:
    return statistics.pstdev([math.log(r) for r in (1.0, *ratios)])


def ratio_interval(before, after, seed: int = 1) -> tuple[float, float, float]:
    """spread(after) / spread(before), and its 95 % percentile bootstrap interval."""
    rng = random.Random(seed)
    draws = []
    for _ in range(BOOTSTRAP):
        a = [rng.choice(before) for _ in before]
        b = [rng.choice(after) for _ in after]
        if spread(a) > 0:
            draws.append(spread(b) / spread(a))
    draws.sort()
    return spread(after) / spread(before), draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--run", type=int, help="the run (default: the last)")
    args = ap.parse_args()
    from flagbench import stats
    from flagbench.report import run_tables
    from flagbench.store import Store
    with Store(args.db, create=False) as store:
        run_id = args.run or max(r["id"] for r in store.runs())
        tables = run_tables(store, run_id)
    for t in tables:
        if t.exact or not t.layouts:
            continue
        base = t.variants[0]
        for r in t.rows:
            before = r.bands.get(base)
            for v, after in r.bands.items():
                if v == base or before is None:
                    continue
                est, lo, hi = ratio_interval(before.ratios, after.ratios)
                verdict, p = stats.band_shrink(before, after)
                print(f"{t.bench}: {base} {before.as_percent()} ({(before.high - before.low) * 100:.1f} pt, "
                      f"sd {spread(before.ratios) * 100:.1f} %) -> {v} {after.as_percent()} "
                      f"({(after.high - after.low) * 100:.1f} pt, sd {spread(after.ratios) * 100:.1f} %)")
                print(f"  spread {v}/{base}: {est:.2f} [{lo:.2f}, {hi:.2f}] (95 % bootstrap); "
                      f"Fligner-Killeen: {verdict}" + ("" if p is None else f", p={p:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
