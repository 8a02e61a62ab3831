"""The drain completion signal read from a job's checkpoints, for coordinators that never tombstone a
notification (Samza's standalone ZkJobCoordinator and PassthroughJobCoordinator), and the source input a
completed drain left behind. :func:`checkpoint_gaps` holds the rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statectl.engine.drain.job import DrainJob
from statectl.engine.drain.model import InFlight, LeftBehind
from statectl.formats.checkpoint import CheckpointV2, parse_checkpoint_id
from statectl.formats.jobconfig import JobConfigError, get_int
from statectl.kafka.client import kafka_module, partition_count
from statectl.kafka.tails import read_tails

# TaskConfig.COMMIT_MS and COMMIT_MAX_DELAY_MS, with their defaults.
COMMIT_MS = "task.commit.ms"
DEFAULT_COMMIT_MS = 60_000
COMMIT_MAX_DELAY_MS = "task.commit.max.delay.ms"
DEFAULT_COMMIT_MAX_DELAY_MS = 60_000


@dataclass
class DrainEvidence:
    """The drain control messages read at the ends of the intermediate partitions: per run, the
    partitions holding one, and per producer task (a named sender) the time of its latest one."""

    partitions: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    senders: dict[str, dict[str, int]] = field(default_factory=dict)

    def saw(self, topic: str, partition: int, run_id: str, task: str | None, written_ms: int) -> None:
        self.partitions.setdefault(run_id, set()).add((topic, partition))
        if task is not None:
            sent = self.senders.setdefault(run_id, {})
            sent[task] = max(sent.get(task, -1), written_ms)


def quiet_ms(config: dict[str, str]) -> int | None:
    """The longest a running task goes without a checkpoint: ``task.commit.ms`` (RunLoop commits every task
    at that rate; TaskConfig default 60000) plus ``task.commit.max.delay.ms`` (TaskInstance.commit skips a
    commit while the previous one is in flight for up to that long; default 60000). None when periodic
    commits are off (``task.commit.ms`` <= 0: RunLoop schedules none) or a value is not a number (Samza
    would not start): then silence says nothing."""
    try:
        commit_ms = get_int(config, COMMIT_MS, DEFAULT_COMMIT_MS)
        delay_ms = get_int(config, COMMIT_MAX_DELAY_MS, DEFAULT_COMMIT_MAX_DELAY_MS)
    except JobConfigError:
        return None
    return commit_ms + max(0, delay_ms) if commit_ms > 0 else None


@dataclass
class Drained:
    """What the checkpoints say of a drain: ``gaps`` (empty: it completed) and, once complete, the source
    input it left behind."""

    gaps: list[str] = field(default_factory=list)
    left_behind: list[LeftBehind] = field(default_factory=list)


def checkpoint_gaps(job: DrainJob, notified_ms: int, run_id: str, checkpoints: dict[str, CheckpointV2],
                    intermediate: list[InFlight], intermediate_keys: set[str], evidence: DrainEvidence,
                    notes: list[str], *, config: dict[str, str], now_ms: int) -> Drained:
    """What the job's checkpoints do not show yet of a drain of run ``run_id`` requested by a notification
    written at ``notified_ms`` (its record's timestamp); no gaps: they show it complete. The completion
    signal that needs no DrainUtils.cleanup (standalone jobs never run it). The rule, from how Samza drains
    (a container stops fetching its sources once its DrainMonitor saw the notification and processes what
    it had fetched; a task whose inputs have all drained commits, then shuts down, and never commits again):

    1. the tasks: the active tasks of the job model on the coordinator stream (set-task-container-assignment,
       standby tasks left out), or without one, every task with a v2 checkpoint; there is at least one;
    2. every task's latest v2 checkpoint was written (its checkpoint id's time) after the notification;
    3. every partition of every intermediate stream holds a drain message of ``run_id`` and is consumed
       to its end (nothing in flight);
    4. every task is shown done: one that sent a drain message of ``run_id`` (a producer to an
       intermediate stream, named in it) checkpointed at or after it wrote that message (both times from
       that task's clock); one that reads intermediate partitions is done by rule 3; any other task
       stopped: its latest checkpoint is older than :func:`quiet_ms` (``now_ms`` against the checkpoint
       id's time). Without intermediate streams that is the only sign: an ordinary commit after the
       notification is not a drain until the task stops committing.

    Then the source partitions the checkpoints name are compared with their offsets at ``notified_ms``
    (the first record written at or after it, by ListOffsets by timestamp; the end when there is none):
    what a complete drain did not process is ``left_behind``; while it is not complete, each shortfall is
    a gap too (the job may still be catching up). The times of checkpoint ids, the notification and
    ``now_ms`` come from different hosts' clocks; skew shifts rules 2 and 4.
    Reads only; errors as kafka.client says."""
    out = Drained()
    model = job.coordinator.locality()
    active = sorted(t for t in model.task_containers if model.task_modes.get(t, "Active") != "Standby")
    tasks = active or sorted(checkpoints)
    if not tasks:
        return Drained(["no task has a checkpoint yet"])
    checkpointed_ms: dict[str, int] = {}
    for task in tasks:
        cp = checkpoints.get(task)
        if cp is None:
            out.gaps.append(f"task {task}: no checkpoint")
            continue
        checkpointed_ms[task] = parse_checkpoint_id(cp.checkpoint_id)[0]
        if checkpointed_ms[task] <= notified_ms:
            out.gaps.append(f"task {task}: latest checkpoint {cp.checkpoint_id} is not newer than the notification")
    drained = evidence.partitions.get(run_id, set())
    for i in intermediate:
        if (i.stream, i.partition) not in drained:
            out.gaps.append(f"intermediate {i.stream}[{i.partition}]: no drain message of run {run_id}")
        elif i.in_flight:
            out.gaps.append(f"intermediate {i.stream}[{i.partition}]: {i.in_flight} messages in flight")
    out.gaps += _tasks_not_done(checkpoints, checkpointed_ms, intermediate_keys, evidence.senders.get(run_id, {}),
                                config, now_ms)
    backlog = _backlog(job, checkpoints, tasks, intermediate_keys, notified_ms, notes, config)
    if out.gaps:
        out.gaps += [f"task {b.task}: input {b.stream}[{b.partition}] checkpointed to "
                     f"{'?' if b.next_offset is None else b.next_offset}, but {b.notified_offset} records were "
                     "written before the notification" for b in backlog]
    else:
        out.left_behind = backlog
    return out


def _tasks_not_done(checkpoints: dict[str, CheckpointV2], checkpointed_ms: dict[str, int],
                    intermediate_keys: set[str], senders: dict[str, int], config: dict[str, str],
                    now_ms: int) -> list[str]:
    """Rule 4 of :func:`checkpoint_gaps`: a gap for each task (with a checkpoint after the notification)
    not shown done."""
    gaps = []
    quiet = quiet_ms(config)
    for task, ms in sorted(checkpointed_ms.items()):
        if task in senders:
            if ms < senders[task]:
                gaps.append(f"task {task}: no checkpoint since it sent its drain message")
            continue
        if any(ssp in intermediate_keys for ssp in checkpoints[task].input_offsets):
            continue
        if quiet is None:
            gaps.append(f"task {task}: {COMMIT_MS}={config.get(COMMIT_MS)!r} commits nothing periodically, so "
                        "its checkpoints cannot show that it stopped")
        elif now_ms - ms < quiet:
            gaps.append(f"task {task}: checkpointed {max(0, now_ms - ms) / 1000:.1f}s ago; a running task "
                        f"checkpoints at least every {quiet / 1000:g}s ({COMMIT_MS} + {COMMIT_MAX_DELAY_MS}): "
                        "not shown stopped yet")
    return gaps


def _backlog(job: DrainJob, checkpoints: dict[str, CheckpointV2], tasks: list[str], intermediate_keys: set[str],
             notified_ms: int, notes: list[str], config: dict[str, str]) -> list[LeftBehind]:
    """The source records written before the notification that the tasks' latest checkpoints do not cover,
    each source read on the brokers of its system (kafka.systems; a source that is not there: a note)."""
    sources: dict[tuple[str, str], dict[int, tuple[str, int | None]]] = {}  # (system, topic) -> partition -> ..
    for task in tasks:
        cp = checkpoints.get(task)
        for ssp, offset in (cp.input_offsets.items() if cp is not None else ()):
            if ssp in intermediate_keys:
                continue
            parts = ssp.split(".")
            if len(parts) < 3 or not parts[-1].isdigit():
                notes.append(f"task {task}: input {ssp!r} is not system.stream.partition: not checked")
                continue
            sources.setdefault((parts[0], ".".join(parts[1:-1])), {})[int(parts[-1])] = (task, next_offset(offset))
    out = []
    for (system, topic), partitions in sorted(sources.items()):
        consumer, bootstrap = job.consumer_of(system, config)
        at = _offsets_at(consumer, bootstrap, topic, sorted(partitions), notified_ms, notes)
        if at is None:
            notes.append(f"input stream {topic} is not on {bootstrap}: what the drain left of it is not known")
            continue
        for p, (task, resume) in sorted(partitions.items()):
            if resume is None or resume < at[p]:
                out.append(LeftBehind(topic, p, task, resume, at[p], at[p] - (resume or 0)))
    return out


def _offsets_at(consumer: Any, bootstrap: str, topic: str, partitions: list[int], ms: int,
                notes: list[str]) -> dict[int, int] | None:
    """Per partition of ``topic`` (on ``bootstrap``), the offset of its first record written at or after ``ms``
    (its true end when there is none); None when the topic does not exist."""
    kafka = kafka_module()
    count = partition_count(consumer, topic, bootstrap)
    if count is None:
        return None
    present = [p for p in partitions if p < count]
    ends = {p: t.end for p, t in read_tails(consumer, topic, present, bootstrap).items()}
    tps = {p: kafka.TopicPartition(topic, p) for p in present}
    try:
        found = consumer.offsets_for_times({tp: ms for tp in tps.values()})
    except Exception as e:  # noqa: BLE001 - a broker without ListOffsets by time: say so, compare with the end
        notes.append(f"offsets of {topic} by time unavailable ({e}): compared with its end")
        found = {}
    out = {}
    for p in partitions:
        if p not in ends:
            out[p] = 0  # the partition is gone: nothing to cover
            continue
        hit = found.get(tps[p])
        # No record at or after ``ms``: Kafka answers none; Tansu answers offset 0 with timestamp -1.
        out[p] = ends[p] if hit is None or hit.timestamp is None or hit.timestamp < 0 else min(hit.offset, ends[p])
    return out


def next_offset(offset: str | None) -> int | None:
    """The offset a task reads next after its checkpointed ``offset`` (Samza checkpoints the last one it
    processed); None when there is none, or it is not a number."""
    if offset is None:
        return None
    try:
        return int(offset) + 1
    except ValueError:
        return None
