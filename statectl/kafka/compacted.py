"""The latest value per key of a compacted topic: Samza's checkpoint topic today, the coordinator stream next.

A compacted topic is a table whose rows are the last record of each key; a null value (a tombstone)
deletes the row. :class:`CompactedTopic` reads one partition incrementally: each :meth:`refresh` reads on
from where the previous one stopped, as Samza's KafkaCheckpointManager and CoordinatorStreamStore do, so a
long-lived reader pays only for what was written since.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Hashable, TypeVar

from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, PartitionReader, open_consumer, partition_count

K = TypeVar("K")


@dataclass(frozen=True)
class LatestRecord(Generic[K]):
    """The last record of one key: its offset, its decoded key and its raw value (None: a tombstone);
    its timestamp (-1: unknown); ``last_value``: the newest non-null value the key had (for a tombstone,
    the value it deleted, when this reader saw it)."""

    offset: int
    key: K
    value: bytes | None
    timestamp_ms: int = -1
    last_value: bytes | None = None


class CompactedTopic(Generic[K]):
    """The latest record per key of ``topic`` partition ``partition`` on ``bootstrap``.

    ``decode`` turns a record's key bytes into a key object, raising ValueError for a key this reader does
    not understand (the record is then counted in ``skipped`` and ignored). ``ident`` says which decoded
    keys are the same row (default: the decoded key itself). Tombstones are kept as records whose value is
    None, so a caller can tell "deleted" from "never written".

    Not thread-safe. ``close()`` releases the connection; the next ``refresh()`` reconnects and re-reads
    the partition from its start.
    """

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, *,
                 decode: Callable[[bytes | None], K], ident: Callable[[K], Hashable] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, security: KafkaSecurity | None = None):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.timeout_s = timeout_s
        self._decode = decode
        self._ident = ident or (lambda k: k)
        self.security = security  # None: PLAINTEXT
        self._consumer: Any = None
        self._reader: PartitionReader | None = None
        self.latest: dict[Hashable, LatestRecord[K]] = {}
        self.skipped = 0

    def refresh(self) -> bool:
        """Read the partition on to its end; False (and nothing read) when the topic does not exist.

        Raises StatectlError when the brokers cannot be reached or fail (kafka.client's errors)."""
        if self._consumer is None:
            self._consumer = open_consumer(self.bootstrap, timeout_s=self.timeout_s, security=self.security)
        if self._reader is None:
            if partition_count(self._consumer, self.topic, self.bootstrap) is None:
                return False
            self._reader = PartitionReader(self._consumer, self.topic, self.partition, self.bootstrap)
            self._reader.seek()
        for batch in self._reader.batches(quick=True):  # no empty poll at the end (PartitionReader.batches)
            for rec in batch:
                try:
                    key = self._decode(rec.key)
                except ValueError:
                    self.skipped += 1
                    continue
                ident = self._ident(key)
                last = rec.value
                if last is None:
                    before = self.latest.get(ident)
                    last = before.last_value if before is not None else None
                ts = rec.timestamp if isinstance(getattr(rec, "timestamp", None), int) else -1
                self.latest[ident] = LatestRecord(rec.offset, key, rec.value, ts, last)
        return True

    def get(self, ident: Hashable) -> LatestRecord[K] | None:
        """The last record of the row ``ident`` as of the last refresh (a tombstone included), or None."""
        return self.latest.get(ident)

    def close(self) -> None:
        """Close the connection and forget what was read; idempotent."""
        consumer, self._consumer, self._reader = self._consumer, None, None
        self.latest = {}
        self.skipped = 0
        if consumer is not None:
            consumer.close()
