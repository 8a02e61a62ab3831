"""The job's Samza checkpoint topic on a real Kafka-protocol broker (Tansu): reading the latest v2 checkpoint of
a task, committing new ones that keep the job's input offsets and every other marker, v1-only jobs, a missing
topic, and latest-wins over many records.

The topic is seeded the way a running Samza job fills it: raw records written with kafka-python, their bytes
spelled out here (not produced by statectl's encoder).
"""

from __future__ import annotations

import json
import uuid

import pytest

from statectl.catalog.refs import StoreRef
from statectl.errors import SnapshotNotFoundError, StatectlError
from statectl.formats.checkpoint import checkpoint_topic
from statectl.catalog.kafka_log import KafkaCheckpointLog

GROUPER = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
BLOB = "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory"
KAFKA = "org.apache.samza.storage.KafkaChangelogStateBackendFactory"

# A Kafka changelog marker as Samza writes it, and how it sits (as a JSON string) inside a v2 value.
OTHER_MARKER = ('{"version":1,"changelog-ssp":{"system":"kafka","partition":0,"stream":"pv-other-changelog",'
                '"keyBucket":-1},"changelog-offset":"880"}')
OTHER_MARKER_IN_JSON = OTHER_MARKER.replace('"', '\\"')
SEED_CID = "1700000000000-123"
SEED_V2 = (
    '{"checkpoint-id":"1700000000000-123",'
    '"input-offsets":{"kafka.PageViews.0":"4267","kafka.Clicks.0":"17"},'
    '"state-checkpoint-markers":{'
    f'"{KAFKA}":{{"other":"{OTHER_MARKER_IN_JSON}"}},'
    f'"{BLOB}":{{"second":"blob-second"}}}},'
    '"version":2}'
).encode()


def samza_key(task: str, key_type: str = "checkpoint-v2", grouper: str = GROUPER) -> bytes:
    return f'{{"systemstreampartition-grouper-factory":"{grouper}","taskName":"{task}","type":"{key_type}"}}'.encode()


def samza_v1(entries: dict[tuple[str, str, int], str | None]) -> bytes:
    """A v1 value as CheckpointV1Serde writes it (inner keys in HashMap order: system, partition, offset, stream)."""
    parts = []
    for (system, stream, partition), offset in entries.items():
        off = "null" if offset is None else f'"{offset}"'
        parts.append(f'"SystemStreamPartition [{system}, {stream}, {partition}]":{{"system":"{system}",'
                     f'"partition":"{partition}","offset":{off},"stream":"{stream}"}}')
    return ("{" + ",".join(parts) + "}").encode()


class Topic:
    """Raw access to a job's checkpoint topic, as the job itself would have."""

    def __init__(self, bootstrap: str, job: str, job_id: str = "1"):
        self.bootstrap = bootstrap
        self.name = checkpoint_topic(job, job_id)

    def create(self, tansu) -> "Topic":
        tansu.create_topic(self.name)
        return self

    def produce(self, *records: tuple[bytes | None, bytes | None], linger_ms: int = 0,
                batch_size: int = 1 << 20) -> None:
        """Write records to partition 0; with ``linger_ms`` they go out in multi-record batches."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=linger_ms,
                                 batch_size=batch_size, max_request_size=2 * batch_size)
        try:
            futures = [producer.send(self.name, key=k, value=v, partition=0) for k, v in records]
            producer.flush()
            for f in futures:
                f.get(timeout=30)
        finally:
            producer.close()

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """Every record of partition 0: (offset, key, value)."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False)
        tp = TopicPartition(self.name, 0)
        try:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            out = []
            while True:
                batch = consumer.poll(timeout_ms=500).get(tp, [])
                if not batch:
                    return out
                out.extend((r.offset, r.key, r.value) for r in batch)
        finally:
            consumer.close()


@pytest.fixture
def job() -> str:
    return f"pv_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def log(tansu, job):
    log = KafkaCheckpointLog(tansu.bootstrap, job, "1")
    yield log
    log.close()


def ref(job: str, store: str, task: str = "Partition 0") -> StoreRef:
    return StoreRef(job, "1", task, store)


def test_commit_keeps_input_offsets_and_other_markers(tansu, job, log):
    topic = Topic(tansu.bootstrap, job).create(tansu)
    topic.produce((samza_key("Partition 0"), SEED_V2))

    assert log.latest(ref(job, "counts")) is None  # a v2 checkpoint, without a marker for this store
    assert log.latest(ref(job, "second")) == (SEED_CID, "blob-second")
    assert log.latest_changelog_offset("Partition 0", "other") == (
        {"system": "kafka", "stream": "pv-other-changelog", "partition": 0, "keyBucket": -1}, "880")

    log.commit(ref(job, "counts"), "1700000000500-1", "blob-counts")

    records = topic.records()
    assert len(records) == 2
    _, key, value = records[-1]
    assert key == samza_key("Partition 0")
    assert value == SEED_V2.replace(SEED_CID.encode(), b"1700000000500-1").replace(
        b'{"second":"blob-second"}', b'{"second":"blob-second","counts":"blob-counts"}')
    written = json.loads(value)
    assert written["input-offsets"] == {"kafka.PageViews.0": "4267", "kafka.Clicks.0": "17"}
    assert written["state-checkpoint-markers"][KAFKA] == {"other": OTHER_MARKER}

    assert log.latest(ref(job, "counts")) == ("1700000000500-1", "blob-counts")
    assert log.latest(ref(job, "second")) == ("1700000000500-1", "blob-second")

    # Replacing one store's marker leaves the other stores' and backends' as they were.
    log.commit(ref(job, "second"), "1700000000600-2", "blob-second-2")
    last = json.loads(topic.records()[-1][2])
    assert last["checkpoint-id"] == "1700000000600-2"
    assert last["input-offsets"] == {"kafka.PageViews.0": "4267", "kafka.Clicks.0": "17"}
    assert last["state-checkpoint-markers"] == {KAFKA: {"other": OTHER_MARKER},
                                                BLOB: {"second": "blob-second-2", "counts": "blob-counts"}}

    # A fresh reader of the topic agrees with the incremental one.
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as fresh:
        assert fresh.latest(ref(job, "counts")) == ("1700000000600-2", "blob-counts")
        assert fresh.latest(ref(job, "second")) == ("1700000000600-2", "blob-second-2")
        assert fresh.latest_changelog_offset("Partition 0", "other")[1] == "880"


def test_commit_keeps_the_jobs_grouper_and_other_tasks(tansu, job, log):
    grouper = "com.example.MyGrouperFactory"
    topic = Topic(tansu.bootstrap, job).create(tansu)
    topic.produce((samza_key("Partition 0", grouper=grouper), SEED_V2),
                  (samza_key("Partition 1", grouper=grouper), SEED_V2.replace(b"4267", b"99")))
    log.commit(ref(job, "counts", "Partition 1"), "1700000000700-0", "blob-p1")
    _, key, value = topic.records()[-1]
    assert key == samza_key("Partition 1", grouper=grouper)
    assert json.loads(value)["input-offsets"]["kafka.PageViews.0"] == "99"
    assert log.latest(ref(job, "counts", "Partition 1")) == ("1700000000700-0", "blob-p1")
    assert log.latest(ref(job, "counts", "Partition 0")) is None


def test_v1_only_job_is_said_clearly(tansu, job, log):
    topic = Topic(tansu.bootstrap, job).create(tansu)
    v1 = samza_v1({("kafka", "PageViews", 0): "4267", ("kafka", "pv-counts-changelog", 0): f"{SEED_CID}:880",
                   ("kafka", "pv-empty-changelog", 0): f"{SEED_CID}:null"})
    topic.produce((samza_key("Partition 0", "checkpoint"), v1))

    with pytest.raises(SnapshotNotFoundError) as e:
        log.latest(ref(job, "counts"))
    assert e.value.exit_code == 10
    assert "only v1 checkpoints" in str(e.value) and topic.name in str(e.value)
    assert "task.checkpoint.write.versions" in e.value.hint and "task.checkpoint.read.versions=2" in e.value.hint
    with pytest.raises(SnapshotNotFoundError, match="only v1 checkpoints"):
        log.latest(ref(job, "counts", "Partition 5"))

    with pytest.raises(StatectlError, match="only v1 checkpoints") as e:
        log.commit(ref(job, "counts"), "1700000000500-1", "blob-counts")
    assert not isinstance(e.value, SnapshotNotFoundError)
    assert len(topic.records()) == 1  # nothing written

    changelog = {"system": "kafka", "stream": "pv-counts-changelog", "partition": 0, "keyBucket": -1}
    assert log.latest_changelog_offset("Partition 0", "counts") == (changelog, "880")
    assert log.latest_changelog_offset("Partition 0", "x", changelog_topic="pv-counts-changelog") == (changelog, "880")
    assert log.latest_changelog_offset("Partition 0", "empty")[1] is None
    assert log.latest_changelog_offset("Partition 0", "nothing-like-it") is None
    assert log.latest_changelog_offset("Partition 9", "counts") is None


def test_v1_and_v2_job_uses_v2_and_falls_back_to_v1_for_changelog_offsets(tansu, job, log):
    topic = Topic(tansu.bootstrap, job).create(tansu)
    topic.produce((samza_key("Partition 0", "checkpoint"), samza_v1({("kafka", "pv-counts-changelog", 0): "12"})),
                  (samza_key("Partition 0"), SEED_V2))
    assert log.latest(ref(job, "second")) == (SEED_CID, "blob-second")
    assert log.latest_changelog_offset("Partition 0", "counts")[1] == "12"  # no v2 marker: v1's entry
    assert log.latest_changelog_offset("Partition 0", "other")[1] == "880"  # the v2 marker
    log.commit(ref(job, "counts"), "1700000000500-1", "blob-counts")  # a v2 checkpoint exists: allowed
    assert log.latest(ref(job, "counts")) == ("1700000000500-1", "blob-counts")


def test_missing_topic_is_said_clearly_and_not_created_by_reading(tansu, job, log):
    name = checkpoint_topic(job, "1")
    with pytest.raises(SnapshotNotFoundError) as e:
        log.latest(ref(job, "counts"))
    assert e.value.exit_code == 10 and name in str(e.value) and tansu.bootstrap in str(e.value)
    with pytest.raises(SnapshotNotFoundError, match=name):
        log.latest_changelog_offset("Partition 0", "counts")
    assert name not in tansu.topics()

    log.commit(ref(job, "counts"), "1700000000000-1", "blob-1")  # creates the topic
    assert name in tansu.topics()
    assert log.latest(ref(job, "counts")) == ("1700000000000-1", "blob-1")
    records = Topic(tansu.bootstrap, job).records()
    assert len(records) == 1
    assert json.loads(records[0][2]) == {"checkpoint-id": "1700000000000-1", "input-offsets": {},
                                         "state-checkpoint-markers": {BLOB: {"counts": "blob-1"}}, "version": 2}


def test_task_without_v2_checkpoint(tansu, job, log):
    Topic(tansu.bootstrap, job).create(tansu).produce((samza_key("Partition 0"), SEED_V2))
    with pytest.raises(SnapshotNotFoundError, match="no v2 checkpoint for task 'Partition 3'") as e:
        log.latest(ref(job, "counts", "Partition 3"))
    assert "'Partition 0'" in str(e.value)  # names the tasks that have one


def test_latest_wins_over_many_records_and_batches(tansu, job, log):
    topic = Topic(tansu.bootstrap, job).create(tansu)

    def v2(cid: str, blob: str) -> bytes:
        return f'{{"checkpoint-id":"{cid}","input-offsets":{{}},"state-checkpoint-markers":{{"{BLOB}":{{"counts":"{blob}"}}}}}}'.encode()

    records = []
    for i in range(1, 301):
        records.append((samza_key("Partition 0"), v2(f"1700000000000-{i}", f"p0-{i}")))
        records.append((samza_key("Partition 1"), v2(f"1700000000000-{i}", f"p1-{i}")))
        if i % 50 == 0:
            records.append((b"not a checkpoint key", b"x"))  # Samza would fail; statectl skips it
            records.append((samza_key("Partition 0", "checkpoint"), samza_v1({("kafka", "PageViews", 0): str(i)})))
    records.append((samza_key("Partition 2"), v2("1700000000000-1", "p2-1")))
    records.append((samza_key("Partition 2"), None))  # a tombstone deletes the task's checkpoint
    topic.produce(*records, linger_ms=200)  # multi-record batches: Tansu's high watermark under-reports

    assert log.latest(ref(job, "counts")) == ("1700000000000-300", "p0-300")
    assert log.latest(ref(job, "counts", "Partition 1")) == ("1700000000000-300", "p1-300")
    with pytest.raises(SnapshotNotFoundError):
        log.latest(ref(job, "counts", "Partition 2"))
    assert log.skipped_records == 6

    # Read on incrementally: a later record wins, whatever its checkpoint id.
    topic.produce((samza_key("Partition 0"), v2("1600000000000-1", "p0-older-id")))
    assert log.latest(ref(job, "counts")) == ("1600000000000-1", "p0-older-id")

    # One record batch larger than a poll: the reported end (its base offset + 1) is long passed before
    # the batch's last record, the latest.
    topic.produce(*[(samza_key("Partition 0"), v2(f"1800000000000-{i}", f"big-{i}")) for i in range(12000)],
                  linger_ms=2000, batch_size=8 << 20)
    assert log.latest(ref(job, "counts")) == ("1800000000000-11999", "big-11999")
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as fresh:
        assert fresh.latest(ref(job, "counts")) == ("1800000000000-11999", "big-11999")


def test_other_jobs_are_other_topics(tansu, job, log):
    Topic(tansu.bootstrap, job).create(tansu).produce((samza_key("Partition 0"), SEED_V2))
    other = KafkaCheckpointLog(tansu.bootstrap, job, "2")
    try:
        with pytest.raises(SnapshotNotFoundError, match=checkpoint_topic(job, "2")):
            other.latest(StoreRef(job, "2", "Partition 0", "second"))
    finally:
        other.close()
    from statectl.errors import UsageError

    with pytest.raises(UsageError):
        log.latest(StoreRef(job, "2", "Partition 0", "second"))


# -- the job's config: its grouper in new keys, a BATCH application's topic ---------------------------------

GROUP_BY_SSP = "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory"


def write_job_config(bootstrap: str, job: str, config: dict[str, str]) -> None:
    from statectl.kafka.coordinator import CoordinatorStream

    with CoordinatorStream(bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"job.name": job, "job.id": "1", **config})


def test_keys_written_into_an_empty_topic_name_the_jobs_configured_grouper(tansu, job, tmp_path):
    """KafkaCheckpointManager writes (and checks on read) JobConfig's grouper factory: a first backup of a
    job grouping by SSP must not write GroupByPartition keys the job then refuses."""
    from statectl.blobstore import open_blobstore
    from statectl.catalog.kafka_log import KafkaCheckpointLogs
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.engine.backup import BackupOptions, backup
    from statectl.local.layout import store_dir
    from tests.tools.genstore import make_store

    write_job_config(tansu.bootstrap, job, {"job.systemstreampartition.grouper.factory": GROUP_BY_SSP})
    task = "SystemStreamPartition [kafka, PageViews, 0]"
    r = StoreRef(job, "1", task, "counts")
    sdir = store_dir(tmp_path / "state", r.store, r.task)
    make_store(sdir, 50, 64, seed=1)
    bs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    cps = BlobCheckpointStore(bs, KafkaCheckpointLogs(tansu.bootstrap))
    try:
        backup(BackupOptions(r, sdir), bs, cps)  # the topic does not exist yet: created, first key written
    finally:
        cps.close()
    keys = [json.loads(k) for _, k, _ in Topic(tansu.bootstrap, job).records()]
    assert keys == [{"systemstreampartition-grouper-factory": GROUP_BY_SSP, "taskName": task,
                     "type": "checkpoint-v2"}]

    # A config without the key: JobConfig's default, even where other keys of the topic name another.
    other = f"pv_{uuid.uuid4().hex[:10]}"
    write_job_config(tansu.bootstrap, other, {})
    Topic(tansu.bootstrap, other).create(tansu).produce((samza_key("Partition 0", grouper=GROUP_BY_SSP), SEED_V2))
    with KafkaCheckpointLog(tansu.bootstrap, other, "1") as log:
        log.commit_offsets("Partition 1", "1700000000001-1", {"kafka.PageViews.1": "5"})
    keys = [json.loads(k) for _, k, _ in Topic(tansu.bootstrap, other).records()]
    assert keys[-1]["systemstreampartition-grouper-factory"] == GROUPER


def test_a_batch_applications_checkpoint_topic_carries_its_run_id(tansu, job):
    """KafkaUtil.getCheckpointTopic -> StreamManager.createUniqueNameForBatch: app.mode=BATCH (any case) with
    an app.run.id gives __samza_checkpoint_ver_1_for_<job>_<id>-<run id>; the unsuffixed topic is not read."""
    write_job_config(tansu.bootstrap, job, {"app.mode": "batch", "app.run.id": "1700000000000-run7"})
    plain = Topic(tansu.bootstrap, job).create(tansu)
    plain.produce((samza_key("Partition 0"), SEED_V2))  # a STREAM-mode leftover: not this run's
    batch = Topic(tansu.bootstrap, job)
    batch.name = checkpoint_topic(job, "1") + "-1700000000000-run7"
    batch.create(tansu).produce((samza_key("Partition 0"), SEED_V2.replace(b"blob-second", b"blob-batch")))
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        assert log.topic == batch.name
        assert log.latest(ref(job, "second")) == (SEED_CID, "blob-batch")
        log.commit_offsets("Partition 1", "1700000000001-1", {"kafka.PageViews.1": "5"})
    assert len(batch.records()) == 2 and len(plain.records()) == 1
    # STREAM mode (the default), or BATCH without a run id: no suffix.
    for config in ({"app.mode": "STREAM", "app.run.id": "r"}, {"app.mode": "BATCH"}):
        write_job_config(tansu.bootstrap, job, config)
        with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
            assert log.topic == plain.name
            assert log.latest(ref(job, "second")) == (SEED_CID, "blob-second")


def test_a_copy_into_a_job_without_checkpoints_names_that_jobs_grouper(tansu, job, tmp_path):
    """snapshots copy --to-job commits the copy into the target job's (empty) checkpoint topic: its key names
    the target job's configured grouper, which its KafkaCheckpointManager checks."""
    from statectl.blobstore import open_blobstore
    from statectl.catalog.kafka_log import KafkaCheckpointLogs
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.engine.backup import BackupOptions, backup
    from statectl.engine.copy import CopyOptions, copy_snapshot
    from statectl.local.layout import store_dir
    from tests.tools.genstore import make_store

    src = StoreRef(job, "1", "Partition 0", "counts")
    dst_job = f"staging_{uuid.uuid4().hex[:8]}"
    write_job_config(tansu.bootstrap, dst_job, {"job.systemstreampartition.grouper.factory": GROUP_BY_SSP})
    dst = StoreRef(dst_job, "1", "SystemStreamPartition [kafka, PageViews, 0]", "counts")
    sdir = store_dir(tmp_path / "state", src.store, src.task)
    make_store(sdir, 50, 64, seed=2)
    bs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    cps = BlobCheckpointStore(bs, KafkaCheckpointLogs(tansu.bootstrap))
    try:
        backup(BackupOptions(src, sdir), bs, cps)
        copy_snapshot(CopyOptions(src, dst), bs, cps, bs, cps)
    finally:
        cps.close()
    keys = [json.loads(k) for _, k, _ in Topic(tansu.bootstrap, dst_job).records()]
    assert [k["systemstreampartition-grouper-factory"] for k in keys] == [GROUP_BY_SSP]
