"""The one compiled part of flagbench: elf/_symtab.c, the per-entry loops of the ELF symbol
reader (why it is C: the file's header comment). Everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("flagbench.elf._symtab", ["src/flagbench/elf/_symtab.c"],
                             extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"])])
