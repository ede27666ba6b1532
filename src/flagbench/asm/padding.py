"""A second look at functions whose texts differ only by padding inside them and by the
in-function branch offsets that padding (or a branch that got longer) moves.

The first pass drops the padding after a function, but padding can sit inside one: code
without a symbol after an alignment gap (kernel assembly), or an aligned loop. The bytes
after it move, so `jae <.+0x2e>` becomes `jae <.+0x5e>` while nothing else changed. An
in-function branch target is an offset, and offsets cannot be mapped to instructions
without their addresses, which the first pass does not ask objdump for (it would triple
the output of a vmlinux). So only the pairs that are equal once padding lines are dropped
and in-function offsets blanked (`loose`) are disassembled again, with addresses, over
just their own address ranges; then each in-function target becomes the index of the
instruction it lands on (`<.#7>`), padding lines are dropped, and the two are compared.

Padding that differs between the two is dropped only where it is alignment: the address
after it is a multiple of a power of two (at least 4) larger than the run, so an `int3`
that hardening put after a `ret` is not mistaken for it most of the time.
"""
from __future__ import annotations

import bisect
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from flagbench.asm.model import PADDING, Disassembly, Function, is_local_label
from flagbench.elf import Image
from flagbench.elf.constants import STT_FILE, STT_SECTION
from flagbench.toolchains import get_target

# Ranges of one section closer than this are disassembled by one objdump run (starting a run
# costs about as much as disassembling this much more text).
MERGE_GAP = 16 << 10
# More runs than this in a section: disassemble the whole section once instead.
MAX_RUNS = 256
_SELF = re.compile(r"<\.\+0x([0-9a-f]+)>")
_RECORD = re.compile(r"^ *([0-9a-f]+):\s+(\S+)|^\s*(\.\.\.)\s*$", re.M)


def loose(text: str) -> str:
    """The text without padding lines and with in-function offsets blanked."""
    return _SELF.sub("<.+?>", "\n".join(line for line in text.split("\n") if not PADDING.match(line)))


@dataclass
class Placed:
    """A function's normalised lines with the address of each (None: objdump's "..." line)."""
    lines: list[str]
    start: int
    addrs: list[int | None]


def same_apart_from_layout(old: Disassembly, new: Disassembly, names: list[str]) -> set[str]:
    """Of these functions (in both, texts differing), those that are the same once inner
    padding and in-function offsets are accounted for."""
    if not names:
        return set()
    # Both sides at once, each with two objdump runs at a time: a side may be one run (a whole
    # section), and the other side's run should not wait for it.
    with ThreadPoolExecutor(max_workers=2) as sides, ThreadPoolExecutor(max_workers=2) as a, \
            ThreadPoolExecutor(max_workers=2) as b:
        f_old = sides.submit(place, old, [old.functions[n] for n in names], a, old.spans)
        f_new = sides.submit(place, new, [new.functions[n] for n in names], b, new.spans)
        p_old, p_new = f_old.result(), f_new.result()
    out = set()
    for name in names:
        a, b = p_old.get(name), p_new.get(name)
        if a is not None and b is not None and _equivalent(a, b):
            out.add(name)
    return out


def _equivalent(a: Placed, b: Placed) -> bool:
    ra, ga = _split(a)
    rb, gb = _split(b)
    if ra is None or rb is None or len(ra[0]) != len(rb[0]):
        return False
    for gap in set(ga) | set(gb):
        run_a, run_b = ga.get(gap), gb.get(gap)
        if (run_a and run_a[0]) == (run_b and run_b[0]):
            continue
        if not all(run is None or _is_alignment(run[1], run[2]) for run in (run_a, run_b)):
            return False
    return _targets(a.start, ra, ga) == _targets(b.start, rb, gb)


def _split(p: Placed):
    """((real lines, their addresses), {gap index: (padding lines, first address, address after)})."""
    lines, addrs, gaps = [], [], {}
    run, run_start = [], None
    for line, addr in zip(p.lines, p.addrs):
        if PADDING.match(line):
            if not run:
                run_start = addr
            run.append(line)
            continue
        if addr is None:
            return None, {}
        if run:
            gaps[len(lines)] = (tuple(run), run_start, addr)
            run = []
        lines.append(line)
        addrs.append(addr)
    return (lines, addrs), gaps


def _is_alignment(start: int | None, end: int) -> bool:
    """Padding from start to end could only be there to align end."""
    if start is None or end <= start:
        return False
    return end % max(4, 1 << (end - start).bit_length()) == 0


def _targets(start: int, real, gaps) -> list[str]:
    """The real lines with in-function targets as instruction indices."""
    lines, addrs = real

    def index(m: re.Match) -> str:
        t = start + int(m.group(1), 16)
        i = bisect.bisect_left(addrs, t)
        if i == len(addrs):
            return "<.#end>"          # past the last instruction: into trailing padding or beyond
        gap = gaps.get(i)
        if addrs[i] == t or (gap and gap[1] is not None and gap[1] <= t):
            return f"<.#{i}>"         # an instruction, or the padding that falls through to it
        return f"<.#{i - 1}+{t - addrs[i - 1]}>"   # inside an instruction

    return [_SELF.sub(index, line) if "<.+" in line else line for line in lines]


# -- addresses: objdump again, over the ranges of the functions asked for ----------------
def place(d: Disassembly, functions: list[Function], pool: ThreadPoolExecutor, spans=None) -> dict[str, Placed]:
    """The functions' lines with their addresses; SPANS: `symbol_spans` of them when known
    (then the symbol table is not read)."""
    with Image(str(d.path), symbols=spans is None) as elf:
        return place_in(d, elf, functions, pool, spans)


def place_in(d: Disassembly, elf: Image, functions: list[Function], pool, spans=None) -> dict[str, Placed]:
    """`place` with D's file already open as ELF."""
    if spans is None:
        spans = symbol_spans(elf, get_target(d.target).thumb_bit, functions)
    wanted = {f.name for f in functions}
    ranges = {name: (elf.sections[shndx].name, start, stop) for name, (shndx, start, stop, _) in spans.items()
              if name in wanted}
    x86 = get_target(d.target).multibyte_nops and not elf.relocatable    # one objdump over the runs' bytes
    by_section: dict[str, list[tuple[int, int]]] = {}
    for section, start, stop in ranges.values():
        by_section.setdefault(section, []).append((start, stop))
    runs = []
    for section, spans in by_section.items():
        spans.sort()
        merged = [list(spans[0])]
        for start, stop in spans[1:]:
            if start - merged[-1][1] <= MERGE_GAP:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        if len(merged) > MAX_RUNS and not x86:
            merged = [[None, None]]
        runs += [(section, start, stop) for start, stop in merged]
    if x86:
        records = _x86_records(d, elf, runs)
        keys = {section: _keys(recs) for section, recs in records.items()}
        found = {}
        for f in functions:
            if f.name in ranges:
                section, start, _ = ranges[f.name]
                found[f.name] = _slice(records.get(section, []), keys.get(section, []), start, len(f.lines))
    else:
        texts: dict[str, list[str]] = {}
        for (section, _, _), out in zip(runs, pool.map(lambda r: _objdump(d, *r), runs)):
            texts.setdefault(section, []).append(out)
        joined = {section: "\n".join(parts) for section, parts in texts.items()}
        found = {f.name: _block(joined.get(ranges[f.name][0], ""), ranges[f.name][1], len(f.lines))
                 for f in functions if f.name in ranges}
    out = {}
    for f in functions:
        if f.name not in found:
            continue
        _, start, stop = ranges[f.name]
        placed = _check(found[f.name], start, stop, f)
        if placed is not None:
            out[f.name] = placed
    return out


def _x86_records(d: Disassembly, elf: Image, runs) -> dict[str, list[tuple[int | None, str]]]:
    """(address, mnemonic) per instruction of every run, from ONE objdump over the runs' bytes
    laid end to end as a raw binary. objdump reads a whole section at each start, which on a
    vmlinux costs more than the few functions a run shows; x86 needs nothing but the bytes to
    decode (no mapping symbols), and int3 filler between runs keeps it in step at each start."""
    filler = b"\xcc" * 16
    blob, table = bytearray(), []          # (blob offset, section, address) per run
    index = {s.name: s for s in elf.sections}
    for section, start, stop in runs:
        sec = index[section]
        if start is None:
            start, stop = sec.addr, sec.addr + sec.size
        table.append((len(blob), section, start))
        blob += elf.input.read(sec.offset + start - sec.addr, stop - start) + filler
    with tempfile.TemporaryDirectory(prefix="flagbench-asm-") as tmp:
        raw = Path(tmp) / "runs.bin"
        raw.write_bytes(blob)
        argv = [get_target(d.target).objdump, "-D", "-b", "binary", "-m", "i386:x86-64", "-w",
                "--no-show-raw-insn", str(raw)]
        text = subprocess.run(argv, capture_output=True, text=True, errors="replace").stdout
    starts = [t[0] for t in table]
    out: dict[str, list[tuple[int | None, str]]] = {}
    current = None      # the records of the section the line before was in (runs are in order)
    for addr, mnemonic, dots in _RECORD.findall(text):
        if dots:
            if current is not None:
                current.append((None, "..."))
            continue
        offset = int(addr, 16)
        blob_start, section, start = table[bisect.bisect_right(starts, offset) - 1]
        current = out.setdefault(section, [])
        current.append((start + offset - blob_start, mnemonic))
    return out


def _keys(records) -> list[int]:
    """Addresses to bisect on: a "..." line takes the address before it."""
    out, last = [], -1
    for addr, _ in records:
        last = last if addr is None else addr
        out.append(last)
    return out


def _slice(records, keys: list[int], start: int, n_lines: int) -> list[tuple[int | None, str]]:
    """The records from the one at START on (as many as the function has lines, and a few)."""
    i = bisect.bisect_left(keys, start)
    return records[i:i + n_lines + 8]


def symbol_spans(elf: Image, thumb: bool, functions: list[Function]) -> dict[str, tuple[int, int, int, int]]:
    """name -> (section index, start, stop, symbol size): the block objdump printed for the
    function runs from its symbol to STOP, the next symbol it would start a block at."""
    wanted = {}
    for f in functions:
        base, _, n = f.name.rpartition("#")
        wanted[f.name] = (base, int(n)) if base and n.isdigit() else (f.name, 1)
    names = {base for base, _ in wanted.values()}
    found: dict[str, list[tuple[int, int, int]]] = {}
    starts: dict[int, list[int]] = {}
    for s in elf.symbols:
        if not s.shndx or s.shndx >= len(elf.sections) or s.type in (STT_SECTION, STT_FILE) or not s.name:
            continue
        value = s.value & ~1 if thumb else s.value
        if not is_local_label(s.name):
            starts.setdefault(s.shndx, []).append(value)
        if s.name in names:
            found.setdefault(s.name, []).append((s.shndx, value, s.size))
    shared = set()     # places where objdump chose one of several names for the block
    for shndx, values in starts.items():
        values.sort()
        shared.update((shndx, a) for a, b in zip(values, values[1:]) if a == b)
    ordered = {shndx: sorted(set(values)) for shndx, values in starts.items()}
    out = {}
    for f in functions:
        base, n = wanted[f.name]
        places = sorted(set(found.get(base, ())))
        if len(places) < n or elf.sections[places[n - 1][0]].name != f.section:
            continue
        if len(places) > 1 and any((shndx, value) in shared for shndx, value, _ in places):
            continue   # "f#2" is the second block objdump named f, not surely f's second symbol
        shndx, start, size = places[n - 1]
        sec = elf.sections[shndx]
        values = ordered[shndx]
        i = bisect.bisect_right(values, start)
        stop = values[i] if i < len(values) else (sec.addr + sec.size if not elf.relocatable else sec.size)
        out[f.name] = (shndx, start, stop, size)
    return out


def _objdump(d: Disassembly, section: str, start: int | None, stop: int | None) -> str:
    """objdump's output, with addresses, for SECTION or the range [START, STOP) of it."""
    argv = [get_target(d.target).objdump, "-d", "--no-show-raw-insn", "-j", section]
    if "llvm" not in argv[0]:
        argv.append("-w")
    if start is not None:
        argv += [f"--start-address={start:#x}", f"--stop-address={stop:#x}"]
    return subprocess.run(argv + [str(d.path)], capture_output=True, text=True, errors="replace").stdout


def _block(text: str, start: int, n_lines: int) -> list[tuple[int | None, str]]:
    """(address, mnemonic) per instruction line of objdump's output from the one at START (None
    for a "..." run of zeros), as many as N_LINES and a few: only these lines are parsed, not
    the millions of a whole section."""
    key = f"{start:x}:"
    i = text.find(key)
    while i > 0 and text[i - 1] not in " \n":            # the tail of a longer address
        i = text.find(key, i + 1)
    if i < 0:
        return []
    i = text.rfind("\n", 0, i) + 1
    out = []   # block headers in between (local labels) match no record; _check stops at STOP
    for addr, mnemonic, dots in _RECORD.findall(text, i, i + 256 * (n_lines + 8)):   # lines are short
        if dots:
            out.append((None, "..."))
        elif not mnemonic.startswith("R_"):
            out.append((int(addr, 16), mnemonic))
    return out


def _check(records, start: int, stop: int, f: Function) -> Placed | None:
    """The records of [start, stop), checked against the first pass's lines."""
    if not records or records[0][0] != start:
        return None
    lines = f.lines
    addrs = []
    for addr, _ in records[:len(lines)]:
        if addr is not None and addr >= stop:
            break
        addrs.append(addr)
    if len(addrs) != len(lines):
        return None
    for (_, mnemonic), line in zip(records, lines):
        if line.split(None, 1)[0] != mnemonic:
            return None    # not the lines the first pass saw: leave the pair as changed
    return Placed(lines, start, addrs)
