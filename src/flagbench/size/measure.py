"""`flagbench size` from two paths to tables: open both inputs, read them at once (`pair`), each
through the one reader (`symbols.read_side`), and make bloat-o-meter's tables (`table`).

`bom` is bloat-o-meter's output; `compare` adds what bloat-o-meter cannot see, for the other
formats (`render`): sections (like `size -A`), the padding between symbols in code, each
symbol's footprint (size plus the gap after it), the `.cold` / `.text.unlikely` code, and the
code in symbols bloat-o-meter's rules skip.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from flagbench import elf
from flagbench.size.pair import both
from flagbench.size.rules import BOM_TABLES, DEFAULT_TYPES, BomTable, bom_text
from flagbench.size.symbols import read_side
from flagbench.size.table import bom_table


@dataclass
class Side:
    """What compare() measures in one input (beyond its symbols, which are in the table)."""
    sections: dict[str, int]          # output-section-like name -> bytes
    groups: dict[str, int]            # text / rodata / data / bss
    code: int = 0                     # bytes of executable sections
    covered: int = 0                  # ... inside sized symbols (all of them)
    skipped: int = 0                  # ... of those, in symbols bloat-o-meter's rules skip
    padding: int = 0                  # ... in gaps after sized symbols
    cold: int = 0                     # bytes of .cold symbols
    unlikely: int = 0                 # bytes of .text.unlikely sections


@dataclass
class SizeComparison:
    old_path: str
    new_path: str
    old: Side
    new: Side
    table: BomTable                   # the symbols, with letters and footprints
    notes: list[str] = field(default_factory=list)


def open_pair(old_path: str, new_path: str, warn=None) -> tuple[elf.Input, elf.Input]:
    """Open both inputs; a different architecture is allowed, with a warning line."""
    old = elf.open_input(old_path)
    try:
        new = elf.open_input(new_path)
    except BaseException:
        old.close()
        raise
    if old.machine != new.machine:
        from flagbench.toolchains import target_for_elf
        a = target_for_elf(*old.machine) or f"machine {old.machine[0]}"
        b = target_for_elf(*new.machine) or f"machine {new.machine[0]}"
        (warn or _stderr)(f"warning: {old_path} is {a} but {new_path} is {b}; comparing anyway")
    return old, new


def _stderr(msg: str) -> None:
    print(f"flagbench size: {msg}", file=sys.stderr)


def _read(inp, tables, match, extras):
    return read_side(inp, tables, match, extras)


def _read_indexed(inp, tables, match, extras):
    return read_side(inp, tables, match, extras, index=True)


def bom(old_path: str, new_path: str, mode: str | None = None, match=None, top=None,
        types: str | None = None) -> str:
    """The whole bloat-o-meter output for OLD vs NEW (mode None, "c", "d" or "t")."""
    tables = BOM_TABLES[mode] if types is None else (("Function", types),)
    old, new = both(_read, *open_pair(old_path, new_path), tables, match, False, new_func=_read_indexed)
    made = [bom_table(label, o, n) for (label, _), o, n in zip(tables, old["tables"], new["tables"])]
    return "".join(bom_text(t, top) for t in made)


def compare(old_path: str, new_path: str, types: str | None = None, match=None) -> SizeComparison:
    """Sections, padding, footprints and the symbol table of OLD vs NEW."""
    tables = (("Function", types or DEFAULT_TYPES),)
    old, new = both(_read, *open_pair(old_path, new_path), tables, match, True, new_func=_read_indexed)
    table = bom_table("Function", old["tables"][0], new["tables"][0])
    return SizeComparison(old_path, new_path, _side(old), _side(new), table)


def _side(raw: dict) -> Side:
    return Side(raw["sections"], raw["groups"], raw["code"], raw["covered"], raw["skipped"], raw["padding"],
                raw["cold"], raw["unlikely"])
