"""What bloat-o-meter cannot see: sections (like `size -A`), the padding between symbols in code,
each symbol's footprint (size plus the gap after it) and the `.cold` / `.text.unlikely` code."""
from __future__ import annotations

from dataclasses import dataclass, field

from flagbench import elf, elf_tables
from flagbench.size import DEFAULT_TYPES, BomTable, bom_name, bom_table, open_pair

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
    t = elf_tables.read_tables(inp)
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
    old_in.close()
    new_in.close()
    table = bom_table("Function", {k: v[1] for k, v in old.symbols.items()},
                      {k: v[1] for k, v in new.symbols.items()})
    return Comparison(old_path, new_path, old, new, table.rows, table)


