"""The true ends of many partitions at once, with their last few records.

A broker's end offset (high watermark) is not always the offset after the last record: Tansu reports
the base offset of the last record batch + 1 (SERVICES.md), so after batched produces it under-reports.
:func:`read_tails` therefore reads each partition from a little before its reported end to its real
end, all partitions on one consumer (one fetch covers them all), and returns where each really ends
and the records it read there. On Kafka that is the reported end and the last ``last`` records.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import StatectlError
from statectl.kafka.client import OffsetOutOfRange, kafka_errors, kafka_failure, kafka_module

# A read that makes no progress this long while short of some partition's reported end fails.
TAIL_STALL_S = 30.0


@dataclass
class Tail:
    """Partition ``partition``: its log start, its true end (the next offset to be written) and the
    records read at its end (at least the last ``last`` ones, oldest first; more on Tansu)."""

    partition: int
    beginning: int
    end: int
    records: list[Any] = field(default_factory=list)


def read_tails(consumer: Any, topic: str, partitions: list[int], bootstrap: str, *, last: int = 1,
               poll_ms: int = 100) -> dict[int, Tail]:
    """The :class:`Tail` of each of ``partitions`` of ``topic`` (which must exist), read on ``consumer``
    (outside any group; its assignment is replaced). Raises StatectlError when the brokers fail or a
    partition's read stalls for TAIL_STALL_S."""
    kafka = kafka_module()
    errors = kafka_errors()
    tps = {p: kafka.TopicPartition(topic, p) for p in partitions}
    if not tps:
        return {}
    try:
        begins = consumer.beginning_offsets(list(tps.values()))
        ends = consumer.end_offsets(list(tps.values()))
    except errors.KafkaError as e:
        raise kafka_failure(bootstrap, e, f"listing offsets of {topic}", client=consumer, reach=True) from e
    tails = {p: Tail(p, begins[tp], ends[tp]) for p, tp in tps.items()}
    kept: dict[int, deque] = {p: deque(maxlen=max(1, last) * 64) for p in tps}
    reading = {p for p, t in tails.items() if t.end > t.beginning}
    if not reading:
        return tails
    consumer.assign([tps[p] for p in reading])
    for p in reading:
        consumer.seek(tps[p], max(tails[p].beginning, tails[p].end - max(1, last)))
    position = {p: max(tails[p].beginning, tails[p].end - max(1, last)) for p in reading}
    last_progress = time.monotonic()
    while True:
        try:
            polled = consumer.poll(timeout_ms=poll_ms, max_records=100_000)
            now = {p: consumer.position(tps[p]) for p in reading}
        except errors.KafkaError as e:
            raise kafka_failure(bootstrap, e, f"reading the end of {topic}", client=consumer) from e
        for tp, records in polled.items():
            kept[tp.partition].extend(records)
        moved = any(now[p] > position[p] for p in reading)
        position = now
        if all(position[p] >= tails[p].end for p in reading):
            # Past every reported end: the last batches were read (fetches return whole batches); take what
            # the client still holds of them without waiting, and stop.
            try:
                for tp, records in consumer.poll(timeout_ms=0, max_records=100_000).items():
                    kept[tp.partition].extend(records)
                position = {p: consumer.position(tps[p]) for p in reading}
            except errors.KafkaError as e:
                raise kafka_failure(bootstrap, e, f"reading the end of {topic}", client=consumer) from e
            break
        if moved or polled:
            last_progress = time.monotonic()
            continue
        if time.monotonic() - last_progress > TAIL_STALL_S:
            short = sorted(p for p in reading if position[p] < tails[p].end)
            raise StatectlError(f"kafka {bootstrap}: reading the end of {topic} stalled (partitions "
                                f"{', '.join(map(str, short[:5]))} short of their end)")
    for p in reading:
        tails[p].end = position[p]
        tails[p].records = list(kept[p])
    return tails


def check_in_range(consumer: Any, topic: str, partition: int, bootstrap: str, next_offset: int | None) -> Tail:
    """Raise OffsetOutOfRange when reading ``topic[partition]`` on from ``next_offset`` would skip records:
    the log now starts after it (retention, compaction) or ends before it (the topic recreated). None (from
    the log start) is always in range. Returns the partition's Tail (its true end)."""
    tail = read_tails(consumer, topic, [partition], bootstrap, last=1)[partition]
    if next_offset is not None and not tail.beginning <= next_offset <= tail.end:
        raise OffsetOutOfRange(f"the next offset {next_offset} is outside {topic}[{partition}] "
                               f"(offsets {tail.beginning} to {tail.end})")
    return tail


# -- a topic deleted and recreated under a reader ---------------------------------------------------


def topic_identity(consumer: Any, topic: str, bootstrap: str) -> tuple[str | None, int | None]:
    """(topic id, partition count) of ``topic`` from fresh metadata: its KIP-516 id where the brokers
    report one (Kafka 2.8+, Tansu; None otherwise) and None for the count when the topic does not exist.
    Metadata only: never creates the topic. Raises StatectlError when the brokers fail, AuthError when
    their ACLs refuse."""
    from statectl.kafka.client import partition_count

    n = partition_count(consumer, topic, bootstrap)
    cluster = getattr(consumer, "_cluster", None)  # kafka-python keeps the ids in its metadata cache only
    topic_id = cluster.topic_id(topic) if n is not None and hasattr(cluster, "topic_id") else None
    return (None if topic_id is None else str(topic_id)), n


class TopicRecreated(OffsetOutOfRange):
    """The topic was deleted and recreated under a reader: a new topic id, another partition count, or a
    log that now ends before the next offset to read. Positions in the old log mean nothing in the new one."""


class TopicWatch:
    """Notices that the topic a follower reads was deleted and recreated under it, which a consumer does
    not see by itself: on some brokers (Tansu) it just polls nothing at a position past the new end,
    and a position inside the new log reads records of another topic as if they followed.

    :meth:`check` compares the topic with what it was when the watch was made: a new topic id, another
    partition count, or a log that now ends (or starts) on the wrong side of the next offset to read
    raise OffsetOutOfRange (TopicRecreated when the topic itself changed). A broker that does not answer
    is ridden out: ``check`` then returns None and ``outage`` says why; followers keep polling (kafka-python
    reconnects by itself), as PartitionReader's follow mode does with polls that bring nothing."""

    def __init__(self, consumer: Any, topic: str, bootstrap: str):
        self.consumer, self.topic, self.bootstrap = consumer, topic, bootstrap
        self.topic_id, self.partitions = topic_identity(consumer, topic, bootstrap)
        self.outage: str | None = None

    def check(self, next_offsets: dict[int, int | None], *, last: int = 1) -> dict[int, Tail] | None:
        """The tails of the partitions in ``next_offsets`` (partition -> the next offset the follower will
        read, None for the log start), or None when the brokers cannot be reached now or the topic does not
        exist (deleted, not recreated yet: its tails are not asked for, which would create it on some
        brokers). Raises TopicRecreated or OffsetOutOfRange (see the class doc); AuthError as read_tails."""
        from statectl.errors import AuthError

        try:
            topic_id, n = topic_identity(self.consumer, self.topic, self.bootstrap)
            if n is None:
                self.outage = f"topic {self.topic} does not exist (deleted?)"
                return None
            if (self.topic_id is not None and topic_id is not None and topic_id != self.topic_id) \
                    or n != self.partitions:
                was = f"id {self.topic_id}, {self.partitions} partitions"
                raise TopicRecreated(f"topic {self.topic} was deleted and recreated ({was}; now id {topic_id}, "
                                     f"{n} partitions)")
            tails = read_tails(self.consumer, self.topic, sorted(next_offsets), self.bootstrap, last=last)
        except AuthError:
            raise
        except TopicRecreated:
            raise
        except StatectlError as e:
            self.outage = str(e)
            return None
        self.outage = None
        for p, next_offset in next_offsets.items():
            tail = tails[p]
            if next_offset is not None and next_offset > tail.end:
                raise TopicRecreated(f"{self.topic}[{p}] now ends at offset {tail.end}, before the next offset "
                                     f"{next_offset} to read: the topic was deleted and recreated (or truncated)")
            if next_offset is not None and next_offset < tail.beginning:
                raise OffsetOutOfRange(f"the next offset {next_offset} is outside {self.topic}[{p}] "
                                       f"(offsets {tail.beginning} to {tail.end})")
        return tails
