"""Compare two builds' sizes: bloat-o-meter's table byte for byte, and what it cannot see.

`bom` reproduces the kernel's scripts/bloat-o-meter (current version, with the weak types
w/W/v/V): nm's sized symbols of the chosen letters, generated kernel symbols skipped, `.NUMBER`
suffixes removed and colliding names summed. `compare` (in `size_measure`) adds the sections
(like `size -A`), the padding between symbols in code, each symbol's footprint and the `.cold` /
`.text.unlikely` code, rendered as text, md, json or csv by `size_render`.

Speed (bench/size_speed.py): bloat-o-meter runs nm and a Python loop per symbol. Here the two
files are read at once (a forked child reads OLD and sends back its name/size table) and every
per-symbol step is a C loop: columns cut by stride or numpy, names sliced by `map`, the skip
rules found with `str.find` on all names joined, `.NUMBER` removed by one `re.sub` over them,
sums by `dict(zip())`, and only the changed names ever reach a Python-level loop.
"""
from __future__ import annotations

import re
import sys
from bisect import bisect_right
from itertools import accumulate, compress, filterfalse, repeat
from operator import ne

from flagbench import elf

DEFAULT_TYPES = "tTdDbBrRvVwW"
KINDS = {"functions": "tTwW", "data": "dDbBvV", "rodata": "rR"}
BOM_TABLES = {
    None: (("Function", DEFAULT_TYPES),),
    "c": (("Function", "tTwW"), ("Data", "dDbBvV"), ("RO Data", "rR")),
    "d": (("Data", "dDbBrRvV"),),
    "t": (("Function", "tTwW"),),
}
SKIP_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
SKIP_NAMES = ("linux_banner", "vermagic")
_NUMBER = re.compile(r"\.[0-9]+")
# Above this many symbol-table bytes numpy's import (80-150 ms) pays for itself.
SMALL_SYMTAB = 3 << 20


def bom_name(name: str) -> str | None:
    """The name bloat-o-meter files a symbol under, or None when it skips it."""
    if ":" in name or name.startswith(SKIP_PREFIXES) or name in SKIP_NAMES:
        return None
    return _NUMBER.sub("", name) if "." in name else name


def is_small(inp: elf.Input) -> bool:
    if len(inp.members) > 64:
        return False
    total = 0
    for m in inp.members:
        headers, symtab = elf.member_sections(inp, m)
        if symtab is not None:
            total += headers[symtab][5]
    return total <= SMALL_SYMTAB


def columns(inp: elf.Input, types: str, vectorised: bool | None = None):
    """(names, letters, sizes) of the symbols `nm --size-sort` lists with a letter in TYPES;
    letters is a sequence of one-character strings. VECTORISED picks the reader (None: numpy
    only for large inputs)."""
    small = is_small(inp) if vectorised is None else not vectorised
    if small:
        return elf.small_columns(inp, types)
    import numpy as np

    from flagbench import elf_tables
    t = elf_tables.read_tables(inp, full=False)
    wanted = np.zeros(256, bool)
    wanted[[ord(c) for c in types]] = True
    rows = np.flatnonzero(wanted[t.sym_letter] & (t.sym_size > 0))
    return t.names(rows), t.sym_letter[rows].tobytes().decode("latin-1"), t.sym_size[rows].tolist()


def sized_entries(inp: elf.Input, types: str, vectorised: bool | None = None):
    """(name, nm letter, size) of every symbol `nm --size-sort` lists with a letter in TYPES."""
    return zip(*columns(inp, types, vectorised))


def bom_sizes(names: list[str], letters, sizes: list[int], types: str, match=None) -> dict[str, int]:
    """{name: summed size} as bloat-o-meter's getsizes builds it from `nm --size-sort` lines."""
    if not set(letters) <= set(types):
        keep = list(map(types.__contains__, letters))
        names, sizes = list(compress(names, keep)), list(compress(sizes, keep))
    names, sizes = _bom_names(names, sizes)
    if match is not None:
        keep = list(map(bool, map(match.search, names)))
        names, sizes = list(compress(names, keep)), list(compress(sizes, keep))
    return summed(names, sizes)


def _bom_names(names: list[str], sizes: list[int]) -> tuple[list[str], list[int]]:
    """Skip what bloat-o-meter skips and strip `.NUMBER`, over all names joined by NULs."""
    if not names:
        return names, sizes
    text = "\0" + "\0".join(names) + "\0"
    starts = None
    skip = set()
    for needle, whole in ((":", True), *(("\0" + p, False) for p in SKIP_PREFIXES),
                          *(("\0" + n + "\0", False) for n in SKIP_NAMES)):
        pos = text.find(needle)
        while pos >= 0:
            if starts is None:  # where each name's leading NUL is
                starts = [0, *accumulate(map((1).__add__, map(len, names)))]
            i = bisect_right(starts, pos) - 1
            skip.add(i)
            pos = text.find(needle, starts[i + 1] if whole else pos + 1)
    if _NUMBER.search(text):
        names = _NUMBER.sub("", text)[1:-1].split("\0")
    if skip:
        keep = [True] * len(names)
        for i in skip:
            keep[i] = False
        names, sizes = list(compress(names, keep)), list(compress(sizes, keep))
    return names, sizes


def summed(names: list[str], sizes: list[int]) -> dict[str, int]:
    """{name: sum of its sizes}; only the rows of repeated names go through a Python loop."""
    out = dict(zip(names, sizes))
    n = len(names)
    if len(out) != n:
        last = dict(zip(names, range(n)))
        for i in compress(range(n), map(ne, map(last.__getitem__, names), range(n))):
            out[names[i]] += sizes[i]
    return out


class BomTable:
    """bloat-o-meter's calc(): counts, and the rows (delta, name) in its order, zero deltas
    dropped."""

    columns = None    # size_large: (deltas, names, olds, news) in place of rows

    def __init__(self, label, add, remove, grow, shrink, up, down, rows, old, new):
        self.label, self.add, self.remove, self.grow, self.shrink = label, add, remove, grow, shrink
        self.up, self.down, self.rows, self.old, self.new = up, down, rows, old, new
        self.total_old, self.total_new = sum(old.values()), sum(new.values())


def bom_table(label: str, old: dict[str, int], new: dict[str, int]) -> BomTable:
    """Only changed, added and removed names are visited one by one."""
    add = remove = grow = shrink = up = down = 0
    rows = []
    names = list(old)
    now = list(map(new.get, names))
    for name, n in compress(zip(names, now), map(ne, now, old.values())):
        o = old[name]
        if n is None:
            remove, down = remove + 1, down + o
            if o:
                rows.append((-o, name))
        elif n > o:
            grow, up = grow + 1, up + n - o
            rows.append((n - o, name))
        else:
            shrink, down = shrink + 1, down + o - n
            rows.append((n - o, name))
    for name in filterfalse(old.__contains__, new):
        s = new[name]
        add, up = add + 1, up + s
        if s:
            rows.append((s, name))
    rows.sort(reverse=True)
    return BomTable(label, add, remove, grow, shrink, up, down, rows, old, new)


def bom_text(table: BomTable, top: int | None = None) -> str:
    """One bloat-o-meter print_result() block, byte for byte. The table has rows (delta, name),
    or columns (deltas, names, olds, news) with "-" for a missing side."""
    columns = table.columns
    if columns is not None and top is not None:
        rows = top_rows(list(zip(*columns)), top)
        columns = tuple(map(list, zip(*rows))) if rows else ([], [], [], [])
    if columns is not None:
        deltas, names, olds, news = columns
    else:
        rows = table.rows if top is None else top_rows(table.rows, top)
        deltas = [d for d, _ in rows]
        names = [n for _, n in rows]
        olds = map(table.old.get, names, repeat("-"))
        news = map(table.new.get, names, repeat("-"))
    otot, ntot = table.total_old, table.total_new
    percent = (ntot - otot) * 100.0 / otot if otot else 0
    return "".join((
        "add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)\n" % (
            table.add, table.remove, table.grow, table.shrink, table.up, -table.down,
            table.up - table.down),
        "%-40s %7s %7s %+7s\n" % (table.label, "old", "new", "delta"),
        "".join(map("%-40s %7s %7s %+7d\n".__mod__, zip(names, olds, news, deltas))),
        "Total: Before=%d, After=%d, chg %+.2f%%\n" % (otot, ntot, percent)))


def top_rows(rows, n):
    """The N rows with the largest |delta|, kept in their printed order."""
    if n >= len(rows):
        return rows
    keep = set(sorted(range(len(rows)), key=lambda i: -abs(rows[i][0]))[:n])
    return [r for i, r in enumerate(rows) if i in keep]


def open_pair(old_path: str, new_path: str, warn=None) -> tuple[elf.Input, elf.Input]:
    """Open both inputs; a different architecture is allowed, with a warning line."""
    old = elf.open_input(old_path)
    new = elf.open_input(new_path)
    if old.machine != new.machine:
        from flagbench.toolchains import target_for_elf
        a = target_for_elf(*old.machine) or f"machine {old.machine[0]}"
        b = target_for_elf(*new.machine) or f"machine {new.machine[0]}"
        (warn or _stderr)(f"warning: {old_path} is {a} but {new_path} is {b}; comparing anyway")
    return old, new


def _stderr(msg: str) -> None:
    print(f"flagbench size: {msg}", file=sys.stderr)


def bom(old_path: str, new_path: str, mode: str | None = None, match=None, top=None,
        types: str | None = None) -> str:
    """The whole bloat-o-meter output for OLD vs NEW (mode None, "c", "d" or "t")."""
    old_in, new_in = open_pair(old_path, new_path)
    tables = BOM_TABLES[mode] if types is None else (("Function", types),)
    from flagbench.size_pair import both
    if is_small(old_in) and is_small(new_in):
        olds, news = both(_table_sizes, old_in, new_in, tables, match)
        made = [bom_table(label, o, n) for (label, _), o, n in zip(tables, olds, news)]
    else:
        olds, news = both(_large_table_sizes, old_in, new_in, tables, match,
                          new_func=_large_table_sizes_indexed)
        from flagbench import size_large
        made = [size_large.bom_table(label, o, n) for (label, _), o, n in zip(tables, olds, news)]
    return "".join(bom_text(t, top) for t in made)


def _large_table_sizes(inp: elf.Input, tables, match):
    from flagbench import size_large   # here, so that both processes import numpy at once
    return size_large.table_sizes(inp, tables, match)


def _large_table_sizes_indexed(inp: elf.Input, tables, match):
    from flagbench import size_large
    return size_large.table_sizes(inp, tables, match, index=True)


def _table_sizes(inp: elf.Input, tables, match) -> list[dict[str, int]]:
    letters = "".join(sorted(set("".join(t for _, t in tables))))
    names, kinds, sizes = columns(inp, letters)
    inp.close()
    return [bom_sizes(names, kinds, sizes, types, match) for _, types in tables]


def compare(old_path: str, new_path: str, types: str | None = None, match=None):
    """Sections, padding, footprints and the bom table of OLD vs NEW (a size_measure.Comparison)."""
    from flagbench import size_measure
    return size_measure.compare(old_path, new_path, types, match)


def render(c, fmt: str, top: int | None = None) -> str:
    from flagbench import size_render
    return size_render.render(c, fmt, top)
