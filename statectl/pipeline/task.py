"""What a job's code sees: the messages it processes, where it sends results, its stores.

A task object (made by ``StageSpec.task(context)``) implements ``process(message, out)`` and, when it
needs them, ``window(out, now_ms)`` (called every ``JobSpec.window_interval_s``),
``on_watermark(watermark_ms, out)`` (its input watermark advanced; a drain sends Long.MAX_VALUE) and
``on_drain(out)`` (every input is drained: emit what is held; the final commit follows; bounded by
``task.callback.drain.timeout.ms`` when set) and ``on_end_of_stream(out)`` (every input has ended, its
bounded sources read to their end: emit what is held; a task without it gets ``on_drain`` instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Message:
    """One input record: its topic, partition, offset, key and value (the payload, without the
    intermediate-stream type byte), and its Kafka timestamp."""

    stream: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


class Collector:
    """Where a task sends: ``send(topic, value, key)``. To an intermediate stream of the job the value gets
    Samza's user-message type byte and the partition is Kafka's default partitioner over the key (a
    null key goes to partition 0, as Samza's partitionBy does)."""

    def __init__(self, send: Callable[[str, bytes | None, bytes | None], None]):
        self._send = send

    def send(self, topic: str, value: bytes | None, key: bytes | None = None) -> None:
        self._send(topic, value, key)


class KeyValueStore:
    """A task's RocksDB store (rocksdict, raw bytes), every write also sent to its changelog partition."""

    def __init__(self, db: Any, path: Path, log: Callable[[bytes, bytes | None], None]):
        self._db = db
        self.path = path
        self._log = log

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._db[key] = value
        self._log(key, value)

    def delete(self, key: bytes) -> None:
        del self._db[key]
        self._log(key, None)

    def items(self, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """The entries whose key starts with ``prefix``, in key order."""
        it = self._db.items(from_key=prefix) if prefix else self._db.items()
        for key, value in it:
            if prefix and not key.startswith(prefix):
                return
            yield key, value


@dataclass
class TaskContext:
    """A task's identity and stores, handed to ``StageSpec.task``."""

    job: str
    stage: str
    task_name: str
    partition: int
    stores: dict[str, KeyValueStore]
