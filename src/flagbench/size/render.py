"""Renderings of a `SizeComparison`: text (bloat-o-meter-like table plus sections and padding),
Markdown for a commit message, JSON and CSV. Symbol names are data: escaped for the terminal,
for Markdown and against spreadsheet formulas (`textsafe`)."""
from flagbench import export
from flagbench.size.measure import SizeComparison
from flagbench.size.rules import CODE_LETTERS


def term_text(s: str) -> str:
    """`textsafe.term_text`, imported only for a name that needs it (its import, with typing and
    threading, is a tenth of `flagbench size` on a vmlinux pair)."""
    if s.isprintable():   # no control character: nothing to escape
        return s
    from flagbench.textsafe import term_text as escape
    return escape(s)


def csv_cell(v):
    from flagbench.textsafe import csv_cell as cell
    return cell(v)


def md_cell(s: str) -> str:
    from flagbench.textsafe import md_cell as cell
    return cell(s)


def md_code(s: str) -> str:
    from flagbench.textsafe import md_code as code
    return code(s)

FORMATS = export.choices("text", "md", "json", "csv")
SKIPPED_NOTE = "(':' names, __mod_*, ...: in no table above)"


def _sym_records(c: SizeComparison, top: int | None):
    t = c.table
    for i in t.top(top):
        o, n = t.olds[i], t.news[i]
        yield {"name": t.names[i], "type": t.letters[i],
               "old": None if o == "-" else o, "new": None if n == "-" else n, "delta": t.deltas[i],
               "footprint_old": t.footprint_old[i], "footprint_new": t.footprint_new[i]}


def _section_records(c: SizeComparison):
    # the largest first; ties by name (the union is a set: its order would follow the hash seed)
    names = sorted(c.old.sections.keys() | c.new.sections.keys(),
                   key=lambda k: (-max(c.old.sections.get(k, 0), c.new.sections.get(k, 0)), k))
    for k in names:
        o, n = c.old.sections.get(k), c.new.sections.get(k)
        yield {"name": k, "old": o, "new": n, "delta": (n or 0) - (o or 0)}


def _triple(o: int, n: int) -> dict:
    return {"old": o, "new": n, "delta": n - o}


def summary(c: SizeComparison) -> str:
    """One line: how much of the code growth is padding, stubs, other code and the symbols."""
    o, n = c.old, c.new
    d_code, d_pad, d_cov = n.code - o.code, n.padding - o.padding, n.covered - o.covered
    line = (f"code {o.code} -> {n.code} ({d_code:+d} bytes): padding {d_pad:+d}, "
            f"instructions in sized symbols {d_cov:+d}")
    d_skip = n.skipped - o.skipped
    if d_skip:
        line += f" (of which {d_skip:+d} in symbols bloat-o-meter skips)"
    if o.stubs or n.stubs or o.stub_bytes or n.stub_bytes:
        line += f", linker stubs {n.stub_bytes - o.stub_bytes:+d} ({o.stubs} -> {n.stubs} stubs)"
    if n.other != o.other:
        line += f", other unsized code {n.other - o.other:+d}"
    if n.fill != o.fill:
        line += f", alignment fill (runs of 4 KB and more) {n.fill - o.fill:+d}"
    return line


def _json(c: SizeComparison, top):
    return {
        "old": c.old_path, "new": c.new_path,
        "symbols": list(_sym_records(c, top)),
        "sections": list(_section_records(c)),
        "groups": {k: _triple(c.old.groups[k], c.new.groups[k]) for k in c.old.groups},
        "padding": _triple(c.old.padding, c.new.padding),
        "fill": _triple(c.old.fill, c.new.fill),
        "stubs": _triple(c.old.stubs, c.new.stubs),
        "stub_bytes": _triple(c.old.stub_bytes, c.new.stub_bytes),
        "other_unsized": _triple(c.old.other, c.new.other),
        "code": _triple(c.old.code, c.new.code),
        "in_symbols": _triple(c.old.covered, c.new.covered),
        "in_skipped_symbols": _triple(c.old.skipped, c.new.skipped),
        "cold": _triple(c.old.cold, c.new.cold),
        "text_unlikely": _triple(c.old.unlikely, c.new.unlikely),
        "total": _triple(c.table.total_old, c.table.total_new),
        "summary": summary(c),
    }


def render(c: SizeComparison, fmt: str, top: int | None = None) -> str:
    return export.render(fmt, {"text": lambda: _text(c, top), "md": lambda: _markdown(c, top),
                               "json": lambda: _json_text(c, top), "csv": lambda: _csv(c, top)})


def _json_text(c: SizeComparison, top) -> str:
    import json
    return json.dumps(_json(c, top), indent=1) + "\n"


def _csv(c: SizeComparison, top) -> str:
    import csv
    import io
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["kind", "name", "type", "old", "new", "delta", "footprint_old", "footprint_new"])
    for r in _sym_records(c, top):
        w.writerow(["symbol", csv_cell(r["name"]), r["type"], _blank(r["old"]), _blank(r["new"]), r["delta"],
                    _blank(r["footprint_old"]), _blank(r["footprint_new"])])
    for r in _section_records(c):
        w.writerow(["section", csv_cell(r["name"]), "", _blank(r["old"]), _blank(r["new"]), r["delta"], "", ""])
    for name, o, n in _extras(c):
        w.writerow(["summary", csv_cell(name), "", o, n, n - o, "", ""])
    return out.getvalue()


def _blank(v):
    return "" if v is None else v


def _dash(v):
    return "-" if v is None else v


def _extras(c: SizeComparison, totals: tuple[int, int] | None = None):
    o, n = c.old, c.new
    total_old, total_new = totals or (c.table.total_old, c.table.total_new)
    return [(f"{k} (sections)", o.groups[k], n.groups[k]) for k in o.groups] + [
        ("padding in code", o.padding, n.padding),
        ("alignment fill (runs of 4 KB and more)", o.fill, n.fill),
        ("linker stubs (bytes)", o.stub_bytes, n.stub_bytes),
        ("linker stubs (count)", o.stubs, n.stubs),
        ("other code outside sized symbols", o.other, n.other),
        ("code in sized symbols", o.covered, n.covered),
        ("  of which skipped " + SKIPPED_NOTE, o.skipped, n.skipped),
        (".cold symbols", o.cold, n.cold),
        (".text.unlikely", o.unlikely, n.unlikely),
        ("symbols total", total_old, total_new)]


def _text(c: SizeComparison, top) -> str:
    block = c.summaries[0].text_block(c.summaries[1], CODE_LETTERS) if top is None and c.match is None else None
    if block is not None:   # C: the rows of a pair of LLVM archives, a quarter million, in one go
        return _text_rest(c, block[0], block[1:])
    return _text_rest(c, "\n".join(_text_table(c, top)) + "\n", (c.table.total_old, c.table.total_new))


def _text_table(c: SizeComparison, top) -> list[str]:
    t = c.table
    lines = ["add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)" % (
        t.add, t.remove, t.grow, t.shrink, t.up, -t.down, t.up - t.down),
        "%-40s %7s %7s %+7s %10s" % ("Symbol", "old", "new", "delta", "footprint")]
    # Columns first, then one format per row: an LLVM archive pair prints a quarter million rows.
    names, olds, news, deltas, kinds, f_old, f_new = t.columns(
        top, "names", "olds", "news", "deltas", "letters", "footprint_old", "footprint_new")
    if not "".join(names).isprintable():   # some name holds control characters: escape each
        names = list(map(term_text, names))
    footprint = ["%+d" % ((n or 0) - (o or 0)) if k in CODE_LETTERS and (o or n) else ""
                 for k, o, n in zip(kinds, f_old, f_new)]
    lines += map("%-40s %7s %7s %+7d %10s".__mod__, zip(names, olds, news, deltas, footprint))
    otot, ntot = t.total_old, t.total_new
    lines.append("Total: Before=%d, After=%d, chg %+.2f%%" % (
        otot, ntot, (ntot - otot) * 100.0 / otot if otot else 0))
    return lines


def _text_rest(c: SizeComparison, table: str, totals: tuple[int, int]) -> str:
    """TABLE (the symbols, to the Total line), then sections, the code's parts and the summary."""
    lines = ["", "The total above is bloat-o-meter's; what follows is counted apart from it (it cannot see "
             "padding):", "%-40s %10s %10s %+10s" % ("Section", "old", "new", "delta")]
    for r in _section_records(c):
        lines.append("%-40s %10s %10s %+10d" % (term_text(r["name"]), _dash(r["old"]), _dash(r["new"]),
                                                 r["delta"]))
    lines.append("")
    for name, o, n in _extras(c, totals):
        lines.append("%-40s %10d %10d %+10d" % (name, o, n, n - o))
    lines += ["", summary(c)]
    return table + "\n".join(lines) + "\n"


def _markdown(c: SizeComparison, top) -> str:
    t = c.table
    lines = [f"`flagbench size`: add/remove {t.add}/{t.remove}, grow/shrink {t.grow}/{t.shrink}, "
             f"up/down {t.up}/{-t.down} ({t.up - t.down:+d})", "",
             "| symbol | old | new | delta |", "|---|---:|---:|---:|"]
    for r in _sym_records(c, top):
        lines.append(f"| {md_code(r['name'])} | {_dash(r['old'])} | {_dash(r['new'])} | {r['delta']:+d} |")
    lines += ["", f"bloat-o-meter's total {t.total_new - t.total_old:+d} B (Before={t.total_old}, After={t.total_new});",
              "counted apart from it (it cannot see padding):",
              "", "| | old | new | delta |", "|---|---:|---:|---:|"]
    for name, o, n in _extras(c):
        lines.append(f"| {md_cell(name.strip())} | {o} | {n} | {n - o:+d} |")
    lines += ["", md_cell(summary(c))]
    return "\n".join(lines) + "\n"
