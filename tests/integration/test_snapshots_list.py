"""Discovery (issue 22, point 3): `snapshots list` lists what a blob store holds level by level (jobs; a
job's stores and tasks; a store's snapshots), against file:// and a real SeaweedFS; a mistyped job, job
id, store or task is exit 10 naming the nearest existing ones, in list and in restore."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statectl.blobstore import open_blobstore
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.cli.main import app
from statectl.engine.backup import BackupOptions, backup
from statectl.local.layout import store_dir
from tests.tools.genstore import make_store
from tests.tools.standby_helpers import isolate_cli

REFS = [StoreRef("page-views", "1", "Partition 0", "counts"), StoreRef("page-views", "1", "Partition 1", "counts"),
        StoreRef("page-views", "1", "Partition 0", "totals"), StoreRef("page-views", "2", "Partition 0", "counts"),
        StoreRef("clicks", "1", "Partition 0", "sessions")]


@pytest.fixture(params=["file", "s3"])
def where(request, tmp_path: Path, monkeypatch) -> tuple[str, object]:
    """(blob store URL, opened store) with the CLI's environment pointed at it."""
    isolate_cli(tmp_path, monkeypatch)
    if request.param == "file":
        url = f"file://{tmp_path / 'blobs'}"
        bs = open_blobstore(url)
    else:
        seaweed = request.getfixturevalue("seaweed")
        url = request.getfixturevalue("s3_url")
        monkeypatch.setenv("STATECTL_S3_ENDPOINT", seaweed.endpoint)
        monkeypatch.setenv("STATECTL_S3_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
        bs = open_blobstore(url, s3=request.getfixturevalue("s3_options"))
    yield url, bs
    bs.close()


def _fill(bs, tmp_path: Path) -> dict[StoreRef, str]:
    """One backup of each of REFS (two of counts/Partition 0 of page-views-1); the latest snapshot ids."""
    latest = {}
    for i, ref in enumerate(REFS + REFS[:1]):
        d = store_dir(tmp_path / "state" / ref.job / ref.job_id, ref.store, ref.task)
        make_store(d, 50 + i, 64, seed=i)
        latest[ref] = backup(BackupOptions(ref, d, keep_last=3), bs, BlobCheckpointStore(bs)).snapshot_id
    return latest


def _run(*args: str, code: int = 0):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def test_list_each_level(where, tmp_path: Path):
    url, bs = where
    latest = _fill(bs, tmp_path)
    # A foreign object under checkpoints/ is not a job.
    bs.put_at("checkpoints/README.json", b"{}")

    jobs = json.loads(_run("snapshots", "list", "--blobstore", url, "-o", "json").stdout)
    assert [(j["job"], j["job_id"], j["stores"], j["tasks"], j["checkpoints"]) for j in jobs] == [
        ("clicks", "1", ["sessions"], 1, 1), ("page-views", "1", ["counts", "totals"], 3, 4),
        ("page-views", "2", ["counts"], 1, 1)]
    assert {j["blobstore"] for j in jobs} == {url}
    text = _run("snapshots", "list", "--blobstore", url).stdout
    assert text.startswith(f"jobs in blob store {url}:\n") and "page-views" in text and "clicks" in text

    tasks = json.loads(_run("snapshots", "list", "--blobstore", url, "--job", "page-views", "-o", "json").stdout)
    assert [(t["store"], t["task"], t["snapshots"]) for t in tasks] == [
        ("counts", "Partition 0", 2), ("counts", "Partition 1", 1), ("totals", "Partition 0", 1)]
    assert tasks[0]["latest_snapshot_id"] == latest[REFS[0]] and {t["blobstore"] for t in tasks} == {url}
    text = _run("snapshots", "list", "--blobstore", url, "--job", "page-views", "--job-id", "2").stdout
    assert text.startswith(f"stores and tasks of job page-views (id 2) in blob store {url}:")
    assert latest[REFS[3]] in text and "totals" not in text

    # --task without --store: that task's stores.
    only = json.loads(_run("snapshots", "list", "--blobstore", url, "--job", "page-views", "--task", "Partition 1",
                           "-o", "json").stdout)
    assert [(t["store"], t["task"]) for t in only] == [("counts", "Partition 1")]
    r = _run("snapshots", "list", "--blobstore", url, "--job", "page-views", "--task", "Partition 9", code=10)
    assert r.stderr.startswith("Error: unknown task 'Partition 9' of job 'page-views' (id 1)")
    assert "Hint: did you mean 'Partition " in r.stderr

    rows = json.loads(_run("snapshots", "list", "--blobstore", url, "--job", "page-views", "--store", "counts",
                           "--task", "Partition 0", "-o", "json").stdout)
    assert len(rows) == 2 and rows[0]["snapshot_id"] == latest[REFS[0]] and rows[0]["blobstore"] == url
    # Each element says which of the three listings it is of (docs/json.md).
    assert ({j["kind"] for j in jobs}, {t["kind"] for t in tasks + only}, {r["kind"] for r in rows}) == (
        {"job"}, {"task_store"}, {"snapshot"})


def test_an_empty_blob_store_lists_no_jobs(where):
    url, _ = where
    assert _run("snapshots", "list", "--blobstore", url).stdout == f"no jobs in blob store {url}\n"
    assert json.loads(_run("snapshots", "list", "--blobstore", url, "-o", "json").stdout) == []
    r = _run("snapshots", "list", "--blobstore", url, "--job", "page-views", code=10)
    assert "unknown job 'page-views'" in r.stderr and "holds no snapshots at all" in r.stderr


@pytest.mark.parametrize("args, message, nearest", [
    (["--job", "page-veiws"], "unknown job 'page-veiws'", "did you mean 'page-views'?"),
    (["--job", "page-veiws", "--store", "counts"], "unknown job 'page-veiws'", "did you mean 'page-views'?"),
    (["--job", "page-views", "--job-id", "3"], "job 'page-views' has no snapshots with job id '3'",
     "its job ids there: 1, 2"),
    (["--job", "page-views", "--store", "count"], "unknown store 'count' of job 'page-views' (id 1)",
     "did you mean 'counts'?"),
    (["--job", "page-views", "--store", "counts", "--task", "Partition 7"],
     "unknown task 'Partition 7' of store 'counts'", "did you mean 'Partition "),
    (["--job", "clicks", "--store", "sessions", "--task", "zzz"], "unknown task 'zzz'",
     "the tasks of the store: 'Partition 0'"),
])
def test_a_mistyped_name_is_not_found_with_the_nearest(where, tmp_path: Path, args, message, nearest):
    url, bs = where
    _fill(bs, tmp_path)
    for command in (["snapshots", "list"], ["snapshots", "show"], ["restore", "--target-dir", str(tmp_path / "r")]):
        if command != ["snapshots", "list"] and "--store" not in args:  # show and restore need a store
            continue
        r = _run(*command, "--blobstore", url, *args, code=10)
        error, hint = r.stderr.splitlines()[:2]
        assert error.startswith(f"Error: {message}") and url in error, r.stderr
        assert hint.startswith(f"Hint: {nearest}"), r.stderr
    assert not (tmp_path / "r").exists()


def test_store_needs_job(where):
    url, _ = where
    r = _run("snapshots", "list", "--blobstore", url, "--store", "counts", code=2)
    assert "--store needs --job" in r.stderr


def test_with_kafka_a_store_only_the_checkpoint_topic_knows_is_listed_not_unknown(tansu, tmp_path: Path, monkeypatch):
    """A snapshot a Samza job committed to its checkpoint topic has no catalog record: with --kafka, list
    shows the topic's latest checkpoint instead of calling the job unknown; without it, the blob store's
    catalog is all there is (exit 10, nearest names)."""
    import uuid

    from statectl.catalog.kafka_log import KafkaCheckpointLogs
    from tests.integration.test_kafka_checkpoints import SEED_V2, Topic, samza_key

    for name in list(os.environ):
        if name.startswith("STATECTL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    job = f"pv_{uuid.uuid4().hex[:8]}"
    Topic(tansu.bootstrap, job).create(tansu).produce((samza_key("Partition 0"), SEED_V2))
    url = f"file://{tmp_path / 'blobs'}"
    bs = open_blobstore(url)
    cps = BlobCheckpointStore(bs, KafkaCheckpointLogs(tansu.bootstrap))
    try:
        ref = StoreRef(job, "1", "Partition 0", "counts")
        d = store_dir(tmp_path / "state", ref.store, ref.task)
        make_store(d, 100, 64, seed=1)
        snapshot_id = backup(BackupOptions(ref, d), bs, cps).snapshot_id
        bs.delete([i.key for i in bs.list("checkpoints/")])  # as if a Samza job had committed it
    finally:
        cps.close()
        bs.close()
    where = ["--blobstore", url, "--job", job, "--store", "counts"]
    rows = json.loads(_run("snapshots", "list", *where, "--kafka", tansu.bootstrap, "-o", "json").stdout)
    assert [r["snapshot_id"] for r in rows] == [snapshot_id] and rows[0]["files"] > 0
    r = _run("snapshots", "list", *where, code=10)
    assert f"unknown job '{job}'" in r.stderr
    # The jobs level: the job only its checkpoint topic knows is listed (its name as the topic spells it).
    jobs = json.loads(_run("snapshots", "list", "--blobstore", url, "--kafka", tansu.bootstrap, "-o", "json").stdout)
    mine = [j for j in jobs if j["job"] == job.replace("_", "-")]
    assert [(j["job_id"], j["stores"], j["tasks"], j["latest_checkpoint_id"]) for j in mine] == [
        ("1", ["counts", "second"], 2, rows[0]["checkpoint_id"])], jobs
    assert json.loads(_run("snapshots", "list", "--blobstore", url, "-o", "json").stdout) == []
    # The job's stores and tasks, from its checkpoint topic.
    tasks = json.loads(_run("snapshots", "list", "--blobstore", url, "--job", job, "--kafka", tansu.bootstrap,
                            "-o", "json").stdout)
    assert [(t["store"], t["task"], t["snapshots"], t["latest_snapshot_id"]) for t in tasks] == [
        ("counts", "Partition 0", 1, snapshot_id), ("second", "Partition 0", 1, "blob-second")]  # the job's own
    for command in (["snapshots", "list"], ["restore", "--target-dir", str(tmp_path / "r")]):
        r = _run(*command, "--blobstore", url, "--job", job, "--store", "cuonts", "--kafka", tansu.bootstrap,
                 code=10)
        assert f"unknown store 'cuonts' of job '{job}'" in r.stderr and "did you mean 'counts'" in r.stderr
    _run("snapshots", "list", "--blobstore", url, "--job", job, code=10)
    # A job with no checkpoint topic at all: unknown, not a Kafka error.
    r = _run("snapshots", "list", "--blobstore", url, "--job", job + "x", "--store", "counts", "--kafka",
             tansu.bootstrap, code=10)
    assert f"unknown job '{job}x'" in r.stderr
