"""The Java and pyspark probe (statectl doctor's ``java`` and ``spark`` checks): Java's version strings, and
the verdicts for a missing, broken or present java. The real run is in tests/integration/test_doctor.py."""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path

import pytest

from statectl.spark.probe import JDK_HINT, NAMES, java_binary, java_major, probe

PYSPARK = importlib.util.find_spec("pyspark") is not None


@pytest.mark.parametrize("version, major", [("17.0.15", 17), ("1.8.0_392", 8), ("21", 21), ("11.0.2-ea", 11),
                                            ("x", None)])
def test_java_major(version: str, major):
    assert java_major(version) == major


def fake_java(home: Path, script: str) -> Path:
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n" + script)
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java


def test_java_home_wins_over_path(tmp_path: Path, monkeypatch):
    java = fake_java(tmp_path / "jdk", "exit 0\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert java_binary() == (str(java), f"JAVA_HOME={tmp_path / 'jdk'}")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert java_binary() == (None, f"JAVA_HOME={tmp_path / 'nowhere'}")


def test_a_java_that_prints_its_version_is_ok(tmp_path: Path, monkeypatch):
    java = fake_java(tmp_path / "jdk", 'echo \'openjdk version "17.0.15" 2025-04-15\' >&2\n')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    checks = probe()
    assert [c.name for c in checks] == list(NAMES) == ["java", "spark"]
    assert (checks[0].status, checks[0].detail) == ("ok", f"java 17.0.15 ({java})")


def test_a_broken_java_is_skipped_without_pyspark_and_fails_with_it(tmp_path: Path, monkeypatch):
    java = fake_java(tmp_path / "jdk", "echo 'Error: could not find libjvm.so' >&2\nexit 1\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    java_check, spark_check = probe()
    needed = "" if PYSPARK else " (only the Spark jobs need it)"
    assert java_check.status == ("fail" if PYSPARK else "skip")
    assert java_check.detail == f"{java} -version failed (exit 1): Error: could not find libjvm.so{needed}"
    assert java_check.hint == JDK_HINT
    if PYSPARK:
        assert spark_check.status == "fail" and "Java is not usable" in spark_check.detail
    else:
        assert (spark_check.status, spark_check.detail) == ("skip", "pyspark is not installed")


def test_no_java_at_all(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    java_check, _ = probe()
    assert java_check.detail.startswith("no java on PATH")
    assert os.environ["PATH"] == str(tmp_path)


@pytest.mark.skipif(not PYSPARK, reason="a build needs pyspark's spark-submit")
def test_a_build_runs_no_java_before_spark_submit_and_an_old_java_is_exit_13(tmp_path: Path, monkeypatch):
    """A build starts spark-submit without a `java -version` first (a JVM's start of its own); when the build
    fails, that check says why: here a Java 11, which pyspark 4 cannot run on (exit 13, the JDK hint)."""
    from statectl.errors import MissingDependencyError
    from statectl.formats.adstore import KeyValueSpec
    from statectl.spark.submit import BuildSpec, run_build

    calls = tmp_path / "calls"
    fake_java(tmp_path / "jdk", f'echo "$@" >> {calls}\n[ "$1" = -version ] || exit 1\n'
                                "echo 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "d.jsonl").write_text('{"id": "a"}\n')
    spec = BuildSpec("files", KeyValueSpec(key_column="id"), path=str(tmp_path / "d.jsonl"), fmt="jsonl")
    with pytest.raises(MissingDependencyError) as err:
        run_build(spec, tmp_path / "out", master="local[1]", timeout_s=60)
    assert "needs Java 17 or newer; the java found is 11.0.2" in str(err.value) and err.value.hint == JDK_HINT
    ran = calls.read_text().splitlines()
    assert "org.apache.spark.launcher.Main" in ran[0] and ran[1:] == ["-version"], ran
