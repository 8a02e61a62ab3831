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
- ``cleared``: tombstoned (by the job after its tasks stopped, or by ``cancel``); signal ``cleared``;
- ``drained``: not tombstoned, but the job's checkpoints show that it drained (signal ``checkpoints``,
  see :func:`checkpoint_gaps`): only Samza's cluster-based (YARN) coordinator runs DrainUtils.cleanup
  after a clean drain (ClusterBasedJobCoordinator.cleanupDrainNotifications); ZkJobCoordinator and
  PassthroughJobCoordinator (standalone jobs) never delete a notification. A drained job stopped
  fetching its sources when it saw the notification: the source records it had not fetched are left
  behind (``left_behind``), not processed;
- ``stale``: its run id is not the job's current one (a redeploy made it moot).

Samza's containers run a DrainMonitor only with ``job.drain-monitor.enabled=true`` (JobConfig, default
false; ``Config.getBoolean``: "true" in any case, anything else false): ``start`` refuses otherwise.
A record of the ``samza-drain-v1`` namespace that Samza's DrainNotificationObjectMapper cannot read is
job-breaking: DrainMonitor reads every value of the namespace and throws, so a starting container fails
and a running one's poll dies; ``status`` names each, ``cancel --bad`` tombstones them.

Messages in flight, per intermediate stream partition: its end offset minus the next offset the
consuming task will read (its last v2 checkpoint's input offset + 1: Samza checkpoints the last
processed offset). The intermediate streams are those the job's config marks
(``streams.<id>.samza.intermediate=true``; topic ``streams.<id>.samza.physical.name``, default the id).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.errors import DiscardedError, NotFoundError, StatectlError, UsageError
from statectl.formats.checkpoint import CheckpointV2, parse_checkpoint_id
from statectl.formats.jobconfig import JobConfigError, get_int
from statectl.formats.drain import DRAIN, DRAIN_NAMESPACE, DrainFormatError, DrainNotification, decode_control, java_uuid
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, kafka_module, open_consumer, partition_count
from statectl.kafka.coordinator import BadNotification, CoordinatorStream, NotificationRecord
from statectl.kafka.systems import system_brokers
from statectl.kafka.tails import read_tails

PENDING = "pending"
SEEN = "seen"
CLEARED = "cleared"
DRAINED = "drained"
STALE = "stale"

# How a notification was found complete: tombstoned (by the job's cleanup), or shown by its checkpoints.
SIGNAL_CLEARED = "cleared"
SIGNAL_CHECKPOINTS = "checkpoints"

# TaskConfig.COMMIT_MS and COMMIT_MAX_DELAY_MS, with their defaults.
COMMIT_MS = "task.commit.ms"
DEFAULT_COMMIT_MS = 60_000
COMMIT_MAX_DELAY_MS = "task.commit.max.delay.ms"
DEFAULT_COMMIT_MAX_DELAY_MS = 60_000

# JobConfig.DRAIN_MONITOR_ENABLED (default false).
DRAIN_MONITOR_ENABLED = "job.drain-monitor.enabled"

# Where ``cancel`` marks the notifications it withdrew (statectl's own coordinator-stream namespace).
CANCELLED_NAMESPACE = "statectl-drain-cancelled-v1"
# Where ``start`` marks a notification it withdrew because a concurrent start wrote one for the same run
# first; the value is the winner's uuid (``wait`` follows it).
SUPERSEDED_NAMESPACE = "statectl-drain-superseded-v1"
READ_BACK_TRIES = 50
# How many records at the end of each intermediate partition status looks at for drain messages (every
# producer task sends one to the aggregate partition: they all have to be in view).
TAIL_RECORDS = 64
DEFAULT_POLL_S = 1.0


class DrainIncompleteError(StatectlError):
    """drain wait: timed out, or the job stopped with messages still in flight (exit 1)."""


class DrainIrrevocableError(StatectlError):
    """drain cancel: the job already acts on the notification (exit 1)."""


class DrainMonitorOffError(DiscardedError):
    """drain start: the job runs no DrainMonitor (job.drain-monitor.enabled is not true), so nothing
    would read the notification (exit 14, nothing written)."""


def drain_monitor_enabled(config: dict[str, str]) -> bool:
    """Whether Samza starts a DrainMonitor in the job's containers: JobConfig.getDrainMonitorEnabled,
    i.e. ``Config.getBoolean("job.drain-monitor.enabled", false)``: "true" in any case; absent, or any
    other value ("yes", "1", " true"), is false."""
    return config.get(DRAIN_MONITOR_ENABLED, "false").lower() == "true"


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
    was written (ISO 8601 UTC); ``key``: the key it is stored under (its uuid, canonical as Java writes
    it, unless it was written under another key); ``signal``: for ``cleared`` and ``drained``, how that
    was found ("cleared": tombstoned; "checkpoints": the job's checkpoints), else None."""

    uuid: str
    run_id: str | None
    drain_mode: str | None
    state: str
    offset: int
    written: str | None
    key: str = ""
    signal: str | None = None


@dataclass
class JobBreaking:
    """A record of the drain namespace Samza cannot read (see the module doc): where it is, its key, its
    size in bytes and why Samza's deserializer rejects it."""

    offset: int
    key: str
    bytes: int
    why: str
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
class LeftBehind:
    """Source input a drained job did not process: on ``stream[partition]``, read by ``task``, the records
    from ``next_offset`` (its final checkpoint's offset + 1; None: no offset checkpointed) up to
    ``notified_offset`` (the partition's offset when the notification was written): ``records`` of them.
    Samza's drain stops fetching sources (SystemConsumers.drain: its refresh polls only the intermediate
    systems) and processes only what it had fetched, so a job lagging its sources leaves that backlog
    to its next deployment."""

    stream: str
    partition: int
    task: str
    next_offset: int | None
    notified_offset: int
    records: int


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
    drain_monitor_enabled: bool = False
    job_breaking: list[JobBreaking] = field(default_factory=list)
    checkpoint_gaps: list[str] = field(default_factory=list)
    left_behind: list[LeftBehind] = field(default_factory=list)

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
    drain_monitor_enabled: bool = True


@dataclass
class DrainCancelResult:
    run_id: str | None
    cancelled: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    bad_removed: list[JobBreaking] = field(default_factory=list)


@dataclass
class DrainWaitResult:
    run_id: str | None
    drained: bool
    uuids: list[str] = field(default_factory=list)
    in_flight: int = 0
    intermediate: list[InFlight] = field(default_factory=list)
    waited_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    signal: str = SIGNAL_CLEARED
    left_behind: list[LeftBehind] = field(default_factory=list)


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
        self._elsewhere: dict[str, Any] = {}  # other clusters' brokers -> a consumer there

    def consumer(self):
        if self._consumer is None:
            self._consumer = open_consumer(self.target.bootstrap, timeout_s=self.target.timeout_s,
                                           security=self.target.security)
        return self._consumer

    def consumer_of(self, system: str, config: dict[str, str]) -> tuple[Any, str]:
        """A consumer on the brokers of the job's ``system`` (kafka.systems.system_brokers), and those brokers."""
        where = system_brokers(config, system, self.target.bootstrap, self.target.security)
        if not where.elsewhere:
            return self.consumer(), self.target.bootstrap
        if where.bootstrap not in self._elsewhere:
            self._elsewhere[where.bootstrap] = open_consumer(where.bootstrap, timeout_s=self.target.timeout_s,
                                                             security=where.security)
        return self._elsewhere[where.bootstrap], where.bootstrap

    def run_id(self, *, required: bool) -> str | None:
        run_id = self.target.run_id or self.coordinator.run_id()
        if run_id is None and required:
            raise NotFoundError(f"job {self.target.job}-{self.target.job_id} has no run id (app.run.id) in its "
                                f"coordinator stream {self.coordinator.topic}",
                                hint="pass --run-id, the run id the job was deployed with")
        return run_id

    def close(self) -> None:
        closers = [self.coordinator.close, self.checkpoints.close,
                   lambda: self._consumer.close() if self._consumer is not None else None]
        for closer in closers + [c.close for c in self._elsewhere.values()]:
            try:
                closer()
            except Exception:  # noqa: BLE001 - closing is best effort; the result stands
                pass

    def __enter__(self) -> _Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class DrainStartPlan:
    """What ``start`` will do: write a new drain notification for ``run_id`` to ``topic`` (``created``; its
    uuid is made as it is written), or report the pending one ``uuid`` (at ``offset``) and write nothing.
    Field names as DrainStartResult's; ``drain start --dry-run`` prints it, ``start`` executes it."""

    run_id: str
    created: bool
    uuid: str | None
    offset: int | None
    topic: str
    drain_monitor_enabled: bool
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)


def plan_start(target: DrainTarget, *, force: bool = False) -> DrainStartPlan:
    """The plan of ``start(target, force=force)``, read from the coordinator stream, writing nothing to it.
    Raises what ``start`` raises before it writes (DrainMonitorOffError, NotFoundError, StatectlError)."""
    with _Job(target) as job:
        return _plan_start(job, force)


def _plan_start(job: _Job, force: bool) -> DrainStartPlan:
    target = job.target
    job.coordinator.require()
    run_id = job.run_id(required=True)
    assert run_id is not None
    enabled = drain_monitor_enabled(job.coordinator.config())
    notes: list[str] = []
    if not enabled:
        if not force:
            raise DrainMonitorOffError(
                f"job {target.job}-{target.job_id} runs no drain monitor ({DRAIN_MONITOR_ENABLED} is not true "
                f"in its config): nothing would act on a drain notification",
                hint=f"deploy the job with {DRAIN_MONITOR_ENABLED}=true, or write it anyway with --force")
        notes.append(f"{DRAIN_MONITOR_ENABLED} is not true in the job's config: its containers ignore this "
                     f"notification unless run {run_id} is restarted with the drain monitor enabled")
    notifications = job.coordinator.notifications()  # before ``problems``: parsing them finds bad ones
    notes += [f"skipped a malformed record of {job.coordinator.topic}: {p}" for p in job.coordinator.problems]
    bad = job.coordinator.bad_notifications()
    if bad:
        notes.append(f"{len(bad)} record(s) of {job.coordinator.topic} that Samza's DrainMonitor cannot read "
                     f"(first at offset {bad[0].offset}): starting containers fail on them and a running "
                     "container's drain monitor stops polling; remove them with 'statectl drain cancel --bad' "
                     "(running containers see a drain only after a restart)")
    for rec in notifications:
        if not rec.cleared and rec.run_id == run_id:
            return DrainStartPlan(run_id, False, rec.uuid, rec.offset, job.coordinator.topic, enabled, notes=notes)
    return DrainStartPlan(run_id, True, None, None, job.coordinator.topic, enabled, notes=notes)


def start(target: DrainTarget, *, force: bool = False) -> DrainStartResult:
    """Write a drain notification for the job's current run (``target.run_id`` or its ``app.run.id``).
    Idempotent: when one for that run is already pending (not cleared), it is reported, not repeated.
    Concurrent starts for one run leave one notification: each reads the stream back after writing, and
    every one but the first written for the run withdraws its own (a tombstone, marked superseded) and
    reports the first (``created`` False). What it does is the plan ``plan_start`` computes.

    Raises DrainMonitorOffError (exit 14), writing nothing, when the job's config does not enable
    Samza's DrainMonitor (job.drain-monitor.enabled; ``force`` writes anyway, with a note);
    NotFoundError (exit 10) when the coordinator stream does not exist or the job has no run id and none
    was given; StatectlError (exit 1) when the brokers cannot be reached. Records Samza cannot read in
    the drain namespace are named in a note (the job would not see the notification)."""
    began = time.monotonic()
    with _Job(target) as job:
        plan = _plan_start(job, force)
        run_id, notes, enabled = plan.run_id, list(plan.notes), plan.drain_monitor_enabled
        if not plan.created:
            assert plan.uuid is not None and plan.offset is not None
            return DrainStartResult(plan.uuid, run_id, False, plan.offset, _since(began), notes, enabled)
        notification = DrainNotification.create(run_id)
        offset = job.coordinator.write_notification(notification)
        first = _first_pending(job, run_id, notification.uuid, offset)
        if first.uuid == notification.uuid:
            return DrainStartResult(notification.uuid, run_id, True, offset, _since(began), notes, enabled)
        # Another start wrote one for this run first (between our read and our write): withdraw ours. A job
        # that read ours meanwhile drains on it all the same (the same run, the same drain).
        job.coordinator.put(SUPERSEDED_NAMESPACE, notification.uuid, first.uuid.encode())
        job.coordinator.clear_notification(notification.uuid)
        notes.append(f"a concurrent drain start wrote notification {first.uuid} for run {run_id} first; "
                     f"withdrew this one ({notification.uuid})")
        return DrainStartResult(first.uuid, run_id, False, first.offset, _since(began), notes, enabled)


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
    """Every drain notification of the job with its state, the records Samza cannot read, whether the
    job runs a drain monitor, and the messages in flight on each partition of its intermediate streams.
    Raises NotFoundError (exit 10) when the coordinator stream does not exist; StatectlError (exit 1)
    when the brokers cannot be reached. Reads only."""
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
        result.drain_monitor_enabled = drain_monitor_enabled(config)
        notifications = job.coordinator.notifications()  # before ``problems``: parsing them finds bad ones
        result.notes += [f"skipped a malformed record of {job.coordinator.topic}: {p}"
                         for p in job.coordinator.problems]
        result.job_breaking = [_job_breaking(b) for b in job.coordinator.bad_notifications()]
        tails = []
        for system, topic in _intermediate_streams(config):
            consumer, bootstrap = job.consumer_of(system, config)
            count = partition_count(consumer, topic, bootstrap)
            if count is None:
                result.notes.append(f"intermediate stream {topic} does not exist (yet)")
                continue
            tails += [(system, topic, t) for _, t in sorted(read_tails(consumer, topic, list(range(count)),
                                                                       bootstrap, last=TAIL_RECORDS).items())]
        checkpoints = latest.result()
    result.notes += checkpoint_notes
    result.tasks = len(checkpoints)
    consumed: dict[str, tuple[str, str]] = {}  # ssp key -> (task, checkpointed offset)
    for task, cp in checkpoints.items():
        for ssp, offset in cp.input_offsets.items():
            consumed[ssp] = (task, offset)

    drain_runs: set[str] = set()
    evidence = _DrainEvidence()
    for system, topic, tail in tails:
        p = tail.partition
        for rec in tail.records:
            if rec.value and rec.value[:1] == bytes([DRAIN]):
                try:
                    message = decode_control(rec.value)
                except DrainFormatError:
                    continue
                drain_runs.add(message.run_id or "")
                evidence.saw(topic, p, message.run_id or "", message.task_name, _record_ms(rec))
        task, offset = consumed.get(f"{system}.{topic}.{p}", (None, None))
        next_offset = _next_offset(offset)
        start = tail.beginning if next_offset is None else max(next_offset, tail.beginning)
        result.intermediate.append(InFlight(topic, p, tail.end, task, next_offset, max(0, tail.end - start)))
    result.in_flight = sum(i.in_flight for i in result.intermediate)

    now_ms = int(time.time() * 1000)
    newest_checkpoint_ms = max((parse_checkpoint_id(cp.checkpoint_id)[0] for cp in checkpoints.values()),
                               default=0)
    intermediate_keys = {f"{system}.{topic}.{t.partition}" for system, topic, t in tails}
    for rec in notifications:
        state = _state(rec, run_id, drain_runs, bool(result.intermediate), newest_checkpoint_ms)
        signal = SIGNAL_CLEARED if state == CLEARED else None
        if state in (PENDING, SEEN) and rec.timestamp_ms >= 0 and run_id is not None:
            found = checkpoint_gaps(job, rec.timestamp_ms, run_id, checkpoints, result.intermediate,
                                    intermediate_keys, evidence, result.notes, config=config, now_ms=now_ms)
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
        result.notifications.append(NoticeState(rec.uuid, rec.run_id,
                                                rec.notification.drain_mode if rec.notification else None,
                                                state, rec.offset, _iso_ms(rec.timestamp_ms), rec.stored_key, signal))
    result.duration_s = _since(began)
    return result


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


@dataclass
class _DrainEvidence:
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
class _Drained:
    """What the checkpoints say of a drain: ``gaps`` (empty: it completed) and, once complete, the source
    input it left behind."""

    gaps: list[str] = field(default_factory=list)
    left_behind: list[LeftBehind] = field(default_factory=list)


def checkpoint_gaps(job: _Job, notified_ms: int, run_id: str, checkpoints: dict[str, CheckpointV2],
                    intermediate: list[InFlight], intermediate_keys: set[str], evidence: _DrainEvidence,
                    notes: list[str], *, config: dict[str, str], now_ms: int) -> _Drained:
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
    out = _Drained()
    model = job.coordinator.locality()
    active = sorted(t for t in model.task_containers if model.task_modes.get(t, "Active") != "Standby")
    tasks = active or sorted(checkpoints)
    if not tasks:
        return _Drained(["no task has a checkpoint yet"])
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


def _backlog(job: _Job, checkpoints: dict[str, CheckpointV2], tasks: list[str], intermediate_keys: set[str],
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
            sources.setdefault((parts[0], ".".join(parts[1:-1])), {})[int(parts[-1])] = (task, _next_offset(offset))
    out = []
    for (system, topic), partitions in sorted(sources.items()):
        consumer, bootstrap = job.consumer_of(system, config)
        at = _offsets_at(consumer, bootstrap, topic, sorted(partitions), notified_ms, notes)
        if at is None:
            notes.append(f"input stream {topic} is not on {bootstrap}: what the drain left of it is not known")
            continue
        for p, (task, next_offset) in sorted(partitions.items()):
            if next_offset is None or next_offset < at[p]:
                out.append(LeftBehind(topic, p, task, next_offset, at[p], at[p] - (next_offset or 0)))
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


@dataclass(frozen=True)
class PlannedTombstone:
    """A record ``cancel`` tombstones in the coordinator stream: under ``key`` (at ``offset``), the
    notification ``uuid`` (None for a record Samza cannot read) and why: ``pending`` (withdrawn, after a
    statectl-drain-cancelled-v1 mark that tells ``drain wait`` so), ``drained`` (a leftover of a drain),
    ``stale`` (another run's, --all-stale) or ``job-breaking`` (--bad)."""

    key: str
    uuid: str | None
    kind: str
    offset: int


@dataclass
class DrainCancelPlan:
    """What ``cancel`` will do: the tombstones it writes, in order; ``cancelled`` and ``bad_removed`` as
    DrainCancelResult will list them. ``drain cancel --dry-run`` prints it, ``cancel`` executes it."""

    run_id: str | None
    topic: str
    tombstones: list[PlannedTombstone]
    cancelled: list[str] = field(default_factory=list)
    bad_removed: list[JobBreaking] = field(default_factory=list)
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)


def plan_cancel(target: DrainTarget, uuid: str | None = None, *, bad: bool = False,
                all_stale: bool = False) -> DrainCancelPlan:
    """The plan of ``cancel(target, uuid, bad=, all_stale=)``, read from the coordinator stream, writing
    nothing. Raises what ``cancel`` raises before it writes (UsageError, NotFoundError,
    DrainIrrevocableError)."""
    if uuid is not None and (bad or all_stale):
        raise UsageError("--uuid names one notification: it goes with neither --bad nor --all-stale")
    with _Job(target) as job:
        return _plan_cancel(job, uuid, bad, all_stale)


def _plan_cancel(job: _Job, uuid: str | None, bad: bool, all_stale: bool) -> DrainCancelPlan:
    target = job.target
    st = _status(job)
    if st.run_id is None and (all_stale or not bad):
        # Without the current run every notification reads as another run's: --all-stale would withdraw the
        # current drain, and nothing tells a pending notification of the current run from a stale one.
        job.run_id(required=True)
    plan = DrainCancelPlan(st.run_id, job.coordinator.topic, [], notes=list(st.notes))
    if bad or all_stale:
        stale = [n for n in st.notifications if n.state == STALE] if all_stale else []
        broken = list(st.job_breaking) if bad else []
        if not stale and not broken:
            what = " or ".join(w for w, on in (("record Samza cannot read", bad),
                                                ("notification of another run", all_stale)) if on)
            raise NotFoundError(f"no {what} in {job.coordinator.topic}",
                                hint="'statectl drain status' lists the notifications and their states")
        plan.tombstones += [PlannedTombstone(b.key, None, "job-breaking", b.offset) for b in broken]
        plan.tombstones += [PlannedTombstone(n.key or n.uuid, n.uuid, "stale", n.offset) for n in stale]
        plan.bad_removed = broken
        plan.cancelled = [n.uuid for n in stale]
        return plan
    wanted = _canonical(uuid)
    targets = st.pending(wanted)
    leftovers = [] if wanted is None else [n for n in st.notifications if n.uuid == wanted and (
        n.state == DRAINED or (n.state == CLEARED and n.key != n.uuid and n.signal == SIGNAL_CLEARED
                               and _live(job, n)))]
    if not targets and not leftovers:
        what = f"drain notification {uuid}" if uuid else f"pending drain notification for run {st.run_id}"
        raise NotFoundError(f"no {what} in {job.coordinator.topic}",
                            hint="'statectl drain status' lists the notifications and their states")
    seen = [n for n in targets if n.state == SEEN]
    if seen:
        raise DrainIrrevocableError(
            f"job {target.job}-{target.job_id} is already draining (notification {seen[0].uuid}, run "
            f"{seen[0].run_id}): a drain cannot be undone",
            hint="wait for it with 'statectl drain wait', then redeploy the job")
    plan.tombstones += [PlannedTombstone(n.key or n.uuid, n.uuid, "pending", n.offset) for n in targets]
    plan.tombstones += [PlannedTombstone(n.key or n.uuid, n.uuid, "drained", n.offset) for n in leftovers]
    plan.cancelled = [n.uuid for n in targets + leftovers]
    return plan


def cancel(target: DrainTarget, uuid: str | None = None, *, bad: bool = False,
           all_stale: bool = False) -> DrainCancelResult:
    """Withdraw drain notifications with tombstones, each under the key it is stored under. By default the
    pending ones of the job's current run (or just ``uuid``, canonicalised as Java does; one the job
    already drained on, or a leftover Samza's cleanup missed, is removed too). ``bad``: the records Samza
    cannot read instead (job-breaking, see the module doc). ``all_stale``: the notifications of every
    other run (Samza's DrainUtils.cleanupAll, which deletes every key of the namespace, kept to other
    runs). ``bad`` and ``all_stale`` combine; ``uuid`` goes with neither (UsageError). The tombstones
    written are those of the plan ``plan_cancel`` computes.

    Raises DrainIrrevocableError (exit 1), writing nothing, when the job already acts on a pending one
    (state ``seen``): a drain cannot be undone; NotFoundError (exit 10) when there is nothing to cancel, or
    when the current run is unknown (no ``target.run_id``, and no readable ``app.run.id``) for anything
    but ``bad`` alone: the notification of the run given or found is never withdrawn as a stale one.
    A job that reads a notification between this check and the tombstone drains anyway (Samza's
    DrainMonitor acts on the first notification it sees): the result's note says to check with status."""
    if uuid is not None and (bad or all_stale):
        raise UsageError("--uuid names one notification: it goes with neither --bad nor --all-stale")
    began = time.monotonic()
    with _Job(target) as job:
        plan = _plan_cancel(job, uuid, bad, all_stale)
        result = DrainCancelResult(plan.run_id, notes=list(plan.notes))
        for t in plan.tombstones:
            if t.kind == "pending":
                # First a mark of our own (a namespace Samza ignores), so that 'drain wait' tells a withdrawn
                # notification from one the job cleared after draining.
                job.coordinator.put(CANCELLED_NAMESPACE, t.uuid, b"{}")
            job.coordinator.clear_notification(t.key)
            if t.kind == "drained":
                result.notes.append(f"drain notification {t.uuid} had drained the job already: removed")
        result.cancelled = list(plan.cancelled)
        result.bad_removed = list(plan.bad_removed)
        if plan.bad_removed:
            result.notes.append("containers whose drain monitor hit those records poll no more: a drain reaches "
                                "them only after a restart")
        if any(t.kind == "pending" for t in plan.tombstones):
            result.notes.append("a job that read the notification before it was withdrawn drains anyway: "
                                "'statectl drain status' shows whether it does")
        result.duration_s = _since(began)
        return result


def _canonical(uuid: str | None) -> str | None:
    """``uuid`` as Java writes it (UUID.fromString then toString), or as given when it is no UUID."""
    if uuid is None:
        return None
    return java_uuid(uuid) or uuid


def _live(job: _Job, n: NoticeState) -> bool:
    """Whether the record under ``n.key`` still has a value (a notification Samza's cleanup missed)."""
    return job.coordinator.namespace_values(DRAIN_NAMESPACE).get(n.key) is not None


def wait(target: DrainTarget, *, timeout_s: float, uuid: str | None = None, poll_s: float = DEFAULT_POLL_S,
         on_poll: Callable[[DrainStatus], None] | None = None) -> DrainWaitResult:
    """Block until the drain notification(s) of the current run (or ``uuid``) are complete: cleared (the
    job's cleanup tombstoned them; then the final commit is checked: every intermediate partition consumed
    to its end by the last checkpoints), or shown drained by the job's checkpoints (:func:`checkpoint_gaps`,
    for jobs whose coordinator never cleans up). The result's ``signal`` says which ("cleared" when every
    one was cleared, else "checkpoints"). ``on_poll`` gets each status read (the CLI draws its progress
    from it).

    Returns the result when drained. Raises DrainIncompleteError (exit 1) on timeout (saying what is in
    flight and what the checkpoints do not show yet), or when the job cleared the notification with
    messages still in flight (naming the partitions and how many each holds), or when it was cancelled;
    NotFoundError (exit 10) when there is no notification for the run to wait for."""
    if timeout_s <= 0:
        raise UsageError("--timeout must be positive")
    began = time.monotonic()
    deadline = began + timeout_s
    uuid = _canonical(uuid)
    with _Job(target) as job:
        st = _status(job)
        waiting_for = [n.uuid for n in st.pending(uuid)]
        if not waiting_for:
            done = [n.uuid for n in st.notifications if n.state in (CLEARED, DRAINED)
                    and (n.uuid == uuid if uuid else n.run_id == st.run_id)]
            if not done:
                what = f"drain notification {uuid}" if uuid else f"drain notification for run {st.run_id}"
                raise NotFoundError(f"no {what} in {job.coordinator.topic}",
                                    hint="start one with 'statectl drain start'")
            waiting_for = done[-1:]  # the run's last drain, done before this wait began (not one cancelled before)
        if not st.drain_monitor_enabled:
            st.notes.append(f"{DRAIN_MONITOR_ENABLED} is not true in the job's config: its containers do not look "
                            "for drain notifications")
        while True:
            if on_poll is not None:
                on_poll(st)
            states = {n.uuid: n.state for n in st.notifications}
            superseded = {u: v.decode(errors="replace") for u, v in
                          job.coordinator.namespace_values(SUPERSEDED_NAMESPACE).items() if v and u in waiting_for}
            if superseded:  # withdrawn by a concurrent start: wait for the one it deferred to instead
                waiting_for = list(dict.fromkeys([superseded.get(u, u) for u in waiting_for]))
            if all(states.get(u) in (CLEARED, DRAINED) for u in waiting_for):
                cancelled = [u for u in waiting_for if states.get(u) == CLEARED
                             and job.coordinator.namespace_values(CANCELLED_NAMESPACE).get(u)]
                if cancelled:
                    raise DrainIncompleteError(f"drain notification {cancelled[0]} was cancelled: job "
                                               f"{target.job}-{target.job_id} is not draining",
                                               hint="start another with 'statectl drain start'")
                signal = SIGNAL_CLEARED if all(states.get(u) == CLEARED for u in waiting_for) else SIGNAL_CHECKPOINTS
                return _verify(st, waiting_for, _since(began), signal)
            if time.monotonic() >= deadline:
                raise DrainIncompleteError(
                    f"job {target.job}-{target.job_id} has not drained after {timeout_s:g}s: "
                    + _describe(st), hint="'statectl drain status' shows the notification and what is in flight")
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
            st = _status(job)


def _verify(st: DrainStatus, uuids: list[str], waited_s: float, signal: str) -> DrainWaitResult:
    result = DrainWaitResult(st.run_id, True, uuids, st.in_flight, st.intermediate, waited_s, list(st.notes), signal,
                             list(st.left_behind))
    if st.left_behind:
        result.notes.append(f"the drain completed with {left_behind_text(st.left_behind)}: the job stopped fetching "
                            "its sources when it saw the notification; its next deployment reads them")
    if st.in_flight:
        raise DrainIncompleteError(f"job {st.job}-{st.job_id} stopped with messages still in flight: "
                                   + _describe(st),
                                   hint="its final checkpoints do not cover its intermediate streams; they are "
                                        "reprocessed when it restarts")
    return result


def left_behind_text(left: list[LeftBehind], limit: int = 8) -> str:
    """``N source records left behind (t[0] 5, t[1] 3 ...)``: what a drain did not process, per partition."""
    shown = ", ".join(f"{b.stream}[{b.partition}] {b.records}" for b in left[:limit])
    more = f" and {len(left) - limit} more partitions" if len(left) > limit else ""
    return f"{sum(b.records for b in left)} source records left behind ({shown}{more})"


def _describe(st: DrainStatus) -> str:
    holding = [i for i in st.intermediate if i.in_flight]
    gaps = ""
    if st.checkpoint_gaps:
        gaps = "; its checkpoints do not show a drain: " + "; ".join(st.checkpoint_gaps[:4]) + (
            f" and {len(st.checkpoint_gaps) - 4} more" if len(st.checkpoint_gaps) > 4 else "")
    if not holding:
        return "no message in flight; the notification is not cleared yet" + gaps
    shown = ", ".join(f"{i.stream}[{i.partition}] {i.in_flight}" for i in holding[:8])
    more = f" and {len(holding) - 8} more partitions" if len(holding) > 8 else ""
    return f"{st.in_flight} messages in flight ({shown}{more})" + gaps


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


def _record_ms(rec: object) -> int:
    ts = getattr(rec, "timestamp", None)
    return ts if isinstance(ts, int) else -1


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _iso_ms(ms: int) -> str | None:
    if ms < 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _since(began: float) -> float:
    return round(time.monotonic() - began, 3)
