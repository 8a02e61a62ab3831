"""standby promote produces what the job's next start keeps, on a real Kafka-protocol broker (Tansu), real RocksDB
replicas and followers as real processes.

The job's config is on its coordinator stream; the task's checkpoints are v2 records with a Kafka changelog
marker written with KafkaCheckpointLog, and v1 records as Samza writes them. Under Samza's default transactional
restore the promoted dir must be ``<active dir>-<checkpointId>`` at the checkpointed offset of the checkpoint the
job's start reads (``task.checkpoint.read.versions``, KafkaCheckpointManager.readCheckpoints), which
tests/tools/samza_restore.py (a mirror of TransactionalStateTaskRestoreManager.getStoreActions) keeps; under
non-transactional restore it is swapped into the active dir as before; the blob-store backend and a replica past
the checkpoint are refused with exit 14, changing nothing."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import new_checkpoint_id, parse_checkpoint_id
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    CheckpointV1,
    CheckpointV2,
    KafkaChangelogMarker,
    encode_changelog_marker,
)
from statectl.kafka.coordinator import CoordinatorStream
from tests.integration.test_standby import (  # noqa: F401 - world and procs are fixtures
    STORE,
    TASK,
    World,
    caught_up,
    error_lines,
    procs,
    start,
    world,
)
from tests.tools.genstore import fingerprint, make_store
from tests.tools.samza_restore import store_actions
from tests.tools.standby_helpers import (
    cli,
    offsets_of,
    random_records,
    read_store,
    replica_offset,
    wait_until,
    write_checkpoint_record,
)


READ_VERSIONS = "task.checkpoint.read.versions"


def job_config(w: World, extra: dict[str, str] | None = None, *, read_versions: str | None = "2,1") -> None:
    """The job's config on its coordinator stream (the store's changelog and its system, the checkpoint versions
    it reads, None: Samza's default, 1 only; plus ``extra``) and the task's changelog partition, as a Samza job's
    coordinator stream holds them."""
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.create()
        cs.write_config({f"stores.{STORE}.changelog": f"kafka.{w.topic}",
                         "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
                         **({READ_VERSIONS: read_versions} if read_versions is not None else {}),
                         **(extra or {})})
        cs.write_changelog_partition(TASK, 0)


def checkpoint(w: World, offset: int, *, blob: str | None = None, system: str = "kafka") -> str:
    """Commit a v2 checkpoint of the task whose Kafka changelog marker names ``offset`` (and, with ``blob``,
    a blob-store marker too); return its id."""
    cp = new_checkpoint_id()
    marker = encode_changelog_marker(KafkaChangelogMarker(SSP(system, w.topic, 0), str(offset)))
    markers = {KAFKA_CHANGELOG_FACTORY: {STORE: marker}}
    if blob is not None:
        markers[BLOB_STORE_FACTORY] = {STORE: blob}
    with KafkaCheckpointLog(w.bootstrap, w.job, "1") as log:
        # The checkpoint a job with only the Kafka changelog backend writes: no blob-store marker (commit()
        # always adds one), so _write, the writer behind commit().
        log._write(TASK, cp, markers, None)
        got = log.latest_checkpoints()[0][TASK]
    assert got.checkpoint_id == cp and got.state_checkpoint_markers[KAFKA_CHANGELOG_FACTORY][STORE] == marker
    return cp


def checkpoint_dirs(w: World) -> list[Path]:
    return sorted(p for p in w.active.parent.iterdir() if p.name.startswith("Partition_0-")) \
        if w.active.parent.exists() else []


def promote(w: World, *extra: str, code: int = 0):
    return cli(w.tmp, "standby", "promote", *w.where(), *extra, "-o", "json", code=code)


@pytest.mark.timeout(300)
def test_transactional_restore_promotes_into_the_checkpoint_dir_samza_keeps(world: World, procs):
    w = world
    job_config(w)  # no restore keys: Samza's default, transactional restore
    w.writer.send(random_records(random.Random(11), 300))  # offsets 0..299
    checkpoint(w, 99)
    make_store(w.active, 50, 64, seed=3)  # the old active store here: left as it is (the start deletes it)
    active_before = fingerprint(w.active)

    f = start(w, procs, "--to-checkpoint")
    caught_up(w, f, upto=99)  # not further: the task's checkpoint is at 99
    assert f.terminate() == 0, f.describe()
    assert replica_offset(w.replica, w.topic) == 99

    cp = checkpoint(w, 199)  # the task commits again; the replica is behind it
    p = promote(w)
    r = json.loads(p.stdout)
    target = w.active.with_name(f"Partition_0-{cp}")
    assert r["restore_mode"] == "transactional" and r["checkpoint_id"] == cp
    assert r["promoted_dir"] == str(target)
    assert r["caught_up_offset"] == 199 and r["records_applied"] == 100  # exactly to the checkpointed offset
    assert r["replaced_active"] is False
    assert "transactional restore" in p.stderr and str(target) in p.stderr

    assert read_store(target) == w.writer.state(199)
    assert offsets_of(target) == {w.offset_key(): "199"}
    assert fingerprint(w.active) == active_before  # untouched
    assert checkpoint_dirs(w) == [target]
    assert not w.replica.exists() and not w.status_file.exists() and not w.lock_file.exists()

    # What Samza's start does with the state dir: it deletes the active dir and keeps this checkpoint dir.
    actions = store_actions(w.state, STORE, TASK, ssp_key=w.offset_key(),
                            checkpoint_millis=parse_checkpoint_id(cp)[0], checkpointed_offset=199,
                            oldest=0, newest=w.writer.last_offset)
    assert actions.retain == target and actions.restore_from == 199 and actions.restore_to == 199
    assert w.active in actions.delete and target not in actions.delete


@pytest.mark.timeout(300)
def test_a_replica_past_the_checkpoint_is_refused_with_14_and_nothing_changes(world: World, procs):
    w = world
    job_config(w)
    w.writer.send(random_records(random.Random(12), 300))
    checkpoint(w, 199)
    f = start(w, procs)  # without --to-checkpoint: it applies the whole changelog
    caught_up(w, f, upto=299)
    status_before = w.status_file.read_text()

    p = promote(w, code=14)
    err = error_lines(p.stderr)
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "offset 299" in err[0] and "199" in err[0], err
    assert "--to-checkpoint" in p.stderr
    assert json.loads(p.stdout)["exit_code"] == 14
    f.assert_running()  # not fenced
    assert replica_offset(w.replica, w.topic) == 299
    assert json.loads(w.status_file.read_text())["pid"] == json.loads(status_before)["pid"]
    assert not w.active.exists() and checkpoint_dirs(w) == []


@pytest.mark.timeout(300)
def test_follow_to_checkpoint_stays_at_the_checkpointed_offset_as_records_arrive(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(13), 200))
    f = start(w, procs, "--to-checkpoint")

    def lines_with(pred):
        return [x for x in f.status_lines() if pred(x)]

    # No checkpoint yet: nothing is applied while the follower sees the changelog's end.
    wait_until(lambda: lines_with(lambda x: x["end_offset"] is not None and x["end_offset"] >= 200), 60, f.describe())
    assert replica_offset(w.replica, w.topic) is None
    assert "no checkpointed changelog offset" in f.stderr()
    # A checkpoint of the same topic on another system is not this changelog's: still nothing applied.
    checkpoint(w, 150, system="other-system")
    wait_until(lambda: "not kafka." in f.stderr(), 60, f.describe())
    assert replica_offset(w.replica, w.topic) is None

    checkpoint(w, 120)
    caught_up(w, f, upto=120)
    more = w.writer.send(random_records(random.Random(14), 150))  # records beyond the checkpoint arrive
    # The follower has seen them (its end is past them) with the checkpoint at 120: it applied up to 120 only.
    seen = wait_until(lambda: lines_with(lambda x: x["end_offset"] is not None and x["end_offset"] > more[-1]
                                         and x["checkpoint_offset"] == 120), 60, f.describe())
    assert all(x["applied_offset"] == 120 for x in seen), seen
    assert f.terminate() == 0, f.describe()
    assert replica_offset(w.replica, w.topic) == 120
    assert read_store(w.replica) == w.writer.state(120)
    f = start(w, procs, "--to-checkpoint")  # a new follower resumes, still capped
    checkpoint(w, 300)
    caught_up(w, f, upto=300)
    seen = wait_until(lambda: lines_with(lambda x: x["checkpoint_offset"] == 300 and x["end_offset"] is not None
                                         and x["end_offset"] > more[-1]), 60, f.describe())
    assert f.terminate() == 0, f.describe()
    assert f.result()["applied_offset"] == 300
    assert replica_offset(w.replica, w.topic) == 300
    assert read_store(w.replica) == w.writer.state(300)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config", [{"task.transactional.state.restore.enabled": "false"},
                                    {"job.standbytasks.replication.factor": "2"}])
def test_non_transactional_restore_swaps_into_the_active_dir(world: World, procs, config: dict[str, str]):
    w = world
    job_config(w, config)
    w.writer.send(random_records(random.Random(15), 300))
    checkpoint(w, 150)  # not what the job restores to under non-transactional restore
    f = start(w, procs)
    caught_up(w, f)
    p = promote(w)
    assert f.wait(60) == 0, f.describe()
    r = json.loads(p.stdout)
    assert r["restore_mode"] == "non-transactional" and r["checkpoint_id"] is None
    assert r["promoted_dir"] == str(w.active) and r["caught_up_offset"] == w.writer.last_offset
    key = next(iter(config))
    assert f"non-transactional restore ({key}={config[key]})" in p.stderr
    assert read_store(w.active) == w.writer.state()
    assert offsets_of(w.active) == {w.offset_key(): str(w.writer.last_offset)}
    assert checkpoint_dirs(w) == []


@pytest.mark.timeout(300)
def test_the_blob_store_restore_backend_is_refused_with_14(world: World, procs):
    w = world
    job_config(w, {f"stores.{STORE}.restore.factories": BLOB_STORE_FACTORY,
                   "task.transactional.state.restore.enabled": "false"})
    w.writer.send(random_records(random.Random(16), 100))
    f = start(w, procs)
    caught_up(w, f)
    checkpoint(w, 99, blob="blobs/aa/index-1")  # after the follower seeded: it names no snapshot it could read
    p = promote(w, code=14)
    err = error_lines(p.stderr)
    assert len(err) == 1 and "blob store" in err[0] and "Traceback" not in p.stderr, p.stderr
    f.assert_running()
    assert replica_offset(w.replica, w.topic) == 99
    assert not w.active.exists() and checkpoint_dirs(w) == []


@pytest.mark.timeout(300)
def test_without_a_coordinator_stream_promote_swaps_only_on_the_operators_word(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(17), 50))
    f = start(w, procs)
    caught_up(w, f)
    p = promote(w, code=14)  # nothing says the job's start keeps the dir
    assert "not known" in error_lines(p.stderr)[0] and "--non-transactional-restore" in p.stderr, p.stderr
    f.assert_running()
    p = promote(w, "--non-transactional-restore")
    assert f.wait(60) == 0, f.describe()
    r = json.loads(p.stdout)
    assert r["restore_mode"] == "unchecked" and r["promoted_dir"] == str(w.active)
    assert "could not check how the job's next start restores the store" in p.stderr
    assert "as --non-transactional-restore says" in p.stderr
    assert read_store(w.active) == w.writer.state()


def v1_checkpoint(w: World, offset: int, *, timestamp_ms: int | None = None) -> str:
    """Commit a v1 checkpoint of the task as a transactional-state Samza job writes it: its input's offset and its
    store's changelog entry ``<checkpointId>:<offset>``; return the checkpoint id."""
    cp = new_checkpoint_id()
    write_checkpoint_record(w.bootstrap, w.job, TASK, CheckpointV1({SSP("kafka", "page-views", 0): "1234",
                                                                    SSP("kafka", w.topic, 0): f"{cp}:{offset}"}),
                            timestamp_ms=timestamp_ms)
    return cp


def dry_run(w: World, code: int = 0) -> dict:
    return json.loads(promote(w, "--dry-run", code=code).stdout)


@pytest.mark.timeout(300)
def test_promote_reads_the_checkpoint_the_jobs_start_reads_by_its_read_versions(world: World, procs):
    """KafkaCheckpointManager.readCheckpoints: only the versions of task.checkpoint.read.versions (default 1), the
    one listed first winning, unless one listed later was appended more than task.live.checkpoint.max.age after
    it (shouldOverrideCheckpoint); a v1 checkpoint's store offset and id come from its changelog entry
    (TransactionalStateTaskRestoreManager.getCheckpointedChangelogOffsets, getCheckpointId)."""
    w = world
    job_config(w, read_versions=None)  # Samza's default: the job reads v1 checkpoints only
    w.writer.send(random_records(random.Random(21), 300))
    cp2 = checkpoint(w, 199)  # a v2 checkpoint: this job never reads it
    f = start(w, procs, "--to-checkpoint")
    wait_until(lambda: "no checkpointed changelog offset" in f.stderr(), 60, f.describe())
    assert replica_offset(w.replica, w.topic) is None  # nothing to cap at: nothing applied

    cp1 = v1_checkpoint(w, 149)
    caught_up(w, f, upto=149)  # the follower caps at the v1 checkpoint's offset, not the v2 one's
    plan = dry_run(w)
    assert (plan["restore_mode"], plan["checkpoint_id"], plan["catch_up_to"]) == ("transactional", cp1, 149), plan
    assert plan["promoted_dir"] == str(w.active.with_name(f"Partition_0-{cp1}"))

    job_config(w, read_versions="2,1")  # the v2 one first now
    plan = dry_run(w)
    assert (plan["checkpoint_id"], plan["catch_up_to"]) == (cp2, 199), plan
    # A v1 checkpoint appended more than task.live.checkpoint.max.age (10 minutes) after the v2 one overrides it.
    later = int(time.time() * 1000) + 11 * 60 * 1000
    cp3 = v1_checkpoint(w, 179, timestamp_ms=later)
    plan = dry_run(w)
    assert (plan["checkpoint_id"], plan["catch_up_to"]) == (cp3, 179), plan
    job_config(w, {"task.live.checkpoint.max.age": str(12 * 60 * 1000)})  # ... not when younger than that age
    assert (dry_run(w)["checkpoint_id"]) == cp2

    job_config(w, read_versions="1,2")
    p = promote(w)
    assert f.wait(60) == 0, f.describe()
    r = json.loads(p.stdout)
    target = w.active.with_name(f"Partition_0-{cp3}")
    assert (r["restore_mode"], r["checkpoint_id"], r["caught_up_offset"]) == ("transactional", cp3, 179), r
    assert r["promoted_dir"] == str(target)
    assert read_store(target) == w.writer.state(179)
    assert offsets_of(target) == {w.offset_key(): "179"}
    actions = store_actions(w.state, STORE, TASK, ssp_key=w.offset_key(),
                            checkpoint_millis=parse_checkpoint_id(cp3)[0], checkpointed_offset=179,
                            oldest=0, newest=w.writer.last_offset)
    assert actions.retain == target and actions.restore_to == 179


@pytest.mark.timeout(300)
def test_a_v1_checkpoint_read_restores_from_the_changelog_whatever_the_restore_factories(world: World, procs):
    """ContainerStorageManagerUtil.getBackendFactoryStoreNames: a v1 checkpoint restores every store with a
    changelog from it, so a blob-store job whose start reads a v1 checkpoint is promoted from the changelog."""
    w = world
    job_config(w, {f"stores.{STORE}.restore.factories": BLOB_STORE_FACTORY}, read_versions="1")
    w.writer.send(random_records(random.Random(22), 120))
    cp1 = v1_checkpoint(w, 99)
    f = start(w, procs, "--to-checkpoint")
    caught_up(w, f, upto=99)
    marker = encode_changelog_marker(KafkaChangelogMarker(SSP("kafka", w.topic, 0), "99"))
    write_checkpoint_record(w.bootstrap, w.job, TASK, CheckpointV2(new_checkpoint_id(), {}, {  # not read
        KAFKA_CHANGELOG_FACTORY: {STORE: marker}, BLOB_STORE_FACTORY: {STORE: "blobs/aa/index-1"}}))
    plan = dry_run(w)
    assert (plan["restore_mode"], plan["checkpoint_id"], plan["catch_up_to"]) == ("transactional", cp1, 99), plan
    assert f.terminate() == 0


@pytest.mark.timeout(300)
def test_a_job_reading_v1_checkpoints_only_has_none_to_restore_from_when_there_are_only_v2_ones(world: World, procs):
    w = world
    job_config(w, read_versions=None)
    w.writer.send(random_records(random.Random(23), 100))
    checkpoint(w, 99)
    f = start(w, procs)
    caught_up(w, f)
    for args in (["--dry-run"], []):
        p = promote(w, *args, code=14)
        line = error_lines(p.stderr)[0]
        assert "has no checkpoint the job reads (task.checkpoint.read.versions: 1)" in line, p.stderr
    f.assert_running()  # not fenced
    assert not w.active.exists() and checkpoint_dirs(w) == []
