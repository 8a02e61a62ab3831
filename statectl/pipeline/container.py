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

End of stream (Samza's EndOfStreamMessage; JobSpec.bounded): a bounded source partition is read up to
its end as of the start of the run (RunBounds, recorded by the job's coordinator), then it has ended, as
a Samza system consumer that returns an end-of-stream envelope (SystemConsumers marks the SSP
end-of-stream and stops fetching it). A task sends an end-of-stream message of its own to the aggregate
partition of each intermediate stream it writes once every one of its inputs has ended; the aggregating
task counts them (EndOfStreamStates, the drain's class) and broadcasts an end of stream with no task
name; a task whose inputs have all ended fires what it holds (``on_end_of_stream``, or ``on_drain``
when the task has no such method: OperatorImpl.onEndOfStream / handleEndOfStream), passes the end of
stream on, makes its final commit and stops (OperatorImpl.aggregateEndOfStream: commit, then shutdown of
the CURRENT_TASK). Inputs can end either way: a drain that starts after some sources have ended counts
their tasks' end-of-stream messages as drained producers, and the task finishes as drained.

``task.callback.drain.timeout.ms`` (TaskConfig.DRAIN_CALLBACK_TIMEOUT_MS, default -1: none): Samza's
RunLoop uses it instead of ``task.callback.timeout.ms`` for the callback of a drain message processed
while draining, which in a high-level job is the operator DAG's handleDrain (windows fired, drain
messages sent downstream); the final commit comes after it. statectl.pipeline processes synchronously
and has no per-message callback timeout, so the drain timeout bounds what that callback covers here: a
task's ``on_drain`` and the sending of its drain messages. Exceeded, the container fails (exit 1) as
Samza's fails on the callback's timeout, and the job's coordinator restarts it. An end of stream is
not bounded by it (Samza times that callback with task.callback.timeout.ms).
"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    ControlMessage,
    decode_control,
    drain_message,
    encode_control,
    end_of_stream_message,
    encode_user_message,
    watermark_message,
    aggregate_partition,
)
from statectl.formats.jobconfig import JobConfigError, get_int
from statectl.kafka.client import open_consumer, open_producer, partition_count
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import read_tails
from statectl.local.layout import checkpoint_dir, local_checkpoint_dirs, store_dir
from statectl.pipeline.control import (
    WATERMARK_IDLE_TIMEOUT,
    WATERMARK_QUORUM,
    DrainMonitor,
    DrainStates,
    EndOfStreamStates,
    RunBounds,
    WatermarkStates,
    load_end_states,
    load_run_bounds,
    save_drain_states,
)
from statectl.pipeline.spec import (
    DRAIN_CALLBACK_TIMEOUT,
    SYSTEM,
    JobSpec,
    StageSpec,
    stage_partitions,
    task_name,
    with_config,
)
from statectl.pipeline.task import Collector, KeyValueStore, Message, TaskContext
from statectl.rocks.live import LiveStore
from statectl.session import Session

log = logging.getLogger("statectl.pipeline")

POLL_MS = 100
MAX_POLL_RECORDS = 5000
IDLE_END_POLLS = 5


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
    eos: EndOfStreamStates | None = None
    watermarks: WatermarkStates | None = None
    watermark: int = -1
    stopped: bool = False
    saved_states: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})

    def ended(self, ssp: SSP) -> bool:
        """``ssp`` has ended, by a drain or by an end of stream."""
        return self.drain.is_ended(ssp) or self.eos.is_ended(ssp)

    def all_ended(self) -> bool:
        return all(self.ended(ssp) for ssp in self.inputs)


class CallbackTimeoutError(StatectlError):
    """A task's drain callback ran longer than ``task.callback.drain.timeout.ms``."""


@contextmanager
def callback_deadline(seconds: float | None, message: str) -> Iterator[None]:
    """Bound the block to ``seconds`` (None: unbounded). In the main thread a SIGALRM interrupts the block
    when the time is up (so a callback stuck in a sleep or a loop is stopped); anywhere, a block that
    returns late raises too (a callback that swallowed the interruption). Raises CallbackTimeoutError
    with ``message``."""
    if seconds is None:
        yield
        return
    start = time.monotonic()
    alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous = None
    if alarm:
        def on_alarm(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
            raise CallbackTimeoutError(message)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if time.monotonic() - start > seconds:
        raise CallbackTimeoutError(message)


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
        self.bounds: RunBounds | None = None
        self._empty_polls = 0  # polls in a row that returned nothing
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
        config = self.coordinator.config()
        self.job = with_config(self.job, config)  # the deployment's timings
        watermark_rules = _watermark_rules(config)
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
                         eos=EndOfStreamStates(inputs, expected),
                         watermarks=WatermarkStates(inputs, expected, **watermark_rules))
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
        self.bounds = load_run_bounds(self.coordinator, self.rt.run_id)
        bounded = [t for t in self.stage.inputs if self.job.is_bounded(t)]
        if bounded and (self.bounds is None or any(t not in self.bounds.sources for t in bounded)):
            raise StatectlError(f"run {self.rt.run_id} of job {self.job.name} has no recorded end offsets for its "
                                f"bounded input(s) {', '.join(bounded)}",
                                hint="start the job with its coordinator (`run`): it records where each bounded "
                                     "source ends when the run starts")
        self._resume_end_states()
        self._assign()
        self.monitor = DrainMonitor(self.coordinator, self.rt.run_id, poll_s=self.job.drain_poll_interval_s,
                                    on_problem=self.note)
        if self.monitor.check():
            self._begin_drain()
        else:
            for task in self.tasks:  # inputs that ended before a restart: the task finishes at once
                self._maybe_finish(task)
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
                if task.ended(ssp):
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
                    end = self._source_end(ssp)
                    for rec in records:
                        if task.stopped or task.ended(ssp):
                            break
                        if end is not None and rec.offset >= end:
                            self._end_source(task, ssp, end)  # the rest is the next run's
                            break
                        self._handle(task, ssp, rec)
                self._empty_polls = 0 if polled else self._empty_polls + 1
                self._check_source_ends()
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
                    self._control(task, ssp, message, rec.offset)
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

    def _control(self, task: _Task, ssp: SSP, message: ControlMessage, offset: int) -> None:
        if message.type == WATERMARK:
            if task.watermarks.update(ssp, message.task_name, message.timestamp):
                if message.task_name is not None and self._is_aggregate(ssp):
                    wm = task.watermarks.watermark(ssp)
                    self._broadcast(ssp.stream, encode_control(watermark_message(None, wm)), exclude=ssp.partition)
                self._advance_watermark(task)
            return
        if message.type == END_OF_STREAM:
            if offset < self._run_start(ssp):
                return  # sent in an earlier run, before this run's bounded inputs were read again
            if message.task_name is None:
                task.eos.mark_ended(ssp)
                self._pause(ssp)
                self._maybe_finish(task)
                return
            if task.eos.producer_ended(ssp, message.task_name):
                # EndOfStreamStates complete: the aggregating task broadcasts (OperatorImpl.aggregateEndOfStream)
                self._aggregated(task, ssp, encode_control(end_of_stream_message(None)), task.eos.mark_ended)
            elif self._drain_complete(task, ssp):
                self._aggregated(task, ssp, encode_control(drain_message(None, self.rt.run_id)),
                                 task.drain.mark_drained)
            return
        if message.type != DRAIN:
            return
        if message.run_id != self.rt.run_id:
            return  # a drain of another run (Samza's RunLoop discards it too)
        if message.task_name is None:
            task.drain.mark_drained(ssp)
            self._pause(ssp)
            self._maybe_finish(task)
            return
        task.drain.producer_drained(ssp, message.task_name)
        if self._drain_complete(task, ssp):
            self._aggregated(task, ssp, encode_control(drain_message(None, self.rt.run_id)), task.drain.mark_drained)

    def _aggregated(self, task: _Task, ssp: SSP, value: bytes, mark: Callable[[SSP], None]) -> None:
        """Every producer of ``ssp`` (an aggregate partition) has sent its drain or end of stream: broadcast
        ``value`` (no task name) to the stream's other partitions (OperatorImpl.aggregateDrainMessages and
        aggregateEndOfStream, through ControlMessageSender.broadcastToOtherPartitions) and take ``ssp`` as
        ended here (``mark``), as Samza's DrainStates and EndOfStreamStates do once the count is complete."""
        self._broadcast(ssp.stream, value, exclude=ssp.partition)
        mark(ssp)
        self._pause(ssp)
        self._maybe_finish(task)

    def _drain_complete(self, task: _Task, ssp: SSP) -> bool:
        """Every producer of ``ssp`` has drained or ended its stream, and at least one drained (a producer
        whose bounded inputs ended before the drain sends no drain message: its end of stream stands for
        it); when they all ended the stream, the end of stream is broadcast instead."""
        drained = task.drain.producers(ssp)
        if not drained or task.eos.complete(ssp):
            return False
        return len(drained | task.eos.producers(ssp)) >= task.drain.expected(ssp) > 0

    def _run_start(self, ssp: SSP) -> float:
        """The first offset of ``ssp`` written in this run (end-of-stream messages before it are an earlier
        run's); without recorded bounds no end-of-stream message counts."""
        if self.bounds is None:
            return float("inf")
        return self.bounds.run_start(ssp)

    def _source_end(self, ssp: SSP) -> int | None:
        """Where a bounded source partition ends in this run (its next offset then), None for others."""
        if self.bounds is None or not self.job.is_bounded(ssp.stream) or self.job.is_intermediate(ssp.stream):
            return None
        end = self.bounds.source_end(ssp)
        return 0 if end is None else end  # a partition added after the run started: nothing of it is read

    def _check_source_ends(self) -> None:
        """Bounded source partitions read to their end have ended (SystemConsumers takes an end-of-stream
        envelope from the consumer and stops fetching the SSP): the record before the end processed, or
        (offsets missing at the end: compacted, transaction markers) the consumer's position at or past
        the end after IDLE_END_POLLS empty polls in a row (the position runs ahead of what polls returned
        while fetched records are still held, so it is only believed when nothing is held)."""
        import kafka

        assigned = self.consumer.assignment()
        for task in self.tasks:
            if task.stopped:
                continue
            for ssp in task.inputs:
                end = self._source_end(ssp)
                if end is None or task.ended(ssp):
                    continue
                done = task.processed.get(ssp.key())
                if done is not None and int(done) + 1 >= end:
                    self._end_source(task, ssp, end)
                    continue
                tp = kafka.TopicPartition(ssp.stream, ssp.partition)
                idle = self._empty_polls >= IDLE_END_POLLS
                if idle and tp in assigned and (self.consumer.position(tp) or 0) >= end:
                    self._end_source(task, ssp, end)

    def _end_source(self, task: _Task, ssp: SSP, end: int) -> None:
        task.eos.mark_ended(ssp)
        self._pause(ssp)
        self.note(f"task {task.name}: {ssp.key()} reached its end (offset {end})")
        self._maybe_finish(task)

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

    def _finished(self, topic: str, tail: Any) -> bool:
        """Whether a partition's last record is this run's drain or end-of-stream broadcast (its stream is
        over for this run)."""
        if not tail.records:
            return False
        rec = tail.records[-1]
        return self._is_broadcast(SSP(SYSTEM, topic, tail.partition), rec.offset, rec.value) is not None

    def _is_broadcast(self, ssp: SSP, offset: int, value: bytes | None) -> int | None:
        """DRAIN or END_OF_STREAM when the record is this run's broadcast of that kind, else None."""
        try:
            m = decode_control(value)
        except DrainFormatError:
            return None
        if m.task_name is not None:
            return None
        if m.type == DRAIN and m.run_id == self.rt.run_id:
            return DRAIN
        if m.type == END_OF_STREAM and offset >= self._run_start(ssp):
            return END_OF_STREAM
        return None

    def _broadcast(self, topic: str, value: bytes, exclude: int | None) -> None:
        """Send a control message with no task name to the partitions of ``topic`` (all but ``exclude``),
        skipping those already finished by this run's drain broadcast (so a restart never appends after it)."""
        self.producer.flush()
        for p, tail in self._tails(topic).items():
            if p != exclude and not self._finished(topic, tail):
                self.producer.send(topic, key=None, value=value, partition=p)
        self.producer.flush()

    def _to_aggregate(self, topic: str, value: bytes) -> None:
        """Send a producer task's control message to ``topic``'s aggregate partition, after everything this
        container sent before it is acknowledged; not when that partition is already finished."""
        self.producer.flush()
        p = aggregate_partition(topic, self.partitions[topic])
        if not self._finished(topic, self._tails(topic)[p]):
            self.producer.send(topic, key=None, value=value, partition=p)
        self.producer.flush()

    # -- drain and end of stream ---------------------------------------------------------------------

    def _begin_drain(self) -> None:
        """The notification arrived: stop fetching sources; watermark to infinity and a drain message on
        every source partition (nothing fetched and unprocessed is left: polls are processed whole)."""
        self.draining = True
        self.note(f"draining run {self.rt.run_id} (notification {self.monitor.uuid})")
        for task in self.tasks:
            sources = [ssp for ssp in task.inputs if not self.job.is_intermediate(ssp.stream)]
            for ssp in sources:
                task.watermarks.update(ssp, None, WATERMARK_INFINITY)
            if sources and not task.stopped:
                self._advance_watermark(task)
            for ssp in sources:
                task.drain.mark_drained(ssp)
        self._assign()
        for task in self.tasks:
            self._maybe_finish(task)

    def _resume_end_states(self) -> None:
        """At start (a first start, a restart in the middle of a drain or an end of stream): load the
        producer sets saved before the last commit for this run; take an intermediate partition whose last
        processed record is this run's drain or end-of-stream broadcast as ended that way, and a bounded
        source partition processed to its end (or with nothing to read before it) as ended (Samza's
        SystemConsumers.register with END_OF_STREAM_OFFSET: already at end of stream)."""
        import kafka

        sources = [(task, ssp) for task in self.tasks for ssp in task.inputs if self._source_end(ssp) is not None]
        begins = self.consumer.beginning_offsets(
            [kafka.TopicPartition(ssp.stream, ssp.partition) for _, ssp in sources]) if sources else {}
        for task in self.tasks:
            drain, eos = load_end_states(self.coordinator, task.name, self.rt.run_id)
            task.drain.load(drain)
            task.eos.load(eos)
            task.saved_states = (task.drain.export(), task.eos.export())
            for ssp in task.inputs:
                offset = task.processed.get(ssp.key())
                if not self.job.is_intermediate(ssp.stream):
                    continue
                # An aggregate partition whose producers had all sent theirs before the last commit: its
                # broadcast went out then (to the other partitions only), so it ended here then.
                if task.eos.complete(ssp):
                    task.eos.mark_ended(ssp)
                elif self._drain_complete(task, ssp):
                    task.drain.mark_drained(ssp)
                elif offset is not None:
                    kind = self._broadcast_at(ssp, int(offset))
                    if kind == DRAIN:
                        task.drain.mark_drained(ssp)
                    elif kind == END_OF_STREAM:
                        task.eos.mark_ended(ssp)
        for task, ssp in sources:
            end = self._source_end(ssp)
            offset = task.processed.get(ssp.key())
            next_offset = int(offset) + 1 if offset is not None else 0
            if max(next_offset, begins[kafka.TopicPartition(ssp.stream, ssp.partition)]) >= end:
                task.eos.mark_ended(ssp)

    def _broadcast_at(self, ssp: SSP, offset: int) -> int | None:
        """DRAIN or END_OF_STREAM when the record of ``ssp`` at ``offset`` is this run's broadcast of that
        kind, else None."""
        import kafka

        if self._tail_consumer is None:
            self._tail_consumer = open_consumer(self.rt.bootstrap, security=self.security)
        tp = kafka.TopicPartition(ssp.stream, ssp.partition)
        self._tail_consumer.assign([tp])
        self._tail_consumer.seek(tp, offset)
        for _ in range(20):
            for rec in self._tail_consumer.poll(timeout_ms=200).get(tp, []):
                if rec.offset == offset:
                    return self._is_broadcast(ssp, offset, rec.value)
                if rec.offset > offset:
                    return None
        return None

    def _pause(self, ssp: SSP) -> None:
        import kafka

        tp = kafka.TopicPartition(ssp.stream, ssp.partition)
        if tp in self.consumer.assignment():
            self.consumer.pause(tp)

    def _maybe_finish(self, task: _Task) -> None:
        """All of the task's inputs have ended: fire what it holds, pass the end on (a drain when any input
        was drained, else an end of stream), commit, stop."""
        if task.stopped or not task.all_ended():
            return
        out = self._collector(task)
        if any(task.drain.is_drained(ssp) for ssp in task.inputs) or not task.inputs:
            timeout = self.job.drain_callback_timeout_s
            what = (f"task {task.name}: its drain callback (on_drain and the drain messages it sends) did not "
                    f"complete within {DRAIN_CALLBACK_TIMEOUT}={round(timeout * 1000)}" if timeout else "")
            with callback_deadline(timeout, what):
                if hasattr(task.user, "on_drain"):
                    task.user.on_drain(out)
                for topic in self.stage.intermediate_outputs:
                    self._to_aggregate(topic, encode_control(drain_message(task.name, self.rt.run_id)))
            how = "drained"
        else:
            if hasattr(task.user, "on_end_of_stream"):
                task.user.on_end_of_stream(out)
            elif hasattr(task.user, "on_drain"):
                task.user.on_drain(out)
            for topic in self.stage.intermediate_outputs:
                self._to_aggregate(topic, encode_control(end_of_stream_message(task.name)))
            how = "reached the end of its inputs"
        self._commit(task)
        task.stopped = True
        for ssp in task.inputs:  # nothing of it is read any more
            self._pause(ssp)
        self.note(f"task {task.name} {how} and stopped")

    # -- commit ------------------------------------------------------------------------------------

    def _commit(self, task: _Task) -> None:
        """Flush what the task sent, then commit its input offsets with a snapshot of each store (one v2
        checkpoint; Samza's order: outputs and changelog durable before the offsets that produced them)."""
        self.producer.flush()
        states = (task.drain.export(), task.eos.export())
        if states != task.saved_states:
            save_drain_states(self.coordinator, task.name, self.rt.run_id, *states)
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


def _watermark_rules(config: dict[str, str]) -> dict[str, Any]:
    """WatermarkStates' idle timeout and quorum from the job's config (TaskConfig.getWatermarkIdleTimeoutMs,
    getWatermarkQuorumSizePercentage); a value that is not a number fails the container's start, as Samza's
    getLong / getDouble do."""
    try:
        idle = get_int(config, WATERMARK_IDLE_TIMEOUT, -1)
        quorum = float(config.get(WATERMARK_QUORUM, "0.5"))
    except (JobConfigError, ValueError) as e:
        raise StatectlError(f"the job's config: {e}", hint=f"{WATERMARK_IDLE_TIMEOUT} takes milliseconds, "
                                                           f"{WATERMARK_QUORUM} a fraction") from None
    return {"idle_timeout_ms": idle, "quorum_pct": quorum}
