"""drain cancel: withdraw drain notifications with tombstones (the pending ones of the current run, or
one by uuid), or remove the records Samza cannot read (``bad``) and other runs' notifications
(``all_stale``). ``plan_cancel`` computes the tombstones (``--dry-run`` prints them); ``cancel`` writes
them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from statectl.engine.drain.job import DrainJob
from statectl.engine.drain.model import (
    CANCELLED_NAMESPACE,
    CLEARED,
    DRAINED,
    SEEN,
    SIGNAL_CLEARED,
    STALE,
    DrainCancelResult,
    DrainIrrevocableError,
    DrainTarget,
    JobBreaking,
    NoticeState,
    canonical_uuid,
    since,
)
from statectl.engine.drain.status import read_status
from statectl.errors import NotFoundError, UsageError, command
from statectl.formats.drain import DRAIN_NAMESPACE


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
    with DrainJob(target) as job:
        return _plan_cancel(job, uuid, bad, all_stale)


def _plan_cancel(job: DrainJob, uuid: str | None, bad: bool, all_stale: bool) -> DrainCancelPlan:
    """The plan of a cancel on clients the caller holds (as :func:`plan_cancel`)."""
    target = job.target
    st = read_status(job)
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
                                hint=(command("drain status"), " lists the notifications and their states"))
        plan.tombstones += [PlannedTombstone(b.key, None, "job-breaking", b.offset) for b in broken]
        plan.tombstones += [PlannedTombstone(n.key or n.uuid, n.uuid, "stale", n.offset) for n in stale]
        plan.bad_removed = broken
        plan.cancelled = [n.uuid for n in stale]
        return plan
    wanted = canonical_uuid(uuid)
    targets = st.pending(wanted)
    leftovers = [] if wanted is None else [n for n in st.notifications if n.uuid == wanted and (
        n.state == DRAINED or (n.state == CLEARED and n.key != n.uuid and n.signal == SIGNAL_CLEARED
                               and _live(job, n)))]
    if not targets and not leftovers:
        what = f"drain notification {uuid}" if uuid else f"pending drain notification for run {st.run_id}"
        raise NotFoundError(f"no {what} in {job.coordinator.topic}",
                            hint=(command("drain status"), " lists the notifications and their states"))
    seen = [n for n in targets if n.state == SEEN]
    if seen:
        raise DrainIrrevocableError(
            f"job {target.job}-{target.job_id} is already draining (notification {seen[0].uuid}, run "
            f"{seen[0].run_id}): a drain cannot be undone",
            hint=("wait for it with ", command("drain wait"), ", then redeploy the job"))
    plan.tombstones += [PlannedTombstone(n.key or n.uuid, n.uuid, "pending", n.offset) for n in targets]
    plan.tombstones += [PlannedTombstone(n.key or n.uuid, n.uuid, "drained", n.offset) for n in leftovers]
    plan.cancelled = [n.uuid for n in targets + leftovers]
    return plan


def cancel(target: DrainTarget, uuid: str | None = None, *, bad: bool = False,
           all_stale: bool = False) -> DrainCancelResult:
    """Withdraw drain notifications with tombstones, each under the key it is stored under. By default the
    pending ones of the job's current run (or just ``uuid``, canonicalised as Java does; one the job
    already drained on, or a leftover Samza's cleanup missed, is removed too). ``bad``: the records Samza
    cannot read instead (job-breaking, see :mod:`statectl.engine.drain`). ``all_stale``: the notifications of every
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
    with DrainJob(target) as job:
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
        result.duration_s = since(began)
        return result


def _live(job: DrainJob, n: NoticeState) -> bool:
    """Whether the record under ``n.key`` still has a value (a notification Samza's cleanup missed)."""
    return job.coordinator.namespace_values(DRAIN_NAMESPACE).get(n.key) is not None
