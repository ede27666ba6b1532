"""Code-layout relinks: the same objects, linked so that every function moves.

A speed difference between two builds may be code-placement luck rather than the flag
(Mytkowicz et al., ASPLOS 2009; Stabilizer, ASPLOS 2013). To measure that luck, a
bench with `layouts = K` links a variant K more times, each time with

- a padding object first on the link line (before the harness and the experiment's
  objects): R bytes of never-executed text, R a multiple of 16 in 16..4096, so every
  function linked after it (the harness, the experiment, the C library) moves by R;
- the experiment's objects in a shuffled order (when there are several): link order
  is the other half of Mytkowicz's placement effect.

The objects themselves are the very files of the build: the machine code is the same,
only addresses (and the PC-relative and absolute fields that encode them) differ.
Every choice comes from a fixed seed and the layout's index, so layout 3 is the same
program in every run, and a resumed run measures the same binaries.

>>> sorted(lay.pad for lay in plan(256, 1)) == list(range(16, 4097, 16))   # distinct
True
>>> plan(3, 1)[:2] == plan(2, 1)
True
>>> layout_column("default", 3), split_layout_column("default@L3"), split_layout_column("O2")
('default@L3', ('default', 3), None)
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from flagbench.columns import (ALIGN, ALIGN_FLAG, ALIGN_SUFFIX, aligned_column,  # noqa: F401 (said here too)
                               layout_column, split_aligned_column, split_layout_column)
from flagbench.errors import UserError

SEED = 0x1A7005                  # fixed: layout i is the same relink in every run
PAD_STEP, PAD_MAX = 16, 4096     # functions are 16-aligned at -O2: finer steps would round away
MAX_LAYOUTS = PAD_MAX // PAD_STEP   # benchspec.MAX_LAYOUTS checks `layouts` against the same number


@dataclass(frozen=True)
class Layout:
    index: int                   # 1..K
    pad: int                     # bytes of text linked before everything else
    order: tuple[int, ...]       # the experiment's objects, by their index in the build

    def describe(self) -> dict:
        return {"layout": self.index, "pad_bytes": self.pad, "object_order": list(self.order)}


def plan(k: int, n_objects: int, seed: int = SEED) -> list[Layout]:
    """K layouts with distinct pads; the first j of a plan of K are the plan of j."""
    if not 0 <= k <= MAX_LAYOUTS:
        raise UserError(f"layouts must be 0..{MAX_LAYOUTS} (distinct paddings of {PAD_STEP}..{PAD_MAX} bytes)")
    pads = list(range(PAD_STEP, PAD_MAX + 1, PAD_STEP))
    random.Random(seed).shuffle(pads)
    layouts = []
    for i in range(1, k + 1):
        order = list(range(n_objects))
        random.Random(f"{seed}:{i}").shuffle(order)
        layouts.append(Layout(i, pads[i - 1], tuple(order)))
    return layouts


def pad_source(pad: int, directory: Path) -> Path:
    """An assembler file of `pad` bytes of local text (the content names the size, so the
    build cache keeps one object per size). `%function` is the spelling every ELF
    assembler here accepts ('@' starts a comment on arm and aarch64)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"fb_layout_pad_{pad}.s"
    text = (f"\t.text\n\t.balign {PAD_STEP}\n\t.type fb_layout_pad_{pad}, %function\n"
            f"fb_layout_pad_{pad}:\n\t.space {pad}\n\t.size fb_layout_pad_{pad}, {pad}\n")
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


@dataclass(frozen=True)
class LayoutBuild:
    """A build as the bench kinds see it (duck-typed build.Build), relinked: `leading_objects`
    go first on the link line, `objects` are the build's own in the layout's order."""
    base: object
    layout: Layout
    leading_objects: tuple[Path, ...]
    objects: tuple[Path, ...]

    def __getattr__(self, name):   # cell, cflags, tools, dir: those of the build
        return getattr(self.base, name)


def relink(build, layout: Layout, workdir: Path) -> LayoutBuild:
    """The build with its padding object compiled (cached) for the build's target and compiler."""
    from flagbench.build import compile_sources
    target, compiler = build.cell.target, build.cell.compiler
    source = pad_source(layout.pad, workdir / "layout-pads")
    pad_object, = compile_sources(target, compiler, [source], [])   # the cache's own file
    objects = tuple(build.objects)
    return LayoutBuild(build, layout, (pad_object,), tuple(objects[i] for i in layout.order))


def symbol_address(executable: Path, name: str) -> int | None:
    """Where `name` landed in a linked program (read with flagbench's ELF reader)."""
    from flagbench import elf
    return elf.symbol_address(executable, name)


# -- the layout check: A and B built again with every function aligned to 64 bytes ---------------
# 0Day's manual step for "strange" bumps of commits that did not touch the benchmark's code: if
# the effect is gone once no function's placement depends on its neighbours' sizes, it was layout.

def function_offsets(path) -> dict[str, int]:
    """Each sized function's value in an ELF file (an object: its offset in its section; a program
    or vmlinux: its address), read with flagbench's ELF reader."""
    from flagbench.elf.image import Image
    STT_FUNC = 2
    with Image(path) as image:
        return {s.name: s.value for s in image.symbols if s.type == STT_FUNC and s.shndx and s.size}


@dataclass(frozen=True)
class AlignmentMoved:
    """What building with ALIGN_FLAG did to the functions of a build, counted over its files."""
    functions: int      # sized functions found in both builds
    moved: int          # whose value mod ALIGN differs between the plain and the aligned build
    aligned: int        # at a multiple of ALIGN in the aligned build

    @property
    def did_nothing(self) -> bool:
        """Alignment moved no function and left some off a 64-byte boundary: gcc under -Os."""
        return self.moved == 0 and self.aligned < self.functions

    def text(self, os_flag: bool = False) -> str:
        """
        >>> AlignmentMoved(10, 0, 3).text(True)
        'could not move anything (gcc ignores -falign-functions under -Os)'
        >>> AlignmentMoved(10, 0, 3).text(), AlignmentMoved(10, 8, 10).text()
        ('could not move anything (7 of 10 functions stayed)', 'every function 64-byte aligned, 8 of 10 moved')
        """
        if self.did_nothing:
            why = "gcc ignores -falign-functions under -Os" if os_flag else \
                f"{self.functions - self.aligned} of {self.functions} functions stayed"
            return f"could not move anything ({why})"
        if self.aligned == self.functions:
            return f"every function {ALIGN}-byte aligned, {self.moved} of {self.functions} moved"
        return f"partial: {self.aligned} of {self.functions} functions {ALIGN}-byte aligned, {self.moved} moved"


def alignment_moved(plain_files, aligned_files) -> AlignmentMoved:
    """Compare the functions of two builds' files, pairwise (objects, or vmlinux)."""
    n = moved = aligned = 0
    for a, b in zip(plain_files, aligned_files):
        old, new = function_offsets(a), function_offsets(b)
        for name, value in new.items():
            if name not in old:
                continue
            n += 1
            moved += old[name] % ALIGN != value % ALIGN
            aligned += value % ALIGN == 0
    return AlignmentMoved(n, moved, aligned)
