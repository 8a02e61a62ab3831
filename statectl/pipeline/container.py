"""One stage of a job in one OS process: its tasks, their run loop, commits and the drain.

Start: each task's stores are restored from the snapshot its latest v2 checkpoint names (the restore
engine; a store with no checkpoint starts empty) and its inputs are read from the checkpointed offsets
+ 1 (Samza checkpoints the last processed offset). Run: records are polled from every input partition
(partitions assigned explicitly, no consumer group), handed to their task, and every
``commit_interval_s`` each task commits: its outputs flushed, a RocksDB checkpoint of each store backed
up through the backup engine, the last store's commit carrying the task's input offsets and the
stores' changelog positions (one Samza v2 checkpoint).

Drain (seed 004, pipeline.control): once the DrainMonitor finds a notification of this run, the
container stops fetching its sources and gives each source partition a watermark of Long.MAX_VALUE and
a drain message. A task whose inputs are all drained fires what it holds (``on_drain``), sends its
drain message to the aggregate partition of each intermediate stream it writes, makes its final,
blocking commit and stops. When every task has stopped the container exits 0.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.engine.backup import BackupOptions, backup
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import StatectlError
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    CheckpointV2,
    KafkaChangelogMarker,
    encode_changelog_marker,
)
from statectl.formats.drain import (
    DRAIN,
    END_OF_STREAM,
    USER_MESSAGE,
    WATERMARK,
    WATERMARK_INFINITY,
    DrainFormatError,
    decode_control,
    drain_message,
    encode_control,
    encode_user_message,
    watermark_message,
    aggregate_partition,
)
from statectl.kafka.client import open_consumer, open_producer, partition_count
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import read_tails
from statectl.local.layout import checkpoint_dir, local_checkpoint_dirs, store_dir
from statectl.pipeline.control import DrainMonitor, DrainStates, WatermarkStates, load_drain_states, save_drain_states
from statectl.pipeline.spec import SYSTEM, JobSpec, StageSpec, stage_partitions, task_name, with_config
from statectl.pipeline.task import Collector, KeyValueStore, Message, TaskContext
from statectl.rocks.live import LiveStore
from statectl.session import Session

log = logging.getLogger("statectl.pipeline")

POLL_MS = 100
MAX_POLL_RECORDS = 5000


@dataclass
class Runtime:
    """Where a container runs: brokers, the job's state dir, its blob store (a Session gives the blob
    store and catalog), its run id."""

    bootstrap: str
    state_dir: Path
    run_id: str
    session: Session  # its blob store and catalog (with the job's checkpoint topic as commit log)


@dataclass
class _Store:
    name: str
    live: LiveStore
    changelog: str
    changelog_offset: int | None = None  # of the newest changelog record acknowledged


@dataclass
class _Task:
    name: str
    partition: int
    inputs: list[SSP]
    user: Any = None
    stores: list[_Store] = field(default_factory=list)
    processed: dict[str, str] = field(default_factory=dict)  # ssp key -> last processed offset
    drain: DrainStates | None = None
    watermarks: WatermarkStates | None = None
    watermark: int = -1
    stopped: bool = False
    saved_states: dict[str, list[str]] = field(default_factory=dict)


class Container:
    """The tasks of ``stage`` of ``job`` (see the module doc). ``run()`` returns when every task has
    drained and stopped (exit 0), or raises."""

    def __init__(self, job: JobSpec, stage: str, runtime: Runtime, *,
                 on_note: Callable[[str], None] | None = None):
        self.job = job
        self.stage: StageSpec = job.stage(stage)
        self.rt = runtime
        self.note = on_note or (lambda m: log.warning(m))
        self.consumer: Any = None
        self.producer: Any = None
        self.security = runtime.session.kafka_security
        self.coordinator = CoordinatorStream(runtime.bootstrap, job.name, job.job_id, security=self.security)
        self.checkpoints = KafkaCheckpointLog(runtime.bootstrap, job.name, job.job_id, security=self.security)
        self.partitions: dict[str, int] = {}
        self.tasks: list[_Task] = []
        self.by_tp: dict[tuple[str, int], _Task] = {}
        self.monitor: DrainMonitor | None = None
        self.draining = False
        self._tail_consumer: Any = None

    # -- start -------------------------------------------------------------------------------------

    def _partition_count(self, topic: str) -> int:
        n = self.partitions.get(topic)
        if n is None:
            n = partition_count(self.consumer, topic, self.rt.bootstrap)
            if n is None:
                raise StatectlError(f"topic {topic} of job {self.job.name} does not exist on {self.rt.bootstrap}",
                                    hint="the job's coordinator creates its intermediate, changelog and output "
                                         "topics at start; sources must exist")
            self.partitions[topic] = n
        return n

    def start(self) -> None:
        self.coordinator.require()
        self.job = with_config(self.job, self.coordinator.config())  # the deployment's timings
        self.consumer = open_consumer(self.rt.bootstrap, security=self.security)
        self.producer = open_producer(self.rt.bootstrap, security=self.security)
        for topic in {*self.stage.inputs, *self.stage.intermediate_outputs}:
            self._partition_count(topic)
        for s in self.job.stages:  # producer counts need every stage's input partitions
            for topic in s.inputs:
                self._partition_count(topic)
        expected = {t: self.job.producers(t, self.partitions) for t in self.job.intermediate}
        latest, problems = self._latest_checkpoints()
        for p in problems:
            self.note(p)
        for p in range(stage_partitions(self.stage, self.partitions)):
            name = task_name(self.stage.name, p)
            inputs = [SSP(SYSTEM, t, p) for t in self.stage.inputs if p < self.partitions[t]]
            task = _Task(name, p, inputs, drain=DrainStates(inputs, expected),
                         watermarks=WatermarkStates(inputs, expected))
            cp = latest.get(name)
            if cp is not None:
                task.processed = {ssp.key(): cp.input_offsets[ssp.key()] for ssp in inputs
                                  if ssp.key() in cp.input_offsets}
            task.stores = [self._open_store(task, store, cp) for store in self.stage.stores]
            ctx = TaskContext(self.job.name, self.stage.name, name, p,
                              {s.name: KeyValueStore(s.live.db, s.live.path, self._logger(task, s))
                               for s in task.stores})
            task.user = self.stage.task(ctx)
            self.tasks.append(task)
            for ssp in inputs:
                self.by_tp[(ssp.stream, ssp.partition)] = task
        self._assign()
        self.monitor = DrainMonitor(self.coordinator, self.rt.run_id, poll_s=self.job.drain_poll_interval_s,
                                    on_problem=self.note)
        if self.monitor.check():
            self._resume_drain()
        self.monitor.start()

    def _latest_checkpoints(self) -> tuple[dict[str, CheckpointV2], list[str]]:
        try:
            return self.checkpoints.latest_checkpoints()
        except StatectlError as e:
            if getattr(e, "exit_code", None) == 10:  # no checkpoint topic yet: a first start
                return {}, []
            raise

    def _open_store(self, task: _Task, name: str, cp: CheckpointV2 | None) -> _Store:
        path = store_dir(self.rt.state_dir, name, task.name)
        ref = StoreRef(self.job.name, self.job.job_id, task.name, name)
        marker = cp.state_checkpoint_markers.get(BLOB_STORE_FACTORY, {}).get(name) if cp else None
        if marker:
            restore(RestoreOptions(ref, path, state_dir=self.rt.state_dir), self.rt.session.blobstore,
                    self.rt.session.catalog)
        elif path.exists():
            shutil.rmtree(path)  # no checkpoint covers it: it would hold effects of messages read again
        store = _Store(name, LiveStore(path), self.job.changelog_topic(name))
        return store

    def _logger(self, task: _Task, store: _Store) -> Callable[[bytes, bytes | None], None]:
        def log_write(key: bytes, value: bytes | None) -> None:
            future = self.producer.send(store.changelog, key=key, value=value, partition=task.partition)
            future.add_callback(lambda meta: _advance(store, meta.offset))
        return log_write

    def _assign(self) -> None:
        """Assign the active tasks' input partitions (sources only while not draining) and seek them to
        the checkpointed offset + 1, or the log start."""
        import kafka

        tps = []
        for task in self.tasks:
            if task.stopped:
                continue
            for ssp in task.inputs:
                if self.draining and not self.job.is_intermediate(ssp.stream):
                    continue
                if task.drain.is_drained(ssp):
                    continue
                tps.append((kafka.TopicPartition(ssp.stream, ssp.partition), task.processed.get(ssp.key())))
        self.consumer.assign([tp for tp, _ in tps])
        if not tps:
            return
        begins = self.consumer.beginning_offsets([tp for tp, _ in tps])
        for tp, offset in tps:
            position = int(offset) + 1 if offset is not None else begins[tp]
            self.consumer.seek(tp, max(position, begins[tp]))

    # -- run ---------------------------------------------------------------------------------------

    def run(self) -> None:
        """Process until every task has drained and stopped. Commits every ``commit_interval_s``."""
        self.start()
        next_commit = time.monotonic() + self.job.commit_interval_s
        next_window = time.monotonic() + self.job.window_interval_s
        try:
            while any(not t.stopped for t in self.tasks):
                if not self.draining and self.monitor.draining:
                    self._begin_drain()
                    continue
                polled = self.consumer.poll(timeout_ms=POLL_MS, max_records=MAX_POLL_RECORDS)
                for tp, records in polled.items():
                    task = self.by_tp[(tp.topic, tp.partition)]
                    ssp = SSP(SYSTEM, tp.topic, tp.partition)
                    for rec in records:
                        if task.stopped or task.drain.is_drained(ssp):
                            break
                        self._handle(task, ssp, rec)
                now = time.monotonic()
                if now >= next_window:
                    next_window = now + self.job.window_interval_s
                    for task in self.tasks:
                        if not task.stopped and hasattr(task.user, "window"):
                            task.user.window(self._collector(task), int(time.time() * 1000))
                if now >= next_commit:
                    next_commit = now + self.job.commit_interval_s
                    for task in self.tasks:
                        if not task.stopped:
                            self._commit(task)
        finally:
            self.close()

    def _handle(self, task: _Task, ssp: SSP, rec: Any) -> None:
        value = rec.value
        if self.job.is_intermediate(ssp.stream):
            kind = value[0] if value else None
            if kind == USER_MESSAGE:
                self._process(task, ssp, rec, value[1:])
            elif kind in (WATERMARK, DRAIN, END_OF_STREAM):
                try:
                    message = decode_control(value)
                except DrainFormatError as e:
                    self.note(f"task {task.name}: skipped a malformed control message at {ssp.key()}@{rec.offset}: {e}")
                else:
                    task.processed[ssp.key()] = str(rec.offset)
                    self._control(task, ssp, message)
                    return
            else:
                self.note(f"task {task.name}: skipped a message of unknown type at {ssp.key()}@{rec.offset}")
        else:
            self._process(task, ssp, rec, value)
        task.processed[ssp.key()] = str(rec.offset)

    def _process(self, task: _Task, ssp: SSP, rec: Any, payload: bytes | None) -> None:
        task.user.process(Message(ssp.stream, ssp.partition, rec.offset, rec.key, payload, rec.timestamp),
                          self._collector(task))

    def _collector(self, task: _Task) -> Collector:
        def send(topic: str, value: bytes | None, key: bytes | None) -> None:
            if self.job.is_intermediate(topic):
                partition = 0 if key is None else None  # Samza's partitionBy: a null key goes to partition 0
                self.producer.send(topic, key=key, value=encode_user_message(value or b""), partition=partition)
            else:
                self.producer.send(topic, key=key, value=value)
        return Collector(send)

    # -- control messages ----------------------------------------------------------------------------

    def _control(self, task: _Task, ssp: SSP, message: Any) -> None:
        if message.type == WATERMARK:
            if task.watermarks.update(ssp, message.task_name, message.timestamp):
                if message.task_name is not None and self._is_aggregate(ssp):
                    wm = task.watermarks.watermark(ssp)
                    self._broadcast(ssp.stream, encode_control(watermark_message(None, wm)), exclude=ssp.partition)
                self._advance_watermark(task)
            return
        if message.type != DRAIN:
            return  # end of stream: a bounded input has ended; nothing waits on it here
        if message.run_id != self.rt.run_id:
            return  # a drain of another run (Samza's RunLoop discards it too)
        if message.task_name is None:
            task.drain.mark_drained(ssp)
            self._pause(ssp)
            self._maybe_finish(task)
        elif task.drain.producer_drained(ssp, message.task_name):
            self._broadcast(ssp.stream, encode_control(drain_message(None, self.rt.run_id)), exclude=None)

    def _is_aggregate(self, ssp: SSP) -> bool:
        return ssp.partition == aggregate_partition(ssp.stream, self.partitions[ssp.stream])

    def _advance_watermark(self, task: _Task) -> None:
        wm = task.watermarks.task_watermark()
        if wm <= task.watermark:
            return
        task.watermark = wm
        out = self._collector(task)
        if hasattr(task.user, "on_watermark"):
            task.user.on_watermark(wm, out)
        for topic in self.stage.intermediate_outputs:
            self._to_aggregate(topic, encode_control(watermark_message(task.name, wm)))

    def _tails(self, topic: str) -> dict[int, Any]:
        if self._tail_consumer is None:
            self._tail_consumer = open_consumer(self.rt.bootstrap, security=self.security)
        return read_tails(self._tail_consumer, topic, list(range(self.partitions[topic])), self.rt.bootstrap)

    def _finished(self, tail: Any) -> bool:
        """Whether a partition's last record is the drain broadcast of this run (its stream is drained)."""
        if not tail.records:
            return False
        try:
            m = decode_control(tail.records[-1].value)
        except DrainFormatError:
            return False
        return m.type == DRAIN and m.task_name is None and m.run_id == self.rt.run_id

    def _broadcast(self, topic: str, value: bytes, exclude: int | None) -> None:
        """Send a control message with no task name to the partitions of ``topic`` (all but ``exclude``),
        skipping those already finished by this run's drain broadcast (so a restart never appends after it)."""
        self.producer.flush()
        for p, tail in self._tails(topic).items():
            if p != exclude and not self._finished(tail):
                self.producer.send(topic, key=None, value=value, partition=p)
        self.producer.flush()

    def _to_aggregate(self, topic: str, value: bytes) -> None:
        """Send a producer task's control message to ``topic``'s aggregate partition, after everything this
        container sent before it is acknowledged; not when that partition is already finished."""
        self.producer.flush()
        p = aggregate_partition(topic, self.partitions[topic])
        if not self._finished(self._tails(topic)[p]):
            self.producer.send(topic, key=None, value=value, partition=p)
        self.producer.flush()

    # -- drain -------------------------------------------------------------------------------------

    def _begin_drain(self) -> None:
        """The notification arrived: stop fetching sources; watermark to infinity and a drain message on
        every source partition (nothing fetched and unprocessed is left: polls are processed whole)."""
        self.draining = True
        self.note(f"draining run {self.rt.run_id} (notification {self.monitor.uuid})")
        for task in self.tasks:
            task.saved_states = {}
            sources = [ssp for ssp in task.inputs if not self.job.is_intermediate(ssp.stream)]
            for ssp in sources:
                task.watermarks.update(ssp, None, WATERMARK_INFINITY)
            if sources:
                self._advance_watermark(task)
            for ssp in sources:
                task.drain.mark_drained(ssp)
        self._assign()
        for task in self.tasks:
            self._maybe_finish(task)

    def _resume_drain(self) -> None:
        """At start, already draining (a notification written before the job started, or a restart in the
        middle of a drain): load the producer sets saved before the last commit, and take an intermediate
        partition whose last processed record is this run's drain broadcast as drained."""
        for task in self.tasks:
            task.drain.load(load_drain_states(self.coordinator, task.name, self.rt.run_id))
            task.saved_states = task.drain.export()
            for ssp in task.inputs:
                offset = task.processed.get(ssp.key())
                if self.job.is_intermediate(ssp.stream) and offset is not None and self._is_broadcast_at(ssp, int(offset)):
                    task.drain.mark_drained(ssp)
        self._begin_drain()

    def _is_broadcast_at(self, ssp: SSP, offset: int) -> bool:
        import kafka

        if self._tail_consumer is None:
            self._tail_consumer = open_consumer(self.rt.bootstrap, security=self.security)
        tp = kafka.TopicPartition(ssp.stream, ssp.partition)
        self._tail_consumer.assign([tp])
        self._tail_consumer.seek(tp, offset)
        for _ in range(20):
            for rec in self._tail_consumer.poll(timeout_ms=200).get(tp, []):
                if rec.offset == offset:
                    try:
                        m = decode_control(rec.value)
                    except DrainFormatError:
                        return False
                    return m.type == DRAIN and m.task_name is None and m.run_id == self.rt.run_id
                if rec.offset > offset:
                    return False
        return False

    def _pause(self, ssp: SSP) -> None:
        import kafka

        tp = kafka.TopicPartition(ssp.stream, ssp.partition)
        if tp in self.consumer.assignment():
            self.consumer.pause(tp)

    def _maybe_finish(self, task: _Task) -> None:
        """All of the task's inputs drained: fire what it holds, pass the drain on, commit, stop."""
        if task.stopped or not task.drain.all_drained():
            return
        out = self._collector(task)
        if hasattr(task.user, "on_drain"):
            task.user.on_drain(out)
        for topic in self.stage.intermediate_outputs:
            self._to_aggregate(topic, encode_control(drain_message(task.name, self.rt.run_id)))
        self._commit(task)
        task.stopped = True
        for ssp in task.inputs:  # nothing of it is read any more
            self._pause(ssp)
        self.note(f"task {task.name} drained and stopped")

    # -- commit ------------------------------------------------------------------------------------

    def _commit(self, task: _Task) -> None:
        """Flush what the task sent, then commit its input offsets with a snapshot of each store (one v2
        checkpoint; Samza's order: outputs and changelog durable before the offsets that produced them)."""
        self.producer.flush()
        if self.draining:
            states = task.drain.export()
            if states != task.saved_states:
                save_drain_states(self.coordinator, task.name, self.rt.run_id, states)
                task.saved_states = states
        offsets = dict(task.processed)
        cid = new_checkpoint_id()
        if not task.stores:
            if offsets:
                self.checkpoints.commit_offsets(task.name, cid, offsets)
            return
        for i, store in enumerate(task.stores):
            path = store_dir(self.rt.state_dir, store.name, task.name)
            cp_dir = checkpoint_dir(path, cid)
            store.live.checkpoint(cp_dir)
            marker = encode_changelog_marker(KafkaChangelogMarker(
                SSP(SYSTEM, store.changelog, task.partition),
                None if store.changelog_offset is None else str(store.changelog_offset)))
            last = i == len(task.stores) - 1
            backup(BackupOptions(StoreRef(self.job.name, self.job.job_id, task.name, store.name), path,
                                 checkpoint_dir=cp_dir, input_offsets=offsets if last else None,
                                 markers={KAFKA_CHANGELOG_FACTORY: {store.name: marker}}),
                   self.rt.session.blobstore, self.rt.session.catalog)
            for old, old_dir in local_checkpoint_dirs(path).items():
                if old != cid:
                    shutil.rmtree(old_dir, ignore_errors=True)

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        for task in self.tasks:
            for store in task.stores:
                try:
                    store.live.close()
                except Exception:  # noqa: BLE001 - closing on the way out; the error that got here stands
                    pass
        for client in (self.producer, self.consumer, self._tail_consumer):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
        self.producer = self.consumer = self._tail_consumer = None
        self.coordinator.close()
        self.checkpoints.close()


def _advance(store: _Store, offset: int) -> None:
    if store.changelog_offset is None or offset > store.changelog_offset:
        store.changelog_offset = offset
