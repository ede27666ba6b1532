"""Tables from stored samples: one per benchmark x metric x target/compiler.

Rows are the sweep points of the cell (``:dalign=3,salign=1,size=4096`` -> alignment x size, like
the copy-template case's memcpy table; ``:mode=threads,tasks=2`` -> mode x tasks for will-it-scale), columns
the variants' samples, and each variant compared with the first one (the baseline).

>>> samples = [dict(bench="loop", metric="ns_per_iter", unit="ns", variant=v, target="x86_64",
...                 compiler="gcc", params={}, value=x)
...            for v, base in (("O2", 29.6), ("O0", 59.4)) for x in [base * (1 + i / 1000) for i in range(9)]]
>>> [t] = build_tables(samples, ["O2", "O0"])
>>> t.title, t.variants, t.rows[0].changes["O0"].verdict
('loop · ns_per_iter (ns) · x86_64/gcc · lower is better', ['O2', 'O0'], 'slower')
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

from flagbench import stats
from flagbench.stats import Change, LayoutBand, Metric, band_verdict, layout_band, metric as metric_of

# Sweep axes go last so rows group by alignment (memcpy) or by mode (will-it-scale).
EXACT_TABLE = "exact counts"
_INNER_AXES = ("size", "len", "length", "tasks", "threads")
AA_SUFFIX = "@aa"      # the column of an A/A control (run/noise.py names it so)


@dataclass
class Row:
    params: dict[str, str]
    values: dict[str, list[float]]                      # variant -> samples (one per run of the program)
    shares: dict[str, list] = field(default_factory=dict)               # variant -> each sample's CPU share
    changes: dict[str, Change] = field(default_factory=dict)           # variant -> vs baseline
    bands: dict[str, LayoutBand] = field(default_factory=dict)          # variant -> its layout band
    band_verdicts: dict[str, str] = field(default_factory=dict)         # variant -> vs the baseline's band
    layout_ratios: dict[str, float] = field(default_factory=dict)       # relink column -> median / its variant's
    seconds: dict[str, float] = field(default_factory=dict)             # variant -> mean wall seconds of one sample
    rounds: dict[str, list] = field(default_factory=dict)               # variant -> each sample's round (or None)
    control: Change | None = None       # the baseline against itself run again (an A/A control column)
    aligned: dict[str, Change] = field(default_factory=dict)   # variant -> the layout check's change (run/layout.py)

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
    measure: Metric | None = None                       # unit, exactness, better direction (None: exact table)
    counts: dict[str, Metric] = field(default_factory=dict)   # an exact table's rows: each count's Metric

    @property
    def title(self) -> str:
        unit = f" ({self.unit})" if self.unit and self.unit != self.metric else ""
        better = f" · {self.direction}" if self.direction else ""
        return f"{self.bench} · {self.metric}{unit} · {self.target}/{self.compiler}{better}"

    @property
    def direction(self) -> str:
        """Which way is better, in words ("" for exact counts: work, not speed)."""
        if self.exact or self.measure is None:
            return ""
        return "higher is better" if self.measure.higher_is_better else "lower is better"


def _natural(value: str):
    """Numbers sort as numbers: size 32 < 100 < 4096."""
    return [(0, int(p), "") if p.isdecimal() else (1, 0, p) for p in re.split(r"(\d+)", value) if p]


def _runs(samples: list[dict], declared: dict[str, Metric]):
    """Samples as (sample, Metric, [values of one run of the program], its contention): the values
    one run emits together (a will-it-scale run's per-second rates) are not independent samples,
    so a run is one sample, the mean of its values. A metric is what the run declared it to be
    (metrics.py), else what its name and unit say."""
    runs: dict[tuple, tuple[dict, Metric, list[float], dict]] = {}
    for i, s in enumerate(samples):
        prov = s.get("provenance") or {}
        m = declared.get(s["metric"]) or metric_of(s["metric"], s.get("unit", ""))
        if prov.get("job") == "count" and not m.exact:
            m = replace(m, exact=True)
        one_run = prov.get("job") == "sample" and prov.get("sample") is not None
        ident = (s["bench"], s.get("cell") or (s["variant"], s["target"], s["compiler"], str(s.get("params"))),
                 s["metric"], prov.get("sample")) if one_run else i
        if ident in runs:
            runs[ident][2].append(float(s["value"]))
        else:
            runs[ident] = (s, m, [float(s["value"])], prov.get("contention") or {})
    return runs.values()


def build_tables(samples: list[dict], variant_order: list[str] | None = None, alpha: float = 0.05,
                 declared: dict[str, Metric] | None = None) -> list[Table]:
    """Group samples (as `Store.samples` returns them) into tables and compare each variant to the
    baseline; DECLARED: the run's metric declarations (`Store.metrics`)."""
    groups: dict[tuple, dict[tuple, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    shares: dict[tuple, list] = defaultdict(list)
    rounds: dict[tuple, list] = defaultdict(list)
    seconds: dict[tuple, list] = defaultdict(list)
    measures: dict[tuple, Metric] = {}
    counts: dict[tuple, dict[str, Metric]] = defaultdict(dict)
    keys_seen: dict[tuple, list[str]] = defaultdict(list)
    variants_seen: list[str] = []
    for s, m, values, contention in _runs(samples, declared or {}):
        metric, params = s["metric"], dict(s.get("params") or {})
        if m.exact:   # every counter of a bench in one table, a row each
            metric, params = EXACT_TABLE, {"count": metric, **params}
            counts[(s["bench"], metric, s["target"], s["compiler"])].setdefault(m.name, m)
        key = (s["bench"], metric, s["target"], s["compiler"])
        groups[key][tuple(params.items())][s["variant"]].append(sum(values) / len(values))
        shares[(key, tuple(params.items()), s["variant"])].append(contention.get("cpu_share"))
        rounds[(key, tuple(params.items()), s["variant"])].append((s.get("provenance") or {}).get("round"))
        if contention.get("wall_s"):
            seconds[(key, tuple(params.items()), s["variant"])].append(contention["wall_s"])
        measures.setdefault(key, m)
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
        variants, controls = _split_controls(variants)
        variants, aligned = _split_aligned(variants)
        exact = metric == EXACT_TABLE
        measure = None if exact else measures[key]
        rows = []
        for params, values in rows_by_params.items():
            row = Row(dict(params), dict(values), {v: shares[(key, params, v)] for v in values},
                      rounds={v: rounds[(key, params, v)] for v in values})
            row.seconds = {v: sum(x) / len(x) for v in values if (x := seconds[(key, params, v)])}
            base = variants[0]
            if base in controls and base in values and controls[base] in values and measure is not None:
                row.control = _change(row, base, controls[base], measure, alpha)
            for v in variants[1:]:
                if base in values and v in values:
                    row.changes[v] = _change(row, base, v, measure, alpha, stats.reach(row.control))
            if aligned.get(base) in values:   # the layout check: each variant aligned against the baseline aligned
                for v in variants[1:]:
                    if aligned.get(v) in values:
                        row.aligned[v] = _change(row, aligned[base], aligned[v], measure, alpha)
            _add_bands(row, variants[0], layouts)
            if not exact or any(row.median(v) for v in variants):   # counters that stayed 0 say nothing
                rows.append(row)
        rows.sort(key=lambda r: [_natural(r.params.get(k, "")) for k in param_keys])
        if exact and rows and all(":" in r.params.get("count", "") for r in rows) and len(variants) > 1:
            rows.sort(key=lambda r: -_moved(r, variants[0], variants[1]))   # a profile: largest change first
        tables.append(Table(bench, metric, "" if exact else measure.unit, target, compiler, variants,
                            param_keys, rows, exact, layouts, measure, counts.get(key, {})))
    tables.sort(key=lambda t: (t.bench, t.target, t.compiler, t.exact, t.metric))
    return tables


def _moved(row: Row, base: str, other: str) -> float:
    """How far a count moved between two columns (0 when one is missing)."""
    a, b = row.median(base), row.median(other)
    return 0.0 if a is None or b is None else abs(b - a)


def _split_layouts(columns: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Relink columns ("default@L3", run/layout.py) leave the table's variants and become
    their variant's layouts; a column whose variant is not in the table stays a column.

    >>> _split_layouts(["a", "b", "a@L2", "a@L1", "c@L1"])
    (['a', 'b', 'c@L1'], {'a': ['a@L1', 'a@L2']})
    """
    from flagbench.columns import split_layout_column
    layouts: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for column in columns:
        parts = split_layout_column(column)
        if parts and parts[0] in columns:
            layouts[parts[0]].append((parts[1], column))
    taken = {c for relinks in layouts.values() for _, c in relinks}
    return [c for c in columns if c not in taken], {v: [c for _, c in sorted(r)] for v, r in layouts.items()}


def _split_controls(columns: list[str]) -> tuple[list[str], dict[str, str]]:
    """A/A control columns ("default@aa": the baseline measured again as if it were another
    variant, noise.aa_control) leave the table's variants; they set the row's floor.

    >>> _split_controls(["a", "b", "a@aa"])
    (['a', 'b'], {'a': 'a@aa'})
    """
    controls = {c[:-len(AA_SUFFIX)]: c for c in columns if c.endswith(AA_SUFFIX) and c[:-len(AA_SUFFIX)] in columns}
    return [c for c in columns if c not in controls.values()], controls


def _split_aligned(columns: list[str]) -> tuple[list[str], dict[str, str]]:
    """The layout check's columns ("new@align64": the variant built again with every function
    64-byte aligned, run/layout.py) leave the table's variants; each row compares them apart.

    >>> _split_aligned(["a", "b", "a@align64", "b@align64"])
    (['a', 'b'], {'a': 'a@align64', 'b': 'b@align64'})
    """
    from flagbench.columns import split_aligned_column
    aligned = {split_aligned_column(c): c for c in columns if split_aligned_column(c) in columns}
    return [c for c in columns if c not in aligned.values()], aligned


def _add_bands(row: Row, base: str, layouts: dict[str, list[str]]) -> None:
    """Each relinked variant's band, and every change judged against the baseline's band."""
    for variant, columns in layouts.items():
        present = [c for c in columns if row.values.get(c)]
        band = layout_band(row.values.get(variant, []), [row.values[c] for c in present])
        if band is not None:
            row.bands[variant] = band
            row.layout_ratios.update(zip(present, band.ratios))
    for variant, c in row.changes.items():
        verdict = band_verdict(c.ci_low, c.ci_high, row.bands.get(base))
        if verdict and c.verdict != "exact":
            row.band_verdicts[variant] = verdict


def _change(row: Row, base: str, variant: str, measure: Metric | None, alpha: float,
            floor: float | None = None) -> Change:
    """One variant's change against the baseline: exact counts by their minimum, samples by stats
    (with each sample's contention)."""
    old, new = row.values[base], row.values[variant]
    if measure is None:
        metric = row.params.get("count", "")
        c = stats.exact_change(min(old), min(new), metric=metric)
        if len(set(old)) > 1 or len(set(new)) > 1:   # a count that moves is not exact: say so
            c = replace(c, warnings=("count differs from run to run",))
        return c
    old, new, shares_old, shares_new, paired = stats.in_rounds(
        old, new, row.rounds.get(base), row.rounds.get(variant), row.shares.get(base), row.shares.get(variant))
    return stats.change(old, new, higher_is_better=measure.higher_is_better, alpha=alpha, metric=measure.name,
                        shares_old=shares_old, shares_new=shares_new, floor=floor, paired=paired)

