"""bloat-o-meter's rules and table: the leaf of `flagbench size`, imported by the rest.

The kernel's scripts/bloat-o-meter (current version, with the weak types w/W/v/V) takes nm's sized
symbols of the chosen letters, skips generated kernel symbols and names with ':', removes
`.NUMBER` suffixes and sums the sizes of names that then collide; its table lists every name
whose size changed, by delta then name, descending. `bom_text` prints that table byte for byte.
"""
DEFAULT_TYPES = "tTdDbBrRvVwW"
SYMBOL_KINDS = {"functions": "tTwW", "data": "dDbBvV", "rodata": "rR"}
CODE_LETTERS = "tTwWi"
BOM_TABLES = {   # bloat-o-meter's mode (-c, -d, -t) -> its tables (label, nm letters)
    None: (("Function", DEFAULT_TYPES),),
    "c": (("Function", "tTwW"), ("Data", "dDbBvV"), ("RO Data", "rR")),
    "d": (("Data", "dDbBrRvV"),),
    "t": (("Function", "tTwW"),),
}
# The script before upstream counted weak symbols (Linux 6.1's, which scripts/install-deps puts in
# .cache/bloat-o-meter as the tests' oracle): the same tables without w/W/v/V.
LEGACY_BOM_TABLES = {
    None: (("Function", "tTdDbBrR"),),
    "c": (("Function", "tT"), ("Data", "dDbB"), ("RO Data", "rR")),
    "d": (("Data", "dDbBrR"),),
    "t": (("Function", "tT"),),
}
# --bom-rules for two files: a kernel version's scripts/bloat-o-meter -> its tables. 6.12's script
# is upstream's newest as far as these rules go (weak symbols counted; the rest is 6.1's).
BOM_VERSIONS = {"6.1": LEGACY_BOM_TABLES, "6.12": BOM_TABLES, "newest": BOM_TABLES}


def bom_tables(rules: str, mode: str | None):
    """The (label, nm letters) tables of RULES (a BOM_VERSIONS key) in MODE (-c, -d, -t or None)."""
    return BOM_VERSIONS[rules][mode]


SKIP_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
SKIP_NAMES = ("linux_banner", "vermagic")
NUMBER = r"\.[0-9]+"   # (a pattern: `re` is imported by bom_name alone, the C tables rename)


def bom_name(name: str) -> str | None:
    """The name bloat-o-meter files a symbol under, or None when it skips it."""
    if ":" in name or name.startswith(SKIP_PREFIXES) or name in SKIP_NAMES:
        return None
    import re
    return re.sub(NUMBER, "", name) if "." in name else name


class BomTable:
    """bloat-o-meter's calc() for one table: counts, totals, and the rows in its order (columns:
    delta, name, old size or "-", new size or "-"), names whose size did not change left out.
    `letters`, `footprint_old`, `footprint_new` are filled for `flagbench size`'s own formats.
    (A plain class: importing dataclasses costs a fifth of `flagbench size`'s time on a vmlinux.)"""
    __slots__ = ("label", "add", "remove", "grow", "shrink", "up", "down", "total_old", "total_new", "deltas",
                 "names", "olds", "news", "letters", "footprint_old", "footprint_new")

    def __init__(self, label: str, add: int, remove: int, grow: int, shrink: int, up: int, down: int,
                 total_old: int, total_new: int, deltas: list[int], names: list[str], olds: list, news: list):
        self.label, self.add, self.remove, self.grow, self.shrink = label, add, remove, grow, shrink
        self.up, self.down, self.total_old, self.total_new = up, down, total_old, total_new
        self.deltas, self.names, self.olds, self.news = deltas, names, olds, news
        self.letters: list[str] | None = None
        self.footprint_old: list | None = None
        self.footprint_new: list | None = None

    def columns(self, top: int | None, *names: str) -> list[list]:
        """The columns NAMES (attributes: names, olds, ...) of the rows `--top` shows, in order."""
        columns = [getattr(self, n) for n in names]
        if top is None:
            return columns
        keep = self.top(top)
        return [[c[i] for i in keep] for c in columns]

    def top(self, n: int | None) -> list[int]:
        """Indices of the N rows with the largest |delta|, in printed order (all when N is None)."""
        if n is None or n >= len(self.deltas):
            return list(range(len(self.deltas)))
        return sorted(sorted(range(len(self.deltas)), key=lambda i: -abs(self.deltas[i]))[:n])


def bom_text(table: BomTable, top: int | None = None) -> str:
    """One bloat-o-meter print_result() block, byte for byte."""
    rows = zip(*table.columns(top, "names", "olds", "news", "deltas"))
    otot, ntot = table.total_old, table.total_new
    percent = (ntot - otot) * 100.0 / otot if otot else 0
    return "".join((
        "add/remove: %s/%s grow/shrink: %s/%s up/down: %s/%s (%s)\n" % (
            table.add, table.remove, table.grow, table.shrink, table.up, -table.down,
            table.up - table.down),
        "%-40s %7s %7s %+7s\n" % (table.label, "old", "new", "delta"),
        "".join(map("%-40s %7s %7s %+7d\n".__mod__, rows)),
        "Total: Before=%d, After=%d, chg %+.2f%%\n" % (otot, ntot, percent)))
