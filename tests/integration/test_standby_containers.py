"""Whole containers and the failover orchestration, on Tansu with real processes.

A job of 12 tasks (changelog partitions given out in lexicographic task-name order, as Samza's
JobModelCalculator does) in two active containers and their standby containers, two stores with a
changelog each. Container 0 holds three tasks, one of them ``Partition 10`` (changelog partition 2):
``follow --container 0`` follows 3 tasks x 2 stores in one process, ``promote --container 0`` and
``failover --container 0`` move them all, and every store equals an independent replay of its own partition.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from statectl.engine.standby.replica import standby_dir
from statectl.formats.coordinator import (
    SET_CONTAINER_HOST,
    decode_container_host,
    decode_key,
    encode_key,
    standby_task_name,
)
from statectl.kafka.coordinator import CoordinatorStream
from tests.tools.standby_helpers import (
    ChangelogWriter,
    Follower,
    apply_records,
    cli,
    cli_here,
    json_objects,
    offsets_of,
    read_store,
    wait_until,
)

SYSTEM = "kafka"
KAFKA_FACTORY = "org.apache.samza.system.kafka.KafkaSystemFactory"
STORES = ("counts", "sums")
TASKS = [f"Partition {n}" for n in range(12)]
MAPPING = {t: i for i, t in enumerate(sorted(TASKS))}  # JobModelCalculator's first assignment
CONTAINER0 = ["Partition 0", "Partition 10", "Partition 5"]  # the rest in container 1
HOST = socket.gethostname()


def records(tag: int, n: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    for j in range(start, start + n):
        if j % 7 == 6:
            out.append((b"t%03d-%04d" % (tag, j - 3), None))
        else:
            out.append((b"t%03d-%04d" % (tag, j), b"v%d-%d" % (tag, j)))
    return out


@dataclass
class Job:
    bootstrap: str
    tmp: Path
    job: str
    topics: dict[str, str]
    writers: dict[tuple[str, int], ChangelogWriter]

    @property
    def state(self) -> Path:
        return self.tmp / "state"

    def flags(self, *extra: str) -> list[str]:
        return ["--kafka", self.bootstrap, "--job", self.job, "--state-dir", str(self.state), *extra]

    def writer(self, store: str, task: str) -> ChangelogWriter:
        return self.writers[(store, MAPPING[task])]

    def key(self, store: str, task: str) -> str:
        return f"{SYSTEM}.{self.topics[store]}.{MAPPING[task]}"

    def locality(self) -> dict[str, str]:
        with CoordinatorStream(self.bootstrap, self.job, "1") as cs:
            cs.require()
            return cs.locality().container_hosts

    def end(self) -> int:
        with CoordinatorStream(self.bootstrap, self.job, "1") as cs:
            cs.require()
            return max((r.offset for r in cs._topic.latest.values()), default=-1) + 1


def write_job(j: Job, *, config: dict[str, str] | None = None) -> None:
    """The coordinator stream a Samza job coordinator leaves for two containers with standbys (RF 2)."""
    cfg = {"job.name": j.job, "job.id": "1", "job.default.system": SYSTEM,
           f"systems.{SYSTEM}.samza.factory": KAFKA_FACTORY, "job.standbytasks.replication.factor": "2",
           **{f"stores.{s}.changelog": f"{SYSTEM}.{t}" for s, t in j.topics.items()},
           **{f"stores.{s}.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory"
              for s in j.topics}, **(config or {})}
    with CoordinatorStream(j.bootstrap, j.job, "1") as cs:
        cs.create()
        cs.write_config(cfg)
        for task in TASKS:
            container = "0" if task in CONTAINER0 else "1"
            standby = standby_task_name(task, 0)
            cs.write_changelog_partition(task, MAPPING[task])
            cs.write_changelog_partition(standby, MAPPING[task])
            cs.write_task_container(task, container)
            cs.write_task_container(standby, f"{container}-0")
            cs.write_task_mode(task, "Active")
            cs.write_task_mode(standby, "Standby")
        cs.write_container_host("0", "host-a")
        cs.write_container_host("1", "host-b")
        cs.write_container_host("0-0", HOST)  # this host: container 0's standby
        cs.write_container_host("1-0", "host-c")


@pytest.fixture
def job(tansu, tmp_path: Path):
    tag = uuid.uuid4().hex[:10]
    topics = {s: tansu.create_topic(f"ct-{s}-{tag}", partitions=12) for s in STORES}
    writers = {}
    for si, s in enumerate(STORES):
        for p in range(12):
            w = writers[(s, p)] = ChangelogWriter(tansu.bootstrap, topics[s], p)
            w.send(records(si * 100 + p, 20 + p))
    (tmp_path / "state").mkdir()
    j = Job(tansu.bootstrap, tmp_path, f"ct-job-{tag}", topics, writers)
    try:
        yield j
    finally:
        for w in writers.values():
            w.close()


@pytest.fixture
def followers():
    started: list[Follower] = []
    yield started
    for f in started:
        f.kill()


def replicas_at_end(j: Job, f: Follower | None = None) -> bool:
    if f is not None:
        f.assert_running()
    for task in CONTAINER0:
        for s in STORES:
            try:
                if offsets_of(standby_dir(j.state, s, task)) != {j.key(s, task): str(j.writer(s, task).last_offset)}:
                    return False
            except (OSError, ValueError):
                return False
    return True


def follow_container(j: Job, followers: list[Follower], *extra: str) -> Follower:
    f = Follower(j.tmp, ["--container", "0", *j.flags(), *extra])
    followers.append(f)
    wait_until(lambda: replicas_at_end(j, f), 120, f"every replica of container 0 at its end\n{f.describe()}")
    return f


def assert_promoted(j: Job) -> None:
    """Every store of container 0 in its task's active dir, equal to an independent replay of its partition."""
    for task in CONTAINER0:
        for s in STORES:
            active = j.state / s / task.replace(" ", "_")
            w = j.writer(s, task)
            assert read_store(active) == apply_records(w.records()), (task, s)
            assert offsets_of(active) == {j.key(s, task): str(w.last_offset)}
            assert not standby_dir(j.state, s, task).exists()


@pytest.mark.timeout(400)
def test_a_container_is_followed_in_one_process_killed_resumed_and_promoted(job: Job, followers):
    j = job
    write_job(j)
    f = follow_container(j, followers)
    status = json.loads(cli_here(j.tmp, "standby", "status", "--state-dir", str(j.state), "-o", "json").stdout)
    mine = [r for r in status if r["container"] == "0"]
    assert sorted((r["task"], r["store"]) for r in mine) == sorted((t, s) for t in CONTAINER0 for s in STORES)
    assert {r["follower_pid"] for r in mine} == {f.pid}  # one process holds them all
    assert all(r["task"] in CONTAINER0 for r in status)  # container 1's tasks are not followed

    # kill -9 mid-stream, write more, resume: each replica goes on from its own offset
    f.kill()
    for s in STORES:
        for task in CONTAINER0:
            j.writer(s, task).send(records(900 + MAPPING[task], 15, start=500))
    f2 = follow_container(j, followers, "--metrics-port", "0", "--metrics-addr", "127.0.0.1")
    import re
    import urllib.request

    url = re.search(r"serving metrics on (\S+)", f2.stderr()).group(1)
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    up = [line for line in text.splitlines() if line.startswith("statectl_standby_follower_up{")]
    assert len(up) == 6 and all(line.endswith(" 1.0") for line in up), text  # a series per task and store
    assert all(f'task="{t}"' in text for t in CONTAINER0)
    for s in STORES:  # a tail for the promote to catch up
        for task in CONTAINER0:
            j.writer(s, task).send(records(950 + MAPPING[task], 5, start=800))
    p = cli(j.tmp, "standby", "promote", "--container", "0", *j.flags(), "-o", "json")
    r = json.loads(p.stdout)
    assert f2.wait(60) == 0, f2.describe()
    assert sorted((x["task"], x["store"], x["status"]) for x in r["stores"]) == sorted(
        (t, s, "promoted") for t in CONTAINER0 for s in STORES)
    assert_promoted(j)
    assert j.locality()["0"] == HOST  # the container now runs here; its standby's mapping is left alone
    assert j.locality()["0-0"] == HOST


def coordinator_records(j: Job, start: int) -> list[tuple[bytes, bytes | None]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=j.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(f"__samza_coordinator_{j.job}_1", 0)
        c.assign([tp])
        c.seek(tp, start)
        out: list[tuple[bytes, bytes | None]] = []
        end = c.end_offsets([tp])[tp]
        while c.position(tp) < end:
            for recs in c.poll(timeout_ms=2000).values():
                out += [(r.key, r.value) for r in recs]
        return out
    finally:
        c.close()


def assert_locality_messages(j: Job, start: int) -> None:
    """What the failover wrote: the standby container's mapping deleted (a null value, as
    CoordinatorStreamStore.delete), then the active container's set to the standby host (as
    LocalityManager.writeContainerToHostMapping), in that order, once each."""
    got = [(k, v) for k, v in coordinator_records(j, start) if decode_key(k)[0] == SET_CONTAINER_HOST]
    assert [k for k, _ in got] == [encode_key(SET_CONTAINER_HOST, "0-0"), encode_key(SET_CONTAINER_HOST, "0")]
    assert got[0][1] is None
    assert decode_container_host(got[1][1]) == HOST
    loc = j.locality()
    assert "0-0" not in loc and loc["0"] == HOST and loc["1"] == "host-b" and loc["1-0"] == "host-c"


@pytest.mark.timeout(400)
def test_failover_dry_run_then_failover_writes_the_locality_messages_in_the_seeds_order(job: Job, followers):
    j = job
    write_job(j)
    f = follow_container(j, followers)
    start = j.end()
    dry = json.loads(cli_here(j.tmp, "standby", "failover", "--container", "0", *j.flags(), "--dry-run", "-o",
                              "json").stdout)  # a dry run: in-process
    assert [s["step"] for s in dry["steps"]] == ["find-standby-host", "delete-standby-locality",
                                                 "point-active-locality", "stop-standby", "promote", "report"]
    assert all(s["status"] == "planned" for s in dry["steps"]) and dry["standby_host"] == HOST
    assert j.end() == start and f.proc.poll() is None  # nothing written, the follower runs on
    assert replicas_at_end(j, f)

    r = json.loads(cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), "-o", "json").stdout)
    assert [(s["step"], s["status"]) for s in r["steps"]] == [
        ("find-standby-host", "done"), ("delete-standby-locality", "done"), ("point-active-locality", "done"),
        ("stop-standby", "done"), ("promote", "done"), ("report", "done")]
    # Every store the dry run planned was promoted, from the replica it named, in the restore mode it named.
    assert sorted((x["task"], x["store"], x["replica_dir"], x["restore_mode"], "promoted") for x in r["stores"]) == \
        sorted((x["task"], x["store"], x["replica_dir"], x["restore_mode"], "promoted") for x in dry["stores"])
    assert f.wait(60) == 0, f.describe()
    assert_locality_messages(j, start)
    assert_promoted(j)
    again = json.loads(cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), "-o", "json").stdout)
    assert {s["status"] for s in again["steps"]} == {"done-earlier"}  # finished: nothing done twice
    assert_locality_messages(j, start)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("failpoint", ["failover-step=kill", "failover-step=1*off->kill", "failover-step=2*off->kill",
                                       "failover-step=3*off->kill", "failover-promoted=2*off->kill"])
def test_a_failover_killed_at_any_step_is_finished_by_a_rerun(job: Job, followers, failpoint: str):
    j = job
    write_job(j)
    f = follow_container(j, followers)
    start = j.end()
    env = dict(os.environ, STATECTL_FAILPOINTS=failpoint)
    import subprocess

    from tests.tools.standby_helpers import STATECTL, clean_env

    p = subprocess.run([STATECTL, "standby", "failover", "--container", "0", *j.flags()], cwd=j.tmp,
                       env=dict(clean_env(j.tmp), STATECTL_FAILPOINTS=env["STATECTL_FAILPOINTS"]),
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == -9, (p.returncode, p.stdout, p.stderr)
    r = json.loads(cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), "-o", "json").stdout)
    assert r["resumed"] is True
    assert "done-earlier" in {s["status"] for s in r["steps"]}
    f.wait(60)
    assert_locality_messages(j, start)
    assert_promoted(j)


@pytest.mark.timeout(400)
def test_a_hold_on_the_active_state_stops_failover_with_exit_11_before_anything_is_written(job: Job, followers):
    from rocksdict import Rdict

    j = job
    write_job(j)
    f = follow_container(j, followers)
    held = j.state / "sums" / "Partition_10"
    held.parent.mkdir(parents=True)
    db = Rdict(str(held))  # a running active task of the container still holds its store
    try:
        start = j.end()
        p = cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), code=11)
        assert len(p.stderr.strip().splitlines()) <= 2, p.stderr
        assert j.end() == start  # no locality message
        f.assert_running()  # the standby is not stopped
        assert replicas_at_end(j, f)
    finally:
        db.close()


@pytest.mark.timeout(400)
def test_promoting_one_task_of_a_container_does_not_repoint_the_container(job: Job, followers):
    j = job
    write_job(j)
    task = "Partition 10"
    f = Follower(j.tmp, ["--task", task, "--store", "counts", *j.flags()])
    followers.append(f)
    replica = standby_dir(j.state, "counts", task)
    w = j.writer("counts", task)
    wait_until(lambda: (offsets_of(replica) or {}).get(j.key("counts", task)) == str(w.last_offset), 90, f.describe())
    p = cli(j.tmp, "standby", "promote", "--task", task, "--store", "counts", *j.flags(), "-o", "json")
    r = json_objects(p.stdout)[-1]
    assert r["locality_updated"] is False
    assert "also runs tasks 'Partition 0', 'Partition 5'" in p.stderr
    assert j.locality()["0"] == "host-a"


def test_container_flags_are_checked_before_anything(job: Job):
    j = job
    write_job(j)
    p = cli(j.tmp, "standby", "follow", "--container", "0", "--task", "Partition 0", *j.flags(), code=2)
    assert "--task excludes it" in p.stderr
    p = cli(j.tmp, "standby", "promote", "--container", "0", "--store", "counts", *j.flags(), code=2)
    assert "container moves whole" in p.stderr
    p = cli(j.tmp, "standby", "follow", "--container", "7", *j.flags(), code=10)
    assert "no task to container '7'" in p.stderr
    p = cli(j.tmp, "standby", "failover", "--container", "1", *j.flags(), code=2)  # its standby is on host-c
    assert "host-c" in p.stderr
    assert not (j.state / ".statectl-standby").exists()


@pytest.mark.timeout(400)
def test_a_job_without_samza_standbys_fails_over_with_host(job: Job, followers):
    """statectl's follower as the only standby (the job runs none: no standby container in its locality):
    failover needs --host to know the standby host, then moves the container as usual."""
    j = job
    write_job(j, config={"job.standbytasks.replication.factor": "1",
                         "task.transactional.state.restore.enabled": "false"})
    with CoordinatorStream(j.bootstrap, j.job, "1") as cs:
        cs.delete_container_host("0-0")
    follow_container(j, followers)
    start = j.end()
    p = cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), code=10)
    assert "has no locality mapping" in p.stderr and "--host" in p.stderr
    assert j.end() == start
    r = json.loads(cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), "--host", HOST,
                       "-o", "json").stdout)
    assert r["standby_host"] == HOST
    assert dict((s["step"], s["status"]) for s in r["steps"])["delete-standby-locality"] == "skipped"
    assert_promoted(j)
    assert j.locality()["0"] == HOST


@pytest.mark.timeout(500)
def test_a_container_with_a_blob_store_restored_store_fails_over_onto_its_pre_restores(job: Job, followers):
    """A mixed job: two stores restored from their changelogs, one from the blob store (no changelog). The
    container's changelog replicas and its pre-restores (follow --container --pre-restore) are both fenced by
    failover, and each store goes where the job's next start keeps it."""
    from statectl.catalog.refs import StoreRef
    from statectl.engine.backup import BackupOptions, backup
    from statectl.formats.checkpoint import BLOB_STORE_FACTORY
    from statectl.session import Session
    from tests.tools.genstore import make_store
    from tests.tools.standby_helpers import clean_env

    j = job
    blobs = f"file://{j.tmp / 'blobs'}"
    write_job(j, config={"stores.dims.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
                         "stores.dims.restore.factories": BLOB_STORE_FACTORY,
                         "stores.dims.backup.factories": BLOB_STORE_FACTORY,
                         "task.checkpoint.read.versions": "2,1"})  # its start reads the v2 checkpoints backup writes
    checkpoints = {}
    for i, task in enumerate(CONTAINER0):  # each task's snapshot, committed to the job's checkpoint topic
        src = j.tmp / "active-host" / task.replace(" ", "_")
        make_store(src, 500 + i, 128, seed=i)
        with Session.from_env(kafka=j.bootstrap, blobstore=blobs, env=clean_env(j.tmp),
                              create_blobstore=True) as session:
            r = backup(BackupOptions(StoreRef(j.job, "1", task, "dims"), src, keep_local_checkpoint=False),
                       session.blobstore, session.catalog)
        checkpoints[task] = r.checkpoint_id
    f = follow_container(j, followers)
    pre = Follower(j.tmp, ["--container", "0", "--pre-restore", "--blobstore", blobs, *j.flags()])
    followers.append(pre)

    kept = j.tmp / "state.statectl-standby" / "prerestore" / "dims"  # in the standby root, beside the state dir

    def pre_restored() -> bool:
        pre.assert_running()
        return all((kept / f"{t.replace(' ', '_')}-{cp}").is_dir() and not any(
            kept.glob(f"{t.replace(' ', '_')}-*.tmp*")) for t, cp in checkpoints.items())

    wait_until(pre_restored, 120, f"every task's snapshot pre-restored\n{pre.describe()}")
    r = json.loads(cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), "--blobstore", blobs,
                       "-o", "json").stdout)
    assert f.wait(60) == 0, f.describe()
    assert pre.wait(60) == 0, pre.describe()
    modes = {(x["task"], x["store"]): (x["status"], x["restore_mode"]) for x in r["stores"]}
    assert modes == {**{(t, s): ("promoted", "non-transactional") for t in CONTAINER0 for s in STORES},
                     **{(t, "dims"): ("promoted", "blob-store") for t in CONTAINER0}}
    assert_promoted(j)
    for task, cp in checkpoints.items():
        promoted = j.state / "dims" / f"{task.replace(' ', '_')}-{cp}"
        assert promoted.is_dir() and read_store(promoted)  # the dir the job's next start renames into place
        assert not (j.state / "dims" / task.replace(" ", "_")).exists()  # the active dir never touched
        assert not (kept / promoted.name).exists()  # renamed, not copied
    assert j.locality()["0"] == HOST and "0-0" not in j.locality()


def test_a_blob_store_restored_store_without_a_pre_restore_is_refused_before_anything_is_written(job: Job, followers):
    from statectl.formats.checkpoint import BLOB_STORE_FACTORY

    j = job
    write_job(j, config={"stores.dims.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
                         "stores.dims.restore.factories": BLOB_STORE_FACTORY})
    f = follow_container(j, followers)
    start = j.end()
    p = cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), code=14)
    assert "no pre-restored checkpoint dir" in p.stderr and "--pre-restore" in p.stderr
    assert j.end() == start
    f.assert_running()
