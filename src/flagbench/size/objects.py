"""Which of the kernel's objects changed code between two `O=` trees, and by how much.

Only objects the compiler or assembler made are counted (their `.NAME.o.cmd` has a `-c`):
`ld -r` composites and vmlinux.o would count the same code twice. An object's code is its
executable sections: their total size and a hash of their bytes, so an object whose code
changed without changing size is still listed. Ranked by |size change|, then by name.

A commit's build (a ref variant) is kept without its objects (kbuild keeps vmlinux, System.map,
.config and the image per commit; the walked O= directory moves on to the next commit), so it
keeps this: each compiled object's code size and hash, in CODE_INDEX, read here as the objects
would be. A directory with neither objects nor an index is refused, never counted as 0 changes.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from flagbench import elf
from flagbench.elf.constants import SHF_EXECINSTR, SHT_NOBITS
from flagbench.errors import UserError

CODE_INDEX = "flagbench-objects.json"   # in a kept commit build: {"objects": {path: [bytes, sha256]}}


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


def write_code_index(odir: Path, dest: Path) -> None:
    """DEST := the code (bytes, hash) of every object a compile made in the O= directory ODIR:
    what `size --objects` needs of a build whose objects are not kept."""
    objects = {rel: list(code_of(path)) for rel, path in sorted(compiled_objects(odir).items())}
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"v": 1, "objects": objects}))
    os.replace(tmp, dest)


def code_index(odir: Path) -> dict[str, tuple[int, str]]:
    """relative path -> (code bytes, hash) of each compiled object of a build: its objects read,
    or a kept commit build's CODE_INDEX. A UserError, naming the directory, when it has neither."""
    kept = odir / CODE_INDEX
    if kept.is_file():
        try:
            return {rel: (int(v[0]), str(v[1])) for rel, v in json.loads(kept.read_text())["objects"].items()}
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            raise UserError(f"{kept}: damaged ({e}): remove {odir} to build it again") from None
    found = compiled_objects(odir)
    if not found:
        raise UserError(_no_objects(odir))
    return {rel: code_of(path) for rel, path in found.items()}


def _no_objects(odir: Path) -> str:
    try:
        commit = json.loads((odir / "flagbench-cell.json").read_text()).get("commit") or {}
    except (OSError, ValueError, AttributeError):
        commit = {}
    if commit:
        return (f"{odir}: the build of commit {str(commit.get('sha'))[:12]} was kept without its objects' code "
                f"(by an older flagbench): remove {odir} and build again")
    return f"{odir}: no compiled objects (no .NAME.o.cmd beside an object): not a Kbuild O= directory"


def compare_trees(old_dir: Path, new_dir: Path) -> list[ObjectChange]:
    """Every compiled object whose code differs (or exists on one side only), ranked."""
    return compare(old_dir, new_dir)[0]


def compare(old_dir: Path, new_dir: Path) -> tuple[list[ObjectChange], int]:
    """(compare_trees, how many compiled objects the new build has)."""
    old, new = code_index(Path(old_dir)), code_index(Path(new_dir))
    out = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a and b and a[1] == b[1]:
            continue
        out.append(ObjectChange(rel, a[0] if a else None, b[0] if b else None, False))
    out.sort(key=lambda c: (-abs(c.delta), c.path))
    return out, len(new)


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
