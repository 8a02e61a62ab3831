"""Whole jobs in one command: ``snapshots copy --all-tasks`` / ``--all``, ``restore --all-tasks`` / ``--all``
(also ``--container``, from the job model on the coordinator stream) and ``backup --dry-run``.

Against the real components: rocksdict stores, file:// and SeaweedFS blob stores, a Tansu broker. Each
command gives a result per task or store, exits 3 when some failed (the others done), and its dry run is
the plan the command then carries out, with nothing written (the blob store listed before and after).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.catalog.index import read_index
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.kafka.coordinator import CoordinatorStream
from statectl.local.layout import store_dir
from tests.integration.test_dry_run import Where, tree, where  # noqa: F401 - the file:// / SeaweedFS fixture
from tests.integration.test_dry_run_parity import hold_store
from tests.integration.test_standalone_jobs import job12  # noqa: F401 - a standalone job's fixture
from tests.tools.genstore import fingerprint, make_store

JOB = "pv"
STORES = [("counts", "Partition 0"), ("counts", "Partition 1"), ("counts", "Partition 2"), ("totals", "Partition 0")]


class Job:
    """Job pv's four stores (counts of three tasks, totals of one) under ``state``, each backed up once to
    ``where``; ``prints`` their content."""

    def __init__(self, cli, where: Where, tmp: Path):
        self.cli, self.where, self.state = cli, where, tmp / "state"
        for i, (s, t) in enumerate(STORES):
            make_store(store_dir(self.state, s, t), 300 + 50 * i, 256, seed=i)
            self.run("backup", "--job", JOB, "--state-dir", str(self.state), "--store", s, "--task", t)
        self.prints = {(s, t): fingerprint(store_dir(self.state, s, t)) for s, t in STORES}

    def run(self, *args: str, code: int = 0):
        return self.cli(*args, *self.where.args(), code=code, env=self.where.env)

    def doc(self, *args: str, code: int = 0) -> dict:
        return json.loads(self.run(*args, "-o", "json", code=code).stdout)

    def damage(self, store: str, task: str) -> str:
        """Delete a data blob of the latest snapshot of ``store`` of ``task``; its id."""
        bs = open_blobstore(self.where.url, s3=self.where.s3)
        try:
            record = BlobCheckpointStore(bs).latest(StoreRef(JOB, "1", task, store))
            index = read_index(bs, record.index_blob_id)
            blob = max(((f.size, b.blob_id) for _, f in index.dir_index.walk_present() for b in f.blobs))[1]
            bs.delete([blob])
            return blob
        finally:
            bs.close()


@pytest.fixture
def job(cli, where: Where, tmp_path: Path) -> Job:
    return Job(cli, where, tmp_path)


def pairs(doc: dict) -> list[tuple[str, str]]:
    return [(r["store"], r["task"]) for r in doc["results"]]


# -- snapshots copy --all-tasks / --all ----------------------------------------------------------------------

def test_copy_all_copies_every_task_server_side_as_its_dry_run_planned(job: Job, tmp_path: Path):
    copy = ["snapshots", "copy", "--job", JOB, "--all", "--to-job", "pv-staging"]
    before = job.where.listing()
    plan = job.doc(*copy, "--dry-run")
    text = job.run(*copy, "--dry-run").stdout
    assert job.where.listing() == before  # no pin, lease, blob or record
    assert plan["dry_run"] is True and plan["failures"] == [] and pairs(plan) == STORES
    assert len(text.splitlines()) == 4 and all(line.startswith("dry run: would copy snapshot ")
                                               for line in text.splitlines())

    done = job.doc(*copy)
    assert done["dry_run"] is False and done["failures"] == [] and pairs(done) == STORES
    for p, r in zip(plan["results"], done["results"]):
        assert r["job"] == "pv-staging" and r["server_side"] is True
        for k in ("source_snapshot_id", "task", "store", "files", "blobs_copied", "bytes_copied"):
            assert r[k] == p[k], k
    # Each copy is committed on its own and restores to its source's content.
    restored = tmp_path / "restored"
    doc = job.doc("restore", "--job", "pv-staging", "--state-dir", str(restored), "--all")
    assert pairs(doc) == STORES
    assert {(s, t): fingerprint(store_dir(restored, s, t)) for s, t in STORES} == job.prints

    # --all-tasks: every task of one store, into another store of the target job.
    doc = job.doc("snapshots", "copy", "--job", JOB, "--store", "counts", "--all-tasks", "--to-job", "pv-staging",
                  "--to-store", "counts-copy")
    assert pairs(doc) == [("counts-copy", t) for s, t in STORES if s == "counts"]


def test_copy_all_with_a_damaged_task_copies_the_others_and_exits_3(job: Job):
    blob = job.damage("counts", "Partition 1")
    copy = ["snapshots", "copy", "--job", JOB, "--all", "--to-job", "pv-staging"]
    before = job.where.listing()
    r = job.run(*copy, "--dry-run", "-o", "json", code=3)
    plan = json.loads(r.stdout)
    assert job.where.listing() == before
    assert [what for what, _ in plan["failures"]] == ["counts/Partition 1"] and blob in plan["failures"][0][1]
    assert pairs(plan) == [p for p in STORES if p != ("counts", "Partition 1")]
    assert r.stderr.startswith("Error: 1 of 4 tasks failed to copy (dry run)")

    r = job.run(*copy, "-o", "json", code=3)
    doc = json.loads(r.stdout)
    assert doc["failures"] == plan["failures"] and pairs(doc) == pairs(plan)
    assert r.stderr.startswith("Error: 1 of 4 tasks failed to copy")
    listed = job.doc("snapshots", "list", "--job", "pv-staging")
    assert sorted((t["store"], t["task"]) for t in listed) == pairs(plan)  # nothing committed for the damaged one


def test_copy_all_onto_the_source_itself_is_one_usage_error(job: Job):
    r = job.run("snapshots", "copy", "--job", JOB, "--all", code=2)
    assert r.stderr.startswith("Error: the target of a copy is the source store itself")
    r = job.run("snapshots", "copy", "--job", JOB, "--all", "--store", "counts", "--to-job", "x", code=2)
    assert "do not combine it with --store" in r.stderr


# -- restore --all / --all-tasks -------------------------------------------------------------------------------

def test_restore_all_restores_every_store_into_its_store_dir_as_its_dry_run_planned(job: Job, tmp_path: Path):
    new_host = tmp_path / "new-host"
    new_host.mkdir()
    state = new_host / "state"
    args = ["restore", "--job", JOB, "--state-dir", str(state), "--all"]
    before = job.where.listing()
    plan = job.doc(*args, "--dry-run")
    assert job.where.listing() == before and tree(new_host) == {}  # no pin, no dir
    assert plan["dry_run"] is True and plan["failures"] == [] and pairs(plan) == STORES

    done = job.doc(*args)
    assert done["failures"] == [] and pairs(done) == STORES
    for p, r in zip(plan["results"], done["results"]):
        for k in ("snapshot_id", "target_dir", "files_total", "files_downloaded", "bytes_downloaded"):
            assert r[k] == p[k], k
        assert r["target_dir"] == str(store_dir(state, r["store"], r["task"]))
    assert {(s, t): fingerprint(store_dir(state, s, t)) for s, t in STORES} == job.prints

    other = tmp_path / "other"
    doc = job.doc("restore", "--job", JOB, "--state-dir", str(other), "--store", "counts", "--all-tasks")
    assert pairs(doc) == [p for p in STORES if p[0] == "counts"] and not (other / "totals").exists()


def test_restore_all_with_a_failing_store_restores_the_others_and_exits_3(job: Job, tmp_path: Path):
    state = tmp_path / "new-state"
    job.damage("counts", "Partition 1")
    held = store_dir(state, "totals", "Partition 0")
    make_store(held, 10, 10, seed=7)
    stop = hold_store(held)  # a job runs on this host and holds that store
    try:
        before_blobs, before_held = job.where.listing(), fingerprint(held)
        args = ["restore", "--job", JOB, "--state-dir", str(state), "--all", "-o", "json"]
        plan = json.loads(job.run(*args, "--dry-run", code=3).stdout)
        assert job.where.listing() == before_blobs and sorted(p.name for p in state.iterdir()) == ["totals"]
        r = job.run(*args, code=3)
        doc = json.loads(r.stdout)
    finally:
        stop()
    assert r.stderr.startswith("Error: 2 of 4 stores failed to restore")
    failed = dict(doc["failures"])
    assert sorted(failed) == sorted(str(store_dir(state, s, t)) for s, t in
                                    [("counts", "Partition 1"), ("totals", "Partition 0")])
    assert [path for path, _ in plan["failures"]] == [path for path, _ in doc["failures"]]
    assert "missing" in failed[str(store_dir(state, "counts", "Partition 1"))]
    assert "held open" in failed[str(held)]
    assert pairs(doc) == pairs(plan) == [("counts", "Partition 0"), ("counts", "Partition 2")]
    for s, t in pairs(doc):
        assert fingerprint(store_dir(state, s, t)) == job.prints[(s, t)]
    assert fingerprint(held) == before_held  # the held store as it was (its holder writes its MANIFEST)
    assert sorted(p.name for p in (state / "counts").iterdir()) == ["Partition_0", "Partition_2"]  # nothing staged


def test_restore_all_refuses_what_a_single_restore_names(job: Job, tmp_path: Path):
    state = str(tmp_path / "s")
    for extra, words in ((["--snapshot", "abc123"], "--snapshot"), (["--target-dir", state], "--target-dir"),
                         (["--task", "Partition 0"], "--task"), (["--store", "counts"], "--store")):
        r = job.run("restore", "--job", JOB, "--state-dir", state, "--all", *extra, code=2)
        assert words in r.stderr.splitlines()[0], r.stderr
    assert "needs --state-dir" in job.run("restore", "--job", JOB, "--all", code=2).stderr
    assert "needs --kafka" in job.run("restore", "--job", JOB, "--state-dir", state, "--all", "--container", "0",
                                      code=2).stderr
    r = job.run("restore", "--job", "nope", "--state-dir", state, "--all", code=10)
    assert "unknown job 'nope'" in r.stderr


@pytest.mark.timeout(180)
def test_restore_all_restores_stores_at_once(blobstore, tmp_path: Path):
    """Two stores, two at a time: the first bytes downloaded (of either store) wait until both stores are
    being built aside at once, which they are only if the two restores run at the same time."""
    from statectl.engine.backup import BackupOptions, backup
    from statectl.engine.restore_all import RestoreAllOptions, restore_all
    from statectl.local.staged import TMP_INFIX
    from statectl.progress import NullProgress
    from tests.tools.standby_helpers import wait_until

    cps = BlobCheckpointStore(blobstore)
    tasks = ("Partition 0", "Partition 1")
    for task in tasks:
        d = store_dir(tmp_path / "state", "counts", task)
        make_store(d, 300, 256, seed=len(task))
        backup(BackupOptions(StoreRef(JOB, "1", task, "counts"), d), blobstore, cps)
    new = tmp_path / "new"

    def both_staged() -> bool:
        names = [p.name for p in (new / "counts").iterdir()] if (new / "counts").is_dir() else []
        return all(any(n.startswith(f".{store_dir(new, 'counts', t).name}{TMP_INFIX}") for n in names) for t in tasks)

    class Meet(NullProgress):
        met = False

        def advance(self, nbytes: int) -> None:
            if not self.met:  # fails the restore (AssertionError) if the other store never starts
                # both staged, or another store's thread saw them so (that store may have finished since)
                self.met = wait_until(lambda: self.met or both_staged(), timeout=60,
                                      why="both stores restoring at once")

    opts = RestoreAllOptions(StoreRef(JOB, "1", "Partition 0", "counts"), new, parallelism=4, stores_at_once=2)
    result = restore_all(opts, blobstore, cps, Meet())
    assert result.failures == [] and [r.task for r in result.results] == list(tasks)


@pytest.mark.timeout(180)
def test_backup_all_backs_up_stores_at_once(blobstore, tmp_path: Path):
    """Two stores: the first bytes uploaded (of either store) wait until both stores have their backup's
    checkpoint made, which they have only if the two backups run at the same time."""
    from statectl.engine.backup import BackupOptions, backup_all
    from statectl.local.layout import local_checkpoint_dirs
    from statectl.progress import NullProgress
    from tests.tools.standby_helpers import wait_until

    state = tmp_path / "state"
    dirs = [state / "counts" / "p0", state / "totals" / "p0"]
    for i, d in enumerate(dirs):
        make_store(d, 300, 256, seed=i)

    class Meet(NullProgress):
        met = False

        def advance(self, nbytes: int) -> None:
            if not self.met:  # fails the backup (AssertionError) if the other store's never starts
                self.met = wait_until(lambda: self.met or all(local_checkpoint_dirs(d) for d in dirs), timeout=60,
                                      why="both stores backing up at once")

    base = BackupOptions(StoreRef(JOB, "1", "p0", "counts"), state, parallelism=4)
    result = backup_all(state, base, blobstore, BlobCheckpointStore(blobstore), Meet())
    assert result.failures == [] and [(r.store, r.task) for r in result.results] == [("counts", "p0"), ("totals", "p0")]


def test_restore_all_of_a_container_restores_its_tasks_from_the_job_model(cli, tansu, tmp_path: Path):
    job = f"pv-{uuid.uuid4().hex[:8]}"
    (tmp_path / "blobs").mkdir()
    where = ["--blobstore", f"file://{tmp_path / 'blobs'}", "--job", job]
    # Container 0 runs Partition 0 and Partition 3 (never backed up), container 1 the others.
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"job.name": job, "job.id": "1"})
        for p, container in enumerate(["0", "1", "1", "0"]):
            cs.write_task_container(f"Partition {p}", container)
            cs.write_task_mode(f"Partition {p}", "Active")
    state = tmp_path / "state"
    for i, (s, t) in enumerate(STORES):  # committed to the job's checkpoint topic, as the job commits
        make_store(store_dir(state, s, t), 200, 128, seed=i)
        cli("backup", *where, "--kafka", tansu.bootstrap, "--state-dir", str(state), "--store", s, "--task", t)
    new = tmp_path / "new"
    args = ["restore", *where, "--kafka", tansu.bootstrap, "--state-dir", str(new), "-o", "json"]
    doc = json.loads(cli(*args, "--all", "--container", "0", code=3).stdout)
    assert doc["container"] == "0" and pairs(doc) == [("counts", "Partition 0"), ("totals", "Partition 0")]
    assert [path for path, _ in doc["failures"]] == [str(store_dir(new, s, "Partition 3"))
                                                     for s in ("counts", "totals")]
    assert sorted(p.name for p in (new / "counts").iterdir()) == ["Partition_0"]
    doc = json.loads(cli(*args, "--store", "counts", "--all-tasks", "--container", "1").stdout)
    assert doc["failures"] == [] and pairs(doc) == [("counts", "Partition 1"), ("counts", "Partition 2")]
    r = cli(*args, "--all", "--container", "7", code=10)
    assert "no task to container '7'" in r.stderr


@pytest.mark.timeout(180)
def test_restore_all_of_a_standalone_jobs_container_reads_its_model_in_zookeeper(job12, cli):
    """A standalone job (ZkJobCoordinator): the container's tasks from the job model in ZooKeeper (the
    ``zookeeper`` setting, here STATECTL_ZOOKEEPER), its config on its coordinator stream."""
    from tests.integration.test_standalone_jobs import PROCESSORS, containers
    from tests.tools.zk_jobmodel import model_json

    j = job12
    j.write_config()
    j.publish(model_json(containers()))  # Partition 0, 2, .. 10 in the first processor, the others in the second
    (j.tmp / "blobs").mkdir()
    where = ["--blobstore", f"file://{j.tmp / 'blobs'}", "--job", j.job, "--kafka", j.bootstrap, "--store", "counts"]
    for n in (0, 1, 2):
        make_store(store_dir(j.state, "counts", f"Partition {n}"), 100, 64, seed=n)
        cli("backup", *where, "--task", f"Partition {n}", "--state-dir", str(j.state))
    new = j.tmp / "new"
    r = cli("restore", *where, "--state-dir", str(new), "--all-tasks", "--container", PROCESSORS[0], "-o", "json",
            code=3, env={"STATECTL_ZOOKEEPER": j.zk})
    doc = json.loads(r.stdout)
    assert pairs(doc) == [("counts", "Partition 0"), ("counts", "Partition 2")]
    assert sorted(path for path, _ in doc["failures"]) == sorted(
        str(store_dir(new, "counts", f"Partition {n}")) for n in (4, 6, 8, 10))
    for n in (0, 2):
        assert fingerprint(store_dir(new, "counts", f"Partition {n}")) == \
            fingerprint(store_dir(j.state, "counts", f"Partition {n}"))


# -- backup --dry-run ---------------------------------------------------------------------------------------------

def test_backup_dry_run_is_the_plan_backup_then_carries_out(job: Job):
    sdir = store_dir(job.state, "counts", "Partition 0")
    make_store(sdir, 200, 256, seed=11, start=50_000)  # a new SST file since the backup
    args = ["backup", "--job", JOB, "--state-dir", str(job.state), "--store", "counts", "--grace", "0s"]
    before_blobs, before_state = job.where.listing(), tree(job.state)
    plan = job.doc(*args, "--dry-run")
    text = job.run(*args, "--dry-run").stdout
    assert job.where.listing() == before_blobs  # no blob, index, record or lease
    assert tree(job.state) == before_state  # no checkpoint dir; the store not opened
    assert plan["dry_run"] is True and plan["previous_snapshot_id"] is not None
    uploads = {f["path"] for f in plan["files"] if f["action"] == "upload"}
    assert any(p.endswith(".sst") for p in uploads) and "keep" in {f["action"] for f in plan["files"]}
    assert plan["files_uploaded"] == len(uploads) and plan["files_total"] == len(plan["files"])
    assert [e["snapshot_id"] for e in plan["expired"]] == [plan["previous_snapshot_id"]]
    assert plan["expired"][0]["until"] is None  # --grace 0s: its blobs go at the cleanup
    assert text.splitlines()[-1].startswith("dry run: would back up counts/Partition 0 from ")

    done = job.doc(*args)
    for k in ("files_total", "files_uploaded", "files_removed"):
        assert done[k] == plan[k], k
    # Every file but those RocksDB writes anew at each open (the backup's checkpoint opens the store: its
    # MANIFEST, OPTIONS, CURRENT and log, a few KiB) is in the new snapshot exactly as planned.
    bs = open_blobstore(job.where.url, s3=job.where.s3)
    try:
        made = {rel: f.size for rel, f in read_index(bs, done["snapshot_id"]).dir_index.walk_present()}
    finally:
        bs.close()

    def data(files: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in files.items() if not k.startswith(("CURRENT", "MANIFEST-", "OPTIONS-"))
                and not k.endswith(".log")}
    assert data(made) == data({f["path"]: f["size"] for f in plan["files"]}) != {}
    gone = set(before_blobs) - set(job.where.listing())
    assert {d["blob_id"] for d in plan["deleted"]} == {k for k in gone if k.startswith("blobs/")} != set()


def test_backup_dry_run_of_all_exits_as_the_backup_would(job: Job):
    damaged = store_dir(job.state, "counts", "Partition 2")
    (damaged / "CURRENT").unlink()
    args = ["backup", "--job", JOB, "--state-dir", str(job.state), "--all", "-o", "json"]
    before_blobs, before_state = job.where.listing(), tree(job.state)
    plan = json.loads(job.run(*args, "--dry-run", code=3).stdout)
    assert job.where.listing() == before_blobs and tree(job.state) == before_state
    assert plan["dry_run"] is True and [p for p, _ in plan["failures"]] == [str(damaged)]
    doc = json.loads(job.run(*args, code=3).stdout)
    assert doc["failures"] == plan["failures"] and pairs(doc) == pairs(plan) == [
        p for p in STORES if p != ("counts", "Partition 2")]


def test_backup_dry_run_refuses_as_the_backup_would(job: Job):
    from statectl.catalog.lease import Lease

    sdir = store_dir(job.state, "counts", "Partition 0")
    args = ["backup", "--job", JOB, "--state-dir", str(job.state), "--store", "counts"]
    stop = hold_store(sdir)
    try:
        for dry in ([], ["--dry-run"]):
            assert "held open" in job.run(*args, *dry, code=11).stderr
    finally:
        stop()
    bs = open_blobstore(job.where.url, s3=job.where.s3)
    lease = Lease(bs, StoreRef(JOB, "1", "Partition 0", "counts"), operation="backup")
    lease.acquire()  # another backup of the store runs
    try:
        before = job.where.listing()
        for dry in (["--dry-run"], []):
            assert "another backup" in job.run(*args, *dry, code=11).stderr
        assert job.where.listing() == before
    finally:
        lease.release()
        bs.close()


def test_backup_dry_run_with_kafka_commits_no_checkpoint(cli, tansu, tmp_path: Path):
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from tests.integration.test_kafka_checkpoints import Topic

    job = f"pv_{uuid.uuid4().hex[:8]}"
    topic = Topic(tansu.bootstrap, job).create(tansu)
    (tmp_path / "blobs").mkdir()
    where = Where(f"file://{tmp_path / 'blobs'}", {})
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 300, 128, seed=1)
    args = ["backup", *where.args(), "--kafka", tansu.bootstrap, "--job", job, "--store", "counts",
            "--state-dir", str(state)]
    plan = json.loads(cli(*args, "--dry-run", "-o", "json").stdout)
    assert topic.records() == [] and where.listing() == {}
    assert plan["previous_snapshot_id"] is None and plan["files_uploaded"] == plan["files_total"] > 0
    done = json.loads(cli(*args, "-o", "json").stdout)
    assert done["files_uploaded"] == plan["files_uploaded"]
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        assert log.latest(StoreRef(job, "1", "Partition 0", "counts")) == (done["checkpoint_id"], done["snapshot_id"])


def test_backup_dry_run_to_a_new_file_blob_store_makes_no_dir(cli, tmp_path: Path):
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 100, 64, seed=1)
    new = tmp_path / "new" / "blobs"
    args = ["backup", "--blobstore", f"file://{new}", "--job", JOB, "--store", "counts", "--state-dir", str(state)]
    plan = json.loads(cli(*args, "--create", "--dry-run", "-o", "json").stdout)
    assert plan["files_uploaded"] == plan["files_total"] > 0 and not (tmp_path / "new").exists()
    assert "does not exist" in cli(*args, "--dry-run", code=10).stderr
    done = json.loads(cli(*args, "--create", "-o", "json").stdout)
    assert done["files_uploaded"] == plan["files_uploaded"] and new.is_dir()


def test_restore_all_with_read_only_credentials(cli, seaweed_auth, tmp_path: Path):
    """Read-only credentials suffice, as for one restore: each store is read unpinned, with a note."""
    bucket = seaweed_auth.make_bucket()
    url = f"s3://{bucket}/p"

    def env(key: str, secret: str) -> dict[str, str]:
        return {"STATECTL_S3_ENDPOINT": seaweed_auth.endpoint, "STATECTL_S3_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}

    state = tmp_path / "state"
    for i, (s, t) in enumerate(STORES[:2]):
        make_store(store_dir(state, s, t), 100, 64, seed=i)
        cli("backup", "--blobstore", url, "--job", JOB, "--store", s, "--task", t, "--state-dir", str(state),
            env=env(seaweed_auth.access_key, seaweed_auth.secret_key))
    new = tmp_path / "new"
    doc = json.loads(cli("restore", "--blobstore", url, "--job", JOB, "--state-dir", str(new), "--all", "-o", "json",
                         env=env(seaweed_auth.readonly_access_key, seaweed_auth.readonly_secret_key)).stdout)
    assert doc["failures"] == [] and pairs(doc) == STORES[:2]
    assert all(any("pin" in n for n in r["notes"]) for r in doc["results"])
    for s, t in STORES[:2]:
        assert fingerprint(store_dir(new, s, t)) == fingerprint(store_dir(state, s, t))


@pytest.mark.timeout(180)
def test_sigterm_during_restore_all_stops_every_store_in_flight(tmp_path: Path):
    """The stores restoring at once stop at their next bytes (each staged dir removed, nothing swapped in):
    exit 130 without waiting for them to finish."""
    import signal
    import subprocess

    from tests.tools.standby_helpers import STATECTL, clean_env, cli, wait_until

    (tmp_path / "blobs").mkdir()
    where = ["--blobstore", f"file://{tmp_path / 'blobs'}", "--job", JOB]
    state = tmp_path / "state"
    for i, (s, t) in enumerate(STORES[:2]):
        for n in range(6):  # six SST files: six blob downloads each
            make_store(store_dir(state, s, t), 50, 64, seed=10 * i + n, start=1000 * n)
        cli(tmp_path, "backup", *where, "--store", s, "--task", t, "--state-dir", str(state))
    new = tmp_path / "new"
    env = dict(clean_env(tmp_path), STATECTL_FAILPOINTS="during-download=sleep:2")  # ~12 s a store
    proc = subprocess.Popen([STATECTL, "restore", *where, "--state-dir", str(new), "--all"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def staged() -> list[str]:
        return [p.name for p in (new / "counts").glob(".*")] if (new / "counts").is_dir() else []

    wait_until(lambda: len(staged()) == 2 or proc.poll() is not None, timeout=60, why="both stores staged")
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert staged() == [] and sorted(p.name for p in (new / "counts").iterdir()) == []
