"""engine.adstore.status.predict: StorageManagerUtil.isStaleStore and isOffsetFileValid on real dirs."""

from __future__ import annotations

import os
import time
from pathlib import Path

from statectl.engine.adstore.status import predict, record_side_inputs, recorded_side_inputs
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_offset_file, write_offsets, write_side_input_offsets

A0, A1 = SSP("kafka", "a", 0), SSP("kafka", "a", 1)
DAY = 24 * 3600


def test_keep_stale_mismatched(tmp_path: Path):
    d = tmp_path / "s"
    assert predict(d, {A0}).action == "create"
    d.mkdir()
    assert predict(d, {A0}).action == "delete-stale"  # no offset file: its mtime is 0
    write_side_input_offsets(d, {A0: "5"})
    st = predict(d, {A0})
    assert (st.action, st.offset_file, st.age_file, st.offsets) == ("keep", OFFSET_V2, OFFSET_V2, {"kafka.a.0": "5"})
    assert predict(d, {A0, A1}).action == "delete-mismatched"
    assert predict(d, None).action == "keep"
    now = time.time()
    assert predict(d, {A0}, now_s=now + DAY - 10).action == "keep"
    assert predict(d, {A0}, now_s=now + DAY + 1).action == "delete-stale"  # >= the retention
    # OFFSET-v2 is read first; without it SIDE-INPUT-OFFSETS
    write_offsets(d / OFFSET_V2, {A1: "1"})
    assert predict(d, {A0}).action == "delete-mismatched"
    (d / OFFSET_V2).unlink()
    assert predict(d, {A0}).offset_file == SIDE_INPUT_OFFSETS and predict(d, {A0}).action == "keep"
    # a file that is not JSON is the single SSP's offset (readOffsetFile's fallback); damage reads as empty
    write_offset_file(d / OFFSET_V2, "17")
    assert predict(d, {A0}).offsets == {"kafka.a.0": "17"} and predict(d, {A0}).action == "keep"
    assert predict(d, {A0, A1}).action == "delete-mismatched"
    (d / OFFSET_V2).write_bytes(b"garbage")
    st = predict(d, {A0})
    assert st.action == "delete-mismatched" and "unreadable" in st.reason
    # CHECKPOINT-V2 decides the age first
    write_side_input_offsets(d, {A0: "5"})
    (d / "CHECKPOINT-V2").write_bytes(b"")
    os.utime(d / "CHECKPOINT-V2", (now - DAY, now - DAY))
    assert predict(d, {A0}).action == "delete-stale" and predict(d, {A0}).age_file == "CHECKPOINT-V2"


def test_recorded_side_inputs(tmp_path: Path):
    assert recorded_side_inputs(tmp_path) is None
    record_side_inputs(tmp_path, {A0, A1})
    assert recorded_side_inputs(tmp_path) == {A0, A1}


def test_checkpoint_read_versions_as_taskconfig_reads_them():
    import pytest

    from statectl.engine.adstore.status import checkpoint_read_versions
    from statectl.errors import ConfigError

    assert checkpoint_read_versions({}) == [1]  # Samza's default: v1 only
    assert checkpoint_read_versions({"task.checkpoint.read.versions": " "}) == [1]
    assert checkpoint_read_versions({"task.checkpoint.read.versions": "2, 1"}) == [2, 1]
    with pytest.raises(ConfigError, match="task.checkpoint.read.versions=v2"):
        checkpoint_read_versions({"task.checkpoint.read.versions": "v2"})


def test_wiped_tasks_by_container_and_host():
    """The grouping the Tansu tests (tests/integration/test_adstore_seal.py) check end to end, on a model
    without task assignments too: the job is then one group."""
    from statectl.engine.adstore.status import _wiped_tasks
    from statectl.formats.jobmodel import JobModel

    def detail(active: list[str]) -> str:
        return "none"

    bare = JobModel({}, {"Partition 0": 0, "Partition 1": 1}, {}, {}, {})
    assert _wiped_tasks(bare, ["Partition 0", "Partition 1"], {"Partition 1"}, detail) == {}
    assert set(_wiped_tasks(bare, ["Partition 0", "Partition 1"], set(), detail)) == {"Partition 0", "Partition 1"}
    placed = JobModel({}, {}, {"0": "h1", "1": "h2", "0-0": "h2"},
                      {"Partition 0": "0", "Partition 1": "1", "Standby-Partition 0-0": "0-0"},
                      {"Standby-Partition 0-0": "Standby"})
    out = _wiped_tasks(placed, ["Partition 0", "Partition 1"], {"Partition 0", "Partition 1"}, detail)
    assert list(out) == ["Partition 1"] and out["Partition 1"].startswith("container 0-0 runs only standby tasks")


def test_new_run_topic_only_for_a_batch_application_with_a_run_id():
    """StreamManager.createUniqueNameForBatch: the topic carries the run id only in BATCH mode with one."""
    from statectl.engine.adstore.status import new_run_topic

    assert new_run_topic({"app.mode": "BATCH", "app.run.id": "1700000000000-ab12cd34"})
    assert new_run_topic({"app.mode": "batch", "app.run.id": "1"})
    assert new_run_topic({"app.mode": "BATCH"}) is None  # no run id: the one topic of every run
    assert new_run_topic({"app.mode": "STREAM", "app.run.id": "1"}) is None
    assert new_run_topic({"app.run.id": "1"}) is None
