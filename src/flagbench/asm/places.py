"""Just enough ELF for the disassembly stage: the target, the sections, the symbols,
and the relocations of data sections, read with `struct`.

It answers one question for the normaliser: what is at SECTION+OFFSET (in an object)
or at ADDRESS (in an executable)? A named symbol, a string literal, a literal pool entry
holding a function's address (hppa -mlong-calls), a merged constant, or nothing better
than the section and offset. Every answer is independent of where the linker or the
assembler placed things, which is the point.
"""
from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from pathlib import Path

from flagbench.errors import UserError
from flagbench.toolchains import target_for_elf

SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 2, 4, 8, 9
SHF_ALLOC, SHF_EXECINSTR, SHF_MERGE, SHF_STRINGS = 0x2, 0x4, 0x10, 0x20
STT_OBJECT, STT_FUNC, STT_SECTION = 1, 2, 3
ET_REL = 1


@dataclass
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    entsize: int


@dataclass
class Symbol:
    name: str
    value: int
    size: int
    type: int
    shndx: int


@dataclass
class ElfInfo:
    path: Path
    target: str
    is64: bool
    relocatable: bool
    sections: list[Section]
    symbols: list[Symbol]
    data: bytes = field(repr=False)
    big: bool = False
    # section index -> {offset: "symbol+addend"} for relocations applying to data sections
    data_relocs: dict[int, dict[int, str]] = field(default_factory=dict, repr=False)
    _by_section: dict[int, tuple[list[int], list[Symbol]]] = field(default_factory=dict, repr=False)
    _by_addr: tuple[list[int], list[Symbol]] | None = field(default=None, repr=False)

    def section_index(self, name: str) -> int | None:
        for i, s in enumerate(self.sections):
            if s.name == name:
                return i
        return None

    @property
    def address_range(self) -> tuple[int, int]:
        """Lowest and highest address of the loaded sections (executables)."""
        loaded = [s for s in self.sections if s.flags & SHF_ALLOC and s.addr]
        if not loaded:
            return (0, 0)
        return (min(s.addr for s in loaded), max(s.addr + s.size for s in loaded))

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
        for sec in self.sections:
            if sec.flags & SHF_ALLOC and sec.type != SHT_NOBITS and sec.addr <= addr <= sec.addr + sec.size - size:
                raw = self.data[sec.offset + addr - sec.addr: sec.offset + addr - sec.addr + size]
                return int.from_bytes(raw, "big" if self.big else "little")
        return None

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
        raw = self.data[sec.offset + offset: sec.offset + sec.size]
        if sec.flags & SHF_STRINGS or loose:
            end = raw.find(b"\0")
            start_ok = offset == 0 or self.data[sec.offset + offset - 1] == 0
            if end >= (0 if sec.flags & SHF_STRINGS else 2) and (start_ok or not loose):
                text = raw[:end]
                if all(32 <= b < 127 or b in (9, 10) for b in text):
                    s = text.decode("ascii")
                    s = s if len(s) <= 60 else s[:57] + "..."
                    return '"' + s.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
        if sec.flags & SHF_MERGE and sec.entsize and not sec.flags & SHF_STRINGS:
            return "=0x" + raw[:sec.entsize].hex()
        return None


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


def read_header(path: Path) -> tuple[str, bool, bool]:
    """(target, is64, big_endian) from the ELF header; UserError when not an ELF we know."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not an ELF file") from None
    except OSError as e:
        raise UserError(f"{path}: {e.strerror}") from None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        raise UserError(f"{path}: not an ELF file")
    is64, big = head[4] == 2, head[5] == 2
    machine = struct.unpack_from(">H" if big else "<H", head, 18)[0]
    target = target_for_elf(machine, is64)
    if target is None:
        raise UserError(f"{path}: ELF machine {machine} is none of flagbench's targets")
    return target, is64, big


def read_elf(path: Path) -> ElfInfo:
    target, is64, big = read_header(path)
    data = Path(path).read_bytes()
    e = ">" if big else "<"
    try:
        if is64:
            e_type, = struct.unpack_from(e + "H", data, 16)
            e_shoff, = struct.unpack_from(e + "Q", data, 40)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 58)
            shfmt = e + "IIQQQQIIQQ"
        else:
            e_type, = struct.unpack_from(e + "H", data, 16)
            e_shoff, = struct.unpack_from(e + "I", data, 32)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 46)
            shfmt = e + "IIIIIIIIII"
        raw = [struct.unpack_from(shfmt, data, e_shoff + i * shentsize) for i in range(shnum)]
    except struct.error:
        raise UserError(f"{path}: truncated ELF file") from None
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    names_off = raw[shstrndx][4] if shstrndx < len(raw) else 0
    sections = [Section(_cstr(data, names_off + r[0]), r[1], r[2], r[3], r[4], r[5], r[9]) for r in raw]
    symbols: list[Symbol] = []
    for r in raw:
        if r[1] != SHT_SYMTAB:
            continue
        strtab = raw[r[6]][4]
        if is64:
            for name, info, _other, shndx, value, size in struct.iter_unpack(e + "IBBHQQ", data[r[4]:r[4] + r[5]]):
                symbols.append(Symbol(_cstr(data, strtab + name), value, size, info & 0xF, shndx))
        else:
            for name, value, size, info, _other, shndx in struct.iter_unpack(e + "IIIBBH", data[r[4]:r[4] + r[5]]):
                symbols.append(Symbol(_cstr(data, strtab + name), value, size, info & 0xF, shndx))
    for s in symbols:  # section symbols have no name of their own
        if s.type == STT_SECTION and s.shndx < len(sections):
            s.name = sections[s.shndx].name
    info = ElfInfo(Path(path), target, is64, e_type == ET_REL, sections, symbols, data, big)
    if info.relocatable:
        info.data_relocs = _data_relocs(data, raw, sections, symbols, is64, e)
    return info


def _data_relocs(data, raw, sections, symbols, is64, e) -> dict[int, dict[int, str]]:
    """Relocations against non-code sections: a literal pool word that holds &function."""
    out: dict[int, dict[int, str]] = {}
    for r in raw:
        if r[1] not in (SHT_RELA, SHT_REL) or r[7] >= len(sections):
            continue
        applies_to = r[7]
        if sections[applies_to].flags & SHF_EXECINSTR or not sections[applies_to].flags & SHF_ALLOC:
            continue
        rela = r[1] == SHT_RELA
        fmt = e + ("QQq" if rela else "QQ") if is64 else e + ("IIi" if rela else "II")
        table = out.setdefault(applies_to, {})
        for entry in struct.iter_unpack(fmt, data[r[4]:r[4] + r[5]]):
            sym_index = entry[1] >> 32 if is64 else entry[1] >> 8
            if sym_index >= len(symbols):
                continue
            addend = entry[2] if rela else 0
            table[entry[0]] = _plus(symbols[sym_index].name, addend)
    return out


def _cstr(data: bytes, off: int) -> str:
    end = data.find(b"\0", off)
    return data[off:end].decode("utf-8", "replace")
