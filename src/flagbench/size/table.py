"""bloat-o-meter's calc() over two sides' summed names."""
from flagbench.size.rules import BomTable


def bom_table(label: str, old, new, match=None, extras: bool = False) -> BomTable:
    """OLD and NEW are one table's `elf.Summary` each; MATCH (a compiled regex or None)
    keeps only the names it finds a match in. With EXTRAS the rows carry letters and footprints.

    The summaries compare themselves (`Summary.diff`, in C: a vmlinux pair has 30,000 names and
    a few dozen rows, and only the rows become Python objects); here the rows are put in
    bloat-o-meter's order, (delta, name) descending, by two sorts with one key each."""
    columns, counts = old.diff(new, match.search if match else None, extras)
    names, olds, news, deltas = columns[:4]
    order = sorted(range(len(names)), key=names.__getitem__, reverse=True)
    order.sort(key=deltas.__getitem__, reverse=True)   # stable: equal deltas stay by name, descending
    names, olds, news, deltas = ([col[i] for i in order] for col in (names, olds, news, deltas))
    table = BomTable(label, *counts, deltas, names, ["-" if v is None else v for v in olds],
                     ["-" if v is None else v for v in news])
    if extras:
        old_letters, new_letters, feet_old, feet_new = ([col[i] for i in order] for col in columns[4:])
        table.letters = [b or a for a, b in zip(old_letters, new_letters)]
        table.footprint_old, table.footprint_new = feet_old, feet_new
    return table
