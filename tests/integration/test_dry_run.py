"""--dry-run of the commands that change state: the dry run writes nothing anywhere (stores, blob store,
Kafka topics), exits 0, prints its plan in text and JSON, and the command run next does exactly that plan.
Against the real components: rocksdict stores, file:// and SeaweedFS blob stores, a Tansu broker."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.local.layout import local_checkpoint_dirs, store_dir
from tests.integration.test_drain_cli import make_job  # noqa: F401 - the drain tests' job fixture
from tests.integration.test_standby import procs, world  # noqa: F401 - the standby tests' fixtures
from tests.integration.test_standby_containers import followers, job  # noqa: F401 - container fixtures
from tests.tools.genstore import fingerprint, make_store


class Where:
    """A blob store of one backend: the CLI flags and environment that reach it, and a way to open it."""

    def __init__(self, url: str, env: dict[str, str], s3=None):
        self.url, self.env, self.s3 = url, env, s3

    def args(self) -> list[str]:
        return ["--blobstore", self.url]

    def listing(self) -> dict[str, tuple[int, float]]:
        """Every object with its size and modification time: a dry run must leave this as it was."""
        store = open_blobstore(self.url, s3=self.s3)
        try:
            return {b.key: (b.size, b.modified_at) for b in store.list("")}
        finally:
            store.close()


@pytest.fixture(params=["file", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    if request.param == "file":
        (tmp_path / "blobs").mkdir()
        return Where(f"file://{tmp_path / 'blobs'}", {})
    s3 = request.getfixturevalue("s3_options")
    env = {"AWS_ACCESS_KEY_ID": s3.access_key_id, "AWS_SECRET_ACCESS_KEY": s3.secret_access_key,
           "STATECTL_S3_ENDPOINT": s3.endpoint_url}
    return Where(request.getfixturevalue("s3_url"), env, s3)


def tree(root: Path, *, dir_mtimes: bool = True) -> dict[str, tuple]:
    """Every path under ``root`` with its type, size, mtime and inode: a dry run must leave this as it was.
    Without ``dir_mtimes``, directories count by their entries only (see the adstore switch test)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            isdir = p.is_dir() and not p.is_symlink()
            mtime = st.st_mtime_ns if dir_mtimes or not isdir else None
            out[str(p.relative_to(root))] = (st.st_mode, None if isdir and not dir_mtimes else st.st_size, mtime,
                                             st.st_ino)
    return out


# -- restore ---------------------------------------------------------------------------------------

def test_restore_dry_run_is_the_plan_restore_then_carries_out(cli, where: Where, tmp_path: Path):
    state = tmp_path / "state"
    sdir = store_dir(state, "counts", "Partition 0")
    make_store(sdir, 3000, 512, seed=1, sst_mb=1)
    common = [*where.args(), "--job", "pv", "--store", "counts", "--state-dir", str(state)]
    cli("backup", *common, env=where.env)
    want = fingerprint(sdir)
    # Some files only the blob store has: no local checkpoint dir, one SST gone from the store dir.
    for d in local_checkpoint_dirs(sdir).values():
        shutil.rmtree(d)
    gone = sorted(p for p in sdir.iterdir() if p.suffix == ".sst")[0]
    gone.unlink()
    blobs_before, state_before = where.listing(), tree(tmp_path / "state")

    out = cli("restore", *common, "--dry-run", env=where.env).stdout
    plan = json.loads(cli("restore", *common, "--dry-run", "-o", "json", env=where.env).stdout)
    assert where.listing() == blobs_before  # no reader pin, nothing else
    assert tree(tmp_path / "state") == state_before  # no temporary dir, nothing swapped

    assert plan["dry_run"] is True and "snapshot" not in plan
    actions = {f["path"]: f["action"] for f in plan["files"]}
    assert actions[gone.name] == "download"
    assert "reuse" in actions.values()
    assert plan["files_downloaded"] == sum(a == "download" for a in actions.values())
    assert plan["files_reused"] == sum(a == "reuse" for a in actions.values())
    assert f"would download {gone.name} " in out
    assert f"dry run: would restore snapshot {plan['snapshot_id']} " in out.splitlines()[-1]
    reused_inodes = {f["path"]: os.stat(f["source"]).st_ino for f in plan["files"]
                     if f["action"] == "reuse" and f["path"].endswith(".sst")}
    assert reused_inodes

    r = json.loads(cli("restore", *common, "-o", "json", env=where.env).stdout)
    for k in ("snapshot_id", "checkpoint_id", "target_dir", "files_total", "files_downloaded", "files_reused",
              "bytes_total", "bytes_downloaded"):
        assert r[k] == plan[k], k
    restored = tree(sdir)
    assert sorted(k for k, v in restored.items() if not (v[0] & 0o040000)) == sorted(actions)
    for path, ino in reused_inodes.items():  # hard-linked from the very file the plan named
        assert os.stat(sdir / path).st_ino == ino
    assert os.stat(sdir / gone.name).st_ino not in reused_inodes.values()
    assert fingerprint(sdir) == want


def test_restore_dry_run_errors_as_the_restore_would(cli, tmp_path: Path):
    (tmp_path / "blobs").mkdir()
    args = ["--blobstore", f"file://{tmp_path / 'blobs'}", "--job", "pv", "--store", "counts"]
    r = cli("restore", *args, "--target-dir", str(tmp_path / "t"), "--dry-run", code=10)
    assert "no snapshot" in r.stderr


def test_restore_from_changelog_dry_run_is_the_plan_the_replay_then_carries_out(cli, tansu, tmp_path: Path):
    import uuid

    from tests.integration.test_changelog_restore import produce
    from tests.tools.standby_helpers import read_store

    topic = tansu.create_topic(f"dry-changelog-{uuid.uuid4().hex[:8]}", partitions=1)
    records = [(0, b"k%03d" % (i % 40), b"v%d" % i) for i in range(60)]
    produce(tansu.bootstrap, topic, records)
    target = tmp_path / "rebuilt"
    make_store(target, 100, 64, seed=6)  # an old store there
    before = tree(target)
    args = ["--from-changelog", topic, "--partition", "0", "--kafka", tansu.bootstrap, "--target-dir", str(target)]

    out = cli("restore", *args, "--dry-run").stdout
    plan = json.loads(cli("restore", *args, "--dry-run", "-o", "json").stdout)
    part = json.loads(cli("restore", *args, "--until-offset", "30", "--dry-run", "-o", "json").stdout)
    assert tree(target) == before
    assert plan == {"target_dir": str(target.resolve()), "topic": topic, "partition": 0, "first_offset": 0,
                    "stop_offset": None, "end_offset": 60, "offsets": 60, "replaces_store": True, "dry_run": True,
                    "notes": []}
    assert (part["stop_offset"], part["offsets"]) == (30, 30)
    assert out == f"dry run: would replay {topic}[0] from offset 0 to its end (offset 60 now), at most 60 records, " \
                  f"into {target.resolve()}, replacing the store there\n"

    r = json.loads(cli("restore", *args, "--until-offset", "30", "-o", "json").stdout)
    assert (r["records"], r["end_offset"], r["target_dir"]) == (part["offsets"], part["stop_offset"], part["target_dir"])
    assert read_store(target) == {k: v for _, k, v in records[:30]}
    r = json.loads(cli("restore", *args, "-o", "json").stdout)
    assert (r["records"], r["end_offset"]) == (plan["offsets"], plan["end_offset"])
    assert read_store(target) == {k: v for _, k, v in records}


# -- snapshots copy --------------------------------------------------------------------------------

def _copy_args(where: Where, state: Path, job: str) -> tuple[list[str], list[str]]:
    src = [*where.args(), "--job", job, "--store", "counts"]
    return src, [*src, "--to-job", f"{job}-staging", "--to-task", "Partition 3", "--to-store", "counts-copy"]


def test_copy_dry_run_is_the_plan_copy_then_carries_out(cli, where: Where, tmp_path: Path):
    from statectl.catalog.index import read_index

    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 4000, 1024, seed=3, sst_mb=2)
    src, copy = _copy_args(where, state, "pv")
    cli("backup", *src, "--state-dir", str(state), "--chunk-size", "1MiB", env=where.env)
    before = where.listing()

    out = cli("snapshots", "copy", *copy, "--dry-run", env=where.env).stdout
    plan = json.loads(cli("snapshots", "copy", *copy, "--dry-run", "-o", "json", env=where.env).stdout)
    assert where.listing() == before  # no pin, no lease, no blob, no record
    assert plan["dry_run"] is True and plan["server_side"] is True and "snapshot" not in plan
    assert plan["blobs_copied"] == len(plan["blobs"]) > plan["files"] > 0  # 1MiB chunks: some files in parts
    assert plan["bytes_copied"] == sum(b["size"] for b in plan["blobs"])
    assert "dry run: would copy snapshot " + plan["source_snapshot_id"] in out.splitlines()[-1]
    assert len(out.splitlines()) == plan["blobs_copied"] + 1

    r = json.loads(cli("snapshots", "copy", *copy, "-o", "json", env=where.env).stdout)
    for k in ("source_snapshot_id", "job", "job_id", "task", "store", "files", "blobs_copied", "bytes_copied",
              "server_side"):
        assert r[k] == plan[k], k
    # The new snapshot's blobs are the planned ones, one for one and in order, each a copy of its source.
    store = open_blobstore(where.url, s3=where.s3)
    try:
        new = [(b.blob_id, fi.size, rel) for rel, fi in read_index(store, r["snapshot_id"]).dir_index.walk_present()
               for b in fi.blobs]
        assert len(new) == len(plan["blobs"])
        for (new_id, _, rel), planned in zip(new, plan["blobs"]):
            assert rel == planned["path"] and new_id != planned["blob_id"]
            assert store.stat(new_id).size == planned["size"] == store.stat(planned["blob_id"]).size
        added = set(where.listing()) - set(before)
        assert {n for n, _, _ in new} <= added
    finally:
        store.close()


def test_copy_dry_run_to_a_new_file_blob_store_makes_no_dir(cli, tmp_path: Path):
    """--to-blobstore file:///new --create --dry-run: the new blob store reads as empty and is not made; the
    copy then makes it. Without --create the missing dir is exit 10, dry run or not."""
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 500, 256, seed=4)
    src = ["--blobstore", f"file://{tmp_path / 'blobs'}", "--job", "pv", "--store", "counts"]
    cli("backup", *src, "--state-dir", str(state), "--create")
    new = tmp_path / "new" / "blobs"
    to = [*src, "--to-blobstore", f"file://{new}"]
    plan = json.loads(cli("snapshots", "copy", *to, "--create", "--dry-run", "-o", "json").stdout)
    assert plan["dry_run"] is True and plan["files"] > 0 and not (tmp_path / "new").exists()
    assert "does not exist" in cli("snapshots", "copy", *to, "--dry-run", code=10).stderr
    r = json.loads(cli("snapshots", "copy", *to, "--create", "-o", "json").stdout)
    assert r["files"] == plan["files"] and r["blobs_copied"] == plan["blobs_copied"] and new.is_dir()


def test_copy_dry_run_with_kafka_writes_no_checkpoint(cli, tansu, tmp_path: Path):
    import uuid

    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.catalog.refs import StoreRef
    from tests.integration.test_kafka_checkpoints import Topic

    job = f"pv_{uuid.uuid4().hex[:8]}"
    Topic(tansu.bootstrap, job).create(tansu)
    staging = Topic(tansu.bootstrap, f"{job}-staging").create(tansu)
    (tmp_path / "blobs").mkdir()
    where = Where(f"file://{tmp_path / 'blobs'}", {})
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 500, 256, seed=4)
    src, copy = _copy_args(where, state, job)
    cli("backup", *src, "--kafka", tansu.bootstrap, "--state-dir", str(state))
    before = where.listing()
    plan = json.loads(cli("snapshots", "copy", *copy, "--kafka", tansu.bootstrap, "--dry-run", "-o", "json").stdout)
    assert staging.records() == [] and where.listing() == before
    r = json.loads(cli("snapshots", "copy", *copy, "--kafka", tansu.bootstrap, "-o", "json").stdout)
    assert r["source_snapshot_id"] == plan["source_snapshot_id"] and r["blobs_copied"] == plan["blobs_copied"]
    with KafkaCheckpointLog(tansu.bootstrap, f"{job}-staging", "1") as log:
        assert log.latest(StoreRef(f"{job}-staging", "1", "Partition 3", "counts-copy")) == \
            (r["checkpoint_id"], r["snapshot_id"])


# -- adstore switch --------------------------------------------------------------------------------

def test_adstore_switch_dry_run_is_the_plan_switch_then_carries_out(cli, tmp_path: Path):
    from tests.integration.test_adstore_files import STORE, expected_entries, make_rows, write_dataset
    from tests.tools.standby_helpers import read_store

    state = tmp_path / "state"
    where = ["--store", STORE, "--state-dir", str(state)]
    rows1, rows2 = make_rows(3, 100), make_rows(4, 120)
    for n, rows in enumerate((rows1, rows2), 1):
        cli("adstore", "load", "--from-file", str(write_dataset(tmp_path / f"v{n}.csv", "csv", rows)),
            "--key-field", "id", *where)
    link = state / STORE / "Partition_0"
    assert os.readlink(link).endswith("/2")
    before = tree(state, dir_mtimes=False)

    out = cli("adstore", "switch", *where, "--dry-run").stdout
    plan = json.loads(cli("adstore", "switch", *where, "--dry-run", "-o", "json").stdout)
    # No link, no lock file written; the deep check opens the version read-only, and rocksdict's config
    # file it drops there is removed again (as on a switch): only the version dir's mtime tells.
    assert tree(state, dir_mtimes=False) == before
    assert plan == {"store_dir": str(link), "version": 1, "previous": 2, "check": "deep", "dry_run": True}
    assert out.startswith(f"dry run: {link}: would make version 1 current (now 2)")
    cli("adstore", "switch", *where, "--version", "7", "--dry-run", code=10)  # as the switch would fail

    r = json.loads(cli("adstore", "switch", *where, "-o", "json").stdout)
    assert (r["store_dir"], r["version"], r["previous"]) == (plan["store_dir"], plan["version"], plan["previous"])
    assert os.readlink(link).endswith("/1") and read_store(link) == expected_entries("csv", rows1, "default")


# -- drain start / cancel --------------------------------------------------------------------------

def _topics(bootstrap: str) -> set[str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_drain_start_dry_run_is_the_plan_start_then_carries_out(cli, tansu, make_job):
    from tests.integration.test_drain_cli import RUN

    job = make_job()
    records, topics = job.records(), _topics(tansu.bootstrap)
    out = cli("drain", "start", *job.args, "--dry-run").stdout
    plan = json.loads(cli("drain", "start", *job.args, "--dry-run", "-o", "json").stdout)
    assert job.records() == records and _topics(tansu.bootstrap) == topics  # nothing written, no topic made
    assert plan == {"run_id": RUN, "created": True, "uuid": None, "offset": None, "topic": job.stream.topic,
                    "drain_monitor_enabled": True, "dry_run": True, "notes": []}
    assert out == f"dry run: would write a drain notification for run {RUN} to {job.stream.topic}\n"

    r = json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)
    assert (r["run_id"], r["created"]) == (plan["run_id"], plan["created"])
    assert job.records() == records + 1  # the one notification

    again = json.loads(cli("drain", "start", *job.args, "--dry-run", "-o", "json").stdout)
    assert (again["created"], again["uuid"], again["offset"]) == (False, r["uuid"], r["offset"])
    assert job.records() == records + 1
    r2 = json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)
    assert (r2["created"], r2["uuid"], r2["offset"]) == (False, again["uuid"], again["offset"])
    assert job.records() == records + 1

    off = make_job(monitor=None)  # refused as the start would be (exit 14), writing nothing
    records = off.records()
    cli("drain", "start", *off.args, "--dry-run", code=14)
    assert off.records() == records


@pytest.mark.timeout(180)
def test_drain_cancel_dry_run_is_the_plan_cancel_then_carries_out(cli, make_job):
    from statectl.formats.drain import DRAIN_NAMESPACE
    from tests.integration.test_drain_cli import put_raw

    job = make_job()
    ours, old = job.notify(), job.notify("OLD-RUN")
    bad_offset = put_raw(job, "garbage", b"\x00\xff garbage bytes")
    records = job.records()

    def live() -> dict[str, bool]:
        job.stream.refresh()
        return {k: v is not None for k, v in job.stream.namespace_values(DRAIN_NAMESPACE).items()}

    out = cli("drain", "cancel", *job.args, "--dry-run").stdout
    plan = json.loads(cli("drain", "cancel", *job.args, "--dry-run", "-o", "json").stdout)
    assert job.records() == records
    assert [(t["key"], t["uuid"], t["kind"]) for t in plan["tombstones"]] == [(ours.uuid, ours.uuid, "pending")]
    assert plan["cancelled"] == [ours.uuid] and plan["bad_removed"] == [] and plan["dry_run"] is True
    assert f"would withdraw pending drain notification {ours.uuid}" in out
    assert out.splitlines()[-1] == f"dry run: would write 1 tombstone(s) to {job.stream.topic}"

    r = json.loads(cli("drain", "cancel", *job.args, "-o", "json").stdout)
    assert r["cancelled"] == plan["cancelled"] and r["bad_removed"] == plan["bad_removed"]
    assert job.records() == records + 2  # the cancelled mark and the tombstone
    assert live() == {ours.uuid: False, old.uuid: True, "garbage": True}

    records = job.records()
    plan = json.loads(cli("drain", "cancel", *job.args, "--bad", "--all-stale", "--dry-run", "-o", "json").stdout)
    assert job.records() == records
    assert [(t["key"], t["kind"], t["offset"]) for t in plan["tombstones"]] == [
        ("garbage", "job-breaking", bad_offset), (old.uuid, "stale", plan["tombstones"][1]["offset"])]
    r = json.loads(cli("drain", "cancel", *job.args, "--bad", "--all-stale", "-o", "json").stdout)
    assert r["cancelled"] == plan["cancelled"] == [old.uuid]
    assert r["bad_removed"] == plan["bad_removed"] and [b["offset"] for b in r["bad_removed"]] == [bad_offset]
    assert job.records() == records + 2  # exactly the two tombstones
    assert live() == {ours.uuid: False, old.uuid: False, "garbage": False}

    cli("drain", "cancel", *job.args, "--dry-run", code=10)  # nothing left: as the cancel would say


# -- standby promote -------------------------------------------------------------------------------

def _coordinator_records(bootstrap: str, job: str) -> int:
    from statectl.formats.coordinator import coordinator_topic
    from statectl.kafka.client import open_consumer
    from statectl.kafka.tails import read_tails

    consumer = open_consumer(bootstrap)
    try:
        return read_tails(consumer, coordinator_topic(job, "1"), [0], bootstrap)[0].end
    finally:
        consumer.close()


@pytest.mark.timeout(300)
def test_standby_promote_dry_run_is_the_plan_promote_then_carries_out(world, procs):
    """Non-transactional restore, a running follower, an old active store, and the task's container placed
    on another host: the dry run names each, changes none; the promote then does exactly that."""
    import random
    import socket

    from statectl.kafka.coordinator import CoordinatorStream
    from tests.integration.test_standby import caught_up, start
    from tests.integration.test_standby_restore_mode import job_config
    from tests.tools.standby_helpers import alive, cli as proc_cli, random_records, read_store, replica_offset

    w = world
    job_config(w, {"task.transactional.state.restore.enabled": "false"})
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.write_task_container("Partition 0", "0")
        cs.write_task_mode("Partition 0", "Active")
        cs.write_container_host("0", "elsewhere.example.com")
    w.writer.send(random_records(random.Random(21), 300))
    f = start(w, procs)
    caught_up(w, f)
    make_store(w.active, 200, 64, seed=5)  # the old active store on this host
    active_before, records = tree(w.active), _coordinator_records(w.bootstrap, w.job)

    out = proc_cli(w.tmp, "standby", "promote", *w.where(), "--dry-run").stdout
    plan = json.loads(proc_cli(w.tmp, "standby", "promote", *w.where(), "--dry-run", "-o", "json").stdout)
    assert alive(f.pid) and f.proc.poll() is None  # not fenced
    assert tree(w.active) == active_before and _coordinator_records(w.bootstrap, w.job) == records
    assert replica_offset(w.replica, w.topic) == w.writer.last_offset
    assert (plan["fence_pid"], plan["restore_mode"], plan["promoted_dir"], plan["replaces_active"],
            plan["in_place"], plan["applied_offset"], plan["catch_up_to"]) == \
        (f.pid, "non-transactional", str(w.active), True, False, w.writer.last_offset, w.writer.last_offset)
    assert plan["locality"] == {"container": "0", "host": socket.gethostname(), "current": "elsewhere.example.com",
                                "write": True, "why": "task 'Partition 0' runs in container 0", "note": None}
    assert f"would stop the follower (pid {f.pid})" in out
    assert f"would point container 0 at host {socket.gethostname()}" in out
    assert out.splitlines()[-1].startswith(f"dry run: would promote {w.replica} to {w.active}")

    r = json.loads(proc_cli(w.tmp, "standby", "promote", *w.where(), "-o", "json").stdout)
    assert f.wait(60) == 0, f.describe()  # the follower the plan named was the one stopped
    assert (r["promoted_dir"], r["restore_mode"], r["checkpoint_id"], r["caught_up_offset"], r["replaced_active"],
            r["locality_updated"]) == (plan["promoted_dir"], plan["restore_mode"], plan["checkpoint_id"],
                                       plan["catch_up_to"], plan["replaces_active"], plan["locality"]["write"])
    assert read_store(w.active) == w.writer.state()
    assert _coordinator_records(w.bootstrap, w.job) == records + 1  # the one placement record
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.refresh()
        assert cs.locality().container_hosts["0"] == socket.gethostname()


@pytest.mark.timeout(300)
def test_standby_promote_dry_run_under_transactional_restore(world, procs):
    """Transactional restore: the plan names the checkpoint dir and the checkpointed offset, and leaves the
    placement alone (no container assigned); the promote lands exactly there."""
    import random

    from tests.integration.test_standby import caught_up, start
    from tests.integration.test_standby_restore_mode import checkpoint, job_config
    from tests.tools.standby_helpers import cli as proc_cli, random_records, read_store

    w = world
    job_config(w)
    w.writer.send(random_records(random.Random(22), 300))
    checkpoint(w, 99)
    f = start(w, procs, "--to-checkpoint")
    caught_up(w, f, upto=99)
    assert f.terminate() == 0, f.describe()
    cp = checkpoint(w, 199)
    state_before, records = tree(w.state), _coordinator_records(w.bootstrap, w.job)
    plan = json.loads(proc_cli(w.tmp, "standby", "promote", *w.where(), "--dry-run", "-o", "json").stdout)
    assert tree(w.state) == state_before and _coordinator_records(w.bootstrap, w.job) == records
    target = w.active.with_name(f"Partition_0-{cp}")
    assert (plan["restore_mode"], plan["checkpoint_id"], plan["promoted_dir"], plan["applied_offset"],
            plan["catch_up_to"], plan["fence_pid"], plan["replaces_active"]) == \
        ("transactional", cp, str(target), 99, 199, None, False)
    assert plan["locality"]["write"] is False and "no container" in plan["locality"]["why"]

    r = json.loads(proc_cli(w.tmp, "standby", "promote", *w.where(), "-o", "json").stdout)
    assert (r["promoted_dir"], r["restore_mode"], r["checkpoint_id"], r["caught_up_offset"], r["replaced_active"],
            r["locality_updated"]) == (plan["promoted_dir"], plan["restore_mode"], plan["checkpoint_id"],
                                       plan["catch_up_to"], plan["replaces_active"], plan["locality"]["write"])
    assert read_store(target) == w.writer.state(199)
    assert _coordinator_records(w.bootstrap, w.job) == records


@pytest.mark.timeout(400)
def test_standby_promote_container_dry_run_is_the_plan_promote_then_carries_out(job, followers):
    """promote --container --dry-run: failover's own plan (the same mechanism as failover --dry-run)."""
    from tests.integration.test_standby_containers import HOST, assert_promoted, follow_container, write_job
    from tests.tools.standby_helpers import cli as proc_cli

    j = job
    write_job(j)
    f = follow_container(j, followers)
    start = j.end()
    out = proc_cli(j.tmp, "standby", "promote", "--container", "0", *j.flags(), "--dry-run").stdout
    dry = json.loads(proc_cli(j.tmp, "standby", "promote", "--container", "0", *j.flags(), "--dry-run",
                              "-o", "json").stdout)
    assert j.end() == start and f.proc.poll() is None  # nothing written, the follower runs on
    assert out.startswith("DRY RUN: container 0")
    assert dry["dry_run"] is True
    assert [(s["step"], s["status"]) for s in dry["steps"]] == [
        ("find-standby-host", "skipped"), ("stop-standby", "planned"), ("promote", "planned"),
        ("point-active-locality", "planned"), ("report", "planned")]
    planned = sorted((x["task"], x["store"], x["replica_dir"], x["restore_mode"]) for x in dry["stores"])
    assert planned and all(x["status"] == "planned" for x in dry["stores"])

    r = json.loads(proc_cli(j.tmp, "standby", "promote", "--container", "0", *j.flags(), "-o", "json").stdout)
    assert f.wait(60) == 0, f.describe()
    assert sorted((x["task"], x["store"], x["replica_dir"], x["restore_mode"]) for x in r["stores"]) == planned
    assert {x["status"] for x in r["stores"]} == {"promoted"}
    assert [s["step"] for s in r["steps"]] == [s["step"] for s in dry["steps"]]
    assert_promoted(j)
    assert j.locality()["0"] == HOST


# -- adstore load --from-file ----------------------------------------------------------------------

def test_adstore_load_files_dry_run_is_the_plan_load_then_carries_out(cli, tmp_path: Path):
    from tests.integration.test_adstore_files import STORE, expected_entries, make_rows, write_dataset
    from tests.tools.standby_helpers import read_store

    state = tmp_path / "state"
    where = ["--store", STORE, "--state-dir", str(state), "--partition-count", "3", "--key-field", "id"]
    for n in (1, 2):
        cli("adstore", "load", "--from-file", str(write_dataset(tmp_path / f"v{n}.csv", "csv", make_rows(n, 50))),
            *where)
    rows = make_rows(7, 200)
    data = write_dataset(tmp_path / "v3.jsonl", "jsonl", rows)
    before = tree(state)

    out = cli("adstore", "load", "--from-file", str(data), *where, "--dry-run").stdout
    plan = json.loads(cli("adstore", "load", "--from-file", str(data), *where, "--dry-run", "-o", "json").stdout)
    assert tree(state) == before  # no build dir, no lock file touched, no link, nothing pruned
    dirs = [str((state / STORE / f"Partition_{k}").absolute()) for k in range(3)]
    assert (plan["dry_run"], plan["version"], plan["rows"], plan["built_with"], plan["format"], plan["files"]) == \
        (True, 3, 200, "put", "jsonl", [str(data)])
    assert [(v["store_dir"], v["version"], v["previous"], v["deleted_versions"]) for v in plan["stores"]] == \
        [(d, 3, 2, [1]) for d in dirs]
    assert sum(v["rows"] for v in plan["stores"]) == 200 and all(v["rows"] for v in plan["stores"])
    assert out.splitlines()[-1].startswith(f"dry run: would load {data} (jsonl, 1 files")

    r = json.loads(cli("adstore", "load", "--from-file", str(data), *where, "-o", "json").stdout)
    assert (r["version"], r["rows"], r["built_with"]) == (plan["version"], plan["rows"], plan["built_with"])
    assert [(v["store_dir"], v["version"], v["previous"], v["deleted_versions"], v["rows"]) for v in r["stores"]] == \
        [(v["store_dir"], v["version"], v["previous"], v["deleted_versions"], v["rows"]) for v in plan["stores"]]
    got: dict = {}
    for v in plan["stores"]:
        entries = read_store(Path(v["store_dir"]))
        assert len(entries) == v["rows"]  # each store holds the rows the plan routed to it
        got.update(entries)
    assert got == expected_entries("jsonl", rows, "default")
    assert sorted(p.name for p in (state / STORE / "Partition_0.versions").iterdir() if p.name.isdigit()) == ["2", "3"]

    # A dataset the load refuses fails the dry run the same way, writing nothing.
    (tmp_path / "empty.csv").write_text("id,name\n")
    before = tree(state)
    cli("adstore", "load", "--from-file", str(tmp_path / "empty.csv"), *where, "--dry-run", code=1)
    assert tree(state) == before


@pytest.mark.timeout(180)
def test_adstore_load_topic_dry_run_is_the_plan_load_then_carries_out(cli, tansu, tmp_path: Path):
    import uuid

    from tests.integration.test_changelog_restore import produce

    topic = tansu.create_topic(f"dry-adstore-{uuid.uuid4().hex[:8]}", partitions=2)
    produce(tansu.bootstrap, topic, [(i % 2, b"k%03d" % i, b"v%d" % i) for i in range(40)])
    state = tmp_path / "state"
    args = ["--topic", topic, "--kafka", tansu.bootstrap, "--store", "lookup", "--state-dir", str(state)]
    ssp = [f"kafka.{topic}.{p}" for p in (0, 1)]

    def stores(x: dict) -> list[tuple]:
        return [(st["store_dir"], st["task"], st["partitions"], st["case"], st["reason"]) for st in x["stores"]]

    out = cli("adstore", "load", *args, "--dry-run").stdout
    plan = json.loads(cli("adstore", "load", *args, "--dry-run", "-o", "json").stdout)
    assert not state.exists()  # not even the state dir
    assert [(st["case"], st["start"], st["end"]) for st in plan["stores"]] == [
        ("created", {ssp[0]: 0}, {ssp[0]: 20}), ("created", {ssp[1]: 0}, {ssp[1]: 20})]
    assert (plan["records"], plan["dry_run"], plan["built_with"]) == (40, True, "put")
    assert out.splitlines()[-1].startswith(f"dry run: would load at most 40 records of {topic} into 2 store(s)")
    r = json.loads(cli("adstore", "load", *args, "-o", "json").stdout)
    assert stores(r) == stores(plan) and r["records"] == plan["records"]
    assert r["offsets"] == {k: v - 1 for st in plan["stores"] for k, v in st["end"].items()}

    # More records: the stores resume where they stopped, as the plan says.
    produce(tansu.bootstrap, topic, [(i % 2, b"k%03d" % i, b"w%d" % i) for i in range(30, 50)])
    before = tree(state, dir_mtimes=False)
    plan = json.loads(cli("adstore", "load", *args, "--dry-run", "-o", "json").stdout)
    # No lock, no offsets, no staged dir; the soundness check opens each store read-only and removes again the
    # config file rocksdict drops there: only the store dirs' mtimes tell.
    assert tree(state, dir_mtimes=False) == before
    assert [(st["case"], st["start"], st["end"]) for st in plan["stores"]] == [
        ("resumed", {ssp[0]: 20}, {ssp[0]: 30}), ("resumed", {ssp[1]: 20}, {ssp[1]: 30})]
    r = json.loads(cli("adstore", "load", *args, "-o", "json").stdout)
    assert stores(r) == stores(plan) and r["records"] == plan["records"] == 20
    assert r["offsets"] == {k: v - 1 for st in plan["stores"] for k, v in st["end"].items()}

    # A store older than --max-age is rebuilt: the plan says so, and stages nothing.
    import time

    time.sleep(2.1)
    before = tree(state, dir_mtimes=False)
    plan = json.loads(cli("adstore", "load", *args, "--max-age", "1s", "--dry-run", "-o", "json").stdout)
    assert tree(state, dir_mtimes=False) == before
    assert [(st["case"], st["start"], st["end"]) for st in plan["stores"]] == [
        ("rebuilt", {ssp[0]: 0}, {ssp[0]: 30}), ("rebuilt", {ssp[1]: 0}, {ssp[1]: 30})]
    assert all("stale" in st["reason"] for st in plan["stores"])
    r = json.loads(cli("adstore", "load", *args, "--max-age", "1s", "-o", "json").stdout)
    assert [st["case"] for st in r["stores"]] == ["rebuilt", "rebuilt"] and r["records"] == plan["records"] == 60


@pytest.mark.timeout(300)
def test_standby_promote_dry_run_of_a_blob_store_restored_store(world, procs):
    """A job restoring the store from the blob store: the plan names the checkpoint dir the promote brings
    to the latest snapshot and the placement it writes; nothing changes; the promote lands exactly there."""
    import socket

    from tests.integration.test_standby_prerestore import (
        blobs,
        job_config,
        pre_dir,
        pre_restored,
        promoted,
        snapshot,
        start_pre,
        store_entries,
    )
    from tests.tools.standby_helpers import cli as proc_cli

    w = world
    job_config(w)
    _, cp1 = snapshot(w, 1000, start=0, seed=3)
    f = start_pre(w, procs)
    pre_restored(w, f, cp1)
    assert f.terminate() == 0, f.describe()
    _, cp2 = snapshot(w, 500, start=1000, seed=4)  # the pre-restored dir is behind now
    args = ["standby", "promote", *w.where(changelog=False), "--blobstore", blobs(w)]
    state_before, records = tree(w.state), _coordinator_records(w.bootstrap, w.job)
    blobs_before = Where(blobs(w), {}).listing()

    out = proc_cli(w.tmp, *args, "--dry-run").stdout
    plan = json.loads(proc_cli(w.tmp, *args, "--dry-run", "-o", "json").stdout)
    assert tree(w.state) == state_before and _coordinator_records(w.bootstrap, w.job) == records
    assert Where(blobs(w), {}).listing() == blobs_before  # no reader pin
    assert (plan["restore_mode"], plan["checkpoint_id"], plan["promoted_dir"], plan["replica_dir"],
            plan["fence_pid"], plan["in_place"]) == \
        ("blob-store", cp2, str(promoted(w, cp2)), str(pre_dir(w, cp1)), None, False)
    assert (plan["locality"]["container"], plan["locality"]["write"], plan["locality"]["host"]) == \
        ("0", True, socket.gethostname())
    assert f"would bring the pre-restored {pre_dir(w, cp1)} to the snapshot of checkpoint {cp2}" in out
    assert f"rename it to {promoted(w, cp2)}" in out

    r = json.loads(proc_cli(w.tmp, *args, "-o", "json").stdout)
    assert (r["promoted_dir"], r["restore_mode"], r["checkpoint_id"], r["locality_updated"]) == \
        (plan["promoted_dir"], plan["restore_mode"], plan["checkpoint_id"], plan["locality"]["write"])
    assert store_entries(w) == [promoted(w, cp2).name]
    assert _coordinator_records(w.bootstrap, w.job) == records + 1


@pytest.mark.timeout(180)
def test_adstore_load_dataset_versions_dry_run_is_the_plan_load_then_carries_out(tansu, tmp_path: Path):
    """--dataset-versions --dry-run: the versions the load would seal (numbers, records, previous, pruned)
    and the markers it would refuse, exit 3 as the load; nothing written, no lock; then the load does that."""
    from tests.integration.test_adstore_dataset import DatasetTopic, entries

    t = DatasetTopic(tansu.bootstrap, tmp_path)
    try:
        t.send(0, entries("one", 300) + [(b"k-0007", None)])
        t.marker(0, b"1")
        t.send(0, entries("two", 120, start=200))
        t.marker(0, b"2")

        def sealed(x: dict) -> list[tuple]:
            return [(v["version"], v["dataset_version"], v["records"], v["offsets"], v["previous"],
                     v["deleted_versions"]) for st in x["stores"] for v in st["sealed"]]

        def shape(x: dict) -> tuple:
            return (sealed(x), x["records"], x["versions_sealed"], x["version"], x["offsets"],
                    [(r["partition"], r["offset"], r["value"], r["records"]) for st in x["stores"] for r in st["refused"]])

        out = t.load("--dry-run").stdout
        plan = t.load_json("--dry-run")
        assert not t.state.exists()  # not even the state dir
        assert plan["dry_run"] is True and [v["keys"] for st in plan["stores"] for v in st["sealed"]] == [None, None]
        assert sealed(plan) == [(1, 1, 301, {f"kafka.{t.name}.0": 301}, None, []),
                                (2, 2, 120, {f"kafka.{t.name}.0": 422}, 1, [])]
        assert out.splitlines()[-1] == f"dry run: would seal 2 versions from 421 records of {t.name}"
        r = t.load_json()
        assert shape(r) == shape(plan) and r["dry_run"] is False and t.current() == 2

        # A stale marker (refused: exit 3 in both) and a third version that prunes version 1.
        t.send(0, entries("stale", 4))
        t.marker(0, b"1")
        t.send(0, entries("three", 10))
        t.marker(0, b"3")
        before = tree(t.state, dir_mtimes=False)
        plan = t.load_json("--dry-run", "--keep-versions", "2", code=3)
        assert tree(t.state, dir_mtimes=False) == before
        assert sealed(plan) == [(3, 3, 10, {f"kafka.{t.name}.0": 438}, 2, [1])]
        assert [(x["offset"], x["records"]) for x in plan["stores"][0]["refused"]] == [(427, 4)]
        assert "would be refused" in plan["refused"][0]
        r = t.load_json("--keep-versions", "2", code=3)
        assert shape(r) == shape(plan) and t.numbers() == [2, 3]
    finally:
        t.close()
