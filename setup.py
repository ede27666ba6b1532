"""The one compiled part of flagbench: elf/_symtab.c, the per-entry loops of the ELF symbol
reader, and elf/_summary.c, bloat-o-meter's table they fill (why they are C: _symtab.c's header
comment). Everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("flagbench.elf._symtab", ["src/flagbench/elf/_symtab.c", "src/flagbench/elf/_summary.c",
                                                      "src/flagbench/elf/_scan.c", "src/flagbench/elf/_holes.c"],
                             depends=["src/flagbench/elf/_summary.h", "src/flagbench/elf/_elf.h"],
                             extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"])])
