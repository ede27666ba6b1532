"""ELF files and `ar` archives, read for every stage that looks inside a build.

files: opening an input (regular files only; archives; header checks); sections: section headers,
their names and nm letters; symbols: nm's type letter; tables: all members' sections and symbols
as numpy columns (`flagbench size`, the build checks); image: one ELF file's named sections and
symbols, contents read on demand (`flagbench asm`, the layout relinks). Constants: `constants`.
"""
from flagbench.elf.files import Input, Member, open_input  # noqa: F401
from flagbench.elf.image import Image, symbol_address  # noqa: F401
from flagbench.elf.tables import sized_symbols  # noqa: F401
