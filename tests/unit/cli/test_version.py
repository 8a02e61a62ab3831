"""statectl version and --version: statectl's version and those of rocksdict and its RocksDB, pyspark and
Java, as found (the real ones: rocksdict, pyspark and a JDK are installed for the suite); --version reads
only package metadata and runs no java; one version in pyproject, the package and the changelog."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import tomli

import statectl
from statectl.cli.base import render_versions as render
from statectl.engine.version import Versions
from statectl.spark.probe import java_binary

ROOT = Path(__file__).resolve().parents[3]
STATECTL = str(Path(sys.executable).parent / "statectl")


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    r = subprocess.run([STATECTL, *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return r


def _java_version() -> str | None:
    java = java_binary()[0]
    if java is None:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    return re.search(r'version "([^"]+)"', out.stderr + out.stdout).group(1)


def test_version_names_statectl_rocksdb_pyspark_and_java():
    lines = _run("version").stdout.splitlines()
    assert lines[0] == f"statectl {statectl.__version__}"
    rocksdict = importlib.metadata.version("rocksdict")
    assert re.fullmatch(rf"rocksdict {re.escape(rocksdict)} \(RocksDB \d+\.\d+\.\d+\)", lines[2]), lines
    assert lines[3] == f"pyspark {importlib.metadata.version('pyspark')}"
    java = _java_version()
    assert lines[4] == (f"java {java} ({java_binary()[0]})" if java else "java not found")


def test_version_json_is_one_document_with_null_for_what_is_missing():
    doc = json.loads(_run("version", "-o", "json").stdout)
    assert doc["statectl"] == statectl.__version__ and doc["rocksdb"] and doc["java"] == _java_version()
    assert set(doc) == {"statectl", "python", "rocksdict", "rocksdb", "pyspark", "java", "java_path"}
    assert json.loads(_run("-o", "json", "version").stdout) == doc
    assert json.loads(_run("version", STATECTL_OUTPUT="json").stdout) == doc
    missing = json.loads(_run("version", "-o", "json", JAVA_HOME="/nonexistent").stdout)
    assert (missing["java"], missing["java_path"]) == (None, None)
    assert _run("version", JAVA_HOME="/nonexistent").stdout.splitlines()[-1] == "java not found"


def test_dash_dash_version_runs_no_java_and_opens_no_store(tmp_path):
    """A java that leaves a mark when it runs: `version` runs it, `--version` does not."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\necho 'openjdk version \"21.0.1\" 2023-10-17' >&2\n")
    java.chmod(0o755)
    lines = _run("--version", JAVA_HOME=str(home), TMPDIR=str(tmp_path)).stdout.splitlines()
    assert lines == [f"statectl {statectl.__version__}", f"python {lines[1].split()[1]}",
                     f"rocksdict {importlib.metadata.version('rocksdict')}",
                     f"pyspark {importlib.metadata.version('pyspark')}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jdk"]     # no java mark, no scratch store
    assert _run("version", JAVA_HOME=str(home)).stdout.splitlines()[-1] == f"java 21.0.1 ({java})"
    assert (tmp_path / "ran").exists()


def test_what_is_not_found_says_so():
    v = Versions(statectl="1.2.3", python="3.11.0", rocksdict=None, pyspark=None, java=None, java_path="/x/java")
    assert render(v, full=True).splitlines()[2:] == ["rocksdict not found", "pyspark not found",
                                                     "java not found (/x/java did not run)"]
    assert render(v, full=False).splitlines()[2:] == ["rocksdict not found", "pyspark not found"]


def test_one_version_in_pyproject_the_package_and_the_changelog():
    pyproject = tomli.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["version"] == statectl.__version__
    releases = re.findall(r"^## \[(\d[^\]]*)\] - (\d{4}-\d\d-\d\d)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert releases and releases[0][0] == statectl.__version__, "the newest release in CHANGELOG.md"


def test_the_license_is_an_spdx_expression():
    """A license table makes setuptools warn on every install; an SPDX string needs setuptools 77."""
    pyproject = tomli.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
