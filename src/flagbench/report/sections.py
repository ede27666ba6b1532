"""The size and asm parts of a case report (`flagbench demo`), as document blocks.

Size: the bloat-o-meter counts, the symbols that changed (or "no symbol changed size"), only the
section/padding lines that moved, and in html the largest deltas as bars with padding apart.
Asm: one comparison over the whole object set; changed functions listed, the rest a count; the
case's chosen functions side by side only when they changed. Cells are named
`variant/target/compiler`, never by their cache paths.
"""
from __future__ import annotations

import json

from flagbench.report import plots
from flagbench.report.cells import slug
from flagbench.report.doc import Block, Code, Figure, Grid, Para

TOP_SYMBOLS = 10        # symbol rows in the md table (html bars show more)
BAR_SYMBOLS = 20
LISTED_FUNCTIONS = 20
SIDE_BY_SIDE_LINES = 80
CONTEXT = 3             # equal lines kept around each change in a side-by-side


def size_doc(old_archive: str, new_archive: str) -> dict:
    """`flagbench size OLD NEW --format json` of two object sets, as data."""
    from flagbench import size
    return json.loads(size.render(size.compare(old_archive, new_archive), "json", None))


def size_change(doc: dict) -> tuple[int, int]:
    """(delta, old total) of the code and data in sized symbols (bloat-o-meter's Total)."""
    total = doc.get("total") or {}
    return int(total.get("new", 0)) - int(total.get("old", 0)), int(total.get("old", 0))


def size_summary(doc: dict) -> str:
    """The size change in a few words: symbols' bytes, and the code span with padding when padding
    moved (what bloat-o-meter cannot see: -falign-functions=64 is +0 B in symbols).

    >>> size_summary({"total": {"old": 100, "new": 110}, "code": {"old": 200, "new": 210},
    ...               "padding": {"old": 4, "new": 4}})
    '+10 B (+10.00 %)'
    >>> size_summary({"total": {"old": 100, "new": 100}, "code": {"old": 200, "new": 264},
    ...               "padding": {"old": 4, "new": 68}})
    '+0 B, code +64 B (padding +64)'
    """
    delta, old_total = size_change(doc)
    text = f"{delta:+d} B" + (f" ({100 * delta / old_total:+.2f} %)" if old_total else "")
    code, pad = doc.get("code") or {}, doc.get("padding") or {}
    d_pad = pad.get("new", 0) - pad.get("old", 0)
    if d_pad and abs(d_pad) * 2 >= abs(delta):   # padding is (a good part of) the story
        text = f"{delta:+d} B, code {code.get('new', 0) - code.get('old', 0):+d} B (padding {d_pad:+d})"
    return text


def size_blocks(doc: dict, *, anchor: str, label: str) -> list[Block]:
    symbols = [s for s in doc.get("symbols", []) if s.get("delta")]
    up = sum(s["delta"] for s in symbols if s["delta"] > 0)
    down = sum(s["delta"] for s in symbols if s["delta"] < 0)
    added = sum(1 for s in symbols if s.get("old") is None)
    removed = sum(1 for s in symbols if s.get("new") is None)
    delta, old_total = size_change(doc)
    pct = f" ({100 * delta / old_total:+.2f} %)" if old_total else ""
    out: list[Block] = [Para([f"size of {label}: symbols {delta:+d} bytes{pct}; add/remove {added}/{removed}, "
                              f"grow/shrink {sum(1 for s in symbols if s['delta'] > 0) - added}/"
                              f"{sum(1 for s in symbols if s['delta'] < 0) - removed}, up/down {up}/{down}. "
                              f"{doc.get('summary', '')}"], anchor=anchor)]
    if not symbols:
        out.append(Para(["no symbol changed size"]))
    else:
        rows = [[s["name"], _dash(s.get("old")), _dash(s.get("new")), f"{s['delta']:+d}"]
                for s in symbols[:TOP_SYMBOLS]]
        more = [f"{len(symbols) - TOP_SYMBOLS} more symbols changed size (flagbench size)"] \
            if len(symbols) > TOP_SYMBOLS else []
        out.append(Grid(["symbol", "old", "new", "delta"], rows, notes=more))
    moved = [(name, o, n) for name, o, n in _extras(doc) if o != n]
    if moved:
        out.append(Grid(["", "old", "new", "delta"], [[name, str(o), str(n), f"{n - o:+d}"] for name, o, n in moved]))
    elif not symbols:
        out.append(Para(["sections, padding and symbols: all the same size"]))
    bars = plots.bars([(s["name"], s["delta"]) for s in sorted(symbols, key=lambda s: -abs(s["delta"]))
                       [:BAR_SYMBOLS]], title=f"largest symbol deltas · {label}")
    pads = plots.bars([(name, n - o) for name, o, n in moved if name in ("padding in code",
                                                                         "code in sized symbols")],
                      title=f"padding apart · {label}")
    if bars or pads:
        out.append(Figure(bars + pads))
    return out


def _dash(v) -> str:
    return "-" if v is None else str(v)


def _extras(doc: dict) -> list[tuple[str, int, int]]:
    out = [(f"{k} (sections)", v["old"], v["new"]) for k, v in (doc.get("groups") or {}).items()]
    for key, name in (("padding", "padding in code"), ("in_symbols", "code in sized symbols"),
                      ("cold", ".cold symbols"), ("text_unlikely", ".text.unlikely")):
        if key in doc:
            out.append((name, doc[key]["old"], doc[key]["new"]))
    return out


def asm_blocks(old_objects, new_objects, *, old_label: str, new_label: str, show: tuple[str, ...],
               anchor: str) -> list[Block]:
    """One comparison of the two object sets: counts, the changed functions, the mix, and the chosen
    functions side by side when they changed."""
    from flagbench.asm.compare import compare_object_sets, side_by_side
    from flagbench.asm.render import Mixes, mix_rows

    c = compare_object_sets([str(p) for p in old_objects], [str(p) for p in new_objects],
                            old_label=old_label, new_label=new_label)
    k = c.counts()
    mixes = Mixes(c)
    out: list[Block] = [Para([f"asm of {new_label} against {old_label}: {len(c.functions)} functions, "
                              f"{k['changed']} changed, {k['added']} added, {k['removed']} removed, "
                              f"{k['same']} the same (not printed)"])]
    if c.warning:
        out.append(Para([f"warning: {c.warning}"]))
    listed = [d for d in c.functions if d.status != "same"]
    if listed:
        rows = []
        for d in listed[:LISTED_FUNCTIONS]:
            mo, mn = mixes.of("old", d), mixes.of("new", d)
            rows.append([d.name, d.status, str(d.changed_lines or ""), str(mo.insns if mo else "-"),
                         str(mn.insns if mn else "-")])
        more = [f"{len(listed) - LISTED_FUNCTIONS} more (flagbench asm)"] if len(listed) > LISTED_FUNCTIONS else []
        out.append(Grid(["function", "status", "lines changed", "insns old", "insns new"], rows, anchor=anchor,
                        notes=more, align="llrrr"))
        out.append(_mix_grid("instruction mix, all functions", mixes.total("old"), mixes.total("new"), mix_rows))
    names = {d.name for d in c.functions}
    same = []
    for name in show:
        if name not in names:
            continue
        d = c.get(name)
        if d.status == "same":
            same.append(name)
            continue
        rows = side_by_side(d)
        width = max([len(a) for _, a, _ in rows] + [8])
        shown = with_context(rows)
        lines = [f"{a:<{width}} {mark} {b}".rstrip() if mark is not None else a for mark, a, b in shown]
        marks = [mark for mark, _, _ in shown]
        if len(lines) > SIDE_BY_SIDE_LINES:
            lines = lines[:SIDE_BY_SIDE_LINES] + [f"... {len(lines) - SIDE_BY_SIDE_LINES} more lines "
                                                  f"(flagbench asm OLD NEW {name})"]
            marks = marks[:SIDE_BY_SIDE_LINES] + [None]
        out.append(Para([f"{name} ({d.status}, {d.changed_lines} lines differ), {old_label} | {new_label}:"]))
        out.append(Code(lines, marks=marks))
        out.append(_mix_grid(f"instruction mix, {name}", mixes.of("old", d), mixes.of("new", d), mix_rows))
    if same:
        out.append(Para([f"the same in both builds (not printed): {', '.join(same)}"]))
    return out


def with_context(rows: list[tuple[str, str, str]], context: int = CONTEXT) -> list[tuple]:
    """Side-by-side rows with runs of equal lines cut to `context` lines around each change, the rest
    one "... N equal lines" row (mark None), as a unified diff keeps its context.

    >>> rows = [(" ", "a", "a")] * 10 + [("|", "b", "c")] + [(" ", "d", "d")] * 2
    >>> [r[0] or r[1] for r in with_context(rows, 2)]
    ['... 8 equal lines', ' ', ' ', '|', ' ', ' ']
    """
    changed = [i for i, r in enumerate(rows) if r[0] != " "]
    keep = {j for i in changed for j in range(i - context, i + context + 1)}
    out, skipped = [], 0
    for i, r in enumerate(rows):
        if i in keep:
            if skipped:
                out.append((None, f"... {skipped} equal lines", ""))
                skipped = 0
            out.append(r)
        else:
            skipped += 1
    if skipped:
        out.append((None, f"... {skipped} equal lines", ""))
    return out


def _mix_grid(title: str, old, new, mix_rows) -> Grid:
    rows = [[m, str(a), str(b), f"{b - a:+d}" if a != b else "0"] for m, a, b in mix_rows(old, new) if a or b]
    return Grid(["metric", "old", "new", "delta"], rows, title=title)


def pair_anchor(case: str, what: str, variant: str, target: str, compiler: str) -> str:
    return slug(case, what, variant, target, compiler)
