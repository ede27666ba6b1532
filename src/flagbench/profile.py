"""Profiles: where a program's instructions (exact) or time (sampled) go, per symbol, and the
diff of two variants' profiles, like `perf diff` with exact counts on the side.

Three sources, parsed here (run/profiled.py runs the programs):
- callgrind (x86_64): each function's self cost (Ir) from its output file; the selves add up to
  the file's total, which is the count `flagbench run` measures.
- flagbench's qemu plugin with profile=FILE (other targets): "ADDRESS COUNT" per executed
  instruction, attributed here to the symbol of the ELF file that contains the address; the
  counts add up to the plugin's "insns".
- `perf record -e cpu-clock` + `perf script`: samples per symbol (time shares, not exact).

Per iteration: each exact profile is taken with n and 2n iterations and differenced, as the
instruction counts are, so start-up code cancels out and the per-symbol values add up to
insns_per_iter. Names are grouped across variants by base name: `f.constprop.0`, `f.isra.0`
and `f.cold` are `f`, with the suffixes shown.
"""
from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

NO_SYMBOL = "(no symbol)"
STUBS = "(linker stubs)"   # executed in stubs the linker added (hppa long branches, veneers, PLT)
_MAPPING = re.compile(r"^\$[a-z](\..*)?$")   # ARM/AArch64/RISC-V mapping symbols ($x, $d.12): not functions
_SUFFIX = re.compile(r"((?:\.(?:constprop|isra|part|cold|lto_priv|localalias|clone|llvm)(?:\.\d+)*)+)$")


@dataclass
class Profile:
    bench: str
    target: str
    compiler: str
    variant: str
    exact: bool                      # counted (callgrind, plugin) or sampled (perf)
    source: str                      # "callgrind", "qemu-plugin", "perf"
    total: float                     # per iteration (exact) or samples (perf)
    symbols: dict[str, float] = field(default_factory=dict)   # name -> self (same unit as total)

    def to_json(self) -> dict:
        ranked = sorted(self.symbols.items(), key=lambda kv: (-kv[1], kv[0]))
        return {"bench": self.bench, "target": self.target, "compiler": self.compiler, "variant": self.variant,
                "exact": self.exact, "source": self.source, "total": self.total,
                "symbols": [{"name": n, "self": v} for n, v in ranked]}

    @classmethod
    def from_json(cls, d: dict) -> "Profile":
        """The inverse of to_json; ValueError when d is not shaped like one."""
        try:
            p = cls(d["bench"], d["target"], d["compiler"], d["variant"], d["exact"], d["source"], d["total"],
                    {s["name"]: s["self"] for s in d["symbols"]})
        except (KeyError, TypeError):
            raise ValueError("not a profile") from None
        numbers = (p.total, *p.symbols.values())
        if not (all(isinstance(x, str) for x in (p.bench, p.target, p.compiler, p.variant, p.source, *p.symbols))
                and isinstance(p.exact, bool)
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers)):
            raise ValueError("not a profile")
        return p


def base_name(name: str) -> tuple[str, str]:
    """(base, suffix) of a compiler-renamed function.

    >>> base_name("copy_page.constprop.0"), base_name("f.isra.0.cold"), base_name("main")
    (('copy_page', '.constprop.0'), ('f', '.isra.0.cold'), ('main', ''))
    """
    m = _SUFFIX.search(name)
    if not m or m.start() == 0:
        return name, ""
    return name[:m.start()], m.group(1)


# -- callgrind --------------------------------------------------------------------------------

def parse_callgrind(text: str) -> tuple[dict[str, int], int | None]:
    """(self Ir per function, the file's total) of a callgrind output file.

    Cost lines after `fn=` are the function's own; the one line after `calls=` is the inclusive
    cost of that call and belongs to the callee, not to the caller's self. Names may be
    compressed: `fn=(7) name` defines id 7, `fn=(7)` refers to it.

    >>> text = "events: Ir\\nfn=(1) main\\n3 10\\ncfn=(2) f\\ncalls=1 5\\n4 100\\n5 2\\nfn=(2)\\n6 100\\ntotals: 112\\n"
    >>> parse_callgrind(text)
    ({'main': 12, 'f': 100}, 112)
    """
    names: dict[str, str] = {}
    selves: dict[str, int] = defaultdict(int)
    current, skip_next, total = None, False, None
    for line in text.splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip_next:
                skip_next = False
                continue
            if current is not None:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    selves[current] += int(parts[1])
            continue
        key, _, value = line.partition("=")
        if key == "fn":
            current = _compressed(value, names)
        elif key in ("cfn", "cfi", "cfl", "cob", "ob", "fl", "fi", "fe"):
            if key == "cfn":
                _compressed(value, names)
        elif key == "calls":
            skip_next = True
        elif line.startswith(("totals:", "summary:")):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                total = int(fields[1])
    return dict(selves), total


def _compressed(value: str, names: dict[str, str]) -> str:
    m = re.match(r"\((\d+)\)\s*(.*)$", value)
    if not m:
        return value.strip()
    ident, name = m.groups()
    if name:
        names[ident] = name
    return names.get(ident, f"(id {ident})")


# -- the qemu plugin ----------------------------------------------------------------------------

def parse_plugin_profile(text: str) -> dict[int, int]:
    """Executions per guest address ("ADDRESS COUNT" lines, hex address), summed over records.

    >>> parse_plugin_profile("400100 3\\n400104 3\\n400100 2\\n")
    {4194560: 5, 4194564: 3}
    """
    counts: dict[int, int] = defaultdict(int)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        address, count = line.split()
        counts[int(address, 16)] += int(count)
    return dict(counts)


class SymbolMap:
    """Address -> the function containing it. A sized function holds its own extent and no more;
    past it, the nearest code label below (hand-written assembly often has no size) holds the
    address only when no sized function starts between them. Else the address is in a linker
    stub (STUBS) or in no symbol (NO_SYMBOL)."""

    def __init__(self, functions: list[tuple[int, int, str]], code_labels: list[tuple[int, str]],
                 stubs: list[tuple[int, int]] = ()):
        self.sized = sorted(functions)
        self.starts = [s for s, _, _ in self.sized]
        self.labels = sorted(code_labels)
        self.label_starts = [a for a, _ in self.labels]
        self.stubs = sorted(stubs)
        self.stub_starts = [a for a, _ in self.stubs]

    @classmethod
    def of_elf(cls, path) -> "SymbolMap":
        from flagbench.asm import unsized
        from flagbench.elf.image import Image
        from flagbench.elf.constants import SHF_EXECINSTR, STT_FUNC, STT_GNU_IFUNC, STT_NOTYPE, STT_PROC
        from flagbench.targets import target_for_elf
        functions, labels = [], []
        with Image(str(path)) as image:
            target = target_for_elf(image.machine, image.is64)
            cmap = unsized.of_image(image, target) if target else None
            stubs = [(p.start, p.end) for p in cmap.pieces if p.kind == unsized.STUB] if cmap else []
            for s in image.symbols:
                if not s.shndx or not s.name or s.shndx >= len(image.sections):
                    continue
                if not image.sections[s.shndx].flags & SHF_EXECINSTR:
                    continue
                if s.type in (STT_FUNC, STT_GNU_IFUNC, *STT_PROC) and s.size:   # hppa millicode: STT_PARISC_MILLI
                    functions.append((s.value, s.value + s.size, s.name))
                elif s.type in (STT_FUNC, STT_GNU_IFUNC, STT_NOTYPE) and not _MAPPING.match(s.name) \
                        and not s.name.startswith(".L"):
                    labels.append((s.value, s.name))   # hppa's $$dyncall millicode is one of these
        return cls(functions, labels, stubs)

    def name(self, address: int) -> str:
        i = bisect.bisect_right(self.starts, address) - 1
        while i >= 0 and self.sized[i][0] <= address:   # overlapping symbols: the innermost found first
            start, end, name = self.sized[i]
            if address < end:
                return name
            if address - start > 1 << 20:
                break
            i -= 1
        i = bisect.bisect_right(self.starts, address) - 1
        j = bisect.bisect_right(self.label_starts, address) - 1
        if j >= 0 and (i < 0 or self.label_starts[j] > self.starts[i]):
            return self.labels[j][1]
        k = bisect.bisect_right(self.stub_starts, address) - 1
        if k >= 0 and address < self.stubs[k][1]:
            return STUBS
        return NO_SYMBOL


def attribute(counts: dict[int, int], symbols: SymbolMap) -> dict[str, int]:
    """Instruction counts per symbol; every count lands somewhere, so the sum is kept."""
    out: dict[str, int] = defaultdict(int)
    for address, n in counts.items():
        out[symbols.name(address)] += n
    return dict(out)


# -- perf -------------------------------------------------------------------------------------

def parse_perf_script(text: str) -> Counter:
    """Samples per symbol from `perf script -F ip,sym` lines ("  401136 copy_page_info")."""
    samples: Counter = Counter()
    for line in text.splitlines():
        parts = line.split(None, 1)
        if not parts:
            continue
        samples[parts[1].strip() if len(parts) > 1 and parts[1].strip() else "[unknown]"] += 1
    return samples


# -- per iteration and the diff ------------------------------------------------------------------

def per_iteration(small: dict[str, int], large: dict[str, int], iters: int) -> dict[str, float]:
    """(large - small) / iters per symbol, symbols whose difference is 0 dropped.

    >>> per_iteration({"main": 50, "f": 10}, {"main": 50, "f": 30, "g": 5}, 5)
    {'f': 4.0, 'g': 1.0}
    """
    out = {}
    for name in sorted(set(small) | set(large)):
        delta = large.get(name, 0) - small.get(name, 0)
        if delta:
            out[name] = delta / iters
    return out


@dataclass
class DiffRow:
    name: str                        # base name
    suffixes: tuple[str, ...]        # the renamed copies seen (".constprop.0", ".cold")
    old: float
    new: float
    old_share: float
    new_share: float


def diff(old: Profile, new: Profile, top: int | None = 20) -> list[DiffRow]:
    """Symbols grouped by base name, the largest movers first (then the biggest): by count when
    exact, by share when sampled (two perf runs take different numbers of samples)."""
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    suffixes: dict[str, set[str]] = defaultdict(set)
    for side, profile in enumerate((old, new)):
        for name, value in profile.symbols.items():
            base, suffix = base_name(name)
            groups[base][side] += value
            if suffix:
                suffixes[base].add(suffix)
    rows = [DiffRow(name, tuple(sorted(suffixes[name])), o, n, o / old.total if old.total else 0.0,
                    n / new.total if new.total else 0.0) for name, (o, n) in groups.items()]
    if old.exact and new.exact:
        rows.sort(key=lambda r: (-abs(r.new - r.old), -max(r.new, r.old), r.name))
    else:
        rows.sort(key=lambda r: (-abs(r.new_share - r.old_share), -max(r.new_share, r.old_share), r.name))
    return rows if top is None else rows[:top]
