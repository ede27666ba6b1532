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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from flagbench.asm.disasm import PADDING, Disassembly, Function
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
        f_old = sides.submit(place, old, [old.functions[n] for n in names], a)
        f_new = sides.submit(place, new, [new.functions[n] for n in names], b)
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
def place(d: Disassembly, functions: list[Function], pool: ThreadPoolExecutor) -> dict[str, Placed]:
    with Image(str(d.path)) as elf:
        ranges = _ranges(elf, d.target == "arm", functions)
        width = 16 if elf.is64 else 8     # digits of the address in objdump's block headers
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
        if len(merged) > MAX_RUNS:
            merged = [[None, None]]
        runs += [(section, start, stop) for start, stop in merged]
    texts: dict[str, list[str]] = {}
    for (section, _, _), out in zip(runs, pool.map(lambda r: _objdump(d, *r), runs)):
        texts.setdefault(section, []).append(out)
    joined = {section: "\n".join(parts) for section, parts in texts.items()}
    out = {}
    for f in functions:
        if f.name not in ranges:
            continue
        section, start, stop = ranges[f.name]
        placed = _check(_block(joined.get(section, ""), start, stop, width, len(f.lines)), start, stop, f)
        if placed is not None:
            out[f.name] = placed
    return out


def _ranges(elf: Image, thumb: bool, functions: list[Function]) -> dict[str, tuple[str, int, int]]:
    """name -> (section, start, stop): from its symbol to the next symbol that objdump
    would start a block at (local labels join the function, as in the first pass)."""
    wanted = {}
    for f in functions:
        base, _, n = f.name.rpartition("#")
        wanted[f.name] = (base, int(n)) if base and n.isdigit() else (f.name, 1)
    names = {base for base, _ in wanted.values()}
    found: dict[str, list[tuple[int, int]]] = {}
    starts: dict[int, list[int]] = {}
    for s in elf.symbols:
        if not s.shndx or s.shndx >= len(elf.sections) or s.type in (STT_SECTION, STT_FILE) or not s.name:
            continue
        value = s.value & ~1 if thumb else s.value
        if not s.name.startswith((".L", "$")):
            starts.setdefault(s.shndx, []).append(value)
        if s.name in names:
            found.setdefault(s.name, []).append((s.shndx, value))
    out = {}
    for f in functions:
        base, n = wanted[f.name]
        places = sorted(set(found.get(base, ())))
        if len(places) < n or elf.sections[places[n - 1][0]].name != f.section:
            continue
        shndx, start = places[n - 1]
        sec = elf.sections[shndx]
        values = sorted(set(starts[shndx]))
        i = bisect.bisect_right(values, start)
        stop = values[i] if i < len(values) else (sec.addr + sec.size if not elf.relocatable else sec.size)
        out[f.name] = (f.section, start, stop)
    return out


def _objdump(d: Disassembly, section: str, start: int | None, stop: int | None) -> str:
    """objdump's output, with addresses, for SECTION or the range [START, STOP) of it."""
    argv = [get_target(d.target).objdump, "-d", "--no-show-raw-insn", "-j", section]
    if "llvm" not in argv[0]:
        argv.append("-w")
    if start is not None:
        argv += [f"--start-address={start:#x}", f"--stop-address={stop:#x}"]
    return subprocess.run(argv + [str(d.path)], capture_output=True, text=True, errors="replace").stdout


def _block(text: str, start: int, stop: int, width: int, n_lines: int) -> list[tuple[int | None, str]]:
    """(address, mnemonic) per instruction line of the block objdump starts at START (None for a
    "..." run of zeros), up to the block at STOP. Only this block of the output is parsed: a
    whole section is millions of lines, the functions asked about a few of them."""
    i = text.find(f"\n{start:0{width}x} <")
    if i < 0:
        return []
    j = text.find(f"\n{stop:0{width}x} <", i + 1)
    limit = i + 256 * (n_lines + 8)                    # a stop that starts no block: lines are short
    j = limit if j < 0 else min(j, limit)
    out = []
    for addr, mnemonic, dots in _RECORD.findall(text, i + 1, j):
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
