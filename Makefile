# The README's two commands: `make demo` and `make test`. Both install what is
# missing (Debian packages, a venv with the pinned Python dependencies) first.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin

.PHONY: demo test deps venv clean

demo: deps venv
	$(BIN)/flagbench demo

test: deps venv
	$(BIN)/python -m pytest -n 2 -q

deps:
	@scripts/install-deps

venv: $(VENV)/.installed

# setup.py builds the one C extension (src/flagbench/elf/_symtab.c, _summary.c): a change to it re-installs.
$(VENV)/.installed: pyproject.toml setup.py src/flagbench/elf/_symtab.c src/flagbench/elf/_summary.c src/flagbench/elf/_summary.h
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) .cache flagbench.db out
