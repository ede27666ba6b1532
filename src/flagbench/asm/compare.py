"""Old vs new, function by function: same / changed / added / removed, and how much.

The two disassemblies run in parallel (the new one in a forked child, `forked.Child`, so both cores work
while objdump streams); functions are compared on their normalised text, and only the changed ones are
diffed line by line.
"""
from __future__ import annotations

import difflib
import os
import pickle
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from flagbench.asm.disasm import Disassembly, Function, disassemble
from flagbench.asm.mix import Mix
from flagbench.asm.model import EVERY
from flagbench.asm.places import file_target
from flagbench.asm.padding import loose, same_apart_from_layout
from flagbench.errors import UserError
from flagbench.forked import Child

STATUSES = ("changed", "added", "removed", "same")
# Below this much ELF input, a second process costs more than it saves.
PARALLEL_BYTES = 4 << 20
# The functions whose mixes each side makes (`model.in_part`): the old side (this process) 12
# parts of 20, the new side 8. The new side's worker still has to pickle its disassembly and
# this process to read it back when it is done (0.15-0.2 s on the --big pair), so the old side
# takes more, to be done as the new one comes in.
OLD_PART, NEW_PART = (0, 12, 20), (12, 20, 20)


@dataclass
class FunctionDiff:
    name: str
    status: str               # same / changed / added / removed
    old: Function | None
    new: Function | None
    changed_lines: int = 0    # lines that differ (difflib), 0 when same


@dataclass
class AsmComparison:
    old: Disassembly
    new: Disassembly
    functions: list[FunctionDiff]   # changed (most first), added, removed, then same; by name within
    warning: str | None = None

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for f in self.functions:
            out[f.status] += 1
        return out

    def get(self, name: str) -> FunctionDiff:
        for f in self.functions:
            if f.name == name:
                return f
        close = difflib.get_close_matches(name, [f.name for f in self.functions], n=3)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise UserError(f"no function {name!r} in {self.old.shown} or {self.new.shown}{hint}")


def disassemble_pair(old: Path, new: Path, parallel: bool | None = None,
                     mix_each: bool = True) -> tuple[Disassembly, Disassembly, str | None]:
    """Both files, checked first (so bad input fails before any work), in parallel when large;
    MIX_EACH: each function's own mix made (else only the sums, see `disasm.disassemble`)."""
    t_old, t_new = file_target(old), file_target(new)
    warning = None
    if t_old != t_new:
        warning = f"{old} is {t_old} but {new} is {t_new}: every function will differ"
    if parallel is None:
        parallel = os.path.getsize(old) + os.path.getsize(new) > PARALLEL_BYTES
    # Each side makes the mixes of a part of the functions (by name), or only their sum: where
    # old and new text are the same (most functions), one mix serves both (`render.Mixes`), and
    # the two parts run at once.
    if not parallel:
        return disassemble(old, OLD_PART, mix_each), disassemble(new, NEW_PART, mix_each), warning
    # the new side in a child that dies with this process (and its objdump with it); the old here:
    # only one comes through a pipe
    child = Child(disassemble, new, NEW_PART, mix_each, dumps=_pickled, die_with_parent=True)
    try:
        mine = disassemble(old, OLD_PART, mix_each)
        return mine, child.result(pickle.loads), warning
    finally:
        child.kill()   # failed or interrupted here: the child goes too (a no-op once it is reaped)


def _pickled(d: Disassembly) -> bytes:
    return pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL)


def compare_files(old: Path | str, new: Path | str, *, parallel: bool | None = None,
                  rank: bool = True, mix_each: bool = True) -> AsmComparison:
    """Two ELF files, function by function; MIX_EACH as in `disassemble_pair`."""
    d_old, d_new, warning = disassemble_pair(Path(old), Path(new), parallel, mix_each)
    return compare_disassemblies(d_old, d_new, rank=rank, warning=warning)


compare = compare_files   # the name size/summary.py and cli/asm.py's kernel branch import today


def compare_object_sets(old: Sequence[Path], new: Sequence[Path], *, old_label: str = "",
                        new_label: str = "", rank: bool = True) -> AsmComparison:
    """Two sets of objects (two variant builds) as one comparison.

    Functions are matched by name across the set, so one that moved to another source
    file is still compared; a name defined in more than one object of a set (a static
    helper, `main`) is qualified by its object, "jhash.o:helper", on both sides, which
    pairs those up by object file name.
    """
    d_old = [disassemble(p) for p in old]
    d_new = [disassemble(p) for p in new]
    collide = set()
    for side in (d_old, d_new):
        seen = Counter(name for d in side for name in d.functions)
        collide |= {name for name, n in seen.items() if n > 1}
    return compare_disassemblies(_merge(d_old, collide, old_label), _merge(d_new, collide, new_label), rank=rank)


def _merge(parts: list[Disassembly], collide: set[str], label: str) -> Disassembly:
    functions = {}
    for d in parts:
        for name, f in d.functions.items():
            key = f"{d.path.name}:{name}" if name in collide else name
            functions[key] = replace(f, name=key)
    first = parts[0]
    path = Path(os.path.commonpath([d.path for d in parts])) if len(parts) > 1 else first.path
    unsized = Counter()
    for d in parts:
        unsized.update(d.unsized)
    merged = Disassembly(path, first.target, first.tool, functions, label, dict(unsized))
    if all(d.part_mix is not None and d.mix_part == EVERY for d in parts):
        merged.part_mix = Mix()
        for d in parts:
            merged.part_mix += d.part_mix
    return merged


def compare_disassemblies(d_old: Disassembly, d_new: Disassembly, *, rank: bool = True,
                          warning: str | None = None) -> AsmComparison:
    out: list[FunctionDiff] = []
    differ = [name for name, f in d_old.functions.items()
              if name in d_new.functions and f.text != d_new.functions[name].text]
    # a second look (objdump over their ranges) at those that may differ by layout only
    maybe = [name for name in differ if loose(d_old.functions[name].text) == loose(d_new.functions[name].text)]
    layout_only = same_apart_from_layout(d_old, d_new, maybe)
    for name, f in d_old.functions.items():
        g = d_new.functions.get(name)
        if g is None:
            if f.text:   # a label on nothing but padding is not a function
                out.append(FunctionDiff(name, "removed", f, None))
        elif f.text == g.text or name in layout_only:
            out.append(FunctionDiff(name, "same", f, g))
        else:
            out.append(FunctionDiff(name, "changed", f, g, changed_lines(f, g) if rank else 0))
    for name, g in d_new.functions.items():
        if name not in d_old.functions and g.text:
            out.append(FunctionDiff(name, "added", None, g))
    order = {s: i for i, s in enumerate(STATUSES)}
    out.sort(key=lambda d: (order[d.status], -d.changed_lines, d.name))
    return AsmComparison(d_old, d_new, out, warning)


def _opcodes(a: list[str], b: list[str]):
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def changed_lines(f: Function, g: Function) -> int:
    """How many lines differ: per non-equal block, the longer side."""
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in _opcodes(f.lines, g.lines) if tag != "equal")


def side_by_side(d: FunctionDiff) -> list[tuple[str, str, str]]:
    """Rows (mark, old line, new line); mark is ' ' same, '|' changed, '<' only old, '>' only new."""
    a = d.old.lines if d.old else []
    b = d.new.lines if d.new else []
    rows = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            rows += [(" ", x, y) for x, y in zip(a[i1:i2], b[j1:j2])]
            continue
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            x = left[k] if k < len(left) else ""
            y = right[k] if k < len(right) else ""
            rows.append(("|" if x and y else "<" if x else ">", x, y))
    return rows

