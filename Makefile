# The README's two commands: `make demo` and `make test`. Both install what is
# missing (Debian packages, a venv with the pinned Python dependencies) first.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin

.PHONY: demo test check deps venv clean

demo: deps venv
	$(BIN)/flagbench demo

# Everything: kernel builds, qemu boots, the ssh and kexec test boxes, the browser. Tests of one
# module go to one xdist worker (--dist loadfile), so a module's shared kernel builds once.
test: deps venv
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q --durations=25

# The fast loop while editing: everything but the tests marked slow (under two minutes here).
check: deps venv
	$(BIN)/python -m pytest -n 2 -q -m "not slow"

deps:
	@scripts/install-deps

venv: $(VENV)/.installed

# setup.py builds the C extensions (every _*.c and _*.h of src/flagbench/elf and asm), and pip
# writes bin/flagbench's first line for the venv: a change to one re-installs.
EXTENSION_SOURCES = $(wildcard src/flagbench/elf/_*.[ch] src/flagbench/asm/_*.[ch])
$(VENV)/.installed: Makefile pyproject.toml setup.py bin/flagbench $(EXTENSION_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,lab]'
	@# setuptools only builds flagbench, in pip's own isolated environment; left in the venv (3.11's
	@# venv puts it there), its distutils-precedence.pth imports a module at every Python start:
	@# 3 % of `flagbench size`'s main thread on a tinyconfig pair (callgrind, docs/figures.md).
	$(BIN)/pip uninstall -q -y setuptools
	touch $@

clean:
	rm -rf $(VENV) .cache flagbench.db out
