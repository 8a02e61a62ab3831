"""The job side of drain and end of stream: the DrainMonitor, and the per-task book-keeping of
control messages.

DrainMonitor polls the job's coordinator stream for a drain notification of the job's run id
(Samza's ``job.drain-monitor.poll.interval.ms``); notifications of other runs are ignored, and
malformed records are skipped with a note, never a crash.

DrainStates, as Samza's class: per input partition of a task, which upstream (producer) tasks have
sent their drain message. Every upstream task sends its drain message to ONE aggregate partition of an
intermediate stream (``formats.drain.aggregate_partition``); when that partition has them all, it is
drained, and the task reading it broadcasts a drain message with no task name to the stream's other
partitions (ControlMessageSender.broadcastToOtherPartitions), each drained once that broadcast is read
on it. A broadcast is never written twice to a partition whose last message is already that broadcast
(a task killed in the middle of a drain broadcasts again when restarted). The producers seen, each with
the offset its message was read at, are saved to the coordinator stream before each commit
(``statectl-drain-states-v1``), so that a restarted aggregating task does not wait for drain messages it
read before its checkpoint: a saved complete set is a drained partition. A restart counts only the
producers whose message its checkpoint covers (at or below the partition's checkpointed offset): the
states are saved before the checkpoint is written, so a task that dies in between has saved messages
its checkpoint does not cover, and it reads them again with the records before them. Samza keeps these
states in memory only (operators.impl.EndOfStreamStates), so a restarted Samza task counts only what it
reads again.

End of stream (Samza's EndOfStreamMessage, sent once a task has consumed a bounded input to its end)
travels the same way and is counted by the same class (EndStates, one instance per kind), saved in the
same record (``endOfStream`` beside ``producers``). Unlike a drain it needs no notification and carries
no run id; the bounds of a run (RunBounds) say where its bounded sources end.

WatermarkStates does the same for watermarks (the minimum over the producer tasks, with Samza's idle
timeout and quorum, read from the job's config by ``watermark_rules``); a drain sends a watermark of
Long.MAX_VALUE first, which fires every window.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import StatectlError
from statectl.formats.checkpoint import SSP
from statectl.formats.jobconfig import JobConfigError, get_int
from statectl.kafka.coordinator import CoordinatorStream

DRAIN_STATES_NAMESPACE = "statectl-drain-states-v1"
RUN_BOUNDS_NAMESPACE = "statectl-run-bounds-v1"


class DrainMonitor:
    """Watches the coordinator stream for a drain notification of ``run_id``.

    ``check()`` reads on and returns True once there is one (and stays True: a drain cannot be undone);
    ``start()`` checks at once, then every ``poll_s`` on a daemon thread, calling ``on_drain`` once. Read
    errors (brokers briefly away) are reported to ``on_problem`` and retried at the next poll."""

    def __init__(self, coordinator: CoordinatorStream, run_id: str, *, poll_s: float,
                 on_drain: Callable[[], None] | None = None, on_problem: Callable[[str], None] | None = None):
        self.coordinator = coordinator
        self.run_id = run_id
        self.poll_s = poll_s
        self._on_drain = on_drain
        self._on_problem = on_problem or (lambda message: None)
        self._draining = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported: set[str] = set()
        self.uuid: str | None = None

    @property
    def draining(self) -> bool:
        return self._draining.is_set()

    def check(self) -> bool:
        if self._draining.is_set():
            return True
        if not self.coordinator.refresh():
            return False
        notifications = self.coordinator.notifications()  # before ``problems``: parsing them finds bad ones
        problems = self.coordinator.problems + [
            f"offset {b.offset}: drain notification {b.key[:80]!r} that Samza cannot read: {b.why}"
            for b in self.coordinator.bad_notifications()]
        for problem in problems:
            if problem not in self._reported:
                self._reported.add(problem)
                self._on_problem(f"skipped a malformed record of {self.coordinator.topic}: {problem}")
        for rec in notifications:
            if not rec.cleared and rec.run_id == self.run_id:
                self.uuid = rec.uuid
                self._draining.set()
                if self._on_drain is not None:
                    self._on_drain()
                return True
        return False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="drain-monitor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self.check():
                    return
            except Exception as e:  # noqa: BLE001 - a poll that fails is retried; the job goes on
                self._on_problem(f"drain monitor: {e}")
            self._stop.wait(self.poll_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


@dataclass
class _PartitionState:
    expected: int  # producer tasks of its stream (0: a source, or nobody produces to it)
    producers: dict[str, int] = field(default_factory=dict)  # producer task -> offset its message was read at
    ended: bool = False


class EndStates:
    """End book-keeping of one task over its input partitions, for one kind of end: a drain, or an end of
    stream. Samza keeps the two in two classes with the same code (operators.impl.DrainStates and
    EndOfStreamStates: per partition, the upstream tasks whose message arrived; ended once all
    ``expected`` producers have sent theirs, or at once on a message with no task name, from a source or
    the aggregating task's broadcast); statectl keeps one, instantiated per kind (``DrainStates``,
    ``EndOfStreamStates``). ``expected``: producer tasks per stream, 0 for sources. Not thread-safe: the
    task's run loop owns it."""

    def __init__(self, ssps: list[SSP], expected: dict[str, int]):
        self._states = {ssp: _PartitionState(expected.get(ssp.stream, 0)) for ssp in ssps}

    def producer_ended(self, ssp: SSP, task_name: str, offset: int) -> bool:
        """A producer task's message arrived on ``ssp`` at ``offset``; True when every producer's now has (the
        reading task then broadcasts)."""
        st = self._states[ssp]
        st.producers.setdefault(task_name, offset)
        return len(st.producers) >= st.expected > 0

    def producers(self, ssp: SSP) -> set[str]:
        return set(self._states[ssp].producers)

    def expected(self, ssp: SSP) -> int:
        return self._states[ssp].expected

    def complete(self, ssp: SSP) -> bool:
        st = self._states[ssp]
        return len(st.producers) >= st.expected > 0

    def mark_ended(self, ssp: SSP) -> None:
        """``ssp`` has ended: a source that reached its end (or that the drain stopped), or the broadcast
        read on it."""
        self._states[ssp].ended = True

    def is_ended(self, ssp: SSP) -> bool:
        return self._states[ssp].ended

    def all_ended(self) -> bool:
        return all(st.ended for st in self._states.values())

    # The drain's names for the same operations (DrainStates.update / isDrained / areAllStreamsDrained).
    producer_drained = producer_ended
    mark_drained = mark_ended
    is_drained = is_ended
    all_drained = all_ended

    def export(self) -> dict[str, dict[str, int]]:
        """The producers seen per partition, each with the offset its message was read at (the state a
        restart needs; see the module doc)."""
        return {ssp.key(): dict(sorted(st.producers.items())) for ssp, st in self._states.items() if st.producers}

    def load(self, saved: dict[str, dict[str, int]], checkpointed: dict[str, str]) -> None:
        """Count the ``saved`` producers whose message the checkpoint covers: read at or below the partition's
        offset in ``checkpointed`` (ssp key -> last processed offset). The others are read again."""
        by_key = {ssp.key(): ssp for ssp in self._states}
        for key, producers in saved.items():
            if key in by_key and key in checkpointed:
                covered = {t: o for t, o in producers.items() if o <= int(checkpointed[key])}
                for task_name, offset in covered.items():
                    self._states[by_key[key]].producers.setdefault(task_name, offset)


DrainStates = EndStates
EndOfStreamStates = EndStates


# TaskConfig.WATERMARK_IDLE_TIMEOUT_MS (default -1: off) and WATERMARK_QUORUM_SIZE_PERCENTAGE (default 0.5).
# Samza's key for the quorum is spelled with a comma, and Samza reads only that spelling.
WATERMARK_IDLE_TIMEOUT = "task.watermark.idle.timeout.ms"
WATERMARK_QUORUM = "task.watermark.quorum.size,percentage"


class WatermarkStates:
    """Watermarks of one task's input partitions, as Samza's WatermarkStates: a partition's watermark is
    the minimum of the latest ones of its producer tasks once every producer has sent one (a message with
    no task name sets it directly); the task's is the minimum over its partitions. -1: none yet.

    ``idle_timeout_ms`` > 0 (``task.watermark.idle.timeout.ms``) lets a partition advance without its idle
    producers: once that long has passed since this object was made, it may advance with only a quorum
    (``int(producers * quorum_pct)``, ``task.watermark.quorum.size,percentage``) having sent one; and when the
    minimum over all producers would not advance it, the minimum over the producers heard from within the
    timeout is taken instead, if they are a quorum. A producer's watermark never goes back (a lower one is
    ignored, not counted as activity). ``clock``: milliseconds now (time.time by default)."""

    def __init__(self, ssps: list[SSP], expected: dict[str, int], *, idle_timeout_ms: int = -1,
                 quorum_pct: float = 0.5, clock: Callable[[], int] | None = None):
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._idle_ms = idle_timeout_ms
        self._expected = {ssp: expected.get(ssp.stream, 0) for ssp in ssps}
        self._quorum = {ssp: int(n * quorum_pct) for ssp, n in self._expected.items()}
        self._by_task: dict[SSP, dict[str, int]] = {ssp: {} for ssp in ssps}
        self._heard: dict[SSP, dict[str, int]] = {ssp: {} for ssp in ssps}  # producer -> when its last one came
        self._wm: dict[SSP, int] = {ssp: -1 for ssp in ssps}
        self._created = self._clock()

    def update(self, ssp: SSP, task_name: str | None, timestamp: int) -> bool:
        """Record a watermark message; True when ``ssp``'s watermark advanced."""
        before, now = self._wm[ssp], self._clock()
        seen, heard = self._by_task[ssp], self._heard[ssp]
        if task_name is not None and seen.get(task_name, -1) <= timestamp:
            seen[task_name], heard[task_name] = timestamp, now
        if task_name is None:
            self._wm[ssp] = max(before, timestamp)
        elif self._can_update(ssp, now):
            low = min(seen.values(), default=timestamp)
            if low <= before and self._idle_ms > 0:
                active = [seen[t] for t, at in heard.items() if at > now - self._idle_ms]
                low = min(active) if active and len(active) >= self._quorum[ssp] else -1
            self._wm[ssp] = max(before, low)
        return self._wm[ssp] > before

    def _can_update(self, ssp: SSP, now: int) -> bool:
        """WatermarkState.canUpdateWatermark: every producer has sent one, or (idle timeout on) the timeout has
        passed since the start and a quorum has."""
        n = len(self._by_task[ssp])
        return n == self._expected[ssp] or (self._idle_ms > 0 and now - self._created >= self._idle_ms
                                            and n >= self._quorum[ssp])

    def watermark(self, ssp: SSP) -> int:
        return self._wm[ssp]

    def task_watermark(self) -> int:
        return min(self._wm.values(), default=-1)


def save_drain_states(coordinator: CoordinatorStream, task: str, run_id: str, states: dict[str, dict[str, int]],
                      end_of_stream: dict[str, dict[str, int]] | None = None) -> None:
    """Save a task's producers (EndStates.export) for ``run_id`` (before its checkpoint; see the module doc):
    those of the drain, and those of the end of stream when given."""
    value: dict = {"runId": run_id, "producers": states}
    if end_of_stream:
        value["endOfStream"] = end_of_stream
    value["time"] = int(time.time() * 1000)
    coordinator.put(DRAIN_STATES_NAMESPACE, task, json.dumps(value).encode())


def load_drain_states(coordinator: CoordinatorStream, task: str, run_id: str) -> dict[str, dict[str, int]]:
    """The drain producers ``task`` saved for ``run_id`` ({} when none, or saved for another run)."""
    return load_end_states(coordinator, task, run_id)[0]


def load_end_states(coordinator: CoordinatorStream, task: str,
                    run_id: str) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """The producers ``task`` saved for ``run_id``: (drain, end of stream); empty when none were saved
    for this run. End-of-stream messages carry no run id (Samza's EndOfStreamMessage has a task name
    only), but what was counted is kept per run like the drain's: a new deployment reads its bounded
    sources to new ends and its upstream tasks send their end of stream again."""
    for key, value in coordinator.namespace_values(DRAIN_STATES_NAMESPACE).items():
        if key != task or value is None:
            continue
        try:
            obj = json.loads(value)
            if obj.get("runId") == run_id:
                return _producer_sets(obj.get("producers")), _producer_sets(obj.get("endOfStream"))
        except (ValueError, AttributeError, TypeError):
            return {}, {}
    return {}, {}


def _producer_sets(obj: object) -> dict[str, dict[str, int]]:
    """Partition -> producer -> offset; a list of producers without offsets (an earlier runtime's record)
    is taken as read at offset -1, covered by any checkpoint of the partition, as that runtime took it."""
    if not isinstance(obj, dict):
        return {}
    out: dict[str, dict[str, int]] = {}
    for key, producers in obj.items():
        if isinstance(producers, list):
            out[str(key)] = {str(t): -1 for t in producers}
        elif isinstance(producers, dict):
            out[str(key)] = {str(t): int(o) for t, o in producers.items()}
    return out


@dataclass(frozen=True)
class RunBounds:
    """Where a run's bounded sources end and where its intermediate streams began, per partition (next
    offsets), taken once by the job's coordinator when the run starts and kept on the coordinator stream
    (``statectl-run-bounds-v1``, keyed by run id) so that a container restarted in the middle of the run
    reads to the same ends. ``intermediate``: end-of-stream messages at offsets below these belong to an
    earlier run; Samza gives each batch run intermediate streams of their own instead
    (StreamManager.createUniqueNameForBatch appends the run id), statectl keeps the job's topic names."""

    run_id: str
    sources: dict[str, dict[int, int]]
    intermediate: dict[str, dict[int, int]]

    def source_end(self, ssp: SSP) -> int | None:
        return self.sources.get(ssp.stream, {}).get(ssp.partition)

    def run_start(self, ssp: SSP) -> int:
        return self.intermediate.get(ssp.stream, {}).get(ssp.partition, 0)


def save_run_bounds(coordinator: CoordinatorStream, bounds: RunBounds) -> RunBounds:
    """Record ``bounds`` for its run unless that run already has bounds (a coordinator restarted with the
    same run id keeps the ends its run started with); return the bounds in force. Idempotent."""
    existing = load_run_bounds(coordinator, bounds.run_id)
    if existing is not None:
        return existing
    value = {"runId": bounds.run_id,
             "sources": {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(bounds.sources.items())},
             "intermediate": {t: {str(p): o for p, o in sorted(ps.items())}
                              for t, ps in sorted(bounds.intermediate.items())},
             "time": int(time.time() * 1000)}
    coordinator.put(RUN_BOUNDS_NAMESPACE, bounds.run_id, json.dumps(value).encode())
    return bounds


def load_run_bounds(coordinator: CoordinatorStream, run_id: str) -> RunBounds | None:
    """The bounds recorded for ``run_id``, or None (no bounded source in that run, or not recorded)."""
    value = coordinator.namespace_values(RUN_BOUNDS_NAMESPACE).get(run_id)
    if value is None:
        return None
    try:
        obj = json.loads(value)
        if obj.get("runId") != run_id:
            return None

        def offsets(o: object) -> dict[str, dict[int, int]]:
            return {str(t): {int(p): int(v) for p, v in ps.items()} for t, ps in (o or {}).items()}

        return RunBounds(run_id, offsets(obj.get("sources")), offsets(obj.get("intermediate")))
    except (ValueError, AttributeError, TypeError):
        return None


def watermark_rules(config: dict[str, str]) -> dict[str, Any]:
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
