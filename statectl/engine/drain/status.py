"""drain status: every drain notification of a job with its state (see
:mod:`statectl.engine.drain.model`), the records Samza cannot read, whether the job runs a drain monitor,
and the messages in flight on each partition of its intermediate streams.

Messages in flight, per intermediate stream partition: its end offset minus the next offset the
consuming task will read (its last v2 checkpoint's input offset + 1: Samza checkpoints the last
processed offset). The intermediate streams are those the job's config marks
(``streams.<id>.samza.intermediate=true``; topic ``streams.<id>.samza.physical.name``, default the id).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from statectl.engine.drain.checkpoints import DrainEvidence, checkpoint_gaps, next_offset
from statectl.engine.drain.job import DrainJob
from statectl.engine.drain.model import (
    CLEARED,
    DRAINED,
    PENDING,
    SEEN,
    SIGNAL_CHECKPOINTS,
    SIGNAL_CLEARED,
    STALE,
    DrainStatus,
    DrainTarget,
    InFlight,
    JobBreaking,
    NoticeState,
    drain_monitor_enabled,
    since,
)
from statectl.errors import NotFoundError
from statectl.formats.checkpoint import CheckpointV2, parse_checkpoint_id
from statectl.formats.drain import DRAIN, DrainFormatError, decode_control
from statectl.kafka.client import partition_count
from statectl.kafka.coordinator import BadNotification, NotificationRecord
from statectl.kafka.tails import read_tails

# How many records at the end of each intermediate partition status looks at for drain messages (every
# producer task sends one to the aggregate partition: they all have to be in view).
TAIL_RECORDS = 64


def status(target: DrainTarget) -> DrainStatus:
    """Every drain notification of the job with its state, the records Samza cannot read, whether the
    job runs a drain monitor, and the messages in flight on each partition of its intermediate streams.
    Raises NotFoundError (exit 10) when the coordinator stream does not exist; StatectlError (exit 1)
    when the brokers cannot be reached. Reads only."""
    with DrainJob(target) as job:
        return read_status(job)


@dataclass
class _Reading:
    """What one status read gathers before it judges the notifications: the job's config and current run,
    its notifications, the tails of its intermediate partitions (system, topic, tail) and its tasks'
    latest checkpoints."""

    config: dict[str, str]
    run_id: str | None
    notifications: list[NotificationRecord]
    tails: list[tuple[str, str, Any]]
    checkpoints: dict[str, CheckpointV2]
    evidence: DrainEvidence = field(default_factory=DrainEvidence)
    now_ms: int = 0

    def intermediate_keys(self) -> set[str]:
        return {f"{system}.{topic}.{t.partition}" for system, topic, t in self.tails}

    def newest_checkpoint_ms(self) -> int:
        return max((parse_checkpoint_id(cp.checkpoint_id)[0] for cp in self.checkpoints.values()), default=0)


def read_status(job: DrainJob) -> DrainStatus:
    """The status of ``job`` (as :func:`status`), on clients the caller holds."""
    began = time.monotonic()
    result, reading = _read(job)
    _count_in_flight(result, reading)
    reading.now_ms = int(time.time() * 1000)
    for rec in reading.notifications:
        result.notifications.append(_judge(job, result, reading, rec))
    result.duration_s = since(began)
    return result


def _read(job: DrainJob) -> tuple[DrainStatus, _Reading]:
    """Read the coordinator stream and the intermediate streams' ends while a second thread reads the
    checkpoint topic (each on its own consumer)."""
    target = job.target
    checkpoint_notes: list[str] = []
    with ThreadPoolExecutor(1, thread_name_prefix="drain-checkpoints") as pool:
        latest = pool.submit(_latest_checkpoints, job, checkpoint_notes)
        job.coordinator.require()
        config = job.coordinator.config()
        run_id = job.run_id(required=False)
        result = DrainStatus(target.job, target.job_id, run_id)
        result.drain_monitor_enabled = drain_monitor_enabled(config)
        notifications = job.coordinator.notifications()  # before ``problems``: parsing them finds bad ones
        result.notes += [f"skipped a malformed record of {job.coordinator.topic}: {p}"
                         for p in job.coordinator.problems]
        result.job_breaking = [_job_breaking(b) for b in job.coordinator.bad_notifications()]
        tails = _intermediate_tails(job, config, result.notes)
        checkpoints = latest.result()
    result.notes += checkpoint_notes
    result.tasks = len(checkpoints)
    return result, _Reading(config, run_id, notifications, tails, checkpoints)


def _intermediate_tails(job: DrainJob, config: dict[str, str], notes: list[str]) -> list[tuple[str, str, Any]]:
    """(system, topic, tail) of every partition of the job's intermediate streams, each read on the brokers
    of its system; a stream that does not exist yet gets a note."""
    tails = []
    for system, topic in intermediate_streams(config):
        consumer, bootstrap = job.consumer_of(system, config)
        count = partition_count(consumer, topic, bootstrap)
        if count is None:
            notes.append(f"intermediate stream {topic} does not exist (yet)")
            continue
        tails += [(system, topic, t) for _, t in sorted(read_tails(consumer, topic, list(range(count)),
                                                                   bootstrap, last=TAIL_RECORDS).items())]
    return tails


def _count_in_flight(result: DrainStatus, reading: _Reading) -> None:
    """The messages in flight per intermediate partition (into ``result``), and the drain messages at the
    partitions' ends (into ``reading.evidence``)."""
    consumed: dict[str, tuple[str, str]] = {}  # ssp key -> (task, checkpointed offset)
    for task, cp in reading.checkpoints.items():
        for ssp, offset in cp.input_offsets.items():
            consumed[ssp] = (task, offset)
    for system, topic, tail in reading.tails:
        p = tail.partition
        for rec in tail.records:
            if rec.value and rec.value[:1] == bytes([DRAIN]):
                try:
                    message = decode_control(rec.value)
                except DrainFormatError:
                    continue
                reading.evidence.saw(topic, p, message.run_id or "", message.task_name, _record_ms(rec))
        task, offset = consumed.get(f"{system}.{topic}.{p}", (None, None))
        resume = next_offset(offset)
        start = tail.beginning if resume is None else max(resume, tail.beginning)
        result.intermediate.append(InFlight(topic, p, tail.end, task, resume, max(0, tail.end - start)))
    result.in_flight = sum(i.in_flight for i in result.intermediate)


def _judge(job: DrainJob, result: DrainStatus, reading: _Reading, rec: NotificationRecord) -> NoticeState:
    """The state of one notification; a pending or seen one of the current run is checked against the
    checkpoints (:func:`checkpoint_gaps`), which may show it drained."""
    run_id = reading.run_id
    state = _state(rec, run_id, set(reading.evidence.partitions), bool(result.intermediate),
                   reading.newest_checkpoint_ms())
    signal = SIGNAL_CLEARED if state == CLEARED else None
    if state in (PENDING, SEEN) and rec.timestamp_ms >= 0 and run_id is not None:
        found = checkpoint_gaps(job, rec.timestamp_ms, run_id, reading.checkpoints, result.intermediate,
                                reading.intermediate_keys(), reading.evidence, result.notes,
                                config=reading.config, now_ms=reading.now_ms)
        if found.gaps:
            result.checkpoint_gaps = found.gaps
        else:
            state, signal = DRAINED, SIGNAL_CHECKPOINTS
            result.left_behind = found.left_behind
            if not result.intermediate:
                result.notes.append(
                    f"drain notification {rec.uuid}: the job has no intermediate streams, so its drain shows "
                    "only as its tasks having stopped committing after it; a job stopped otherwise (killed, "
                    "failed) after the notification looks the same")
    if rec.miskeyed and not rec.cleared:
        result.notes.append(
            f"drain notification {rec.uuid} (run {rec.run_id}) is stored under key {_clip(rec.stored_key)!r}, "
            "not its uuid: Samza drains on it (it reads values only) but its cleanup tombstones the uuid's key, "
            f"never this one" + (" (it did: the record is still live)" if rec.canonical_cleared else "")
            + f"; 'statectl drain cancel --uuid {rec.uuid}' removes it")
    return NoticeState(rec.uuid, rec.run_id, rec.notification.drain_mode if rec.notification else None,
                       state, rec.offset, _iso_ms(rec.timestamp_ms), rec.stored_key, signal)


def _state(rec: NotificationRecord, run_id: str | None, drain_runs: set[str], has_intermediate: bool,
           newest_checkpoint_ms: int) -> str:
    if rec.cleared or rec.canonical_cleared:
        return CLEARED
    if run_id is None or rec.run_id != run_id:
        return STALE
    if rec.run_id in drain_runs:
        return SEEN
    if not has_intermediate and rec.timestamp_ms >= 0 and newest_checkpoint_ms > rec.timestamp_ms:
        return SEEN
    return PENDING


def _job_breaking(b: BadNotification) -> JobBreaking:
    return JobBreaking(b.offset, b.key, b.size, b.why, _iso_ms(b.timestamp_ms))


def intermediate_streams(config: dict[str, str]) -> list[tuple[str, str]]:
    """(system, physical topic) of each stream the job's config marks intermediate, sorted."""
    default_system = config.get("job.default.system", "kafka")
    out = []
    for key, value in config.items():
        if key.startswith("streams.") and key.endswith(".samza.intermediate") and value.strip().lower() == "true":
            stream_id = key[len("streams."):-len(".samza.intermediate")]
            topic = config.get(f"streams.{stream_id}.samza.physical.name", stream_id)
            system = config.get(f"streams.{stream_id}.samza.system", default_system)
            out.append((system, topic))
    return sorted(set(out))


def _latest_checkpoints(job: DrainJob, notes: list[str]) -> dict[str, CheckpointV2]:
    try:
        found, problems = job.checkpoints.latest_checkpoints()
    except NotFoundError:
        return {}
    notes += problems
    return found


def _record_ms(rec: object) -> int:
    ts = getattr(rec, "timestamp", None)
    return ts if isinstance(ts, int) else -1


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _iso_ms(ms: int) -> str | None:
    if ms < 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
