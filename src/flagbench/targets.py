"""One object per architecture flagbench builds for (virtme-ng's architectures.py idea): every
fact about a target lives on its `Target`, and the stages ask it instead of keeping their own
tables keyed by target name. `TARGETS` holds the seven; `get_target(name)` finds one,
`target_of(uname_m)` the one whose programs a machine runs, `target_for_elf` the one an ELF
header belongs to.

    compilers     gcc driver, clang, base cflags, link recipe, runtime     (build.py)
    objdump       the disassembler that knows it                           (asm/disasm.py)
    qemu-user     runner and -cpu for exact counts                         (run/executors.py)
    uname -m      the machine names whose programs it builds               (run/places.py, hosts/)
    ELF           e_machine and class                                      (elf/)
    Kbuild        ARCH, SRCARCH, image paths, implied options              (kbuild/build.py)
    boot          the qemu-system recipe (machine, console, image, markers) (run/guest/boot.py)
    instructions  its asm/isa.py family, comment char, padding bytes       (asm/)

What is installed is not decided here: toolchains.py probes tools and versions.
"""
from __future__ import annotations

from flagbench.elf.constants import EM_AARCH64, EM_ARM, EM_LOONGARCH, EM_PARISC, EM_RISCV, EM_X86_64
from flagbench.record import frozen

CLANG = "clang-19"
HOST_TRIPLET = "x86_64-linux-gnu"
LLD = "ld.lld-19"
LLVM_OBJDUMP = "llvm-objdump-19"

# qemu 7.2 runs SVE's predicated loads/stores in helpers the plugin API cannot see, and
# static glibc picks __memcpy_sve on the default `-cpu max`: its copies would count as
# zero stores. Without SVE glibc uses __memcpy_generic, whose accesses are all seen.
AARCH64_QEMU_CPU = ("-cpu", "max,sve=off")


@frozen
class Kbuild:
    arch: str                      # make ARCH=
    srcarch: str                   # arch/SRCARCH/ in the tree
    images: tuple[str, ...]        # the boot image, relative to O= (the first that exists)
    implied: tuple[tuple[str, str], ...] = ()   # what the target name means that a base config may not


@frozen
class Boot:
    """A qemu-system machine for the target's kernel (run/guest/boot.py boots it)."""
    name: str                      # the target's name
    qemu: str                      # qemu-system-...
    machine: tuple[str, ...]       # -M/-cpu/firmware arguments
    console: str                   # the guest's console device (console=...)
    image: str                     # which build output to pass to -kernel: "vmlinux" or "image"
    kernel_base: int               # addresses >= this are the kernel's
    marker_start: str = ""         # hex bytes of the start marker instruction ("" = not measurable)
    marker_stop: str = ""
    cross: str = ""                # gcc prefix for the static guest programs
    memory: str = "256M"
    why_not: str = ""              # set when this target cannot boot-and-measure here
    verified: bool = False         # booted and measured on this project's machine kind


@frozen
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
    qemu_cpu: tuple[str, ...] = ()          # qemu-user's -cpu for exact counts (see AARCH64_QEMU_CPU)
    uname: tuple[str, ...] = ()             # what `uname -m` says on a machine that runs its programs
    elf_machine: int = 0                    # e_machine of its objects
    elf64: bool | None = None               # the ELF class, where e_machine alone is ambiguous (PA-RISC)
    kbuild: Kbuild | None = None            # how Kbuild builds its kernel; None: it has none here
    boot: Boot | None = None                # how qemu-system boots that kernel; None: no recipe
    isa: str = ""                           # its instruction tables in asm/isa.py (a family: hppa64 is "hppa")
    asm_comment: str = ""                   # where objdump's comment starts on a disassembled line
    paired_calls: bool = False              # calls through a register pair (auipc+jalr): sliced as one
    nop_words: tuple[bytes, ...] = ()       # 4-byte padding (NOPs) in file byte order
    nop_halves: tuple[bytes, ...] = ()      # 2-byte padding granules (Thumb, RVC)
    fill: bytes = b""                       # byte fills that are padding whatever their length
    multibyte_nops: bool = False            # padding is NOPs of any length (x86), not fixed granules
    thumb_bit: bool = False                 # code symbols' values carry the Thumb bit (bit 0)
    veneer_groups: bool = False             # the linker puts veneer groups between functions, a branch over them
    value_named_stubs: bool = False         # long-branch stubs are named by the value they reach (PA-RISC)
    stale_target_comments: bool = False     # objdump's `# <target>` in objects is a guess from earlier state

    @property
    def cross(self) -> str:
        """The binutils/gcc prefix of its tools ("" on this machine's own target)."""
        return "" if self.triplet == HOST_TRIPLET else self.triplet + "-"

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


_X86_BOOT = Boot("x86_64", "qemu-system-x86_64", ("-M", "pc", "-cpu", "qemu64"), "ttyS0", "vmlinux",
                 0xFFFF800000000000, "0f1f8001004246", "0f1f8002004246", verified=True)

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("x86_64", "x86_64-linux-gnu", "gcc", True, "objdump", None, True,
           ("gcc", "binutils", "valgrind"),
           uname=("x86_64", "amd64"), elf_machine=EM_X86_64,
           kbuild=Kbuild("x86_64", "x86", ("arch/x86/boot/bzImage",), (("CONFIG_64BIT", "y"),)),
           boot=_X86_BOOT, isa="x86", asm_comment="#", fill=b"\xcc\x90\x00", multibyte_nops=True),
    Target("aarch64", "aarch64-linux-gnu", "aarch64-linux-gnu-gcc", True,
           "aarch64-linux-gnu-objdump", "qemu-aarch64", True,
           ("gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "qemu-user"),
           qemu_cpu=AARCH64_QEMU_CPU, uname=("aarch64", "arm64"), elf_machine=EM_AARCH64,
           kbuild=Kbuild("arm64", "arm64", ("arch/arm64/boot/Image",)),
           boot=Boot("aarch64", "qemu-system-aarch64", ("-M", "virt", "-cpu", "cortex-a57"), "ttyAMA0", "image",
                     0x8000000000000000, "5f2e03d5", "7f2e03d5", "aarch64-linux-gnu-", verified=True),
           isa="aarch64", asm_comment="//", nop_words=(b"\x1f\x20\x03\xd5",), veneer_groups=True),
    Target("arm", "arm-linux-gnueabihf", "arm-linux-gnueabihf-gcc", True,
           "arm-linux-gnueabihf-objdump", "qemu-arm", True,
           ("gcc-arm-linux-gnueabihf", "libc6-dev-armhf-cross", "qemu-user"),
           uname=("armv7l", "armv8l", "armv6l"), elf_machine=EM_ARM,
           kbuild=Kbuild("arm", "arm", ("arch/arm/boot/zImage",)),
           boot=Boot("arm", "qemu-system-arm", ("-M", "virt"), "ttyAMA0", "image", 0xC0000000,
                     "aff37280", "aff37380", "arm-linux-gnueabihf-"),      # Thumb-2 guest programs
           isa="arm", asm_comment="@", thumb_bit=True, veneer_groups=True,
           # thumb nop / mov r8,r8, arm nop halves
           nop_halves=(b"\x00\xbf", b"\xc0\x46", b"\x00\xf0", b"\x20\xe3", b"\x00\x00", b"\xa0\xe1")),
    Target("riscv64", "riscv64-linux-gnu", "riscv64-linux-gnu-gcc", True,
           "riscv64-linux-gnu-objdump", "qemu-riscv64", True,
           ("gcc-riscv64-linux-gnu", "libc6-dev-riscv64-cross", "qemu-user"),
           uname=("riscv64",), elf_machine=EM_RISCV,
           kbuild=Kbuild("riscv", "riscv", ("arch/riscv/boot/Image",)),
           boot=Boot("riscv64", "qemu-system-riscv64", ("-M", "virt", "-bios", "default"), "ttyS0", "image",
                     0x8000000000000000, "13001000", "13002000", "riscv64-linux-gnu-"),
           isa="riscv64", asm_comment="#", paired_calls=True, nop_halves=(b"\x01\x00", b"\x13\x00"),
           stale_target_comments=True),  # c.nop, nop halves
    Target("loongarch64", "loongarch64-linux-gnu", None, True, LLVM_OBJDUMP,
           "qemu-loongarch64", False, ("clang-19", "lld-19", "llvm-19", "qemu-user"),
           default_compiler="clang", base_cflags=("-mno-lsx",),
           uname=("loongarch64",), elf_machine=EM_LOONGARCH,
           kbuild=Kbuild("loongarch", "loongarch", ("arch/loongarch/boot/vmlinux.efi",
                                                    "arch/loongarch/boot/vmlinux.elf")),
           isa="loongarch64", asm_comment="#", paired_calls=True, nop_words=(b"\x00\x00\x40\x03",)),
    Target("hppa", "hppa-linux-gnu", "hppa-linux-gnu-gcc", False,
           "hppa-linux-gnu-objdump", "qemu-hppa", True,
           ("gcc-hppa-linux-gnu", "libc6-dev-hppa-cross", "qemu-user"),
           uname=("parisc", "parisc64"), elf_machine=EM_PARISC, elf64=False,
           kbuild=Kbuild("parisc", "parisc", ("arch/parisc/boot/bzImage",)),
           boot=Boot("hppa", "qemu-system-hppa", ("-M", "B160L"), "ttyS0", "vmlinux", 0xC0000000,
                     "34000002", "34000004", "hppa-linux-gnu-", memory="1G",
                     why_not="qemu 7.2 has only the 32-bit B160L, and PA-RISC keeps user and kernel in "
                             "separate address spaces (space registers): an address cannot tell them apart"),
           isa="hppa", nop_words=(b"\x08\x00\x02\x40",), value_named_stubs=True),
    Target("hppa64", "hppa64-linux-gnu", "hppa64-linux-gnu-gcc", False,
           "hppa64-linux-gnu-objdump", None, False, ("gcc-hppa64-linux-gnu",),
           runnable=False, elf_machine=EM_PARISC, elf64=True,
           kbuild=Kbuild("parisc64", "parisc", ("arch/parisc/boot/bzImage",)),
           isa="hppa", nop_words=(b"\x08\x00\x02\x40",), value_named_stubs=True),
)}
HOST = TARGETS["x86_64"]          # the target flagbench's own machine runs: native time, callgrind


def get_target(name: "str | Target") -> Target:
    """The Target named NAME (a Target is returned as it is); LookupError naming the known ones."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except KeyError:
        raise LookupError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None


def target_of(machine: str) -> str | None:
    """The target whose static programs run on a `uname -m` machine (None: none of ours)."""
    return next((t.name for t in TARGETS.values() if machine in t.uname), None)


def target_for_elf(e_machine: int, is64: bool) -> str | None:
    """The target name an ELF header (machine, class) belongs to, or None."""
    return next((t.name for t in TARGETS.values()
                 if t.elf_machine == e_machine and t.elf64 in (None, is64)), None)
