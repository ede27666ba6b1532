"""Which of the kernel's objects changed code between two `O=` trees, and by how much.

Only objects the compiler or assembler made are counted (their `.NAME.o.cmd` has a `-c`):
`ld -r` composites and vmlinux.o would count the same code twice. An object's code is its
executable sections: their total size and a hash of their bytes, so an object whose code
changed without changing size is still listed. Ranked by |size change|, then by name.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from flagbench import elf
from flagbench.elf.constants import SHF_EXECINSTR, SHT_NOBITS


@dataclass(frozen=True)
class ObjectChange:
    path: str                  # relative to the O= directory, e.g. "lib/string.o"
    old: int | None            # code bytes; None when the object is only on the other side
    new: int | None
    same_code: bool

    @property
    def delta(self) -> int:
        return (self.new or 0) - (self.old or 0)


def code_of(path: Path) -> tuple[int, str]:
    """(bytes in executable sections, sha256 of them) of one ELF relocatable object; (0, "") for
    a file that is not ELF (LTO bitcode). A damaged object is a UserError naming it."""
    if not elf.is_elf(path):
        return 0, ""
    h = hashlib.sha256()
    total = 0
    with elf.Image(path, symbols=False) as image:
        for i, sec in enumerate(image.sections):
            if sec.flags & SHF_EXECINSTR and sec.type != SHT_NOBITS:
                total += sec.size
                h.update(image.contents(i))
    return total, h.hexdigest()


def compiled_objects(odir: Path) -> dict[str, Path]:
    """relative path -> object, for the objects a compile made (see the module doc)."""
    out = {}
    for cmd in odir.rglob(".*.o.cmd"):
        obj = cmd.with_name(cmd.name[1:-len(".cmd")])
        if not obj.is_file():
            continue
        try:
            head = cmd.read_text(errors="replace").split("\n", 1)[0]
        except OSError:
            continue
        if " -c " in head or head.rstrip().endswith(" -c"):
            out[str(obj.relative_to(odir))] = obj
    return out


def compare_trees(old_dir: Path, new_dir: Path) -> list[ObjectChange]:
    """Every compiled object whose code differs (or exists on one side only), ranked."""
    old, new = compiled_objects(old_dir), compiled_objects(new_dir)
    out = []
    for rel in sorted(set(old) | set(new)):
        a = code_of(old[rel]) if rel in old else None
        b = code_of(new[rel]) if rel in new else None
        if a and b and a[1] == b[1]:
            continue
        out.append(ObjectChange(rel, a[0] if a else None, b[0] if b else None, False))
    out.sort(key=lambda c: (-abs(c.delta), c.path))
    return out


def by_directory(changes: list[ObjectChange], depth: int = 1) -> list[tuple[str, int, int]]:
    """(top directory, objects changed, code delta), largest |delta| first: `lib/` and `net/`
    moved, `fs/` did not."""
    sums: dict[str, list[int]] = {}
    for c in changes:
        parts = c.path.split("/")
        key = "/".join(parts[:depth]) + "/" if len(parts) > depth else c.path
        s = sums.setdefault(key, [0, 0])
        s[0] += 1
        s[1] += c.delta
    return sorted(((k, n, d) for k, (n, d) in sums.items()), key=lambda r: (-abs(r[2]), -r[1], r[0]))


def render(changes: list[ObjectChange], total_objects: int | None = None, top: int = 20) -> str:
    """A Markdown-friendly text table: directories, then the top objects."""
    lines = []
    shown = f" of {total_objects}" if total_objects else ""
    lines.append(f"objects whose code changed: {len(changes)}{shown}")
    if not changes:
        return lines[0] + "\n"
    lines.append("")
    lines.append(f"{'directory':<28} {'objects':>7} {'code delta':>11}")
    for d, n, delta in by_directory(changes):
        lines.append(f"{d:<28} {n:>7} {delta:>+11}")
    lines.append("")
    lines.append(f"{'object':<44} {'old':>8} {'new':>8} {'delta':>8}")
    for c in changes[:top]:
        lines.append(f"{c.path:<44} {_n(c.old):>8} {_n(c.new):>8} {c.delta:>+8}")
    if len(changes) > top:
        lines.append(f"... and {len(changes) - top} more")
    return "\n".join(lines) + "\n"


def _n(v: int | None) -> str:
    return "-" if v is None else str(v)
