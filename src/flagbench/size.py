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


def sized_entries(inp: elf.Input, types: str, vectorised: bool | None = None):
    """(name, nm letter, size) of every symbol `nm --size-sort` lists with a letter in TYPES.

    VECTORISED picks the reader (None: numpy only for large inputs)."""
    small = is_small(inp) if vectorised is None else not vectorised
    if small:
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
    olds = _table_sizes(old_in, tables, match)   # one file at a time: its pages go before the next
    news = _table_sizes(new_in, tables, match)
    return "".join(bom_text(bom_table(label, o, n), top)
                   for (label, _), o, n in zip(tables, olds, news))


def _table_sizes(inp: elf.Input, tables, match) -> list[dict[str, int]]:
    letters = "".join(sorted(set("".join(t for _, t in tables))))
    entries = sized_entries(inp, letters)
    if len(tables) > 1:  # read the file once, filter per table
        entries = list(entries)
    sizes = [bom_sizes(entries, types, match) for _, types in tables]
    del entries
    inp.close()
    return sizes


# ---- beyond bloat-o-meter: sections, padding, footprints, cold code -------------------------

# Input sections that a linker script gathers into one output section, so that relocatable
# objects and archives (one .text.NAME per function) give a readable table.
_SECTION_GROUPS = (".text.unlikely", ".text.hot", ".text.startup", ".text.exit", ".text",
                   ".rodata", ".data.rel.ro", ".data", ".bss", ".tdata", ".tbss", ".sdata",
                   ".sbss", ".init_array", ".fini_array", ".gcc_except_table")


def section_group(name: str) -> str:
    """'.text.foo' -> '.text', '.text.unlikely.foo' -> '.text.unlikely', '__ex_table' as is."""
    for g in _SECTION_GROUPS:
        if name == g or name.startswith(g + "."):
            return g
    if name.startswith(".gnu.linkonce.t."):
        return ".text"
    return name


@dataclass
class Side:
    """What compare() measures in one input."""
    symbols: dict[str, list]          # name -> [type letter, size, footprint]
    sections: dict[str, int]          # output-section-like name -> bytes
    groups: dict[str, int]            # text / rodata / data / bss
    code: int = 0                     # bytes of executable sections
    covered: int = 0                  # ... inside sized symbols
    padding: int = 0                  # ... in gaps after sized symbols
    cold: int = 0                     # bytes of .cold symbols
    unlikely: int = 0                 # bytes of .text.unlikely sections


@dataclass
class Comparison:
    old_path: str
    new_path: str
    old: Side
    new: Side
    rows: list[tuple[int, str]]       # (delta, name) in bloat-o-meter's order
    table: BomTable
    notes: list[str] = field(default_factory=list)


def measure(inp: elf.Input, types: str, match=None) -> Side:
    """Symbols (bloat-o-meter's set, with footprints), sections and padding of one input."""
    import numpy as np
    t = elf.read_tables(inp)
    fp_extra, covered, padding = _gaps(np, t)
    wanted = np.zeros(256, bool)
    wanted[[ord(c) for c in types]] = True
    rows = np.flatnonzero(wanted[t.sym_letter] & (t.sym_size > 0))
    symbols: dict[str, list] = {}
    cold = 0
    for name, letter, size, gap in zip(t.names(rows), t.sym_letter[rows].tolist(),
                                       t.sym_size[rows].tolist(), fp_extra[rows].tolist()):
        key = bom_name(name)
        if key is None or (match is not None and not match.search(key)):
            continue
        if ".cold" in name:
            cold += size
        entry = symbols.get(key)
        if entry is None:
            symbols[key] = [chr(letter), size, size + gap]
        else:
            entry[1] += size
            entry[2] += size + gap
    side = Side(symbols, {}, {"text": 0, "rodata": 0, "data": 0, "bss": 0}, cold=cold)
    alloc = np.flatnonzero((t.sec_flags & elf.SHF_ALLOC != 0) & (t.sec_letter != 0))
    for name, stype, flags, size in zip(t.section_names(alloc), t.sec_type[alloc].tolist(),
                                        t.sec_flags[alloc].tolist(), t.sec_size[alloc].tolist()):
        group = section_group(name)
        side.sections[group] = side.sections.get(group, 0) + size
        kind = ("text" if flags & elf.SHF_EXECINSTR else "bss" if stype == elf.SHT_NOBITS
                else "data" if flags & elf.SHF_WRITE else "rodata")
        side.groups[kind] += size
        if kind == "text":
            side.code += size
            if group == ".text.unlikely":
                side.unlikely += size
    side.covered, side.padding = covered, padding
    return side


def _gaps(np, t):
    """(padding after each symbol row, bytes covered by sized symbols, padding bytes).

    In each executable section, symbols are walked by start address. Bytes between the end of
    the sized symbols seen so far and the next symbol start (or the section end) are padding,
    given to the symbol that reached furthest. A region that starts at an unsized symbol is code
    we cannot size, not padding; overlapping and aliased symbols are merged.
    """
    sec = t.sym_section
    code_sec = (t.sec_flags & elf.SHF_EXECINSTR != 0) & (t.sec_flags & elf.SHF_ALLOC != 0)
    rows = np.flatnonzero((sec >= 0) & code_sec[np.maximum(sec, 0)])
    gap = np.zeros(len(sec), np.int64)
    if len(rows) == 0:
        return gap, 0, 0
    s = sec[rows]
    relocatable = np.array([m.etype == 1 for m in t.inp.members])[t.sec_member[s]]
    start = t.sym_value[rows].astype(np.int64) - np.where(relocatable, 0, t.sec_addr[s].astype(np.int64))
    sec_end = t.sec_size[s].astype(np.int64)
    start = np.clip(start, 0, sec_end)
    end = np.minimum(start + t.sym_size[rows].astype(np.int64), sec_end)
    order = np.lexsort((-end, start, s))
    s, start, end, sec_end, rows = s[order], start[order], end[order], sec_end[order], rows[order]
    # Running furthest end within each section: offset each section into its own range.
    span = int(sec_end.max()) + 1
    key = s.astype(np.int64) * span
    reach = np.maximum.accumulate(np.where(end > start, key + end, key)) - key
    reach = np.maximum(reach, 0)
    idx = np.arange(len(rows))
    owner = np.maximum.accumulate(np.where((end > start) & (end >= reach), idx, -1))
    last = np.append(s[1:] != s[:-1], True)
    nxt = np.where(last, sec_end, np.append(start[1:], 0))
    covered_start = reach > start                     # the region after this start is known code
    pad = np.where(covered_start, np.maximum(nxt - np.maximum(reach, start), 0), 0)
    # A new section restarts the reach; rows whose reach came from an earlier section are fixed
    # by the key offset above (reach never crosses a section).
    prev_reach = np.where(np.append(True, s[1:] != s[:-1]), 0, np.append(0, reach[:-1]))
    gained = np.maximum(end - np.maximum(start, prev_reach), 0)
    has_owner = (owner >= 0) & (pad > 0)
    np.add.at(gap, rows[owner[has_owner]], pad[has_owner])
    return gap, int(gained.sum()), int(pad.sum())


def compare(old_path: str, new_path: str, types: str | None = None, match=None) -> Comparison:
    old_in, new_in = open_pair(old_path, new_path)
    types = types or DEFAULT_TYPES
    old, new = measure(old_in, types, match), measure(new_in, types, match)
    table = bom_table("Function", {k: v[1] for k, v in old.symbols.items()},
                      {k: v[1] for k, v in new.symbols.items()})
    return Comparison(old_path, new_path, old, new, table.rows, table)


# ---- renderers --------------------------------------------------------------------------------

def _sym_records(c: Comparison, top: int | None):
    rows = c.rows if top is None else _top(c.rows, top)
    for d, name in rows:
        o, n = c.old.symbols.get(name), c.new.symbols.get(name)
        yield {"name": name, "type": (n or o)[0],
               "old": o[1] if o else None, "new": n[1] if n else None, "delta": d,
               "footprint_old": o[2] if o else None, "footprint_new": n[2] if n else None}


def _section_records(c: Comparison):
    names = sorted(c.old.sections.keys() | c.new.sections.keys(),
                   key=lambda k: -max(c.old.sections.get(k, 0), c.new.sections.get(k, 0)))
    for k in names:
        o, n = c.old.sections.get(k), c.new.sections.get(k)
        yield {"name": k, "old": o, "new": n, "delta": (n or 0) - (o or 0)}


def _triple(o: int, n: int) -> dict:
    return {"old": o, "new": n, "delta": n - o}


def summary(c: Comparison) -> str:
    """One line: how much of the code growth is padding and how much is in the symbols."""
    o, n = c.old, c.new
    d_code, d_pad, d_cov = n.code - o.code, n.padding - o.padding, n.covered - o.covered
    d_rest = d_code - d_pad - d_cov
    line = (f"code {o.code} -> {n.code} ({d_code:+d} bytes): padding {d_pad:+d}, "
            f"instructions in sized symbols {d_cov:+d}")
    if d_rest:
        line += f", other (unsized code, section tails) {d_rest:+d}"
    return line


def _json(c: Comparison, top):
    return {
        "old": c.old_path, "new": c.new_path,
        "symbols": list(_sym_records(c, top)),
        "sections": list(_section_records(c)),
        "groups": {k: _triple(c.old.groups[k], c.new.groups[k]) for k in c.old.groups},
        "padding": _triple(c.old.padding, c.new.padding),
        "code": _triple(c.old.code, c.new.code),
        "in_symbols": _triple(c.old.covered, c.new.covered),
        "cold": _triple(c.old.cold, c.new.cold),
        "text_unlikely": _triple(c.old.unlikely, c.new.unlikely),
        "total": _triple(c.table.total_old, c.table.total_new),
        "summary": summary(c),
    }


def render(c: Comparison, fmt: str, top: int | None = None) -> str:
    if fmt == "json":
        import json
        return json.dumps(_json(c, top), indent=1) + "\n"
    if fmt == "csv":
        import csv
        import io
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["kind", "name", "type", "old", "new", "delta", "footprint_old", "footprint_new"])
        for r in _sym_records(c, top):
            w.writerow(["symbol", r["name"], r["type"], _blank(r["old"]), _blank(r["new"]), r["delta"],
                        _blank(r["footprint_old"]), _blank(r["footprint_new"])])
        for r in _section_records(c):
            w.writerow(["section", r["name"], "", _blank(r["old"]), _blank(r["new"]), r["delta"], "", ""])
        for name, o, n in _extras(c):
            w.writerow(["summary", name, "", o, n, n - o, "", ""])
        return out.getvalue()
    if fmt == "md":
        return _markdown(c, top)
    return _text(c, top)


def _blank(v):
    return "" if v is None else v


def _dash(v):
    return "-" if v is None else v


def _extras(c: Comparison):
    o, n = c.old, c.new
    return [(f"{k} (sections)", o.groups[k], n.groups[k]) for k in o.groups] + [
        ("padding in code", o.padding, n.padding),
        ("code in sized symbols", o.covered, n.covered),
        (".cold symbols", o.cold, n.cold),
        (".text.unlikely", o.unlikely, n.unlikely),
        ("symbols total", c.table.total_old, c.table.total_new)]


def _text(c: Comparison, top) -> str:
    t = c.table
    lines = ["add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)" % (
        t.add, t.remove, t.grow, t.shrink, t.up, -t.down, t.up - t.down),
        "%-40s %7s %7s %+7s %10s" % ("Symbol", "old", "new", "delta", "footprint")]
    for r in _sym_records(c, top):
        fp = ""
        if r["type"] in "tTwWi" and (r["footprint_old"] or r["footprint_new"]):
            fp = "%+d" % ((r["footprint_new"] or 0) - (r["footprint_old"] or 0))
        lines.append("%-40s %7s %7s %+7d %10s" % (r["name"], _dash(r["old"]), _dash(r["new"]),
                                                   r["delta"], fp))
    otot, ntot = t.total_old, t.total_new
    lines.append("Total: Before=%d, After=%d, chg %+.2f%%" % (
        otot, ntot, (ntot - otot) * 100.0 / otot if otot else 0))
    lines += ["", "%-40s %10s %10s %+10s" % ("Section", "old", "new", "delta")]
    for r in _section_records(c):
        lines.append("%-40s %10s %10s %+10d" % (r["name"], _dash(r["old"]), _dash(r["new"]), r["delta"]))
    lines.append("")
    for name, o, n in _extras(c):
        lines.append("%-40s %10d %10d %+10d" % (name, o, n, n - o))
    lines += ["", summary(c)]
    return "\n".join(lines) + "\n"


def _markdown(c: Comparison, top) -> str:
    t = c.table
    lines = [f"`flagbench size`: add/remove {t.add}/{t.remove}, grow/shrink {t.grow}/{t.shrink}, "
             f"up/down {t.up}/{-t.down} ({t.up - t.down:+d})", "",
             "| symbol | old | new | delta |", "|---|---:|---:|---:|"]
    for r in _sym_records(c, top):
        lines.append(f"| `{r['name']}` | {_dash(r['old'])} | {_dash(r['new'])} | {r['delta']:+d} |")
    lines += ["", "| | old | new | delta |", "|---|---:|---:|---:|"]
    for name, o, n in _extras(c):
        lines.append(f"| {name} | {o} | {n} | {n - o:+d} |")
    lines += ["", summary(c)]
    return "\n".join(lines) + "\n"
