"""Backups committed to a job's Samza checkpoint topic (--kafka) on real Tansu: the commit protocol
with a pending catalog record, crash windows on either side of the Kafka write, and gc; the stores of one
task backed up as one checkpoint (backup_stores, as a job commits a task)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.engine.backup import BackupOptions, backup, backup_stores
from statectl.catalog.records import COMMITTED, PENDING, BlobCheckpointStore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.engine.gc import GcOptions, gc
from statectl.catalog.refs import StoreRef
from statectl.local.layout import store_dir
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import SnapshotNotFoundError, UsageError
from statectl.failpoints import FailpointError
from statectl.catalog.kafka_log import KafkaCheckpointLog, KafkaCheckpointLogs
from tests.integration.test_kafka_checkpoints import BLOB, KAFKA, SEED_V2, Topic, samza_key, samza_v1
from tests.tools.genstore import fingerprint, make_store
from tests.tools.gcwait import past_mtime_grain


@pytest.fixture
def job() -> str:
    return f"pv_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def world(tansu, job, tmp_path: Path):
    ref = StoreRef(job, "1", "Partition 0", "counts")
    sdir = store_dir(tmp_path / "state", ref.store, ref.task)
    make_store(sdir, 2000, 512, seed=1, sst_mb=1)
    from statectl.blobstore import open_blobstore

    bs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    cps = BlobCheckpointStore(bs, KafkaCheckpointLogs(tansu.bootstrap))
    yield ref, sdir, bs, cps
    cps.close()


def blobs(bs) -> set[str]:
    return {i.key for i in bs.list("blobs/")}


def referenced(bs, cps, ref) -> set[str]:
    out: set[str] = set()
    for r in cps.records(ref):
        out |= snapshot_blob_ids(r.index_blob_id, read_index(bs, r.index_blob_id))
    return out


def test_backup_commits_to_the_checkpoint_topic_keeping_the_jobs_offsets(tansu, job, world, tmp_path: Path):
    ref, sdir, bs, cps = world
    topic = Topic(tansu.bootstrap, job).create(tansu)
    topic.produce((samza_key("Partition 0"), SEED_V2))  # the job's own last checkpoint
    r = backup(BackupOptions(ref, sdir), bs, cps)
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        assert log.latest(ref) == (r.checkpoint_id, r.snapshot_id)
    value = json.loads(topic.records()[-1][2])
    assert value["input-offsets"] == {"kafka.PageViews.0": "4267", "kafka.Clicks.0": "17"}
    markers = value["state-checkpoint-markers"]
    assert markers[BLOB] == {"second": "blob-second", "counts": r.snapshot_id}
    assert set(markers[KAFKA]) == {"other"}
    assert [x.state for x in cps.records(ref)] == [COMMITTED]
    target = tmp_path / "t"
    restore(RestoreOptions(ref, tmp_path / "none", target_dir=target), bs, cps)
    assert fingerprint(target) == fingerprint(sdir)


def test_crash_before_the_kafka_commit_leaves_a_pending_record_that_gc_respects(world, tmp_path: Path, monkeypatch):
    ref, sdir, bs, cps = world
    first = backup(BackupOptions(ref, sdir), bs, cps)
    before = fingerprint(sdir)
    make_store(sdir, 300, 512, seed=2, start=50_000, sst_mb=1)
    with failpoints.active("before-kafka-commit=raise"), pytest.raises(FailpointError):  # the broker died
        backup(BackupOptions(ref, sdir), bs, cps)
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # gc right away, and S3 cannot be backdated
    states = [(x.checkpoint_id == first.checkpoint_id, x.state) for x in cps.records(ref)]
    assert states == [(False, PENDING), (True, COMMITTED)]
    # The topic still says the first snapshot: restore brings exactly that back.
    target = tmp_path / "t1"
    restore(RestoreOptions(ref, tmp_path / "none", target_dir=target), bs, cps)
    assert fingerprint(target) == before
    # gc (even with no grace) keeps what the pending snapshot references while it is young...
    kept = referenced(bs, cps, ref)
    gc(GcOptions(grace_seconds=3600), bs, cps)
    assert kept <= blobs(bs)
    # ...and the next backup reconciles: the pending record is abandoned, its blobs swept by gc.
    backup(BackupOptions(ref, sdir, grace_seconds=0), bs, cps)
    assert all(x.state == COMMITTED for x in cps.records(ref))
    past_mtime_grain(bs)
    gc(GcOptions(grace_seconds=0), bs, cps)
    assert blobs(bs) == referenced(bs, cps, ref)


def test_crash_after_the_kafka_commit_is_rolled_forward(world, tmp_path: Path, monkeypatch):
    ref, sdir, bs, cps = world
    backup(BackupOptions(ref, sdir), bs, cps)
    make_store(sdir, 300, 512, seed=3, start=60_000, sst_mb=1)
    after = fingerprint(sdir)
    with failpoints.active("after-kafka-commit=raise"), pytest.raises(FailpointError):
        backup(BackupOptions(ref, sdir), bs, cps)
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # gc right away, and S3 cannot be backdated
    # Kafka has the new checkpoint: it is the latest, and restore brings it back.
    target = tmp_path / "t2"
    r = restore(RestoreOptions(ref, tmp_path / "none", target_dir=target), bs, cps)
    assert fingerprint(target) == after
    assert [x.state for x in cps.records(ref)][0] == PENDING  # a restore only reads
    past_mtime_grain(bs)
    gc(GcOptions(grace_seconds=0), bs, cps)  # reconciles, holding the store's lease
    assert [x.state for x in cps.records(ref)][0] == COMMITTED
    assert cps.latest(ref).checkpoint_id == r.checkpoint_id and cps.latest(ref).cleanup_done
    assert blobs(bs) == referenced(bs, cps, ref)


def test_job_with_only_v1_checkpoints_is_said_clearly(tansu, job, world, tmp_path: Path):
    ref, sdir, bs, cps = world
    Topic(tansu.bootstrap, job).create(tansu).produce(
        (samza_key("Partition 0", "checkpoint"), samza_v1({("kafka", "PageViews", 0): "42"})))
    with pytest.raises(SnapshotNotFoundError) as e:
        restore(RestoreOptions(ref, tmp_path / "none", target_dir=tmp_path / "t"), bs, cps)
    assert "v1" in str(e.value) and e.value.exit_code == 10


def test_the_stores_of_a_task_commit_as_one_checkpoint_or_not_at_all(tansu, job, world, tmp_path: Path):
    ref, sdir, bs, cps = world
    other = StoreRef(job, "1", "Partition 0", "views")
    odir = store_dir(tmp_path / "state", other.store, other.task)
    make_store(odir, 500, 512, seed=4, sst_mb=1)
    offsets = {"kafka.PageViews.0": "41"}
    stores = [BackupOptions(ref, sdir, input_offsets=offsets, markers={KAFKA: {"counts": "c"}}),
              BackupOptions(other, odir, input_offsets=offsets, markers={KAFKA: {"views": "v"}})]
    topic = Topic(tansu.bootstrap, job)
    # Refused before anything is written: another task's store, offsets that differ.
    elsewhere = BackupOptions(StoreRef(job, "1", "Partition 1", "views"), odir)
    for bad in ([stores[0], elsewhere], [stores[0], BackupOptions(other, odir, input_offsets={"kafka.PageViews.0": "7"})]):
        with pytest.raises(UsageError):
            backup_stores(bad, bs, cps)
    assert blobs(bs) == set() and not list(cps.entries(job))
    # The second store's upload fails: neither store is recorded, nothing is committed, the checkpoints
    # statectl made are gone.
    with failpoints.active("before-upload=1*off->1*raise"), pytest.raises(FailpointError):
        backup_stores(stores, bs, cps)
    assert cps.records(ref) == [] and cps.records(other) == []
    assert not list(sdir.parent.glob(f"{sdir.name}-*")) and not list(odir.parent.glob(f"{odir.name}-*"))
    results = backup_stores(stores, bs, cps)
    assert len({r.checkpoint_id for r in results}) == 1
    records = topic.records()
    assert len(records) == 1  # one checkpoint for both stores
    value = json.loads(records[0][2])
    assert value["input-offsets"] == offsets
    assert value["state-checkpoint-markers"][BLOB] == {"counts": results[0].snapshot_id,
                                                       "views": results[1].snapshot_id}
    assert value["state-checkpoint-markers"][KAFKA] == {"counts": "c", "views": "v"}
    assert [x.state for x in cps.records(ref) + cps.records(other)] == [COMMITTED, COMMITTED]
    target = tmp_path / "t"
    restore(RestoreOptions(other, tmp_path / "none", target_dir=target), bs, cps)
    assert fingerprint(target) == fingerprint(odir)
    # A backup of one store (statectl backup) keeps the task's other stores' markers ...
    one = backup(BackupOptions(ref, sdir, input_offsets=offsets, markers={KAFKA: {"counts": "c2"}}), bs, cps)
    markers = json.loads(topic.records()[-1][2])["state-checkpoint-markers"]
    assert markers == {BLOB: {"counts": one.snapshot_id, "views": results[1].snapshot_id},
                       KAFKA: {"counts": "c2", "views": "v"}}
    # ... while a job's commit of all its stores (views is no longer in the job) names exactly those, of both
    # state backends: the old store's marker no longer pins its snapshot.
    last = backup_stores([BackupOptions(ref, sdir, input_offsets=offsets, markers={KAFKA: {"counts": "c3"}})],
                         bs, cps, exact_markers=True)
    markers = json.loads(topic.records()[-1][2])["state-checkpoint-markers"]
    assert markers == {BLOB: {"counts": last[0].snapshot_id}, KAFKA: {"counts": "c3"}}
    # A task with no store left commits its offsets alone.
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        log.commit_offsets(ref.task, "1800000000000-1", {"kafka.PageViews.0": "42"}, exact_markers=True)
    value = json.loads(topic.records()[-1][2])
    assert (value["input-offsets"], value["state-checkpoint-markers"]) == ({"kafka.PageViews.0": "42"}, {})
