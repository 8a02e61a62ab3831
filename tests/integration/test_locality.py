"""Locality and task assignments on a coordinator stream on a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import getpass
import json
import uuid

import pytest

from statectl.formats.coordinator import (
    SET_CONTAINER_HOST,
    SET_TASK_CONTAINER,
    SET_TASK_MODE,
    CoordinatorFormatError,
    decode_container_host,
    standby_task_name,
)
from statectl.kafka.coordinator import CoordinatorStream, Locality


@pytest.fixture
def stream(tansu):
    s = CoordinatorStream(tansu.bootstrap, f"locality_job_{uuid.uuid4().hex[:8]}", "1")
    s.create()
    yield s
    s.close()


def fresh(stream: CoordinatorStream) -> Locality:
    """The locality as a second, fresh reader of the same stream reads it (asserting no problems)."""
    other = CoordinatorStream(stream.bootstrap, stream.job, stream.job_id)
    try:
        assert other.refresh() is True
        locality = other.locality()
        assert other.problems == []
        return locality
    finally:
        other.close()


def write_rf2(stream: CoordinatorStream) -> None:
    """What a job with one container, two tasks and standby replication factor 2 writes: the job coordinator's
    task assignments (container, then mode, per task), then each container's host."""
    for task in ("Partition 0", "Partition 1"):
        stream.write_task_container(task, "0")
        stream.write_task_mode(task, "Active")
        standby = standby_task_name(task, 0)
        stream.write_task_container(standby, "0-0")
        stream.write_task_mode(standby, "Standby")
    stream.write_container_host("0", "host-a.example.com")
    stream.write_container_host("0-0", "host-b.example.com")


@pytest.mark.timeout(120)
def test_assignments_written_are_read_back(stream):
    stream.refresh()
    assert stream.locality() == Locality({}, {}, {})
    write_rf2(stream)
    expected = Locality(
        container_hosts={"0": "host-a.example.com", "0-0": "host-b.example.com"},
        task_containers={"Partition 0": "0", "Standby-Partition 0-0": "0-0",
                         "Partition 1": "0", "Standby-Partition 1-0": "0-0"},
        task_modes={"Partition 0": "Active", "Standby-Partition 0-0": "Standby",
                    "Partition 1": "Active", "Standby-Partition 1-0": "Standby"})
    stream.refresh()
    assert stream.locality() == expected
    assert stream.problems == []
    assert fresh(stream) == expected

    # The records are in Samza's shape: the writer's address and user in the envelope, source SamzaContainer.
    raw = stream.namespace_values(SET_CONTAINER_HOST)["0"]
    assert decode_container_host(raw) == "host-a.example.com"
    obj = json.loads(raw)
    assert list(obj) == ["host", "source", "values", "username", "timestamp"]
    assert list(obj["values"]) == ["jmx-url", "host", "jmx-tunneling-url"]
    assert (obj["source"], obj["username"], obj["values"]["jmx-url"]) == ("SamzaContainer", getpass.getuser(), "")
    assert isinstance(obj["timestamp"], int) and obj["timestamp"] > 1_600_000_000_000
    assert json.loads(stream.namespace_values(SET_TASK_MODE)["Partition 0"])["values"] == {"taskMode": "Active"}


@pytest.mark.timeout(120)
def test_a_failover_rewrite_wins_and_a_tombstone_removes_a_mapping(stream):
    write_rf2(stream)
    # Failover (docs/samza/standby.md section 2): the active restarts on the standby's host, the standby elsewhere.
    first = stream.write_container_host("0", "host-b.example.com")
    second = stream.write_container_host("0-0", "host-c.example.com")
    assert second == first + 1
    # Samza's deleteTaskContainerMappings: tombstones, task-container then task-mode.
    stream.put(SET_TASK_CONTAINER, "Standby-Partition 1-0", None)
    stream.put(SET_TASK_MODE, "Standby-Partition 1-0", None)
    stream.put(SET_CONTAINER_HOST, "0-0", None)

    expected = Locality(
        container_hosts={"0": "host-b.example.com"},
        task_containers={"Partition 0": "0", "Standby-Partition 0-0": "0-0", "Partition 1": "0"},
        task_modes={"Partition 0": "Active", "Standby-Partition 0-0": "Standby", "Partition 1": "Active"})
    stream.refresh()
    assert stream.locality() == expected
    assert fresh(stream) == expected
    assert stream.namespace_values(SET_CONTAINER_HOST)["0-0"] is None  # deleted, not just missing

    # Written again after its tombstone, the mapping is back.
    stream.write_container_host("0-0", "host-d.example.com")
    stream.refresh()
    assert stream.locality().container_hosts == {"0": "host-b.example.com", "0-0": "host-d.example.com"}


@pytest.mark.timeout(120)
def test_malformed_values_are_skipped_with_a_problem(stream):
    stream.write_container_host("0", "host-a.example.com")
    stream.write_task_container("Partition 0", "0")
    stream.write_task_mode("Partition 0", "Active")
    bad_host = stream.put(SET_CONTAINER_HOST, "1", b"not json")
    bad_container = stream.put(SET_TASK_CONTAINER, "Partition 1", b'{"values":{"containerId":1}}')
    # The javadoc's lower case, which Samza's TaskMode.valueOf throws on.
    bad_mode = stream.put(SET_TASK_MODE, "Partition 1", b'{"values":{"taskMode":"active"}}')
    with pytest.raises(CoordinatorFormatError):
        stream.write_task_mode("Partition 2", "active")  # refused before anything is written

    stream.refresh()
    assert stream.locality() == Locality({"0": "host-a.example.com"}, {"Partition 0": "0"},
                                         {"Partition 0": "Active"})
    problems = stream.problems
    assert len(problems) == 3
    for offset, what, key in ((bad_host, SET_CONTAINER_HOST, "'1'"),
                              (bad_container, SET_TASK_CONTAINER, "'Partition 1'"),
                              (bad_mode, SET_TASK_MODE, "'Partition 1'")):
        [problem] = [p for p in problems if p.startswith(f"offset {offset}:")]
        assert what in problem and key in problem
    assert "Partition 2" not in stream.namespace_values(SET_TASK_MODE)

    # A good value written over a bad one replaces it.
    stream.write_task_mode("Partition 1", "Active")
    stream.refresh()
    assert stream.locality().task_modes == {"Partition 0": "Active", "Partition 1": "Active"}
