"""Compare two builds' sizes: bloat-o-meter's table byte for byte, and what it cannot see.

`bom` reproduces the kernel's scripts/bloat-o-meter (current version, with the weak types
w/W/v/V): nm's sized symbols of the chosen letters, generated kernel symbols skipped, `.NUMBER`
suffixes removed and colliding names summed. `compare` adds the sections (like `size -A`), the
padding between symbols in code, each symbol's footprint (size plus the gap after it) and the
`.cold` / `.text.unlikely` code, for the text, md, json and csv renderings in `size_render`.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from flagbench import elf
from flagbench.errors import UserError

DEFAULT_TYPES = "tTdDbBrRvVwW"
KINDS = {"functions": "tTwW", "data": "dDbBvV", "rodata": "rR"}
BOM_TABLES = {
    None: (("Function", DEFAULT_TYPES),),
    "c": (("Function", "tTwW"), ("Data", "dDbBvV"), ("RO Data", "rR")),
    "d": (("Data", "dDbBrRvV"),),
    "t": (("Function", "tTwW"),),
}
SKIP_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
SKIP_NAMES = ("linux_banner", "vermagic")
_NUMBER = re.compile(r"\.[0-9]+")
# Above this many symbol-table bytes numpy's import pays for itself (see elf's docstring).
SMALL_SYMTAB = 3 << 20


def bom_name(name: str) -> str | None:
    """The name bloat-o-meter files a symbol under, or None when it skips it."""
    if ":" in name or name.startswith(SKIP_PREFIXES) or name in SKIP_NAMES:
        return None
    return _NUMBER.sub("", name) if "." in name else name


def is_small(inp: elf.Input) -> bool:
    if len(inp.members) > 64:
        return False
    total = 0
    for m in inp.members:
        headers, symtab = elf.member_sections(inp, m)
        if symtab is not None:
            total += headers[symtab][5]
    return total <= SMALL_SYMTAB


def sized_entries(inp: elf.Input, types: str):
    """(name, nm letter, size) of every symbol `nm --size-sort` lists with a letter in TYPES."""
    if is_small(inp):
        return [e for e in elf.sized_symbols_small(inp) if e[1] in types]
    import numpy as np
    t = elf.read_tables(inp)
    wanted = np.zeros(256, bool)
    wanted[[ord(c) for c in types]] = True
    rows = np.flatnonzero(wanted[t.sym_letter] & (t.sym_size > 0))
    return zip(t.names(rows), map(chr, t.sym_letter[rows].tolist()), t.sym_size[rows].tolist())


def bom_sizes(entries, types: str, match=None) -> dict[str, int]:
    """{name: summed size} as bloat-o-meter's getsizes builds it from `nm --size-sort` lines."""
    sizes: dict[str, int] = {}
    get = sizes.get
    for name, letter, size in entries:
        if letter not in types or ":" in name or name.startswith(SKIP_PREFIXES) or name in SKIP_NAMES:
            continue
        if "." in name:
            name = _NUMBER.sub("", name)
        if match is not None and not match.search(name):
            continue
        sizes[name] = get(name, 0) + size
    return sizes


@dataclass
class BomTable:
    label: str
    add: int
    remove: int
    grow: int
    shrink: int
    up: int
    down: int
    rows: list[tuple[int, str]]      # (delta, name), bloat-o-meter's order, zero deltas dropped
    old: dict[str, int]
    new: dict[str, int]

    @property
    def total_old(self) -> int:
        return sum(self.old.values())

    @property
    def total_new(self) -> int:
        return sum(self.new.values())


def bom_table(label: str, old: dict[str, int], new: dict[str, int]) -> BomTable:
    """bloat-o-meter's calc(): counts, and the rows sorted by (delta, name) descending."""
    common = old.keys() & new.keys()
    add = remove = grow = shrink = up = down = 0
    by_delta: dict[int, list[str]] = {}
    for name, size in old.items():
        if name not in common:
            remove += 1
            down += size
            by_delta.setdefault(-size, []).append(name)
    for name, size in new.items():
        if name not in common:
            add += 1
            up += size
            by_delta.setdefault(size, []).append(name)
    for name in common:
        d = new[name] - old[name]
        if d > 0:
            grow, up = grow + 1, up + d
        elif d < 0:
            shrink, down = shrink + 1, down - d
        else:
            continue
        by_delta.setdefault(d, []).append(name)
    rows = []
    for d in sorted(by_delta, reverse=True):  # sort names only within one delta: far fewer compares
        names = by_delta[d]
        names.sort(reverse=True)
        rows.extend((d, n) for n in names)
    return BomTable(label, add, remove, grow, shrink, up, down, rows, old, new)


def bom_text(table: BomTable, top: int | None = None) -> str:
    """One bloat-o-meter print_result() block, byte for byte."""
    old, new = table.old, table.new
    lines = ["add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)" % (
        table.add, table.remove, table.grow, table.shrink, table.up, -table.down,
        table.up - table.down),
        "%-40s %7s %7s %+7s" % (table.label, "old", "new", "delta")]
    rows = table.rows if top is None else _top(table.rows, top)
    lines += ["%-40s %7s %7s %+7d" % (n, old.get(n, "-"), new.get(n, "-"), d) for d, n in rows]
    otot, ntot = table.total_old, table.total_new
    percent = (ntot - otot) * 100.0 / otot if otot else 0
    lines.append("Total: Before=%d, After=%d, chg %+.2f%%" % (otot, ntot, percent))
    return "\n".join(lines) + "\n"


def _top(rows, n):
    """The N rows with the largest |delta|, kept in their printed order."""
    if n >= len(rows):
        return rows
    keep = set(sorted(range(len(rows)), key=lambda i: -abs(rows[i][0]))[:n])
    return [r for i, r in enumerate(rows) if i in keep]


def open_pair(old_path: str, new_path: str, warn=None) -> tuple[elf.Input, elf.Input]:
    """Open both inputs; a different architecture is allowed, with a warning line."""
    old = elf.open_input(old_path)
    new = elf.open_input(new_path)
    if old.machine != new.machine:
        from flagbench.toolchains import target_for_elf
        a = target_for_elf(*old.machine) or f"machine {old.machine[0]}"
        b = target_for_elf(*new.machine) or f"machine {new.machine[0]}"
        (warn or _stderr)(f"warning: {old_path} is {a} but {new_path} is {b}; comparing anyway")
    return old, new


def _stderr(msg: str) -> None:
    print(f"flagbench size: {msg}", file=sys.stderr)


def bom(old_path: str, new_path: str, mode: str | None = None, match=None, top=None,
        types: str | None = None) -> str:
    """The whole bloat-o-meter output for OLD vs NEW (mode None, "c", "d" or "t")."""
    old_in, new_in = open_pair(old_path, new_path)
    tables = BOM_TABLES[mode] if types is None else (("Function", types),)
    letters = "".join(sorted(set("".join(t for _, t in tables))))
    old = sized_entries(old_in, letters)
    new = sized_entries(new_in, letters)
    if len(tables) > 1:  # read each file once, filter per table
        old, new = list(old), list(new)
    return "".join(bom_text(bom_table(label, bom_sizes(old, types, match),
                                      bom_sizes(new, types, match)), top)
                   for label, types in tables)
