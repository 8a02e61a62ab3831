"""formats.jobmodel: Samza's serialized JobModel (SamzaObjectMapper) and ZkMetadataStore's segments, read."""

from __future__ import annotations

import zlib

import pytest

from statectl.formats.checkpoint import SSP
from statectl.formats.jobmodel import JobModelFormatError, decode_job_model, join_segments

# What JobModelUtil.writeJobModel stores for a standalone job (config empty since ZkJobCoordinator passes a new
# MapConfig), one active and one standby task, an SSP with a key bucket.
SAMZA_JSON = (
    b'{"config":{},"containers":{"p-1":{"processor-id":"p-1","tasks":{'
    b'"Partition 10":{"task-name":"Partition 10","system-stream-partitions":[{"system":"kafka","partition":10,'
    b'"stream":"pv","keyBucket":-1}],"changelog-partition":2,"task-mode":"Active"},'
    b'"Standby-Partition 3-0":{"task-name":"Standby-Partition 3-0","system-stream-partitions":[],'
    b'"changelog-partition":5,"task-mode":"Standby"}}},'
    b'"p-2":{"processor-id":"p-2","tasks":{"Partition 3":{"task-name":"Partition 3","system-stream-partitions":'
    b'[{"system":"kafka","partition":3,"stream":"pv","keyBucket":1}],"changelog-partition":5,"task-mode":"Active"}}}},'
    b'"max-change-log-stream-partitions":12}'
)


def test_a_model_as_samza_writes_it():
    m = decode_job_model(SAMZA_JSON, where="here")
    assert m.where == "here" and m.config == {} and m.container_hosts == {}
    assert m.changelog_partitions == {"Partition 10": 2, "Standby-Partition 3-0": 5, "Partition 3": 5}
    assert m.task_containers == {"Partition 10": "p-1", "Standby-Partition 3-0": "p-1", "Partition 3": "p-2"}
    assert m.task_modes == {"Partition 10": "Active", "Standby-Partition 3-0": "Standby", "Partition 3": "Active"}
    assert m.task_ssps == {"Partition 10": frozenset({SSP("kafka", "pv", 10)}), "Standby-Partition 3-0": frozenset(),
                           "Partition 3": frozenset({SSP("kafka", "pv", 3, 1)})}


def test_older_samza_forms_and_unknown_fields_are_read():
    """Before 0.13 an integer "container-id"; TaskModeDeserializer takes "" (and a model before task modes, none)
    for Active; the mixins ignore unknown fields; a pretty-printed model (ZkUtils.publishJobModel) reads the same."""
    text = (b'{\n  "config" : {"job.name" : "pv"},\n  "containers" : {\n    "0" : {\n      "container-id" : 0,\n'
            b'      "tasks" : {"Partition 0" : {"task-name" : "Partition 0", "system-stream-partitions" : [ ],\n'
            b'        "changelog-partition" : 0, "task-mode" : ""},\n'
            b'        "Partition 1" : {"task-name" : "Partition 1", "changelog-partition" : 1, "x" : 1}}}},\n'
            b'  "all-container-locality" : {"0" : null}\n}')
    m = decode_job_model(text, where="here")
    assert m.config == {"job.name": "pv"}
    assert m.task_containers == {"Partition 0": "0", "Partition 1": "0"}
    assert m.task_modes == {"Partition 0": "Active", "Partition 1": "Active"}
    assert m.changelog_partitions == {"Partition 0": 0, "Partition 1": 1}


@pytest.mark.parametrize("text, why", [
    (b"\xff{", "not JSON"),
    (b"[1, 2]", '"containers"'),
    (b'{"config": {"a": 1}, "containers": {}}', '"config"'),
    (b'{"containers": {"0": {"processor-id": "0"}}}', '"tasks"'),
    (b'{"containers": {"0": {"tasks": {}}}}', '"processor-id"'),
    (b'{"containers": {"0": {"processor-id": 0, "tasks": {}}}}', "not a string"),
    (b'{"containers": {"0": {"processor-id": "0", "tasks": {"t": {"changelog-partition": "2"}}}}}',
     "'t': \"changelog-partition\" is \"2\""),
    (b'{"containers": {"0": {"processor-id": "0", "tasks": {"t": {"changelog-partition": -1}}}}}', "is -1"),
    (b'{"containers": {"0": {"processor-id": "0", "tasks": {"t": {"changelog-partition": 1, "task-mode": "x"}}}}}',
     "neither Active nor Standby"),
    (b'{"containers": {"0": {"processor-id": "0", "tasks": {"t": {"changelog-partition": 1, '
     b'"system-stream-partitions": [{"system": "k"}]}}}}}', "'t': system stream partition"),
    (b'{"containers": {"0": {"processor-id": "0", "tasks": {"t": {"changelog-partition": 1}}}, '
     b'"1": {"processor-id": "1", "tasks": {"t": {"changelog-partition": 1}}}}}', "in container '0' and in container '1'"),
])
def test_what_samza_would_not_read_is_refused(text: bytes, why: str):
    with pytest.raises(JobModelFormatError) as e:
        decode_job_model(text, where="here")
    assert why in str(e.value)


def test_segments_join_with_their_checksum():
    value = bytes(range(256)) * 9000
    data = value + zlib.crc32(value).to_bytes(8, "big")  # ZkMetadataStore: Longs.toByteArray(crc.getValue())
    parts = [data[i:i + 1020 * 1020] for i in range(0, len(data), 1020 * 1020)]
    assert len(parts) == 3 and join_segments(parts) == value
    assert join_segments([b"" + zlib.crc32(b"").to_bytes(8, "big")]) == b""
    with pytest.raises(JobModelFormatError, match="does not match"):
        join_segments(parts[:2])  # the last segment missing
    with pytest.raises(JobModelFormatError, match="too short"):
        join_segments([b"1234567"])


def test_changelog_partitions_of_follows_samzas_job_model_calculator():
    from statectl.formats.jobmodel import changelog_partitions_of

    # mapped tasks keep their partition; new ones get max + 1 in TaskName (string) order
    mapping = {"Partition 0": 3, "Partition 1": 0, "Partition 2": 1, "Partition 3": 2}
    tasks = [f"Partition {k}" for k in range(12)]
    got = changelog_partitions_of(tasks, mapping)
    assert [got[f"Partition {k}"] for k in range(4)] == [3, 0, 1, 2]
    assert got["Partition 10"] == 4 and got["Partition 11"] == 5 and got["Partition 4"] == 6
    assert got["Partition 9"] == 11
    # a job that never started: Samza's first assignment, lexicographic
    fresh = changelog_partitions_of(tasks, {})
    assert fresh["Partition 10"] == 2 and fresh["Partition 2"] == 4
    # old tasks' entries count for the maximum even when they are not among the tasks
    assert changelog_partitions_of(["Partition 0", "x"], {"Partition 0": 0, "old": 7}) == {"Partition 0": 0, "x": 8}
