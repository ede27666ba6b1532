"""`flagbench series`'s table: text within 100 columns, markdown, json, and an HTML page with a
bar per commit (size, and each count). Reads series.Series (series.load: the stored run);
nothing here builds or measures."""
from __future__ import annotations

import re

from flagbench import attribution as attr
from flagbench import export
from flagbench.series import Delta, Row, Series
from flagbench.textsafe import term_text

WIDTH = 100
DETAIL_INDENT = 14        # a commit's details stand under its subject
FORMATS = export.choices("text", "md", "json", "html")
_SHORT_METRICS = {"kernel_insns_per_iter": "k/it", "user_insns_per_iter": "u/it", "insns_per_iter": "i/it",
                  "insns_per_call": "i/call", "insns_per_byte": "i/B"}


def count_labels(series: Series) -> list[str]:
    """Every counted metric any row has, in first-seen order."""
    out: dict[str, None] = {}
    for r in series.rows:
        out.update(dict.fromkeys(r.counts))
    return list(out)


def _short_label(label: str) -> str:
    bench, _, metric = label.rpartition(" ")
    return f"{bench} {_SHORT_METRICS.get(metric, metric)}"


def _num(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if abs(v) >= 100 or float(v).is_integer():
        return f"{v:+,.0f}" if signed else f"{v:,.0f}"
    return f"{v:+.2f}" if signed else f"{v:.2f}"


def _cells(r: Row, labels: list[str], base: bool) -> list[str]:
    """The row's columns after commit and subject."""
    if base:
        return ["base", "", "", "", "", "", *(_num(r.counts.get(k), signed=False) for k in labels)]
    d, b = r.vs_parent, r.vs_base
    if d is None:
        return ["?", _num(b.total) if b else "?", "", "", "", "", *("" for _ in labels)]
    return [_num(d.total), _num(b.total) if b else "-", f"{d.add}/{d.remove}", f"{d.grow}/{d.shrink}",
            _num(d.padding), "-" if d.changed is None else str(d.changed),
            *(_num(d.counts.get(k)) for k in labels)]


HEAD = ["size", "vs base", "add/rm", "gr/sh", "pad", "asm"]


def text(series: Series) -> str:
    labels = count_labels(series)
    moving = [k for k in labels if any(r.vs_parent and r.vs_parent.counts.get(k) for r in series.rows)]
    shown = [k for k in labels if k in moving] + [k for k in labels if k not in moving]
    widths = [7, 7, 6, 5, 6, 4]
    fixed = 12 + sum(2 + w for w in widths)
    count_w = 13
    room = max(0, (WIDTH - fixed - 2 - 18) // (count_w + 2))   # a subject keeps 18 columns at least
    left_out, shown = shown[room:], shown[:room]
    subject_w = WIDTH - fixed - 2 - len(shown) * (count_w + 2)
    widths += [count_w] * len(shown)
    head = [*HEAD, *(_short_label(k)[:count_w] for k in shown)]
    lines = [*_wrap(term_text(_title(series))), "",
             f"{'commit':12}  {'subject':{subject_w}}" + "".join(f"  {h:>{w}}" for h, w in zip(head, widths))]
    previous = None
    for i, r in enumerate(series.rows):
        subject = term_text(r.commit.subject)   # a subject is the committer's text: no escape sequences
        subject = subject if len(subject) <= subject_w else subject[:subject_w - 1] + "~"
        start = f"{r.commit.short:12}  {subject:{subject_w}}"
        if r.built:
            cells = _cells(r, shown, i == 0)
            lines.append(start + "".join(f"  {c:>{w}}" for c, w in zip(cells, widths)))
        else:
            why = (term_text(r.error) if r.error.startswith("does not ") else
                   f"does not build: {term_text(r.error)}") if r.error else "not built"
            lines.append(f"{start}  {why}"[:WIDTH])
        why = _compared(r, previous, i == 0)
        if why:
            lines.append(f"{'':12}  ({why})"[:WIDTH])
        lines += [_fit(f"{'':{DETAIL_INDENT}}{line}") for line in details(series, r)]
        previous = r.commit.short
    lines += [""] + [part for line in _legend(series, left_out) for part in _wrap(term_text(line))]
    return "\n".join(line.rstrip() for line in lines) + "\n"


SIZES_SHOWN = 4


def details(series: Series, r: Row) -> list[str]:
    """What a reviewer pastes under a commit's row: the functions that grew or shrank most
    (bloat-o-meter's lines), then each count that moved with its cause (terminal-safe text)."""
    d = r.vs_parent
    if d is None or not r.built:
        return []
    out = []
    sizes = [f"{term_text(n)} {_num(x)}" for n, x in d.sizes if x][:SIZES_SHOWN]
    if sizes:
        more = len([x for _, x in d.sizes if x]) - len(sizes)
        out.append("size: " + ", ".join(sizes) + (f" (+{more} more)" if more > 0 else ""))
    for k, v in d.counts.items():
        if v:
            head = f"{_short_label(k)} {_num(v)}:"
            why = count_cause(series, k, d, r, width=WIDTH - DETAIL_INDENT - 2)
            # on its own line, under the count, where the two would not fit one
            fits = DETAIL_INDENT + len(head) + 1 + len(why) <= WIDTH
            out += [f"{head} {why}"] if fits else [head, f"  {why}"]
    return out


def count_cause(series: Series, label: str, d: Delta, row: Row | None = None, width: int = WIDTH) -> str:
    """Why a count moved. With per-symbol counts of the row and the commit it is compared with (a
    guest's kernel), attribution's split: the changed functions that ran, and the rest against the
    base's A/A floor. Without them, what the series knows: the function the bench times changed
    code (direct); no function's code changed at all (only addresses or data moved); or changed
    functions that may or may not run (unknown)."""
    fn = series.measured.get(label.rpartition(" ")[0])
    if d.changed is None:
        return "unknown: asm not compared (--no-asm)"
    old = series.row(row.compared_with) if row is not None else None
    if old is not None and label in old.profiles and label in row.profiles:
        a = attr.attribute(old.profiles[label], row.profiles[label], d.functions,
                           floor=series.floor(label),
                           total_old=old.counts.get(label),
                           total_new=row.counts.get(label))
        return str(attr.cause_line(attr.cause(a, width=width + len("cause: ")))).removeprefix("cause: ")
    if fn and fn in d.functions:
        others = len(d.functions) - 1
        return f"direct: {term_text(fn)} (the bench's function) changed" + (f", {others} more" if others else "")
    if not d.functions:
        return "layout: no function's code changed, only addresses (or data)"
    names = ", ".join(term_text(f) for f in d.functions[:3]) + (" ..." if len(d.functions) > 3 else "")
    return f"unknown: changed {names}; per-symbol counts would say if they ran"


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 3] + "..."


def _compared(r: Row, previous: str | None, base: bool) -> str:
    """Why a row is compared with what it is, where the row above is not that (or it is a merge)."""
    parent = (r.commit.first_parent or "")[:12]
    if base or not r.built:
        return ""
    if not r.compared_with:
        return f"its first parent {parent or '(none)'} is not in the series: not compared"
    if r.commit.merge:
        return f"a merge: compared with its first parent {r.compared_with}" + (
            "" if r.compared_with == parent else ", the nearest that built")
    if r.compared_with == previous:
        return ""
    if r.compared_with == parent:
        return f"compared with {r.compared_with}, its first parent"
    return f"compared with {r.compared_with}, the nearest first-parent ancestor that built"


def _wrap(line: str) -> list[str]:
    import textwrap
    return textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False) or [""]


def _title(series: Series) -> str:
    n = len(series.rows) - 1
    built = sum(r.built for r in series.rows[1:])
    return (f"flagbench series: {series.name} {series.cell}, {series.range} "
            f"({n} commits, {built} built) in {series.repo}")


def _legend(series: Series, left_out: list[str]) -> list[str]:
    out = ["size: bloat-o-meter's total delta against the commit's first parent (vs base: against the base); "
           "add/rm, gr/sh: functions added/removed, grown/shrunk; pad: padding between functions; "
           "asm: functions whose code changed."]
    if count_labels(series):
        out.append("counts: exact, the base's value, then each commit's change against its first parent "
                   "(k/it: kernel instructions per iteration).")
    for r in series.rows:
        for t in r.timed:
            out.append(f"time on {series.place}, {r.commit.short} against {r.compared_with} in {t.pairs} paired "
                       f"rounds: {t.label} {_pct(t.estimate)} [{_pct(t.low)}, {_pct(t.high)}]")
    if left_out:
        out.append(f"not shown here (see --format md or json): {', '.join(left_out)}")
    out.append(f"run {series.run_id}; builds took {series.seconds:.0f} s: " + _took(series.rows))
    return [*out, *series.notes]


def _pct(ratio: float | None) -> str:
    return "?" if ratio is None else f"{(ratio - 1) * 100:+.1f} %"


def _took(rows: list[Row]) -> str:
    """Where the time went: the base (a first checkout and a whole build, when cold), then each
    commit after it (a walk and an incremental build), and what came from the cache."""
    fresh = [r for r in rows if r.built and not r.cached]
    after = [r.seconds for r in rows[1:] if not r.cached and (r.built or r.error)]
    parts = []
    if fresh and fresh[0] is rows[0]:
        parts.append(f"the base {rows[0].seconds:.0f} s")
    if after:
        parts.append(f"{len(after)} commits after it {min(after):.0f}-{max(after):.0f} s each "
                     f"(mean {sum(after) / len(after):.0f})" if len(after) > 1 else f"1 commit after it {after[0]:.0f} s")
    cached = sum(r.cached for r in rows)
    if cached:
        parts.append(f"{cached} from the cache")
    return "; ".join(parts) + " (builds; then the measurements)"


def markdown(series: Series) -> str:
    """For a mail or a review: the text table (100 columns, the details under each commit) in a
    fenced block, whose fence is longer than any run of backticks in it (a subject cannot end it)."""
    table = text(series)
    longest = max((len(m) for m in re.findall(r"`+", table)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{table}{fence}\n"


def as_json(series: Series) -> dict:
    def delta(d: Delta | None):
        return None if d is None else {"total": d.total, "grow": d.grow, "shrink": d.shrink, "add": d.add,
                                       "remove": d.remove, "padding": d.padding, "changed": d.changed,
                                       "functions": d.functions[:50], "counts": d.counts}
    return {"experiment": series.path, "run": series.run_id, "cell": series.cell, "repo": series.repo,
            "range": series.range, "seconds": round(series.seconds, 1), "notes": series.notes,
            "rows": [{**r.commit.to_json(), "short": r.commit.short, "built": r.built, "error": r.error or None,
                      "cached": r.cached, "seconds": round(r.seconds, 1), "compared_with": r.compared_with or None,
                      "files": [str(f) for f in r.files], "size_file": str(r.size_file) if r.size_file else None,
                      "counts": r.counts, "vs_parent": delta(r.vs_parent), "vs_base": delta(r.vs_base),
                      "causes": {k: count_cause(series, k, r.vs_parent, r)
                                 for k, v in (r.vs_parent.counts if r.vs_parent else {}).items() if v},
                      "timed": [t.__dict__ for t in r.timed]}
                     for r in series.rows]}


def html(series: Series) -> str:
    """A page: the table, and per-commit bars (size, then each count) against the row before."""
    from html import escape

    from flagbench.report.plots import bars

    labels = count_labels(series)
    head = ["commit", "subject", *HEAD, *labels]
    body = []
    for i, r in enumerate(series.rows):
        cells = ([f"does not build: {r.error}"] if not r.built
                 else _cells(r, labels, i == 0))
        span = f' colspan="{len(head) - 2}"' if not r.built else ""
        body.append(f"<tr><td><code>{escape(r.commit.short)}</code></td><td>{escape(r.commit.subject)}</td>"
                    + "".join(f"<td{span}>{escape(c)}</td>" for c in cells) + "</tr>")
    name = {r.commit.short: f"{r.commit.short[:7]} {r.commit.subject[:40]}" for r in series.rows}
    plots = [bars([(name[r.commit.short], r.vs_parent.total) for r in series.rows if r.vs_parent],
                  title="bloat-o-meter total, each commit against the one before", unit="bytes")]
    for k in labels:
        plots.append(bars([(name[r.commit.short], r.vs_parent.counts.get(k, 0)) for r in series.rows if r.vs_parent],
                          title=f"{k}, each commit against the one before", unit="instructions"))
    legend = "".join(f"<p>{escape(line)}</p>" for line in _legend(series, []))
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>flagbench series</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px}td{text-align:right}td:nth-child(2){text-align:left}"
            "</style></head><body>"
            f"<h1>{escape(_title(series))}</h1><table><tr>{''.join(f'<th>{escape(h)}</th>' for h in head)}</tr>"
            + "".join(body) + "</table>" + "".join(p for p in plots if p) + legend + "</body></html>\n")


def render(series: Series, fmt: str) -> str:
    import json
    return export.render(fmt, {"text": lambda: text(series), "md": lambda: markdown(series),
                               "json": lambda: json.dumps(as_json(series), indent=1) + "\n",
                               "html": lambda: html(series)})
