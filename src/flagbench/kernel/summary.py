"""The few lines a kernel developer pastes under the patch, from two built cells:

    vmlinux text +N bytes (+x.xx %), padding +P, K functions changed, bloat-o-meter total: ...
    config A vs B: ...
    built with <compiler> on <tree>

The numbers come from the size stage (sections, padding, bloat-o-meter's table), the asm
stage (functions changed, string operations) and kernel.objects (per-object ranking); nothing
is measured twice here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flagbench.kernel import config as kconfig_file
from flagbench.kernel import objects as kobjects


@dataclass
class Summary:
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
    functions: dict[str, int]       # asm: changed / added / removed / same
    config_delta: list[tuple[str, str, str]]
    objects: list[kobjects.ObjectChange]
    compiler: str
    tree: str
    string_ops: list[tuple[str, dict, dict]]   # (function, old {op: n}, new {op: n}) where they differ
    stubs: str = ""                 # linker stubs and code outside functions, one line (size/asm)

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


def tree_bom(old_path, new_path, tree_src: Path | None, mode: str | None = None, match=None,
             top: int | None = None) -> str:
    """What the tree's own scripts/bloat-o-meter prints for OLD and NEW: the size stage's bom,
    with the older symbol types when the tree's script predates weak symbols."""
    from flagbench import size
    script = tree_src / "scripts" / "bloat-o-meter" if tree_src else None
    if script is None or not script.is_file() or '"tTwW"' in script.read_text(errors="replace"):
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


def summarize(old, new, *, with_asm: bool = True, with_objects: bool = True) -> Summary:
    """OLD and NEW are kbuild.KernelBuild cells (ok ones)."""
    from flagbench import size
    c = size.compare(str(old.vmlinux), str(new.vmlinux))
    counts, string_ops = {}, []
    if with_asm:
        from flagbench.asm.compare import compare
        asm = compare(old.vmlinux, new.vmlinux, rank=False)
        counts = asm.counts()
        string_ops = _string_ops(asm)
    compiler = next(iter(new.tools.values()), "")
    bom_old, bom_new = _bom_totals(tree_bom(old.vmlinux, new.vmlinux, old.src))
    return Summary(
        old.cell.key, new.cell.key, c.old.code, c.new.code, c.old.padding, c.new.padding,
        c.old.covered, c.new.covered, bom_old, bom_new, counts, kconfig_file.delta(old.config, new.config),
        kobjects.compare_trees(old.dir, new.dir) if with_objects else [], compiler, new.tree, string_ops,
        _stubs(c, asm if with_asm else None))


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


def _signed(n: int) -> str:
    return f"{n:+,d}".replace(",", " ") if n else "0"


def render(s: Summary, *, objects_top: int = 10, config_top: int = 20) -> str:
    """Plain text, short enough to paste under a patch."""
    pct = s.text_delta * 100.0 / s.text_old if s.text_old else 0.0
    f = s.functions
    fn = (f"{f.get('changed', 0)} functions changed"
          + (f", {f['added']} added" if f.get("added") else "")
          + (f", {f['removed']} removed" if f.get("removed") else "")) if f else "functions not compared"
    lines = [f"{s.old_label} -> {s.new_label}",
             f"vmlinux text {_signed(s.text_delta)} bytes ({pct:+.2f} %), padding "
             f"{_signed(s.padding_new - s.padding_old)}, {fn}, bloat-o-meter total: {s.bom_line}",
             f"  (code sections {s.text_old} -> {s.text_new} B; inside functions {_signed(s.covered_new - s.covered_old)} B,"
             f" between them {_signed(s.padding_new - s.padding_old)} B: a section can absorb growth in its alignment slack)"]
    if s.config_delta:
        shown = ", ".join(f"{k} {a}->{b}" for k, a, b in s.config_delta[:config_top])
        more = f" (+{len(s.config_delta) - config_top} more)" if len(s.config_delta) > config_top else ""
        lines.append(f"config A vs B: {len(s.config_delta)} options differ: {shown}{more}")
    else:
        lines.append("config A vs B: identical")
    if s.objects:
        dirs = kobjects.by_directory(s.objects)
        lines.append(f"objects with changed code: {len(s.objects)} ("
                     + ", ".join(f"{d} {n} ({_signed(delta)} B)" for d, n, delta in dirs[:6]) + ")")
    for name, a, b in s.string_ops[:objects_top]:
        ops = sorted(set(a) | set(b))
        lines.append(f"  {name}: " + ", ".join(f"{op} {a.get(op, 0)}->{b.get(op, 0)}" for op in ops))
    if s.stubs:
        lines.append(s.stubs)
    lines.append(f"built with {s.compiler}; tree {s.tree}")
    return "\n".join(lines) + "\n"


def demo_section(case_dir: str | Path, *, jobs: int | None = None, progress: bool = True) -> str:
    """Markdown for one kernel case: build its first two variants (first target and
    compiler), then the summary, bloat-o-meter's table head and the objects that changed."""
    from flagbench import spec, variants
    from flagbench.kernel.kbuild import build_kernels
    exp = spec.load(case_dir)
    old_cell, new_cell, notes = variants.choose(exp)
    old, new = build_kernels(exp, [old_cell, new_cell], jobs=jobs, progress=progress)
    title = f"### Kernel case `{exp.name}`"
    if not (old.ok and new.ok):
        bad = old if not old.ok else new
        return f"{title}\n\n{bad.cell.key} did not build:\n\n```\n{bad.error}\n```\n"
    s = summarize(old, new)
    bom = tree_bom(old.vmlinux, new.vmlinux, old.src).splitlines()
    head = bom[:2] + bom[2:-1][:15] + (["..."] if len(bom) > 18 else []) + bom[-1:]
    built = "cached" if old.cached and new.cached else f"{old.seconds:.0f} s + {new.seconds:.0f} s"
    out = [title, "", exp.description or "", "",
           f"Built {old.cell.key} and {new.cell.key} ({built}).", "", "```", render(s).rstrip(), "```", "",
           "bloat-o-meter (vmlinux):", "", "```", *head, "```", "", "```", kobjects.render(s.objects, top=10).rstrip(),
           "```", ""]
    out += [f"note: {n}" for n in notes]
    return "\n".join(out) + "\n"
