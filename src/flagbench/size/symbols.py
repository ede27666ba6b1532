"""One input's side of `flagbench size`: bloat-o-meter's names and summed sizes per table, and,
for flagbench's own formats, each name's footprint (size plus the padding after it), the
sections, and the code bytes bloat-o-meter cannot see.

Every input takes this one path, member by member through `elf.tables` (whose loops over
entries are C). What is left here runs once per name, in comprehensions and C-level maps:
bloat-o-meter's renaming, then, once per side, the names that occur twice summed.
"""
from __future__ import annotations

from itertools import compress, repeat
from operator import add, and_, is_not, ne

from flagbench.elf import tables as elf_tables
from flagbench.size.rules import CODE_LETTERS, NUMBER, SKIP_NAMES, SKIP_PREFIXES

GROUPS = ("text", "rodata", "data", "bss")
# Input sections that a linker script gathers into one output section, so that relocatable
# objects and archives (one .text.NAME per function) give a readable table: (name prefix, group,
# whole word: the prefix must be followed by '.' or the name's end). The first that fits wins.
SECTION_GROUPS = tuple((g.encode(), g, True) for g in (
    ".text.unlikely", ".text.hot", ".text.startup", ".text.exit", ".text", ".rodata", ".data.rel.ro", ".data",
    ".bss", ".tdata", ".tbss", ".sdata", ".sbss", ".init_array", ".fini_array", ".gcc_except_table")) + (
    (b".gnu.linkonce.t.", ".text", False),)


def bom_names(names: list[str]) -> list[str | None]:
    """bloat-o-meter's name of each symbol (`rules.bom_name`, inlined: one comprehension over
    a quarter of a million names costs half as much as calling it), None where it skips one."""
    sub = NUMBER.sub
    return [None if ":" in n or n in _SKIP_NAMES or n.startswith(SKIP_PREFIXES) else sub("", n) if "." in n else n
            for n in names]


_SKIP_NAMES = frozenset(SKIP_NAMES)


def read_side(inp, tables, match=None, extras: bool = False) -> dict:
    """Per (label, letters) table, bloat-o-meter's names of INP, each once, with their summed
    sizes ({"names": [...], "sizes": [...]}, and with EXTRAS "letters": each name's first nm
    letter as one str, "footprints": summed footprints); with EXTRAS also the sections and code
    totals. Plain lists and ints: `marshal` carries them from the forked reader. Closes INP."""
    columns = [{"names": [], "sizes": [], "letters": [], "footprints": []} for _ in tables]
    side = {"sections": {}, "groups": dict.fromkeys(GROUPS, 0), "code": 0, "covered": 0, "padding": 0,
            "unlikely": 0, "skipped": 0, "cold": 0}
    try:
        for t in elf_tables.read_members(inp, full=extras, sized_only=not extras):
            if extras:
                _sections(t, side)
            for (_, letters), c in zip(tables, columns):
                _collect(t, set(letters), c, match, extras, side)
    finally:
        inp.close()
    side["tables"] = [_summed(c, extras) for c in columns]
    side["unlikely"] = side["sections"].get(".text.unlikely", 0)
    if extras:   # .cold parts of split functions, under the names bloat-o-meter shows
        first = side["tables"][0]
        side["cold"] = sum(s for n, s in zip(first["names"], first["sizes"]) if ".cold" in n)
    return side


def _collect(t, letters: set, c: dict, match, extras: bool, side: dict) -> None:
    """Add member T's sized symbols of LETTERS to the columns C under bloat-o-meter's names."""
    wanted = list(map(letters.__contains__, t.letters))
    if extras:     # unsized symbols came along for the padding
        wanted = list(map(and_, wanted, map(bool, t.sizes)))
    names = bom_names(list(compress(t.names, wanted)))
    sizes = list(compress(t.sizes, wanted))
    kinds = list(compress(t.letters, wanted)) if extras else None
    if extras:     # code bloat-o-meter's rules leave out of every table
        side["skipped"] += sum(sizes[i] for i, n in enumerate(names) if n is None and kinds[i] in CODE_LETTERS)
    if match is not None:
        names = [n if n is not None and match.search(n) else None for n in names]
    keep = list(map(is_not, names, repeat(None)))
    every = all(keep)
    c["names"] += names if every else compress(names, keep)
    c["sizes"] += sizes if every else compress(sizes, keep)
    if extras:
        c["letters"] += kinds if every else compress(kinds, keep)
        c["footprints"] += map(add, compress(sizes, keep), compress(compress(t.gaps, wanted), keep))


def _summed(c: dict, extras: bool) -> dict:
    """The columns C with each name once: sizes (and footprints) summed, the first letter."""
    names = c["names"]
    first: dict[str, int] = {}
    rows = list(map(first.setdefault, names, range(len(names))))   # each name's first row
    if len(first) == len(names):   # no name twice
        out = {"names": names, "sizes": c["sizes"]}
        if extras:
            out.update(letters="".join(c["letters"]), footprints=c["footprints"])
        return out
    unique = list(first.values())
    out = {"names": list(first), "sizes": _sum_by(rows, unique, c["sizes"])}
    if extras:
        out.update(letters="".join(map(c["letters"].__getitem__, unique)),
                   footprints=_sum_by(rows, unique, c["footprints"]))
    return out


def _sum_by(rows: list[int], unique: list[int], values: list[int]) -> list[int]:
    """Per first row in UNIQUE, the sum of VALUES over the rows that name it."""
    sums = values[:]
    for i in compress(range(len(rows)), map(ne, rows, range(len(rows)))):
        sums[rows[i]] += values[i]
    return list(map(sums.__getitem__, unique))


def _sections(t, side: dict) -> None:
    """Allocated sections by output-section-like group (`size -A`), code totals and padding."""
    sections, code, rodata, data, bss = t.section_sizes(SECTION_GROUPS)
    for name, size in sections.items():
        side["sections"][name] = side["sections"].get(name, 0) + size
    for group, size in zip(GROUPS, (code, rodata, data, bss)):
        side["groups"][group] += size
    side["code"] += code
    side["covered"] += t.covered
    side["padding"] += t.padding
