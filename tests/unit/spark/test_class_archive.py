"""statectl.spark.launch.ClassArchive without a JVM: which option a build's driver gets, what becomes of a
recorded archive, and submit_job's second run without one the JVM died on (a stand-in spark-submit). (A real
JVM records, maps and dies of a cut archive in tests/integration/test_spark_build.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from statectl.errors import StatectlError
from statectl.spark.launch import ClassArchive, submit_job

OPTS = "spark.driver.extraJavaOptions"


@pytest.fixture
def submit(tmp_path: Path, monkeypatch) -> Path:
    """A pyspark install's layout (bin/spark-submit beside jars/) and an empty cache dir."""
    (tmp_path / "pyspark" / "jars").mkdir(parents=True)
    (tmp_path / "pyspark" / "jars" / "spark-core.jar").write_bytes(b"jar")
    (tmp_path / "pyspark" / "bin").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "pyspark" / "bin" / "spark-submit"


def _recorded(a: ClassArchive, data: bytes = b"archive") -> None:
    """What the JVM does with -XX:ArchiveClassesAtExit at its exit."""
    assert a.recording is not None
    a.recording.write_bytes(data)


def test_the_first_build_records_and_the_next_maps_it(submit):
    first = ClassArchive(submit, {})
    assert first.recording is not None and first.path is not None
    assert first.conf({OPTS: "-Dx=1", "a": "b"}) == {OPTS: f"-XX:ArchiveClassesAtExit={first.recording} -Dx=1",
                                                      "a": "b"}
    _recorded(first)
    first.keep()
    assert first.path.read_bytes() == b"archive" and first.path.with_suffix(".size").read_text() == "7\n"
    assert not first.recording.exists()
    second = ClassArchive(submit, {})
    assert second.recording is None and second.path == first.path
    assert second.conf({}) == {OPTS: f"-XX:SharedArchiveFile={first.path}"}


def test_an_archive_of_another_size_than_recorded_is_recorded_again(submit):
    first = ClassArchive(submit, {})
    _recorded(first)
    first.keep()
    with open(first.path, "ab") as fh:  # or cut: the JVM would die of SIGBUS mapping a cut one
        fh.write(b"x")
    again = ClassArchive(submit, {})
    assert again.recording is not None and "ArchiveClassesAtExit" in again.conf({})[OPTS]
    again.discard()
    first.path.with_suffix(".size").unlink()
    assert ClassArchive(submit, {}).recording is not None, "no size: not used"


def test_a_failed_build_keeps_nothing_and_drop_forgets_the_archive(submit):
    failed = ClassArchive(submit, {})
    _recorded(failed, b"cut")
    failed.discard()
    assert not failed.recording.exists() and not failed.path.exists()
    ok = ClassArchive(submit, {})
    _recorded(ok)
    ok.keep()
    used = ClassArchive(submit, {})
    used.drop()
    assert not used.path.exists() and not used.path.with_suffix(".size").exists()
    assert ClassArchive(submit, {}).recording is not None


@pytest.mark.parametrize("opts", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/a"])
def test_the_users_own_sharing_options_turn_it_off(submit, opts):
    a = ClassArchive(submit, {OPTS: opts})
    assert a.path is None and a.recording is None and a.conf({OPTS: opts}) == {OPTS: opts}
    assert not (submit.parents[2] / "cache").exists()


def test_an_unwritable_cache_turns_it_off(submit, monkeypatch, tmp_path):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    a = ClassArchive(submit, {})
    assert a.path is None and a.conf({}) == {}


def test_another_install_has_its_own_archive(submit):
    first = ClassArchive(submit, {})
    (submit.parents[1] / "jars" / "spark-sql.jar").write_bytes(b"jar")
    assert ClassArchive(submit, {}).path != first.path


def test_a_recording_left_by_a_killed_statectl_is_removed(submit):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    first = ClassArchive(submit, {})
    base, name = first.path.parent, first.path.stem
    orphan = base / f".{name}.{int(gone.stdout)}.1.jsa"
    alive = base / f".{name}.{os.getpid()}.2.jsa"
    orphan.write_bytes(b"cut")
    alive.write_bytes(b"recording")
    ClassArchive(submit, {})
    assert not orphan.exists() and alive.exists()


def test_a_build_started_while_another_records_uses_none(submit):
    """Two builds at once on a machine without the archive: the first records it, the second uses none (a
    second recording would cost as much again); once the first's is kept, the next build maps it."""
    first = ClassArchive(submit, {})
    assert first.recording is not None and first.recording.exists(), "claimed as it starts"
    second = ClassArchive(submit, {})
    assert second.path is None and second.recording is None and second.conf({"a": "b"}) == {"a": "b"}
    _recorded(first)
    first.keep()
    assert ClassArchive(submit, {}).conf({}) == {OPTS: f"-XX:SharedArchiveFile={first.path}"}
    stale = ClassArchive(submit, {})  # a claim of a day ago: its pid may be another process's by now
    stale.drop()
    claim = ClassArchive(submit, {}).recording
    os.utime(claim, (0, 0))
    assert ClassArchive(submit, {}).recording is not None and not claim.exists()


def test_a_local_driver_compiles_less_and_the_users_options_come_last(tmp_path: Path):
    """A local build's driver JVM gets the JIT thresholds of a short-lived JVM, before the archive's option and
    the user's own (the JVM takes the last of an option); a cluster's driver gets none of them."""
    from statectl.spark.launch import spark_command

    def opts(master: str, conf: dict[str, str]) -> str | None:
        cmd = spark_command(tmp_path / "spark-submit", tmp_path / "job.json", master, conf)
        found = [a.split("=", 1)[1] for a in cmd if a.startswith(f"{OPTS}=")]
        return found[-1] if found else None

    local = opts("local[2]", {OPTS: "-XX:SharedArchiveFile=/a.jsa -XX:Tier4InvocationThreshold=7"})
    assert local.startswith("-XX:Tier4InvocationThreshold=40000 ") and "-XX:Tier4BackEdgeThreshold=300000" in local
    assert local.endswith(" -XX:SharedArchiveFile=/a.jsa -XX:Tier4InvocationThreshold=7")
    assert opts("local[*]", {}).startswith("-XX:Tier4InvocationThreshold=40000")
    assert opts("yarn", {OPTS: "-Dx=1"}) == "-Dx=1" and opts("spark://h:7077", {}) is None


def _stand_in(submit: Path, fatal: bool) -> Path:
    """``submit`` as a spark-submit that writes its arguments to ``runs`` (one line a run) and exits 0; given
    an archive to map, it dies instead, as the JVM does on a cut one (its fatal-error banner, then SIGBUS), or
    (not ``fatal``) exits 1 as a failed job does."""
    runs = submit.parents[2] / "runs"
    die = 'echo "# A fatal error has been detected by the Java Runtime Environment:"; kill -BUS $$' if fatal \
        else "echo 'STATECTL-BUILD-ERROR: the job failed'; exit 1"
    submit.write_text(f'#!/bin/sh\necho "$*" >> {runs}\ncase "$*" in *SharedArchiveFile=*) {die};; esac\n')
    submit.chmod(0o755)
    return runs


def _submit(submit: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir(exist_ok=True)
    submit_job(submit, tmp_path / "job.json", tmp_path / "out" / "spark-submit.log", "local[2]", {}, None, {})


def test_a_jvm_that_dies_on_the_archive_costs_a_second_run_without_it(submit, tmp_path):
    """A JVM that dies of a fatal error mapping the archive: the build is run once more, without it (and
    succeeds), and the archive is forgotten, so that the next build records a new one."""
    kept = ClassArchive(submit, {})
    _recorded(kept)
    kept.keep()
    runs = _stand_in(submit, fatal=True)
    _submit(submit, tmp_path)
    first, second = runs.read_text().splitlines()
    assert f"-XX:SharedArchiveFile={kept.path}" in first and "SharedArchive" not in second
    assert not kept.path.exists() and not kept.path.with_suffix(".size").exists()
    assert ClassArchive(submit, {}).recording is not None


def test_a_job_that_fails_mapping_the_archive_is_not_run_again(submit, tmp_path):
    """A failure that is not the JVM's fatal error is the job's: no second run, and the archive stays."""
    kept = ClassArchive(submit, {})
    _recorded(kept)
    kept.keep()
    runs = _stand_in(submit, fatal=False)
    with pytest.raises(StatectlError, match="the job failed"):
        _submit(submit, tmp_path)
    assert len(runs.read_text().splitlines()) == 1 and kept.path.exists()
