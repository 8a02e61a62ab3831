"""`standby check` on a real Kafka-protocol broker (Tansu): the standby containers
with no host mapping (as Samza leaves one after a failover: its mapping tombstoned, or Samza's empty ANY_HOST)
reported with exit 0, and where each of them, and each in violation, can be placed keeping invariant 1 as
Samza's StandbyContainerManager checks it (not its active's host, nor another replica of the same active's);
--host limiting the candidates; the unmapped count in --metrics-file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from statectl.formats.coordinator import SET_CONTAINER_HOST, standby_task_name
from statectl.kafka.coordinator import CoordinatorStream
from tests.tools.standby_helpers import cli

# Two active containers of two tasks each, standby replication factor 3: standby containers <id>-0 and <id>-1.
ACTIVES = {"0": ["Partition 0", "Partition 1"], "1": ["Partition 2", "Partition 3"]}
HOSTS = {"0": "h-a", "1": "h-b", "0-0": "h-c", "0-1": "h-d", "1-0": "h-e", "1-1": "h-c"}


def write_job(cs: CoordinatorStream) -> None:
    """What Samza's job coordinator and containers write for ACTIVES with RF 3 (task container, then mode, per
    task; then each container's host)."""
    cs.create()
    for cid, tasks in ACTIVES.items():
        for task in tasks:
            cs.write_task_container(task, cid)
            cs.write_task_mode(task, "Active")
            for n in (0, 1):
                cs.write_task_container(standby_task_name(task, n), f"{cid}-{n}")
                cs.write_task_mode(standby_task_name(task, n), "Standby")
    for cid, host in HOSTS.items():
        cs.write_container_host(cid, host)


def check(tmp: Path, bootstrap: str, job: str, *args: str, code: int = 0) -> tuple[dict, str]:
    """(-o json's document, the text run's stdout + stderr), both runs exiting ``code``."""
    base = ["standby", "check", "--kafka", bootstrap, "--job", job, *args]
    doc = json.loads(cli(tmp, *base, "-o", "json", code=code).stdout)
    p = cli(tmp, *base, code=code)
    return doc, p.stdout + p.stderr


UNMAPPED_00 = {"container": "0-0", "active_container": "0",
               "tasks": ["Standby-Partition 0-0", "Standby-Partition 1-0"]}


@pytest.mark.timeout(180)
def test_an_unmapped_standby_container_is_reported_with_where_it_can_go(tansu, tmp_path: Path):
    job = f"standby-place-{uuid.uuid4().hex[:10]}"
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        write_job(cs)
    doc, _ = check(tmp_path, tansu.bootstrap, job)
    assert (doc["tasks"], doc["standbys"], doc["violations"], doc["unmapped"], doc["proposals"]) == (4, 8, [], [], [])

    # The failover's first step: Samza deletes the standby container's locality mapping.
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.put(SET_CONTAINER_HOST, "0-0", None)
    prom = tmp_path / "check.prom"
    doc, out = check(tmp_path, tansu.bootstrap, job, "--metrics-file", str(prom))
    assert doc["violations"] == [] and doc["unmapped"] == [UNMAPPED_00]
    # Not h-a (container 0, its active) nor h-d (0-1, the other replica of container 0); h-b and h-c hold only
    # containers of other tasks (1 and 1-1): allowed. Sorted.
    assert doc["proposals"] == [{"standby_container": "0-0", "active_container": "0", "reason": "unmapped",
                                 "candidate_hosts": ["h-b", "h-c", "h-e"]}]
    assert "standby container 0-0 (of container 0) has no host: Standby-Partition 0-0, Standby-Partition 1-0" in out
    assert "standby container 0-0 (unmapped) can be placed on: h-b, h-c, h-e" in out
    assert "share a host" not in out

    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for fam in text_string_to_metric_families(prom.read_text()) for s in fam.samples}
    job_labels = (("samza_job", job), ("samza_job_id", "1"))
    assert got[("statectl_standby_unmapped_containers", job_labels)] == 1.0
    assert got[("statectl_standby_placement_violations", job_labels)] == 0.0

    # --host limits the candidates; those of the active and the other replica are still left out.
    doc, out = check(tmp_path, tansu.bootstrap, job, "--host", "h-z", "--host", "h-a", "--host", "h-d",
                     "--host", "h-z")
    assert doc["proposals"][0]["candidate_hosts"] == ["h-z"]
    doc, out = check(tmp_path, tansu.bootstrap, job, "--host", "h-a", "--host", "h-d")
    assert doc["unmapped"] == [UNMAPPED_00] and doc["proposals"][0]["candidate_hosts"] == []
    assert "no host to propose for standby container 0-0" in out and "can be placed on" not in out
    cli(tmp_path, "standby", "check", "--kafka", tansu.bootstrap, "--job", job, "--host", "", code=2)

    # Samza's ANY_HOST (an empty host) is no mapping either.
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("0-0", "")
    doc, _ = check(tmp_path, tansu.bootstrap, job)
    assert doc["unmapped"] == [UNMAPPED_00]
    assert doc["proposals"][0]["candidate_hosts"] == ["h-b", "h-c", "h-e"]


@pytest.mark.timeout(180)
def test_a_standby_container_in_violation_gets_proposals_and_exit_1(tansu, tmp_path: Path):
    job = f"standby-place-{uuid.uuid4().hex[:10]}"
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        write_job(cs)
        cs.write_container_host("1-0", "h-b")  # on its active's host
    doc, out = check(tmp_path, tansu.bootstrap, job, code=1)
    assert [(v["task"], v["standby_container"], v["host"]) for v in doc["violations"]] == [
        ("Partition 2", "1-0", "h-b"), ("Partition 3", "1-0", "h-b")]
    assert doc["unmapped"] == []
    # The hosts the locality names now: h-a, h-b, h-c, h-d. Not h-b (container 1) nor h-c (1-1).
    assert doc["proposals"] == [{"standby_container": "1-0", "active_container": "1", "reason": "violation",
                                 "candidate_hosts": ["h-a", "h-d"]}]
    assert "standby container 1-0 (violation) can be placed on: h-a, h-d" in out and "share a host" in out

    # Two replicas of one active on a host: Samza's allocator would not (a note and proposals), the seed's
    # invariant holds (exit 0).
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("1-0", "h-c")
    doc, out = check(tmp_path, tansu.bootstrap, job)
    assert doc["violations"] == [] and doc["unmapped"] == []
    assert doc["proposals"] == [
        {"standby_container": "1-0", "active_container": "1", "reason": "replica_on_same_host",
         "candidate_hosts": ["h-a", "h-d"]},
        {"standby_container": "1-1", "active_container": "1", "reason": "replica_on_same_host",
         "candidate_hosts": ["h-a", "h-d"]}]
    assert "standby container 1-0 shares host h-c with standby container 1-1 of the same active" in out
