"""`flagbench size` from two paths to tables: open both inputs, read them at once (`pair`), each
through the one reader (`symbols.read_side`), and make bloat-o-meter's tables (`table`).

`bom` is bloat-o-meter's output; `compare` adds what bloat-o-meter cannot see, for the other
formats (`render`): sections (like `size -A`), the padding between symbols in code, each
symbol's footprint (size plus the gap after it), the `.cold` / `.text.unlikely` code, and the
code in symbols bloat-o-meter's rules skip.
"""
import sys

from flagbench import elf
from flagbench.elf._symtab import Summary
from flagbench.size.rules import BOM_TABLES, DEFAULT_TYPES, BomTable, bom_text
from flagbench.size.symbols import read_pair, read_side


class Side:
    """What compare() measures in one input (beyond its symbols, which are in the table)."""
    __slots__ = ("sections", "groups", "covered", "skipped", "padding", "fill", "stubs", "stub_bytes", "other", "cold")

    def __init__(self, raw: dict, cold: int):
        u = raw["unsized"]                                # code outside sized symbols (`asm.unsized`)
        self.sections: dict[str, int] = raw["sections"]   # output-section-like name -> bytes
        self.groups: dict[str, int] = raw["groups"]       # text / rodata / data / bss
        self.padding: int = u["padding"]                  # alignment padding between code (NOPs, int3, zeros)
        self.fill: int = u["fill"]                        # ... in runs of 4 KB or more (page, 2 MB, section ends)
        self.stubs: int = u["stubs"]                      # linker stubs (veneers, long-branch stubs, PLT)
        self.stub_bytes: int = u["stub"]                  # ... their bytes
        self.other: int = u["other"]                      # other code outside sized symbols (asm without .size)
        # code bytes inside sized symbols other than stubs: the rest of the code, so the rows add up
        self.covered: int = self.code - self.padding - self.fill - self.stub_bytes - self.other
        self.skipped: int = raw["skipped"]                # ... of those, in symbols bloat-o-meter's rules skip
        self.cold: int = cold                             # bytes of .cold symbols

    @property
    def code(self) -> int:
        """Bytes of executable sections."""
        return self.groups["text"]

    @property
    def unlikely(self) -> int:
        """Bytes of .text.unlikely sections."""
        return self.sections.get(".text.unlikely", 0)


class SizeComparison:
    """OLD vs NEW: each side's sections and totals, and the symbol table (with letters and
    footprints). Plain classes here: importing dataclasses would cost a fifth of the time
    `flagbench size` takes on a vmlinux pair. The table is made on first use: the text format
    without --top has it printed by the C tables themselves (`text_block`)."""
    __slots__ = ("old_path", "new_path", "old", "new", "summaries", "match", "_table")

    def __init__(self, old_path: str, new_path: str, old: Side, new: Side, summaries: tuple, match=None):
        self.old_path, self.new_path, self.old, self.new = old_path, new_path, old, new
        self.summaries, self.match, self._table = summaries, match, None

    @property
    def table(self) -> BomTable:
        if self._table is None:
            from flagbench.size.table import bom_table
            self._table = bom_table("Function", *self.summaries, self.match, extras=True)
        return self._table


def open_pair(old_path: str, new_path: str, warn=None) -> "tuple[elf.Input, elf.Input]":
    """Open both inputs; a different architecture is allowed, with a warning line (bom and
    compare print it once both files are read: a damaged file is its error alone)."""
    old = elf.open_input(old_path)
    try:
        new = elf.open_input(new_path)
    except BaseException:
        old.close()
        raise
    if old.machine != new.machine:
        (warn or _stderr)(_machines_differ(old_path, new_path, old.machine, new.machine))
    return old, new


def _machines_differ(old_path: str, new_path: str, a: tuple, b: tuple) -> str:
    from flagbench.targets import target_for_elf
    ta = target_for_elf(*a) or f"machine {a[0]}"
    tb = target_for_elf(*b) or f"machine {b[0]}"
    return f"warning: {old_path} is {ta} but {new_path} is {tb}; comparing anyway"


def _stderr(msg: str) -> None:
    print(f"flagbench size: {msg}", file=sys.stderr)


def bom(old_path: str, new_path: str, mode: str | None = None, match=None, top=None,
        types: str | None = None) -> str:
    """The whole bloat-o-meter output for OLD vs NEW (mode None, "c", "d" or "t")."""
    tables = BOM_TABLES[mode] if types is None else (("Function", types),)
    old, new = _read(old_path, new_path, tables, False)
    out = []
    for (label, _), o, n in zip(tables, old["tables"], new["tables"]):
        text = o.bom_text(n, label) if match is None and top is None else None   # C; None: not ASCII
        if text is None:
            from flagbench.size.table import bom_table   # (not on the C path: an import less)
            text = bom_text(bom_table(label, o, n, match), top)
        out.append(text)
    return "".join(out)


def _read(old_path: str, new_path: str, tables, extras: bool) -> tuple[dict, dict]:
    """Both sides (`symbols.read_side`), their tables as `Summary` objects: through the C reader
    when it reads both, else through the Python one (which then says what is wrong)."""
    got = read_pair(old_path, new_path, tables, extras)
    if got is not None:
        old, new = got
        if old["machine"] != new["machine"]:
            _stderr(_machines_differ(old_path, new_path, old["machine"], new["machine"]))
        return old, new
    from flagbench.size.pair import PARALLEL_SYMTAB_BYTES_EXTRAS, both   # the Python reader's: not on the C path
    warnings: list[str] = []
    old, new = both(read_side, *open_pair(old_path, new_path, warnings.append), tables, extras,
                    **({"threshold": PARALLEL_SYMTAB_BYTES_EXTRAS} if extras else {}))
    for w in warnings:
        _stderr(w)
    for side in (old, new):
        side["tables"] = [Summary.loads(t) for t in side["tables"]]
    return old, new


def compare(old_path: str, new_path: str, types: str | None = None, match=None) -> SizeComparison:
    """Sections, padding, footprints and the symbol table of OLD vs NEW."""
    tables = (("Function", types or DEFAULT_TYPES),)
    old, new = _read(old_path, new_path, tables, True)
    a, b = old["tables"][0], new["tables"][0]
    search = match.search if match else None   # .cold: the parts of split functions
    return SizeComparison(old_path, new_path, Side(old, a.size_of(b".cold", search)),
                          Side(new, b.size_of(b".cold", search)), (a, b), match)
