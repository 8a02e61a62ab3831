"""The partition reader's follow mode (what a standby keeps a replica current with) and the compacted-topic
reader, against a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import uuid

import pytest

from statectl.kafka.changes import Change
from statectl.kafka.client import PartitionReader, create_topic, open_consumer
from statectl.kafka.compacted import CompactedTopic
from tests.integration.test_changelog_restore import changelog_records, produce


@pytest.mark.timeout(120)
@pytest.mark.parametrize("changes", [False, True])
def test_follow_reads_on_past_the_end_and_says_when_caught_up(tansu, changes):
    topic = f"follow-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=1)
    produce(tansu.bootstrap, topic, [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(3)])
    consumer = open_consumer(tansu.bootstrap, changes=changes)
    try:
        reader = PartitionReader(consumer, topic, 0, tansu.bootstrap)
        reader.seek()
        seen: list[bytes] = []
        batches = reader.batches(follow=True)
        for batch in batches:  # up to the end, then one "caught up" heartbeat
            if not batch:
                break
            seen += [r.value for r in batch]
        assert seen == [b"v0", b"v1", b"v2"] and reader.caught_up
        produce(tansu.bootstrap, topic, [(0, b"k3", b"v3"), (0, b"k4", None)])
        for batch in batches:  # the same generator goes on with what was written since
            seen += [r.value for r in batch]
            if len(seen) == 5:
                break
        assert seen == [b"v0", b"v1", b"v2", b"v3", None]
        assert reader.position == 5
        assert (type(batch[-1]) is Change) == changes
        batches.close()
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, changes: bool) -> list:
    consumer = open_consumer(bootstrap, changes=changes)
    try:
        reader = PartitionReader(consumer, topic, 0, bootstrap)
        reader.seek()
        return [r for batch in reader.batches() for r in batch]
    finally:
        consumer.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_changes_are_the_records_kafka_python_decodes(tansu, compression):
    """A consumer opened with ``changes`` (the standby follower's) reads the same offsets, timestamps, keys and
    values as kafka-python's own decoding: batches of many records, headers, null keys, tombstones, empty
    values, compressed or not, as the broker stores them."""
    from kafka import KafkaProducer

    topic = f"changes-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, acks="all", linger_ms=50, batch_size=1 << 16,
                             compression_type=compression)
    try:
        for i, (key, value) in enumerate(changelog_records(3)):
            producer.send(topic, key=None if i % 97 == 5 and value is not None else key, value=value, partition=0,
                          headers=[("h", b"%d" % i)] if i % 10 == 0 else None)
        producer.flush()
    finally:
        producer.close()
    theirs = read_all(tansu.bootstrap, topic, changes=False)
    ours = read_all(tansu.bootstrap, topic, changes=True)
    assert len(theirs) > 300 and all(type(c) is Change for c in ours)
    assert ours == [(r.offset, r.timestamp, r.key, r.value) for r in theirs]


@pytest.mark.timeout(120)
def test_without_follow_the_read_ends_at_the_end(tansu):
    topic = f"nofollow-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=1)
    produce(tansu.bootstrap, topic, [(0, b"a", b"1"), (0, b"b", b"2")])
    consumer = open_consumer(tansu.bootstrap)
    try:
        reader = PartitionReader(consumer, topic, 0, tansu.bootstrap)
        reader.seek()
        assert [r.value for batch in reader.batches() for r in batch] == [b"1", b"2"]
        assert not reader.caught_up
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_compacted_topic_keeps_the_latest_value_per_key_incrementally(tansu):
    topic = f"compacted-{uuid.uuid4().hex[:8]}"

    def decode(key: bytes | None) -> str:
        if not key or not key.startswith(b"k"):
            raise ValueError("not one of ours")
        return key.decode()

    table = CompactedTopic(tansu.bootstrap, topic, decode=decode)
    try:
        assert table.refresh() is False  # no such topic yet: nothing read, nothing created
        create_topic(tansu.bootstrap, topic, partitions=1, configs={"cleanup.policy": "compact"})
        produce(tansu.bootstrap, topic, [(0, b"k1", b"a"), (0, b"k2", b"b"), (0, b"junk", b"x"), (0, b"k1", b"c")])
        assert table.refresh() is True
        assert {k: r.value for k, r in table.latest.items()} == {"k1": b"c", "k2": b"b"}
        assert table.skipped == 1
        produce(tansu.bootstrap, topic, [(0, b"k2", None)])  # a tombstone deletes the row, and is kept as such
        table.refresh()
        assert table.get("k2").value is None and table.get("k2").offset == 4
        assert table.get("k1").value == b"c"
    finally:
        table.close()
