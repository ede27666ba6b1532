"""bloat-o-meter's tables for large inputs (static archives of thousands of objects), with numpy.

Python objects are the cost here (about 200 ns per string hashed or sliced on this machine, for
263k symbols per LLVM archive), so each name goes through as few Python-level passes as
possible: the string tables are decoded once, `.NUMBER` is removed by one `re.sub` over all of
them and one `split` makes every string; a symbol's name is then the split piece its offset
falls on (found with `searchsorted`). The skip rules are found with `str.find` on the raw text.
Names are grouped by one `dict.setdefault` pass and sizes summed with `bincount`.
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np

from flagbench import elf_tables
from flagbench.size import _NUMBER, SKIP_NAMES, SKIP_PREFIXES, bom_name

EXACT = float(1 << 53)   # float64 sums are exact below this


def table_sizes(inp, tables, match) -> list[tuple[list[str], list[int]]]:
    """Per (label, letters) table: unique bom names and their summed sizes."""
    letters = "".join(sorted(set("".join(t for _, t in tables))))
    t = elf_tables.read_tables(inp, full=False)
    inp.close()
    wanted = np.zeros(256, bool)
    wanted[[ord(c) for c in letters]] = True
    rows = np.flatnonzero(wanted[t.sym_letter] & (t.sym_size > 0))
    names, keep = _bom_names(t, rows)
    sym_letter, sizes = t.sym_letter[rows], t.sym_size[rows]
    del t
    out = []
    for _, types in tables:
        sel = keep.copy()
        if len(tables) > 1 or set(letters) != set(types):
            in_table = np.zeros(256, bool)
            in_table[[ord(c) for c in types]] = True
            sel &= in_table[sym_letter]
        idx = np.flatnonzero(sel)
        picked = _pick(names, idx)
        picked_sizes = sizes[idx]
        if match is not None:
            hit = np.fromiter(map(bool, map(match.search, picked)), bool, len(picked))
            picked, picked_sizes = _pick(picked, np.flatnonzero(hit)), picked_sizes[hit]
        out.append(_summed(picked, picked_sizes))
    return out


def _pick(seq, idx) -> list:
    if len(idx) == 0:
        return []
    if len(idx) == 1:
        return [seq[int(idx[0])]]
    return list(itemgetter(*idx.tolist())(seq))


def _bom_names(t, rows):
    """(bom name of each symbol row, whether bloat-o-meter keeps it)."""
    buf, text = t.strbuf, t.strtext
    starts = t.sym_name[rows]
    keep = np.ones(len(rows), bool)
    if not t.strbuf_ascii:   # rare: names one by one
        names = [bom_name(n) for n in t.names(rows)]
        keep[[i for i, n in enumerate(names) if n is None]] = False
        return [n or "" for n in names], keep
    nul = np.flatnonzero(buf == 0)
    piece = np.searchsorted(nul, starts)            # split piece each name starts in
    at_start = np.ones(len(rows), bool)
    at_start[starts > 0] = buf[starts[starts > 0] - 1] == 0
    # The skip rules, on the raw names: ':' anywhere, the prefixes, the two exact names.
    skip = set()
    for needle in (":", *("\0" + p for p in SKIP_PREFIXES), *("\0" + n + "\0" for n in SKIP_NAMES)):
        pos = text.find(needle)
        while pos >= 0:
            skip.add(pos)
            pos = text.find(needle, pos + 1)
    if skip:
        hits = np.array(sorted(skip), np.int64)
        lead = np.array([text[p] == "\0" for p in hits.tolist()])
        hit_piece = np.searchsorted(nul, hits + lead)    # the name after a leading NUL
        keep &= ~(at_start & np.isin(piece, hit_piece))
    pieces = (_NUMBER.sub("", text) if _NUMBER.search(text) else text).split("\0")
    names = list(itemgetter(*piece.tolist())(pieces)) if len(rows) > 1 else \
        [pieces[int(p)] for p in piece]
    for i in np.flatnonzero(~at_start).tolist():       # a tail of another string: by hand
        s = int(starts[i])
        n = bom_name(text[s:text.index("\0", s)])
        names[i] = n or ""
        keep[i] = n is not None
    return names, keep


def _summed(names: list[str], sizes) -> tuple[list[str], list[int]]:
    """Unique names and their summed sizes: one setdefault pass gives each row its first row."""
    n = len(names)
    first_of: dict[str, int] = {}
    first = np.fromiter(map(first_of.setdefault, names, range(n)), np.int64, n)
    unique = np.fromiter(first_of.values(), np.int64, len(first_of))
    if len(unique) == n:
        return names, sizes.tolist()
    if float(sizes.sum(dtype=np.float64)) < EXACT:
        totals = np.bincount(first, weights=sizes.astype(np.float64), minlength=n)
        return list(first_of), totals[unique].astype(np.int64).tolist()
    sums = [0] * n                                     # beyond float precision: exact ints
    for i, s in zip(first.tolist(), sizes.tolist()):
        sums[i] += s
    return list(first_of), [sums[i] for i in unique.tolist()]


def bom_table(label, old: tuple[list[str], list[int]], new: tuple[list[str], list[int]]):
    """size.bom_table for two (names, sizes) columns: one lookup pass, the rest in numpy."""
    from flagbench.size import BomTable
    old_names, old_sizes = old
    new_names, new_sizes = new
    o = np.array(old_sizes, np.int64) if old_sizes else np.zeros(0, np.int64)
    n = np.array(new_sizes, np.int64) if new_sizes else np.zeros(0, np.int64)
    where = dict(zip(new_names, range(len(new_names))))
    j = np.fromiter(map(where.get, old_names, [-1] * len(old_names)), np.int64, len(old_names))
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
    names = _pick(old_names, changed) + _pick(new_names, added)
    olds = o[changed].tolist() + ["-"] * len(added)
    news = np.where(matched[changed], n_of_old[changed], 0).tolist() + n[added].tolist()
    news[:len(changed)] = [v if m else "-" for v, m in zip(news[:len(changed)],
                                                          matched[changed].tolist())]
    nz = deltas != 0
    rows = sorted(zip(deltas[nz].tolist(), _pick(names, np.flatnonzero(nz)),
                      _pick(olds, np.flatnonzero(nz)), _pick(news, np.flatnonzero(nz))),
                  reverse=True)
    table = BomTable(label, len(added), int(removed.sum()), int(grow_m.sum()),
                     int(shrink_m.sum()), up, down, rows, {}, {})
    table.total_old, table.total_new = int(o.sum()), int(n.sum())
    return table
