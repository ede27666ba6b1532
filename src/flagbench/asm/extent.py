"""A function is its symbol's extent: objdump prints everything up to the next symbol under a
function's name, so stubs and unsized code the linker or an assembly file put after it would
count as its instructions. The few functions whose printed block runs past their size into
such code are disassembled again with addresses (`padding.place`, over their own ranges) and
cut at value + size; blocks that are no function at all (a stub symbol such as `__f_veneer`,
or objdump's own `<f-0x10>` label for code before the first symbol) are dropped.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from flagbench.asm.model import PADDING, Function
from flagbench.asm.padding import place_in, symbol_spans
from flagbench.targets import get_target
from flagbench.asm.unsized import PADDING as PADDING_KIND
from flagbench.asm.unsized import STUB, CodeMap, is_stub_symbol

_MADE_UP = re.compile(r".[+-]0x[0-9a-f]+$")   # objdump's name for code before any symbol: "<f-0x10>"


def not_functions(functions: dict[str, Function]) -> list[str]:
    """Blocks named by a linker stub symbol, a PLT entry (objdump's `f@plt`) or objdump's
    made-up label."""
    return [name for name in functions
            if is_stub_symbol(name.partition("#")[0]) or _MADE_UP.search(name) or "@plt" in name]


def overrun(d, image, cmap: CodeMap) -> tuple[dict[str, int], list[str], dict]:
    """(name -> end of its symbol, for the functions whose block holds code past that end;
    the labels without size whose block is nothing but stubs and padding; the spans)."""
    thumb = get_target(d.target).thumb_bit
    spans = symbol_spans(image, thumb, list(d.functions.values()))
    ends, stubs_only = {}, []
    for name, (shndx, start, stop, size) in spans.items():
        if size and start + size < stop and cmap.has_code(shndx, start + size, stop):
            ends[name] = start + size
        elif not size and STUB in (kinds := cmap.kinds(shndx, start, stop)) and kinds <= {STUB, PADDING_KIND}:
            stubs_only.append(name)
    return ends, stubs_only, spans


def cut(d, image, cmap: CodeMap) -> list[str]:
    """Cut D's functions to their symbols' extents (in place); the names cut."""
    for name in not_functions(d.functions):
        del d.functions[name]
    ends, stubs_only, spans = overrun(d, image, cmap)
    d.spans = spans
    for name in stubs_only:     # a label on a stub group (hppa's _sinittext) is no function
        del d.functions[name]
    if not ends:
        return []
    with ThreadPoolExecutor(max_workers=2) as pool:
        placed = place_in(d, image, [d.functions[n] for n in ends], pool, spans)
    done = []
    for name, end in ends.items():
        p = placed.get(name)
        if p is None:
            continue   # objdump's lines did not line up: leave the function whole
        keep, last = 0, p.start
        for addr in p.addrs:
            last = last if addr is None else addr
            if last >= end:
                break
            keep += 1
        lines = p.lines[:keep]
        while lines and PADDING.match(lines[-1]):
            lines.pop()
        f = d.functions[name]
        d.functions[name] = Function(f.name, f.section, "\n".join(lines))
        done.append(name)
    return done
