"""One input's side of `flagbench size`: bloat-o-meter's names and summed sizes per table, and,
for flagbench's own formats, each name's footprint (size plus the padding after it), the
sections, and the code bytes bloat-o-meter cannot see.

Every input takes this one path, member by member through `elf.tables`, whose C loops (`_symtab`)
also apply bloat-o-meter's rules and sum the symbols into one `Summary` per table: Python
objects are made once per distinct name, not once per symbol.
"""
from flagbench.elf import _symtab, letters
from flagbench.elf.constants import COMMON_INDICES, ET_REL
from flagbench.size.rules import CODE_LETTERS, SKIP_NAMES, SKIP_PREFIXES

GROUPS = ("text", "rodata", "data", "bss")
# code outside sized symbols: bytes by kind and how many stubs (asm.unsized.CodeMap.totals())
UNSIZED = ("stub", "padding", "fill", "other", "stubs")
# Input sections that a linker script gathers into one output section, so that relocatable
# objects and archives (one .text.NAME per function) give a readable table: (name prefix, group,
# whole word: the prefix must be followed by '.' or the name's end). The first that fits wins.
SECTION_GROUPS = tuple((g.encode(), g, True) for g in (
    ".text.unlikely", ".text.hot", ".text.startup", ".text.exit", ".text", ".rodata", ".data.rel.ro", ".data",
    ".bss", ".tdata", ".tbss", ".sdata", ".sbss", ".init_array", ".fini_array", ".gcc_except_table")) + (
    (b".gnu.linkonce.t.", ".text", False),)


def read_side(inp, tables, extras: bool = False) -> dict:
    """Per (label, letters) table, bloat-o-meter's names of INP summed (an `elf.Summary`, as
    its `dumps()`: plain bytes that `marshal` carries from the forked reader; `Summary.loads`
    makes it again); with EXTRAS also the sections, code totals and footprints. Closes INP."""
    from flagbench.elf import tables as elf_tables
    summaries = _summaries(tables)
    side = {"sections": {}, "groups": dict.fromkeys(GROUPS, 0), "covered": 0, "padding": 0,
            "unsized": dict.fromkeys(UNSIZED, 0)}
    try:
        for t in elf_tables.read_members(inp, full=extras, sized_only=not extras, summaries=summaries):
            if extras:
                _unsized(inp, t, side, _sections(t, side))
    finally:
        inp.close()
    side["tables"] = [s.dumps() for s in summaries]
    side["skipped"] = sum(s.skipped for s in summaries)
    return side


def read_pair(old_path: str, new_path: str, tables, extras: bool = False):
    """Both inputs as read_side reads them, through the C reader (`_symtab.scan_pair`: each file
    on its own thread, no Python per member; a linked x86-64 member's code outside symbols is
    classified there too); each side's "machine" also, and "tables" holds the `Summary` objects
    themselves. None when that reader leaves the files to read_side (damage, an unusual archive:
    the Python reader says what is wrong)."""
    made = [_summaries(tables), _summaries(tables)]
    got = _symtab.scan_pair(old_path, new_path, *made, letters._SYMBOL_LETTERS, letters._BASE_CODES,
                            letters._name_code, COMMON_INDICES, extras, SECTION_GROUPS)
    if got is None:
        return None
    sides = []
    for path, summaries, (machine, is64, sections, groups, covered, padding, unsized, linked) \
            in zip((old_path, new_path), made, got):
        sides.append({"machine": (machine, bool(is64)), "sections": sections, "groups": dict(zip(GROUPS, groups)),
                      "covered": covered, "padding": padding, "tables": list(summaries),
                      "skipped": sum(s.skipped for s in summaries), "linked": set(linked),
                      "unsized": dict(zip(UNSIZED, unsized))})
    # the linked members the C reader left (not x86-64's), classified by asm.unsized: both files
    # at once (`code_holes` lets go of the GIL); imported here, not by two threads at once
    jobs = [(path, side.pop("linked"), side["unsized"]) for path, side in zip((old_path, new_path), sides)]
    if any(offsets for _, offsets, _ in jobs):
        for module in ("flagbench.asm.unsized", "flagbench.elf.tables"):
            __import__(module)
        from flagbench.size.pair import both_threaded
        both_threaded(_linked_unsized, *jobs)
    return sides


def _summaries(tables) -> tuple:
    return tuple(_symtab.Summary(kinds.encode(), CODE_LETTERS.encode(), _SKIP_PREFIXES, _SKIP_NAMES)
                 for _, kinds in tables)


def _linked_unsized(path: str, offsets: set, u: dict) -> None:
    if not offsets:
        return
    from flagbench.asm import unsized
    from flagbench.elf import open_input
    with open_input(path) as inp:
        for m in inp.members:
            if m.offset in offsets:
                cmap = unsized.of_member(inp, m)
                if cmap is not None:
                    for kind, n in cmap.totals().items():
                        u[kind] += n


# bloat-o-meter's skip rules, as the C summary takes them (`rules` holds them; `rules.bom_name`
# is the same in Python, and the tests hold the two together).
_SKIP_PREFIXES = tuple(p.encode() for p in SKIP_PREFIXES)
_SKIP_NAMES = tuple(n.encode() for n in SKIP_NAMES)


def _unsized(inp, t, side: dict, code: int) -> None:
    """Code outside sized symbols, classified (stubs, padding, other): `asm.unsized`, for linked
    files. A relocatable object has no linker stubs: there the reader's own sums serve (the gaps
    after sized symbols are padding, the rest is other code), and an archive of thousands of
    members is not read twice."""
    u = side["unsized"]
    if t.member.etype == ET_REL:
        u["padding"] += t.padding
        u["other"] += max(0, code - t.covered - t.padding)
        return
    from flagbench.asm import unsized
    cmap = unsized.of_member(inp, t.member)
    if cmap is not None:
        for kind, n in cmap.totals().items():
            u[kind] += n


def _sections(t, side: dict) -> int:
    """Allocated sections by output-section-like group (`size -A`) and kind, code in symbols and
    padding; the member's code bytes."""
    sections, code, rodata, data, bss = t.section_sizes(SECTION_GROUPS)
    for name, size in sections.items():
        side["sections"][name] = side["sections"].get(name, 0) + size
    for group, size in zip(GROUPS, (code, rodata, data, bss)):
        side["groups"][group] += size
    side["covered"] += t.covered
    side["padding"] += t.padding
    return code
