"""nm's type letter of a symbol (binutils 2.40: bfd/syms.c bfd_decode_symclass, bfd/elfcode.h
elf_slurp_symbol_table, nm.c filter_symbols).

Common C; undefined and absolute symbols dropped (`nm --size-sort` drops them); ifunc i; weak
V (object) or W; unique u; otherwise the section's letter (`sections.letter`), upper-case when
global. STT_SECTION and STT_FILE symbols are debugging symbols nm does not list.
"""
from flagbench.elf.constants import (STB_GLOBAL, STB_GNU_UNIQUE, STB_LOCAL, STB_WEAK, STT_COMMON, STT_FILE,
                                     STT_GNU_IFUNC, STT_OBJECT, STT_SECTION)
# the section letters' codes live with the letter tables the C reader takes (`letters`)
from flagbench.elf.letters import COMMON, NO_SECTION, SECTION_LETTERS  # noqa: F401


def symbol_letter(section: str, bind: int, stype: int) -> str | None:
    """bfd_decode_symclass for a defined symbol in a section with letter SECTION (or COMMON).

    None: nm does not list it (section/file symbols, symbols BFD files as absolute).
    """
    if section == NO_SECTION or stype in (STT_SECTION, STT_FILE):
        return None
    if section == COMMON:
        return "C"
    if stype == STT_GNU_IFUNC:
        return "i"
    if bind == STB_WEAK:
        return "V" if stype in (STT_OBJECT, STT_COMMON) else "W"
    if bind == STB_GNU_UNIQUE:
        return "u"
    if bind not in (STB_LOCAL, STB_GLOBAL):
        return "?"
    return section.upper() if bind == STB_GLOBAL else section
