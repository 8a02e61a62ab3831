"""What ``statectl --help``, ``statectl --version`` and a small restore may import (python -X importtime of a
real process): scripts and shells call the first two on their hot start path, so a command's module, the
settings machinery and the heavy dependencies (boto3, kafka-python, rocksdict, pyspark, pyarrow...) load
only for the commands that use them (cli.registry, cli.entry); a restore from ``file://`` loads the
modules of its own path and nothing it does not use. What the interpreter imports for ``python -c pass``
in the same environment (site, the editable install's finder) does not count."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
# A restore from file:// of the latest snapshot into an empty dir: the command, the settings, the catalog and
# its reader pin, the staged swap, the download and its CRC (isal).
RESTORE_MODULES = HELP_MODULES | {
    "statectl.blobstore", "statectl.blobstore.base", "statectl.blobstore.local", "statectl.blobstore.retry",
    "statectl.blobstore.stats", "statectl.catalog", "statectl.catalog.index", "statectl.catalog.lease",
    "statectl.catalog.pins", "statectl.catalog.records", "statectl.catalog.refs", "statectl.catalog.resolve",
    "statectl.cli.common", "statectl.cli.hints", "statectl.cli.progress", "statectl.cli.restore", "statectl.config",
    "statectl.defaults", "statectl.engine", "statectl.engine.restore", "statectl.failpoints", "statectl.formats",
    "statectl.formats.checkpoint_id", "statectl.formats.jackson", "statectl.formats.java", "statectl.fsutil",
    "statectl.kafka", "statectl.kafka.settings", "statectl.local", "statectl.local.layout", "statectl.local.staged",
    "statectl.parallel", "statectl.progress", "statectl.ratelimit", "statectl.redact", "statectl.rocks",
    "statectl.rocks.store", "statectl.session", "statectl.snapshot", "statectl.snapshot.crc",
    "statectl.snapshot.diff", "statectl.snapshot.model", "statectl.transfer", "statectl.transfer.download",
    "statectl.transfer.sink", "statectl.transfer.verify"}
# The standard library a restore from file:// has no use for: its pin names the host from os.uname, retries
# draw their jitter only when they retry, and only a swap over an existing store calls renameat2.
RESTORE_NEVER_STDLIB = {"socket", "ssl", "random", "ctypes", "http", "email", "asyncio", "sqlite3", "xml"}
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


@pytest.fixture(scope="module")
def tiny_blobstore(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file:// blob store holding one snapshot of a 100-key store (job j, store s)."""
    work = tmp_path_factory.mktemp("tiny")
    store = work / "state" / "s" / "Partition_0"
    subprocess.run([sys.executable, "-m", "tests.tools.genstore", str(store), "--keys", "100"], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([sys.executable, "-m", "statectl", "-q", "backup", "--store-dir", str(store), "--blobstore",
                    f"file://{work / 'bs'}", "--create", "--job", "j", "--store", "s"], check=True, capture_output=True,
                   timeout=120)
    return work


def test_a_small_restore_imports_only_its_own_path(baseline: set[str], tiny_blobstore: Path):
    target = tiny_blobstore / "restored"
    modules = _imported("-m", "statectl", "-q", "restore", "--blobstore", f"file://{tiny_blobstore / 'bs'}", "--job",
                        "j", "--store", "s", "--store-dir", str(tiny_blobstore / "none" / "Partition_0"),
                        "--target-dir", str(target)) - baseline
    assert (target / "CURRENT").is_file()
    ours = {m for m in modules if m == "statectl" or m.startswith("statectl.")}
    assert ours <= RESTORE_MODULES, f"a restore imports {sorted(ours - RESTORE_MODULES)}"
    third = _third_party(modules)
    assert third <= HELP_THIRD_PARTY | {"isal"}, f"a restore imports third-party {sorted(third - HELP_THIRD_PARTY)}"
    stdlib = {m.split(".")[0] for m in modules} & RESTORE_NEVER_STDLIB
    assert not stdlib, f"a restore imports {sorted(stdlib)}"
