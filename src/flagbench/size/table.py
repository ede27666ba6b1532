"""bloat-o-meter's calc() over two sides' summed names: one lookup pass, the rest in numpy."""
from __future__ import annotations

from itertools import repeat

import numpy as np

from flagbench.size.rules import BomTable
from flagbench.size.symbols import pick


def bom_table(label: str, old: dict, new: dict) -> BomTable:
    """OLD and NEW are one table of `symbols.read_side` each (NEW best with its index). With letters
    and footprints in both, the rows carry them too."""
    old_names, new_names = old["names"], new["names"]
    o = np.array(old["sizes"], np.int64) if old["sizes"] else np.zeros(0, np.int64)
    n = np.array(new["sizes"], np.int64) if new["sizes"] else np.zeros(0, np.int64)
    first_of, position = new.get("index") or (dict(zip(new_names, range(len(new_names)))),
                                              np.append(np.arange(len(new_names)), -1))
    j = position[np.fromiter(map(first_of.get, old_names, repeat(-1)), np.int64, len(old_names))]
    matched = j >= 0
    n_of_old = np.where(matched, n[np.maximum(j, 0)] if len(n) else 0, 0)
    d = n_of_old - o
    seen = np.zeros(len(n), bool)
    seen[j[matched]] = True
    grow_m, shrink_m = matched & (d > 0), matched & (d < 0)
    added = np.flatnonzero(~seen)
    removed = ~matched
    up = int(d[grow_m].sum()) + int(n[added].sum())
    down = int(-d[shrink_m].sum()) + int(o[removed].sum())
    changed = np.flatnonzero(removed | grow_m | shrink_m)
    deltas = np.concatenate((np.where(matched[changed], d[changed], -o[changed]), n[added]))
    names = pick(old_names, changed) + pick(new_names, added)
    # bloat-o-meter's order, (delta, name) descending, zero deltas (added or removed empty
    # symbols) dropped: names sorted once (CPython's fast str compare), then a stable numpy sort.
    nz = np.flatnonzero(deltas != 0)
    nz_names = pick(names, nz)
    by_name = np.array(sorted(range(len(nz)), key=nz_names.__getitem__)[::-1], np.int64)
    order = nz[by_name[np.argsort(-deltas[nz][by_name], kind="stable")]]
    in_old = np.concatenate((changed, np.full(len(added), -1, np.int64)))[order]
    in_new = np.concatenate((np.where(matched[changed], j[changed], -1), added))[order]
    table = BomTable(label, len(added), int(removed.sum()), int(grow_m.sum()), int(shrink_m.sum()), up, down,
                     int(o.sum()), int(n.sum()), deltas[order].tolist(), pick(names, order),
                     _side(old["sizes"], in_old), _side(new["sizes"], in_new))
    if "letters" in old and "letters" in new:
        table.letters = [b if b is not None else a for a, b in zip(_side(old["letters"], in_old, None),
                                                                   _side(new["letters"], in_new, None))]
        table.footprint_old = _side(old["footprints"], in_old, None)
        table.footprint_new = _side(new["footprints"], in_new, None)
    return table


def _side(values, rows, missing="-") -> list:
    """values[r] for each row index, MISSING where r is -1."""
    return [values[r] if r >= 0 else missing for r in rows.tolist()]
