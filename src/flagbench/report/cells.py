"""A Table as rows of plain strings: numbers formatted, changes spelled out, notes folded.

Three shapes: few variants side by side (values, then each "vs baseline" with its interval);
many variants as a PIVOT (one row per sweep point, one column per variant, each cell the median
and its change against the baseline: the seed's memcpy table); and with layout relinks, one line
per row x variant with the band. Escaping is the exporters' job (md, html, text): nothing here
is markup.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict

from flagbench import stats  # noqa: F401 (the doctests' stats.change)
from flagbench.report.tables import Table
from flagbench.stats import Change, LayoutBand
from flagbench.stats.verdict import fmt_exact, pct  # noqa: F401 (the report's names for them)

WIDE = 3   # more variants than this: the pivot, one compact cell per variant


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


def fmt_change(c: Change | None) -> str:
    """The change and its interval; the change printed is the interval's own estimate (Hodges-Lehmann),
    so it always lies inside the brackets.

    >>> fmt_change(stats.exact_change(100, 117)), fmt_change(stats.exact_change(0, 8))
    ('+17.00 % exact', '+8 exact')
    >>> fmt_change(stats.change([1, 2, 3], [1, 2, 3]))
    '~ +0.0 % (n=3+3, no CI)'
    """
    if c is None:
        return "-"
    if c.verdict == "exact":
        return fmt_exact(c)
    if c.ci_low is None:
        return f"~ {pct(c.ratio)} % (n={c.n_old}+{c.n_new}, no CI)"
    body = f"{pct(c.estimate)} % [{pct(c.ci_low)}, {pct(c.ci_high)}] p={c.p_value:.3f}"
    return f"~ {body}" if c.verdict == "~" else f"{body} {c.verdict}"


def fmt_short(c: Change | None) -> str:
    """A pivot cell's change: "+12.3 % faster", "~ -0.4 %", "+114.29 %" (exact).

    >>> fmt_short(stats.exact_change(100, 117)), fmt_short(None)
    ('+17.00 %', '')
    """
    if c is None:
        return ""
    if c.verdict == "exact":
        return fmt_exact(c).removesuffix(" exact")
    text = f"{pct(c.estimate)} %"
    return f"~ {text}" if c.verdict == "~" else f"{text} {c.verdict}"


def shape(t: Table) -> str:
    """"side" (variants side by side), "pivot" (many variants) or "long" (with layout bands)."""
    if t.layouts:
        return "long"
    return "pivot" if len(t.variants) > WIDE else "side"


def table_cells(t: Table) -> tuple[list[str], list[list[str]]]:
    """(header, body) of a table in its shape."""
    base = t.variants[0]
    how = shape(t)
    if how == "long":
        header = list(t.param_keys) + ["variant", "median", f"vs {base}", "layout band", f"vs {base}'s band"]
        body = []
        for r in t.rows:
            for v in t.variants:
                band = r.bands.get(v)
                body.append([r.params.get(k, "") for k in t.param_keys] + [
                    v, fmt_value(r.median(v), t.exact),
                    "baseline" if v == base else fmt_change(r.changes.get(v)),
                    fmt_band(band) if band else "", r.band_verdicts.get(v, "-" if v != base else "")])
        return header, body
    if how == "pivot":
        header = list(t.param_keys) + [f"{base} (baseline" + (f"; {t.direction})" if t.direction else ")")]
        header += [f"{v}" for v in t.variants[1:]]
        body = []
        for r in t.rows:
            line = [r.params.get(k, "") for k in t.param_keys] + [fmt_value(r.median(base), t.exact)]
            for v in t.variants[1:]:
                change = fmt_short(r.changes.get(v))
                value = fmt_value(r.median(v), t.exact)
                line.append(f"{value} ({change})" if change and value != "-" else value)
            body.append(line)
        return header, body
    better = f" ({t.direction})" if t.direction else ""
    header = list(t.param_keys) + list(t.variants) + [f"{v} vs {base}{better}" for v in t.variants[1:]]
    body = []
    for r in t.rows:
        line = [r.params.get(k, "") for k in t.param_keys]
        line += [fmt_value(r.median(v), t.exact) for v in t.variants]
        line += [fmt_change(r.changes.get(v)) for v in t.variants[1:]]
        body.append(line)
    return header, body


def fmt_band(band: LayoutBand) -> str:
    """
    >>> fmt_band(LayoutBand(12, 0.889, 1.135, (), 0.0004))
    '-11.1 % .. +13.5 % (12 layouts, p=0.000)'
    """
    p = "" if band.p_value is None else f", p={band.p_value:.3f}"
    return f"{band.as_percent()} ({band.n_layouts} layouts{p})"


_SPREAD = re.compile(r"^high spread in (old|new): IQR/median (\d+) ?%$")


def notes(t: Table) -> list[str]:
    """Warnings, folded: each distinct one once with the cells it applies to; spread warnings
    name the worst value and where, and how many cells are above the threshold."""
    where: dict[str, list[str]] = defaultdict(list)
    spreads: list[tuple[int, str]] = []
    for r in t.rows:
        label = ",".join(f"{k}={val}" for k, val in r.params.items()) or "all"
        for v, c in r.changes.items():
            for w in c.warnings:
                m = _SPREAD.match(w)
                if m:
                    side = t.variants[0] if m.group(1) == "old" else v
                    spreads.append((int(m.group(2)), f"{side}@{label}"))
                else:
                    where[w].append(f"{v}@{label}")
    every = sum(len(r.changes) for r in t.rows)
    out = [f"{w}: {'every row' if len(cells) == every else ', '.join(cells[:4]) + (' …' if len(cells) > 4 else '')}"
           for w, cells in where.items()]
    if spreads:
        distinct = sorted(set(spreads), reverse=True)
        worst = ", ".join(f"{cell} {value} %" for value, cell in distinct[:3])
        more = f" and {len(distinct) - 3} more" if len(distinct) > 3 else ""
        out.append(f"high spread (IQR/median above 10 %) in {len(distinct)} cell{'s' * (len(distinct) > 1)}: "
                   f"{worst}{more}")
    out += _undecided(t)
    reaches = [(stats.reach(r.control), r) for r in t.rows if r.control is not None]
    if reaches:
        known = [x for x, _ in reaches if x is not None]
        what = f"reach up to +-{max(known):.1%}" if known else "no interval"
        out.append(f"A/A control ({t.variants[0]} measured twice in the same rounds): {what}; "
                   f"a change within its reach is not called")
    out += _band_shrinks(t)
    if t.layouts:
        out.append("layout band: min..max of median / the variant's median over the variant and its relinks "
                   "with code moved; p: do the layouts differ at all (Kruskal-Wallis); beyond = the whole CI "
                   "lies outside the baseline's band")
    return out


def _band_shrinks(t: Table) -> list[str]:
    """The baseline's layout band beside each other relinked variant's, and whether it shrank."""
    base, out = t.variants[0], []
    for r in t.rows:
        before = r.bands.get(base)
        for v, after in r.bands.items():
            if v == base or before is None:
                continue
            verdict, p = stats.band_shrink(before, after)
            label = ",".join(f"{k}={val}" for k, val in r.params.items())
            where = f" ({label})" if label else ""
            test = "" if p is None else f", Fligner-Killeen p={p:.3f}"
            out.append(f"layout band{where}: {base} {before.as_percent()} (width {_width(before)}) -> "
                       f"{v} {after.as_percent()} (width {_width(after)}): {verdict}{test}")
    return out


def _width(band: LayoutBand) -> str:
    return f"{(band.high - band.low) * 100:.1f} pt"


def _undecided(t: Table) -> list[str]:
    """What would decide the intervals too wide to call: samples per side (and time) to resolve
    the change seen, at the spread seen."""
    wide, finest = [], 1.0
    for r in t.rows:
        label = ",".join(f"{k}={val}" for k, val in r.params.items()) or "all"
        for v, c in r.changes.items():
            if c.needed is None:
                continue
            seconds = sum(r.seconds.get(x, 0.0) for x in (t.variants[0], v)) * c.needed
            when = f", about {_duration(seconds)}" if seconds else ""
            now = f"now {c.n_old} pairs" if c.paired else f"now {c.n_old}+{c.n_new}"
            wide.append(f"{v}@{label}: ~{c.needed} {'rounds' if c.paired else 'samples per side'}{when} "
                        f"to resolve +-{c.resolve:.1%} ({now})")
            finest = min(finest, c.resolve)
    if not wide:
        return []
    more = f" and {len(wide) - 3} more" if len(wide) > 3 else ""
    return [f"too wide to call: {'; '.join(wide[:3])}{more} "
            f"(--samples N, or run again with --until {finest * 100:.2g}% to sample on where needed)"]


def _duration(seconds: float) -> str:
    """
    >>> _duration(42), _duration(600), _duration(9000)
    ('42 s', '10 min', '2.5 h')
    """
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


LEGEND = ("change: the Hodges-Lehmann estimate of new/old - 1 with its 95 % interval [low, high] (the estimate "
          "always lies inside it); variants measured in the same rounds are compared round by round "
          "(p: Wilcoxon signed-rank, interval of the Walsh averages), else as two samples (p: Mann-Whitney U, "
          "Moses interval); faster/slower only when both agree, else ~; exact: instruction counts, no noise")


def has_intervals(tables: list[Table]) -> bool:
    return any(c.ci_low is not None for t in tables for r in t.rows for c in r.changes.values())


def geomean_ratio(changes: list[Change]) -> float | None:
    """The geometric mean of the printed ratios (benchstat's summary of a sweep)."""
    ratios = [c.estimate for c in changes if c.estimate and c.estimate > 0 and math.isfinite(c.estimate)]
    if not ratios:
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def slug(*parts: str) -> str:
    """An md/html anchor id from free text: lower case letters, digits and dashes only.

    >>> slug("memcpy-strategy", "copy_page_info", "ns_per_iter", "x86_64/gcc")
    'memcpy-strategy-copy-page-info-ns-per-iter-x86-64-gcc'
    """
    return "-".join(filter(None, (re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in parts)))


def table_anchor(t: Table, prefix: str = "") -> str:
    return slug(prefix, t.bench, t.metric, t.target, t.compiler)
