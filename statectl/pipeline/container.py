"""One stage of a job in one OS process: its tasks, their run loop, commits and the drain.

Start: each task's stores are restored (pipeline.state) and its inputs are read from the checkpointed
offsets + 1 (Samza checkpoints the last processed offset). Run: records are polled from every input
partition (partitions assigned explicitly, no consumer group), handed to their task, and every
``commit_interval_s`` each task commits (pipeline.state).

Drain (pipeline.control; control messages travel through pipeline.channel): once the DrainMonitor finds
a notification of this run, the container stops fetching its sources and gives each source partition a
watermark of Long.MAX_VALUE and a drain message. A task whose inputs are all drained fires what it holds
(``on_drain``), sends its drain message to the aggregate partition of each intermediate stream it
writes, makes its final, blocking commit and stops. When every task has stopped the container exits 0.

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
import time
from collections.abc import Callable
from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.errors import StatectlError
from statectl.formats.checkpoint import SSP, CheckpointV2
from statectl.formats.drain import (
    DRAIN,
    END_OF_STREAM,
    USER_MESSAGE,
    WATERMARK,
    WATERMARK_INFINITY,
    ControlMessage,
    DrainFormatError,
    decode_control,
    drain_message,
    encode_control,
    encode_user_message,
    end_of_stream_message,
    watermark_message,
)
from statectl.kafka.client import open_consumer, open_producer, partition_count
from statectl.kafka.coordinator import CoordinatorStream
from statectl.pipeline.channel import ControlChannel
from statectl.pipeline.control import (
    DrainMonitor,
    DrainStates,
    EndOfStreamStates,
    RunBounds,
    WatermarkStates,
    load_end_states,
    load_run_bounds,
    watermark_rules,
)
from statectl.pipeline.deadline import callback_deadline
from statectl.pipeline.spec import (
    DRAIN_CALLBACK_TIMEOUT,
    SYSTEM,
    JobSpec,
    StageSpec,
    stage_partitions,
    task_name,
    with_config,
)
from statectl.pipeline.state import CommitManager, RunningTask, Runtime
from statectl.pipeline.task import Collector, KeyValueStore, Message, TaskContext

log = logging.getLogger("statectl.pipeline")

POLL_MS = 100
MAX_POLL_RECORDS = 5000
IDLE_END_POLLS = 5


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
        self.state = CommitManager(job.name, job.job_id, runtime, self.coordinator, self.checkpoints)
        self.channel: ControlChannel | None = None
        self.partitions: dict[str, int] = {}
        self.tasks: list[RunningTask] = []
        self.by_tp: dict[tuple[str, int], RunningTask] = {}
        self.monitor: DrainMonitor | None = None
        self.draining = False
        self.bounds: RunBounds | None = None
        self._empty_polls = 0  # polls in a row that returned nothing

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
        """Read the deployment's config, open the clients, make the tasks (their stores restored, their
        positions from their checkpoints), resume the end states a restart left and assign the inputs;
        then a drain found already begins, and tasks whose inputs had all ended finish."""
        self.coordinator.require()
        config = self.coordinator.config()
        self.job = with_config(self.job, config)  # the deployment's timings
        rules = watermark_rules(config)
        self.consumer = open_consumer(self.rt.bootstrap, security=self.security)
        self.producer = open_producer(self.rt.bootstrap, security=self.security)
        for topic in {*self.stage.inputs, *self.stage.intermediate_outputs}:
            self._partition_count(topic)
        for s in self.job.stages:  # producer counts need every stage's input partitions
            for topic in s.inputs:
                self._partition_count(topic)
        expected = {t: self.job.producers(t, self.partitions) for t in self.job.intermediate}
        latest, problems = self.state.latest_checkpoints()
        for p in problems:
            self.note(p)
        for p in range(stage_partitions(self.stage, self.partitions)):
            self._add_task(p, expected, rules, latest.get(task_name(self.stage.name, p)))
        self._load_bounds()
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

    def _add_task(self, p: int, expected: dict[str, int], rules: dict[str, Any], cp: CheckpointV2 | None) -> None:
        """Task ``p`` of the stage: its end states, its position and stores from checkpoint ``cp``, its user
        object."""
        name = task_name(self.stage.name, p)
        inputs = [SSP(SYSTEM, t, p) for t in self.stage.inputs if p < self.partitions[t]]
        task = RunningTask(name, p, inputs, drain=DrainStates(inputs, expected),
                           eos=EndOfStreamStates(inputs, expected),
                           watermarks=WatermarkStates(inputs, expected, **rules))
        if cp is not None:
            task.processed = {ssp.key(): cp.input_offsets[ssp.key()] for ssp in inputs
                              if ssp.key() in cp.input_offsets}
        task.stores = [self.state.open_store(task, store, self.job.changelog_topic(store), cp)
                       for store in self.stage.stores]
        stores = {s.name: KeyValueStore(s.live.db, s.live.path, CommitManager.changelog_writer(self.producer, task, s))
                  for s in task.stores}
        task.user = self.stage.task(TaskContext(self.job.name, self.stage.name, name, p, stores))
        self.tasks.append(task)
        for ssp in inputs:
            self.by_tp[(ssp.stream, ssp.partition)] = task

    def _load_bounds(self) -> None:
        """The run's bounds (where its bounded sources end), which a stage reading a bounded source needs."""
        self.bounds = load_run_bounds(self.coordinator, self.rt.run_id)
        self.channel = ControlChannel(self.rt.bootstrap, self.security, self.producer, self.partitions,
                                      self.rt.run_id, self.bounds)
        bounded = [t for t in self.stage.inputs if self.job.is_bounded(t)]
        if bounded and (self.bounds is None or any(t not in self.bounds.sources for t in bounded)):
            raise StatectlError(f"run {self.rt.run_id} of job {self.job.name} has no recorded end offsets for its "
                                f"bounded input(s) {', '.join(bounded)}",
                                hint="start the job with its coordinator (`run`): it records where each bounded "
                                     "source ends when the run starts")

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
                            self.state.commit(task, self.producer)
        finally:
            self.close()

    def _handle(self, task: RunningTask, ssp: SSP, rec: Any) -> None:
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

    def _process(self, task: RunningTask, ssp: SSP, rec: Any, payload: bytes | None) -> None:
        task.user.process(Message(ssp.stream, ssp.partition, rec.offset, rec.key, payload, rec.timestamp),
                          self._collector(task))

    def _collector(self, task: RunningTask) -> Collector:
        def send(topic: str, value: bytes | None, key: bytes | None) -> None:
            if self.job.is_intermediate(topic):
                partition = 0 if key is None else None  # Samza's partitionBy: a null key goes to partition 0
                self.producer.send(topic, key=key, value=encode_user_message(value or b""), partition=partition)
            else:
                self.producer.send(topic, key=key, value=value)
        return Collector(send)

    # -- control messages ----------------------------------------------------------------------------

    def _control(self, task: RunningTask, ssp: SSP, message: ControlMessage, offset: int) -> None:
        if message.type == WATERMARK:
            if task.watermarks.update(ssp, message.task_name, message.timestamp):
                if message.task_name is not None and self.channel.is_aggregate(ssp):
                    wm = task.watermarks.watermark(ssp)
                    self.channel.broadcast(ssp.stream, encode_control(watermark_message(None, wm)),
                                           exclude=ssp.partition)
                self._advance_watermark(task)
            return
        if message.type == END_OF_STREAM:
            if offset < self.channel.run_start(ssp):
                return  # sent in an earlier run, before this run's bounded inputs were read again
            if message.task_name is None:
                task.eos.mark_ended(ssp)
                self._pause(ssp)
                self._maybe_finish(task)
                return
            if task.eos.producer_ended(ssp, message.task_name, offset):
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
        task.drain.producer_drained(ssp, message.task_name, offset)
        if self._drain_complete(task, ssp):
            self._aggregated(task, ssp, encode_control(drain_message(None, self.rt.run_id)), task.drain.mark_drained)

    def _aggregated(self, task: RunningTask, ssp: SSP, value: bytes, mark: Callable[[SSP], None]) -> None:
        """Every producer of ``ssp`` (an aggregate partition) has sent its drain or end of stream: broadcast
        ``value`` (no task name) to the stream's other partitions (OperatorImpl.aggregateDrainMessages and
        aggregateEndOfStream, through ControlMessageSender.broadcastToOtherPartitions) and take ``ssp`` as
        ended here (``mark``), as Samza's DrainStates and EndOfStreamStates do once the count is complete."""
        self.channel.broadcast(ssp.stream, value, exclude=ssp.partition)
        mark(ssp)
        self._pause(ssp)
        self._maybe_finish(task)

    def _drain_complete(self, task: RunningTask, ssp: SSP) -> bool:
        """Every producer of ``ssp`` has drained or ended its stream, and at least one drained (a producer
        whose bounded inputs ended before the drain sends no drain message: its end of stream stands for
        it); when they all ended the stream, the end of stream is broadcast instead."""
        drained = task.drain.producers(ssp)
        if not drained or task.eos.complete(ssp):
            return False
        return len(drained | task.eos.producers(ssp)) >= task.drain.expected(ssp) > 0

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

    def _end_source(self, task: RunningTask, ssp: SSP, end: int) -> None:
        task.eos.mark_ended(ssp)
        self._pause(ssp)
        self.note(f"task {task.name}: {ssp.key()} reached its end (offset {end})")
        self._maybe_finish(task)

    def _advance_watermark(self, task: RunningTask) -> None:
        wm = task.watermarks.task_watermark()
        if wm <= task.watermark:
            return
        task.watermark = wm
        out = self._collector(task)
        if hasattr(task.user, "on_watermark"):
            task.user.on_watermark(wm, out)
        for topic in self.stage.intermediate_outputs:
            self.channel.to_aggregate(topic, encode_control(watermark_message(task.name, wm)))

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
        producers saved for this run whose messages the checkpoint covers; take an intermediate partition
        whose last processed record is this run's drain or end-of-stream broadcast as ended that way, and a
        bounded source partition processed to its end (or with nothing to read before it) as ended (Samza's
        SystemConsumers.register with END_OF_STREAM_OFFSET: already at end of stream)."""
        import kafka

        sources = [(task, ssp) for task in self.tasks for ssp in task.inputs if self._source_end(ssp) is not None]
        begins = self.consumer.beginning_offsets(
            [kafka.TopicPartition(ssp.stream, ssp.partition) for _, ssp in sources]) if sources else {}
        for task in self.tasks:
            drain, eos = load_end_states(self.coordinator, task.name, self.rt.run_id)
            task.drain.load(drain, task.processed)  # only what the checkpoint covers: the rest is read again
            task.eos.load(eos, task.processed)
            task.saved_states = (task.drain.export(), task.eos.export())
            for ssp in task.inputs:
                offset = task.processed.get(ssp.key())
                if not self.job.is_intermediate(ssp.stream):
                    continue
                # An aggregate partition whose producers' messages the checkpoint all covers: its broadcast
                # went out before it (to the other partitions only), so it ended here then.
                if task.eos.complete(ssp):
                    task.eos.mark_ended(ssp)
                elif self._drain_complete(task, ssp):
                    task.drain.mark_drained(ssp)
                elif offset is not None:
                    kind = self.channel.broadcast_at(ssp, int(offset))
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

    def _pause(self, ssp: SSP) -> None:
        import kafka

        tp = kafka.TopicPartition(ssp.stream, ssp.partition)
        if tp in self.consumer.assignment():
            self.consumer.pause(tp)

    def _maybe_finish(self, task: RunningTask) -> None:
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
                    self.channel.to_aggregate(topic, encode_control(drain_message(task.name, self.rt.run_id)))
            how = "drained"
        else:
            if hasattr(task.user, "on_end_of_stream"):
                task.user.on_end_of_stream(out)
            elif hasattr(task.user, "on_drain"):
                task.user.on_drain(out)
            for topic in self.stage.intermediate_outputs:
                self.channel.to_aggregate(topic, encode_control(end_of_stream_message(task.name)))
            how = "reached the end of its inputs"
        self.state.commit(task, self.producer)
        task.stopped = True
        for ssp in task.inputs:  # nothing of it is read any more
            self._pause(ssp)
        self.note(f"task {task.name} {how} and stopped")

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        for task in self.tasks:
            for store in task.stores:
                try:
                    store.live.close()
                except Exception:  # noqa: BLE001 - closing on the way out; the error that got here stands
                    pass
        for client in (self.producer, self.consumer):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
        if self.channel is not None:
            self.channel.close()
        self.producer = self.consumer = None
        self.coordinator.close()
        self.checkpoints.close()

