"""Which compiler, disassembler and runner to use for each target.

One table, `TARGETS`, says it for the seven architectures; the functions below
resolve it against what is installed. Tool versions are recorded with every
build and measurement, so they are read once per process and cached.
"""
from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass

CLANG = "clang-19"
HOST_TRIPLET = "x86_64-linux-gnu"
LLD = "ld.lld-19"
LLVM_OBJDUMP = "llvm-objdump-19"


@dataclass(frozen=True)
class Target:
    name: str
    triplet: str
    gcc: str | None          # gcc driver for this target, None when Debian has none
    clang: bool              # clang-19 can compile for it
    objdump: str             # the disassembler that knows the target
    qemu: str | None         # qemu-user runner; None: native (x86_64) or cannot run
    static_libc: bool        # a static glibc link works; False: freestanding _start
    packages: tuple[str, ...]  # Debian packages that provide the above
    runnable: bool = True
    default_compiler: str = "gcc"
    # Flags every build for this target gets; qemu 7.2 has no LoongArch LSX (SIGILL).
    base_cflags: tuple[str, ...] = ()

    def compiler_argv(self, compiler: str) -> list[str]:
        """The argv prefix that invokes `compiler` ("gcc", "clang", or a path) for this target."""
        problem = self.compiler_problem(compiler)
        if problem:
            raise LookupError(problem)
        if compiler in ("gcc", "cc"):
            return [self.gcc]
        if compiler in ("clang", CLANG):
            return [CLANG, f"--target={self.triplet}"]
        if is_clang(compiler):  # another clang: one driver, every target
            return [compiler, f"--target={self.triplet}"]
        return [compiler]  # an explicit driver such as gcc-12 or a cross gcc path

    def compiler_problem(self, compiler: str) -> str | None:
        """Why `compiler` cannot build for this target, or None when it can.

        Decided from names alone (nothing is run): a gcc driver compiles for one
        target, its triplet prefix ("aarch64-linux-gnu-gcc-12") or the host.
        >>> TARGETS["hppa"].compiler_problem("clang")
        'clang has no hppa backend'
        >>> TARGETS["aarch64"].compiler_problem("gcc-12")
        'gcc-12 compiles for x86_64 only'
        >>> TARGETS["aarch64"].compiler_problem("aarch64-linux-gnu-gcc-12") is None
        True
        """
        if compiler in ("gcc", "cc"):
            return None if self.gcc else f"no gcc for {self.name} in Debian; use clang"
        if is_clang(compiler):
            return None if self.clang else f"clang has no {self.name} backend"
        base = compiler.rsplit("/", 1)[-1]
        prefix = next((t.triplet for t in TARGETS.values() if base.startswith(t.triplet + "-")), None)
        own = prefix or HOST_TRIPLET
        if own == self.triplet:
            return None
        return f"{compiler} compiles for {next(t.name for t in TARGETS.values() if t.triplet == own)} only"

    def extra_cflags(self, compiler: str) -> list[str]:
        """Flags every compile for this target gets: base flags, and for clang on a
        target without a C library its own headers only (the host's glibc headers
        would be found otherwise and fail)."""
        flags = list(self.base_cflags)
        if not self.static_libc and is_clang(compiler):
            flags.append("-nostdlibinc")
        return flags

    def link_flags(self, compiler: str) -> list[str]:
        """How to link a static executable: glibc -static, or no libc at all (the
        freestanding runtime brings _start); clang uses lld for every target."""
        if not self.runnable:
            raise LookupError(f"{self.name}: objects only (no C library or runner in Debian)")
        flags = ["-static"] if self.static_libc else ["-nostdlib", "-static"]
        if is_clang(compiler):
            flags.append("-fuse-ld=lld")
        return flags

    @property
    def runtime_source(self) -> str:
        """The harness runtime file (in flagbench/harness) this target links with."""
        return "fbrt_libc.c" if self.static_libc else "fbrt_freestanding.c"

    def assembler(self, compiler: str) -> str | None:
        """The assembler gcc hands its output to (clang assembles itself)."""
        if is_clang(compiler):
            return None
        return "as" if self.triplet == HOST_TRIPLET else f"{self.triplet}-as"


def is_clang(compiler: str) -> bool:
    return compiler.rsplit("/", 1)[-1].startswith("clang")


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


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("x86_64", "x86_64-linux-gnu", "gcc", True, "objdump", None, True,
           ("gcc", "binutils", "valgrind")),
    Target("aarch64", "aarch64-linux-gnu", "aarch64-linux-gnu-gcc", True,
           "aarch64-linux-gnu-objdump", "qemu-aarch64", True,
           ("gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "qemu-user")),
    Target("arm", "arm-linux-gnueabihf", "arm-linux-gnueabihf-gcc", True,
           "arm-linux-gnueabihf-objdump", "qemu-arm", True,
           ("gcc-arm-linux-gnueabihf", "libc6-dev-armhf-cross", "qemu-user")),
    Target("riscv64", "riscv64-linux-gnu", "riscv64-linux-gnu-gcc", True,
           "riscv64-linux-gnu-objdump", "qemu-riscv64", True,
           ("gcc-riscv64-linux-gnu", "libc6-dev-riscv64-cross", "qemu-user")),
    Target("loongarch64", "loongarch64-linux-gnu", None, True, LLVM_OBJDUMP,
           "qemu-loongarch64", False, ("clang-19", "lld-19", "llvm-19", "qemu-user"),
           default_compiler="clang", base_cflags=("-mno-lsx",)),
    Target("hppa", "hppa-linux-gnu", "hppa-linux-gnu-gcc", False,
           "hppa-linux-gnu-objdump", "qemu-hppa", True,
           ("gcc-hppa-linux-gnu", "libc6-dev-hppa-cross", "qemu-user")),
    Target("hppa64", "hppa64-linux-gnu", "hppa64-linux-gnu-gcc", False,
           "hppa64-linux-gnu-objdump", None, False, ("gcc-hppa64-linux-gnu",),
           runnable=False),
)}

# `uname -m` -> the target whose static programs run there
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
            "armv7l": "arm", "armv8l": "arm", "armv6l": "arm", "riscv64": "riscv64",
            "loongarch64": "loongarch64", "parisc": "hppa", "parisc64": "hppa"}


def target_of(machine: str) -> str | None:
    """The target whose static programs run on a `uname -m` machine (None: none of ours)."""
    return MACHINES.get(machine)


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise LookupError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None


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
        if t.default_compiler == "clang" or t.name == "loongarch64":
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
