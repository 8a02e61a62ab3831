"""kafka-python clients with statectl's settings, errors mapped to statectl.errors, and reading a partition to
its end.

- Brokers that cannot be reached within ``timeout_s`` raise a StatectlError naming them (exit 1).
- A topic or partition that does not exist raises NotFoundError naming it (exit 10). Existence is checked
  through metadata before any offset request: some brokers (Tansu) create a topic on a ListOffsets request.
- kafka-python missing raises MissingDependencyError (exit 13).

Consumers never join a group (``group_id=None``): partitions are assigned and positions kept here.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from statectl.errors import MissingDependencyError, NotFoundError, StatectlError

DEFAULT_TIMEOUT_S = 5.0
# An empty poll this long, at or past the reported end, means the end (see PartitionReader).
EMPTY_POLL_MS = 300
# Fail a read that makes no progress for this long while short of the reported end.
STALL_TIMEOUT_S = 60.0
MAX_POLL_RECORDS = 10_000
CLIENT_ID = "statectl"


def kafka_module() -> Any:
    """The ``kafka`` package (kafka-python); MissingDependencyError when it is not installed."""
    try:
        import kafka
    except ImportError as e:
        raise MissingDependencyError("kafka-python is not installed; it is needed for --kafka",
                                     hint="pip install kafka-python") from e
    return kafka


def _errors() -> Any:
    kafka_module()
    import kafka.errors

    return kafka.errors


def _servers(bootstrap: str) -> list[str]:
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers:
        from statectl.errors import UsageError

        raise UsageError("no Kafka brokers given", hint="pass --kafka HOST:PORT[,HOST:PORT...]")
    return servers


def unreachable(bootstrap: str, cause: object) -> StatectlError:
    """The error for brokers that cannot be reached (or answer nothing useful)."""
    return StatectlError(f"cannot reach Kafka brokers {bootstrap}: {cause}",
                         hint="check --kafka HOST:PORT[,..] (or STATECTL_KAFKA) and that the brokers are up")


def _common(bootstrap: str, timeout_s: float) -> dict[str, Any]:
    return {
        "bootstrap_servers": _servers(bootstrap),
        "client_id": CLIENT_ID,
        "bootstrap_timeout_ms": int(timeout_s * 1000),
        "request_timeout_ms": max(30_000, int(timeout_s * 1000)),
    }


def _open(bootstrap: str, factory: Callable[[], Any]) -> Any:
    errors = _errors()
    unreachable_errors = tuple(getattr(errors, name) for name in
                               ("KafkaTimeoutError", "KafkaConnectionError", "NoBrokersAvailable")
                               if hasattr(errors, name))
    try:
        return factory()
    except unreachable_errors as e:
        raise unreachable(bootstrap, e) from e
    except errors.KafkaError as e:
        raise StatectlError(f"kafka {bootstrap}: {e}") from e


def open_consumer(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """A KafkaConsumer outside any group, that never creates topics and never resets a position silently
    (an out-of-range position raises). The caller closes it."""
    kafka = kafka_module()
    cfg = dict(_common(bootstrap, timeout_s), group_id=None, enable_auto_commit=False,
               allow_auto_create_topics=False, auto_offset_reset="none", fetch_max_wait_ms=100,
               max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=64 * 1024 * 1024,
               max_poll_records=MAX_POLL_RECORDS)
    return _open(bootstrap, lambda: kafka.KafkaConsumer(**cfg))


def open_producer(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """A KafkaProducer with ``acks=all`` that never creates topics. The caller closes it."""
    kafka = kafka_module()
    cfg = dict(_common(bootstrap, timeout_s), acks="all", allow_auto_create_topics=False,
               max_block_ms=max(10_000, int(timeout_s * 1000)))
    return _open(bootstrap, lambda: kafka.KafkaProducer(**cfg))


def open_admin(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """A KafkaAdminClient. The caller closes it."""
    kafka = kafka_module()
    cfg = _common(bootstrap, timeout_s)
    return _open(bootstrap, lambda: kafka.KafkaAdminClient(**cfg))


def partition_count(consumer: Any, topic: str, bootstrap: str) -> int | None:
    """The number of partitions of ``topic``, or None when it does not exist (metadata only: this never
    creates the topic)."""
    errors = _errors()
    try:
        if topic not in consumer.topics():
            return None
        parts = consumer.partitions_for_topic(topic)
    except errors.KafkaError as e:
        raise unreachable(bootstrap, e) from e
    return len(parts) if parts else None


def require_partition(consumer: Any, topic: str, partition: int, bootstrap: str) -> None:
    """Raise NotFoundError (exit 10) unless ``topic`` exists on the brokers with ``partition``."""
    n = partition_count(consumer, topic, bootstrap)
    if n is None:
        raise NotFoundError(f"topic {topic} does not exist on {bootstrap}",
                            hint="check the topic name and --kafka")
    if not 0 <= partition < n:
        raise NotFoundError(f"topic {topic} has {n} partition{'s' if n != 1 else ''}; there is no partition "
                            f"{partition}", hint=f"pass --partition between 0 and {n - 1}")


def create_topic(bootstrap: str, topic: str, *, partitions: int = 1, configs: dict[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Create ``topic`` with the brokers' default replication factor; False if it already existed."""
    errors = _errors()
    from kafka.admin import NewTopic

    admin = open_admin(bootstrap, timeout_s=timeout_s)
    try:
        admin.create_topics([NewTopic(topic, partitions, -1, topic_configs=dict(configs or {}))])
        return True
    except errors.TopicAlreadyExistsError:
        return False
    except errors.KafkaError as e:
        raise StatectlError(f"kafka {bootstrap}: cannot create topic {topic}: {e}") from e
    finally:
        admin.close()


def produce(producer: Any, topic: str, partition: int, key: bytes | None, value: bytes | None, bootstrap: str,
            *, timeout_s: float = 30.0) -> int:
    """Write one record, wait for all in-sync replicas (the producer's acks=all) and flush; return its offset.

    Raises StatectlError when the write fails or times out: then it may or may not have been written.
    """
    errors = _errors()
    try:
        meta = producer.send(topic, key=key, value=value, partition=partition).get(timeout=timeout_s)
        producer.flush(timeout=timeout_s)
    except errors.KafkaTimeoutError as e:
        raise StatectlError(f"kafka {bootstrap}: writing to {topic} timed out: {e}") from e
    except errors.KafkaError as e:
        raise StatectlError(f"kafka {bootstrap}: writing to {topic} failed: {e}") from e
    return meta.offset


class PartitionReader:
    """Reads one partition from a start offset to its end, in batches, on an assigned consumer.

    "The end" follows SERVICES.md: Tansu reports a high watermark that is the base offset of the last record
    batch + 1, so it under-reports after batched produces. A read is done only after a poll that returns
    nothing AND a position at or past the reported end; the end is never used to count what remains.
    ``position`` is the next offset to read (after the last record returned); ``reported_end`` is the end
    the broker reported when the read began.
    """

    def __init__(self, consumer: Any, topic: str, partition: int, bootstrap: str, *,
                 empty_poll_ms: int = EMPTY_POLL_MS, stall_timeout_s: float = STALL_TIMEOUT_S):
        kafka = kafka_module()
        self.consumer = consumer
        self.topic = topic
        self.partition = partition
        self.bootstrap = bootstrap
        self.empty_poll_ms = empty_poll_ms
        self.stall_timeout_s = stall_timeout_s
        self.tp = kafka.TopicPartition(topic, partition)
        self.position: int | None = None
        self.beginning: int | None = None
        self.reported_end: int | None = None

    def _offsets(self) -> tuple[int, int]:
        errors = _errors()
        try:
            begin = self.consumer.beginning_offsets([self.tp])[self.tp]
            end = self.consumer.end_offsets([self.tp])[self.tp]
        except errors.KafkaError as e:
            raise unreachable(self.bootstrap, f"listing offsets of {self.topic}[{self.partition}]: {e}") from e
        return begin, end

    def seek(self, start: int | None = None) -> int:
        """Assign the partition and position it at ``start`` (None, or before the log start: the log start).

        Returns the position. The partition must exist (see :func:`require_partition`).
        """
        begin, end = self._offsets()
        self.beginning, self.reported_end = begin, end
        pos = begin if start is None or start < begin else start
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, pos)
        self.position = pos
        return pos

    def batches(self, stop: int | None = None) -> Iterator[list[Any]]:
        """Yield lists of ConsumerRecords in offset order from the current position to the end, or to the
        records below offset ``stop`` (exclusive, like an end offset). Call :meth:`seek` first.

        Raises StatectlError when the brokers fail, or the read stalls for ``stall_timeout_s`` short of the
        reported end; StatectlError when the position is out of range (e.g. deleted by retention).
        """
        if self.position is None:
            raise RuntimeError("PartitionReader.batches() before seek()")
        errors = _errors()
        last_progress = time.monotonic()
        while stop is None or self.position < stop:
            try:
                records = self.consumer.poll(timeout_ms=self.empty_poll_ms).get(self.tp, [])
                position = self.consumer.position(self.tp)
            except errors.OffsetOutOfRangeError as e:
                raise StatectlError(f"offset {self.position} of {self.topic}[{self.partition}] is out of range "
                                    f"(the log starts at {self.beginning}): {e}") from e
            except errors.KafkaError as e:
                raise StatectlError(f"kafka {self.bootstrap}: reading {self.topic}[{self.partition}] at offset "
                                    f"{self.position} failed: {e}") from e
            if stop is not None and records and records[-1].offset >= stop:
                records = [r for r in records if r.offset < stop]
                position = stop
            if records:
                self.position = position
                last_progress = time.monotonic()
                yield records
                continue
            if position > self.position:  # only control records or compacted gaps
                self.position = position
                last_progress = time.monotonic()
                continue
            assert self.reported_end is not None
            if self.position >= self.reported_end:
                return
            if time.monotonic() - last_progress > self.stall_timeout_s:
                raise StatectlError(f"kafka {self.bootstrap}: reading {self.topic}[{self.partition}] stalled at "
                                    f"offset {self.position} for {self.stall_timeout_s:.0f}s, short of its end "
                                    f"{self.reported_end}")
