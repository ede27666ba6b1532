"""v1 against v2 of a series: the patches paired as `git range-diff` pairs them (run in the
owned clone, where both versions' commits are), patches that applied in neither range paired
by subject, then one table per pair: its evidence in v1, in v2, and what changed; the patches
v2 added and dropped. Markdown within 100 columns, to paste into the reply to v2."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from flagbench.mail.apply import _git
from flagbench.mail.run import MailRun
from flagbench.series import Row
from flagbench.textsafe import md_cell, md_code

WIDTH = 100
_PAIR = re.compile(r"^\s*(\d+|-):\s+(\S+)\s+([=!<>])\s+(\d+|-):\s+(\S+)\s+(.*)$")
SAYS = {"=": "same diff", "!": "diff changed", "~": "paired by subject"}


@dataclass
class Versions:
    old: MailRun
    new: MailRun
    pairs: list[tuple[int, int, str]] = field(default_factory=list)   # (old index, new index, = ! ~)
    dropped: list[int] = field(default_factory=list)                  # old indices
    added: list[int] = field(default_factory=list)                    # new indices
    notes: list[str] = field(default_factory=list)


def labels(v: Versions) -> tuple[str, str]:
    """What the two versions are called: v1 and v2 by their prefixes, or (one version twice)
    by their mbox files."""
    a, b = v.old.mail.version, v.new.mail.version
    if a != b:
        return f"v{a}", f"v{b}"
    x, y = (Path(r.mail.source).name if r.mail.source != "-" else "stdin" for r in (v.old, v.new))
    return (x, y) if x != y else ("first", "second")


def _tip(run: MailRun) -> str:
    commits = run.applied.commits
    return (commits[-1] if commits else run.applied.base).sha


def range_diff(old: MailRun, new: MailRun) -> list[tuple[int, int, str]] | None:
    """`git range-diff`'s pairing as (old commit index, new commit index, = or !), 0-based in
    each version's applied commits; None when it could not run (another clone, an error)."""
    if old.applied.clone != new.applied.clone:
        return None
    done = _git(old.applied.clone, "range-diff", "--no-color",
                f"{old.applied.base.sha}..{_tip(old)}", f"{new.applied.base.sha}..{_tip(new)}")
    if done.failure:
        return None
    out = []
    for line in done.stdout.splitlines():
        m = _PAIR.match(line)
        if m and m.group(3) in "=!" and m.group(1) != "-" and m.group(4) != "-":
            out.append((int(m.group(1)) - 1, int(m.group(4)) - 1, m.group(3)))
    return out


def _norm(subject: str) -> str:
    return " ".join(subject.lower().split())


def compare_versions(old: MailRun, new: MailRun) -> Versions:
    v = Versions(old, new)
    applied_old = [i for i, (_, c, _) in enumerate(old.applied.results) if c is not None]
    applied_new = [i for i, (_, c, _) in enumerate(new.applied.results) if c is not None]
    paired = range_diff(old, new)
    if paired is None:
        v.notes.append("git range-diff could not pair the versions: paired by subject")
        paired = []
    for a, b, how in paired:
        v.pairs.append((applied_old[a], applied_new[b], how))
    left_old = [i for i in range(len(old.mail.patches)) if i not in {p[0] for p in v.pairs}]
    left_new = [i for i in range(len(new.mail.patches)) if i not in {p[1] for p in v.pairs}]
    for i in list(left_old):      # what range-diff did not see (not applied) or did not pair
        subject = _norm(old.mail.patches[i].subject)
        j = next((j for j in left_new if _norm(new.mail.patches[j].subject) == subject), None)
        if j is not None:
            v.pairs.append((i, j, "~"))
            left_old.remove(i)
            left_new.remove(j)
    v.pairs.sort(key=lambda p: p[1])
    v.dropped, v.added = left_old, left_new
    return v


def _num(x) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:+,.0f}" if float(x).is_integer() or abs(x) >= 100 else f"{x:+.2f}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "~"


def evidence(row: Row) -> dict[str, object]:
    """One patch's evidence against the row before it (the last that applied and built)."""
    if not row.built or row.vs_parent is None:
        return {"error": row.error or "not compared (the row before did not build)"}
    d = row.vs_parent
    out = {"size": d.total, "grow/shrink": f"{d.grow}/{d.shrink}", "add/remove": f"{d.add}/{d.remove}",
           "padding": d.padding, "functions": d.functions, "changed": d.changed}
    out.update({f"count {k}": val for k, val in d.counts.items()})
    out.update({f"time {t.label}": {"ratio": t.estimate, "low": t.low, "high": t.high, "pairs": t.pairs}
                for t in row.timed})
    return out


def _pct(ratio: float | None) -> str:
    return "?" if ratio is None else f"{(ratio - 1) * 100:+.1f} %"


def _timed_rows(e_old: dict, e_new: dict, row) -> None:
    """Each timed bench: the patch against the one before it in paired rounds, in each version
    (ratio as a change, then its interval), and whether the two intervals overlap."""
    for key in sorted({k for e in (e_old, e_new) for k in e if k.startswith("time ")}):
        x, y = e_old.get(key), e_new.get(key)
        change = ""
        if x and y:
            change = f"{((y['ratio'] - 1) - (x['ratio'] - 1)) * 100:+.1f} pt"
        row(md_code(key[5:]), _pct(x["ratio"]) if x else "-", _pct(y["ratio"]) if y else "-", change)
        apart = ""
        if x and y and None not in (x["low"], x["high"], y["low"], y["high"]):
            apart = "apart" if x["high"] < y["low"] or y["high"] < x["low"] else "overlap"
        row(f"  interval, {(x or y)['pairs']} pairs", _interval(x), _interval(y), apart)


def _interval(t: dict | None) -> str:
    if not t or t["low"] is None or t["high"] is None:
        return "-"      # too few pairs (stats: MIN_SAMPLES_CI), or none uncontended
    return f"[{(t['low'] - 1) * 100:+.1f}, {(t['high'] - 1) * 100:+.1f}] %"


def _names(functions: list[str]) -> str:
    return ", ".join(md_code(f) for f in functions[:3]) + (f" +{len(functions) - 3}" if len(functions) > 3 else "") \
        if functions else "none"


def pair_table(v: Versions, a: int, b: int, how: str) -> list[str]:
    p_old, p_new = v.old.mail.patches[a], v.new.mail.patches[b]
    e_old, e_new = evidence(v.old.rows[a]), evidence(v.new.rows[b])
    title = f"#### {p_new.label} {md_cell(p_new.subject)}"
    one, two = labels(v)
    lines = [_fit(title, WIDTH), "",
             _fit(f"{one} {p_old.label}, range-diff: {how} ({SAYS.get(how, how)})", WIDTH), ""]
    w = (WIDTH - 13) // 4   # four columns of cells, their bars and spaces
    heads = [_fit(md_cell(x), w) for x in (one, two, f"{two} - {one}")]
    lines += [f"| {'evidence':{w}} | " + " | ".join(f"{h:>{w}}" for h in heads) + " |",
              f"|{'-' * (w + 2)}|{'-' * (w + 1)}:|{'-' * (w + 1)}:|{'-' * (w + 1)}:|"]

    def row(label, x, y, change=""):
        lines.append(f"| {_fit(label, w):{w}} | {_fit(x, w):>{w}} | {_fit(y, w):>{w}} | {_fit(change, w):>{w}} |")

    if "error" in e_old or "error" in e_new:
        row("applied and built", "no" if "error" in e_old else "yes", "no" if "error" in e_new else "yes")
    numbers = ["size"] + sorted({k for e in (e_old, e_new) for k in e if k.startswith("count ")})
    for key in numbers + ["padding"]:
        x, y = e_old.get(key), e_new.get(key)
        if x is None and y is None:
            continue
        label = {"size": "size, bytes", "padding": "padding, bytes"}.get(key, key[6:])
        change = _num(y - x) if isinstance(x, (int, float)) and isinstance(y, (int, float)) else ""
        row(md_code(label) if key.startswith("count ") else label, _num(x), _num(y), change)
    _timed_rows(e_old, e_new, row)
    for key in ("grow/shrink", "add/remove"):
        if key in e_old or key in e_new:
            row(f"functions {key}", str(e_old.get(key, "-")), str(e_new.get(key, "-")))
    if "functions" in e_old or "functions" in e_new:
        fo, fn = e_old.get("functions", []), e_new.get("functions", [])
        same = "same" if fo == fn else ""
        row("code changed in", _names(fo), _names(fn), same)
    for version, e in ((one, e_old), (two, e_new)):
        if "error" in e:
            lines.append(_fit(f"- {version}: {md_cell(str(e['error']))}", WIDTH))
    return lines


def markdown(v: Versions) -> str:
    o, n = v.old, v.new
    one, two = (md_cell(x) for x in labels(v))
    def head_of(name: str) -> str:
        return f"**flagbench series: {md_cell(o.exp.name)} {o.series.cell}: {name}, {one} against {two}**"
    name = md_cell(n.mail.name)
    room = WIDTH - len(head_of(""))
    head = head_of(name if len(name) <= room else name[:max(room - 1, 0)].rstrip("\\") + "~")
    lines = [head, "",
             f"- {one}: {len(o.mail.patches)} patches, {len(o.applied.commits)} applied on "
             f"`{o.applied.base.short}`",
             f"- {two}: {len(n.mail.patches)} patches, {len(n.applied.commits)} applied on "
             f"`{n.applied.base.short}`",
             "- each patch against the one before it that applied and built: bloat-o-meter's total, "
             "exact counts"]
    if o.series.place or n.series.place:
        lines.append(_fit(f"- time: each patch against the one before it in paired rounds on "
                          f"{md_cell(o.series.place or n.series.place)}: the change, its interval", WIDTH))
    lines.append("")
    for a, b, how in v.pairs:
        lines += pair_table(v, a, b, how) + [""]
    for what, name, run, indices in (("added in", two, n, v.added), ("dropped from", one, o, v.dropped)):
        if indices:
            lines.append(f"#### patches {what} {name}")
            lines.append("")
            for i in indices:
                p, e = run.mail.patches[i], evidence(run.rows[i])
                said = (md_cell(str(e["error"])) if "error" in e else
                        f"size {_num(e['size'])}, code changed in {_names(e['functions'])}")
                lines.append(_fit(f"- {p.label} {md_cell(p.subject)}: {said}", WIDTH))
            lines.append("")
    for note in v.notes + [f"{one}: {x}" for x in o.series.notes] + [f"{two}: {x}" for x in n.series.notes]:
        lines.append(_fit(f"- {md_cell(note)}", WIDTH))
    return "\n".join(lines).rstrip() + "\n"


def as_json(v: Versions) -> dict:
    from flagbench.mail.run import as_json as run_json
    return {"versions": [run_json(v.old), run_json(v.new)],
            "pairs": [{"v1": v.old.mail.patches[a].label, "v2": v.new.mail.patches[b].label,
                       "subject": v.new.mail.patches[b].subject, "range_diff": how,
                       "v1_evidence": evidence(v.old.rows[a]), "v2_evidence": evidence(v.new.rows[b])}
                      for a, b, how in v.pairs],
            "added": [v.new.mail.patches[i].label for i in v.added],
            "dropped": [v.old.mail.patches[i].label for i in v.dropped], "notes": v.notes}


def _json(v: Versions) -> str:
    import json
    return json.dumps(as_json(v), indent=1) + "\n"


# v1 against v2 by format (the text format is the Markdown, which reads as text)
VERSION_RENDERERS = {"text": markdown, "md": markdown, "json": _json}
VERSION_FORMATS = tuple(VERSION_RENDERERS)


def render_versions(v: Versions, fmt: str) -> str:
    from flagbench import export
    return export.render(fmt, {name: (lambda r=r: r(v)) for name, r in VERSION_RENDERERS.items()})
