"""Harness programs: flagbench's C drivers (src/flagbench/harness/) compiled for a
variant's target and compiler and linked statically with the variant's objects.

Compiles go through build.compile_sources (content-cached like every object); the
link is here because only the run stage links: glibc `-static` where the target has
a cross libc, the freestanding runtime (fbrt_freestanding.c: _start, raw system
calls) where it has none.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flagbench import procs
from flagbench.build import COMPILE_TIMEOUT, HARNESS_DIR, cached_version, check_disk, compile_sources, compiler_for
from flagbench.errors import UserError
from flagbench.spec import compiler_label
from flagbench.toolchains import HOST_TRIPLET, LLD, get_target, is_clang

MICRO_C, MEMCHECK_C, MEMSWEEP_C, WIS_C = (HARNESS_DIR / f for f in
                                          ("micro.c", "memcheck.c", "memsweep.c", "wis_main.c"))


@dataclass(frozen=True)
class Program:
    """A harness source to compile with fixed flags and link with a variant's objects."""
    source: Path
    defines: tuple[str, ...]
    name: str                                   # file name of the executable
    ldflags: tuple[str, ...] = ()


Linker = Callable[[Any, Program, Path], Path]   # (build, program, out_dir) -> executable


def harness_cflags(compiler: str) -> list[str]:
    """Harness code is the same for every variant; keep compilers from turning its
    byte loops into calls of the very functions under test."""
    flags = ["-O2", "-fno-builtin"]
    if "clang" not in compiler:
        flags.append("-fno-tree-loop-distribute-patterns")
    return flags


def link_with_build(build, program: Program, out_dir: Path) -> Path:
    """Default linker: the harness compiled (cached) and linked with the variant's objects."""
    target, compiler = build.cell.target, build.cell.compiler
    objects = compile_sources(target, compiler, [program.source],
                              [*harness_cflags(compiler), *program.defines], out_dir)
    # A layout relink (run/layout.py) puts its padding before everything, harness included.
    leading = tuple(getattr(build, "leading_objects", ()))
    return link_executable(target, compiler, [*leading, *objects, *build.objects],
                           out_dir / program.name, ldflags=program.ldflags)


def program_dir(workdir: Path, *parts: str) -> Path:
    """A directory under workdir for one program; a compiler given by path is named by its file."""
    out = Path(workdir).joinpath(*(compiler_label(p) for p in parts))
    out.mkdir(parents=True, exist_ok=True)
    return out


def link_tool_versions(target: str, compiler: str) -> dict[str, str]:
    """Version lines of the linker link_executable uses (lld for clang, binutils ld for gcc),
    for the provenance of measured programs."""
    t = get_target(target)
    if is_clang(compiler):
        linker = LLD
    else:
        linker = "ld" if t.triplet == HOST_TRIPLET else f"{t.triplet}-ld"
    return {linker: cached_version(linker)} if shutil.which(linker) else {}


def runtime_object(target: str, compiler: str) -> Path:
    """The harness runtime (fbrt_libc.c or fbrt_freestanding.c) compiled for a target."""
    t = get_target(target)
    flags = ["-O2"]
    if not t.static_libc:   # its memcpy loop must not become a call to memcpy
        flags += ["-ffreestanding", "-fno-builtin", "-fno-stack-protector"]
    return compile_sources(target, compiler, [HARNESS_DIR / t.runtime_source], flags)[0]


def link_executable(target: str, compiler: str, objects: Sequence[Path], out: Path, *,
                    ldflags: Sequence[str] = ()) -> Path:
    """A static executable of these objects and the harness runtime."""
    t = get_target(target)
    try:
        link = t.link_flags(compiler)
    except LookupError as e:
        raise UserError(str(e)) from None
    argv = compiler_for(t, compiler)
    runtime = runtime_object(target, compiler)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=out.parent)
    os.close(fd)
    try:
        res = procs.run([*argv, *link, "-o", tmp, *map(str, objects), str(runtime), *ldflags],
                        timeout=COMPILE_TIMEOUT, cwd=out.parent, env={**os.environ, "LC_ALL": "C"})
        if res.timed_out:
            raise UserError(f"linking {out.name} for {target}/{compiler} took more than {COMPILE_TIMEOUT} s")
        if res.returncode != 0:
            check_disk(res.stderr, out.parent)
            hint = ""
            if "crt1.o" in res.stderr or "-lc" in res.stderr:
                libc = [p for p in t.packages if p.startswith("libc6-dev")]
                hint = f" (is the C library installed? apt-get install {' '.join(libc)})" if libc else ""
            raise UserError(f"linking {out.name} for {target}/{compiler} failed: {link_errors(res.stderr)}{hint}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def link_errors(stderr: str, most: int = 2) -> str:
    """The linker's own lines (undefined references), not the driver's summary."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("collect2:")
             and "linker command failed" not in ln]
    useful = [ln for ln in lines if "undefined" in ln or "error" in ln or "multiple definition" in ln]
    return " | ".join((useful or lines)[:most]) or stderr.strip()[:300]
