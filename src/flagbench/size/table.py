"""bloat-o-meter's calc() over two sides' summed names."""
from __future__ import annotations

from itertools import compress, repeat
from operator import is_, neg, not_

from flagbench.size.rules import BomTable


def bom_table(label: str, old: dict, new: dict) -> BomTable:
    """OLD and NEW are one table of `symbols.read_side` each (names, each once, and their sizes;
    with letters and footprints in both, the rows carry them too).

    bloat-o-meter's order: (delta, name) descending; names whose size did not change are left
    out. One lookup per name (an LLVM archive pair has a quarter of a million); every column is
    a map over positions; then two sorts by one key each: by name, then stably by delta."""
    o_names, o_sizes, n_names, n_sizes = old["names"], old["sizes"], new["names"], new["sizes"]
    position = dict(zip(n_names, range(len(n_names))))
    j = list(map(position.get, o_names))                # each old name's position in NEW, or None
    gone = list(map(is_, j, repeat(None)))
    kept = list(map(not_, gone))
    i_kept, j_kept = list(compress(range(len(j)), kept)), list(compress(j, kept))
    d_kept = [n_sizes[b] - o_sizes[a] for a, b in zip(i_kept, j_kept)]
    changed = list(map(bool, d_kept))
    i_gone = list(compress(range(len(j)), gone))
    j_added = sorted(set(range(len(n_names))).difference(j_kept))
    grow = [d for d in d_kept if d > 0]
    shrink = [d for d in d_kept if d < 0]

    # rows: changed names, removed names, added names, as (old position, new position); -1: none
    old_pos = list(compress(i_kept, changed)) + i_gone + [-1] * len(j_added)
    new_pos = list(compress(j_kept, changed)) + [-1] * len(i_gone) + j_added
    deltas = (list(compress(d_kept, changed)) + list(map(neg, map(o_sizes.__getitem__, i_gone)))
              + list(map(n_sizes.__getitem__, j_added)))
    names = (list(map(o_names.__getitem__, old_pos[:len(old_pos) - len(j_added)]))
             + list(map(n_names.__getitem__, j_added)))
    order = sorted(range(len(names)), key=names.__getitem__, reverse=True)
    order.sort(key=deltas.__getitem__, reverse=True)   # stable: equal deltas stay by name, descending
    old_pos, new_pos = [old_pos[k] for k in order], [new_pos[k] for k in order]
    table = BomTable(label, len(j_added), len(i_gone), len(grow), len(shrink),
                     sum(grow) + sum(map(n_sizes.__getitem__, j_added)),
                     sum(map(o_sizes.__getitem__, i_gone)) - sum(shrink), sum(o_sizes), sum(n_sizes),
                     [deltas[k] for k in order], [names[k] for k in order],
                     _at(o_sizes, old_pos, "-"), _at(n_sizes, new_pos, "-"))
    if "letters" in old and "letters" in new:
        table.letters = [b or a for a, b in zip(_at(old["letters"], old_pos), _at(new["letters"], new_pos))]
        table.footprint_old = _at(old["footprints"], old_pos)
        table.footprint_new = _at(new["footprints"], new_pos)
    return table


def _at(values, positions: list[int], missing=None) -> list:
    """values[p] for each position, MISSING where it is -1."""
    return [values[p] if p >= 0 else missing for p in positions]
