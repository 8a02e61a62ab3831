"""read_tails and the coordinator stream against a real Kafka-protocol broker (Tansu).

Tansu reports a partition's end as the base offset of its last record batch + 1, so after batched produces
the consumer's end_offsets under-reports; read_tails must find the true end anyway.
"""

from __future__ import annotations

import uuid

import pytest

from statectl.formats.coordinator import SET_CONFIG, decode_set_config
from statectl.formats.drain import DRAIN_NAMESPACE, DrainNotification, encode_notification
from statectl.kafka.client import create_topic, open_consumer
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import read_tails


def batched(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    """Write (partition, key, value) records in multi-record batches, then flush."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=100, batch_size=1 << 20)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for p, k, v in records]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


@pytest.fixture
def consumer(tansu):
    c = open_consumer(tansu.bootstrap)
    yield c
    c.close()


@pytest.mark.timeout(120)
def test_read_tails_finds_the_true_end_after_batched_produces(tansu, consumer):
    topic = f"tails-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=3)
    written = {0: 0, 1: 0}  # partition 2 stays empty
    for round_ in range(3):  # several batches per partition
        n = {0: 4 + round_, 1: 2}
        batched(tansu.bootstrap, topic, [(p, b"k", b"p%d-%d" % (p, written[p] + i)) for p in n for i in range(n[p])])
        for p in n:
            written[p] += n[p]
    assert written == {0: 15, 1: 6}

    tails = read_tails(consumer, topic, [0, 1, 2], tansu.bootstrap, last=3)
    assert sorted(tails) == [0, 1, 2]
    for p, count in written.items():
        t = tails[p]
        assert (t.partition, t.beginning, t.end) == (p, 0, count)
        assert len(t.records) >= 3
        assert t.records[-1].offset == count - 1 and t.records[-1].value == b"p%d-%d" % (p, count - 1)
        assert [r.offset for r in t.records] == list(range(count - len(t.records), count))  # in order, no gaps
    assert (tails[2].beginning, tails[2].end, tails[2].records) == (0, 0, [])

    # Only the partitions asked for, and asking again (the consumer's assignment replaced) gives the same.
    again = read_tails(consumer, topic, [1], tansu.bootstrap)
    assert list(again) == [1] and again[1].end == 6 and again[1].records[-1].value == b"p1-5"
    assert read_tails(consumer, topic, [], tansu.bootstrap) == {}


@pytest.mark.timeout(120)
def test_read_tails_of_one_record_batches(tansu, consumer):
    topic = f"tails-single-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=1)
    for i in range(4):
        batched(tansu.bootstrap, topic, [(0, b"k", b"v%d" % i)])
    t = read_tails(consumer, topic, [0], tansu.bootstrap)[0]
    assert t.end == 4 and t.records[-1].value == b"v3"


# -- the coordinator stream --------------------------------------------------------------------------------


@pytest.fixture
def stream(tansu):
    s = CoordinatorStream(tansu.bootstrap, f"tails_job_{uuid.uuid4().hex[:8]}", "1")
    yield s
    s.close()


def reader(stream: CoordinatorStream) -> CoordinatorStream:
    """A second, fresh reader of the same stream."""
    return CoordinatorStream(stream.bootstrap, stream.job, stream.job_id)


@pytest.mark.timeout(120)
def test_coordinator_config_round_trip(stream):
    assert stream.topic.startswith("__samza_coordinator_tails-job-") and stream.topic.endswith("_1")
    assert stream.refresh() is False
    assert stream.create() is True
    assert stream.create() is False
    stream.write_config({"app.run.id": "R1", "job.name": stream.job, "task.commit.ms": "2000"})
    stream.refresh()
    assert stream.config() == {"app.run.id": "R1", "job.name": stream.job, "task.commit.ms": "2000"}
    assert stream.run_id() == "R1"
    assert stream.problems == []

    # Rewriting the config deletes the keys it no longer has (tombstones) and updates the rest.
    stream.write_config({"app.run.id": "R2", "job.name": stream.job})
    other = reader(stream)
    try:
        assert other.refresh() is True
        assert other.config() == {"app.run.id": "R2", "job.name": stream.job}
        assert other.run_id() == "R2"
        values = other.namespace_values(SET_CONFIG)
        assert values["task.commit.ms"] is None  # deleted, not just missing
        assert decode_set_config(values["app.run.id"]) == "R2"
    finally:
        other.close()

    stream.write_config({"job.name": stream.job})
    stream.refresh()
    assert stream.run_id() is None


@pytest.mark.timeout(120)
def test_coordinator_notifications_written_and_cleared(stream):
    stream.create()
    stream.write_config({"app.run.id": "R1"})
    n = DrainNotification.create("R1")
    offset = stream.write_notification(n)
    assert offset == 1
    stream.refresh()
    [rec] = stream.notifications()
    assert (rec.uuid, rec.notification, rec.cleared, rec.offset, rec.run_id) == (n.uuid, n, False, offset, "R1")
    assert rec.timestamp_ms > 0

    tombstone = stream.clear_notification(n.uuid)
    assert tombstone == offset + 1
    for s in (stream, reader(stream)):
        try:
            s.refresh()
            [rec] = s.notifications()
            # Cleared, and still known: the value the tombstone deleted.
            assert (rec.uuid, rec.cleared, rec.offset, rec.notification, rec.run_id) == \
                (n.uuid, True, tombstone, n, "R1")
            assert s.problems == []
        finally:
            if s is not stream:
                s.close()


@pytest.mark.timeout(120)
def test_a_notification_under_another_key_is_read_with_its_key(stream):
    """Samza's DrainMonitor reads values only: a notification under another key drains the job all the same,
    so it is listed (with the key it is under, which drain cancel tombstones), not skipped."""
    stream.create()
    good = DrainNotification.create("R1")
    misfiled = DrainNotification.create("R1")
    stream.write_notification(good)
    wrong_key = str(uuid.uuid4())
    offset = stream.put(DRAIN_NAMESPACE, wrong_key, encode_notification(misfiled))
    stream.refresh()
    found = {r.uuid: r for r in stream.notifications()}
    assert set(found) == {good.uuid, misfiled.uuid}
    assert found[good.uuid].stored_key == good.uuid and not found[good.uuid].miskeyed
    assert found[misfiled.uuid].stored_key == wrong_key and found[misfiled.uuid].miskeyed
    assert found[misfiled.uuid].offset == offset
    assert stream.problems == []
