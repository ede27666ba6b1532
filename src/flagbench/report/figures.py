"""Which plot a table gets in the html report.

- a sweep over size (memcpy and kin): the median against size, one line per implementation or
  variant, a panel per alignment; MB/s when timed, instructions per byte when counted;
- will-it-scale (mode x tasks): operations per second against tasks, a panel per mode;
- layout relinks: each layout's samples as a strip with its box, the baseline's band shaded and
  each variant's interval against it;
- any timed table: a forest of each variant's change and interval against the baseline.
"""
from __future__ import annotations

import math

from flagbench.report import plots
from flagbench.report.doc import Figure
from flagbench.report.tables import Table

FOREST_ROWS = 40      # more changes than this: the sweep's line plot says it better


def _alignment(params: dict[str, str]) -> str:
    d, s = params.get("dalign", "0"), params.get("salign", "0")
    if d == "0" and s == "0":
        return "aligned"
    return f"dst+{d}" + ("" if "salign" not in params else f", src+{s}")


def _point(text: str) -> float | None:
    """A sweep axis value: a finite number, else None (the row is left out of the plot)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def table_figures(t: Table) -> list[Figure]:
    out = []
    keys = set(t.param_keys) - {"count"}
    if "size" in keys:
        out += _sweep(t)
    elif {"mode", "tasks"} <= keys and not t.exact:   # counts of different things are no line against tasks
        out += _wis(t)
    if t.layouts:
        out += _layouts(t)
    return out


def _sweep(t: Table) -> list[Figure]:
    count = None
    if t.exact:   # counted sweeps: instructions per byte (insns_per_call would hide the size axis)
        counts = {r.params.get("count") for r in t.rows}
        count = "insns_per_byte" if "insns_per_byte" in counts else None
        if count is None:
            return []
    panels: dict[str, dict[str, list]] = {}
    for r in t.rows:
        if count and r.params.get("count") != count:
            continue
        size = _point(r.params.get("size", ""))
        if size is None or size <= 0:
            continue
        panel = panels.setdefault(_alignment(r.params), {})
        for v in t.variants:
            m = r.median(v)
            if m is not None:
                panel.setdefault(v, []).append((size, m))
    ylabel = "instructions per byte" if count else (t.unit or t.metric)
    body = plots.lines(sorted(_lines_only(panels).items(), key=lambda kv: kv[0] != "aligned"), xlabel="size (bytes)",
                       ylabel=ylabel, logx=True, size_ticks=True)
    return [Figure(body, f"{t.bench} · {t.target}/{t.compiler}: {ylabel} by size")] if body else []


def _wis(t: Table) -> list[Figure]:
    panels: dict[str, dict[str, list]] = {}
    for r in t.rows:
        tasks = _point(r.params.get("tasks", ""))
        if tasks is None:
            continue
        panel = panels.setdefault(r.params.get("mode", ""), {})
        for v in t.variants:
            m = r.median(v)
            if m is not None:
                panel.setdefault(v, []).append((tasks, m))
    ylabel = "operations per second" if t.metric == "per_second" else (t.unit or t.metric)
    body = plots.lines(sorted(_lines_only(panels).items()), xlabel="tasks", ylabel=ylabel)
    return [Figure(body, f"{t.bench} · {t.target}/{t.compiler}: {ylabel} against tasks")] if body else []


def _lines_only(panels: dict[str, dict[str, list]]) -> dict[str, dict[str, list]]:
    """Panels without the series that have fewer than two points on the x axis: one point
    draws no line (and two values at one x draw a vertical one).

    >>> _lines_only({"p": {"a": [(1, 5.0), (2, 6.0)], "b": [(1, 2140.0), (1, 6.0)]}, "q": {"a": [(1, 1.0)]}})
    {'p': {'a': [(1, 5.0), (2, 6.0)]}}
    """
    out = {}
    for name, series in panels.items():
        kept = {v: pts for v, pts in series.items() if len({x for x, _ in pts}) >= 2}
        if kept:
            out[name] = kept
    return out


def _label(variant: str, params: dict[str, str]) -> str:
    where = ",".join(f"{k}={v}" for k, v in params.items() if k != "count")
    return f"{variant} @ {where}" if where else variant


def bench_forest(tables: list[Table]) -> list[Figure]:
    """One forest per bench and target: every timed change of its tables (the metric named when
    there are several), unless a sweep has too many points for one."""
    timed = [t for t in tables if not t.exact and not t.layouts]
    if not timed:
        return []
    many = len(timed) > 1
    rows = [(_label(v, r.params) + (f" · {t.metric}" if many else ""), c.estimate, c.ci_low, c.ci_high, c.verdict)
            for t in timed for r in t.rows for v, c in r.changes.items()]
    if not rows or len(rows) > FOREST_ROWS:
        return []
    t = timed[0]
    body = plots.forest(rows, title=f"{t.bench} · {t.target}/{t.compiler}: change against {t.variants[0]}")
    return [Figure(body)] if body else []


def _layouts(t: Table) -> list[Figure]:
    base = t.variants[0]
    out = []
    for r in t.rows:
        centre = r.median(base)
        if not centre:
            continue
        groups = []
        for v in t.variants:
            for column in [v] + t.layouts.get(v, []):
                values = r.values.get(column, [])
                if values:
                    groups.append((column, [x / centre for x in values]))
        band = r.bands.get(base)
        intervals = [(f"{v} vs {base} (95 % CI)", c.estimate, c.ci_low, c.ci_high, c.verdict)
                     for v, c in r.changes.items()]
        body = plots.strips(groups, band=(band.low, band.high) if band else None, intervals=intervals,
                            title=f"{t.bench} · {t.metric} · {t.target}/{t.compiler}: layouts and "
                                  f"{base}'s band")
        if body:
            out.append(Figure(body, "each relink's samples over the baseline's median (box: quartiles); "
                                    "shaded: the baseline's layout band; lines: each variant's interval"))
    return out
