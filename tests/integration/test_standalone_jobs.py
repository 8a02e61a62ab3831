"""statectl standby and adstore on standalone Samza jobs (ZkJobCoordinator): the job model in a real ZooKeeper
(Debian's package, tests/servers.py), written as Samza writes it (tests/tools/zk_jobmodel.py), the job's
config on its coordinator stream (set-config only, as ZkJobCoordinator.loadMetadataResources leaves it) or
nowhere, the changelogs and side inputs on Tansu.

The job has 12 tasks ``Partition 0`` .. ``Partition 11`` whose changelog partitions JobModelCalculator gave out
in lexicographic task-name order: ``Partition 10`` is on changelog partition 2, where a guess from its name
says 10. Every changelog partition holds keys of its own, so a replica shows whose data it follows.
"""

from __future__ import annotations

import json
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from statectl.catalog.refs import StoreRef
from statectl.engine.standby.replica import standby_dir
from statectl.formats.checkpoint import SSP
from statectl.kafka.coordinator import CoordinatorStream
from tests.tools.genstore import fingerprint, make_store
from tests.tools.standby_helpers import ChangelogWriter, Follower, cli, offsets_of, read_store, wait_until
from tests.tools.zk_jobmodel import Task, job_root, model_json, publish, segments, set_version

STORE = "counts"
SYSTEM = "samza-kafka"
KAFKA_FACTORY = "org.apache.samza.system.kafka.KafkaSystemFactory"
TASKS = [f"Partition {n}" for n in range(12)]
MAPPING = {t: i for i, t in enumerate(sorted(TASKS))}  # JobModelCalculator's TreeMap order
PROCESSORS = ("0c1f5e3a-77aa-4d57-9a4e-6f1e2b1d9c01", "a93d2b71-0b6e-4f0a-8d1c-2e5f7a9b3c02")  # UUIDGenerator ids


def records(partition: int, n: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    return [(b"p%02d-key-%04d" % (partition, j), b"value of partition %d record %d" % (partition, j))
            for j in range(start, start + n)]


def job_config(topic: str) -> dict[str, str]:
    """The config a standalone job writes to its coordinator stream (job.coordinator.system set)."""
    return {
        "job.name": "pv", "job.id": "1",
        "job.coordinator.factory": "org.apache.samza.zk.ZkJobCoordinatorFactory",
        "job.coordinator.system": "kafka", "job.default.system": "kafka", "job.changelog.system": SYSTEM,
        "systems.kafka.samza.factory": KAFKA_FACTORY, f"systems.{SYSTEM}.samza.factory": KAFKA_FACTORY,
        f"stores.{STORE}.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
        f"stores.{STORE}.changelog": topic,
        "task.transactional.state.restore.enabled": "false",  # promote into the active dir
    }


def containers(mapping: dict[str, int] | None = None, *, wide: int = 0) -> dict[str, dict[str, Task]]:
    """The tasks over two processors, each with its input partition (GroupByPartition) and ``wide`` more
    SSPs of a broadcast stream (to make the model large)."""
    mapping = MAPPING if mapping is None else mapping
    out: dict[str, dict[str, Task]] = {p: {} for p in PROCESSORS}
    for k, task in enumerate(TASKS):
        ssps = [SSP("kafka", "pageviews", k)] + [SSP("kafka", "a-wide-broadcast-stream", p) for p in range(wide)]
        out[PROCESSORS[k % 2]][task] = Task(mapping[task], ssps)
    return out


@dataclass
class Job:
    bootstrap: str
    zk: str  # --zookeeper: the server and this job's chroot
    chroot: str
    tmp: Path
    job: str
    topic: str
    writers: list[ChangelogWriter]
    client: object  # kazoo, no chroot

    @property
    def state(self) -> Path:
        return self.tmp / "state"

    @property
    def root(self) -> str:
        return job_root(self.job)

    def where(self, task: str, *extra: str) -> list[str]:
        return ["--kafka", self.bootstrap, "--zookeeper", self.zk, "--job", self.job, "--task", task,
                "--store", STORE, "--state-dir", str(self.state), *extra]

    def write_config(self) -> None:
        with CoordinatorStream(self.bootstrap, self.job, "1") as cs:
            cs.create()
            cs.write_config(dict(job_config(self.topic), **{"job.name": self.job}))

    def publish(self, data: bytes, version: int = 1, **kw) -> None:
        publish(self.client, self.chroot, self.root, version, data, **kw)

    def ref(self, task: str) -> StoreRef:
        return StoreRef(self.job, "1", task, STORE)


@pytest.fixture
def job12(tansu, zookeeper, tmp_path: Path):
    tag = uuid.uuid4().hex[:10]
    topic = tansu.create_topic(f"pv-counts-changelog-{tag}", partitions=12)
    writers = [ChangelogWriter(tansu.bootstrap, topic, p) for p in range(12)]
    for p, w in enumerate(writers):
        w.send(records(p, 20 + p))
    (tmp_path / "state").mkdir()
    client = zookeeper.client()
    chroot = f"/statectl-{tag}"
    client.ensure_path(chroot)
    try:
        yield Job(tansu.bootstrap, f"{zookeeper.connect}{chroot}", chroot, tmp_path, f"pv-{tag}", topic, writers,
                  client)
    finally:
        client.stop()
        client.close()
        for w in writers:
            w.close()


@pytest.fixture
def followers():
    started: list[Follower] = []
    yield started
    for f in started:
        f.kill()


# -- standby: the changelog partition from the model ----------------------------------------------------------


@pytest.mark.timeout(300)
def test_follow_and_promote_partition_10_on_changelog_partition_2(job12: Job, followers):
    j = job12
    j.write_config()  # the config only: a standalone job writes no set-changelog
    j.publish(model_json(containers()))
    task, p2 = "Partition 10", j.writers[2]
    replica = standby_dir(j.state, STORE, task)
    f = Follower(j.tmp, j.where(task))
    followers.append(f)
    key = f"{SYSTEM}.{j.topic}.2"
    wait_until(lambda: f.assert_running() or offsets_of(replica) == {key: str(p2.last_offset)}, 90,
               f"the replica reaches partition 2's end\n{f.describe()}")
    assert read_store(replica) == p2.state()
    assert "guessing" not in f.stderr(), f.describe()

    p2.send(records(2, 5, start=500))
    j.writers[10].send(records(10, 5, start=500))  # another task's partition: never in the replica
    r = json.loads(cli(j.tmp, "standby", "promote", *j.where(task), "-o", "json").stdout)
    assert f.wait(60) == 0, f.describe()
    active = j.state / STORE / "Partition_10"
    assert r["promoted_dir"] == str(active) and r["caught_up_offset"] == p2.last_offset
    got = read_store(active)
    assert got == p2.state() and all(k.startswith(b"p02-") for k in got)
    assert offsets_of(active) == {key: str(p2.last_offset)}


@pytest.mark.timeout(120)
def test_every_task_resolves_to_its_model_partition_with_or_without_a_coordinator_stream(job12: Job):
    from statectl.engine.standby.changelog import resolve_changelog

    j = job12
    assert sum(MAPPING[t] != int(t.split()[1]) for t in TASKS) == 10  # a guess from the name is wrong for 10 tasks
    j.publish(model_json(containers()))
    # No coordinator stream: without --zookeeper the partition is guessed from the name (10), with it, the model's.
    r = resolve_changelog(j.bootstrap, j.ref("Partition 10"), changelog=f"{SYSTEM}.{j.topic}")
    assert r.partition == 10 and any("guessing" in n for n in r.notes)
    for task in TASKS:
        r = resolve_changelog(j.bootstrap, j.ref(task), changelog=f"{SYSTEM}.{j.topic}", zookeeper=j.zk)
        assert (r.system, r.topic, r.partition, r.notes) == (SYSTEM, j.topic, MAPPING[task], ()), task
    # With the coordinator stream's config: its changelog and system; the partitions still the model's.
    j.write_config()
    for task in TASKS:
        r = resolve_changelog(j.bootstrap, j.ref(task), zookeeper=j.zk)
        assert (r.system, r.topic, r.partition, r.notes) == (SYSTEM, j.topic, MAPPING[task], ()), task


@pytest.mark.timeout(120)
def test_a_container_of_the_model_resolves_each_task(job12: Job):
    from statectl.engine.standby.container import resolve_container

    j = job12
    j.write_config()
    j.publish(model_json(containers()))
    sc = resolve_container(j.bootstrap, j.job, "1", PROCESSORS[0], state_dir=j.state, zookeeper=j.zk)
    assert sc.tasks == tuple(sorted(TASKS[0::2]))
    assert {r.ref.task: r.partition for r in sc.replicas} == {t: MAPPING[t] for t in TASKS[0::2]}


@pytest.mark.timeout(120)
def test_a_large_model_split_across_znodes_and_the_active_version_are_read(job12: Job):
    from statectl.engine.standby.changelog import resolve_changelog

    j = job12
    j.write_config()
    shifted = {t: (p + 1) % 12 for t, p in MAPPING.items()}
    big = model_json(containers(shifted, wide=1500))  # ~1.4 MB: ZkMetadataStore splits it
    assert len(segments(big)) == 2
    j.publish(big, version=7)
    assert sorted(j.client.get_children(f"{j.chroot}{j.root}/jobModelGeneration/jobModels/7")) == ["0", "1"]
    assert resolve_changelog(j.bootstrap, j.ref("Partition 10"), zookeeper=j.zk).partition == 3
    # A newer version published but not yet agreed on: the active one is still read...
    j.publish(model_json(containers()), version=8, active=False)
    assert resolve_changelog(j.bootstrap, j.ref("Partition 10"), zookeeper=j.zk).partition == 3
    # ...and once active, it is the one; without an active version (Samza before 1.7), the latest.
    set_version(j.client, f"{j.chroot}{j.root}/jobModelGeneration/activeJobModelVersion", 8)
    assert resolve_changelog(j.bootstrap, j.ref("Partition 10"), zookeeper=j.zk).partition == 2
    j.client.delete(f"{j.chroot}{j.root}/jobModelGeneration/activeJobModelVersion")
    j.publish(big, version=9, active=False)
    assert resolve_changelog(j.bootstrap, j.ref("Partition 10"), zookeeper=j.zk).partition == 3


@pytest.mark.timeout(120)
def test_protocol_1_0_and_the_app_name_from_the_config_place_the_model(job12: Job):
    from statectl.engine.standby.changelog import resolve_changelog

    j = job12
    # Samza before 1.3: the pretty-printed JSON as the data of jobModels/<version>, under ...-1.0-coordinationData.
    publish(j.client, j.chroot, job_root(j.job, protocol="1.0"), 3, model_json(containers(), pretty=True),
            protocol="1.0", active=False)
    r = resolve_changelog(j.bootstrap, j.ref("Partition 10"), changelog=f"{SYSTEM}.{j.topic}", zookeeper=j.zk)
    assert r.partition == 2
    # app.name and app.id (the config on the coordinator stream) name the root
    with CoordinatorStream(j.bootstrap, j.job, "1") as cs:
        cs.create()
        cs.write_config(dict(job_config(j.topic), **{"job.name": j.job, "app.name": "pageviews", "app.id": "7"}))
    shifted = {t: (p + 5) % 12 for t, p in MAPPING.items()}
    publish(j.client, j.chroot, job_root(j.job, app="pageviews", app_id="7"), 1, model_json(containers(shifted)))
    assert resolve_changelog(j.bootstrap, j.ref("Partition 10"), zookeeper=j.zk).partition == 7


# -- standby: bad input, one line and its exit code, nothing touched ---------------------------------------------


def one_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


def refused(j: Job, task: str, code: int, *extra: str, zk: str | None = None) -> str:
    """follow and promote of ``task`` both exit ``code`` with the same one error line, leaving the task's
    active store and the state dir as they were; return the error line."""
    active = j.state / STORE / task.replace(" ", "_")
    if not active.exists():
        make_store(active, 30, 16, seed=5)
    before = fingerprint(active)
    listing = sorted(str(p.relative_to(j.state)) for p in j.state.rglob("*"))
    where = j.where(task, *extra)
    if zk is not None:
        where[where.index("--zookeeper") + 1] = zk
    lines = []
    for verb in ("follow", "promote"):
        p = cli(j.tmp, "standby", verb, *where, code=code)
        assert p.stdout == "", p.stdout
        lines.append(one_error(p.stderr))
        assert fingerprint(active) == before
        assert sorted(str(p.relative_to(j.state)) for p in j.state.rglob("*")) == listing
    assert lines[0] == lines[1], lines
    return lines[0]


def engine_error(j: Job, task: str, code: int) -> str:
    """The error follow and promote of ``task`` stop at (shared.replica_of's resolve_changelog), raised in this
    process: its exit code ``code`` and one line; return the line. ``refused`` checks one case of each exit code
    through both commands; the other cases take this path and not two Python starts each."""
    from statectl.engine.standby.changelog import resolve_changelog
    from statectl.errors import StatectlError

    with pytest.raises(StatectlError) as e:
        resolve_changelog(j.bootstrap, j.ref(task), zookeeper=j.zk)
    assert e.value.exit_code == code and "\n" not in str(e.value), (e.value.exit_code, str(e.value))
    return str(e.value)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_zookeeper_unreachable_exits_1_within_the_timeout(job12: Job):
    j = job12
    j.write_config()
    error = refused(j, "Partition 10", 1, zk=f"127.0.0.1:{closed_port()}/x")
    assert "ZooKeeper 127.0.0.1:" in error and "did not answer within 5 s" in error, error


@pytest.mark.timeout(120)
def test_no_job_model_exits_10_naming_where_it_looked(job12: Job):
    j = job12
    j.write_config()
    error = refused(j, "Partition 10", 10)
    assert f"no job model of job {j.job}-1" in error and job_root(j.job) in error, error
    # Another job's model there: the hint names it.
    publish(j.client, j.chroot, job_root("other-job"), 1, model_json(containers()))
    p = cli(j.tmp, "standby", "follow", *j.where("Partition 10"), code=10)
    assert job_root("other-job") in p.stderr.split("Hint:", 1)[1], p.stderr
    # The root but no version published yet
    j.client.ensure_path(f"{j.chroot}{j.root}/jobModelGeneration/jobModels")
    assert "published no job model" in engine_error(j, "Partition 10", 10)
    # A task the model does not have
    j.publish(model_json(containers()))
    error = engine_error(j, "Partition 12", 10)
    assert "'Partition 12'" in error and "job model version 1" in error, error


@pytest.mark.timeout(180)
def test_a_malformed_job_model_exits_1(job12: Job):
    j = job12
    j.write_config()
    good = model_json(containers())
    version = 0

    def publish_bad(**kw) -> str:
        nonlocal version
        version += 1
        j.publish(kw.pop("data", good), version=version, **kw)
        return refused(j, "Partition 10", 1) if version == 1 else engine_error(j, "Partition 10", 1)

    flipped = segments(good)
    flipped[0] = flipped[0].replace(b'"changelog-partition":2', b'"changelog-partition":3')
    error = publish_bad(segmented=flipped)  # ZkMetadataStore.get's checksum check fails
    assert "malformed" in error and "checksum" in error and f"jobModels/{version}" in error, error
    assert "not JSON" in publish_bad(data=b'{"containers": ')
    error = publish_bad(data=good.replace(b'"changelog-partition":2,', b""))
    assert "'Partition 10'" in error and "changelog-partition" in error, error
    assert "\"containers\"" in publish_bad(data=b'{"config":{}}')
    set_version(j.client, f"{j.chroot}{j.root}/jobModelGeneration/activeJobModelVersion", "../../x")
    assert "not a version number" in engine_error(j, "Partition 10", 1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["127.0.0.1:99999", "127.0.0.1:2181//x", "host:port", " "])
def test_a_bad_zookeeper_value_exits_2(job12: Job, value: str):
    p = cli(job12.tmp, "standby", "follow", *job12.where("Partition 1"), "--zookeeper", value, code=2)
    assert f"--zookeeper: invalid value {value!r}" in one_error(p.stderr), p.stderr


# -- adstore: the side-input partitions each task holds, from the model ---------------------------------------

SIDE = "members"
SSP_GROUPER = "org.apache.samza.container.grouper.stream.GroupBySystemStreamPartitionFactory"


@pytest.mark.timeout(180)
def test_adstore_load_and_status_take_each_tasks_partitions_from_the_model(job12: Job, tansu):
    """A standalone job grouping by SSP (a task per partition, named after it): task dirs and partitions come
    from the model, where the coordinator stream names no task and GroupByPartition cannot say. So do the
    processors whose start deletes the state dir for want of a checkpoint of any of their tasks."""
    from statectl.formats.checkpoint import checkpoint_topic
    from tests.integration.test_adstore_seal import KAFKA_CHECKPOINTS, SAMZA_V1, produce, samza_key

    j = job12
    topic = tansu.create_topic(f"members-{uuid.uuid4().hex[:8]}", partitions=4)
    ws = [ChangelogWriter(tansu.bootstrap, topic, p) for p in range(4)]
    try:
        for p, w in enumerate(ws):
            w.send([(b"m%d-%02d" % (p, i), b'{"n": %d}' % i) for i in range(5 + p)])
        with CoordinatorStream(j.bootstrap, j.job, "1") as cs:
            cs.create()
            cs.write_config({"job.name": j.job, "job.systemstreampartition.grouper.factory": SSP_GROUPER,
                             "systems.kafka.samza.factory": KAFKA_FACTORY,
                             "task.checkpoint.factory": KAFKA_CHECKPOINTS,
                             f"stores.{SIDE}.side.inputs": f"kafka.{topic}",
                             "task.inputs": f"kafka.{topic},kafka.pageviews"})
        tasks = {f"SystemStreamPartition [kafka, {topic}, {p}]": Task(p, [SSP("kafka", topic, p)]) for p in range(4)}
        tasks["SystemStreamPartition [kafka, pageviews, 0]"] = Task(4, [SSP("kafka", "pageviews", 0)])
        items = list(tasks.items())
        j.publish(model_json({PROCESSORS[0]: dict(items[:3]), PROCESSORS[1]: dict(items[3:])}))
        state = j.tmp / "adstate"
        base = ["--kafka", j.bootstrap, "--job", j.job, "--store", SIDE, "--state-dir", str(state)]
        # Without the model: the stream names no task.
        p = cli(j.tmp, "adstore", "load", *base, code=10)
        assert "names no tasks" in one_error(p.stderr) and not state.exists()
        out = json.loads(cli(j.tmp, "adstore", "load", *base, "--zookeeper", j.zk, "-o", "json").stdout)
        assert {s["task"]: sorted(s["offsets"]) for s in out["stores"]} == {
            f"SystemStreamPartition [kafka, {topic}, {p}]": [f"kafka.{topic}.{p}"] for p in range(4)}
        for p in range(4):
            got = read_store(state / SIDE / f"SystemStreamPartition_[kafka,_{topic},_{p}]")
            assert sorted(got) == [b"m%d-%02d" % (p, i) for i in range(5 + p)]
        # No checkpoint yet: each processor of the model deletes the state dir at its start.
        st = json.loads(cli(j.tmp, "adstore", "status", *base, "--zookeeper", j.zk, "-o", "json", code=14).stdout)
        assert [s["action"] for s in st["stores"][:4]] == ["delete-no-checkpoint"] * 4
        assert st["stores"][0]["reason"].startswith(f"container {PROCESSORS[0]} reads no checkpoint")
        assert st["stores"][3]["reason"].startswith(f"container {PROCESSORS[1]} reads no checkpoint")
        # The first processor's tasks checkpointed: its stores are kept, the second's still go ...
        cp = tansu.create_topic(checkpoint_topic(j.job, "1"))
        produce(j.bootstrap, cp, *[(samza_key(t, grouper=SSP_GROUPER), SAMZA_V1) for t, _ in items[:3]])
        st = json.loads(cli(j.tmp, "adstore", "status", *base, "--zookeeper", j.zk, "-o", "json", code=14).stdout)
        assert [s["action"] for s in st["stores"][:4]] == ["keep"] * 3 + ["delete-no-checkpoint"]
        # ... until a checkpoint of the other task the model gives that processor, which has no store here.
        produce(j.bootstrap, cp, (samza_key(items[4][0], grouper=SSP_GROUPER), SAMZA_V1))
        st = json.loads(cli(j.tmp, "adstore", "status", *base, "--zookeeper", j.zk, "-o", "json").stdout)
        assert [(s["task"], s["action"], s["expected"]) for s in st["stores"]] == [
            (f"SystemStreamPartition [kafka, {topic}, {p}]", "keep", [f"kafka.{topic}.{p}"]) for p in range(4)] + [
            ("SystemStreamPartition [kafka, pageviews, 0]", "create", [])]
    finally:
        for w in ws:
            w.close()
