"""ELF files and `ar` archives, read for every stage that looks inside a build.

files: opening an input (regular files only; archives; header checks); sections: section headers,
their names and nm letters; symbols: nm's type letter; tables: each member's nm-listed symbols as
columns (`flagbench size`, the run stage's symbol checks; its loops are C, `_symtab.c`), and
`Summary`, bloat-o-meter's table they fill; image:
one ELF file's named sections and symbols, contents read on demand (`flagbench asm`, the layout
relinks). Constants: `constants`. `Image` and `symbol_address` are imported on first use:
`flagbench size` has no need of them.
"""
from flagbench.elf.files import Input, Member, is_elf, open_input  # noqa: F401
from flagbench.elf.tables import Summary, sized_symbols  # noqa: F401


def __getattr__(name: str):
    if name in ("Image", "symbol_address"):
        from flagbench.elf import image
        return getattr(image, name)
    raise AttributeError(f"module 'flagbench.elf' has no attribute {name!r}")
