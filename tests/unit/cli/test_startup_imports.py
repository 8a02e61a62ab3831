"""What ``statectl --help`` and ``statectl --version`` may import (python -X importtime of a real process):
scripts and shells call them on their hot start path, so a command's module, the settings machinery and
the heavy dependencies (boto3, kafka-python, rocksdict, pyspark, pyarrow...) load only for the commands
that use them (cli.registry, cli.entry). What the interpreter imports for ``python -c pass`` in the same
environment (site, the editable install's finder) does not count."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from statectl.cli.registry import COMMANDS

# The statectl modules the root help needs: the entry, the root group and its registry of commands, the
# global options, the errors' exit codes.
HELP_MODULES = {"statectl", "statectl.cli", "statectl.cli.entry", "statectl.cli.main", "statectl.cli.base",
                "statectl.cli.registry", "statectl.errors"}
VERSION_MODULES = {"statectl", "statectl.cli", "statectl.cli.entry", "statectl.cli.base", "statectl.errors",
                   "statectl.engine", "statectl.engine.version"}
# Third-party packages (top-level names) --help may import: typer, which vendors click, and typer's own.
HELP_THIRD_PARTY = {"typer", "shellingham", "annotated_doc"}
NEVER = {"boto3", "botocore", "urllib3", "kafka", "rocksdict", "pyspark", "pyarrow", "isal", "rich", "click",
         "numpy", "pandas"}


def _imported(*args: str) -> set[str]:
    """The modules a ``python -X importtime`` run of ``args`` imported, as importtime names them."""
    out = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return {m.group(1) for line in out.stderr.splitlines()
            if (m := re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", line))}


@pytest.fixture(scope="module")
def baseline() -> set[str]:
    return _imported("-c", "pass")


# The standard library's probes for Jython (copy, pickle: "from org.python.core import ..."), which importtime
# lists although they fail.
PROBES = {"org"}


def _third_party(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules if m.split(".")[0] not in sys.stdlib_module_names | PROBES
            and not m.startswith(("statectl", "_"))}


@pytest.mark.parametrize("args, allowed", [(["--help"], HELP_MODULES), (["-h"], HELP_MODULES),
                                           (["--version"], VERSION_MODULES)], ids=["--help", "-h", "--version"])
def test_the_hot_start_path_imports_only_what_it_needs(baseline: set[str], args: list[str], allowed: set[str]):
    modules = _imported("-m", "statectl", *args) - baseline
    ours = {m for m in modules if m == "statectl" or m.startswith("statectl.")}
    assert ours <= allowed, f"statectl {' '.join(args)} imports {sorted(ours - allowed)}"
    third = _third_party(modules)
    assert not third & NEVER, f"statectl {' '.join(args)} imports {sorted(third & NEVER)}"
    may = HELP_THIRD_PARTY if allowed is HELP_MODULES else set()
    assert third <= may, f"statectl {' '.join(args)} imports third-party {sorted(third - may)}"


def test_a_command_loads_its_own_module_and_no_other_command(baseline: set[str]):
    modules = _imported("-m", "statectl", "diff", "--help") - baseline
    commands = {f"statectl.cli.{spec.module}" for spec in COMMANDS.values()}
    assert commands & modules == {"statectl.cli.diff"}
    assert not _third_party(modules) & NEVER
