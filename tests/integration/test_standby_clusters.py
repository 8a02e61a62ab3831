"""standby with a changelog on another Kafka cluster than the job's coordinator stream and checkpoint topic, on two
real Tansu brokers: the job's config puts the changelog's system there (``systems.<system>.consumer.bootstrap
.servers``, as KafkaConsumerConfig reads it), and follow, promote and promote --container read the changelog on
that cluster, the coordinator stream and the checkpoints on ``--kafka``."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import new_checkpoint_id
from statectl.formats.checkpoint import KAFKA_CHANGELOG_FACTORY, SSP, KafkaChangelogMarker, encode_changelog_marker
from statectl.kafka.coordinator import CoordinatorStream
from tests.integration.test_standby import STORE, TASK, World, procs, start  # noqa: F401 - procs
from tests.tools.standby_helpers import ChangelogWriter, cli, offsets_of, random_records, read_store, wait_until

KAFKA_FACTORY = "org.apache.samza.system.kafka.KafkaSystemFactory"


@pytest.fixture
def east(tansu, tansu_other, tmp_path: Path):
    """A job on ``tansu`` whose changelog is on system ``east``, on ``tansu_other``; transactional restore (the
    default), v2 checkpoints read."""
    tag = uuid.uuid4().hex[:10]
    topic = tansu_other.create_topic(f"standby-east-{tag}", partitions=1)
    writer = ChangelogWriter(tansu_other.bootstrap, topic)
    (tmp_path / "state").mkdir()
    w = World(tansu.bootstrap, tmp_path, f"standby-east-{tag}", topic, writer)
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.create()
        cs.write_config({f"stores.{STORE}.changelog": f"east.{topic}", "systems.kafka.samza.factory": KAFKA_FACTORY,
                         "systems.east.samza.factory": KAFKA_FACTORY,
                         "systems.east.consumer.bootstrap.servers": tansu_other.bootstrap,
                         "task.checkpoint.read.versions": "2,1"})
        cs.write_changelog_partition(TASK, 0)
        cs.write_task_container(TASK, "0")
        cs.write_task_mode(TASK, "Active")
        cs.write_container_host("0", "the-old-host.example.com")
    try:
        yield w
    finally:
        writer.close()


def caught_up(w: World, f, upto: int | None = None) -> None:
    """Wait until the replica's OFFSET-v2 names ``upto`` (default: the last offset written) on system east."""
    target = str(w.writer.last_offset if upto is None else upto)

    def done() -> bool:
        f.assert_running()
        try:
            return (offsets_of(w.replica) or {}).get(f"east.{w.topic}.0") == target
        except (OSError, ValueError):
            return False

    wait_until(done, 90, f"the replica reaches offset {target}\n{f.describe()}")


def checkpoint(w: World, offset: int) -> str:
    """A v2 checkpoint of the task on the job's cluster naming the changelog position on system ``east``."""
    cp = new_checkpoint_id()
    marker = encode_changelog_marker(KafkaChangelogMarker(SSP("east", w.topic, 0), str(offset)))
    with KafkaCheckpointLog(w.bootstrap, w.job, "1") as log:
        log._write(TASK, cp, {KAFKA_CHANGELOG_FACTORY: {STORE: marker}}, {})
    return cp


@pytest.mark.timeout(300)
def test_follow_and_promote_read_a_changelog_on_another_cluster(east: World, procs, tansu_other):
    w = east
    w.writer.send(random_records(random.Random(31), 250))
    checkpoint(w, 149)
    f = start(w, procs, "--to-checkpoint", changelog=False)
    caught_up(w, f, upto=149)
    assert tansu_other.bootstrap in f.stderr() and "systems.east.consumer.bootstrap.servers" in f.stderr()
    assert offsets_of(w.replica) == {f"east.{w.topic}.0": "149"}
    cp = checkpoint(w, 199)
    p = cli(w.tmp, "standby", "promote", *w.where(changelog=False), "-o", "json")
    assert f.wait(60) == 0, f.describe()
    r = json.loads(p.stdout)
    target = w.active.with_name(f"Partition_0-{cp}")
    assert (r["restore_mode"], r["checkpoint_id"], r["caught_up_offset"]) == ("transactional", cp, 199), r
    assert r["promoted_dir"] == str(target)
    assert read_store(target) == w.writer.state(199)
    assert offsets_of(target) == {f"east.{w.topic}.0": "199"}


@pytest.mark.timeout(300)
def test_a_containers_follow_and_promote_read_a_changelog_on_another_cluster(east: World, procs):
    w = east
    w.writer.send(random_records(random.Random(32), 180))
    base = ["--kafka", w.bootstrap, "--job", w.job, "--state-dir", str(w.state)]
    f = start_container(w, procs, base)
    caught_up(w, f)
    cp = checkpoint(w, w.writer.last_offset)
    p = cli(w.tmp, "standby", "promote", *base, "--container", "0", "-o", "json")
    assert f.wait(60) == 0, f.describe()
    r = json.loads(p.stdout)
    target = w.active.with_name(f"Partition_0-{cp}")
    assert [(s["status"], s["promoted_dir"]) for s in r["stores"]] == [("promoted", str(target))], r
    assert read_store(target) == w.writer.state()


def start_container(w: World, procs, base: list[str]):
    from tests.tools.standby_helpers import Follower

    f = Follower(w.tmp, [*base, "--container", "0"], json_output=True)
    procs[0].append(f)
    return f
