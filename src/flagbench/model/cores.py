"""The cores a target's blocks are priced on: llvm-mca-19's scheduling models (in-order and
out-of-order where LLVM has both), each with the cache geometry its vendor publishes, and
the one line said where this LLVM has no model for a target.

A geometry is (L1I bytes, ways, L1D bytes, ways, L2 bytes, ways, line bytes); L2 0: none.
The sizes are the cores' public figures (a configurable size: the common configuration);
they feed the cache plugin only, never the cycles.
"""
from __future__ import annotations

from dataclasses import dataclass

K, M = 1024, 1024 * 1024


@dataclass(frozen=True)
class Core:
    mcpu: str                    # llvm-mca's -mcpu
    pipeline: str                # "in-order" or "out-of-order", as LLVM's model has it
    geometry: tuple[int, ...]    # see the module's docstring
    note: str = ""               # what it stands in for, when it is not the seed's core

    def geometry_arg(self) -> str:
        return ":".join(str(v) for v in self.geometry)

    def cache_label(self) -> str:
        i1, _, d1, _, l2, _, _ = self.geometry
        return f"L1I {_size(i1)} L1D {_size(d1)} L2 {_size(l2) if l2 else 'none'}"


def _size(n: int) -> str:
    return f"{n // M} MB" if n >= M and n % M == 0 else f"{n // K} KB"


@dataclass(frozen=True)
class Isa:
    """How a target's machine code is disassembled (llvm-mc) and priced (llvm-mca)."""
    triple: str
    mattr: str                   # features wide enough for what qemu runs
    thumb_triple: str = ""       # arm: Thumb-2 code, told apart by the ELF's mapping symbols


ISAS: dict[str, Isa] = {
    "x86_64": Isa("x86_64-linux-gnu", ""),
    "aarch64": Isa("aarch64-linux-gnu", "+v8.5a"),
    "arm": Isa("armv7a-linux-gnueabihf", "+neon,+vfp4,+hwdiv,+hwdiv-arm", "thumbv7a-linux-gnueabihf"),
    "riscv64": Isa("riscv64-linux-gnu", "+m,+a,+f,+d,+c"),
}

CORES: dict[str, tuple[Core, ...]] = {
    "x86_64": (Core("skylake", "out-of-order", (32 * K, 8, 32 * K, 8, 256 * K, 4, 64)),
               Core("znver3", "out-of-order", (32 * K, 8, 32 * K, 8, 512 * K, 8, 64))),
    "aarch64": (Core("cortex-a55", "in-order", (32 * K, 4, 32 * K, 4, 256 * K, 4, 64)),
                Core("cortex-a72", "out-of-order", (48 * K, 3, 32 * K, 2, 1 * M, 16, 64))),
    "arm": (Core("cortex-r52", "in-order", (32 * K, 4, 32 * K, 4, 0, 0, 64),
                 "stand-in: LLVM 19 has no Cortex-A7/A8, StrongARM or XScale model for llvm-mca"),
            Core("cortex-a57", "out-of-order", (48 * K, 3, 32 * K, 2, 2 * M, 16, 64))),
    "riscv64": (Core("sifive-u74", "in-order", (32 * K, 4, 32 * K, 8, 2 * M, 16, 64)),
                Core("sifive-p670", "out-of-order", (32 * K, 4, 32 * K, 4, 1 * M, 16, 64))),
}

# Extra in-order or out-of-order models a user may ask for with --core.
MORE_CORES: dict[str, tuple[Core, ...]] = {
    "x86_64": (Core("atom", "in-order", (32 * K, 8, 24 * K, 6, 512 * K, 8, 64)),),
    "aarch64": (Core("cortex-a53", "in-order", (32 * K, 2, 32 * K, 4, 1 * M, 16, 64)),
                Core("cortex-a57", "out-of-order", (48 * K, 3, 32 * K, 2, 2 * M, 16, 64))),
    "riscv64": (Core("sifive-x280", "in-order", (32 * K, 4, 32 * K, 4, 1 * M, 16, 64)),),
    "arm": (Core("cortex-a9", "out-of-order", (32 * K, 4, 32 * K, 4, 1 * M, 8, 32)),),
}

# Targets with no scheduling model in Debian's LLVM 19: their caches, from the seed's machine.
NO_MODEL: dict[str, tuple[str, Core]] = {
    "loongarch64": ("no model: llvm-mca-19 here has no LoongArch one (la464 is upstream only)", Core("la464", "-", (64 * K, 4, 64 * K, 4, 256 * K, 16, 64))),
    "hppa": ("no model: LLVM has no PA-RISC backend", Core("pa8600", "-", (512 * K, 4, 1 * M, 4, 0, 0, 64))),
}


def cores_for(target: str, wanted: list[str] | None = None) -> tuple[Core, ...]:
    """The cores a target's band spans: the default pair, or those named in WANTED (known
    to this table for the target; others are bad input, said by the caller)."""
    known = {c.mcpu: c for c in (*CORES.get(target, ()), *MORE_CORES.get(target, ()))}
    if not wanted:
        return CORES.get(target, ())
    return tuple(known[w] for w in wanted if w in known)


def known_cores() -> dict[str, list[str]]:
    return {t: [c.mcpu for c in (*CORES[t], *MORE_CORES.get(t, ()))] for t in CORES}
