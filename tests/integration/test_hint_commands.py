"""Every command a failing invocation's hint prints is run, and addresses the same blob store, job and broker
(statectl.cli.hints): after ``--blobstore s3://... --s3-endpoint ...`` a hint's ``snapshots list`` lists that
blob store, not the local default. A table of failing invocations, one per hint site that can be reached
from the command line, against file:// and SeaweedFS (given by flags only: a hint that dropped
--s3-endpoint would go to AWS and fail), and Tansu where the hint needs Kafka. Each hint command runs as it
is printed (plus ``-o json``), and what it reports is checked to be of the same blob store, job or topic."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from statectl.blobstore import open_blobstore
from statectl.catalog.lease import lease_key
from statectl.catalog.refs import StoreRef
from statectl.cli.main import app
from statectl.local.layout import store_dir
from tests.tools.genstore import make_store
from tests.tools.standby_helpers import Follower, isolate_cli, wait_until

JOB, STORE = "page-views", "counts"
REF = StoreRef(JOB, "1", "Partition 0", STORE)
COMMAND = re.compile(r'"(statectl [^"]+)"|\'(statectl [^\']+)\'')


def hint_commands(stderr: str) -> list[list[str]]:
    """The commands of the one ``Hint:`` line, each as its argv."""
    hints = [line for line in stderr.splitlines() if line.startswith("Hint: ")]
    assert len(hints) == 1, stderr
    return [shlex.split(m.group(1) or m.group(2)) for m in COMMAND.finditer(hints[0])]


def run(*args: str, code: int | None = 0):
    r = CliRunner().invoke(app, list(args))
    if code is not None:
        assert r.exit_code == code, (args, r.exit_code, r.stdout, r.stderr)
    return r


def run_json(argv: list[str], code: int = 0) -> Any:
    """A hint's command as printed (``statectl`` then its words), with ``-o json`` in front: its result."""
    assert argv[0] == "statectl", argv
    return json.loads(run("-o", "json", *argv[1:], code=code).stdout)


@dataclass
class World:
    url: str
    where: list[str]  # the flags that name the blob store: --blobstore, and --s3-endpoint for S3
    bs: Any
    tmp: Path
    expired: str = ""  # the checkpoint id of a snapshot retention expired

    @property
    def state(self) -> Path:
        return self.tmp / "state"

    def backup(self, store: str = STORE, task: str = "Partition 0", *extra: str) -> dict:
        return json.loads(run("backup", *self.where, "--job", JOB, "--store", store, "--task", task, "--state-dir",
                              str(self.state), *extra, "-o", "json").stdout)

    def other(self, name: str) -> str:
        """Another blob store URL beside this one, that does not exist."""
        if self.url.startswith("file:"):
            return f"file://{self.tmp / name}"
        return f"s3://nosuchbucket-{uuid.uuid4().hex[:8]}/x"


@pytest.fixture(params=["file", "s3"])
def world(request, tmp_path: Path, monkeypatch) -> World:
    """A blob store with two snapshots of counts (the first expired by retention) and one of totals, all of
    task Partition 0 of job page-views, named on the command line only."""
    isolate_cli(tmp_path, monkeypatch)
    if request.param == "file":
        url = f"file://{tmp_path / 'blobs'}"
        where, bs = ["--blobstore", url], open_blobstore(url, create=True)
    else:
        seaweed = request.getfixturevalue("seaweed")
        url = request.getfixturevalue("s3_url")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        where, bs = ["--blobstore", url, "--s3-endpoint", seaweed.endpoint], \
            open_blobstore(url, s3=request.getfixturevalue("s3_options"))
    w = World(url, where, bs, tmp_path)
    make_store(store_dir(w.state, STORE, "Partition 0"), 200, 64, seed=1)
    w.expired = w.backup()["checkpoint_id"]
    make_store(store_dir(w.state, STORE, "Partition 0"), 200, 64, seed=2, start=1000)
    w.backup()  # keep-last 1: the first one is expired, its blobs kept for the grace period
    make_store(store_dir(w.state, "totals", "Partition 0"), 100, 64, seed=3)
    w.backup("totals")
    yield w
    bs.close()


def fails(w: World, args: list[str], code: int) -> list[list[str]]:
    """Run the failing invocation; check its exit code and that its hint holds no secret; its hint's commands."""
    r = run(*args, code=code)
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"):
        assert not os.environ.get(name) or os.environ[name] not in r.stderr.split("Hint: ", 1)[-1]
    return hint_commands(r.stderr)


def one(commands: list[list[str]]) -> list[str]:
    assert len(commands) == 1, commands
    return commands[0]


def lists_jobs(w: World, rows: Any) -> None:
    assert {r["job"] for r in rows} == {JOB} and {r["blobstore"] for r in rows} == {w.url}, rows


def lists_stores(w: World, rows: Any) -> None:
    assert {(r["job"], r["store"], r["task"]) for r in rows} == {(JOB, STORE, "Partition 0"),
                                                                (JOB, "totals", "Partition 0")}, rows
    assert {r["blobstore"] for r in rows} == {w.url}


def lists_snapshots(w: World, rows: Any) -> None:
    assert len(rows) == 1 and rows[0]["checkpoint_id"] != w.expired and rows[0]["blobstore"] == w.url, rows


WHERE_STATE = ["--job", JOB, "--store", STORE]

# (id, failing args after the world's flags, its exit code, what its hint's one command must report)
LISTINGS: list[tuple[str, list[str], int, Callable[[World, Any], None]]] = [
    ("unknown-job", ["snapshots", "list", "--job", "page-vews"], 10, lists_jobs),
    ("unknown-store", ["snapshots", "list", "--job", JOB, "--store", "cunts"], 10, lists_stores),
    ("unknown-task-of-job", ["snapshots", "list", "--job", JOB, "--task", "Partition 9"], 10, lists_stores),
    ("unknown-task-of-store", ["restore", *WHERE_STATE, "--task", "Partition 9", "--state-dir", "state"], 10,
     lists_stores),
    ("store-without-job", ["snapshots", "list", "--store", STORE], 2, lists_jobs),
    ("no-such-snapshot", ["restore", *WHERE_STATE, "--snapshot", "zzzzzzzz", "--target-dir", "out"], 10,
     lists_snapshots),
    ("no-such-snapshot-diff", ["diff", *WHERE_STATE, "--snapshot", "zzzzzzzz", "--state-dir", "state"], 10,
     lists_snapshots),
]


@pytest.mark.parametrize("args, code, check", [c[1:] for c in LISTINGS], ids=[c[0] for c in LISTINGS])
def test_a_listing_hint_lists_the_same_blob_store(world: World, args, code, check):
    argv = one(fails(world, [*args, *world.where], code))
    check(world, run_json(argv))


def test_a_hint_keeps_the_config_file_and_profile(world: World):
    """The blob store from a profile named by --config and --profile: the hint names them too."""
    config = world.tmp / "elsewhere" / "statectl.toml"
    config.parent.mkdir()
    config.write_text(f'[prod]\nblobstore = "{world.url}"\n'
                      + (f's3_endpoint = "{world.where[3]}"\n' if len(world.where) > 2 else ""))
    argv = one(fails(world, ["--config", str(config), "--profile", "prod", "snapshots", "list", "--job", "pv"], 10))
    assert argv[:5] == ["statectl", "--config", str(config), "--profile", "prod"], argv
    lists_jobs(world, run_json(argv))


def test_an_expired_snapshot_says_so_and_its_hint_lists_the_restorable_ones(world: World):
    args = ["restore", *world.where, *WHERE_STATE, "--snapshot", world.expired, "--target-dir", "out"]
    r = run(*args, code=10)
    error = r.stderr.splitlines()[0]
    assert re.match(rf"Error: snapshot blobs/\S+ \(checkpoint {world.expired}\) of page-views-1/Partition 0/counts "
                    rf"in {re.escape(world.url)} was expired by retention at \S+Z \(keep-last 1\): it is no longer "
                    r"restorable; its blobs are kept until \S+Z \(the grace period\), then deleted$", error), error
    assert "--keep-last" in r.stderr and "snapshots copy" in r.stderr
    lists_snapshots(world, run_json(one(hint_commands(r.stderr))))
    # By its full index blob id the reader pin tells it the same way, naming when.
    blob_id = error.split()[2]
    r = run("restore", *world.where, *WHERE_STATE, "--snapshot", blob_id, "--target-dir", "out", code=10)
    assert "was expired by retention at " in r.stderr and "just as" not in r.stderr
    assert not (world.tmp / "out").exists()


def test_lease_hints_name_the_same_store(world: World):
    # lease break without --yes and no terminal: 'lease show' of the same lease.
    argv = one(fails(world, ["lease", "break", *world.where, *WHERE_STATE], 2))
    assert run_json(argv)["store"] == str(REF)
    # A lease held by a backup elsewhere: 'lease break' of the same store's lease breaks it.
    now = time.time()
    world.bs.put_at(lease_key(REF), json.dumps({
        "owner": "o", "host": f"not-{socket.gethostname()}", "pid": 4242, "operation": "backup", "store": str(REF),
        "started": now, "acquired": now, "expires": now + 300, "released": False}).encode())
    argv = one(fails(world, ["backup", *world.where, *WHERE_STATE, "--state-dir", str(world.state)], 11))
    broken = run_json([*argv, "--yes"])
    assert broken["store"] == str(REF) and broken["released"] is True
    world.backup()


def _delete_a_blob(world: World, store: str) -> None:
    rows = json.loads(run("snapshots", "show", *world.where, "--job", JOB, "--store", store, "-o", "json").stdout)
    blob = rows["dir-index"]["files-present"][0]["blobs"][0]["blob-id"]
    world.bs.delete([blob])


def test_a_missing_blob_hint_verifies_the_same_snapshot(world: World):
    _delete_a_blob(world, "totals")
    where = [*world.where, "--job", JOB, "--store", "totals"]
    for args in (["restore", *where, "--target-dir", "out"], ["snapshots", "copy", *where, "--to-job", "pv2"]):
        verified = run_json(one(fails(world, args, 1)), code=1)
        assert verified["blobstore"] == world.url and len(verified["missing"]) == 1, verified


def test_a_missing_blob_store_hint_starts_it_there(world: World):
    missing = world.other("nope")
    where = ["--blobstore", missing, *world.where[2:]]
    r = run("restore", *where, *WHERE_STATE, "--state-dir", str(world.state), code=10)
    if world.url.startswith("s3:"):  # a bucket is made outside statectl
        assert r.stderr.splitlines()[1] == "Hint: create it, or check --blobstore and --s3-endpoint"
        return
    backed_up = run_json(one(hint_commands(r.stderr)))
    assert backed_up["blobstore"] == missing and backed_up["store"] == STORE


def test_copy_hints_name_its_own_flags(world: World):
    target = world.other("target")
    args = ["snapshots", "copy", *world.where, *WHERE_STATE, "--to-blobstore", target]
    r = run(*args, code=10)
    assert r.stderr.splitlines()[0].endswith("does not exist (the target, --to-blobstore)")
    if world.url.startswith("s3:"):
        assert r.stderr.splitlines()[1] == "Hint: create the bucket, or check --to-blobstore and --to-s3-endpoint"
    else:
        copied = run_json(one(hint_commands(r.stderr)))
        assert (copied["blobstore"], copied["to_blobstore"], copied["job"]) == (world.url, target, JOB)
    # The source must exist: its hint does not offer --create.
    r = run("snapshots", "copy", "--blobstore", world.other("gone"), *world.where[2:], *WHERE_STATE, "--to-job", "x",
            "--create", code=10)
    assert "(the source, --blobstore)" in r.stderr and "--create" not in r.stderr.split("Hint: ")[1]
    r = run("snapshots", "copy", *world.where, *WHERE_STATE, code=2)
    assert "--to-blobstore" in r.stderr.split("Hint: ")[1]
    text = run("snapshots", "copy", *world.where, *WHERE_STATE, "--to-job", "pv2").stdout
    assert re.match(rf"copied snapshot blobs/\S+ from page-views-1/Partition 0/counts to pv2-1/Partition 0/counts "
                    rf"in {re.escape(world.url)}: new snapshot blobs/\S+ \(checkpoint \S+\); ", text), text


# -- with Kafka (Tansu) -------------------------------------------------------------------------------------


def test_a_task_without_a_v2_checkpoint_hint_backs_it_up_to_the_same_topic(world: World, tansu):
    job = f"hints-{uuid.uuid4().hex[:8]}"
    kafka = ["--kafka", tansu.bootstrap]
    make_store(store_dir(world.state, STORE, "Partition 1"), 50, 64, seed=4)
    run("backup", *world.where, *kafka, "--job", job, "--store", STORE, "--state-dir", str(world.state))
    args = ["restore", *world.where, *kafka, "--job", job, "--store", STORE, "--task", "Partition 1",
            "--state-dir", str(world.state)]
    backed_up = run_json(one(fails(world, args, 10)))
    assert (backed_up["blobstore"], backed_up["task"]) == (world.url, "Partition 1")
    # It committed to the job's checkpoint topic on the same broker: the restore finds it now.
    restored = json.loads(run(*args, "-o", "json").stdout)
    assert restored["checkpoint_id"] == backed_up["checkpoint_id"]


@pytest.fixture
def drain_job(tansu):
    from statectl.kafka.coordinator import CoordinatorStream

    name = f"hints-drain-{uuid.uuid4().hex[:8]}"
    stream = CoordinatorStream(tansu.bootstrap, name, "1")
    stream.create()
    stream.write_config({"job.name": name, "job.id": "1", "job.drain-monitor.enabled": "true",
                         "app.run.id": "1700000000000-hints"})
    yield name
    stream.close()


def test_drain_hints_name_the_same_job_and_broker(tansu, drain_job, tmp_path, monkeypatch):
    isolate_cli(tmp_path, monkeypatch)
    where = ["--kafka", tansu.bootstrap, "--job", drain_job]
    status = run_json(one(hint_commands(run("drain", "cancel", *where, code=10).stderr)))
    assert (status["job"], status["run_id"]) == (drain_job, "1700000000000-hints")
    started = run_json(one(hint_commands(run("drain", "wait", *where, "--timeout", "1", code=10).stderr)))
    assert started["run_id"] == "1700000000000-hints" and started["created"] is True
    assert json.loads(run("drain", "status", *where, "-o", "json").stdout)["notifications"][0]["uuid"] == \
        started["uuid"]


@pytest.mark.timeout(300)
def test_a_promote_without_a_replica_hint_follows_that_replica(tansu, tmp_path, monkeypatch):
    isolate_cli(tmp_path, monkeypatch)
    topic = tansu.create_topic(f"hints-changelog-{uuid.uuid4().hex[:8]}")
    (tmp_path / "state").mkdir()
    args = ["--kafka", tansu.bootstrap, "--job", "hints-standby", "--task", "Partition 0", "--store", STORE,
            "--state-dir", str(tmp_path / "state"), "--changelog", topic, "--partition", "0"]
    r = run("standby", "promote", *args, code=10)
    replica = Path(re.search(r"^Error: no replica at (\S+) ", r.stderr, re.M).group(1))
    argv = one(hint_commands(r.stderr))
    assert argv[:3] == ["statectl", "standby", "follow"]
    follower = Follower(tmp_path, argv[3:])
    try:
        wait_until(lambda: follower.assert_running() or (replica / "OFFSET-v2").exists(), 120,
                   f"the follower keeps the replica at {replica}")
    finally:
        follower.terminate()
