"""drain wait: block until a job has drained, by either completion signal (the notification cleared by
the job's coordinator, or the job's checkpoints showing the drain), then check its final commit."""

from __future__ import annotations

import time
from collections.abc import Callable

from statectl.engine.drain.job import DrainJob
from statectl.engine.drain.model import (
    CANCELLED_NAMESPACE,
    CLEARED,
    DRAIN_MONITOR_ENABLED,
    DRAINED,
    SIGNAL_CHECKPOINTS,
    SIGNAL_CLEARED,
    SUPERSEDED_NAMESPACE,
    DrainIncompleteError,
    DrainStatus,
    DrainTarget,
    DrainWaitResult,
    canonical_uuid,
    left_behind_text,
    since,
)
from statectl.engine.drain.status import read_status
from statectl.errors import NotFoundError, UsageError, command

DEFAULT_POLL_S = 1.0


def wait(target: DrainTarget, *, timeout_s: float, uuid: str | None = None, poll_s: float = DEFAULT_POLL_S,
         on_poll: Callable[[DrainStatus], None] | None = None) -> DrainWaitResult:
    """Block until the drain notification(s) of the current run (or ``uuid``) are complete: cleared (the
    job's cleanup tombstoned them; then the final commit is checked: every intermediate partition consumed
    to its end by the last checkpoints), or shown drained by the job's checkpoints (for jobs whose
    coordinator never cleans up: :func:`statectl.engine.drain.checkpoints.checkpoint_gaps`). The result's
    ``signal`` says which ("cleared" when every one was cleared, else "checkpoints"). ``on_poll`` gets each
    status read (the CLI draws its progress from it).

    Returns the result when drained. Raises DrainIncompleteError (exit 1) on timeout (saying what is in
    flight and what the checkpoints do not show yet), or when the job cleared the notification with
    messages still in flight (naming the partitions and how many each holds), or when it was cancelled;
    NotFoundError (exit 10) when there is no notification for the run to wait for."""
    if timeout_s <= 0:
        raise UsageError("--timeout must be positive")
    began = time.monotonic()
    deadline = began + timeout_s
    with DrainJob(target) as job:
        st = read_status(job)
        waiting_for = _waiting_for(job, st, canonical_uuid(uuid))
        if not st.drain_monitor_enabled:
            st.notes.append(f"{DRAIN_MONITOR_ENABLED} is not true in the job's config: its containers do not look "
                            "for drain notifications")
        while True:
            if on_poll is not None:
                on_poll(st)
            waiting_for, signal = _completion(job, st, waiting_for)
            if signal is not None:
                return _verify(st, waiting_for, since(began), signal)
            if time.monotonic() >= deadline:
                raise DrainIncompleteError(
                    f"job {target.job}-{target.job_id} has not drained after {timeout_s:g}s: "
                    + _describe(st), hint=(command("drain status"), " shows the notification and what is in flight"))
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
            st = read_status(job)


def _waiting_for(job: DrainJob, st: DrainStatus, uuid: str | None) -> list[str]:
    """The notifications to wait for: the pending ones of the run (or ``uuid``); without one, the run's last
    drain that ended before this wait began (not one cancelled before it). NotFoundError when neither."""
    waiting_for = [n.uuid for n in st.pending(uuid)]
    if waiting_for:
        return waiting_for
    done = [n.uuid for n in st.notifications if n.state in (CLEARED, DRAINED)
            and (n.uuid == uuid if uuid else n.run_id == st.run_id)]
    if not done:
        what = f"drain notification {uuid}" if uuid else f"drain notification for run {st.run_id}"
        raise NotFoundError(f"no {what} in {job.coordinator.topic}", hint=("start one with ", command("drain start")))
    return done[-1:]


def _completion(job: DrainJob, st: DrainStatus, waiting_for: list[str]) -> tuple[list[str], str | None]:
    """The notifications waited for (one withdrawn by a concurrent start is replaced by the one it deferred
    to) and, once they are all complete, the signal that shows it (else None). DrainIncompleteError when
    one of them was cancelled."""
    states = {n.uuid: n.state for n in st.notifications}
    superseded = {u: v.decode(errors="replace") for u, v in
                  job.coordinator.namespace_values(SUPERSEDED_NAMESPACE).items() if v and u in waiting_for}
    if superseded:
        waiting_for = list(dict.fromkeys([superseded.get(u, u) for u in waiting_for]))
    if not all(states.get(u) in (CLEARED, DRAINED) for u in waiting_for):
        return waiting_for, None
    cancelled = [u for u in waiting_for if states.get(u) == CLEARED
                 and job.coordinator.namespace_values(CANCELLED_NAMESPACE).get(u)]
    if cancelled:
        target = job.target
        raise DrainIncompleteError(f"drain notification {cancelled[0]} was cancelled: job "
                                   f"{target.job}-{target.job_id} is not draining",
                                   hint=("start another with ", command("drain start")))
    signal = SIGNAL_CLEARED if all(states.get(u) == CLEARED for u in waiting_for) else SIGNAL_CHECKPOINTS
    return waiting_for, signal


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
