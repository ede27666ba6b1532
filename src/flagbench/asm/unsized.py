"""Code that no sized symbol covers, classified: linker stubs, alignment padding, other code.

A function's extent is its symbol (value, size). What lies in an executable section outside
every sized symbol is one of:
- a linker stub: code the linker added to reach a target a branch cannot, recognised from the
  linker's own stub symbols (arm/aarch64 veneers `__f_veneer`, arm `__f_from_thumb`...), from
  the instruction shape where the linker names nothing (hppa long-branch stubs
  `ldil L%f,r1; be,n R%f(sr4,r1)`, their PIC form and import stubs), and PLT sections;
- alignment padding: NOPs in the target's spellings, int3 and zero fill;
- other unsized code: assembly without `.size`, or anything the shapes do not explain.

`size` sums the bytes, `asm` cuts functions at their extent and names calls that go through a
stub, `profile` attributes executed stub instructions to stubs. Plain classes and tuples only:
`flagbench size` imports this and its start-up is measured. For `size`, the holes of a member
are found and their padding counted in C (`of_member`: `_symtab.code_holes`, 20,000 holes in a
vmlinux); a linked x86-64 file's are summed whole in C by size's own reader (`_symtab.scan_pair`),
which then needs nothing of this module. `code_map` is the same walk in Python, for `asm` and
`profile`, and the model the tests hold both C paths to.
"""
from __future__ import annotations

import bisect

from flagbench.targets import get_target, target_for_elf

STUB, PADDING, OTHER = "stub", "padding", "other"
KINDS = (STUB, PADDING, OTHER)
FILL, FILL_KEY = 4096, "fill"   # a padding run this long aligns a section or a page, not a function

SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS = 0x2, 0x4, 8
STT_SECTION, STT_FILE = 3, 4

# The linker's stub symbols, capturing the target: aarch64/arm `__f_veneer`, arm interworking.
_STUB_SUFFIXES = ("_veneer", "_from_arm", "_from_thumb", "_change_to_arm")
_STUB_PATTERN = r"^__(.+?)(?:" + "|".join(_STUB_SUFFIXES) + r")$"
# Symbols that start no code of their own: mapping symbols ($x, $d.1, riscv's $xrv64i2p1...)
# and assembler-local labels.
_NOT_LABEL_PATTERN = r"^(?:\$[adtx](?:\.|$|rv)|\.L)"
_PLT_NAMES = frozenset((".plt", ".plt.sec", ".plt.got", ".plt.bnd", ".iplt"))
_PLT_RELOCS = (".rela.plt", ".rel.plt", ".rela.iplt", ".rel.iplt")
# The patterns are compiled on first use: `flagbench size` on an x86 vmlinux needs none of them,
# and importing `re` (with enum) was a tenth of its run.
_COMPILED: dict = {}


def _pattern(name: str):
    if name not in _COMPILED:
        import re
        _COMPILED.update(stub=re.compile(_STUB_PATTERN), stub_lines=re.compile(_STUB_PATTERN, re.M),
                         not_label=re.compile(_NOT_LABEL_PATTERN))
    return _COMPILED[name]


def is_stub_symbol(name: str) -> bool:
    """NAME is a linker stub's symbol ("__" target and one of the stub suffixes)."""
    return _pattern("stub").match(name) is not None


def _is_plt(name: str) -> bool:
    """A PLT section's name (as `^\\.(?:plt(?:\\.sec|\\.got|\\.bnd)?|iplt)$` matched it, a
    newline at the end included)."""
    return (name[:-1] if name.endswith("\n") else name) in _PLT_NAMES

# Padding by target, as whole runs of bytes. x86: int3, zero fill and every NOP spelling gas and
# the kernel's alternatives use (0x90, 66 90, 0f 1f /0 with 66/2e prefixes, 32-bit lea fillers).
_X86_NOP = (rb"\xcc|\x00|\x90|(?:\x66|\x2e)*\x0f\x1f(?:\x00|\x40\x00|\x44\x00\x00|\x80\x00{4}|\x84\x00{5})"
            rb"|\x66+\x90|\x8d\x76\x00|\x8d\xb4\x26\x00{4}|\x8d\x74\x26\x00|\x8d\xb6\x00{4}|\x87\xdb|\x87\xc9")
# The other targets' NOP words and half-words, and byte fills that are padding whatever their
# length (a section tail of megabytes: no regex), are on each Target (targets.py).
def _fill(target: str) -> bytes:
    return get_target(target).fill or b"\0"


def _all_fill(raw: bytes, fill: bytes) -> bool:
    """RAW holds nothing but FILL's bytes. A run of one byte (the megabytes of int3 that end a
    vmlinux's .text) is compared whole, in C; translate walks it a byte at a time (30 M
    instructions of `flagbench size` on a vmlinux pair)."""
    first = raw[:1]
    if first in fill and raw == first * len(raw):
        return True
    return not raw.translate(None, fill)


def _tokens(target: str) -> tuple[int, tuple[bytes, ...]]:
    """Padding other than x86's: (granule, its tokens of that many bytes)."""
    t = get_target(target)
    if t.nop_words:
        return 4, (b"\x00\x00\x00\x00",) + t.nop_words
    return 2, t.nop_halves + (b"\x00\x00",)


def _padding_regex(target: str):
    """The padding of TARGET as a regex: the model `_symtab.padding_prefix` and `code_holes`
    are held to (tests/test_unsized.py), and code_map's walk."""
    import re
    if get_target(target).multibyte_nops:
        return re.compile(rb"(?:" + _X86_NOP + rb")*", re.S)
    return re.compile(rb"(?:" + b"|".join(re.escape(t) for t in _tokens(target)[1]) + rb")*", re.S)


def _padding_spec(target: str) -> tuple[bytes, int, bytes, int]:
    """What `_symtab.code_holes` calls padding, as _padding_regex and _fill do: (fill bytes,
    granule, its tokens joined, FILL); granule 0 is x86, whose NOPs the C code spells as
    _X86_NOP does (the tests hold the two together)."""
    fill = _fill(target)
    if get_target(target).multibyte_nops:
        return fill, 0, b"", FILL
    granule, tokens = _tokens(target)
    return fill, granule, b"".join(tokens), FILL


class Piece:
    """[start, end) of one section (addresses in a linked file, offsets in an object), its kind,
    and for a stub how many stubs it is (0: the branch over a stub group) and what it reaches."""
    __slots__ = ("section", "start", "end", "kind", "count", "target")

    def __init__(self, section: int, start: int, end: int, kind: str, count: int = 0, target: str | None = None):
        self.section, self.start, self.end, self.kind = section, start, end, kind
        self.count, self.target = count, target

    @property
    def size(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        to = f" -> {self.target}" if self.target else ""
        return f"Piece({self.kind} {self.start:#x}..{self.end:#x}{to})"


class CodeMap:
    """The classified pieces of one ELF file's executable sections, sorted by section and start."""
    __slots__ = ("pieces", "_starts", "_stubs", "_counted")

    def __init__(self, pieces: list[Piece], counted: dict[str, int] | None = None):
        self._counted = counted or {}     # padding bytes counted without pieces
        self.pieces = sorted(pieces, key=lambda p: (p.section, p.start))
        self._starts = [(p.section, p.start) for p in self.pieces]
        self._stubs = {p.start: p for p in self.pieces if p.kind == STUB and p.count}

    def totals(self) -> dict[str, int]:
        """Bytes per kind, the padding runs of FILL bytes or more apart ("fill": a linker script's
        page or 2 MB alignment, not the padding between functions), and "stubs": how many."""
        out = dict.fromkeys(KINDS, 0)
        out["fill"] = out["stubs"] = 0
        for kind, n in self._counted.items():
            out[kind] += n
        for p in self.pieces:
            out[FILL_KEY if p.kind == PADDING and p.size >= FILL else p.kind] += p.size
            if p.kind == STUB:
                out["stubs"] += p.count
        return out

    def code_ranges(self, skip: int) -> list[tuple[int | None, int | None]]:
        """Address ranges (None: open) between the padding runs of SKIP bytes or more: what a
        disassembler of a linked file need look at."""
        holes = sorted((p.start, p.end) for p in self.pieces if p.kind == PADDING and p.size >= skip)
        bounds = [None] + [b for hole in holes for b in hole] + [None]
        return list(zip(bounds[::2], bounds[1::2]))

    def has_stubs(self) -> bool:
        return bool(self._stubs)

    def stub_at(self, address: int) -> Piece | None:
        """The stub starting at ADDRESS (a linked file's address), if one does."""
        return self._stubs.get(address)

    def at(self, section: int, address: int) -> Piece | None:
        i = bisect.bisect_right(self._starts, (section, address)) - 1
        if i >= 0:
            p = self.pieces[i]
            if p.section == section and p.start <= address < p.end:
                return p
        return None

    def kinds(self, section: int, start: int, end: int) -> set[str]:
        """The kinds of the pieces in [start, end) of SECTION (empty: all inside sized symbols)."""
        i = bisect.bisect_left(self._starts, (section, start))
        if i > 0 and self.pieces[i - 1].section == section and self.pieces[i - 1].end > start:
            i -= 1
        out = set()
        pieces = self.pieces
        while i < len(pieces) and pieces[i].section == section and pieces[i].start < end:
            out.add(pieces[i].kind)
            i += 1
        return out

    def has_code(self, section: int, start: int, end: int) -> bool:
        """Whether [start, end) of SECTION holds stubs or other code (not only padding)."""
        return bool(self.kinds(section, start, end) - {PADDING})


def code_map(target: str, big: bool, relocatable: bool, sections, symbols, read, pieces_only=True) -> CodeMap:
    """SECTIONS: (index, name, type, flags, addr, size, entsize) per section; SYMBOLS: (name,
    value, size, section index) of the defined symbols (section and file symbols left out);
    READ(index, offset, size): bytes of a section. Without PIECES_ONLY, padding between two
    symbols is only counted (`flagbench size` wants totals: a vmlinux has 20,000 such holes;
    `of_member` has this walk in C, and this is the model the tests hold it to)."""
    counts = None if pieces_only or get_target(target).veneer_groups else dict.fromkeys((PADDING, FILL_KEY), 0)
    exec_sections, plt_entries = _exec_sections(sections, relocatable)
    sized: dict[int, list[tuple[int, int]]] = {k: [] for k in exec_sections}
    labels: dict[int, list[int]] = {k: [] for k in exec_sections}
    stub_syms: dict[int, list[tuple[int, int, str]]] = {}
    rows = [r for r in symbols if r[3] in exec_sections and r[0]]
    stub_names = _stub_names(rows)
    for name, value, size, shndx in rows:
        if stub_names and name in stub_names:
            stub_syms.setdefault(shndx, []).append((value, size, stub_names[name]))
        elif size:
            sized[shndx].append((value, value + size))
        elif not _pattern("not_label").match(name):
            labels[shndx].append(value)
    pad = _padding_regex(target)
    left = []    # (index, cuts, stubs) of the holes to cut into pieces
    for index, (name, base, size) in exec_sections.items():
        if _is_plt(name):
            continue
        bounds = sorted(set(labels[index]) | {v for v, _, _ in stub_syms.get(index, ())})
        stubs = {v: (s, t) for v, s, t in stub_syms.get(index, ())}
        fill = _fill(target)
        holes = list(_uncovered(sized[index], base, base + size))
        if counts is not None and holes:
            holes = _count_padding(holes, bounds, pad, fill, counts, read(index, 0, size), base)
        for start, end in holes:
            # split at labels and stub symbols inside the hole
            i = bisect.bisect_left(bounds, start)
            cuts = [start]
            while i < len(bounds) and bounds[i] < end:
                if bounds[i] > start:
                    cuts.append(bounds[i])
                i += 1
            cuts.append(end)
            if len(cuts) == 2 and counts is not None:   # most holes: padding between two functions
                raw = read(index, start - base, end - start)
                if _all_fill(raw, fill) or pad.fullmatch(raw):
                    counts[FILL_KEY if end - start >= FILL else PADDING] += end - start
                    continue
            left.append((index, cuts, stubs))
    by_value = _by_value(rows, stub_names) if get_target(target).value_named_stubs and left else {}
    return CodeMap(_pieces(target, big, exec_sections, plt_entries, left, read, by_value), counts)


# Where the linker puts veneer groups (aarch64/arm), every hole is a piece, even padding:
# _branches_over_stubs looks at its neighbours.


def _exec_sections(sections, relocatable: bool) -> tuple[dict[int, tuple[str, int, int]], int]:
    """{index: (name, base, size)} of the executable sections with bytes (BASE: the address
    their bytes start at, 0 in an object), and how many PLT entries the PLT relocations make."""
    exec_sections = {}
    plt_entries = 0
    for index, name, stype, flags, addr, size, entsize in sections:
        if flags & (SHF_ALLOC | SHF_EXECINSTR) == SHF_ALLOC | SHF_EXECINSTR and stype != SHT_NOBITS and size:
            exec_sections[index] = (name, (0 if relocatable else addr), size)
        if name in _PLT_RELOCS and entsize:
            plt_entries += size // entsize
    return exec_sections, plt_entries


def _stub_names(rows) -> dict[str, str]:
    """{name: target} of the rows' stub symbols, found by one regex over all names (a vmlinux
    has 40,000)."""
    joined = "\n".join([r[0] for r in rows])
    return {m.group(0): m.group(1) for m in _pattern("stub_lines").finditer(joined)} if "__" in joined else {}


def _by_value(rows, stub_names) -> dict[int, str]:
    """A name per address, for hppa's stub targets."""
    by_value: dict[int, str] = {}
    for name, value, size, _ in rows:
        if name not in stub_names and (size or not _pattern("not_label").match(name)):
            by_value.setdefault(value, name)
    return by_value


def _pieces(target, big, exec_sections, plt_entries, holes, read, by_value) -> list[Piece]:
    """The PLT sections' pieces, then those of HOLES ((index, cuts, stubs): a hole cut at its
    labels and stub symbols, {address: (size, target)} of those)."""
    pieces: list[Piece] = []
    plt_done = False
    for index, (name, base, size) in exec_sections.items():
        if _is_plt(name):
            count = plt_entries if not plt_done else 0
            plt_done = True
            pieces.append(Piece(index, base, base + size, STUB, count, "PLT"))
    pad = _Padding(target)
    for index, cuts, stubs in holes:
        base = exec_sections[index][1]
        for a, b in zip(cuts, cuts[1:]):
            if a in stubs:
                s, to = stubs[a]
                stop = min(b, a + s) if s else b
                pieces.append(Piece(index, a, stop, STUB, 1, to))
                a = stop
            if a < b:
                pieces += _scan(target, big, pad, index, read(index, a - base, b - a), a, b, by_value)
    _branches_over_stubs(target, pieces)
    return pieces


def _count_padding(holes, bounds, pad, fill, counts, data, base) -> list[tuple[int, int]]:
    """Count the holes no label or stub symbol starts inside of that are all padding (a vmlinux
    has 20,000: their bytes joined are tested once, else one by one); the holes left to look at
    piece by piece. DATA: the section's bytes, from address BASE."""
    starts = [a for a, _ in holes]
    marked = {bisect.bisect_right(starts, b) - 1 for b in bounds}
    plain = [h for i, h in enumerate(holes) if i not in marked]
    left = [h for i, h in enumerate(holes) if i in marked]
    raws = [data[a - base:b - base] for a, b in plain]
    blob = b"".join(raws)
    if _all_fill(blob, fill) or pad.fullmatch(blob):
        padding = plain
    else:
        padding = []
        for h, raw in zip(plain, raws):
            (padding if _all_fill(raw, fill) or pad.fullmatch(raw) else left).append(h)
    for a, b in padding:
        counts[FILL_KEY if b - a >= FILL else PADDING] += b - a
    return sorted(left)


def _uncovered(spans: list[tuple[int, int]], lo: int, hi: int):
    """The holes of [lo, hi) that no span covers."""
    spans.sort()
    reach = lo
    for start, end in spans:
        if start > reach:
            yield reach, min(start, hi)
        if end > reach:
            reach = end
        if reach >= hi:
            return
    if reach < hi:
        yield reach, hi


class _Padding:
    """TARGET's padding as `_scan` asks about it, in C (`_symtab.padding_prefix`): the length
    of a run of it at the start of some bytes, and whether a granule's bytes are one token."""
    __slots__ = ("spec", "granule", "tokens", "_prefix")

    def __init__(self, target: str):
        from flagbench.elf import _symtab
        self.spec = _padding_spec(target)
        self.granule, tokens = (0, ()) if get_target(target).multibyte_nops else _tokens(target)
        self.tokens = frozenset(tokens)
        self._prefix = _symtab.padding_prefix

    def head(self, raw: bytes) -> int:
        return self._prefix(self.spec, raw)


def _scan(target, big, pad: _Padding, index, raw, start, end, by_value) -> list[Piece]:
    """Pieces of [start, end) (its bytes RAW): padding runs, stubs by shape, the rest other code."""
    head = pad.head(raw)
    if head == len(raw) or _all_fill(raw, _fill(target)):
        return [Piece(index, start, end, PADDING)]
    if get_target(target).value_named_stubs and len(raw) % 4 == 0:
        return _scan_hppa(big, pad, index, raw, start, by_value)
    out = []
    if get_target(target).multibyte_nops:
        tail = len(raw.rstrip(b"\xcc\x90\x00"))
    else:
        granule = pad.granule
        tail = len(raw)
        while tail - granule >= head and raw[tail - granule:tail] in pad.tokens:
            tail -= granule
    if head:
        out.append(Piece(index, start, start + head, PADDING))
    out.append(Piece(index, start + head, start + tail, OTHER))
    if tail < len(raw):
        out.append(Piece(index, start + tail, end, PADDING))
    return out


# hppa stub shapes (binutils bfd/elf32-hppa.c): (mask, value) per instruction word.
_LDIL_R1 = (0xffe00000, 0x20200000)        # ldil L%x,r1
_BE_N_SR4_R1 = (0xffe0e002, 0xe0202002)    # be,n R%x(sr4,r1)
_BL_R1 = (0xffffffff, 0xe8200000)          # b,l .+8,r1
_ADDIL_R1 = (0xffe00000, 0x28200000)       # addil L%x,r1
_ADDIL_DP_R19 = (0xfbe00000, 0x2a600000)   # addil LR'x,dp / r19 (import stubs)
_LDW_R1_R21 = (0xffff0000, 0x48350000)     # ldw RR'x(r1),r21
_BV_R21 = (0xffffffff, 0xeaa0c000)         # bv r0(r21)
_LDW_R1_R19 = (0xffff0000, 0x48330000)     # ldw RR'x+4(r1),r19
_HPPA_STUBS = (("long branch", (_LDIL_R1, _BE_N_SR4_R1)),
               ("long branch pic", (_BL_R1, _ADDIL_R1, _BE_N_SR4_R1)),
               ("import", (_ADDIL_DP_R19, _LDW_R1_R21, _BV_R21, _LDW_R1_R19)))


def _hppa_words(raw: bytes, big: bool) -> list[int]:
    order = "big" if big else "little"
    return [int.from_bytes(raw[i:i + 4], order) for i in range(0, len(raw), 4)]


def hppa_l21(word: int) -> int:
    """The value of an ldil/addil's 21-bit left part (libhppa.h assemble_21, shifted by 11)."""
    x = word & 0x1fffff
    v = ((x & 1) << 20) | ((x & 0xffe) << 8) | ((x & 0xc000) >> 7) | ((x & 0x1f0000) >> 14) | ((x & 0x3000) >> 12)
    return (v << 11) & 0xffffffff


def hppa_be17(word: int) -> int:
    """The byte displacement of a be/ble (libhppa.h assemble_17, sign-extended, times 4)."""
    w1, w2, w = (word >> 16) & 0x1f, (word >> 2) & 0x7ff, word & 1
    v = (w << 16) | (w1 << 11) | ((w2 & 1) << 10) | ((w2 & 0x7fe) >> 1)
    if v & 0x10000:
        v -= 1 << 17
    return v << 2


def _scan_hppa(big, pad: _Padding, index, raw, start, by_value) -> list[Piece]:
    words = _hppa_words(raw, big)
    out: list[Piece] = []
    i, n = 0, len(words)
    run_kind, run_start = None, 0

    def close(at: int) -> None:
        if run_kind is not None and at > run_start:
            out.append(Piece(index, start + 4 * run_start, start + 4 * at, run_kind))

    while i < n:
        matched = None
        for kind, shape in _HPPA_STUBS:
            if i + len(shape) <= n and all(words[i + j] & m == v for j, (m, v) in enumerate(shape)):
                matched = kind, len(shape)
                break
        if matched:
            close(i)
            run_kind = None
            kind, length = matched
            addr = start + 4 * i
            if kind == "long branch":
                dest = (hppa_l21(words[i]) + hppa_be17(words[i + 1])) & 0xffffffff
            elif kind == "long branch pic":
                dest = (addr + 8 + hppa_l21(words[i + 1]) + hppa_be17(words[i + 2])) & 0xffffffff
            else:
                dest = None
            to = by_value.get(dest, f"{dest:#x}") if dest is not None else "import"
            out.append(Piece(index, addr, addr + 4 * length, STUB, 1, to))
            i += length
            continue
        kind = PADDING if raw[4 * i:4 * i + 4] in pad.tokens else OTHER
        if kind != run_kind:
            close(i)
            run_kind, run_start = kind, i
        i += 1
    close(n)
    return out


def _branches_over_stubs(target: str, pieces: list[Piece]) -> None:
    """aarch64/arm: the `b` the linker puts before a stub group placed between functions is part
    of the group (stub bytes, no stub of its own)."""
    if not get_target(target).veneer_groups:
        return
    pieces.sort(key=lambda p: (p.section, p.start))
    for a, b, c in zip(pieces, pieces[1:], pieces[2:] + [None]):
        if a.kind != OTHER or a.size > 8:
            continue
        nxt = c if b.kind == PADDING and c is not None and c.start == b.end else b
        if nxt.kind == STUB and nxt.start in (a.end, b.end) and nxt.section == a.section:
            a.kind = STUB


# -- from the two readers ---------------------------------------------------------------------

def of_image(image, target: str) -> CodeMap:
    """The code map of an opened `flagbench.elf.Image`."""
    secs = [(i, s.name, s.type, s.flags, s.addr, s.size, s.entsize) for i, s in enumerate(image.sections)]
    syms = ((s.name, s.value, s.size, s.shndx) for s in image.symbols
            if s.shndx and s.type not in (STT_SECTION, STT_FILE))
    return code_map(target, image.big, image.relocatable, secs, syms, lambda i, o, n: image.contents(i)[o:o + n])


def of_member(inp, m) -> CodeMap | None:
    """The code map of one member of an opened `flagbench.elf.Input` (None: no symbol table or
    not one of flagbench's targets), from the symbol reader `flagbench size` uses, whose C code
    (`_symtab.code_holes`) finds the holes and counts the padding among them; the holes left are
    cut into pieces here."""
    from flagbench.elf import _symtab
    from flagbench.elf import sections as elf_sections
    from flagbench.elf import tables as elf_tables
    from flagbench.errors import UserError
    target = target_for_elf(m.machine, m.is64)
    if target is None:
        return None
    found = elf_tables.member_view(inp, m)
    if found is None:
        return None
    hdrs, view = found
    names = elf_sections.names(inp, m, hdrs, view.shstr)
    secs = _section_rows(names, hdrs)
    whole = _section_bytes(inp, m, hdrs)
    exec_sections, plt_entries = _exec_sections(secs, m.etype == 1)
    scan = tuple((i, base, size) for i, (name, base, size) in exec_sections.items() if not _is_plt(name))
    if any(base + size >= 1 << 64 for _, base, size in scan):   # a damaged file: past C's integers
        return _of_member_in_python(inp, m)
    count = not get_target(target).veneer_groups
    try:
        padding, fill, holes = _symtab.code_holes(view, elf_tables.rules(m.machine), scan, _padding_spec(target),
                                                  whole, count)
    except ValueError as e:
        raise UserError(f"{m.name}: corrupt ELF ({e})") from None
    by_value = {}
    if get_target(target).value_named_stubs and holes:   # names for the stubs' targets: the listing's rows
        t = elf_tables.read_member(inp, m, full=True)
        rows = [r for r in zip(t.names, t.values, t.sizes, t.sections) if r[3] in exec_sections and r[0]]
        by_value = _by_value(rows, _stub_names(rows))

    def read(index: int, offset: int, size: int) -> bytes:
        return bytes(whole(index)[offset:offset + size])
    pieces = _pieces(target, m.big, exec_sections, plt_entries, holes, read, by_value)
    return CodeMap(pieces, {PADDING: padding, FILL_KEY: fill} if count else None)


def _section_rows(names, hdrs) -> list[tuple]:
    """code_map's sections from a member's headers: (index, name, type, flags, addr, size, entsize)."""
    return list(zip(range(len(hdrs)), names, hdrs.type, hdrs.flags, hdrs.addr, hdrs.size, hdrs.entsize))


def _section_bytes(inp, m, hdrs):
    """whole(index): a section's bytes, a window on the mapped file."""
    from flagbench.elf import sections as elf_sections
    sections_read: dict[int, memoryview] = {}

    def whole(index: int) -> memoryview:
        if index not in sections_read:
            off, total = elf_sections.table_range(m, hdrs, index, f"section {index}")
            sections_read[index] = inp.view(off, total)
        return sections_read[index]
    return whole


def _of_member_in_python(inp, m) -> CodeMap | None:
    """of_member by `code_map`'s walk: for a code section that ends past 2^64, and for the tests."""
    from flagbench.elf import sections as elf_sections
    from flagbench.elf import tables as elf_tables
    target = target_for_elf(m.machine, m.is64)
    t = elf_tables.read_member(inp, m, full=True) if target else None
    if t is None:
        return None
    hdrs = elf_sections.read_headers(inp, m)
    names = elf_sections.names(inp, m, hdrs)
    secs = _section_rows(names, hdrs)
    whole = _section_bytes(inp, m, hdrs)
    return code_map(target, m.big, m.etype == 1, secs, zip(t.names, t.values, t.sizes, t.sections),
                    lambda i, o, n: bytes(whole(i)[o:o + n]), pieces_only=False)
