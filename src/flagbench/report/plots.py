"""Plots as inline SVG strings, drawn here in Python: the HTML report needs no script and fetches
nothing. Every text that reaches the SVG goes through `_t` (escaped: a symbol named `<script>`
stays text).

Four kinds: lines (y against x, one line per series, optional log x), a forest (a point estimate
and its interval per row, a reference line at 0 %), strips (samples per group on one axis, a
shaded band, intervals drawn against it) and bars (signed horizontal bars).
"""
from __future__ import annotations

import html
import math

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22")
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
GOOD, BAD, NEUTRAL = "#2ca02c", "#d62728", "#555"
LOG_Y_SPREAD = 30     # largest / smallest value of a line plot beyond which its y axis is logarithmic


def _t(text) -> str:
    """Text for SVG/HTML: escaped, control characters shown as \\xNN."""
    s = "".join(c if c >= " " or c in "\t" else f"\\x{ord(c):02x}" for c in str(text))
    return html.escape(s, quote=True)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering lo..hi (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
    ticks, x = [], first
    while x <= last + step * 1e-9:
        ticks.append(round(x, 12))
        x += step
    return ticks


def _fmt_tick(v: float) -> str:
    """
    >>> [_fmt_tick(v) for v in (0, 1500, 2e6, 0.25, 1048576, 12.5)]
    ['0', '1.5k', '2M', '0.25', '1.05M', '12.5']
    """
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def _fmt_size(v: float) -> str:
    """Byte sizes on a log axis: 32, 100, 4K, 1M."""
    v = int(round(v))
    for div, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if v >= div and v % div == 0:
            return f"{v // div}{suffix}"
    return str(v)


class _Frame:
    """A plot area inside an SVG of width x height with margins; maps data to pixels."""

    def __init__(self, width, height, left=64, right=16, top=28, bottom=44):
        self.w, self.h = width, height
        self.x0, self.x1, self.y0, self.y1 = left, width - right, height - bottom, top
        self.parts: list[str] = []

    def scale(self, lo, hi, log=False):
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        span = (hi - lo) or 1.0
        return lambda v, a, b: a + ((math.log10(v) if log else v) - lo) / span * (b - a)

    def svg(self, title: str = "", label: str = "") -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" role="img" width="{self.w}" '
                f'height="{self.h}" viewBox="0 0 {self.w} {self.h}" {FONT}>')
        t = f'<title>{_t(label or title)}</title>'
        if title:
            t += f'<text x="{self.w / 2:.1f}" y="16" text-anchor="middle" font-weight="600">{_t(title)}</text>'
        return head + t + "".join(self.parts) + "</svg>"


def _legend(names: list[str], colours: list[str], width: int) -> str:
    """A legend as an HTML block beside the SVGs (wraps on narrow screens)."""
    items = "".join(f'<span class="key"><span class="swatch" style="background:{c}"></span>{_t(n)}</span>'
                    for n, c in zip(names, colours))
    return f'<div class="legend" style="max-width:{width}px">{items}</div>'


def lines(panels: list[tuple[str, dict[str, list[tuple[float, float]]]]], *, xlabel: str, ylabel: str,
          logx: bool = False, size_ticks: bool = False, width: int = 420, height: int = 280) -> str:
    """One SVG per panel, one line per series (the same colour for a series in every panel), and
    one legend for all: HTML to put in the page."""
    names: list[str] = []
    for _, series in panels:
        names += [n for n in series if n not in names]
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    colour = dict(zip(names, colours))
    svgs = []
    for title, series in panels:
        points = [p for pts in series.values() for p in pts if p[1] is not None and math.isfinite(p[1])]
        if not points:
            continue
        f = _Frame(width, height)
        xs = sorted({x for x, _ in points})
        positive = [y for _, y in points if y > 0]
        logy = len(positive) == len(points) and max(positive) / min(positive) > LOG_Y_SPREAD
        if logy:   # throughputs over orders of magnitude: a byte loop must not lie flat on zero
            ylo, yhi = 10 ** math.floor(math.log10(min(positive))), 10 ** math.ceil(math.log10(max(positive)))
            yt = [10.0 ** k for k in range(round(math.log10(ylo)), round(math.log10(yhi)) + 1)]
            ylabel_here = f"{ylabel} (log scale)"
        else:
            ylo, yhi = 0.0, max(y for _, y in points) * 1.05 or 1.0
            yt = _nice_ticks(ylo, yhi)
            yhi = max(yhi, yt[-1])
            ylabel_here = ylabel
        if logx and xs[0] > 0:
            xlo, xhi = xs[0] / 1.3, xs[-1] * 1.3
            xsc = f.scale(xlo, xhi, log=True)
            xt = xs if size_ticks or len(xs) <= 8 else [10 ** k for k in range(math.ceil(math.log10(xlo)),
                                                                               math.floor(math.log10(xhi)) + 1)]
        else:
            pad = (xs[-1] - xs[0]) * 0.05 or 0.5
            xlo, xhi = xs[0] - pad, xs[-1] + pad
            xsc = f.scale(xlo, xhi)
            xt = xs if len(xs) <= 10 else _nice_ticks(xs[0], xs[-1])
        ysc = f.scale(ylo, yhi, log=logy)
        X = lambda v: xsc(v, f.x0, f.x1)   # noqa: E731
        Y = lambda v: ysc(v, f.y0, f.y1)   # noqa: E731
        f.parts.append(_axes(f, [(X(v), _fmt_size(v) if size_ticks else _fmt_tick(v)) for v in xt],
                             [(Y(v), _fmt_tick(v)) for v in yt], xlabel, ylabel_here))
        for name, pts in series.items():
            pts = sorted((x, y) for x, y in pts if y is not None and math.isfinite(y))
            if not pts:
                continue
            c = colour[name]
            path = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts)
            f.parts.append(f'<polyline class="series" fill="none" stroke="{c}" stroke-width="2" points="{path}">'
                           f'<title>{_t(name)}</title></polyline>')
            f.parts += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"><title>{_t(name)}: '
                        f'{_t(_fmt_tick(y))} at {_t(_fmt_size(x) if size_ticks else _fmt_tick(x))}</title></circle>'
                        for x, y in pts]
        svgs.append(f.svg(title, f"{ylabel} against {xlabel}: {title}"))
    if not svgs:
        return ""
    return (f'<div class="panels">{"".join(svgs)}</div>'
            + _legend(names, colours, width * min(len(svgs), 2)))


def _axes(f: _Frame, xticks, yticks, xlabel: str, ylabel: str) -> str:
    out = [f'<rect x="{f.x0}" y="{f.y1}" width="{f.x1 - f.x0}" height="{f.y0 - f.y1}" fill="#fafafa" '
           f'stroke="#ccc"/>']
    for y, label in yticks:
        out.append(f'<line x1="{f.x0}" x2="{f.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
                   f'<text x="{f.x0 - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{_t(label)}</text>')
    for x, label in xticks:
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.y0}" y2="{f.y0 + 4}" stroke="#888"/>'
                   f'<text x="{x:.1f}" y="{f.y0 + 17}" text-anchor="middle" fill="#333">{_t(label)}</text>')
    out.append(f'<text x="{(f.x0 + f.x1) / 2:.1f}" y="{f.h - 6}" text-anchor="middle" fill="#333">{_t(xlabel)}</text>')
    out.append(f'<text transform="translate(14 {(f.y0 + f.y1) / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'fill="#333">{_t(ylabel)}</text>')
    return "".join(out)


def _label_width(labels: list[str]) -> int:
    return min(360, max([40] + [7 * len(s) + 12 for s in labels]))


def forest(rows: list[tuple[str, float, float | None, float | None, str]], *, title: str,
           width: int = 760) -> str:
    """Each row: (label, estimate ratio, low, high, verdict); x is the change in %, 0 % marked. When a
    ratio leaves 0.5..2 the axis is logarithmic and labelled in factors (x2, x10), so a 20-fold
    speed-up does not squash every other row against zero."""
    rows = [r for r in rows if r[1] is not None and math.isfinite(r[1]) and r[1] > 0]
    if not rows:
        return ""
    left = _label_width([r[0] for r in rows])
    f = _Frame(width, 48 + 22 * len(rows) + 30, left=left, right=44, top=30, bottom=40)
    ratios = [v for r in rows for v in (r[1], r[2], r[3]) if v is not None and v > 0]
    lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
    if lo < 0.5 or hi > 2:
        exps = range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)
        ticks = [2.0 ** e for e in exps]
        if len(ticks) > 8:
            ticks = [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
        xsc = f.scale(ticks[0], ticks[-1], log=True)
        X = lambda r: xsc(r, f.x0, f.x1)   # noqa: E731 - ratio -> pixel
        labels = [(X(t), "1" if t == 1 else f"x{t:g}" if t > 1 else f"x1/{1 / t:g}") for t in ticks]
        xlabel = "new / baseline (log scale)"
    else:
        pad = (hi - lo) * 100 * 0.08 or 1.0
        ticks = _nice_ticks(100 * (lo - 1) - pad, 100 * (hi - 1) + pad, 6)
        psc = f.scale(ticks[0], ticks[-1])
        X = lambda r: psc(100 * (r - 1), f.x0, f.x1)   # noqa: E731
        labels = [(psc(v, f.x0, f.x1), f"{v:+g} %" if v else "0") for v in ticks]
        xlabel = "change vs baseline"
    f.parts.append(_axes(f, labels, [], xlabel, ""))
    f.parts.append(f'<line x1="{X(1):.1f}" x2="{X(1):.1f}" y1="{f.y1}" y2="{f.y0}" stroke="#333" '
                   f'stroke-dasharray="4 3"/>')
    for i, (label, est, low, high, verdict) in enumerate(rows):
        y = f.y1 + 14 + 22 * i
        c = GOOD if verdict == "faster" else BAD if verdict == "slower" else NEUTRAL
        tip = f"{label}: {100 * (est - 1):+.1f} %"
        if low is not None and high is not None and low > 0:
            tip += f" [{100 * (low - 1):+.1f}, {100 * (high - 1):+.1f}]"
            f.parts.append(f'<line class="ci" x1="{X(low):.1f}" x2="{X(high):.1f}" '
                           f'y1="{y}" y2="{y}" stroke="{c}" stroke-width="2.5"/>')
        f.parts.append(f'<text x="{f.x0 - 8}" y="{y + 4}" text-anchor="end" fill="#222">{_t(label)}</text>'
                       f'<circle cx="{X(est):.1f}" cy="{y}" r="4.5" fill="{c}">'
                       f'<title>{_t(tip + " " + verdict)}</title></circle>')
    return f.svg(title, f"change against the baseline with 95 % intervals: {title}")


def strips(groups: list[tuple[str, list[float]]], *, band: tuple[float, float] | None,
           intervals: list[tuple[str, float, float | None, float | None, str]], title: str,
           width: int = 760) -> str:
    """Samples per group as dots with a box (quartiles) and a median tick, on a ratio axis (%);
    the baseline band shaded; then each interval (label, estimate, low, high, verdict) as a row."""
    labels = [g[0] for g in groups] + [i[0] for i in intervals]
    left = _label_width(labels)
    n = len(groups) + len(intervals)
    f = _Frame(width, 48 + 22 * n + 30, left=left, right=44, top=30, bottom=40)
    values = [100 * (v - 1) for _, vs in groups for v in vs]
    values += [100 * (v - 1) for i in intervals for v in i[1:4] if v is not None]
    if band:
        values += [100 * (band[0] - 1), 100 * (band[1] - 1)]
    if not values:
        return ""
    lo, hi = min(values + [0.0]), max(values + [0.0])
    pad = (hi - lo) * 0.06 or 1.0
    ticks = _nice_ticks(lo - pad, hi + pad, 6)
    xsc = f.scale(ticks[0], ticks[-1])
    X = lambda r: xsc(100 * (r - 1), f.x0, f.x1)   # noqa: E731 - ratio -> pixel
    f.parts.append(_axes(f, [(xsc(v, f.x0, f.x1), f"{v:+g} %" if v else "0") for v in ticks], [],
                         "relative to the baseline's median", ""))
    if band:
        f.parts.append(f'<rect class="band" x="{X(band[0]):.1f}" y="{f.y1}" width="{max(1.0, X(band[1]) - X(band[0])):.1f}" '
                       f'height="{f.y0 - f.y1}" fill="#1f77b4" fill-opacity="0.15"><title>baseline layout band '
                       f'{100 * (band[0] - 1):+.1f} % .. {100 * (band[1] - 1):+.1f} %</title></rect>')
    f.parts.append(f'<line x1="{X(1):.1f}" x2="{X(1):.1f}" y1="{f.y1}" y2="{f.y0}" stroke="#333" stroke-dasharray="4 3"/>')
    for i, (label, vs) in enumerate(groups):
        y = f.y1 + 14 + 22 * i
        f.parts.append(f'<text x="{f.x0 - 8}" y="{y + 4}" text-anchor="end" fill="#222">{_t(label)}</text>')
        s = sorted(vs)
        if s:
            q1, med, q3 = (s[int(round(q * (len(s) - 1)))] for q in (0.25, 0.5, 0.75))
            f.parts.append(f'<rect x="{X(q1):.1f}" y="{y - 6}" width="{max(1.0, X(q3) - X(q1)):.1f}" height="12" '
                           f'fill="none" stroke="#555"/><line x1="{X(med):.1f}" x2="{X(med):.1f}" y1="{y - 8}" '
                           f'y2="{y + 8}" stroke="#111" stroke-width="2"/>')
        f.parts += [f'<circle cx="{X(v):.1f}" cy="{y}" r="2.2" fill="#1f77b4" fill-opacity="0.6"/>' for v in s]
    for j, (label, est, low, high, verdict) in enumerate(intervals):
        y = f.y1 + 14 + 22 * (len(groups) + j)
        c = GOOD if verdict == "faster" else BAD if verdict == "slower" else NEUTRAL
        f.parts.append(f'<text x="{f.x0 - 8}" y="{y + 4}" text-anchor="end" fill="#222">{_t(label)}</text>')
        if low is not None and high is not None:
            f.parts.append(f'<line class="ci" x1="{X(low):.1f}" x2="{X(high):.1f}" y1="{y}" y2="{y}" '
                           f'stroke="{c}" stroke-width="3"/>')
        f.parts.append(f'<circle cx="{X(est):.1f}" cy="{y}" r="4.5" fill="{c}"><title>{_t(label)}: '
                       f'{100 * (est - 1):+.1f} % {_t(verdict)}</title></circle>')
    return f.svg(title, f"layout band: {title}")


def bars(items: list[tuple[str, float]], *, title: str, unit: str = "bytes", width: int = 760) -> str:
    """Signed horizontal bars (growth red, shrinkage green), largest first as given."""
    items = [(n, v) for n, v in items if v]
    if not items:
        return ""
    left = _label_width([n for n, _ in items])
    f = _Frame(width, 48 + 20 * len(items) + 30, left=left, right=56, top=30, bottom=40)
    lo, hi = min(0.0, *(v for _, v in items)), max(0.0, *(v for _, v in items))
    ticks = _nice_ticks(lo, hi, 5)
    xsc = f.scale(ticks[0], ticks[-1])
    X = lambda v: xsc(v, f.x0, f.x1)   # noqa: E731
    f.parts.append(_axes(f, [(X(v), _fmt_tick(v)) for v in ticks], [], f"delta ({unit})", ""))
    for i, (name, v) in enumerate(items):
        y = f.y1 + 12 + 20 * i
        x_a, x_b = sorted((X(0), X(v)))
        c = BAD if v > 0 else GOOD
        f.parts.append(f'<text x="{f.x0 - 8}" y="{y + 4}" text-anchor="end" fill="#222">{_t(name)}</text>'
                       f'<rect class="bar" x="{x_a:.1f}" y="{y - 7}" width="{max(1.0, x_b - x_a):.1f}" height="14" '
                       f'fill="{c}"><title>{_t(name)}: {v:+g} {_t(unit)}</title></rect>'
                       f'<text x="{x_b + 4 if v > 0 else x_a - 4:.1f}" y="{y + 4}" '
                       f'text-anchor="{"start" if v > 0 else "end"}" fill="#333">{v:+g}</text>')
    return f.svg(title, f"size deltas: {title}")
