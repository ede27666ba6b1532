"""nm's letters as lookup tables for the C loops (`_symtab.c`): a symbol's letter by st_info and
section code, a section's code by its flags, and `letter`, a section's letter where its name decides.

Apart from `elf.tables` and `elf.sections` (which re-export these) so that `flagbench size`'s C
reader can have them without what those import (collections, array: a start-up cost of their own).
The letter follows binutils 2.40 (bfd/syms.c decode_section_type, bfd/elf.c
_bfd_elf_make_section_from_shdr): code t, data d, read-only data r, no contents b, debug N,
other read-only n; a COFF name (.drectve, .edata, .idata, .pdata) wins over the flags.
"""
from flagbench.elf.constants import SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_NOBITS

# Letter 0 in a section's slot: BFD made no section of it (symbol table, string tables,
# relocations), so its symbols count as absolute and `nm --size-sort` drops them.
NO_SECTION = "\0"
COMMON = "C"
SECTION_LETTERS = "tdrbNn?iep"


def letter(sh_type: int, sh_flags: int, name: bytes) -> str:
    """nm's lower-case letter for symbols in this section (bfd decode_section_type)."""
    coff = _coff_section_type(name)
    if coff:
        return coff
    contents = sh_type != SHT_NOBITS
    alloc = bool(sh_flags & SHF_ALLOC)
    readonly = not sh_flags & SHF_WRITE
    if sh_flags & SHF_EXECINSTR:
        return "t"
    if alloc and contents:             # SEC_LOAD, hence SEC_DATA
        return "r" if readonly else "d"
    if not contents:
        return "b"
    if not alloc and _is_debug_name(name):
        return "N"
    return "n" if readonly else "?"


# bfd/syms.c `stt`: these names win over the flags, for ELF too (prefix + one of ".$0-9" or end).
_COFF_TYPES = ((b".drectve", "i"), (b".edata", "e"), (b".idata", "i"), (b".pdata", "p"))
COFF_PREFIXES = (b".dr", b".ed", b".id", b".pd")   # cheap pre-filter for the vectorised path


def _coff_section_type(name: bytes) -> str | None:
    for prefix, kind in _COFF_TYPES:
        if name.startswith(prefix):
            rest = name[len(prefix):len(prefix) + 1]
            if rest == b"" or rest in b".$0123456789":
                return kind
    return None


def _is_debug_name(name: bytes) -> bool:
    return (name.startswith((b".debug", b".gnu.debuglto_.debug_", b".gnu.linkonce.wi.", b".zdebug",
                             b".line", b".stab")) or name == b".gdb_index")


# Section letter codes: index into LETTER_CODES; code 0 is "not a section nm lists symbols of",
# COMMON is last (the C code files reserved common indices under it).
LETTER_CODES = NO_SECTION + SECTION_LETTERS + COMMON
_CODE = {c: i for i, c in enumerate(LETTER_CODES)}
assert _CODE[COMMON] == 11 and len(LETTER_CODES) <= 16


# Which letters a symbol takes, by st_info: one line per binding (STB_LOCAL, GLOBAL, WEAK, ...),
# one column per type (STT_NOTYPE, OBJECT, FUNC, SECTION, ...): l the section's letter, G it
# upper-cased, - not listed (section and file symbols), any other character that letter in every
# section; common symbols are C unless not listed. Written out because deriving it from
# `symbols.symbol_letter` took 0.17 ms (1.8 M instructions) at every start of flagbench;
# tests/test_size_fast.py derives it and holds the two equal.
_KINDS = ("lll--lllllilllll" "GGG--GGGGGiGGGGG" "WVW--VWWWWiWWWWW" "???--?????i?????"
          "???--?????i?????" "???--?????i?????" "???--?????i?????" "???--?????i?????"
          "???--?????i?????" "???--?????i?????" "uuu--uuuuuiuuuuu" "???--?????i?????"
          "???--?????i?????" "???--?????i?????" "???--?????i?????" "???--?????i?????")


def _kind_rows() -> dict[str, bytes]:
    """Each kind of _KINDS as its row of 16 letters by section code."""
    pad = bytes(16 - len(LETTER_CODES))
    sections = LETTER_CODES[1:-1]
    rows = {"-": bytes(16), "l": sections, "G": sections.upper()}
    rows.update((k, k * len(sections)) for k in "?VWiu")
    return {k: (b"\0" + v.encode() + COMMON.encode() + pad if k != "-" else v) for k, v in rows.items()}


_SYMBOL_LETTERS = b"".join(map(_kind_rows().__getitem__, _KINDS))
# A section's letter code from flags & (WRITE|ALLOC|EXEC) | NOBITS << 3, where its name does not decide.
_BASE_CODES = bytes(_CODE[letter(SHT_NOBITS if key >> 3 else 1, key & 7, b"")] for key in range(16))


def _name_code(sh_type: int, sh_flags: int, name: bytes) -> int:
    return _CODE[letter(sh_type, sh_flags, name)]
