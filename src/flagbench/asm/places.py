"""What is at a place in an ELF file, for the disassembly normaliser (the file itself is read by
`flagbench.elf.Image`: sections, symbols, contents on demand, relocations of data sections).

It answers one question: what is at SECTION+OFFSET (in an object)
or at ADDRESS (in an executable)? A named symbol, a string literal, a literal pool entry
holding a function's address (hppa -mlong-calls), a merged constant, or nothing better
than the section and offset. Every answer is independent of where the linker or the
assembler placed things, which is the point.
"""
from __future__ import annotations

import bisect
from pathlib import Path

from flagbench.elf import Image
from flagbench.elf.constants import SHF_ALLOC, SHF_EXECINSTR, SHF_MERGE, SHF_STRINGS, SHT_NOBITS, STT_SECTION
from flagbench.elf.image import Symbol
from flagbench.errors import UserError
from flagbench.targets import target_for_elf


class Places:
    """An ELF file's symbols and sections as the normaliser asks about them. Use as a context
    manager (the file stays open for section contents)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.image = Image(str(path))
        try:
            self.target = target_of(self.image)
        except BaseException:
            self.image.close()
            raise
        self.is64, self.big, self.relocatable = self.image.is64, self.image.big, self.image.relocatable
        self.sections, self.symbols = self.image.sections, self.image.symbols
        # section index -> {offset: "symbol+addend"} for relocations applying to data sections
        self.data_relocs = _data_relocs(self.image) if self.relocatable else {}
        self._by_section: dict[int, tuple[list[int], list[Symbol]]] = {}
        self._by_addr: tuple[list[int], list[Symbol]] | None = None

    def close(self) -> None:
        self.image.close()

    def __enter__(self) -> "Places":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def section_index(self, name: str) -> int | None:
        for i, s in enumerate(self.sections):
            if s.name == name:
                return i
        return None

    @property
    def address_range(self) -> tuple[int, int]:
        """Lowest and highest address of the loaded sections (executables)."""
        return self.image.address_range()

    def describe(self, section: int, offset: int) -> str:
        """A layout-independent name for SECTION+OFFSET in a relocatable object."""
        sec = self.sections[section]
        sym = _containing(self._section_symbols(section), offset)
        if sym is not None:
            return _plus(sym.name, offset - sym.value)
        return self._contents(section, offset) or _plus(sec.name, offset)

    def describe_address(self, addr: int, label: bool = False) -> str | None:
        """A name for an address in an executable: symbol+off, a string, or section+off.

        Where a label (no size: a linker-script boundary like `__cpuidle_text_start`) and
        a function or object share the address, which one the code meant depends on
        whether padding separates them in this build; `label` says which to prefer.
        """
        if self._by_addr is None:
            syms = sorted((s for s in self.symbols if s.shndx and s.type != STT_SECTION
                           and s.shndx < len(self.sections) and s.name
                           and self.sections[s.shndx].flags & SHF_ALLOC),
                          key=_preferred)
            self._by_addr = ([s.value for s in syms], syms)
        sym = _containing(self._by_addr, addr)
        if sym is not None and sym.value == addr and label:
            values, syms = self._by_addr
            i = bisect.bisect_left(values, addr)
            sym = next((s for s in syms[i:bisect.bisect_right(values, addr)] if not s.size), sym)
        if sym is not None:
            return _plus(sym.name, addr - sym.value)
        for i, sec in enumerate(self.sections):
            if sec.flags & SHF_ALLOC and sec.addr <= addr < sec.addr + sec.size:
                return self._contents(i, addr - sec.addr, loose=True) or _plus(sec.name, addr - sec.addr)
        return None

    def read_word(self, addr: int, size: int) -> int | None:
        """The size-byte word at an address of an executable (a jump table entry)."""
        return self.image.word_at(addr, size)

    def _section_symbols(self, section: int):
        if section not in self._by_section:
            syms = sorted((s for s in self.symbols if s.shndx == section and s.type != STT_SECTION
                           and s.name and not s.name.startswith((".L", "$"))),
                          key=_preferred)
            self._by_section[section] = ([s.value for s in syms], syms)
        return self._by_section[section]

    def _contents(self, section: int, offset: int, loose: bool = False) -> str | None:
        """What a literal holds: a string, a pointer to a symbol, or a merged constant."""
        sec = self.sections[section]
        reloc = self.data_relocs.get(section, {}).get(offset)
        if reloc is not None:
            return "&" + reloc
        if sec.type == SHT_NOBITS or not 0 <= offset < sec.size:
            return None
        data = self.image.contents(section)   # searched from OFFSET, not sliced: a slice copies the section's rest
        if sec.flags & SHF_STRINGS or loose:
            end = data.find(b"\0", offset)
            end = end - offset if end >= 0 else -1
            start_ok = offset == 0 or data[offset - 1] == 0
            if end >= (0 if sec.flags & SHF_STRINGS else 2) and (start_ok or not loose):
                text = data[offset:offset + end]
                if not text.translate(None, _TEXT_BYTES):   # all printable ASCII, tab or newline
                    s = text.decode("ascii")
                    s = s if len(s) <= 60 else s[:57] + "..."
                    return '"' + s.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
        if sec.flags & SHF_MERGE and sec.entsize and not sec.flags & SHF_STRINGS:
            return "=0x" + data[offset:offset + sec.entsize].hex()
        return None


_TEXT_BYTES = bytes(range(32, 127)) + b"\t\n"   # what a string literal is made of, to be shown as one


def _preferred(s: Symbol) -> tuple[int, bool]:
    """Sort key: by address, and at one address a sized symbol (a function, an object)
    after the labels, so it is the one found: `default_idle`, not the
    `__cpuidle_text_start` that sits on it only while nothing pads between them
    (describe_address(label=True) asks for the label)."""
    return s.value, s.size > 0


def _containing(index, addr: int) -> Symbol | None:
    """The symbol starting at addr, else one whose extent covers it (labels without size skipped)."""
    values, syms = index
    i = bisect.bisect_right(values, addr) - 1
    for j in range(i, max(i - 16, -1), -1):
        s = syms[j]
        if s.value == addr or addr < s.value + s.size:
            return s
    return None


def _plus(name: str, off: int) -> str:
    if off == 0:
        return name
    return f"{name}+{off:#x}" if off > 0 else f"{name}-{-off:#x}"


def file_target(path: Path | str) -> str:
    """The target of an ELF file, after every check the reader makes (bad input fails early)."""
    with Image(str(path)) as image:
        return target_of(image)


def target_of(image: Image) -> str:
    """flagbench's target name for the file's machine; UserError when it is none of ours."""
    target = target_for_elf(image.machine, image.is64)
    if target is None:
        raise UserError(f"{image.path}: ELF machine {image.machine} is none of flagbench's targets")
    return target


def _data_relocs(image: Image) -> dict[int, dict[int, str]]:
    """Relocations against non-code sections: a literal pool word that holds &function."""
    out: dict[int, dict[int, str]] = {}
    symbols = image.symbols
    for applies_to, entries in image.relocations():
        flags = image.sections[applies_to].flags
        if flags & SHF_EXECINSTR or not flags & SHF_ALLOC:
            continue
        table = out.setdefault(applies_to, {})
        for offset, sym_index, addend in entries:
            if sym_index < len(symbols):
                table[offset] = _plus(symbols[sym_index].name, addend)
    return out
