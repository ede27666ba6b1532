"""The few lines a kernel developer pastes under the patch, from two built cells:

    default/x86_64/gcc -> new/x86_64/gcc
    size +N B (+x.xx %) = functions +F B + data +D B; K functions changed
      that is bloat-o-meter's total: Before=.., After=.., chg +x.xx%
      not in that total: padding between functions +P B; code sections A -> B B (+T, +t.tt %):
        ...why they differ
      bloat-o-meter rules: ...which script's
    config A vs B: ...
    objects whose code changed: ... (each object's .text before linking)
    built with <compiler> on <tree>

The one headline is bloat-o-meter's total, as the kernel's own script prints it, split into
its parts (functions: its -t table; data: the rest), which add up to it. The `.text` section can hardly move while functions grow (alignment slack at its end
absorbs it), so the section total comes after, with the padding that explains the difference.
Which script's rules made the table is said (the tree's, or the newest with weak symbols).

The numbers come from the size stage (sections, padding, bloat-o-meter's table), the asm
stage (functions changed, string operations) and kernel.objects (per-object ranking); nothing
is measured twice here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from flagbench.kernelspec import config_delta
from flagbench.size import objects as kobjects


@dataclass
class PairSummary:
    old_label: str
    new_label: str
    text_old: int                   # bytes in executable sections of vmlinux
    text_new: int
    padding_old: int                # bytes between functions (what bloat-o-meter cannot see)
    padding_new: int
    covered_old: int                # bytes of code inside sized symbols (the functions themselves)
    covered_new: int
    bom_old: int                    # bloat-o-meter's Total: Before / After
    bom_new: int
    fn_old: int                     # ... of its function symbols alone (bloat-o-meter -t)
    fn_new: int
    rules: str                      # which script's rules made the table (BOM_RULES)
    functions: dict[str, int]       # asm: changed / added / removed / same
    config_delta: list[tuple[str, str, str]]
    objects: list[kobjects.ObjectChange]
    compiler: str
    tree: str
    string_ops: list[tuple[str, dict, dict]]   # (function, old {op: n}, new {op: n}) where they differ
    stubs: str = ""                 # linker stubs and code outside functions, one line (size/asm)
    stub_bytes_old: int = 0         # bytes of linker stubs (code no symbol covers)
    stub_bytes_new: int = 0

    @property
    def text_delta(self) -> int:
        return self.text_new - self.text_old

    @property
    def bom_line(self) -> str:
        """bloat-o-meter's own footer, in its own format."""
        pct = (self.bom_new - self.bom_old) * 100.0 / self.bom_old if self.bom_old else 0
        return "Before=%d, After=%d, chg %+.2f%%" % (self.bom_old, self.bom_new, pct)


# scripts/bloat-o-meter before the weak-symbol change (Linux 6.1 has this one): no w/W/v/V.
LEGACY_BOM_TABLES = {None: (("Function", "tTdDbBrR"),), "t": (("Function", "tT"),), "d": (("Data", "dDbBrR"),),
                     "c": (("Function", "tT"), ("Data", "dDbB"), ("RO Data", "rR"))}
BOM_RULES = {"tree": "the tree's own scripts/bloat-o-meter", "newest": "the newest scripts/bloat-o-meter"}


def rules_of(tree_src: Path | None, rules: str = "tree") -> tuple[str, bool]:
    """(what to call the rules, whether they are the legacy ones without weak symbols)."""
    if rules == "newest":
        return "newest scripts/bloat-o-meter (weak symbols w/W/v/V counted)", False
    script = tree_src / "scripts" / "bloat-o-meter" if tree_src else None
    if script is None or not script.is_file():
        return "newest scripts/bloat-o-meter (the tree has none)", False
    if '"tTwW"' in script.read_text(errors="replace"):
        return "the tree's scripts/bloat-o-meter (weak symbols counted)", False
    return "the tree's scripts/bloat-o-meter (older: weak symbols w/W/v/V not counted)", True


def tree_bom(old_path, new_path, tree_src: Path | None, mode: str | None = None, match=None,
             top: int | None = None, rules: str = "tree") -> str:
    """What the tree's own scripts/bloat-o-meter prints for OLD and NEW (`rules="newest"`: what
    the newest script prints): the size stage's bom, with the older symbol types when the
    tree's script predates weak symbols."""
    from flagbench import size
    if not rules_of(tree_src, rules)[1]:
        return size.bom(str(old_path), str(new_path), mode, match, top)
    out = []
    for label, types in LEGACY_BOM_TABLES[mode]:
        text = size.bom(str(old_path), str(new_path), None, match, top, types)
        out.append(text.replace("%-40s" % "Function", "%-40s" % label, 1))   # its one-table label
    return "".join(out)


def _bom_totals(text: str) -> tuple[int, int]:
    last = text.rstrip().rsplit("\n", 1)[-1]            # "Total: Before=1, After=2, chg +1.00%"
    before, after = (int(part.split("=")[1]) for part in last.removeprefix("Total: ").split(", ")[:2])
    return before, after


def summarize(old, new, *, with_asm: bool = True, with_objects: bool = True, rules: str = "tree") -> PairSummary:
    """OLD and NEW are kbuild.KernelBuild cells (ok ones); `rules`: "tree" or "newest" (BOM_RULES)."""
    from flagbench import size
    c = size.compare(str(old.vmlinux), str(new.vmlinux))
    counts, string_ops = {}, []
    if with_asm:
        from flagbench.asm.compare import compare
        # totals and the changed functions' own mixes (`_string_ops`): each side's mix summed
        asm = compare(old.vmlinux, new.vmlinux, rank=False, mix_each=False)
        counts = asm.counts()
        string_ops = _string_ops(asm)
    compiler = next(iter(new.tools.values()), "")
    bom_old, bom_new = _bom_totals(tree_bom(old.vmlinux, new.vmlinux, old.src, rules=rules))
    fn_old, fn_new = _bom_totals(tree_bom(old.vmlinux, new.vmlinux, old.src, "t", rules=rules))
    return PairSummary(
        old.cell.key, new.cell.key, c.old.code, c.new.code, c.old.padding, c.new.padding,
        c.old.covered, c.new.covered, bom_old, bom_new, fn_old, fn_new, rules_of(old.src, rules)[0],
        counts, config_delta(old.config, new.config),
        kobjects.compare_trees(old.dir, new.dir) if with_objects else [], compiler, new.tree, string_ops,
        _stubs(c, asm if with_asm else None), c.old.stub_bytes, c.new.stub_bytes)


def _stubs(c, asm) -> str:
    """Linker stubs (count, bytes, calls through them) and other code outside functions."""
    o, n = c.old, c.new
    if not (o.stubs or n.stubs or o.other or n.other):
        return ""
    line = f"linker stubs {o.stubs} -> {n.stubs} ({o.stub_bytes} -> {n.stub_bytes} B"
    if asm is not None:
        from flagbench.asm.render import Mixes
        mixes = Mixes(asm)
        line += f", calls through them {mixes.total('old').calls_stub} -> {mixes.total('new').calls_stub}"
    return line + f"); other code outside functions {o.other} -> {n.other} B"


def _string_ops(asm) -> list[tuple[str, dict, dict]]:
    """Functions whose string operations (rep movsq, rep stosq, ...) differ, most change first."""
    from flagbench.asm.mix import mix
    rows = []
    for f in asm.functions:
        if f.status == "same":
            continue
        a = mix(asm.old.target, f.old.lines).string_ops if f.old else {}
        b = mix(asm.new.target, f.new.lines).string_ops if f.new else {}
        if dict(a) != dict(b):
            rows.append((f.name, dict(a), dict(b)))
    rows.sort(key=lambda r: (-sum(abs(r[2].get(k, 0) - r[1].get(k, 0)) for k in set(r[1]) | set(r[2])), r[0]))
    return rows


def _why_sections(s: PairSummary) -> str:
    """Why the sections' total and bloat-o-meter's differ, in the words that fit this pair."""
    inside, between = s.covered_new - s.covered_old, s.padding_new - s.padding_old
    stubs = s.stub_bytes_new - s.stub_bytes_old
    if stubs:   # linker stubs come and go with the calls that need them: say so before any slack
        rest = s.text_delta - inside - between - stubs
        return (f"inside functions {_signed(inside)} B, between them {_signed(between)} B, linker stubs "
                f"{_signed(stubs)} B" + (f", the rest {_signed(rest)} B (unsized code, section tails)" if rest else ""))
    if s.text_delta == inside + between and not between:
        return "the growth inside functions, no padding moved"
    if inside and between and (inside > 0) != (between > 0) and abs(between) * 2 >= abs(inside):
        return (f"inside functions {_signed(inside)} B, between them {_signed(between)} B: the functions "
                f"grew into the alignment padding that followed them, so the section hardly moved")
    if abs(s.text_delta) < abs(inside + between):
        return (f"inside functions {_signed(inside)} B, between them {_signed(between)} B; the section grew "
                f"less because its end is aligned and the slack there absorbed the growth")
    return f"inside functions {_signed(inside)} B, between them {_signed(between)} B, the rest unsized code and section tails"


def _signed(n: int) -> str:
    return f"{n:+,d}".replace(",", " ") if n else "0"


def _pct(delta: int, base: int) -> str:
    return f"{delta * 100.0 / base:+.2f} %" if base else "n/a"


_KEEP = re.compile(r"(?<=\d) (?=\d{3}\b)|(?<=\d) (?=B\b)")   # "+168 252 B" is one word to wrap


def _wrap(text: str, width: int, **kw) -> list[str]:
    """textwrap.wrap that never breaks inside a number or between a number and its unit."""
    import textwrap
    return [line.replace("\0", " ") for line in textwrap.wrap(_KEEP.sub("\0", text), width, **kw)]


def render(s: PairSummary, *, objects_top: int = 10, config_top: int = 20, width: int = 100) -> str:
    """Plain text, short enough to paste under a patch, no line wider than WIDTH: one total,
    bloat-o-meter's, with its parts; what lies outside it labelled so.

    >>> s = PairSummary("a", "b", 4194560, 4194560, 56020, 257118, 4000000, 4153600, 4000000, 4153621,
    ...             3900000, 4053600, "the tree's scripts/bloat-o-meter", {"changed": 5862}, [], [], "gcc", "t", [])
    >>> print(render(s).splitlines()[1])
    size +153 621 B (+3.84 %) = functions +153 600 B + data +21 B; 5862 functions changed
    """
    f = s.functions
    fn = (f"{f.get('changed', 0)} functions changed"
          + (f", {f['added']} added" if f.get("added") else "")
          + (f", {f['removed']} removed" if f.get("removed") else "")) if f else "functions not compared"
    bom_delta, fn_delta = s.bom_new - s.bom_old, s.fn_new - s.fn_old
    pad_delta = s.padding_new - s.padding_old
    lines = [f"{s.old_label} -> {s.new_label}",
             f"size {_signed(bom_delta)} B ({_pct(bom_delta, s.bom_old)}) = functions {_signed(fn_delta)} B + "
             f"data {_signed(bom_delta - fn_delta)} B; {fn}",
             f"  that is bloat-o-meter's total: {s.bom_line}"]
    lines += _wrap(f"not in that total: padding between functions {_signed(pad_delta)} B; code sections "
                           f"{s.text_old} -> {s.text_new} B ({_signed(s.text_delta)}, {_pct(s.text_delta, s.text_old)}): "
                           + _why_sections(s), width, initial_indent="  ", subsequent_indent="    ",
                           break_on_hyphens=False)
    lines += _wrap(f"bloat-o-meter rules: {s.rules} (flagbench size --bom-rules tree|newest)", width,
                           initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)
    if s.config_delta:
        shown = ", ".join(f"{k} {a}->{b}" for k, a, b in s.config_delta[:config_top])
        more = f" (+{len(s.config_delta) - config_top} more)" if len(s.config_delta) > config_top else ""
        lines += _wrap(f"config A vs B: {len(s.config_delta)} options differ: {shown}{more}", width,
                               subsequent_indent="  ", break_on_hyphens=False)
    else:
        lines.append("config A vs B: identical")
    if s.objects:
        dirs = kobjects.by_directory(s.objects)
        lines += _wrap(f"objects whose code changed: {len(s.objects)} ("
                               + ", ".join(f"{d} {n} ({_signed(delta)} B)" for d, n, delta in dirs[:6])
                               + "), by each object's .text before linking (not a part of the total)", width,
                               subsequent_indent="  ", break_on_hyphens=False)
    for name, a, b in s.string_ops[:objects_top]:
        ops = sorted(set(a) | set(b))
        lines += _wrap(f"{name}: " + ", ".join(f"{op} {a.get(op, 0)}->{b.get(op, 0)}" for op in ops), width,
                               initial_indent="  ", subsequent_indent="    ")
    if s.stubs:
        lines += _wrap(s.stubs, width, subsequent_indent="  ")
    lines += _wrap(f"built with {s.compiler}; tree {s.tree}", width, subsequent_indent="  ",
                           break_on_hyphens=False)
    return "\n".join(lines) + "\n"
