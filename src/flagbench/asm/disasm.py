"""Disassemble an ELF file per function, normalised so that layout alone makes no diff.

objdump is asked not to print addresses (`--no-addresses`), so what is left to normalise is
what still depends on placement: relocations (folded into their instruction as a
layout-independent name, see `places.Places.describe`), branch targets (offsets within the
function or symbol+offset), RIP-relative displacements, address-sized immediates in
executables, and the NOP padding that alignment adds after a function.

Whole function bodies go through a few regular expressions rather than a Python loop per
line: a vmlinux has three million instruction lines, and the list of changed functions
has to come back in about the time objdump itself takes. In the common case (GNU objdump, no
relocations in a body, no linker stubs, not a riscv object) objdump's output is cut and
normalised in C instead (`_normalise.c`, `Normaliser.fast_context`), byte for byte as here.
"""
from __future__ import annotations

import gc
import re
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

from flagbench.asm import _normalise, extent, unsized
from flagbench.asm.mix import Mix, mix, mix_sum
from flagbench.asm.model import EVERY, PADDING, Disassembly, Function, in_part, is_local_label  # noqa: F401 - re-exported
from flagbench.asm.places import Places
from flagbench.errors import UserError
from flagbench.toolchains import LLVM_OBJDUMP, get_target, tool_version


def objdump_argv(tool: str, path: Path, relocatable: bool, start: int | None = None,
                 stop: int | None = None) -> list[str]:
    """objdump over PATH, or over the addresses [START, STOP) of it (None: no bound)."""
    bounds = ([f"--start-address={start:#x}"] if start is not None else []) + \
        ([f"--stop-address={stop:#x}"] if stop is not None else [])
    if tool == LLVM_OBJDUMP or "llvm-objdump" in tool:
        return [tool, "-d", "-r", "--no-show-raw-insn", "--no-leading-addr", *bounds, str(path)]
    argv = [tool, "-d", "-w", "--no-show-raw-insn", "--no-addresses"]
    return argv + (["-r"] if relocatable else []) + bounds + [str(path)]


def disassemble(path: Path | str, mix_part: tuple[int, int, int] = EVERY, mix_each: bool = True) -> Disassembly:
    """PATH's functions, normalised, with the instruction mixes of those whose name falls in
    MIX_PART (`model.in_part`); `render.Mixes` makes or shares the rest. Their sum is made
    always (`Disassembly.part_mix`), each one's own mix only with MIX_EACH."""
    path = Path(path)
    with gc_paused(), Places(path) as elf:
        tool = get_target(elf.target).objdump
        if shutil.which(tool) is None:
            raise UserError(f"{tool} not found: it disassembles {elf.target} "
                            f"(install {' '.join(get_target(elf.target).packages)} or llvm-19)")
        cmap = unsized.of_image(elf.image, elf.target)
        norm = Normaliser(elf, cmap)
        ranges = [(None, None)] if elf.relocatable else cmap.code_ranges(SKIP_PADDING)
        functions = _functions(tool, path, elf.relocatable, norm, ranges)
        d = Disassembly(path, elf.target, tool_version(tool) or tool, functions, unsized=cmap.totals())
        extent.cut(d, elf.image, cmap)
        mine = [f for f in d.functions.values() if in_part(f.name, mix_part)]
        d.mix_part = mix_part
        if mix_each:
            d.part_mix = Mix()
            for f in mine:
                f.mix = mix(d.target, f.text)
                d.part_mix += f.mix
        else:
            d.part_mix = mix_sum(d.target, [f.text for f in mine])
        return d


@contextmanager
def gc_paused(freeze: bool = False):
    """Python's cycle collector off for the block. A vmlinux's disassembly makes millions of
    objects that live to the end and form no cycles (lines, classified instructions, Functions),
    and the collector's passes over them were 1.5-1.9 s of CPU of `asm` on the --big pair.
    FREEZE, for a process that ends after the block: what is still alive is left out of every
    later collection (`gc.freeze`); the one at exit walked it for 0.07-0.15 s."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_on:
            gc.enable()


# Padding runs at least this long are not disassembled: a vmlinux pads .text to 2 MB with int3,
# and objdump would print (and this module read) a line per byte of it.
SKIP_PADDING = 64 << 10


def _functions(tool: str, path: Path, relocatable: bool, norm: "Normaliser",
               ranges=((None, None),)) -> dict[str, Function]:
    """objdump's output over RANGES of addresses (one run each, in order; None: no bound),
    function by function, normalised; each objdump ends before this returns."""
    functions: dict[str, Function] = {}
    for start, stop in ranges:
        argv = objdump_argv(tool, path, relocatable, start, stop)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        try:
            for section, name, text in _normalised(proc.stdout, norm):
                key = name
                n = 2
                while key in functions:
                    key = f"{name}#{n}"
                    n += 1
                functions[key] = Function(key, section, text)
            err = proc.stderr.read()
            if proc.wait() != 0:
                last = err.strip().splitlines()[-1] if err.strip() else proc.returncode
                raise UserError(f"{tool} failed on {path}: {last}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return functions


def _normalised(stream, norm: "Normaliser", size: int = 1 << 20):
    """(section, function name, normalised body) per function of objdump's output: `_blocks` and
    `Normaliser.body`, in C where `Normaliser.fast_context` allows (the bodies it leaves raw
    are normalised here); the output read SIZE characters at a time."""
    context = norm.fast_context()
    if context is None:
        for section, name, body in _blocks(stream):
            yield section, name, norm.body(body, name)
        return
    state, pending = ["", None, ""], ""
    while True:
        chunk = stream.read(size)
        text = pending + chunk
        # the text that comes again holds no blank line, unless its last newline starts one
        functions, used = _normalise.blocks(text, state, not chunk, context, max(len(pending) - 1, 0))
        for section, name, body, done in functions:
            yield section, name, body if done else norm.body(body, name)
        if not chunk:
            return
        pending = text[used:]


_HEADER = re.compile(r"<(.+)>:$")


def _raw_blocks(stream):
    """objdump's output split on blank lines, read in large chunks."""
    pending = ""
    while chunk := stream.read(1 << 20):
        blocks = (pending + chunk).split("\n\n")
        pending = blocks.pop()
        yield from blocks
    yield pending


def _blocks(stream):
    """(section, function name, raw body) per function; `.L` label blocks join their function."""
    section, name, parts = "", None, []
    for block in _raw_blocks(stream):
        head, _, body = block.lstrip("\n").partition("\n")
        if head.startswith("Disassembly of section "):
            if name is not None:
                yield section, name, "\n".join(parts)
                name, parts = None, []
            section = head[len("Disassembly of section "):].rstrip(":")
            continue
        m = _HEADER.search(head)
        if m is None:
            continue  # the "file format" banner
        label = m.group(1)
        if is_local_label(label) and name is not None:
            parts.append(body)   # a local label the assembler kept (riscv); its number is noise
            continue
        if name is not None:
            yield section, name, "\n".join(parts)
        name, parts = label, [body]
    if name is not None:
        yield section, name, "\n".join(parts)


# Relocations that say nothing about the instruction's meaning.
_NOISE_RELOC = re.compile(r"\tR_(?:RISCV_RELAX|RISCV_ALIGN|LARCH_RELAX|LARCH_ALIGN|RISCV_PCREL_LO12_[IS]"
                          r"|X86_64_NONE|AARCH64_NONE|ARM_V4BX)\t[^\t\n]*")
_RELOC_LINE = re.compile(r"^([^\n]*?)\t(R_\w+)\t([^\t\n]*)[^\n]*$", re.M)
# Patterns start with a literal where they can: Python's re then skips ahead instead of
# trying every position, which is most of the time on a vmlinux.
_TARGET_ADDR = re.compile(r"([ ,(\t#])-?(?:0x)?[0-9a-f]+ <")     # "je 88 <f+0x88>" -> "je <f+0x88>"
_TARGET = re.compile(r"<([^>\n]*)>")
_NAMED_TARGET = re.compile(r"<([^<>\n]+?)([+-]0x[0-9a-f]+)?>")     # "b,l <f-0x8>,rp"
_RIP = re.compile(r"0x[0-9a-f]+\(%rip\)([^\n#]*?)\s*# <([^>\n]*)>")
# A replacement that swallows the "-" left in front of its match (the patterns start at "0x").
_DROP_MINUS = "\0"
_LEADING = re.compile(r"^[ \t]+", re.M)
_COMMENT_TARGET = re.compile(r"\s*# <[^>\n]*>")
_EXPR = re.compile(r"^(.*?)([+-]0x[0-9a-f]+)?$")
_X86_PCREL = ("R_X86_64_PC32", "R_X86_64_PLT32", "R_X86_64_GOTPCREL", "R_X86_64_GOTPCRELX",
              "R_X86_64_REX_GOTPCRELX", "R_X86_64_PC64")
_INDEXED_BY_8 = re.compile(r"\(,%\w+,8\)")       # jmp *TABLE(,%rdx,8)
_IMMEDIATE = re.compile(r"0x([0-9a-f]{6,16})(?![0-9a-f])")



def _without_trailing_padding(body: str) -> str:
    """BODY without its last lines while they are empty or padding: cut from the end, not
    split into lines and joined again (a vmlinux's functions are 29 MB of text)."""
    while body:
        cut = body.rfind("\n")
        last = body[cut + 1:]
        if last and not PADDING.match(last):
            break
        body = body[:max(cut, 0)]
    return body


class Normaliser:
    def __init__(self, elf: Places, cmap: "unsized.CodeMap | None" = None):
        self.elf = elf
        self.cmap = cmap if cmap is not None and cmap.has_stubs() and not elf.relocatable else None
        self._values: dict[str, list[int]] = {}   # symbol name -> values, to place targets on stubs
        self._described: dict[tuple[int, bool], str | None] = {}
        self._entries: dict[int, str | None] = {}   # address -> what its first word points at
        if self.cmap is not None:
            for s in elf.symbols:
                if s.shndx and s.name:
                    self._values.setdefault(s.name, []).append(s.value)
        target = get_target(elf.target)
        self.x86 = target.isa == "x86"      # AT&T operands: relocations folded into %rip and $ forms
        self.riscv = target.stale_target_comments and elf.relocatable
        self.llvm = "llvm" in target.objdump
        self.lo, self.hi = elf.address_range
        self.mask = (1 << 64) - 1 if elf.is64 else (1 << 32) - 1
        self._local = {}
        for s in elf.symbols:
            if s.name.startswith(".L"):
                self._local.setdefault(s.name, []).append(s)

    def fast_context(self) -> tuple | None:
        """What `_normalise` needs to normalise bodies as `body` does (`_normalise.blocks`), or None
        where it does not: linker stubs to name, llvm-objdump's output, a riscv object's comments.
        Addresses are described through the same cache (`_described`)."""
        if self.cmap is not None or self.llvm or self.riscv:
            return None
        lo, hi = max(self.lo, 0), min(self.hi, 1 << 64) - 1     # hi included: it fits in 64 bits
        imm = not self.elf.relocatable and bool(self.hi) and lo <= hi
        return (self._described, self.elf.describe_address, self._jump_table, imm,
                lo if imm else 0, hi if imm else 0, self.mask)

    def body(self, body: str, fname: str) -> str:
        self._fname = fname
        if body.endswith("int3"):
            # vmlinux pads sections with megabytes of int3: cut the run in one step. rstrip may
            # eat the tail of the last real line ("ret"); the next newline restores that line.
            end = body.find("\n", len(body.rstrip("\n\tint3 ")))
            body = body[:end] if end != -1 else body
        if "\tR_" in body:
            body = re.sub(r"\n[ \t]*(?=R_[A-Z0-9_]+\t)", "\t", body)   # llvm / riscv: relocs on lines of their own
            body = _NOISE_RELOC.sub("", body)
            body = _RELOC_LINE.sub(self._fold, body)
        if self.riscv and "# <" in body:
            body = _COMMENT_TARGET.sub("", body)   # objdump's guess from auipc state, stale across functions
        if "(%rip)" in body:
            body = _RIP.sub(self._rip, body)
        if "<" in body:
            if self.cmap is not None:
                body = _NAMED_TARGET.sub(self._stub, body)
            if self.llvm:   # GNU objdump's --no-addresses leaves none before a target
                body = _TARGET_ADDR.sub(r"\1<", body)
            body = body.replace(f"<{fname}+", "<.+").replace(f"<{fname}>", "<.>")
        if not self.elf.relocatable and self.hi:
            body = _IMMEDIATE.sub(self._address, body)
        if _DROP_MINUS in body:
            body = body.replace("-" + _DROP_MINUS, "")
        if self.llvm:
            body = _LEADING.sub("", body)
        else:
            body = body.replace("\n\t", "\n").removeprefix("\t")
        body = body.replace("\t", " ")
        return _without_trailing_padding(body)

    def _fold(self, m: re.Match) -> str:
        insn, rtype, expr = m.group(1), m.group(2), m.group(3).strip()
        name_part, add_part = _EXPR.match(expr).groups()
        addend = int(add_part, 16) if add_part else 0
        pcrel = self.x86 and rtype in _X86_PCREL
        has_target = "<" in insn
        if pcrel and ("$" not in insn or has_target):
            addend += 4   # the field is 4 bytes before the end of the instruction
        name = self._resolve(name_part, addend, pcrel)
        if has_target:
            insn = _COMMENT_TARGET.sub("", insn) if "(%rip)" in insn else insn
            if "<" in insn:
                return _TARGET.sub(lambda _m: f"<{name}>", insn, count=1)
        if self.x86:
            if "0x0(%rip)" in insn:
                return insn.replace("0x0(%rip)", f"{name}(%rip)", 1)
            if "$0x0" in insn:
                return re.sub(r"\$0x0\b", lambda _m: f"${name}", insn, count=1)
            if re.search(r"(?<![\w$])0x0\b", insn):
                return re.sub(r"(?<![\w$])0x0\b", lambda _m: name, insn, count=1)
        if insn.lstrip().startswith((".word", ".long", ".quad", ".dword")):
            return re.sub(r"0x[0-9a-f]+", lambda _m: f"<{name}>", insn, count=1)
        return f"{insn} <{name}>"

    def _resolve(self, name: str, addend: int, pcrel: bool) -> str:
        """symbol+addend, with sections and local labels turned into what they point at."""
        elf = self.elf
        if name.startswith(".L") and len(self._local.get(name, ())) == 1:
            s = self._local[name][0]
            return elf.describe(s.shndx, s.value + addend)
        index = elf.section_index(name) if name.startswith(".") else None
        if index is None:
            return name if addend == 0 else f"{name}{addend:+#x}".replace("+-", "-")
        if pcrel:   # an x86 rip-relative field with an immediate after it: find the real start
            for extra in (0, 1, 2, 4):
                desc = elf.describe(index, addend + extra)
                if "+0x" not in desc or desc.startswith(('"', "&", "=")):
                    return desc
        return elf.describe(index, addend)

    def _stub(self, m: re.Match) -> str:
        """A branch to a linker stub names what the stub reaches: `<stub:f>` (layout-free)."""
        if m.group(1).endswith("@plt") and not m.group(2):   # objdump's name for a PLT entry
            return f"<stub:{m.group(1)[:-4]}>"
        off = int(m.group(2), 16) if m.group(2) else 0
        for value in self._values.get(m.group(1), ()):
            p = self.cmap.stub_at(value + off)
            if p is not None:
                return f"<stub:{p.target}>"
        return m.group(0)

    @staticmethod
    def _rip(m: re.Match) -> str:
        text = m.string
        start = m.start()
        neg = start and text[start - 1] == "-"
        return f"{_DROP_MINUS}<{m.group(2)}>(%rip){m.group(1)}" if neg else f"<{m.group(2)}>(%rip){m.group(1)}"

    def _is_jump_table(self, addr: int) -> bool:
        return self._jump_table(addr, self._fname)

    def _jump_table(self, addr: int, fname: str) -> bool:
        """Whether ADDR holds a table whose first entry points into the function FNAME."""
        desc = self._entries.get(addr, False)
        if desc is False:   # a vmlinux indexes 500 tables 2,200 times (__per_cpu_offset(,%rax,8) most)
            entry = self.elf.read_word(addr, 8)
            desc = self._entries[addr] = self.elf.describe_address(entry) if entry else None
        return desc is not None and (desc == fname or desc.startswith(fname + "+"))

    def _address(self, m: re.Match) -> str:
        text, start = m.string, m.start()
        before = text[start - 1] if start else " "
        if before.isalnum() or before in "_.+":
            return m.group(0)
        value = int(m.group(1), 16)
        if before == "-":
            value = -value & self.mask
        if not self.lo <= value < self.hi:
            return m.group(0)
        if _INDEXED_BY_8.match(text, m.end()) and self._is_jump_table(value):
            # its place in .rodata is layout; its entries point into this function
            return f"{_DROP_MINUS}<jump table>" if before == "-" else "<jump table>"
        # an address compared against is a boundary (a label), one stored or called a function
        line_start = text.rfind("\n", 0, start) + 1
        key = (value, text.startswith("cmp", line_start + (text[line_start] == "\t")))
        desc = self._described.get(key, False)
        if desc is False:   # the same addresses come back thousands of times in a vmlinux
            desc = self._described[key] = self.elf.describe_address(*key)
        return f"{_DROP_MINUS}<{desc}>" if before == "-" and desc else f"<{desc}>" if desc else m.group(0)
