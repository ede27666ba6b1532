"""Which compiler, disassembler and runner is installed for each target.

The targets themselves (one object per architecture) are in targets.py, re-exported here;
the functions below resolve them against what is installed. Tool versions are recorded with every
build and measurement, so they are read once per process and cached.
"""
from __future__ import annotations

import functools
import shutil

from flagbench.targets import (CLANG, HOST_TRIPLET, LLD, LLVM_OBJDUMP, TARGETS, Target,  # noqa: F401
                               get_target, is_clang, target_of)


def install_hint(tool: str) -> str:
    """The Debian package that provides `tool`.

    >>> install_hint("aarch64-linux-gnu-gcc"), install_hint("clang-19"), install_hint("gcc-99")
    ('gcc-aarch64-linux-gnu', 'clang-19', 'gcc-99')
    >>> install_hint("qemu-hppa"), install_hint("ld.lld-19"), install_hint("hppa64-linux-gnu-as")
    ('qemu-user', 'lld-19', 'binutils-hppa64-linux-gnu')
    """
    base = tool.rsplit("/", 1)[-1]
    if base.startswith("qemu-"):
        return "qemu-user"
    if base.startswith("ld.lld"):
        return "lld" + base[len("ld.lld"):]
    if base.startswith("llvm-"):
        return "llvm" + base[base.rfind("-"):] if base[-1].isdigit() else "llvm"
    for t in TARGETS.values():
        if base.startswith(t.triplet + "-"):
            rest = base[len(t.triplet) + 1:]           # gcc, gcc-12, as, objdump
            if rest.startswith("gcc"):
                return f"{rest}-{t.triplet}"
            return f"binutils-{t.triplet}"
    if base in ("as", "ld", "objdump", "nm"):
        return "binutils"
    return base


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


@functools.cache
def tool_version(tool: str) -> str:
    """First line of `tool --version`, or '' when the tool is absent or silent."""
    path = shutil.which(tool)
    if path is None:
        return ""
    from flagbench import procs
    try:
        out = procs.run([path, "--version"], timeout=30)
    except OSError:
        return ""
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


def doctor_rows() -> list[dict]:
    """Per target: each tool, whether it is here, and what to install when not."""
    rows = []
    for t in TARGETS.values():
        tools = {
            "gcc": t.gcc,
            "clang": CLANG if t.clang else None,
            "objdump": t.objdump,
            "runner": t.qemu if t.qemu else ("native" if t.runnable else None),
        }
        if t.default_compiler == "clang":    # no gcc: clang links with lld
            tools["linker"] = LLD
        present = {k: (v is None or v == "native" or have(v)) for k, v in tools.items()}
        missing = [p for p in t.packages if not _package_tools_present(t, p)]
        rows.append({
            "target": t.name,
            "tools": tools,
            "present": present,
            "install": sorted(set(missing)),
        })
    return rows


def _package_tools_present(t: Target, package: str) -> bool:
    """Whether the tool a package stands for is here (checked by executable, not dpkg)."""
    probe = {
        "qemu-user": t.qemu or "qemu-aarch64",
        "clang-19": CLANG, "lld-19": LLD, "llvm-19": LLVM_OBJDUMP,
        "gcc": "gcc", "binutils": "objdump", "valgrind": "valgrind",
    }.get(package)
    if probe is None and package.startswith("gcc-"):
        probe = t.gcc
    if probe is None:  # libc6-dev-*-cross: look for its crt1.o
        import os
        return os.path.exists(f"/usr/{t.triplet}/lib/crt1.o")
    return have(probe)
