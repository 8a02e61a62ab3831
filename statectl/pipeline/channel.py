"""How a container sends and finds control messages (drain, end of stream, watermark) on the job's
intermediate streams: a producer task's message to a stream's aggregate partition, an aggregating task's
broadcast to the other partitions, and whether a partition's stream is already over for this run (its
last record is this run's broadcast), so that a restarted container never appends after it."""

from __future__ import annotations

from typing import Any

from statectl.formats.checkpoint import SSP
from statectl.formats.drain import DRAIN, END_OF_STREAM, DrainFormatError, aggregate_partition, decode_control
from statectl.kafka.client import KafkaSecurity, open_consumer
from statectl.kafka.tails import read_tails
from statectl.pipeline.control import RunBounds
from statectl.pipeline.spec import SYSTEM


class ControlChannel:
    """The control messages of run ``run_id`` on the intermediate streams (partition counts in
    ``partitions``), sent with ``producer``; read on a consumer of its own, opened at first use.
    ``bounds``: the run's bounds (None: none recorded, so no end-of-stream message counts)."""

    def __init__(self, bootstrap: str, security: KafkaSecurity | None, producer: Any, partitions: dict[str, int],
                 run_id: str, bounds: RunBounds | None):
        self.bootstrap = bootstrap
        self.security = security
        self.producer = producer
        self.partitions = partitions
        self.run_id = run_id
        self.bounds = bounds
        self._consumer: Any = None

    def _reader(self) -> Any:
        if self._consumer is None:
            self._consumer = open_consumer(self.bootstrap, security=self.security)
        return self._consumer

    def run_start(self, ssp: SSP) -> float:
        """The first offset of ``ssp`` written in this run (end-of-stream messages before it are an earlier
        run's); without recorded bounds no end-of-stream message counts."""
        if self.bounds is None:
            return float("inf")
        return self.bounds.run_start(ssp)

    def is_aggregate(self, ssp: SSP) -> bool:
        return ssp.partition == aggregate_partition(ssp.stream, self.partitions[ssp.stream])

    def _tails(self, topic: str) -> dict[int, Any]:
        return read_tails(self._reader(), topic, list(range(self.partitions[topic])), self.bootstrap)

    def _finished(self, topic: str, tail: Any) -> bool:
        """Whether a partition's last record is this run's drain or end-of-stream broadcast (its stream is
        over for this run)."""
        if not tail.records:
            return False
        rec = tail.records[-1]
        return self.broadcast_kind(SSP(SYSTEM, topic, tail.partition), rec.offset, rec.value) is not None

    def broadcast_kind(self, ssp: SSP, offset: int, value: bytes | None) -> int | None:
        """DRAIN or END_OF_STREAM when the record is this run's broadcast of that kind, else None."""
        try:
            m = decode_control(value)
        except DrainFormatError:
            return None
        if m.task_name is not None:
            return None
        if m.type == DRAIN and m.run_id == self.run_id:
            return DRAIN
        if m.type == END_OF_STREAM and offset >= self.run_start(ssp):
            return END_OF_STREAM
        return None

    def broadcast(self, topic: str, value: bytes, exclude: int | None) -> None:
        """Send a control message with no task name to the partitions of ``topic`` (all but ``exclude``),
        skipping those already finished by this run's drain broadcast (so a restart never appends after it)."""
        self.producer.flush()
        for p, tail in self._tails(topic).items():
            if p != exclude and not self._finished(topic, tail):
                self.producer.send(topic, key=None, value=value, partition=p)
        self.producer.flush()

    def to_aggregate(self, topic: str, value: bytes) -> None:
        """Send a producer task's control message to ``topic``'s aggregate partition, after everything this
        container sent before it is acknowledged; not when that partition is already finished."""
        self.producer.flush()
        p = aggregate_partition(topic, self.partitions[topic])
        if not self._finished(topic, self._tails(topic)[p]):
            self.producer.send(topic, key=None, value=value, partition=p)
        self.producer.flush()

    def broadcast_at(self, ssp: SSP, offset: int) -> int | None:
        """DRAIN or END_OF_STREAM when the record of ``ssp`` at ``offset`` is this run's broadcast of that
        kind, else None."""
        import kafka

        consumer = self._reader()
        tp = kafka.TopicPartition(ssp.stream, ssp.partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        for _ in range(20):
            for rec in consumer.poll(timeout_ms=200).get(tp, []):
                if rec.offset == offset:
                    return self.broadcast_kind(ssp, offset, rec.value)
                if rec.offset > offset:
                    return None
        return None

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001 - closing on the way out; the error that got here stands
                pass
            self._consumer = None
