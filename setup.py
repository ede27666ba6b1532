"""The compiled parts of flagbench: elf/_symtab.c, the per-entry loops of the ELF symbol reader,
and elf/_summary.c, bloat-o-meter's table they fill (why they are C: _symtab.c's header
comment); asm/_normalise.c, the disassembly normaliser's common case, and asm/_mix.c, the
instruction mix of x86-64 code (why: their header comments). Everything else is in
pyproject.toml."""
from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(ext_modules=[Extension("flagbench.elf._symtab", ["src/flagbench/elf/_symtab.c", "src/flagbench/elf/_summary.c",
                                                      "src/flagbench/elf/_scan.c", "src/flagbench/elf/_holes.c",
                                                      "src/flagbench/elf/_module.c", "src/flagbench/elf/_rows.c",
                                                      "src/flagbench/elf/_scratch.c"],
                             depends=["src/flagbench/elf/_summary.h", "src/flagbench/elf/_elf.h"],
                             extra_compile_args=FLAGS),
                   Extension("flagbench.asm._normalise", ["src/flagbench/asm/_normalise.c"],
                             depends=["src/flagbench/asm/_padding.h"], extra_compile_args=FLAGS),
                   Extension("flagbench.asm._mix", ["src/flagbench/asm/_mix.c"], depends=["src/flagbench/asm/_padding.h"],
                             extra_compile_args=FLAGS)])
