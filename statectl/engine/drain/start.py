"""drain start: write a drain notification for a job's current run, once (a pending one is reported, and
of concurrent starts for one run only the first written stands). ``plan_start`` computes what it will do
(``--dry-run`` prints that plan); ``start`` executes it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from statectl.engine.drain.job import DrainJob
from statectl.engine.drain.model import (
    DRAIN_MONITOR_ENABLED,
    SUPERSEDED_NAMESPACE,
    DrainMonitorOffError,
    DrainStartResult,
    DrainTarget,
    drain_monitor_enabled,
    since,
)
from statectl.formats.drain import DrainNotification
from statectl.kafka.coordinator import NotificationRecord

# How often ``start`` reads the coordinator stream back, waiting to see its own notification there.
READ_BACK_TRIES = 50


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
    with DrainJob(target) as job:
        return _plan_start(job, force)


def _plan_start(job: DrainJob, force: bool) -> DrainStartPlan:
    """The plan of a start on clients the caller holds (as :func:`plan_start`)."""
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
    with DrainJob(target) as job:
        plan = _plan_start(job, force)
        run_id, notes, enabled = plan.run_id, list(plan.notes), plan.drain_monitor_enabled
        if not plan.created:
            assert plan.uuid is not None and plan.offset is not None
            return DrainStartResult(plan.uuid, run_id, False, plan.offset, since(began), notes, enabled)
        notification = DrainNotification.create(run_id)
        offset = job.coordinator.write_notification(notification)
        first = _first_pending(job, run_id, notification.uuid, offset)
        if first.uuid == notification.uuid:
            return DrainStartResult(notification.uuid, run_id, True, offset, since(began), notes, enabled)
        # Another start wrote one for this run first (between our read and our write): withdraw ours. A job
        # that read ours meanwhile drains on it all the same (the same run, the same drain).
        job.coordinator.put(SUPERSEDED_NAMESPACE, notification.uuid, first.uuid.encode())
        job.coordinator.clear_notification(notification.uuid)
        notes.append(f"a concurrent drain start wrote notification {first.uuid} for run {run_id} first; "
                     f"withdrew this one ({notification.uuid})")
        return DrainStartResult(first.uuid, run_id, False, first.offset, since(began), notes, enabled)


def _first_pending(job: DrainJob, run_id: str, uuid: str, offset: int) -> NotificationRecord:
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
