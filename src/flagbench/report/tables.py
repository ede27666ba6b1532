"""Tables from stored samples: one per benchmark x metric x target/compiler.

Rows are the sweep points of the cell (``:dalign=3,salign=1,size=4096`` -> alignment x size, like
the memcpy table of seed 004; ``:mode=threads,tasks=2`` -> mode x tasks for will-it-scale), columns
the variants' medians, then each variant against the first one (the baseline) with its verdict.

>>> samples = [dict(bench="loop", metric="ns_per_iter", unit="ns", variant=v, target="x86_64",
...                 compiler="gcc", params={}, value=x)
...            for v, base in (("O2", 29.6), ("O0", 59.4)) for x in [base * (1 + i / 1000) for i in range(9)]]
>>> print(render(build_tables(samples, ["O2", "O0"]), "md"))
**loop** · ns_per_iter (ns) · x86_64/gcc
<BLANKLINE>
|    O2 |    O0 |                                 O0 vs O2 |
|------:|------:|-----------------------------------------:|
| 29.72 | 59.64 | +100.7 % [+100.1, +101.3] p=0.000 slower |
<BLANKLINE>
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from flagbench.stats import (Comparison, LayoutBand, band_verdict, compare, compare_exact, higher_is_better,
                             is_exact_metric, layout_band)

FORMATS = ("text", "md", "json", "csv")
# Sweep axes go last so rows group by alignment (memcpy) or by mode (will-it-scale).
EXACT_TABLE = "exact counts"
_INNER_AXES = ("size", "len", "length", "tasks", "threads")


@dataclass
class Row:
    params: dict[str, str]
    values: dict[str, list[float]]                      # variant -> samples
    comparisons: dict[str, Comparison] = field(default_factory=dict)   # variant -> vs baseline
    bands: dict[str, LayoutBand] = field(default_factory=dict)          # variant -> its layout band
    band_verdicts: dict[str, str] = field(default_factory=dict)         # variant -> vs the baseline's band
    layout_ratios: dict[str, float] = field(default_factory=dict)       # relink column -> median / its variant's

    def median(self, variant: str) -> float | None:
        values = sorted(self.values.get(variant, ()))
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


@dataclass
class Table:
    bench: str
    metric: str
    unit: str
    target: str
    compiler: str
    variants: list[str]                                 # the first is the baseline
    param_keys: list[str]
    rows: list[Row]
    exact: bool
    layouts: dict[str, list[str]] = field(default_factory=dict)   # variant -> its relinks' columns ("v@L1", ...)

    @property
    def title(self) -> str:
        unit = f" ({self.unit})" if self.unit and self.unit != self.metric else ""
        return f"{self.bench} · {self.metric}{unit} · {self.target}/{self.compiler}"


def _natural(value: str):
    """Numbers sort as numbers: size 32 < 100 < 4096."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", value) if p]


def build_tables(samples: list[dict], variant_order: list[str] | None = None, alpha: float = 0.05) -> list[Table]:
    """Group samples (as `Store.samples` returns them) into tables and compare each variant to the baseline."""
    groups: dict[tuple, dict[tuple, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    units: dict[tuple, str] = {}
    keys_seen: dict[tuple, list[str]] = defaultdict(list)
    variants_seen: list[str] = []
    for s in samples:
        metric, params = s["metric"], dict(s.get("params") or {})
        if is_exact_metric(metric):   # every counter of a bench in one table, a row each
            metric, params = EXACT_TABLE, {"count": metric, **params}
        key = (s["bench"], metric, s["target"], s["compiler"])
        groups[key][tuple(params.items())][s["variant"]].append(float(s["value"]))
        units.setdefault(key, "" if metric == EXACT_TABLE else s.get("unit", ""))
        keys_seen[key] += [k for k in params if k not in keys_seen[key]]
        if s["variant"] not in variants_seen:
            variants_seen.append(s["variant"])
    order = [v for v in (variant_order or []) if v in variants_seen]
    order += sorted(v for v in variants_seen if v not in order)

    tables = []
    for key, rows_by_params in groups.items():
        bench, metric, target, compiler = key
        param_keys = sorted(keys_seen[key], key=lambda k: k in _INNER_AXES)
        variants = [v for v in order if any(v in vals for vals in rows_by_params.values())]
        variants, layouts = _split_layouts(variants)
        exact = metric == EXACT_TABLE
        rows = []
        for params, values in rows_by_params.items():
            row = Row(dict(params), dict(values))
            base = variants[0]
            for v in variants[1:]:
                if base in values and v in values:
                    row.comparisons[v] = _compare(values[base], values[v], row.params.get("count", metric), exact, alpha)
            _add_bands(row, variants[0], layouts)
            if not exact or any(row.median(v) for v in variants):   # counters that stayed 0 say nothing
                rows.append(row)
        rows.sort(key=lambda r: [_natural(r.params.get(k, "")) for k in param_keys])
        tables.append(Table(bench, metric, units[key], target, compiler, variants, param_keys, rows, exact,
                            layouts))
    tables.sort(key=lambda t: (t.bench, t.target, t.compiler, t.exact, t.metric))
    return tables


def _split_layouts(columns: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Relink columns ("default@L3", run/layout.py) leave the table's variants and become
    their variant's layouts; a column whose variant is not in the table stays a column.

    >>> _split_layouts(["a", "b", "a@L2", "a@L1", "c@L1"])
    (['a', 'b', 'c@L1'], {'a': ['a@L1', 'a@L2']})
    """
    from flagbench.run.layout import split_layout_column
    layouts: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for column in columns:
        parts = split_layout_column(column)
        if parts and parts[0] in columns:
            layouts[parts[0]].append((parts[1], column))
    taken = {c for relinks in layouts.values() for _, c in relinks}
    return [c for c in columns if c not in taken], {v: [c for _, c in sorted(r)] for v, r in layouts.items()}


def _add_bands(row: Row, base: str, layouts: dict[str, list[str]]) -> None:
    """Each relinked variant's band, and every comparison judged against the baseline's band."""
    for variant, columns in layouts.items():
        present = [c for c in columns if row.values.get(c)]
        band = layout_band(row.values.get(variant, []), [row.values[c] for c in present])
        if band is not None:
            row.bands[variant] = band
            row.layout_ratios.update(zip(present, band.ratios))
    for variant, c in row.comparisons.items():
        verdict = band_verdict(c.ci_low, c.ci_high, row.bands.get(base))
        if verdict and c.verdict != "exact":
            row.band_verdicts[variant] = verdict


def _compare(old: list[float], new: list[float], metric: str, exact: bool, alpha: float) -> Comparison:
    if exact:
        c = compare_exact(min(old), min(new), metric=metric)
        if len(set(old)) > 1 or len(set(new)) > 1:   # a count that moves is not exact: say so
            c = Comparison(**{**asdict(c), "warnings": ("count differs from run to run",)})
        return c
    return compare(old, new, higher_is_better=higher_is_better(metric), alpha=alpha, metric=metric)


# -- formatting ---------------------------------------------------------------------------

def fmt_value(value: float | None, exact: bool = False) -> str:
    """
    >>> fmt_value(130.6749), fmt_value(0.012345), fmt_value(1234567.0, exact=True), fmt_value(3.45, exact=True)
    ('130.67', '0.01235', '1234567', '3.45')
    """
    if value is None:
        return "-"
    if (exact and value == int(value)) or abs(value) >= 10000:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def fmt_comparison(c: Comparison | None) -> str:
    """
    >>> fmt_comparison(compare_exact(100, 117)), fmt_comparison(compare_exact(0, 8))
    ('+17.00 % exact', '+8 exact')
    >>> fmt_comparison(compare([1, 2, 3], [1, 2, 3]))
    '~ +0.0 % (n=3+3, no CI)'
    """
    if c is None:
        return "-"
    pct = lambda r: f"{(r - 1) * 100:+.1f}"   # noqa: E731 - ratio -> "+5.0"
    if c.verdict == "exact":
        if c.median_old == 0:        # no ratio from zero: the difference itself
            return f"{c.median_new:+g} exact"
        return f"{(c.ratio - 1) * 100:+.2f} % exact"
    if c.ci_low is None:
        return f"~ {pct(c.ratio)} % (n={c.n_old}+{c.n_new}, no CI)"
    body = f"{pct(c.ratio)} % [{pct(c.ci_low)}, {pct(c.ci_high)}] p={c.p_value:.3f}"
    return f"~ {body}" if c.verdict == "~" else f"{body} {c.verdict}"


WIDE = 3   # more variants than this: one line per row x variant, or the table outgrows a terminal


def _table_cells(t: Table) -> tuple[list[str], list[list[str]]]:
    if len(t.variants) > WIDE or t.layouts:
        base = t.variants[0]
        header = list(t.param_keys) + ["variant", "median", f"vs {base}"]
        if t.layouts:
            header += ["layout band", f"vs {base}'s band"]
        body = []
        for r in t.rows:
            for v in t.variants:
                line = [r.params.get(k, "") for k in t.param_keys]
                line += [v, fmt_value(r.median(v), t.exact),
                         "baseline" if v == base else fmt_comparison(r.comparisons.get(v))]
                if t.layouts:
                    band = r.bands.get(v)
                    line += [_fmt_band(band) if band else "",
                             r.band_verdicts.get(v, "-" if v != base else "")]
                body.append(line)
        return header, body
    header = list(t.param_keys) + list(t.variants) + [f"{v} vs {t.variants[0]}" for v in t.variants[1:]]
    body = []
    for r in t.rows:
        line = [r.params.get(k, "") for k in t.param_keys]
        line += [fmt_value(r.median(v), t.exact) for v in t.variants]
        line += [fmt_comparison(r.comparisons.get(v)) for v in t.variants[1:]]
        body.append(line)
    return header, body


def _fmt_band(band: LayoutBand) -> str:
    """
    >>> _fmt_band(LayoutBand(12, 0.889, 1.135, (), 0.0004))
    '-11.1 % .. +13.5 % (12 layouts, p=0.000)'
    """
    p = "" if band.p_value is None else f", p={band.p_value:.3f}"
    return f"{band.as_percent()} ({band.n_layouts} layouts{p})"


def _notes(t: Table) -> list[str]:
    """Warnings, folded: each distinct one once, with the rows it applies to."""
    where: dict[str, list[str]] = defaultdict(list)
    for r in t.rows:
        for v, c in r.comparisons.items():
            for w in c.warnings:
                label = ",".join(f"{k}={val}" for k, val in r.params.items()) or "all"
                where[re.sub(r"\d+ ?%", "N %", w) if "spread" in w else w].append(f"{v}@{label}")
    every = sum(len(r.comparisons) for r in t.rows)
    notes = [f"{w}: {'every row' if len(cells) == every else ', '.join(cells[:4]) + (' …' if len(cells) > 4 else '')}"
             for w, cells in where.items()]
    if t.layouts:
        notes.append("layout band: min..max of median / the variant's median over the variant and its relinks "
                     "with code moved; p: do the layouts differ at all (Kruskal-Wallis); beyond = the whole CI "
                     "lies outside the baseline's band")
    return notes


def render(tables: list[Table], fmt: str, *, run: dict | None = None, failures: list[dict] | None = None) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    failures = failures or []
    return {"text": _text, "md": _md, "json": _json, "csv": _csv}[fmt](tables, run, failures)


def _run_line(run: dict | None) -> str | None:
    if not run:
        return None
    p = run.get("provenance", {})
    load = p.get("loadavg")
    load = " ".join(f"{x:.2f}" for x in load) if load else "?"
    return (f"run {run['id']} · {run['experiment']} ({run['experiment_hash'][:12]}) · {run['started']} · "
            f"{p.get('cpu', '?')} · {p.get('kernel', '?').split(' #')[0]} · load {load} · "
            f"flagbench {p.get('flagbench', '?')}")


def _md(tables, run, failures) -> str:
    out = []
    if (line := _run_line(run)):
        out += [line, ""]
    for t in tables:
        header, body = _table_cells(t)
        bench, rest = t.title.split(" · ", 1)
        out += [f"**{bench}** · {rest}", ""]
        widths = [max(len(x) for x in col) for col in zip(header, *body)]
        cell = lambda xs: "| " + " | ".join(x.rjust(w) for x, w in zip(xs, widths)) + " |"  # noqa: E731
        out += [cell(header), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"]
        out += [cell(line) for line in body]
        out += [f"- {n}" for n in _notes(t)]
        out.append("")
    if failures:
        out += ["**failed cells**", ""] + [f"- {f['bench']} {f['cell']}: {f['reason']}" for f in failures] + [""]
    return "\n".join(out)


def _text(tables, run, failures) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable

    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True, highlight=False, emoji=False)
    if (line := _run_line(run)):
        console.print(line)
    for t in tables:
        header, body = _table_cells(t)
        console.print(t.title)
        table = RichTable(box=box.SIMPLE_HEAD)
        for name in header:
            table.add_column(name, justify="right")
        for line in body:
            table.add_row(*line)
        console.print(table)
        for note in _notes(t):
            console.print(f"  note: {note}")
    for f in failures:
        console.print(f"FAILED {f['bench']} {f['cell']}: {f['reason']}")
    return buffer.getvalue()


def _comparison_dict(c: Comparison) -> dict:
    d = asdict(c)
    d["warnings"] = list(c.warnings)
    d["ratio"] = None if c.ratio == float("inf") else c.ratio
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
                      "comparisons": {v: _comparison_dict(c) for v, c in r.comparisons.items()},
                      "bands": {v: asdict(b) for v, b in r.bands.items()},
                      "band_verdicts": r.band_verdicts}
                     for r in t.rows]})
    return json.dumps(doc, indent=2, default=str) + "\n"


CSV_COLUMNS = ("bench", "target", "compiler", "params", "metric", "unit", "variant", "n", "median", "baseline",
               "ratio", "ci_low", "ci_high", "p_value", "verdict", "warnings", "band_low", "band_high",
               "band_verdict")


def _csv(tables, run, failures) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for t in tables:
        for r in t.rows:
            params = ",".join(f"{k}={v}" for k, v in r.params.items())
            for v in t.variants:
                c, band = r.comparisons.get(v), r.bands.get(v)
                writer.writerow([t.bench, t.target, t.compiler, params, t.metric, t.unit, v,
                                 len(r.values.get(v, [])), r.median(v), t.variants[0],
                                 *(("", "", "", "", "baseline" if v == t.variants[0] else "", "") if c is None else
                                   (c.ratio, _blank(c.ci_low), _blank(c.ci_high), _blank(c.p_value), c.verdict,
                                    "; ".join(c.warnings))),
                                 *((band.low, band.high) if band else ("", "")), r.band_verdicts.get(v, "")])
                for column in t.layouts.get(v, []):   # a relink: its ratio to its own variant
                    writer.writerow([t.bench, t.target, t.compiler, params, t.metric, t.unit, column,
                                     len(r.values.get(column, [])), r.median(column), v,
                                     _blank(r.layout_ratios.get(column)),
                                     "", "", "", "layout", "", "", "", ""])
    for f in failures:
        writer.writerow([f["bench"], "", "", f["cell"], "", "", "", 0, "", "", "", "", "", "", "failed",
                         f.get("reason") or ""])
    return buffer.getvalue()


def _blank(x):
    return "" if x is None else x


def report_run(store, run_id: int, fmt: str) -> str:
    """The whole report of one stored run, in one of FORMATS."""
    run = store.run(run_id)
    samples = store.samples(run_id)
    failures = [c for c in store.cells(run_id) if c["status"] == "failed"]
    order = run["provenance"].get("variants")
    tables = build_tables(samples, order if isinstance(order, list) else None)
    return render(tables, fmt, run=run, failures=failures)
