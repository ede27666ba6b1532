"""The size and asm parts of a case report (`flagbench demo`), as document blocks.

Size: the bloat-o-meter counts, the symbols that changed (or "no symbol changed size"), only the
section/padding lines that moved, and in html the largest deltas as bars with padding apart.
Asm: one comparison over the whole object set; changed functions listed, the rest a count; the
case's chosen functions side by side only when they changed. Cells are named
`variant/target/compiler`, never by their cache paths.
"""
from __future__ import annotations

from dataclasses import dataclass

from flagbench.report import plots
from flagbench.report.cells import slug
from flagbench.report.doc import Block, Code, Figure, Grid, Para
from flagbench.size.rules import CODE_LETTERS

TOP_SYMBOLS = 10        # symbol rows in the md table (html bars show more)
BAR_SYMBOLS = 20
LISTED_FUNCTIONS = 20
SIDE_BY_SIDE_LINES = 80
CONTEXT = 3             # equal lines kept around each change in a side-by-side
SIDE = 48               # columns of each side of a side-by-side: the pair fits a mail's 100


@dataclass
class SizeFacts:
    """What a case report says about the size of one pair, read from the size stage's comparison."""
    symbols: list[tuple[str, str, int | None, int | None, int]]   # name, nm letter, old, new, delta (changed only)
    total: tuple[int, int]          # bloat-o-meter's Total: Before, After
    in_symbols: tuple[int, int]     # code bytes inside sized symbols (the denominator of code %)
    moved: list[tuple[str, int, int]]   # section groups, padding, .cold, ... (name, old, new)
    line: str                       # the size stage's one-line padding account
    rules: str                      # which bloat-o-meter's rules made the table

    @property
    def code_delta(self) -> int:
        """Bytes the functions (nm t/T/w/W) grew by, in bloat-o-meter's table."""
        return sum(d for _, letter, _, _, d in self.symbols if letter in CODE_LETTERS)


def size_facts(old: str, new: str, *, types: str | None = None, rules: str = "newest scripts/bloat-o-meter") -> SizeFacts:
    """Compare two ELF files or archives with the size stage (`types`: bloat-o-meter's letters)."""
    from flagbench import size
    from flagbench.size.render import summary
    c = size.compare(old, new, types=types)
    t = c.table
    symbols = [(t.names[i], t.letters[i], None if t.olds[i] == "-" else t.olds[i],
                None if t.news[i] == "-" else t.news[i], t.deltas[i]) for i in range(len(t.deltas)) if t.deltas[i]]
    moved = [(f"{k} (sections)", c.old.groups[k], c.new.groups.get(k, 0)) for k in c.old.groups]
    moved += [("padding in code", c.old.padding, c.new.padding),
              ("code in sized symbols", c.old.covered, c.new.covered),
              (".cold symbols", c.old.cold, c.new.cold), (".text.unlikely", c.old.unlikely, c.new.unlikely)]
    return SizeFacts(symbols, (t.total_old, t.total_new), (c.old.covered, c.new.covered),
                     [m for m in moved if m[1] != m[2]], summary(c), rules)


def size_summary(f: SizeFacts) -> str:
    """The size change in a few words: one total, bloat-o-meter's, then its parts, which add up
    to it (functions: nm t/T/w/W; data: the rest); padding, which that total cannot see, after
    it and said to be outside it when it is a good part of the story (-falign-functions=64 is
    +0 B in symbols).

    >>> f = SizeFacts([("f", "T", 100, 110, 10), ("buf", "b", 4000, 4008, 8)], (8100, 8118), (1000, 1010),
    ...               [("padding in code", 4, 4)], "", "")
    >>> size_summary(f)
    '+18 B (+0.22 %) = functions +10 + data +8'
    >>> size_summary(SizeFacts([], (100, 100), (200, 200), [("padding in code", 4, 68)], "", ""))
    '+0 B; padding +64 B outside it'
    """
    code = f.code_delta
    total = f.total[1] - f.total[0]
    data = total - code
    text = f"{total:+d} B" + (f" ({100 * total / f.total[0]:+.2f} %)" if total and f.total[0] else "")
    parts = [f"functions {code:+d}"] * bool(code) + [f"data {data:+d}"] * bool(data)
    if parts:
        text += " = " + " + ".join(parts)
    pad = next((n - o for name, o, n in f.moved if name == "padding in code"), 0)
    if pad and abs(pad) * 2 >= abs(code):   # padding is (a good part of) the story
        text += f"; padding {pad:+d} B outside it"
    return text


def size_blocks(f: SizeFacts, *, anchor: str, label: str) -> list[Block]:
    changed = f.symbols
    up = sum(d for *_, d in changed if d > 0)
    down = sum(d for *_, d in changed if d < 0)
    added = sum(1 for _, _, o, _, _ in changed if o is None)
    removed = sum(1 for _, _, _, n, _ in changed if n is None)
    out: list[Block] = [Para([f"size of {label}: {size_summary(f)} (bloat-o-meter's total, {f.rules}: "
                              f"add/remove {added}/{removed}, "
                              f"grow/shrink {sum(1 for *_, d in changed if d > 0) - added}/"
                              f"{sum(1 for *_, d in changed if d < 0) - removed}, up/down {up}/{down}). "
                              f"Code sections, counted apart from that total: {f.line}"],
                             anchor=anchor)]
    if not changed:
        out.append(Para(["no symbol changed size"]))
    else:
        rows = [[name, _dash(o), _dash(n), f"{d:+d}"] for name, _, o, n, d in changed[:TOP_SYMBOLS]]
        more = [f"{len(changed) - TOP_SYMBOLS} more symbols changed size (flagbench size)"] \
            if len(changed) > TOP_SYMBOLS else []
        out.append(Grid(["symbol", "old", "new", "delta"], rows, notes=more))
    if f.moved:
        out.append(Grid(["", "old", "new", "delta"], [[name, str(o), str(n), f"{n - o:+d}"] for name, o, n in f.moved]))
    elif not changed:
        out.append(Para(["sections, padding and symbols: all the same size"]))
    bars = plots.bars([(name, d) for name, _, _, _, d in sorted(changed, key=lambda s: -abs(s[4]))[:BAR_SYMBOLS]],
                      title=f"largest symbol deltas · {label}")
    pads = plots.bars([(name, n - o) for name, o, n in f.moved if name in ("padding in code", "code in sized symbols")],
                      title=f"padding apart · {label}")
    if bars or pads:
        out.append(Figure(bars + pads))
    return out


def _dash(v) -> str:
    return "-" if v is None else str(v)


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
        width = min(max([len(a) for _, a, _ in rows] + [8]), SIDE)
        shown = with_context(rows)
        lines = [f"{_cut(a):<{width}} {mark} {_cut(b)}".rstrip() if mark is not None else a for mark, a, b in shown]
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


def _cut(line: str) -> str:
    """One side of a side-by-side line, cut to SIDE columns (the whole is in `flagbench asm`)."""
    return line if len(line) <= SIDE else line[:SIDE - 1] + "…"


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
