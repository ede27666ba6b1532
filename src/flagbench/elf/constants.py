"""ELF and `ar` constants (elf.h, ar.h), defined here once for every reader of ELF in flagbench.
Which target an ELF machine is belongs to the targets (targets.py: Target.elf_machine,
`target_for_elf`). This module imports nothing: `flagbench size` reads its symbols without the
targets' table, whose dataclasses were half of `size --format=bom`'s instructions on a vmlinux pair."""

EM_PARISC, EM_ARM, EM_X86_64, EM_AARCH64, EM_RISCV, EM_LOONGARCH = 15, 40, 62, 183, 243, 258

ELF_MAGIC = b"\x7fELF"
AR_MAGIC, THIN_MAGIC = b"!<arch>\n", b"!<thin>\n"
AR_HEADER = 60

ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_SYMTAB_SHNDX = 2, 3, 4, 8, 9, 18
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_MERGE, SHF_STRINGS = 0x1, 0x2, 0x4, 0x10, 0x20

STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_GNU_IFUNC = 0, 1, 2, 3, 4, 5, 10
STT_LOPROC, STT_HIPROC = 13, 15
STT_PROC = tuple(range(STT_LOPROC, STT_HIPROC + 1))   # processor-specific (hppa: 13, STT_PARISC_MILLI)
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10

SHN_UNDEF, SHN_LORESERVE, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF2, 0xFFFF
# Target-specific section indices BFD files under its common section (LCOMMON; ANSI/HUGE common).
COMMON_INDICES = {EM_X86_64: (0xFF02,), EM_PARISC: (0xFF00, 0xFF01)}

# struct formats without the byte-order character, by ELF class (is64)
SHDR_FORMAT = {False: "IIIIIIIIII", True: "IIQQQQIIQQ"}  # name type flags addr offset size link info align entsize
SHDR_SIZE = {False: 40, True: 64}
