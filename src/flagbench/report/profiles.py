"""Profiles printed: the baseline's profile against each other variant's, per bench, target,
compiler and source, as text, md, json or csv (`flagbench profile`), and as blocks of a run's
report (`flagbench report`, `flagbench demo`).
"""
from __future__ import annotations

import csv
import io
import json

from flagbench import export
from flagbench.errors import UserError
from flagbench.profile import Profile, diff
from flagbench.report.cells import slug
from flagbench.report.doc import Bullets, Grid, Markdown
from flagbench.textsafe import csv_cell, term_text

FORMATS = export.choices("text", "md", "json", "csv")


def stored(store, experiment_hash: str, key: dict | None = None) -> list[Profile]:
    """The profiles kept for an experiment (those matching key), typed."""
    try:
        return [Profile.from_json(d) for d in store.profiles(experiment_hash, key)]
    except ValueError:
        raise UserError(f"{store.path}: a stored profile of {experiment_hash[:12]} is not a profile "
                        f"(the database was damaged or edited by hand)") from None


def pairs(profiles: list[Profile], baseline: str):
    """(old, new) per bench x target x compiler x source: the baseline against each other variant."""
    by_key: dict[tuple, dict[str, Profile]] = {}
    for p in profiles:
        by_key.setdefault((p.bench, p.target, p.compiler, p.source), {})[p.variant] = p
    for key, variants in by_key.items():
        old = variants.get(baseline)
        if old is None:
            continue
        for name, new in variants.items():
            if name != baseline:
                yield old, new


def diff_rows(old: Profile, new: Profile, top: int | None = 8) -> tuple[list[str], list[list[str]]]:
    unit = "insns/iter" if old.exact else "samples"
    header = ["symbol", f"{old.variant} share", f"{new.variant} share", "change", f"{old.variant} {unit}",
              f"{new.variant} {unit}"]
    body = []
    rows = diff(old, new, None)
    if not old.exact:   # sampled: leave out what neither side spent half a percent in (kernel noise)
        rows = [r for r in rows if max(r.old_share, r.new_share) >= 0.005] or rows[:2]
    for r in rows[:top]:
        name = r.name + (f" ({', '.join(r.suffixes)})" if r.suffixes else "")
        body.append([name, f"{100 * r.old_share:.1f} %", f"{100 * r.new_share:.1f} %",
                     f"{100 * (r.new_share - r.old_share):+.1f} pt", _num(r.old), _num(r.new)])
    return header, body


def _num(v: float) -> str:
    return f"{v:.0f}" if v == int(v) else f"{v:.3g}"


def title(old: Profile, new: Profile) -> str:
    kind = "exact" if old.exact else "time (perf cpu-clock samples)"
    return (f"{old.bench} · profile, {kind}, {old.source} · {old.target}/{old.compiler}: {new.variant} vs "
            f"{old.variant} (total {_num(old.total)} -> {_num(new.total)})")


def blocks(profiles: list[Profile], baseline: str, *, prefix: str = "", notes: list[str] = ()):
    out = []
    for old, new in pairs(profiles, baseline):
        header, body = diff_rows(old, new)
        out.append(Grid(header, body, title=title(old, new), align="lrrrrr",
                        anchor=slug(prefix, old.bench, "profile", old.source, old.target, old.compiler, new.variant)))
    if notes:
        out.append(Bullets(list(notes)))
    return out


def render(profiles: list[Profile], baseline: str, fmt: str, notes: list[str] = ()) -> str:
    return export.render(fmt, {
        "text": lambda: _text(profiles, baseline, notes),
        "md": lambda: Markdown().render(blocks(profiles, baseline, notes=notes)),
        "json": lambda: json.dumps({"profiles": [p.to_json() for p in profiles], "notes": list(notes)},
                                   indent=2) + "\n",
        "csv": lambda: _csv(profiles)})


def _csv(profiles: list[Profile]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["bench", "target", "compiler", "variant", "source", "exact", "total", "symbol", "self"])
    for p in profiles:
        for s in p.to_json()["symbols"]:
            writer.writerow([csv_cell(x) if isinstance(x, str) else x for x in
                             (p.bench, p.target, p.compiler, p.variant, p.source, p.exact, p.total, s["name"],
                              s["self"])])
    return buffer.getvalue()


def _text(profiles: list[Profile], baseline: str, notes) -> str:
    lines = []
    for old, new in pairs(profiles, baseline):
        header, body = diff_rows(old, new)
        widths = [max(len(term_text(x)) for x in col) for col in zip(header, *body)]
        lines.append(term_text(title(old, new)))
        for row in [header] + body:
            lines.append("  ".join(term_text(x).ljust(w) if i == 0 else term_text(x).rjust(w)
                                   for i, (x, w) in enumerate(zip(row, widths))))
        lines.append("")
    lines += [f"note: {term_text(n)}" for n in notes]
    return "\n".join(lines) + "\n"
