"""What a disassembly is made of, shared by the modules that make, cut, mix and compare it
(disasm, extent, mix, padding): a function's normalised text and the file's functions."""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

# What alignment pads with, on every target: NOP spellings, int3 fill, zero fill ("..."),
# hppa64's `break 0,0`, arm's `mov r8, r8`.
PADDING = re.compile(r"(?:(?:data16|cs|ds|rex\.?\w*) )*(?:nop\w*|xchg +%ax,%ax|int3|\.\.\.|c\.nop"
                      r"|break 0,0|mov r8, r8|lea +0x0\(%[er]si,%[er]iz,1\),%[er]si"
                      r"|\.inst 0x00000000.*|udf #0|\.short 0x0000|\.word 0x00000000|\(bad\))(?: .*)?$")


EVERY = (0, 1, 1)   # the part (`in_part`) that is every function


@dataclass
class Function:
    name: str          # unique within the file: a repeated static name gets "#2", "#3"
    section: str
    text: str          # normalised instructions, one per line
    mix: object = None  # its `mix.Mix`, made where it was disassembled (a worker process for a vmlinux)

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n") if self.text else []

    def __reduce__(self):
        """Pickled as its values, not a dict of them: a vmlinux's worth comes back from a worker."""
        return Function, (self.name, self.section, self.text, self.mix)


@dataclass
class Disassembly:
    path: Path
    target: str
    tool: str          # "objdump-name version"
    functions: dict[str, Function]
    label: str = ""    # what to call it instead of the path (a variant build: "strict/loongarch64/clang")
    # code no sized symbol covers (`unsized.CodeMap.totals`): bytes of "stub", "padding", "other"
    # and "stubs", the number of linker stubs
    unsized: dict[str, int] = field(default_factory=dict)
    # the functions whose mixes this side made (`in_part`), and the sum of those mixes
    mix_part: tuple[int, int, int] = EVERY
    part_mix: object = None
    # name -> `padding.symbol_spans` of the functions, found when they were cut to their
    # extents (`extent.cut`): the second look at a few of them needs no pass over the symbols
    spans: dict | None = None

    @property
    def shown(self) -> str:
        return self.label or str(self.path)


def in_part(name: str, part: tuple[int, int, int]) -> bool:
    """Whether the function NAME falls in PART (start, stop, n): parts start to stop (not
    included) of n, by the CRC-32 of the name."""
    start, stop, n = part
    return (start, stop) == (0, n) or start <= zlib.crc32(name.encode()) % n < stop


def is_local_label(name: str) -> bool:
    """An assembler-local label or a mapping symbol ($x, $d), not hppa millicode ($$remI)."""
    return name.startswith(".L") or (name.startswith("$") and not name.startswith("$$"))
