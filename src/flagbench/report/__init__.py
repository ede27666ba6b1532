"""The report of stored samples, as text, md, json, csv or html.

`build_tables` (tables.py) groups samples into tables and compares each variant with the
baseline; `cells.py` formats them; `blocks` turns them into document blocks that the md and html
exporters (doc.py) write, with plots (plots.py, figures.py) in the html; text, json and csv
are written from the tables here.

>>> samples = [dict(bench="loop", metric="ns_per_iter", unit="ns", variant=v, target="x86_64",
...                 compiler="gcc", params={}, value=x)
...            for v, base in (("O2", 29.6), ("O0", 59.4)) for x in [base * (1 + i / 1000) for i in range(9)]]
>>> print(render(build_tables(samples, ["O2", "O0"]), "md"))
<a id="loop-ns-per-iter-x86-64-gcc"></a>
**loop** · ns_per_iter (ns) · x86_64/gcc · lower is better
<BLANKLINE>
|    O2 |    O0 |               O0 vs O2 (lower is better) |
|------:|------:|-----------------------------------------:|
| 29.72 | 59.64 | +100.7 % [+100.1, +101.3] p=0.000 slower |
<BLANKLINE>
change: the Hodges-Lehmann estimate of new/old - 1 with its 95 % interval [low, high] (the estimate
always lies inside it); variants measured in the same rounds are compared round by round (p:
Wilcoxon signed-rank, interval of the Walsh averages), else as two samples (p: Mann-Whitney U, Moses
interval); faster/slower only when both agree, else ~; exact: instruction counts, no noise
<BLANKLINE>
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, replace

from flagbench.report.cells import (LEGEND, fmt_change, fmt_value, has_intervals, notes,  # noqa: F401
                                    shape, table_anchor, table_cells)
from flagbench.report.doc import WIDTH, Block, Code, Grid, Heading, Html, Markdown, Para, fill, note_blocks
from flagbench.report.tables import EXACT_TABLE, Row, Table, build_tables  # noqa: F401
from flagbench import export
from flagbench.stats import Change
from flagbench.textsafe import csv_cell, term_text

FORMATS = export.choices("text", "md", "json", "csv", "html")


def blocks(tables: list[Table], *, prefix: str = "", figures: bool = False, causes: dict | None = None) -> list[Block]:
    """Each table as a titled, anchored grid with its notes and its verdicts' causes (causes.py);
    with `figures`, its plots after it (only the html exporter draws those)."""
    from flagbench.report.figures import bench_forest, table_figures
    out: list[Block] = []
    for i, t in enumerate(tables):
        t, hidden = _pasteable(t)
        header, body = table_cells(t)
        out.append(Grid(header, body, title=t.title, anchor=table_anchor(t, prefix), notes=notes(t) + hidden,
                        align="r" * len(header), keys=len(t.param_keys) + (shape(t) != "side")))
        if lines := _cause_lines(t, causes):   # as printed: one line each, under 100 columns
            out.append(Code(lines))
        if figures:
            out += table_figures(t)
            group = (t.bench, t.target, t.compiler)
            if i + 1 == len(tables) or (tables[i + 1].bench, tables[i + 1].target, tables[i + 1].compiler) != group:
                out += bench_forest([u for u in tables if (u.bench, u.target, u.compiler) == group])
    return out


def _pasteable(t: Table) -> tuple[Table, list[str]]:
    """A sweep's insns_per_call rows are its insns_per_byte rows times the size: the pasted tables
    keep the per-byte ones (json and csv keep both)."""
    counts = {r.params.get("count") for r in t.rows}
    if not t.exact or not {"insns_per_byte", "insns_per_call"} <= counts:
        return t, []
    rows = [r for r in t.rows if r.params.get("count") != "insns_per_call"]
    return replace(t, rows=rows), ["insns_per_call (= insns_per_byte x size): in --format json and csv"]


def _cause_lines(t: Table, causes: dict | None) -> list[str]:
    from flagbench.causes import cause_texts
    found = (causes or {}).get((t.bench, t.metric, t.target, t.compiler))
    return cause_texts(found, "text") if found else []


def failure_blocks(failures: list[dict]) -> list[Block]:
    if not failures:
        return []
    return [Grid(["bench", "cell", "reason"], [[f["bench"], f["cell"], f.get("reason") or ""] for f in failures],
                 title="failed cells", align="lll")]


def render(tables: list[Table], fmt: str, *, run: dict | None = None, failures: list[dict] | None = None,
           profiles: list | None = None, causes: dict | None = None) -> str:
    """`profiles` (profile.Profile, from `flagbench profile`) are added to md, html and json;
    `causes` (causes.run_causes) go under their tables in text, md, html and json."""
    failures = failures or []
    legend = [Para([LEGEND])] if has_intervals(tables) else []
    said = note_blocks(run_notes(run))
    extra = (lambda: _profile_blocks(profiles, tables) if profiles else [])

    def md() -> str:
        head = [Para([line])] if (line := run_line(run)) else []
        return Markdown().render(head + said + blocks(tables, causes=causes) + extra() + failure_blocks(failures)
                                 + legend)

    def html() -> str:
        title = f"flagbench run {run['id']}: {run['experiment']}" if run else "flagbench report"
        head = [Heading(1, title)] + ([Para([line])] if (line := run_line(run)) else []) + said + legend
        return Html().render(head + blocks(tables, figures=True, causes=causes) + extra() + failure_blocks(failures),
                             title)

    def json_doc() -> str:
        if not (profiles or causes):
            return _json(tables, run, failures)
        doc = json.loads(_json(tables, run, failures))
        if profiles:
            doc["profiles"] = [p.to_json() for p in profiles]
        for t, d in zip(tables, doc["tables"]):
            if found := (causes or {}).get((t.bench, t.metric, t.target, t.compiler)):
                d["causes"] = [rc.to_json() for rc in found]
        return json.dumps(doc, indent=2, default=str) + "\n"
    return export.render(fmt, {"text": lambda: _text(tables, run, failures, causes), "md": md, "html": html,
                               "json": json_doc, "csv": lambda: _csv(tables, run, failures)})


def _profile_blocks(profiles: list, tables: list[Table]) -> list[Block]:
    from flagbench.report.profiles import blocks as profile_blocks
    baseline = tables[0].variants[0] if tables else profiles[0].variant
    return [Heading(3, "profiles (flagbench profile)", "profiles")] + profile_blocks(profiles, baseline)


def run_notes(run: dict | None) -> list[str]:
    """What the run said while it measured (the A/A noise floor of a booted kernel, a kernel
    profile, the experiment's own notes): kept in its provenance, shown by every format."""
    from flagbench.report.case import unpath
    notes = (run or {}).get("provenance", {}).get("notes") or []
    return [unpath(n) for n in notes if isinstance(n, str)]


def run_line(run: dict | None) -> str | None:
    if not run:
        return None
    p = run.get("provenance", {})
    load = p.get("loadavg")
    numbers = isinstance(load, list) and load and all(isinstance(x, (int, float)) for x in load)
    load = " ".join(f"{x:.2f}" for x in load) if numbers else "?"
    features = p.get("cpu_features")
    features = f" ({' '.join(map(str, features))})" if isinstance(features, list) and features else ""
    return (f"run {run['id']} · {run['experiment']} ({run['experiment_hash'][:12]}) · {run['started']} · "
            f"{p.get('cpu', '?')}{features} · {str(p.get('kernel', '?')).split(' #')[0]} · load {load} · "
            f"flagbench {p.get('flagbench', '?')}" + _hosts_part(p.get("hosts")))


def _hosts_part(hosts: dict | None) -> str:
    """The ssh hosts that timed the run; exact counts are never taken there."""
    if not hosts:
        return ""
    def features(h: dict) -> str:
        return f" ({' '.join(h['cpu_features'])})" if isinstance(h.get("cpu_features"), list) and h["cpu_features"] else ""
    names = ", ".join(f"{name} ({h.get('machine', '?')}, {h.get('cpu') or '?'}{features(h)} x {h.get('cpus') or '?'}, "
                      f"{h.get('kernel', '?')})" for name, h in hosts.items())
    return f" · timed on {names} · exact counts taken here (they do not depend on the machine)"


def _text(tables, run, failures, causes=None) -> str:
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    buffer = io.StringIO()
    console = Console(file=buffer, width=WIDTH, no_color=True, highlight=False, emoji=False)

    def say(text: str, first: str = "", rest: str = "") -> None:   # no markup, no raw controls, wrapped
        for line in fill(term_text(text), WIDTH, first, rest):
            console.print(escape(line), soft_wrap=True)
    if (line := run_line(run)):
        say(line)
    for note in run_notes(run):
        first, *more = note.split("\n")
        say(first, "note: ", "      ")
        for line in more:
            console.print(escape(term_text(line)), soft_wrap=True)
    for t in tables:
        t, hidden = _pasteable(t)
        header, body = table_cells(t)
        say(t.title)
        table = RichTable(box=box.SIMPLE_HEAD)
        for name in header:
            table.add_column(escape(term_text(name)), justify="right")
        for line in body:
            table.add_row(*(escape(term_text(x)) for x in line))
        console.print(table)
        for note in notes(t) + hidden:
            say(note, "  note: ", "        ")
        for line in _cause_lines(t, causes):
            say(line)
    for f in failures:
        say(f"FAILED {f['bench']} {f['cell']}: {f['reason']}", "", "  ")
    return buffer.getvalue()


def _change_dict(c: Change) -> dict:
    d = asdict(c)
    d["warnings"] = list(c.warnings)
    d["ratio"] = None if c.ratio == float("inf") else c.ratio
    d["estimate"] = None if c.estimate == float("inf") else c.estimate
    return d


def _json(tables, run, failures) -> str:
    doc = {"run": run, "failures": failures, "tables": []}
    for t in tables:
        doc["tables"].append({
            "bench": t.bench, "metric": t.metric, "unit": t.unit, "target": t.target, "compiler": t.compiler,
            "exact": t.exact, "baseline": t.variants[0], "variants": t.variants, "param_keys": t.param_keys,
            "layouts": t.layouts,
            "rows": [{"params": r.params,
                      "variants": {v: {"n": len(r.values.get(v, [])), "median": r.median(v),
                                       "samples": r.values.get(v, [])} for v in t.variants},
                      "layouts": {c: {"n": len(r.values.get(c, [])), "median": r.median(c),
                                      "ratio": r.layout_ratios.get(c), "samples": r.values.get(c, [])}
                                  for cs in t.layouts.values() for c in cs},
                      "comparisons": {v: _change_dict(c) for v, c in r.changes.items()},   # a key users parse
                      "bands": {v: asdict(b) for v, b in r.bands.items()},
                      "band_verdicts": r.band_verdicts}
                     for r in t.rows]})
    return json.dumps(doc, indent=2, default=str) + "\n"


CSV_COLUMNS = ("bench", "target", "compiler", "params", "metric", "unit", "variant", "n", "median", "baseline",
               "ratio", "ci_low", "ci_high", "p_value", "verdict", "warnings", "band_low", "band_high",
               "band_verdict", "estimate")


def _csv(tables, run, failures) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    row = lambda cells: writer.writerow([csv_cell(c) if isinstance(c, str) else c for c in cells])  # noqa: E731
    row(CSV_COLUMNS)
    for t in tables:
        for r in t.rows:
            params = ",".join(f"{k}={v}" for k, v in r.params.items())
            for v in t.variants:
                c, band = r.changes.get(v), r.bands.get(v)
                row([t.bench, t.target, t.compiler, params, t.metric, t.unit, v,
                     len(r.values.get(v, [])), r.median(v), t.variants[0],
                     *(("", "", "", "", "baseline" if v == t.variants[0] else "", "") if c is None else
                       (c.ratio, _blank(c.ci_low), _blank(c.ci_high), _blank(c.p_value), c.verdict,
                        "; ".join(c.warnings))),
                     *((band.low, band.high) if band else ("", "")), r.band_verdicts.get(v, ""),
                     "" if c is None else c.estimate])
                for column in t.layouts.get(v, []):   # a relink: its ratio to its own variant
                    row([t.bench, t.target, t.compiler, params, t.metric, t.unit, column,
                         len(r.values.get(column, [])), r.median(column), v,
                         _blank(r.layout_ratios.get(column)), "", "", "", "layout", "", "", "", "", ""])
    for f in failures:
        row([f["bench"], "", "", f["cell"], "", "", "", 0, "", "", "", "", "", "", "failed",
             f.get("reason") or "", "", "", "", ""])
    return buffer.getvalue()


def _blank(x):
    return "" if x is None else x


def report_run(store, run_id: int, fmt: str) -> str:
    """The whole report of one stored run, in one of FORMATS."""
    from flagbench.report.profiles import stored
    run = store.run(run_id)
    samples = store.samples(run_id)
    tables = _tables(samples, run, store.metrics(run_id))
    profiles = stored(store, run["experiment_hash"])
    return render(tables, fmt, run=run, failures=[c for c in store.cells(run_id) if c["status"] == "failed"],
                  profiles=profiles, causes=stored_causes(store, run_id, tables, samples, profiles))


def stored_causes(store, run_id: int, tables: list[Table], samples=None, profiles=None) -> dict:
    """The causes of a stored run's tables (causes.run_causes), from the store alone."""
    from flagbench.causes import run_causes
    from flagbench.report.profiles import stored
    run = store.run(run_id)
    if profiles is None:
        profiles = stored(store, run["experiment_hash"])
    return run_causes(tables, run, profiles, store.samples(run_id) if samples is None else samples)


def run_tables(store, run_id: int) -> list[Table]:
    """The tables of one stored run, variants in the experiment's order."""
    return _tables(store.samples(run_id), store.run(run_id), store.metrics(run_id))


def _tables(samples: list[dict], run: dict, declared: dict) -> list[Table]:
    order = run["provenance"].get("variants")
    named = isinstance(order, list) and all(isinstance(v, str) for v in order)
    return build_tables(samples, order if named else None, declared=declared)
