"""bloat-o-meter's calc() over two sides' summed names."""
from __future__ import annotations

from itertools import compress, repeat
from operator import neg, sub

from flagbench.size.rules import BomTable


def bom_table(label: str, old: dict, new: dict) -> BomTable:
    """OLD and NEW are one table of `symbols.read_side` each ({"sizes": {name: size}, ...}). With
    letters and footprints in both, the rows carry them too.

    bloat-o-meter's order: (delta, name) descending; names whose size did not change (and added
    or removed empty symbols) are left out. Set operations on the dicts' keys and maps over
    them, then two sorts by one key each (name, then a stable sort by delta): an LLVM archive
    pair has a quarter of a million rows."""
    o, n = old["sizes"], new["sizes"]
    common = list(o.keys() & n.keys())
    d_common = list(map(sub, map(n.__getitem__, common), map(o.__getitem__, common)))
    removed, added = list(o.keys() - n.keys()), list(n.keys() - o.keys())
    removed_sizes, added_sizes = list(map(o.__getitem__, removed)), list(map(n.__getitem__, added))
    grow = [d for d in d_common if d > 0]
    shrink = [d for d in d_common if d < 0]
    names = list(compress(common, d_common)) + list(compress(removed, removed_sizes)) + \
        list(compress(added, added_sizes))
    deltas = list(compress(d_common, d_common)) + list(map(neg, compress(removed_sizes, removed_sizes))) + \
        list(compress(added_sizes, added_sizes))
    order = sorted(range(len(names)), key=names.__getitem__, reverse=True)
    order.sort(key=deltas.__getitem__, reverse=True)   # stable: equal deltas stay by name, descending
    names = list(map(names.__getitem__, order))
    table = BomTable(label, len(added), len(removed), len(grow), len(shrink), sum(grow) + sum(added_sizes),
                     sum(removed_sizes) - sum(shrink), sum(o.values()), sum(n.values()),
                     list(map(deltas.__getitem__, order)), names,
                     list(map(o.get, names, repeat("-"))), list(map(n.get, names, repeat("-"))))
    if "letters" in old and "letters" in new:
        lo, ln = old["letters"], new["letters"]
        table.letters = [ln.get(k) or lo.get(k) for k in names]
        table.footprint_old = list(map(old["footprints"].get, names))
        table.footprint_new = list(map(new["footprints"].get, names))
    return table
