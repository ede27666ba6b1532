"""What `flagbench asm` prints: the function list, the instruction mix, side-by-side diffs;
as text (coloured on a terminal), markdown or JSON."""
from __future__ import annotations

import json
import re
import sys

from flagbench import export
from flagbench.asm.compare import AsmComparison, FunctionDiff, side_by_side
from flagbench.asm.mix import Mix, mix
from flagbench.asm.model import EVERY, in_part
from flagbench.textsafe import md_code, term_text

FORMATS = export.choices("text", "md", "json")
LIST_STATUSES = ("changed", "added", "removed")


class Mixes:
    """Instruction mixes per function, old and new, computed once per distinct text: for json
    most come made with the disassemblies (each side makes half, see `compare.disassemble_pair`),
    a function with the same text on the other side (same target) shares that side's, and only
    the rest are made here (for text and markdown, only those of the functions shown: the
    totals come from each side's sum of its half)."""

    def __init__(self, c: AsmComparison):
        self.c = c
        self._cache: dict[tuple[str, str], Mix] = {}
        self._same_target = c.old.target == c.new.target
        self._differ: list[FunctionDiff] | None = None   # the functions whose texts differ (`total`)

    def of(self, side: str, d: FunctionDiff) -> Mix | None:
        f = d.old if side == "old" else d.new
        if f is None:
            return None
        if f.mix is not None:
            return f.mix
        g = d.new if side == "old" else d.old
        if self._same_target and g is not None and g.mix is not None and g.text == f.text:
            return g.mix
        target = self.c.old.target if side == "old" else self.c.new.target
        key = (target, f.text)
        if key not in self._cache:
            self._cache[key] = mix(target, f.text)
        return self._cache[key]

    def total(self, side: str) -> Mix:
        """Every function's mix on SIDE, summed. From the sums the two sides made of their
        parts (`Disassembly.part_mix`) where they can: the other side's part stands in for this
        side's functions of that part, once the functions whose texts differ are set right."""
        this, other = (self.c.old, self.c.new) if side == "old" else (self.c.new, self.c.old)
        out = Mix()
        if this.part_mix is not None and this.mix_part == EVERY:
            out += this.part_mix
            return out
        if not self._complementary():
            for d in self.c.functions:
                m = self.of(side, d)
                if m is not None:
                    out += m
            return out
        out += this.part_mix
        out += other.part_mix
        other_side = "new" if side == "old" else "old"
        if self._differ is None:   # texts compared once for both totals
            self._differ = [d for d in self.c.functions if d.old is None or d.new is None or d.old.text != d.new.text]
        for d in self._differ:
            if not in_part(d.name, other.mix_part):
                continue
            f, g = (d.old, d.new) if side == "old" else (d.new, d.old)
            if g is not None:
                out -= self.of(other_side, d)
            if f is not None:
                out += self.of(side, d)
        return out

    def _complementary(self) -> bool:
        """Whether the two sides' part sums cover every function once, between them."""
        o, n = self.c.old, self.c.new
        if not self._same_target or o.part_mix is None or n.part_mix is None:
            return False
        (a, b, parts), (c, d, other_parts) = sorted((o.mix_part, n.mix_part))
        return parts == other_parts and (a, b, c, d) == (0, c, b, parts)


def mix_rows(old: Mix | None, new: Mix | None) -> list[tuple[str, int, int]]:
    """(metric, old, new) for every metric either side has."""
    o, n = old or Mix(), new or Mix()
    rows = [("insns", o.insns, n.insns), ("padding insns", o.padding, n.padding)]
    for label, a, b in (("load", o.loads, n.loads), ("store", o.stores, n.stores)):
        for w in sorted(set(a) | set(b)):
            rows.append((f"{label}s {w}B", a.get(w, 0), b.get(w, 0)))
    rows += [("calls direct", o.calls_direct, n.calls_direct),
             ("calls indirect", o.calls_indirect, n.calls_indirect),
             ("calls through stubs", o.calls_stub, n.calls_stub),
             ("call sequence insns", o.call_seq_insns, n.call_seq_insns),
             ("branches", o.branches, n.branches)]
    for op in sorted(set(o.string_ops) | set(n.string_ops)):
        rows.append((op, o.string_ops.get(op, 0), n.string_ops.get(op, 0)))
    return rows


def to_json(c: AsmComparison, chosen: list[str], everything: bool = True) -> str:
    mixes = Mixes(c)
    functions = []
    for d in c.functions:
        if not everything and d.status == "same" and d.name not in chosen:
            continue
        mo, mn = mixes.of("old", d), mixes.of("new", d)
        functions.append({
            "name": d.name, "status": d.status, "changed_lines": d.changed_lines,
            "mix": {"old": mo.to_json() if mo else None, "new": mn.to_json() if mn else None},
        })
    out = {"old": _side_json(c.old), "new": _side_json(c.new),
        "counts": c.counts(),
        "functions": functions,
        "total": {"old": mixes.total("old").to_json(), "new": mixes.total("new").to_json()},
        "unsized": {"old": c.old.unsized, "new": c.new.unsized},
    }
    if c.warning:
        out["warning"] = c.warning
    if chosen:
        out["diffs"] = {name: [list(r) for r in side_by_side(c.get(name))] for name in chosen}
    return json.dumps(out, indent=2)


def _side_json(d) -> dict:
    out = {"path": str(d.path), "target": d.target, "tool": d.tool}
    if d.label:
        out["build"] = d.label
    return out


def _delta(a: int, b: int) -> str:
    return f"{b - a:+d}" if b != a else "0"


def _summary(c: AsmComparison) -> str:
    k = c.counts()
    return (f"{len(c.functions)} functions: {k['same']} same, {k['changed']} changed, "
            f"{k['added']} added, {k['removed']} removed")


def unsized_line(c: AsmComparison) -> str | None:
    """Linker stubs and other code outside every function, old -> new (None when neither has any)."""
    o, n = c.old.unsized, c.new.unsized
    if not any(d.get(k) for d in (o, n) for k in ("stubs", "stub", "other")):
        return None
    return (f"stubs: {o.get('stubs', 0)} -> {n.get('stubs', 0)} ({o.get('stub', 0)} -> {n.get('stub', 0)} bytes); "
            f"other code outside functions: {o.get('other', 0)} -> {n.get('other', 0)} bytes")


def to_markdown(c: AsmComparison, chosen: list[str], limit: int) -> str:
    mixes = Mixes(c)
    out = [f"**asm** {md_code(c.old.shown)} → {md_code(c.new.shown)} ({c.old.target}) · {_summary(c)}", ""]
    if unsized_line(c):
        out += [unsized_line(c), ""]
    if c.warning:
        out += [f"> warning: {md_code(c.warning)}", ""]
    listed = [d for d in c.functions if d.status in LIST_STATUSES][:limit]
    if listed:
        out += ["| function | status | lines changed | insns old | insns new |", "|---|---|--:|--:|--:|"]
        for d in listed:
            mo, mn = mixes.of("old", d), mixes.of("new", d)
            out.append(f"| {md_code(d.name)} | {d.status} | {d.changed_lines} | "
                       f"{mo.insns if mo else '-'} | {mn.insns if mn else '-'} |")
        out.append("")
    out += _md_mix("Total", mixes.total("old"), mixes.total("new"))
    for name in chosen:
        d = c.get(name)
        out += _md_mix(f"{md_code(name)} ({d.status})", mixes.of("old", d), mixes.of("new", d))
        rows = [term_text(_plain_row(r, 48, diff_marks=True)) for r in side_by_side(d)]
        fence = "`" * max([3] + [len(run) + 1 for row in rows for run in re.findall("`+", row)])
        out += [fence + "diff"] + rows + [fence, ""]
    return "\n".join(out).rstrip() + "\n"


def _md_mix(title: str, old: Mix | None, new: Mix | None) -> list[str]:
    out = [f"{title}:", "", "| metric | old | new | delta |", "|---|--:|--:|--:|"]
    out += [f"| {m} | {a} | {b} | {_delta(a, b)} |" for m, a, b in mix_rows(old, new)]
    return out + [""]


def _plain_row(row: tuple[str, str, str], width: int, diff_marks: bool = False) -> str:
    mark, a, b = row
    lead = {" ": " ", "|": "!", "<": "-", ">": "+"}[mark] if diff_marks else ""
    return f"{lead}{a:<{width}} {mark} {b}".rstrip()


def print_text(c: AsmComparison, chosen: list[str], limit: int, file=None) -> None:
    from rich.console import Console
    from rich.text import Text

    file = file or sys.stdout
    console = Console(file=file, highlight=False, soft_wrap=True, emoji=False)
    mixes = Mixes(c)
    console.print(Text(term_text(f"old: {c.old.shown}  ({c.old.target}, {c.old.tool})")))
    console.print(Text(term_text(f"new: {c.new.shown}  ({c.new.target}, {c.new.tool})")))
    if c.warning:
        console.print(Text(term_text(f"warning: {c.warning}"), style="yellow"))
    console.print(_summary(c))
    if unsized_line(c):
        console.print(unsized_line(c))
    listed = [d for d in c.functions if d.status in LIST_STATUSES]
    if listed:
        console.print()
        width = max(8, min(48, max(len(term_text(d.name)) for d in listed[:limit])))
        console.print(f"{'function':<{width}} {'status':<8} {'lines':>6} {'insns':>13}")
        style = {"changed": "yellow", "added": "green", "removed": "red"}
        for d in listed[:limit]:
            mo, mn = mixes.of("old", d), mixes.of("new", d)
            insns = f"{mo.insns if mo else '-'} -> {mn.insns if mn else '-'}"
            line = Text(f"{term_text(d.name):<{width}} ")
            line.append(f"{d.status:<8}", style=style[d.status])
            line.append(f" {d.changed_lines or '':>6} {insns:>13}")
            console.print(line)
        if len(listed) > limit:
            console.print(f"... {len(listed) - limit} more (--limit)")
    _text_mix(console, "total", mixes.total("old"), mixes.total("new"))
    for name in chosen:
        d = c.get(name)
        console.print()
        console.print(Text(term_text(f"{name} ({d.status}, {d.changed_lines} lines differ)"), style="bold"))
        rows = [tuple(map(term_text, r)) for r in side_by_side(d)]
        width = max([len(a) for _, a, _ in rows] + [8])
        colour = {" ": None, "|": "yellow", "<": "red", ">": "green"}
        for row in rows:
            console.print(Text(_plain_row(row, width), style=colour[row[0]] or ""))
        _text_mix(console, term_text(name), mixes.of("old", d), mixes.of("new", d))


def _text_mix(console, title: str, old: Mix | None, new: Mix | None) -> None:
    from rich.text import Text
    rows = mix_rows(old, new)
    console.print()
    console.print(f"{'mix: ' + title:<24} {'old':>9} {'new':>9} {'delta':>8}")
    for metric, a, b in rows:
        line = Text(f"{metric:<24} {a:>9} {b:>9} ")
        line.append(f"{_delta(a, b):>8}", style="yellow" if a != b else "")
        console.print(line)
