"""The watch's static page: each metric over the commits of each branch (an inline SVG, no
script, no network), change points marked, each point a link to its commit's evidence below.
Everything from a commit or a compiler is escaped (html.escape)."""
from __future__ import annotations

import html
import json
import statistics

from flagbench.watch.changes import Finding, History

W, H, PAD = 720, 180, 40


def _metrics(h: History) -> list[str]:
    names: dict[str, None] = {}
    for _, _, _, ev in h.rows:
        if ev is not None and ev.built:
            names.update(dict.fromkeys(ev.counts))
            names.update(dict.fromkeys(ev.timed))
    return list(names)


def _value(ev, metric: str) -> float | None:
    if ev is None or not ev.built:
        return None
    if metric in ev.counts:
        return ev.counts[metric]
    t = ev.timed.get(metric)
    return statistics.median(t["head"]) if t and t["head"] else None


def _plot(h: History, metric: str, marked: set[str]) -> str:
    rows = [r for r in h.rows if r[2]]
    points = [(i, sha, _value(ev, metric), ev) for i, (sha, _, _, ev) in enumerate(rows)]
    values = [v for _, _, v, _ in points if v is not None]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or max(abs(hi), 1.0) * 0.01
    n = max(len(rows) - 1, 1)

    def xy(i, v):
        return PAD + (W - 2 * PAD) * i / n, H - PAD - (H - 2 * PAD) * (v - lo) / span

    parts = [f'<svg class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
             f'aria-label="{html.escape(metric)} on {html.escape(h.branch)}">',
             f'<text x="{PAD}" y="16" class="title">{html.escape(metric)}</text>',
             f'<text x="4" y="{PAD}" class="axis">{values and f"{hi:,.6g}"}</text>',
             f'<text x="4" y="{H - PAD}" class="axis">{f"{lo:,.6g}"}</text>']
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, _, v, _ in points if v is not None))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#888"/>')
    for i, sha, v, ev in points:
        x = PAD + (W - 2 * PAD) * i / n
        if v is None and (ev is None or ev.built or ev.error.startswith("skipped")):
            continue    # not measured, or not timed (the same code on the path as before)
        if v is None:   # did not build: a row, never a point
            parts.append(f'<a href="#c-{sha}"><text x="{x:.1f}" y="{H - 8}" class="broken">×</text></a>')
            continue
        x, y = xy(i, v)
        cls = "change" if sha in marked else "point"
        r = 7 if sha in marked else 3.5
        parts.append(f'<a href="#c-{sha}"><circle class="{cls}" data-sha="{sha}" cx="{x:.1f}" cy="{y:.1f}" '
                     f'r="{r}"><title>{sha[:12]} {html.escape(_subject(h, sha)[:60])}: {v:,.6g}</title>'
                     f'</circle></a>')
    parts.append("</svg>")
    return "\n".join(parts)


def _subject(h: History, sha: str) -> str:
    return next((s for r_sha, s, _, _ in h.rows if r_sha == sha), "")


def _evidence(h: History, findings: list[Finding]) -> str:
    why = {}
    for f in findings:
        why.setdefault(f.sha, []).append(f"{f.metric} {f.percent:+.2f}% ({f.kind}): {f.cause_line}")
    out = ['<table class="evidence"><tr><th>commit</th><th>subject</th><th>on branch</th><th>build</th>'
           '<th>size</th><th>changed functions</th><th>counts</th><th>timed</th><th>findings</th></tr>']
    for sha, subject, on, ev in h.rows:
        if ev is None:
            cells = ["", "not measured yet", "", "", "", ""]
        else:
            cells = ["yes" if ev.built else html.escape("no: " + ev.error[:120]),
                     f"{ev.size.get('size_total', 0):+d}" if ev.size else "",
                     html.escape(", ".join(ev.changed[:8])),
                     html.escape(", ".join(f"{k} {v:,.0f}" for k, v in ev.counts.items())),
                     html.escape(ev.timed_reason if not ev.timed else json.dumps(
                         {k: round(statistics.median(t['head']), 3) for k, t in ev.timed.items()})),
                     # a finding's line, else the commit's own verdict when it was not "none"
                     html.escape("; ".join(why.get(sha) or [f"{m}: {line}" for m, line in ev.causes.items()
                                                            if not line.startswith("cause: none")]))]
        out.append(f'<tr id="c-{sha}" class="{"gone" if not on else ""}"><td><code>{sha[:12]}</code></td>'
                   f'<td>{html.escape(subject[:80])}</td><td>{"yes" if on else "no longer on " + html.escape(h.branch)}'
                   f'</td>' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def render(title: str, histories: list[History], findings: list[Finding]) -> str:
    body = []
    for h in histories:
        marked = {f.sha for f in findings if f.branch == h.branch}
        body.append(f"<h2>branch {html.escape(h.branch)}</h2>")
        body += [_plot(h, m, {f.sha for f in findings if f.branch == h.branch and f.metric == m})
                 for m in _metrics(h)]
        body.append(f"<p>{len(marked)} commits with findings, marked red; × did not build; a timed metric has "
                    "points only where the commit was timed (the others ran the same code on the path).</p>")
        body.append(_evidence(h, findings))
    style = ("body{font-family:sans-serif;margin:1em}svg{display:block;margin:.5em 0;background:#fafafa}"
             ".point{fill:#36c}.change{fill:#d22;stroke:#000}.broken{fill:#a60;font-size:14px}"
             ".axis,.title{font-size:11px}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 4px}tr.gone{color:#999}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>\n" + "\n".join(body)
            + "\n</body></html>\n")
