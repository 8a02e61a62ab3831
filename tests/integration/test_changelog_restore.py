"""restore --from-changelog against a real Kafka-protocol broker (Tansu): a store rebuilt from a changelog of
puts, overwrites and tombstones, compared key by key; stopping at an offset or at the checkpoint; and the
error cases, where the old store must stay exactly as it was."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.engine.changelog import ChangelogRestoreOptions, restore_from_changelog
from statectl.errors import DiskFullError, StatectlError
from statectl.formats.checkpoint import checkpoint_topic
from tests.tools.genstore import dump_store, fingerprint, make_store

RESULT_FIELDS = {"records", "bytes", "duration_s", "target_dir", "topic", "partition", "end_offset"}
GROUPER = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]], *,
            linger_ms: int = 0, batch_size: int = 1 << 20) -> None:
    """Write (partition, key, value) records in order; with ``linger_ms`` in multi-record batches."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms, batch_size=batch_size,
                             max_request_size=2 * batch_size)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for p, k, v in records]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def changelog_records(seed: int) -> list[tuple[bytes, bytes | None]]:
    """Puts, overwrites, tombstones (some for keys never written), empty values and binary bytes."""
    rng = random.Random(seed)
    keys = [b"key-%04d" % i for i in range(300)] + [bytes([0, i, 255]) for i in range(20)]
    out: list[tuple[bytes, bytes | None]] = [(k, rng.randbytes(rng.randrange(1, 200))) for k in keys]
    for _ in range(600):
        k = rng.choice(keys)
        r = rng.random()
        if r < 0.25:
            out.append((k, None))
        elif r < 0.3:
            out.append((k, b""))
        else:
            out.append((k, rng.randbytes(rng.randrange(1, 300))))
    out += [(b"never-written", None), (keys[0], None), (keys[1], b"last")]
    return out


def apply(records: list[tuple[bytes, bytes | None]]) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for k, v in records:
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
    return state


@pytest.fixture
def changelog(tansu):
    """A 2-partition changelog: the records under test on partition 1, others on partition 0. Written in
    several produce calls and multi-record batches, so Tansu's high watermark under-reports the end."""
    topic = tansu.create_topic(f"pv-counts-changelog-{uuid.uuid4().hex[:8]}", partitions=2)
    records = changelog_records(seed=7)
    noise = [(0, b"key-0001", b"partition 0"), (0, b"only-on-0", b"x")]
    third = len(records) // 3
    produce(tansu.bootstrap, topic, [(1, k, v) for k, v in records[:2]])
    produce(tansu.bootstrap, topic, noise + [(1, k, v) for k, v in records[2:third]], linger_ms=100)
    produce(tansu.bootstrap, topic, [(1, k, v) for k, v in records[third:]], linger_ms=100)
    assert reported_end(tansu.bootstrap, topic, 1) < len(records), "the replay should meet Tansu's quirk"
    return topic, records


def reported_end(bootstrap: str, topic: str, partition: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, partition)
        return consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def no_temp_dirs(parent: Path) -> bool:
    return not [p for p in parent.iterdir() if ".statectl-restore-" in p.name]


def test_replay_rebuilds_the_store_exactly(cli, tansu, changelog, tmp_path: Path):
    topic, records = changelog
    target = tmp_path / "state" / "counts" / "Partition_1"
    out = cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
              "--target-dir", str(target), "-o", "json").stdout
    r = json.loads(out)
    assert set(r) == RESULT_FIELDS
    assert r["records"] == len(records) and r["end_offset"] == len(records)
    assert r["bytes"] == sum(len(k) + len(v or b"") for k, v in records)
    assert (r["topic"], r["partition"], r["target_dir"]) == (topic, 1, str(target))
    assert dump_store(target) == apply(records)
    assert not (target / "rocksdict-config.json").exists()
    assert no_temp_dirs(target.parent)


def test_replay_replaces_an_existing_store_and_takes_the_store_dir(cli, tansu, changelog, tmp_path: Path):
    topic, records = changelog
    state = tmp_path / "state"
    target = state / "counts" / "Partition_1"
    make_store(target, 500, 64, sst_mb=1)
    out = cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
              "--state-dir", str(state), "--store", "counts", "--task", "Partition 1").stdout
    assert f"replayed {len(records)} records" in out and str(target) in out
    assert dump_store(target) == apply(records)
    assert no_temp_dirs(target.parent)

    # The same replay again builds the same store.
    cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
        "--target-dir", str(target))
    assert dump_store(target) == apply(records)


def test_replay_stops_at_an_offset_or_at_the_checkpoint(cli, tansu, changelog, tmp_path: Path):
    topic, records = changelog
    stop = 401
    a = tmp_path / "a"
    r = json.loads(cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
                       "--target-dir", str(a), "--until-offset", str(stop), "-o", "json").stdout)
    assert r["records"] == stop and r["end_offset"] == stop
    assert dump_store(a) == apply(records[:stop])

    # A Samza checkpoint whose Kafka changelog marker says offset stop-1 (the newest record it covers).
    job = f"pv_{uuid.uuid4().hex[:8]}"
    marker = (f'{{"version":1,"changelog-ssp":{{"system":"kafka","partition":1,"stream":"{topic}",'
              f'"keyBucket":-1}},"changelog-offset":"{stop - 1}"}}')
    value = json.dumps({"checkpoint-id": "1700000000000-1", "input-offsets": {"kafka.PageViews.1": "5"},
                        "state-checkpoint-markers": {
                            "org.apache.samza.storage.KafkaChangelogStateBackendFactory": {"counts": marker}}},
                       separators=(",", ":")).encode()
    key = (f'{{"systemstreampartition-grouper-factory":"{GROUPER}","taskName":"Partition 1",'
           f'"type":"checkpoint-v2"}}').encode()
    ctopic = tansu.create_topic(checkpoint_topic(job, "1"))
    produce(tansu.bootstrap, ctopic, [(0, key, value)])
    b = tmp_path / "b"
    common = ["restore", "--from-changelog", topic, "--kafka", tansu.bootstrap, "--job", job, "--store", "counts",
              "--task", "Partition 1", "--to-checkpoint"]
    r = json.loads(cli(*common, "--partition", "1", "--target-dir", str(b), "-o", "json").stdout)
    assert r["records"] == stop
    assert dump_store(b) == apply(records[:stop])

    # The checkpoint names partition 1: asking for partition 0 is a usage error.
    p = cli(*common, "--partition", "0", "--target-dir", str(tmp_path / "c"), code=2)
    assert "partition 1" in p.stderr
    # No checkpoint records a changelog offset for that store: not found.
    p = cli(*common[:-3], "--store", "nope", "--task", "Partition 1", "--to-checkpoint", "--partition", "1",
            "--target-dir", str(tmp_path / "d"), code=10)
    assert "changelog offset" in p.stderr

    # Past the end of the partition: an error, and nothing is written.
    p = cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
            "--target-dir", str(a), "--until-offset", str(len(records) + 10), code=1)
    assert "short of offset" in p.stderr
    assert dump_store(a) == apply(records[:stop])


def test_replay_writes_the_offset_file_samza_needs(cli, tansu, changelog, tmp_path: Path):
    """Without OFFSET-v2 Samza's restore manager finds the logged store invalid and deletes it."""
    from statectl.formats.offsets import read_offset_file

    topic, records = changelog
    whole, part = tmp_path / "whole", tmp_path / "part"
    cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
        "--target-dir", str(whole))
    assert json.loads(read_offset_file(whole / "OFFSET-v2")) == {f"kafka.{topic}.1": str(len(records) - 1)}
    cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
        "--target-dir", str(part), "--until-offset", "7", "--system", "kafka-east")
    assert read_offset_file(part / "OFFSET-v2") == f'{{"kafka-east.{topic}.1":"6"}}'
    empty = tansu.create_topic(partitions=1)
    cli("restore", "--from-changelog", empty, "--partition", "0", "--kafka", tansu.bootstrap,
        "--target-dir", str(tmp_path / "empty"))
    assert not (tmp_path / "empty" / "OFFSET-v2").exists()  # nothing applied: nothing to record
    p = cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
            "--target-dir", str(tmp_path / "x"), "--system", "a.b", code=2)
    assert "a.b" in p.stderr


def test_one_batch_larger_than_a_poll(tansu, tmp_path: Path):
    """25000 records in one record batch: Tansu reports the end as 1, and a poll returns 10000 records, so a
    reader that trusted the reported end would stop at 10000."""
    topic = tansu.create_topic(partitions=1)
    records = [(b"k%06d" % (i % 20000), None if i % 7 == 0 else b"v%06d" % i) for i in range(25000)]
    # One batch: sent by the flush (a shorter linger can end while a busy machine still appends the records)
    produce(tansu.bootstrap, topic, [(0, k, v) for k, v in records], linger_ms=60_000, batch_size=8 << 20)
    assert reported_end(tansu.bootstrap, topic, 0) == 1
    r = restore_from_changelog(ChangelogRestoreOptions(bootstrap=tansu.bootstrap, topic=topic, partition=0,
                                                       target_dir=tmp_path / "t"))
    assert (r.records, r.end_offset) == (25000, 25000)
    assert dump_store(tmp_path / "t") == apply(records)


def test_empty_partition_gives_an_empty_store(cli, tansu, tmp_path: Path):
    topic = tansu.create_topic(partitions=1)
    r = json.loads(cli("restore", "--from-changelog", topic, "--partition", "0", "--kafka", tansu.bootstrap,
                       "--target-dir", str(tmp_path / "t"), "-o", "json").stdout)
    assert r["records"] == 0 and r["end_offset"] == 0
    assert dump_store(tmp_path / "t") == {}


@pytest.fixture
def old_store(tmp_path: Path) -> tuple[Path, tuple[int, str]]:
    target = tmp_path / "state" / "counts" / "Partition_1"
    make_store(target, 300, 64, sst_mb=1)
    return target, fingerprint(target)


def test_unknown_topic_or_partition_is_not_found(cli, tansu, changelog, old_store):
    target, before = old_store
    missing = f"no-such-changelog-{uuid.uuid4().hex[:8]}"
    p = cli("restore", "--from-changelog", missing, "--partition", "0", "--kafka", tansu.bootstrap,
            "--target-dir", str(target), code=10)
    assert missing in p.stderr and p.stdout == ""
    assert missing not in tansu.topics()  # reading never creates the topic
    p = cli("restore", "--from-changelog", changelog[0], "--partition", "2", "--kafka", tansu.bootstrap,
            "--target-dir", str(target), code=10)
    assert "no partition 2" in p.stderr
    assert fingerprint(target) == before and no_temp_dirs(target.parent)


@pytest.mark.timeout(60)  # a hang bound: how fast it fails is for make bench
def test_unreachable_brokers_fail_fast(cli, old_store):
    target, before = old_store
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        bootstrap = f"127.0.0.1:{s.getsockname()[1]}"
    p = cli("restore", "--from-changelog", "t", "--partition", "0", "--kafka", bootstrap, "--target-dir",
            str(target), code=1)
    assert f"cannot reach Kafka brokers {bootstrap}" in p.stderr
    assert fingerprint(target) == before


def test_usage_errors(cli, tansu, changelog, old_store):
    target, before = old_store
    topic = changelog[0]
    p = cli("restore", "--from-changelog", topic, "--partition", "1", "--target-dir", str(target), code=2)
    assert "--kafka" in p.stderr
    cli("restore", "--from-changelog", topic, "--kafka", tansu.bootstrap, "--target-dir", str(target), code=2)
    cli("restore", "--partition", "1", "--job", "j", "--store", "s", "--target-dir", str(target), code=2)
    cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap, "--snapshot", "x",
        "--target-dir", str(target), code=2)
    cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap, "--to-checkpoint",
        "--until-offset", "3", "--job", "j", "--store", "s", "--target-dir", str(target), code=2)
    cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap, code=2)  # where to?
    assert fingerprint(target) == before


def test_held_target_is_refused(cli, tansu, changelog, old_store):
    target, before = old_store
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, rocksdict as r; db = r.Rdict(sys.argv[1], r.Options(raw_mode=True)); "
         "print('ready', flush=True); sys.stdin.read()", str(target)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        p = cli("restore", "--from-changelog", changelog[0], "--partition", "1", "--kafka", tansu.bootstrap,
                "--target-dir", str(target), code=11)
        assert str(holder.pid) in p.stderr and "held" in p.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert fingerprint(target) == before and no_temp_dirs(target.parent)


def test_failure_mid_replay_leaves_the_old_store(tansu, changelog, old_store):
    target, before = old_store
    opts = ChangelogRestoreOptions(bootstrap=tansu.bootstrap, topic=changelog[0], partition=1, target_dir=target,
                                   batch_records=100)
    with failpoints.active("changelog-apply=2*off->raise:ENOSPC") as fp, pytest.raises(DiskFullError) as e:
        restore_from_changelog(opts)  # the third batch meets a full disk
    assert str(target) in str(e.value) and "untouched" in str(e.value)
    assert fp.hits("changelog-apply") == 3
    assert fingerprint(target) == before and no_temp_dirs(target.parent)

    with failpoints.active("changelog-apply=raise"), pytest.raises(StatectlError, match="failpoint changelog-apply"):
        restore_from_changelog(opts)  # any other write error
    assert fingerprint(target) == before and no_temp_dirs(target.parent)


def test_batches_by_records_and_bytes(tansu, changelog, tmp_path: Path, monkeypatch):
    from statectl.rocks import writer

    topic, records = changelog
    sizes = []
    real_apply = writer.StoreWriter.apply

    def counting_apply(self, entries):
        sizes.append(len(entries))
        return real_apply(self, entries)

    monkeypatch.setattr(writer.StoreWriter, "apply", counting_apply)
    target = tmp_path / "t"
    r = restore_from_changelog(ChangelogRestoreOptions(bootstrap=tansu.bootstrap, topic=topic, partition=1,
                                                       target_dir=target, batch_records=64))
    assert r.records == len(records) == sum(sizes) and max(sizes) == 64
    assert dump_store(target) == apply(records)
    sizes.clear()
    restore_from_changelog(ChangelogRestoreOptions(bootstrap=tansu.bootstrap, topic=topic, partition=1,
                                                   target_dir=target, batch_bytes=4096))
    assert len(sizes) > 10 and dump_store(target) == apply(records)


def test_replay_never_replaces_another_store_of_the_state_dir(cli, tansu, changelog, tmp_path: Path):
    """As a snapshot restore: with --state-dir, a --target-dir that is another store's dir there is
    refused (it replaced that store, exit 0)."""
    topic = changelog[0]
    state = tmp_path / "state"
    other = state / "other" / "Partition_1"
    make_store(other, 300, 64, sst_mb=1)
    before = fingerprint(other)
    p = cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
            "--state-dir", str(state), "--store", "counts", "--task", "Partition 1", "--target-dir", str(other),
            code=2)
    assert "another store's dir" in p.stderr
    assert fingerprint(other) == before and no_temp_dirs(other.parent)


def test_replay_never_replaces_the_file_blob_store_even_with_force(cli, tansu, changelog, tmp_path: Path):
    """restore --from-changelog --force into the file:// blob store's dir (the embedded default included)
    replaced it, deleting every backup: it opens no blob store, so check_target had no blob root to refuse."""
    topic = changelog[0]
    blobs = tmp_path / "blobs"
    (blobs / "blobs" / "ab").mkdir(parents=True)
    (blobs / "blobs" / "ab" / "abcdef").write_bytes(b"a backup's blob")
    for url, target in ((f"file://{blobs}", blobs), (f"file://{blobs}", blobs / "blobs")):
        p = cli("restore", "--from-changelog", topic, "--partition", "1", "--kafka", tansu.bootstrap,
                "--blobstore", url, "--target-dir", str(target), "--force", code=2)
        assert "blob store" in p.stderr
    assert (blobs / "blobs" / "ab" / "abcdef").read_bytes() == b"a backup's blob"
    assert no_temp_dirs(blobs.parent)


def test_a_changelog_on_another_cluster_is_read_where_the_jobs_config_puts_its_system(cli, tansu, tansu_other,
                                                                                      tmp_path: Path):
    """The job's coordinator stream and checkpoint topic are on --kafka; its changelog system's consumer reads
    from systems.<system>.consumer.bootstrap.servers (KafkaConsumerConfig.getKafkaSystemConsumerConfig)."""
    from statectl.kafka.coordinator import CoordinatorStream

    records = changelog_records(5)
    topic = tansu_other.create_topic(partitions=1)
    produce(tansu_other.bootstrap, topic, [(0, k, v) for k, v in records])
    stop = 400
    job = f"pv_{uuid.uuid4().hex[:8]}"
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"job.name": job, "job.id": "1", "stores.counts.changelog": f"east.{topic}",
                         "systems.east.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
                         "systems.east.producer.bootstrap.servers": tansu_other.bootstrap})
    marker = (f'{{"version":1,"changelog-ssp":{{"system":"east","partition":0,"stream":"{topic}",'
              f'"keyBucket":-1}},"changelog-offset":"{stop - 1}"}}')
    value = json.dumps({"checkpoint-id": "1700000000000-1", "input-offsets": {},
                        "state-checkpoint-markers": {
                            "org.apache.samza.storage.KafkaChangelogStateBackendFactory": {"counts": marker}}},
                       separators=(",", ":")).encode()
    key = (f'{{"systemstreampartition-grouper-factory":"{GROUPER}","taskName":"Partition 0",'
           f'"type":"checkpoint-v2"}}').encode()
    produce(tansu.bootstrap, tansu.create_topic(checkpoint_topic(job, "1")), [(0, key, value)])
    assert topic not in tansu.topics()
    target = tmp_path / "t"
    r = cli("restore", "--from-changelog", topic, "--partition", "0", "--system", "east", "--kafka", tansu.bootstrap,
            "--job", job, "--store", "counts", "--task", "Partition 0", "--to-checkpoint", "--target-dir",
            str(target), "-o", "json")
    assert json.loads(r.stdout)["records"] == stop
    assert tansu_other.bootstrap in r.stderr and "systems.east.producer.bootstrap.servers" in r.stderr
    assert dump_store(target) == apply(records[:stop])
