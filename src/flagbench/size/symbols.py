"""bloat-o-meter's tables for large inputs (static archives of thousands of objects), with numpy.

Python objects are the cost here (about 200 ns per string hashed or sliced on this machine, for
263k symbols per LLVM archive), so each name goes through as few Python-level passes as
possible: the string tables are decoded once, `.NUMBER` is removed by one `re.sub` over all of
them and one `split` makes every string; a symbol's name is then the split piece its offset
falls on (found with `searchsorted`). The skip rules are found with `str.find` on the raw text.
Names are grouped by one `dict.setdefault` pass and sizes summed with `bincount`.
"""
from __future__ import annotations

from itertools import repeat
from operator import itemgetter

import numpy as np

from flagbench import elf_tables
from flagbench.size import _NUMBER, SKIP_NAMES, SKIP_PREFIXES, bom_name

EXACT = float(1 << 53)   # float64 sums are exact below this


def table_sizes(inp, tables, match, index: bool = False) -> list[tuple]:
    """Per (label, letters) table: unique bom names and their summed sizes, and with INDEX a
    dict name -> position in them (the one built while summing: no second hashing pass)."""
    letters = "".join(sorted(set("".join(t for _, t in tables))))
    wanted = np.zeros(256, bool)
    wanted[[ord(c) for c in letters]] = True
    names, keeps, letter_parts, size_parts = [], [], [], []
    for t in elf_tables.read_chunks(inp):
        rows = np.flatnonzero(wanted[t.sym_letter] & (t.sym_size > 0))
        chunk_names, keep = _bom_names(t, rows)
        names += chunk_names
        keeps.append(keep)
        letter_parts.append(t.sym_letter[rows])
        size_parts.append(t.sym_size[rows])
        del t
    inp.close()
    keep = np.concatenate(keeps)
    sym_letter, sizes = np.concatenate(letter_parts), np.concatenate(size_parts)
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
        out.append(_summed(picked, picked_sizes, index))
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
    # The skip rules, on the raw names: ':' anywhere (memchr-fast `find`), then the prefixes and
    # the two exact names, checked by hand only where the first bytes and length could match.
    colon = []
    pos = text.find(":")
    while pos >= 0:
        colon.append(pos)
        pos = text.find(":", pos + 1)
    if colon:
        keep &= ~np.isin(piece, np.searchsorted(nul, np.array(colon, np.int64)))
    length = nul[np.minimum(piece, len(nul) - 1)] - starts
    first = buf[starts]
    second = buf[np.minimum(starts + 1, len(buf) - 1)]
    exact = np.isin(length, [len(n) for n in SKIP_NAMES]) & np.isin(first, [ord(n[0]) for n in SKIP_NAMES])
    cand = ((first == 95) & (second == 95)) | exact     # "__": every prefix starts so
    for i in np.flatnonzero(cand & at_start).tolist():
        s = int(starts[i])
        raw = text[s:s + int(length[i])]
        if raw.startswith(SKIP_PREFIXES) or raw in SKIP_NAMES:
            keep[i] = False
    pieces = (_NUMBER.sub("", text) if _NUMBER.search(text) else text).split("\0")
    names = list(itemgetter(*piece.tolist())(pieces)) if len(rows) > 1 else \
        [pieces[int(p)] for p in piece]
    for i in np.flatnonzero(~at_start).tolist():       # a tail of another string: by hand
        s = int(starts[i])
        n = bom_name(text[s:text.index("\0", s)])
        names[i] = n or ""
        keep[i] = n is not None
    return names, keep


def _summed(names: list[str], sizes, index: bool) -> tuple:
    """Unique names and their summed sizes: one setdefault pass gives each row its first row.
    With INDEX also (dict name -> first row, position of each first row among the unique)."""
    n = len(names)
    first_of: dict[str, int] = {}
    first = np.fromiter(map(first_of.setdefault, names, range(n)), np.int64, n)
    unique = np.fromiter(first_of.values(), np.int64, len(first_of))
    if len(unique) == n:
        out = (names, sizes.tolist())
    elif float(sizes.sum(dtype=np.float64)) < EXACT:
        totals = np.bincount(first, weights=sizes.astype(np.float64), minlength=n)
        out = (list(first_of), totals[unique].astype(np.int64).tolist())
    else:
        sums = [0] * n                                 # beyond float precision: exact ints
        for i, s in zip(first.tolist(), sizes.tolist()):
            sums[i] += s
        out = (list(first_of), [sums[i] for i in unique.tolist()])
    if not index:
        return out
    position = np.full(n + 1, -1, np.int64)           # row -1 (not found) stays -1
    position[unique] = np.arange(len(unique))
    return (*out, (first_of, position))


def bom_table(label, old: tuple[list[str], list[int]], new: tuple[list[str], list[int]]):
    """size.bom_table for two (names, sizes) columns: one lookup pass, the rest in numpy."""
    from flagbench.size import BomTable
    old_names, old_sizes = old[:2]
    new_names, new_sizes = new[:2]
    o = np.array(old_sizes, np.int64) if old_sizes else np.zeros(0, np.int64)
    n = np.array(new_sizes, np.int64) if new_sizes else np.zeros(0, np.int64)
    if len(new) > 2:
        first_of, position = new[2]
    else:
        first_of, position = dict(zip(new_names, range(len(new_names)))), np.arange(len(new_names) + 1)
        position[-1] = -1
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
    names = _pick(old_names, changed) + _pick(new_names, added)
    olds = o[changed].tolist() + ["-"] * len(added)
    news = np.where(matched[changed], n_of_old[changed], 0).tolist() + n[added].tolist()
    news[:len(changed)] = [v if m else "-" for v, m in zip(news[:len(changed)],
                                                          matched[changed].tolist())]
    # bloat-o-meter's order, (delta, name) descending: names sorted once (a list of str sorts
    # with CPython's fast string compare), then a stable numpy sort by delta.
    nz = np.flatnonzero(deltas != 0)
    names = _pick(names, nz)
    by_name = np.array(sorted(range(len(names)), key=names.__getitem__)[::-1], np.int64)
    deltas = deltas[nz]
    order = by_name[np.argsort(-deltas[by_name], kind="stable")]
    columns = (deltas[order].tolist(), _pick(names, order), _pick(_pick(olds, nz), order),
               _pick(_pick(news, nz), order))
    table = BomTable(label, len(added), int(removed.sum()), int(grow_m.sum()),
                     int(shrink_m.sum()), up, down, None, {}, {})
    table.columns = columns
    table.total_old, table.total_new = int(o.sum()), int(n.sum())
    return table
