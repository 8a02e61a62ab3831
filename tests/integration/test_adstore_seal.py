"""adstore against the state dir Samza wipes, on the real Tansu broker and real dirs: a container that reads no
checkpoint for any of its active tasks deletes every entry of its logged store base dir, side-input stores
included (ContainerStorageManager.restoreStores -> clearLoggedStores). ``adstore status`` and ``adstore load
--job`` read the job's checkpoint topic and say so; ``adstore seal-checkpoint`` gives a job that never started
the empty first checkpoints that make its first start keep the stores loaded for it ("load, then deploy").

The checkpoint topic and the coordinator stream are seeded as a Samza job fills them: checkpoint records
spelled out byte for byte here (not statectl's encoder), the coordinator stream through its writer.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from statectl.formats.checkpoint import checkpoint_topic
from statectl.formats.offsets import OFFSET_V2
from statectl.kafka.coordinator import CoordinatorStream
from tests.integration.test_adstore_samza import STORE, error_line, load, new_topic, status, writers  # noqa: F401
from tests.tools.standby_helpers import apply_records, cli, read_store

KAFKA_CHECKPOINTS = "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory"
GROUPER = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
# A job's own checkpoints of task Partition 0, as CheckpointV1Serde and CheckpointV2Serde write them.
SAMZA_V1 = (b'{"SystemStreamPartition [kafka, pv, 0]":{"system":"kafka","partition":"0","offset":"41",'
            b'"stream":"pv"}}')
SAMZA_V2 = (b'{"checkpoint-id":"1700000000000-7","input-offsets":{"kafka.pv.0":"41"},'
            b'"state-checkpoint-markers":{},"version":2}')


def samza_key(task: str, key_type: str = "checkpoint", grouper: str = GROUPER) -> bytes:
    return f'{{"systemstreampartition-grouper-factory":"{grouper}","taskName":"{task}","type":"{key_type}"}}'.encode()


def empty_v2(checkpoint_id: str) -> bytes:
    return (f'{{"checkpoint-id":"{checkpoint_id}","input-offsets":{{}},"state-checkpoint-markers":{{}},'
            '"version":2}').encode()


def produce(bootstrap: str, topic: str, *records: tuple[bytes, bytes | None]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for f in [producer.send(topic, key=k, value=v, partition=0) for k, v in records]:
            f.get(timeout=30)
    finally:
        producer.close()


def records(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    """Every record of partition 0 of ``topic``: (key, value)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]  # Tansu's may be short of the last batch: read on to an empty poll
        out: list = []
        while True:
            batch = consumer.poll(timeout_ms=500).get(tp, [])
            if not batch and consumer.position(tp) >= end:
                return out
            out += [(r.key, r.value) for r in batch]
    finally:
        consumer.close()


def topic_exists(bootstrap: str, topic: str) -> bool:
    from statectl.kafka.client import topic_names

    return topic in topic_names(bootstrap)


def coordinator(bootstrap: str, job: str, config: dict[str, str], tasks: dict[str, str]) -> None:
    """The job's config and task -> container assignments on its coordinator stream."""
    with CoordinatorStream(bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config(config)
        for task, container in tasks.items():
            cs.write_task_container(task, container)


def seal(tmp: Path, bootstrap: str, job: str, state: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    return cli(tmp, "adstore", "seal-checkpoint", "--kafka", bootstrap, "--job", job, "--store", STORE,
               "--state-dir", str(state), *args, code=code)


def actions(out: dict) -> list[tuple[str, str]]:
    return [(s["task"], s["action"]) for s in out["stores"]]


def job_name() -> str:
    return f"seal-{uuid.uuid4().hex[:8]}"


@pytest.mark.timeout(240)
def test_status_and_load_say_the_jobs_start_deletes_stores_whose_container_reads_no_checkpoint(tansu, tmp_path: Path,
                                                                                                writers):
    a, ws = new_topic(tansu.bootstrap, 2)
    writers += ws
    for p in range(2):
        ws[p].send([(f"k{p}-{i}".encode(), b"v") for i in range(5)])
    job, state = job_name(), tmp_path / "state"
    cp = checkpoint_topic(job, "1")
    coordinator(tansu.bootstrap, job, {"task.checkpoint.factory": KAFKA_CHECKPOINTS,
                                       f"stores.{STORE}.side.inputs": f"kafka.{a}"},
                {"Partition 0": "0", "Partition 1": "1"})
    base = ["--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state)]
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(state))
    assert (f"Partition_0: Samza's next start would delete this store (delete-no-checkpoint: container 0 reads no "
            f"checkpoint for any of its active tasks (Partition 0: checkpoint topic {cp} does not exist)") in r.stderr
    assert "adstore seal-checkpoint" in r.stderr
    out = status(tmp_path, *base, code=14)
    assert actions(out) == [("Partition 0", "delete-no-checkpoint"), ("Partition 1", "delete-no-checkpoint")]
    assert out["deleted"] == 2
    # a v2 checkpoint of Partition 0 is not one for a job reading Samza's default task.checkpoint.read.versions=1
    tansu.create_topic(cp)
    produce(tansu.bootstrap, cp, (samza_key("Partition 0", "checkpoint-v2"), SAMZA_V2))
    out = status(tmp_path, *base, code=14)
    assert actions(out)[0] == ("Partition 0", "delete-no-checkpoint")
    assert ("Partition 0 only has checkpoints of versions task.checkpoint.read.versions=1 does not read"
            in out["stores"][0]["reason"])
    # its v1 checkpoint: container 0 keeps its store dir; container 1 still reads none
    produce(tansu.bootstrap, cp, (samza_key("Partition 0"), SAMZA_V1))
    out = status(tmp_path, *base, code=14)
    assert actions(out) == [("Partition 0", "keep"), ("Partition 1", "delete-no-checkpoint")]
    assert f"(Partition 1: none in {cp})" in out["stores"][1]["reason"]
    # both containers last ran on one host: container 1's start clears the dir container 0 shares with it
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("0", "host-a")
        cs.write_container_host("1", "host-a")
    out = status(tmp_path, *base, code=14)
    assert actions(out) == [("Partition 0", "delete-no-checkpoint"), ("Partition 1", "delete-no-checkpoint")]
    assert out["stores"][0]["reason"].startswith("container 1 reads no checkpoint")
    assert "last ran on host host-a, as container 0 of this task did" in out["stores"][0]["reason"]
    # ...not once container 1 runs elsewhere; a container of standby tasks only on host-a clears it at every start
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("1", "host-b")
        assert actions(status(tmp_path, *base, code=14))[0] == ("Partition 0", "keep")
        cs.write_task_container("Standby-Partition 1-0", "0-0")
        cs.write_task_mode("Standby-Partition 1-0", "Standby")
        cs.write_container_host("0-0", "host-a")
    produce(tansu.bootstrap, cp, (samza_key("Partition 1"), SAMZA_V1))
    out = status(tmp_path, *base, code=14)
    assert actions(out) == [("Partition 0", "delete-no-checkpoint"), ("Partition 1", "keep")]
    assert out["stores"][0]["reason"].startswith("container 0-0 runs only standby tasks")
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("0-0", "host-c")
    assert status(tmp_path, *base)["deleted"] == 0
    assert read_store(state / STORE / "Partition_1") == apply_records(ws[1].records())  # status only reads


@pytest.mark.timeout(180)
def test_status_follows_the_jobs_checkpoint_config(tansu, tmp_path: Path, writers):
    a, ws = new_topic(tansu.bootstrap, 1)
    writers += ws
    ws[0].send([(b"k", b"v")])
    state = tmp_path / "state"
    load(tmp_path, tansu.bootstrap, "--topic", a, "--state-dir", str(state))
    side = {f"stores.{STORE}.side.inputs": f"kafka.{a}"}
    # no checkpoint manager: every start of every container clears the state dir
    job = job_name()
    coordinator(tansu.bootstrap, job, side, {"Partition 0": "0"})
    out = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state), code=14)
    assert actions(out) == [("Partition 0", "delete-no-checkpoint")]
    assert out["stores"][0]["reason"].startswith("the job has no task.checkpoint.factory")
    # a job that reads v2 first: its v2 checkpoint counts
    job = job_name()
    coordinator(tansu.bootstrap, job, {**side, "task.checkpoint.factory": KAFKA_CHECKPOINTS,
                                       "task.checkpoint.read.versions": "2,1"}, {"Partition 0": "0"})
    tansu.create_topic(checkpoint_topic(job, "1"))
    produce(tansu.bootstrap, checkpoint_topic(job, "1"), (samza_key("Partition 0", "checkpoint-v2"), SAMZA_V2))
    out = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state))
    assert actions(out) == [("Partition 0", "keep")]
    # checkpoints outside Kafka: not checked, and said so
    job = job_name()
    coordinator(tansu.bootstrap, job, {**side, "task.checkpoint.factory": "com.example.MyCheckpointManagerFactory"},
                {"Partition 0": "0"})
    out = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state))
    assert actions(out) == [("Partition 0", "keep")]
    assert any("com.example.MyCheckpointManagerFactory" in n and "not checked" in n for n in out["notes"])


@pytest.mark.timeout(240)
def test_seal_checkpoint_keeps_the_stores_loaded_for_a_job_that_never_started(tansu, tmp_path: Path, writers):
    a, ws = new_topic(tansu.bootstrap, 3)
    writers += ws
    for p in range(3):
        ws[p].send([(f"k{p}-{i}".encode(), f"v{i}".encode()) for i in range(20)])
    job, state = job_name(), tmp_path / "state"
    cp = checkpoint_topic(job, "1")
    load(tmp_path, tansu.bootstrap, "--topic", a, "--state-dir", str(state))
    tasks = ["Partition 0", "Partition 1", "Partition 2"]
    # the dry run names the tasks (from the store dirs: the job has no coordinator stream) and writes nothing
    out = json.loads(seal(tmp_path, tansu.bootstrap, job, state, "--dry-run", "-o", "json").stdout)
    assert (out["sealed"], out["skipped"], out["tasks_from"], out["checkpoint_id"]) == (tasks, [], "store dirs", None)
    assert not topic_exists(tansu.bootstrap, cp)
    r = seal(tmp_path, tansu.bootstrap, job, state, "-o", "json")
    out = json.loads(r.stdout)
    assert out["sealed"] == tasks and out["grouper_factory"] == GROUPER and out["topic"] == cp
    cid = out["checkpoint_id"]
    expected = []
    for t in tasks:  # v1 then v2 per task, both empty: what a job reading either version takes for a checkpoint
        expected += [(samza_key(t), b"{}"), (samza_key(t, "checkpoint-v2"), empty_v2(cid))]
    assert records(tansu.bootstrap, cp) == expected
    # the job is deployed: its config and tasks on its coordinator stream; its first start keeps every store
    coordinator(tansu.bootstrap, job, {"task.checkpoint.factory": KAFKA_CHECKPOINTS,
                                       f"stores.{STORE}.side.inputs": f"kafka.{a}"},
                {t: str(k) for k, t in enumerate(tasks)})
    st = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state))
    assert [(s["task"], s["action"], s["expected_from"]) for s in st["stores"]] == [(t, "keep", "job") for t in tasks]
    # sealing again writes nothing: every task has its records
    out = json.loads(seal(tmp_path, tansu.bootstrap, job, state, "-o", "json").stdout)
    assert (out["sealed"], out["skipped"], out["tasks_from"]) == ([], tasks, "job")
    assert records(tansu.bootstrap, cp) == expected
    for p in range(3):
        assert read_store(state / STORE / f"Partition_{p}") == apply_records(ws[p].records())


@pytest.mark.timeout(240)
def test_seal_checkpoint_refuses_what_would_not_keep_the_stores_and_never_writes_over_a_task(tansu, tmp_path: Path,
                                                                                             writers):
    a, ws = new_topic(tansu.bootstrap, 2)
    writers += ws
    for p in range(2):
        ws[p].send([(f"k{p}".encode(), b"v")])
    state = tmp_path / "state"
    load(tmp_path, tansu.bootstrap, "--topic", a, "--state-dir", str(state))
    side = {f"stores.{STORE}.side.inputs": f"kafka.{a}"}
    # a job without a checkpoint manager clears the state dir at every start: refused, nothing written
    job = job_name()
    coordinator(tansu.bootstrap, job, side, {"Partition 0": "0", "Partition 1": "1"})
    r = seal(tmp_path, tansu.bootstrap, job, state, code=14)
    assert f"job {job}-1 has no task.checkpoint.factory" in error_line(r.stderr)
    assert not topic_exists(tansu.bootstrap, checkpoint_topic(job, "1"))
    # a store Samza deletes as stale anyway: refused, nothing written
    job = job_name()
    cp = checkpoint_topic(job, "1")
    p1 = state / STORE / "Partition_1" / OFFSET_V2
    old = time.time() - 24 * 3600 - 5
    os.utime(p1, (old, old))
    r = seal(tmp_path, tansu.bootstrap, job, state, code=14)
    assert "Partition_1: the job's next start deletes it with a checkpoint too (delete-stale" in error_line(r.stderr)
    assert not topic_exists(tansu.bootstrap, cp)
    os.utime(p1, None)
    # a task the job checkpointed already is never written to; the other one is sealed
    tansu.create_topic(cp)
    produce(tansu.bootstrap, cp, (samza_key("Partition 0"), SAMZA_V1))
    out = json.loads(seal(tmp_path, tansu.bootstrap, job, state, "-o", "json").stdout)
    assert (out["sealed"], out["skipped"]) == (["Partition 1"], ["Partition 0"])
    assert records(tansu.bootstrap, cp) == [(samza_key("Partition 0"), SAMZA_V1), (samza_key("Partition 1"), b"{}"),
                                           (samza_key("Partition 1", "checkpoint-v2"), empty_v2(out["checkpoint_id"]))]
    # the keys name the job's grouper factory; another one given is refused
    job = job_name()
    other = "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory"
    coordinator(tansu.bootstrap, job, {**side, "task.checkpoint.factory": KAFKA_CHECKPOINTS,
                                       "job.systemstreampartition.grouper.factory": other}, {})
    r = seal(tmp_path, tansu.bootstrap, job, state, "--grouper-factory", GROUPER, code=2)
    assert f"job.systemstreampartition.grouper.factory={other}" in error_line(r.stderr)
    out = json.loads(seal(tmp_path, tansu.bootstrap, job, state, "--tasks", "Partition 0,Partition 1",
                          "-o", "json").stdout)
    assert out["tasks_from"] == "tasks" and out["grouper_factory"] == other
    assert [k for k, _ in records(tansu.bootstrap, checkpoint_topic(job, "1"))] == [
        samza_key(t, kt, other) for t in ("Partition 0", "Partition 1") for kt in ("checkpoint", "checkpoint-v2")]
    # --tasks is for a job that has not started: a coordinator stream naming its tasks decides them
    job = job_name()
    coordinator(tansu.bootstrap, job, {**side, "task.checkpoint.factory": KAFKA_CHECKPOINTS},
                {"Partition 0": "0", "Partition 1": "1"})
    r = seal(tmp_path, tansu.bootstrap, job, state, "--tasks", "Partition 0", code=2)
    assert "--tasks is for a job that has never started" in error_line(r.stderr)


@pytest.mark.timeout(120)
def test_a_checkpoint_the_job_writes_while_the_seal_runs_stays_the_latest(tansu, monkeypatch: pytest.MonkeyPatch):
    from statectl import failpoints
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.errors import StatectlError

    def seal_racing(job: str, *theirs: tuple[bytes, bytes]) -> tuple[list[str], list[str]]:
        """write_first, the job writing ``theirs`` right after the seal read the topic (found no record)."""
        pending = list(theirs)

        def hit(name: str) -> None:
            if name == "adstore-seal-checkpoint" and pending:
                produce(tansu.bootstrap, checkpoint_topic(job, "1"), *pending)
                pending.clear()

        monkeypatch.setattr(failpoints, "hit", hit)
        with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
            return log.write_first(["Partition 0"], "1700000000001-1", GROUPER)

    job = job_name()
    theirs = [(samza_key("Partition 0"), SAMZA_V1), (samza_key("Partition 0", "checkpoint-v2"), SAMZA_V2)]
    ours = [(samza_key("Partition 0"), b"{}"), (samza_key("Partition 0", "checkpoint-v2"), empty_v2("1700000000001-1"))]
    assert seal_racing(job, *theirs) == (["Partition 0"], [])
    # the job wrote first, statectl's empty ones came after, and the job's were written again: the latest of both
    assert records(tansu.bootstrap, checkpoint_topic(job, "1")) == theirs + ours + theirs
    # the job wrote only v1 meanwhile: its v1 is the latest again, and the empty v2 left the latest is an error
    job = job_name()
    with pytest.raises(StatectlError, match="not of both versions"):
        seal_racing(job, theirs[0])
    assert records(tansu.bootstrap, checkpoint_topic(job, "1")) == theirs[:1] + ours + theirs[:1]


@pytest.mark.timeout(240)
def test_a_batch_applications_next_run_reads_a_checkpoint_topic_of_its_own(tansu, tmp_path: Path, writers):
    """A BATCH application with an app.run.id reads the checkpoint topic named after it, and every run gets a
    new run id (RemoteJobPlanner, RunIdGenerator): no checkpoint written before a run is in the topic it reads.
    Without a run id the topic is the one of every run, checked and sealed as a STREAM job's."""
    a, ws = new_topic(tansu.bootstrap, 1)
    writers += ws
    ws[0].send([(b"k", b"v")])
    state = tmp_path / "state"
    load(tmp_path, tansu.bootstrap, "--topic", a, "--state-dir", str(state))
    batch = {"task.checkpoint.factory": KAFKA_CHECKPOINTS, f"stores.{STORE}.side.inputs": f"kafka.{a}",
             "app.mode": "BATCH"}
    job, run = job_name(), "1700000000000-ab12cd34"
    this_run = f"{checkpoint_topic(job, '1')}-{run}"
    coordinator(tansu.bootstrap, job, {**batch, "app.run.id": run}, {"Partition 0": "0"})
    tansu.create_topic(this_run)
    produce(tansu.bootstrap, this_run, (samza_key("Partition 0"), SAMZA_V1))
    out = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state), code=14)
    assert actions(out) == [("Partition 0", "delete-no-checkpoint")]
    assert out["stores"][0]["reason"].startswith("app.mode=BATCH: each run of the job gets a new app.run.id")
    assert f"this run's is {this_run}" in out["stores"][0]["reason"]
    r = seal(tmp_path, tansu.bootstrap, job, state, code=14)
    assert f"(in {this_run}, this run's) is not in the topic the next run reads" in error_line(r.stderr)
    assert records(tansu.bootstrap, this_run) == [(samza_key("Partition 0"), SAMZA_V1)]
    assert not topic_exists(tansu.bootstrap, checkpoint_topic(job, "1"))
    # no run id: every run reads __samza_checkpoint_ver_1_for_<job>_1, which the seal writes to
    job = job_name()
    cp = checkpoint_topic(job, "1")
    coordinator(tansu.bootstrap, job, batch, {"Partition 0": "0"})
    assert actions(status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state),
                          code=14)) == [("Partition 0", "delete-no-checkpoint")]
    out = json.loads(seal(tmp_path, tansu.bootstrap, job, state, "-o", "json").stdout)
    assert (out["sealed"], out["topic"]) == (["Partition 0"], cp)
    assert actions(status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state))) == [
        ("Partition 0", "keep")]


@pytest.mark.timeout(180)
def test_without_a_config_the_keys_name_the_grouper_of_the_jobs_own_keys(tansu, tmp_path: Path, writers):
    """A job with checkpoints but no config on a coordinator stream: a key statectl writes names the grouper
    the job's own keys name (KafkaCheckpointManager fails the start on a key naming another one)."""
    a, ws = new_topic(tansu.bootstrap, 2)
    writers += ws
    for p in range(2):
        ws[p].send([(f"k{p}".encode(), b"v")])
    state = tmp_path / "state"
    load(tmp_path, tansu.bootstrap, "--topic", a, "--state-dir", str(state))
    job = job_name()
    cp = checkpoint_topic(job, "1")
    other = "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory"
    tansu.create_topic(cp)
    produce(tansu.bootstrap, cp, (samza_key("Partition 0", grouper=other), SAMZA_V1))
    out = json.loads(seal(tmp_path, tansu.bootstrap, job, state, "-o", "json").stdout)
    assert (out["sealed"], out["skipped"], out["grouper_factory"]) == (["Partition 1"], ["Partition 0"], other)
    assert [k for k, _ in records(tansu.bootstrap, cp)[1:]] == [samza_key("Partition 1", kt, other)
                                                                 for kt in ("checkpoint", "checkpoint-v2")]
