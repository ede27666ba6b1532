"""The model's output: a summary row per pair and core (exact counts beside the modelled
cycles, the label "model" on every modelled figure), then per pair the band, the cache
figures, where the cycles go, the hot blocks with their asm and what is not modelled; on
x86_64 with measured times, the validation table. Text fits 100 columns; md wraps the same
in tables and fences; json carries every figure."""
from __future__ import annotations

import json
import textwrap

from flagbench import export
from flagbench.model.band import Comparison
from flagbench.model.cores import NO_MODEL
from flagbench.textsafe import md_cell, term_text

HEADER = ("model = estimated cycles: llvm-mca-19's cycles of each executed block x its count under\n"
          "qemu (exact); not a measured time")
TOLERANCE = 0.02             # a ratio within 2 % of 1 is "no change" for the direction check


def _f(v, digits=4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def _r(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def groups(comparisons: list[Comparison]) -> dict[str, list[Comparison]]:
    """The pairs by target, compiler and what A and B are: one summary table each."""
    out: dict[str, list[Comparison]] = {}
    for c in comparisons:
        out.setdefault(f"{c.target}/{c.compiler}: A = {c.a.label}, B = {c.b.label}", []).append(c)
    return out


def summary_rows(comparisons: list[Comparison]) -> list[list[str]]:
    rows = []
    for c in comparisons:
        head = [c.title, _f(c.a.insns), _f(c.b.insns), _r(c.insn_ratio())]
        if not c.cores:
            rows.append(head + ["no model", "", "", ""])
            continue
        for i, core in enumerate(c.cores):
            lead = head if i == 0 else [""] * len(head)
            rows.append(lead + [core.mcpu, _f(c.a.cycles.get(core.mcpu)), _f(c.b.cycles.get(core.mcpu)),
                                _r(c.ratio(core.mcpu))])
    return rows


SUMMARY_HEAD = ["bench", "insns A", "insns B", "B/A", "model core", "cyc A", "cyc B", "B/A"]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in [head, *rows]]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(md_cell(v) for v in r) + " |" for r in rows]


def detail(c: Comparison) -> list[str]:
    out = [f"{c.title} {c.target}/{c.compiler}: {c.a.label} (A) vs {c.b.label} (B), per {c.per}"
           f" (modelled in {c.seconds:.1f} s)"]
    out.append(f"  exact (qemu plugin): insns A {_f(c.a.insns, 6)}  B {_f(c.b.insns, 6)}  B/A {_r(c.insn_ratio())}")
    if c.no_model():
        out += textwrap.wrap(f"{c.target}: {c.no_model()}", 100, initial_indent="  ", subsequent_indent="    ")
    else:
        band = c.band()
        names = ", ".join(f"{k.mcpu} ({k.pipeline})" for k in c.cores)
        out.append(f"  model B/A band {_r(band[0]) if band else '-'} .. {_r(band[1]) if band else '-'} over {names}")
        for core in c.cores:
            if core.note:
                out += textwrap.wrap(f"{core.mcpu}: {core.note}", 100, initial_indent="  ",
                                     subsequent_indent="    ")
    out += _cache_lines(c)
    if c.cores:
        core = c.cores[-1].mcpu
        out += _symbol_lines(c, core)
        out += _hot_lines(c, core)
    out.append("  not modelled:")
    for line in c.unmodelled():
        out += textwrap.wrap(line, 100, initial_indent="    - ", subsequent_indent="      ")
    return out


def _cache_lines(c: Comparison) -> list[str]:
    if not (c.a.cache and c.b.cache):
        return []
    geometry = [NO_MODEL[c.target][1]] if c.target in NO_MODEL else list(c.cores)
    out = [f"  cache misses per {c.per} (cachesim plugin, LRU; A / B):"]
    for i, core in enumerate(geometry):
        cells = []
        for level in ("l1i", "l1d", "l2"):
            key = f"c{i}.{level}_miss"
            if key in c.a.cache or key in c.b.cache:
                cells.append(f"{level.upper()} {_count(c.a.cache.get(key, 0))} / {_count(c.b.cache.get(key, 0))}")
        out += textwrap.wrap(f"{core.mcpu} ({core.cache_label()}): {', '.join(cells)}", 100,
                             initial_indent="    ", subsequent_indent="      ")
    return out


def _count(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else _f(v)


def _symbol_lines(c: Comparison, core: str) -> list[str]:
    a, b = c.a.by_symbol(core), c.b.by_symbol(core)
    names = sorted(a.keys() | b.keys(), key=lambda n: -abs(b.get(n, 0) - a.get(n, 0)))[:5]
    rows = [[term_text(n)[:40], _f(a.get(n)), _f(b.get(n)), f"{b.get(n, 0) - a.get(n, 0):+.4g}"] for n in names]
    return [f"  where the model's cycles go ({core}, per {c.per}):"] + \
        ["    " + ln for ln in _table(["symbol", "A", "B", "B-A"], rows)]


def _hot_lines(c: Comparison, core: str, most_lines: int = 12) -> list[str]:
    out = [f"  hot blocks ({core}):"]
    for side, tag in ((c.a, "A"), (c.b, "B")):
        for block, text, cycles in side.hot(core):
            mode = " thumb" if block.thumb else ""
            out.append(f"    {tag} {block.vaddr:#x} {term_text(block.symbol)[:32]}{mode}: {block.per_iter:.4g}x per "
                       f"{c.per}, {block.insns} insns, {cycles:.4g} cycles per {c.per}")
            shown = text[:most_lines]
            out += [f"        {term_text(ln)[:88]}" for ln in shown]
            if len(text) > most_lines:
                out.append(f"        ... {len(text) - most_lines} more")
    return out


def direction(ratio: float | None, low: float | None = None, high: float | None = None) -> str:
    if ratio is None:
        return "?"
    low, high = (ratio, ratio) if low is None else (low, high)
    if low > 1 + TOLERANCE:
        return "slower"
    if high < 1 - TOLERANCE:
        return "faster"
    if low >= 1 - TOLERANCE and high <= 1 + TOLERANCE:
        return "same"
    return "unclear"


def verdict(c: Comparison) -> str:
    """The model's direction against the measured one (its quartiles): agree, WRONG DIRECTION,
    or model/measured when one of them sees no clear change."""
    m = c.measured
    model_dir = {direction(c.ratio(k.mcpu)) for k in c.cores}
    model_dir = model_dir.pop() if len(model_dir) == 1 else "split"
    measured_dir = direction(m["ratio"], m["low"], m["high"])
    if model_dir == measured_dir:
        return "agree"
    if {model_dir, measured_dir} == {"slower", "faster"}:
        return "WRONG DIRECTION"
    return f"{model_dir}/{measured_dir}"


def validation_rows(comparisons: list[Comparison]) -> list[list[str]]:
    rows = []
    for c in comparisons:
        m, band = c.measured, c.band()
        if not m or not band:
            continue
        rows.append([c.title, f"{_r(band[0])}..{_r(band[1])}",
                     f"{_r(m['ratio'])} [{_r(m['low'])}, {_r(m['high'])}]", verdict(c)])
    return rows


VALIDATION_HEAD = ["bench", "model B/A", "measured B/A [IQR]", "model/measured"]


def render(comparisons: list[Comparison], notes: list[str], fmt: str = "text") -> str:
    return export.render(fmt, {
        "text": lambda: _report(comparisons, notes, md=False), "md": lambda: _report(comparisons, notes, md=True),
        "json": lambda: json.dumps([_as_json(c) for c in comparisons] + [{"notes": notes}], indent=1) + "\n"})


def _report(comparisons: list[Comparison], notes: list[str], md: bool) -> str:
    table = _md_table if md else _table
    out = [HEADER, ""]
    for title, members in groups(comparisons).items():
        out += [term_text(title)] + table(SUMMARY_HEAD, summary_rows(members))
        out += [f"  ! {c.title}: not in the cycles: {c.a.string_ops:.4g} (A), {c.b.string_ops:.4g} (B) string "
                f"instructions per {c.per}" for c in members if c.a.string_ops or c.b.string_ops]
        out += [""]
    for c in comparisons:
        body = detail(c)
        out += (["```", *body, "```"] if md else body) + [""]
    measured = [c for c in comparisons if c.measured and c.band()]
    if measured:
        out += ["validation here (x86_64, measured natively: the median B/A of A,B alternated 11 times",
                "and its quartiles; beside the model, never in it):", ""]
        for title, members in groups(measured).items():
            out += [term_text(title)] + table(VALIDATION_HEAD, validation_rows(members)) + [""]
    for n in dict.fromkeys(notes):
        out += textwrap.wrap(f"note: {term_text(n)}", 100, subsequent_indent="  ")
    return "\n".join(out).rstrip() + "\n"


def _as_json(c: Comparison) -> dict:
    def side(s):
        return {"label": s.label, "insns": s.insns, "cycles": s.cycles, "unpriced": s.unpriced, "cache": s.cache,
                "string_ops": s.string_ops,
                "blocks": [{"vaddr": b.vaddr, "symbol": b.symbol, "per_iter": b.per_iter, "insns": b.insns,
                            "asm": text, "cycles": {k: v[i] for k, v in s.block_cycles.items()}}
                           for i, (b, text) in enumerate(zip(s.blocks, s.asm))]}
    return {"bench": c.title, "target": c.target, "compiler": c.compiler, "per": c.per, "seconds": c.seconds,
            "no_model": c.no_model(), "cores": [k.mcpu for k in c.cores],
            "ratio": {k.mcpu: c.ratio(k.mcpu) for k in c.cores}, "a": side(c.a), "b": side(c.b),
            "measured": c.measured, "not_modelled": c.unmodelled()}
