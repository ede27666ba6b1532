"""A finding as the kernel test robot writes one: a subject naming the metric, the percentage
and the commit; the commit and its parent; the configuration; a table of base ± spread |
change | head ± spread; the cause line; one flagbench command that reproduces it. Written as
an mbox file (nothing is sent: the user's own tooling sends it) and as markdown; `line` is
what stdout says. Text from commits goes through textsafe; the mail fits 100 columns.
"""
from __future__ import annotations

import email.utils
import re
import shlex
import statistics
from pathlib import Path

from flagbench.stats.ranks import ratio_interval
from flagbench.textsafe import md_cell, term_text
from flagbench.watch.changes import Finding


def slug(f: Finding) -> str:
    return f"{f.sha[:12]}-{f.kind}-" + re.sub(r"[^A-Za-z0-9]+", "-", f.metric).strip("-")[:60]


def _spread(values: list[float]) -> str:
    m = statistics.median(values)
    if len(values) < 2 or not m:
        return "±0%" if len(values) < 2 or not m else ""
    return f"±{100 * statistics.stdev(values) / abs(m):.1f}%"


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 or float(x).is_integer() else f"{x:.3g}"


def _change(base: list[float], head: list[float]) -> str:
    b = statistics.median(base)
    text = f"{100 * (statistics.median(head) - b) / b:+.2f}%" if b else "n/a"
    if len(base) > 1 and len(head) > 1:
        ci = ratio_interval(base, head)
        if ci is not None:
            text += f" [{100 * (ci[0] - 1):+.1f}, {100 * (ci[1] - 1):+.1f}]"
    return text


def words(f: Finding) -> str:
    better = "improvement" if f.percent < 0 else "regression"
    return better if f.cause != "layout" else f"layout-only {better}"


def subject_line(f: Finding) -> str:
    return term_text(f"[flagbench watch] {f.metric} {f.percent:+.2f}% {words(f)} at {f.sha[:12]} "
                     f"(\"{f.subject[:40]}\")")


def table(f: Finding) -> list[str]:
    """0Day's table: the finding's metric first, then the commit's other measured rows."""
    head = f"{'base':>12} {'':>7} | {'%change':>20} | {'head':>12} {'':>7} | stat"   # 30 columns for the stat
    rows = [head, "-" * min(len(head) + 14, 99)]
    for metric, base, new in [(f.metric, f.base, f.head), *[r for r in f.also if r[0] != f.metric]]:
        b, h = statistics.median(base), statistics.median(new)
        rows.append(f"{_num(b):>12} {_spread(base):>7} | {_change(base, new):>20} | {_num(h):>12} "
                    f"{_spread(new):>7} | {metric}"[:99])
    return rows


def body(f: Finding, *, repo: str, config: str, command: str, evidence: str) -> str:
    lines = [
        "Hello,",
        "",
        f"flagbench watch noticed a {f.percent:+.2f}% {words(f)} of {f.metric} on:",
        "",
        term_text(f"commit: {f.sha} (\"{f.subject[:70]}\")"),
        f"parent: {f.parent}",
        term_text(f"branch: {f.branch} of {repo}"[:99]),
        term_text(f"config: {config}"[:99]),
        "kind:   " + ("exact count (one run is the value)" if f.kind == "exact"
                         else "timed: a change point of the history (E-divisive means)"),
        "",
        *table(f),
        "(exact counts: one run is the value, ±0; times: median ± %stddev, [95 % interval of the ratio])",
        "",
        term_text(f.cause_line),
        *([term_text(("functions changed on the path: " + ", ".join(f.changed))[:99])] if f.changed else []),
        *([""] + [term_text(x)[:99] for x in f.objects] if f.objects else []),
        "",
        "To reproduce:",
        "",
        f"  {term_text(command)}"[:200],
        "",
        term_text(f"evidence: {evidence}"[:99]),
        "",
        "-- ",
        "flagbench watch (nothing was sent: this file is for your own tooling)",
    ]
    return "\n".join(lines) + "\n"


def reproduce(experiment: str, f: Finding, variant_args: list[str]) -> str:
    return shlex.join(["flagbench", "series", experiment, f"{f.parent[:12]}..{f.sha[:12]}", *variant_args])


def write(f: Finding, out: Path, **kw) -> tuple[Path, bool]:
    """(the mbox file, whether it is new) and the markdown beside it."""
    out.mkdir(parents=True, exist_ok=True)
    name = slug(f)
    mbox, md = out / f"{name}.mbox", out / f"{name}.md"
    new = not mbox.exists()
    text = body(f, **kw)
    date = email.utils.formatdate(localtime=False)
    mail = (f"From flagbench-watch {date}\nFrom: flagbench watch <flagbench@localhost>\nDate: {date}\n"
            f"Subject: {subject_line(f)}\nContent-Type: text/plain; charset=utf-8\n\n"
            + re.sub(r"^From ", ">From ", text, flags=re.M) + "\n")
    mbox.write_text(mail)
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)   # a subject's own backticks cannot end the block
    md_lines = [f"### {md_cell(subject_line(f))}", "", fence, text.rstrip(), fence, ""]
    md.write_text("\n".join(md_lines))
    return mbox, new


def line(f: Finding, path: Path) -> str:
    return term_text(f"{f.branch}: {f.sha[:12]} {f.metric} {f.percent:+.2f}% ({f.kind}, {f.cause}): {path}")
