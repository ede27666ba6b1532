"""One input's side of `flagbench size`: bloat-o-meter's names and summed sizes per table, and,
for flagbench's own formats, each name's footprint (size plus the padding after it), the
sections, and the code bytes bloat-o-meter cannot see.

Every input takes this one path, over the numpy columns of `elf.tables` read in runs of archive
members. Python objects are the cost (an LLVM archive has a quarter of a million sized
symbols), so each name goes through as few Python-level passes as possible: the string
tables are decoded once, `.NUMBER` is removed by one `re.sub` over all of them and one `split`
makes every string; a symbol's name is the piece its offset falls on (`searchsorted`). The skip
rules are found with `str.find` on the raw text; names are grouped by one `dict.setdefault` pass
and sizes summed with `bincount`.
"""
from __future__ import annotations

from itertools import repeat
from operator import contains, itemgetter

import numpy as np

from flagbench.elf import tables as elf_tables
from flagbench.elf.constants import SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_NOBITS
from flagbench.size.rules import CODE_LETTERS, NUMBER, SKIP_NAMES, SKIP_PREFIXES, bom_name

EXACT = float(1 << 53)   # float64 sums are exact below this
GROUPS = ("text", "rodata", "data", "bss")
# Input sections that a linker script gathers into one output section, so that relocatable
# objects and archives (one .text.NAME per function) give a readable table.
SECTION_GROUPS = (".text.unlikely", ".text.hot", ".text.startup", ".text.exit", ".text",
                  ".rodata", ".data.rel.ro", ".data", ".bss", ".tdata", ".tbss", ".sdata",
                  ".sbss", ".init_array", ".fini_array", ".gcc_except_table")


def section_group(name: str) -> str:
    """'.text.foo' -> '.text', '.text.unlikely.foo' -> '.text.unlikely', '__ex_table' as is."""
    for g in SECTION_GROUPS:
        if name.startswith(g) and (len(name) == len(g) or name[len(g)] == "."):
            return g
    if name.startswith(".gnu.linkonce.t."):
        return ".text"
    return name


def read_side(inp, tables, match=None, extras: bool = False, index: bool = False) -> dict:
    """Per (label, letters) table the unique bloat-o-meter names of INP with their summed sizes
    (and with EXTRAS their first nm letter and summed footprint); with INDEX the name -> position
    lookup made while summing. With EXTRAS also sections and code totals. Plain data (lists,
    dicts, ints: `marshal` carries it from the forked reader); closes INP."""
    letters = "".join(sorted(set("".join(t for _, t in tables))))
    wanted = _mask(letters)
    code = _mask(CODE_LETTERS)
    names: list[str] = []
    parts: dict[str, list] = {"keep": [], "letter": [], "size": [], "gap": []}
    side = {"sections": {}, "groups": dict.fromkeys(GROUPS, 0), "code": 0, "covered": 0, "padding": 0,
            "unlikely": 0, "skipped": 0}
    for t in elf_tables.read_chunks(inp, full=extras):
        rows = np.flatnonzero(wanted[t.sym_letter] & (t.sym_size > 0))
        chunk_names, keep = _bom_names(t, rows)
        names += chunk_names
        parts["keep"].append(keep)
        parts["letter"].append(t.sym_letter[rows])
        parts["size"].append(t.sym_size[rows])
        if extras:
            gap, covered, padding = _gaps(t)
            parts["gap"].append(gap[rows])
            side["covered"] += covered
            side["padding"] += padding
            skipped = ~keep & code[t.sym_letter[rows]]
            side["skipped"] += int(t.sym_size[rows][skipped].sum())
            _sections(t, side)
        del t
    inp.close()
    keep = np.concatenate(parts["keep"])
    sym_letter, sizes = np.concatenate(parts["letter"]), np.concatenate(parts["size"]).astype(np.int64)
    gaps = np.concatenate(parts["gap"]) if extras else None
    out = []
    for _, types in tables:
        sel = keep & _mask(types)[sym_letter] if len(tables) > 1 or set(letters) != set(types) else keep
        idx = np.flatnonzero(sel)
        picked = pick(names, idx)
        if match is not None:
            hit = np.fromiter(map(bool, map(match.search, picked)), bool, len(picked))
            picked, idx = pick(picked, np.flatnonzero(hit)), idx[hit]
        out.append(_summed(picked, sizes[idx], sym_letter[idx] if extras else None,
                           (sizes[idx] + gaps[idx]) if extras else None, index))
    side["tables"] = out
    if extras:   # .cold parts of split functions, under the names bloat-o-meter shows
        first = out[0]
        side["cold"] = sum(compress_sizes(first["names"], first["sizes"], ".cold"))
    return side


def compress_sizes(names: list[str], sizes: list[int], part: str) -> list[int]:
    return [s for s, hit in zip(sizes, map(contains, names, repeat(part))) if hit]


def _mask(letters: str):
    out = np.zeros(256, bool)
    out[[ord(c) for c in letters]] = True
    return out


def pick(seq, idx) -> list:
    """seq[i] for i in the numpy index array IDX, as a list."""
    if len(idx) == 0:
        return []
    if len(idx) == 1:
        return [seq[int(idx[0])]]
    return list(itemgetter(*idx.tolist())(seq))


def _bom_names(t, rows):
    """(bom name of each symbol row, whether bloat-o-meter keeps it)."""
    buf, text = t.strbuf, t.strtext if t.strbuf_ascii else None
    starts = t.sym_name[rows]
    keep = np.ones(len(rows), bool)
    if text is None:   # rare: names one by one
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
    pieces = (NUMBER.sub("", text) if NUMBER.search(text) else text).split("\0")
    names = pick(pieces, piece)
    for i in np.flatnonzero(~at_start).tolist():       # a tail of another string: by hand
        s = int(starts[i])
        n = bom_name(text[s:text.index("\0", s)])
        names[i] = n or ""
        keep[i] = n is not None
    return names, keep


def _summed(names: list[str], sizes, letters, footprints, index: bool) -> dict:
    """Unique names with summed sizes (and footprints; the letter of the first), grouping by one
    setdefault pass; with INDEX the lookup that pass built: (name -> first row, first row ->
    position among the unique names)."""
    n = len(names)
    first_of: dict[str, int] = {}
    first = np.fromiter(map(first_of.setdefault, names, range(n)), np.int64, n)
    unique = np.fromiter(first_of.values(), np.int64, len(first_of))
    out = {"names": list(first_of) if len(unique) != n else names,
           "sizes": _sum_by(first, unique, sizes)}
    if letters is not None:
        out["letters"] = letters[unique].tobytes().decode("latin-1")
        out["footprints"] = _sum_by(first, unique, footprints)
    if index:   # name -> position among the unique names, through the dict built above
        position = np.full(n + 1, -1, np.int64)       # row -1 (a name not found) stays -1
        position[unique] = np.arange(len(unique))
        out["index"] = (first_of, position)
    return out


def _sum_by(first, unique, values) -> list[int]:
    """Per unique first row, the sum of VALUES of the rows that share it (exact integers)."""
    n = len(first)
    if len(unique) == n:
        return values.tolist()
    if float(values.sum(dtype=np.float64)) < EXACT:
        totals = np.bincount(first, weights=values.astype(np.float64), minlength=n)
        return totals[unique].astype(np.int64).tolist()
    sums = [0] * n                                     # beyond float precision: exact ints
    for i, s in zip(first.tolist(), values.tolist()):
        sums[i] += s
    return [sums[i] for i in unique.tolist()]


def _sections(t, side: dict) -> None:
    """Allocated sections by output-section-like group (`size -A`), and code totals."""
    alloc = np.flatnonzero((t.sec_flags & SHF_ALLOC != 0) & (t.sec_letter != 0))
    flags, stype, size = t.sec_flags[alloc], t.sec_type[alloc], t.sec_size[alloc].astype(np.int64)
    kind = np.where(flags & SHF_EXECINSTR != 0, 0, np.where(stype == SHT_NOBITS, 3,
                    np.where(flags & SHF_WRITE != 0, 2, 1)))
    for k, g in enumerate(GROUPS):
        side["groups"][g] += int(size[kind == k].sum())
    side["code"] += int(size[kind == 0].sum())
    sections = side["sections"]
    for name, n in _grouped(t, alloc, size):
        sections[name] = sections.get(name, 0) + n
    side["unlikely"] = sections.get(".text.unlikely", 0)


PREFIX = 19   # bytes of a section name that decide its group: the longest group name and a "."
_GROUP_BYTES = [(g, np.frombuffer(g.encode(), np.uint8), g != ".gnu.linkonce.t.")
                for g in SECTION_GROUPS + (".gnu.linkonce.t.",)]


def _grouped(t, rows, size) -> list[tuple[str, int]]:
    """(group, summed size) over section ROWS. An archive has a section per function, each a
    distinct name: the groups are matched on the names' first PREFIX bytes in numpy, and the
    few names of no group are read whole."""
    buf = t.shstrbuf
    if len(rows) == 0 or len(buf) == 0:
        return []
    # Bytes past a name's NUL (the next names) need no masking: a pattern has no NUL, so it
    # cannot match across one.
    padded = np.concatenate((buf, np.zeros(PREFIX, np.uint8)))
    head = np.lib.stride_tricks.sliding_window_view(padded, PREFIX)[t.sec_name[rows]]
    group = np.full(len(rows), -1)
    second = head[:, 1]
    for i, (_, pattern, whole_word) in enumerate(_GROUP_BYTES):
        cand = np.flatnonzero((second == pattern[1]) & (group < 0))   # all start with "."
        hit = (head[cand, :len(pattern)] == pattern).all(axis=1)
        if whole_word:                                  # ".text" or ".text.*", not ".textual"
            after = head[cand, len(pattern)]
            hit &= (after == 0) | (after == ord("."))
        group[cand[hit]] = i
    out = []
    for i, (name, _, _) in enumerate(_GROUP_BYTES):
        hit = group == i
        if hit.any():
            out.append((section_group(name), int(size[hit].sum())))
    rest = np.flatnonzero(group < 0)
    out += zip(t.section_names(rows[rest]), size[rest].tolist())
    return out


def _gaps(t):
    """(padding after each symbol row, bytes covered by sized symbols, padding bytes).

    In each executable section, symbols are walked by start address. Bytes between the end of
    the sized symbols seen so far and the next symbol start (or the section end) are padding,
    given to the symbol that reached furthest. A region that starts at an unsized symbol is code
    we cannot size, not padding; overlapping and aliased symbols are merged.
    """
    sec = t.sym_section
    code_sec = (t.sec_flags & SHF_EXECINSTR != 0) & (t.sec_flags & SHF_ALLOC != 0)
    rows = np.flatnonzero((sec >= 0) & code_sec[np.maximum(sec, 0)])
    gap = np.zeros(len(sec), np.int64)
    if len(rows) == 0:
        return gap, 0, 0
    s = sec[rows]
    relocatable = np.array([m.etype == 1 for m in t.inp.members])[t.sec_member[s]]
    start = t.sym_value[rows].astype(np.int64) - np.where(relocatable, 0, t.sec_addr[s].astype(np.int64))
    sec_end = t.sec_size[s].astype(np.int64)
    start = np.clip(start, 0, sec_end)
    end = np.minimum(start + t.sym_size[rows].astype(np.int64), sec_end)
    order = np.lexsort((-end, start, s))
    s, start, end, sec_end, rows = s[order], start[order], end[order], sec_end[order], rows[order]
    # Running furthest end within each section: offset each section into its own range.
    span = int(sec_end.max()) + 1
    key = s.astype(np.int64) * span
    reach = np.maximum.accumulate(np.where(end > start, key + end, key)) - key
    reach = np.maximum(reach, 0)
    idx = np.arange(len(rows))
    owner = np.maximum.accumulate(np.where((end > start) & (end >= reach), idx, -1))
    last = np.append(s[1:] != s[:-1], True)
    nxt = np.where(last, sec_end, np.append(start[1:], 0))
    covered_start = reach > start                     # the region after this start is known code
    pad = np.where(covered_start, np.maximum(nxt - np.maximum(reach, start), 0), 0)
    prev_reach = np.where(np.append(True, s[1:] != s[:-1]), 0, np.append(0, reach[:-1]))
    gained = np.maximum(end - np.maximum(start, prev_reach), 0)
    has_owner = (owner >= 0) & (pad > 0)
    np.add.at(gap, rows[owner[has_owner]], pad[has_owner])
    return gap, int(gained.sum()), int(pad.sum())
