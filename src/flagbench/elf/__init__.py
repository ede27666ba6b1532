"""ELF files and `ar` archives, read for every stage that looks inside a build.

files: opening an input (regular files only; archives; header checks); sections: section headers,
their names and nm letters; symbols: nm's type letter; tables: each member's nm-listed symbols as
columns (`flagbench size`, the run stage's symbol checks; its loops are C, `_symtab.c`), and
`Summary`, bloat-o-meter's table they fill; image:
one ELF file's named sections and symbols, contents read on demand (`flagbench asm`, the layout
relinks). Constants: `constants`. Every name is imported on first use.
"""
_LAZY = {"Input": "files", "Member": "files", "is_elf": "files", "open_input": "files",
         "Summary": "tables", "sized_symbols": "tables", "Image": "image", "symbol_address": "image"}


def __getattr__(name: str):
    """Every name on first use: `flagbench size`'s C reader needs none of their imports
    (collections, array, struct), which are a tenth of its start-up."""
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f"flagbench.elf.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'flagbench.elf' has no attribute {name!r}")
