"""drain: ask a running Samza(-compatible) job to stop after it has processed everything in flight
(seed 004), watch it do so, and check its final commit.

The shell side of the protocol. ``start`` writes a DrainNotification for the job's current run (its
``app.run.id`` in the coordinator stream's ``set-config`` namespace) to the coordinator stream, as
Samza's DrainUtils does; the job's containers poll for it, stop fetching their sources, process what
their intermediate streams still hold, commit and stop; its coordinator then tombstones it.

A notification's state:

- ``pending``: written, no sign yet that the job acted on it;
- ``seen``: the job acts on it: a drain control message of its run id is on one of the job's
  intermediate streams (a task that drained sent it), or, for a job without intermediate streams, a
  task checkpointed after the notification was written;
- ``cleared``: tombstoned (by the job after its tasks stopped, or by ``cancel``);
- ``stale``: its run id is not the job's current one (a redeploy made it moot).

Messages in flight, per intermediate stream partition: its end offset minus the next offset the
consuming task will read (its last v2 checkpoint's input offset + 1: Samza checkpoints the last
processed offset). The intermediate streams are those the job's config marks
(``streams.<id>.samza.intermediate=true``; topic ``streams.<id>.samza.physical.name``, default the id).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.errors import NotFoundError, StatectlError, UsageError
from statectl.formats.checkpoint import CheckpointV2, parse_checkpoint_id
from statectl.formats.drain import DRAIN, DrainFormatError, DrainNotification, decode_control
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, open_consumer, partition_count
from statectl.kafka.coordinator import CoordinatorStream, NotificationRecord
from statectl.kafka.tails import read_tails

PENDING = "pending"
SEEN = "seen"
CLEARED = "cleared"
STALE = "stale"

# Where ``cancel`` marks the notifications it withdrew (statectl's own coordinator-stream namespace).
CANCELLED_NAMESPACE = "statectl-drain-cancelled-v1"
# Where ``start`` marks a notification it withdrew because a concurrent start wrote one for the same run
# first; the value is the winner's uuid (``wait`` follows it).
SUPERSEDED_NAMESPACE = "statectl-drain-superseded-v1"
READ_BACK_TRIES = 50
# How many records at the end of each intermediate partition status looks at for drain messages.
TAIL_RECORDS = 8
DEFAULT_POLL_S = 1.0


class DrainIncompleteError(StatectlError):
    """drain wait: timed out, or the job stopped with messages still in flight (exit 1)."""


class DrainIrrevocableError(StatectlError):
    """drain cancel: the job already acts on the notification (exit 1)."""


@dataclass(frozen=True)
class DrainTarget:
    """Which job: bootstrap servers, job name and id; ``run_id`` overrides the job's ``app.run.id``."""

    bootstrap: str
    job: str
    job_id: str = "1"
    run_id: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    security: KafkaSecurity | None = None

    def validate(self) -> None:
        if not self.job:
            raise UsageError("drain needs --job")


@dataclass
class NoticeState:
    """One drain notification and its state (see the module doc); ``written``: when its latest record
    was written (ISO 8601 UTC)."""

    uuid: str
    run_id: str | None
    drain_mode: str | None
    state: str
    offset: int
    written: str | None


@dataclass
class InFlight:
    """Messages in flight on one intermediate stream partition. ``next_offset``: the next offset its
    consuming task reads (None: no checkpoint of it yet, so everything since the log start counts)."""

    stream: str
    partition: int
    end_offset: int
    task: str | None
    next_offset: int | None
    in_flight: int


@dataclass
class DrainStatus:
    job: str
    job_id: str
    run_id: str | None
    notifications: list[NoticeState] = field(default_factory=list)
    intermediate: list[InFlight] = field(default_factory=list)
    in_flight: int = 0
    tasks: int = 0
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def pending(self, uuid: str | None = None) -> list[NoticeState]:
        """The notifications for the current run not cleared yet (``uuid``: just that one)."""
        return [n for n in self.notifications if n.state in (PENDING, SEEN) and (uuid is None or n.uuid == uuid)]


@dataclass
class DrainStartResult:
    uuid: str
    run_id: str
    created: bool  # False: a notification for this run was already pending, and is reported instead
    offset: int
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass
class DrainCancelResult:
    run_id: str | None
    cancelled: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass
class DrainWaitResult:
    run_id: str | None
    drained: bool
    uuids: list[str] = field(default_factory=list)
    in_flight: int = 0
    intermediate: list[InFlight] = field(default_factory=list)
    waited_s: float = 0.0
    notes: list[str] = field(default_factory=list)


class _Job:
    """The clients one drain command holds: the coordinator stream, the checkpoint topic, a consumer."""

    def __init__(self, target: DrainTarget):
        target.validate()
        self.target = target
        self.coordinator = CoordinatorStream(target.bootstrap, target.job, target.job_id,
                                             timeout_s=target.timeout_s, security=target.security)
        self.checkpoints = KafkaCheckpointLog(target.bootstrap, target.job, target.job_id,
                                              timeout_s=target.timeout_s, security=target.security)
        self._consumer = None

    def consumer(self):
        if self._consumer is None:
            self._consumer = open_consumer(self.target.bootstrap, timeout_s=self.target.timeout_s,
                                           security=self.target.security)
        return self._consumer

    def run_id(self, *, required: bool) -> str | None:
        run_id = self.target.run_id or self.coordinator.run_id()
        if run_id is None and required:
            raise NotFoundError(f"job {self.target.job}-{self.target.job_id} has no run id (app.run.id) in its "
                                f"coordinator stream {self.coordinator.topic}",
                                hint="pass --run-id, the run id the job was deployed with")
        return run_id

    def close(self) -> None:
        for closer in (self.coordinator.close, self.checkpoints.close,
                       lambda: self._consumer.close() if self._consumer is not None else None):
            try:
                closer()
            except Exception:  # noqa: BLE001 - closing is best effort; the result stands
                pass

    def __enter__(self) -> _Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(target: DrainTarget) -> DrainStartResult:
    """Write a drain notification for the job's current run (``target.run_id`` or its ``app.run.id``).
    Idempotent: when one for that run is already pending (not cleared), it is reported, not repeated.
    Concurrent starts for one run leave one notification: each reads the stream back after writing, and
    every one but the first written for the run withdraws its own (a tombstone, marked superseded) and
    reports the first (``created`` False).

    Raises NotFoundError (exit 10) when the coordinator stream does not exist or the job has no run id
    and none was given; StatectlError (exit 1) when the brokers cannot be reached."""
    began = time.monotonic()
    with _Job(target) as job:
        job.coordinator.require()
        run_id = job.run_id(required=True)
        assert run_id is not None
        notifications = job.coordinator.notifications()  # before ``problems``: parsing them finds bad ones
        notes = [f"skipped a malformed record of {job.coordinator.topic}: {p}" for p in job.coordinator.problems]
        for rec in notifications:
            if not rec.cleared and rec.run_id == run_id:
                return DrainStartResult(rec.uuid, run_id, False, rec.offset, _since(began), notes)
        notification = DrainNotification.create(run_id)
        offset = job.coordinator.write_notification(notification)
        first = _first_pending(job, run_id, notification.uuid, offset)
        if first.uuid == notification.uuid:
            return DrainStartResult(notification.uuid, run_id, True, offset, _since(began), notes)
        # Another start wrote one for this run first (between our read and our write): withdraw ours. A job
        # that read ours meanwhile drains on it all the same (the same run, the same drain).
        job.coordinator.put(SUPERSEDED_NAMESPACE, notification.uuid, first.uuid.encode())
        job.coordinator.clear_notification(notification.uuid)
        notes.append(f"a concurrent drain start wrote notification {first.uuid} for run {run_id} first; "
                     f"withdrew this one ({notification.uuid})")
        return DrainStartResult(first.uuid, run_id, False, first.offset, _since(began), notes)


def _first_pending(job: _Job, run_id: str, uuid: str, offset: int) -> NotificationRecord:
    """Read the coordinator stream on until it holds our notification ``uuid`` (written at ``offset``);
    return the first-written pending notification of ``run_id`` (ours, or a concurrent start's)."""
    for _ in range(READ_BACK_TRIES):
        job.coordinator.refresh()
        pending = [r for r in job.coordinator.notifications() if not r.cleared and r.run_id == run_id]
        mine = [r for r in pending if r.uuid == uuid and r.offset >= offset]
        if mine:
            return min(pending, key=lambda r: r.offset)
        if not any(r.uuid == uuid for r in job.coordinator.notifications()):
            time.sleep(0.05)  # not read back yet (a broker's end offset can lag the write)
            continue
        break  # cleared already (the job drained, or a cancel): ours stands as written
    return NotificationRecord(uuid, None, False, offset, -1)


def status(target: DrainTarget) -> DrainStatus:
    """Every drain notification of the job with its state, and the messages in flight on each partition
    of its intermediate streams. Raises NotFoundError (exit 10) when the coordinator stream does not
    exist; StatectlError (exit 1) when the brokers cannot be reached."""
    with _Job(target) as job:
        return _status(job)


def _status(job: _Job) -> DrainStatus:
    """The status, reading the checkpoint topic on a second thread while the coordinator stream and the
    intermediate streams' ends are read (each on its own consumer)."""
    began = time.monotonic()
    target = job.target
    checkpoint_notes: list[str] = []
    with ThreadPoolExecutor(1, thread_name_prefix="drain-checkpoints") as pool:
        latest = pool.submit(_latest_checkpoints, job, checkpoint_notes)
        job.coordinator.require()
        config = job.coordinator.config()
        run_id = job.run_id(required=False)
        result = DrainStatus(target.job, target.job_id, run_id)
        notifications = job.coordinator.notifications()  # before ``problems``: parsing them finds bad ones
        result.notes += [f"skipped a malformed record of {job.coordinator.topic}: {p}"
                         for p in job.coordinator.problems]
        tails = []
        for system, topic in _intermediate_streams(config):
            consumer = job.consumer()
            count = partition_count(consumer, topic, target.bootstrap)
            if count is None:
                result.notes.append(f"intermediate stream {topic} does not exist (yet)")
                continue
            tails += [(system, topic, t) for _, t in sorted(read_tails(consumer, topic, list(range(count)),
                                                                       target.bootstrap, last=TAIL_RECORDS).items())]
        checkpoints = latest.result()
    result.notes += checkpoint_notes
    result.tasks = len(checkpoints)
    consumed: dict[str, tuple[str, str]] = {}  # ssp key -> (task, checkpointed offset)
    for task, cp in checkpoints.items():
        for ssp, offset in cp.input_offsets.items():
            consumed[ssp] = (task, offset)

    drain_runs: set[str] = set()
    for system, topic, tail in tails:
        p = tail.partition
        for rec in tail.records:
            if rec.value and rec.value[:1] == bytes([DRAIN]):
                try:
                    drain_runs.add(decode_control(rec.value).run_id or "")
                except DrainFormatError:
                    pass
        task, offset = consumed.get(f"{system}.{topic}.{p}", (None, None))
        next_offset = _next_offset(offset)
        start = tail.beginning if next_offset is None else max(next_offset, tail.beginning)
        result.intermediate.append(InFlight(topic, p, tail.end, task, next_offset, max(0, tail.end - start)))
    result.in_flight = sum(i.in_flight for i in result.intermediate)

    newest_checkpoint_ms = max((parse_checkpoint_id(cp.checkpoint_id)[0] for cp in checkpoints.values()),
                               default=0)
    for rec in notifications:
        result.notifications.append(NoticeState(rec.uuid, rec.run_id,
                                                rec.notification.drain_mode if rec.notification else None,
                                                _state(rec, run_id, drain_runs, bool(result.intermediate),
                                                       newest_checkpoint_ms),
                                                rec.offset, _iso_ms(rec.timestamp_ms)))
    result.duration_s = _since(began)
    return result


def _state(rec: NotificationRecord, run_id: str | None, drain_runs: set[str], has_intermediate: bool,
           newest_checkpoint_ms: int) -> str:
    if rec.cleared:
        return CLEARED
    if run_id is None or rec.run_id != run_id:
        return STALE
    if rec.run_id in drain_runs:
        return SEEN
    if not has_intermediate and rec.timestamp_ms >= 0 and newest_checkpoint_ms > rec.timestamp_ms:
        return SEEN
    return PENDING


def cancel(target: DrainTarget, uuid: str | None = None) -> DrainCancelResult:
    """Withdraw the pending drain notification(s) of the job's current run (or just ``uuid``) with a
    tombstone. Raises DrainIrrevocableError (exit 1), writing nothing, when the job already acts on one
    (state ``seen``): a drain cannot be undone; NotFoundError (exit 10) when there is nothing to cancel.

    A job that reads the notification between this check and the tombstone drains anyway (Samza's
    DrainMonitor acts on the first notification it sees): the result's note says to check with status."""
    began = time.monotonic()
    with _Job(target) as job:
        st = _status(job)
        targets = st.pending(uuid)
        if not targets:
            what = f"drain notification {uuid}" if uuid else f"pending drain notification for run {st.run_id}"
            raise NotFoundError(f"no {what} in {job.coordinator.topic}",
                                hint="'statectl drain status' lists the notifications and their states")
        seen = [n for n in targets if n.state == SEEN]
        if seen:
            raise DrainIrrevocableError(
                f"job {target.job}-{target.job_id} is already draining (notification {seen[0].uuid}, run "
                f"{seen[0].run_id}): a drain cannot be undone",
                hint="wait for it with 'statectl drain wait', then redeploy the job")
        result = DrainCancelResult(st.run_id, notes=list(st.notes))
        for n in targets:
            # First a mark of our own (a namespace Samza ignores), so that 'drain wait' tells a withdrawn
            # notification from one the job cleared after draining.
            job.coordinator.put(CANCELLED_NAMESPACE, n.uuid, b"{}")
            job.coordinator.clear_notification(n.uuid)
            result.cancelled.append(n.uuid)
        result.notes.append("a job that read the notification before it was withdrawn drains anyway: "
                            "'statectl drain status' shows whether it does")
        result.duration_s = _since(began)
        return result


def wait(target: DrainTarget, *, timeout_s: float, uuid: str | None = None, poll_s: float = DEFAULT_POLL_S,
         on_poll: Callable[[DrainStatus], None] | None = None) -> DrainWaitResult:
    """Block until the drain notification(s) of the current run (or ``uuid``) are cleared, then check the
    final commit: every intermediate partition consumed to its end by the last checkpoints. ``on_poll``
    gets each status read (the CLI draws its progress from it).

    Returns the result when drained. Raises DrainIncompleteError (exit 1) on timeout, or when the job
    cleared the notification with messages still in flight (naming the partitions and how many each
    holds); NotFoundError (exit 10) when there is no notification for the run to wait for."""
    if timeout_s <= 0:
        raise UsageError("--timeout must be positive")
    began = time.monotonic()
    deadline = began + timeout_s
    with _Job(target) as job:
        st = _status(job)
        waiting_for = [n.uuid for n in st.pending(uuid)]
        if not waiting_for:
            cleared = [n.uuid for n in st.notifications if n.state == CLEARED
                       and (n.uuid == uuid if uuid else n.run_id == st.run_id)]
            if not cleared:
                what = f"drain notification {uuid}" if uuid else f"drain notification for run {st.run_id}"
                raise NotFoundError(f"no {what} in {job.coordinator.topic}",
                                    hint="start one with 'statectl drain start'")
            waiting_for = cleared
        while True:
            if on_poll is not None:
                on_poll(st)
            states = {n.uuid: n.state for n in st.notifications}
            superseded = {u: v.decode(errors="replace") for u, v in
                          job.coordinator.namespace_values(SUPERSEDED_NAMESPACE).items() if v and u in waiting_for}
            if superseded:  # withdrawn by a concurrent start: wait for the one it deferred to instead
                waiting_for = list(dict.fromkeys([superseded.get(u, u) for u in waiting_for]))
            if all(states.get(u) == CLEARED for u in waiting_for):
                cancelled = [u for u in waiting_for if job.coordinator.namespace_values(CANCELLED_NAMESPACE).get(u)]
                if cancelled:
                    raise DrainIncompleteError(f"drain notification {cancelled[0]} was cancelled: job "
                                               f"{target.job}-{target.job_id} is not draining",
                                               hint="start another with 'statectl drain start'")
                return _verify(st, waiting_for, _since(began))
            if time.monotonic() >= deadline:
                raise DrainIncompleteError(
                    f"job {target.job}-{target.job_id} has not drained after {timeout_s:g}s: "
                    + _describe(st), hint="'statectl drain status' shows the notification and what is in flight")
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
            st = _status(job)


def _verify(st: DrainStatus, uuids: list[str], waited_s: float) -> DrainWaitResult:
    result = DrainWaitResult(st.run_id, True, uuids, st.in_flight, st.intermediate, waited_s, list(st.notes))
    if st.in_flight:
        raise DrainIncompleteError(f"job {st.job}-{st.job_id} stopped with messages still in flight: "
                                   + _describe(st),
                                   hint="its final checkpoints do not cover its intermediate streams; they are "
                                        "reprocessed when it restarts")
    return result


def _describe(st: DrainStatus) -> str:
    holding = [i for i in st.intermediate if i.in_flight]
    if not holding:
        return "no message in flight; the notification is not cleared yet"
    shown = ", ".join(f"{i.stream}[{i.partition}] {i.in_flight}" for i in holding[:8])
    more = f" and {len(holding) - 8} more partitions" if len(holding) > 8 else ""
    return f"{st.in_flight} messages in flight ({shown}{more})"


def _intermediate_streams(config: dict[str, str]) -> list[tuple[str, str]]:
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


def _latest_checkpoints(job: _Job, notes: list[str]) -> dict[str, CheckpointV2]:
    try:
        found, problems = job.checkpoints.latest_checkpoints()
    except NotFoundError:
        return {}
    notes += problems
    return found


def _next_offset(offset: str | None) -> int | None:
    if offset is None:
        return None
    try:
        return int(offset) + 1
    except ValueError:
        return None


def _iso_ms(ms: int) -> str | None:
    if ms < 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _since(began: float) -> float:
    return round(time.monotonic() - began, 3)
