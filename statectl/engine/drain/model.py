"""What every drain command shares: the states of a drain notification, the target job, the results
and the typed errors, and the namespaces statectl marks notifications in.

A notification's state:

- ``pending``: written, no sign yet that the job acted on it;
- ``seen``: the job acts on it: a drain control message of its run id is on one of the job's
  intermediate streams (a task that drained sent it), or, for a job without intermediate streams, a
  task checkpointed after the notification was written;
- ``cleared``: tombstoned (by the job after its tasks stopped, or by ``cancel``); signal ``cleared``;
- ``drained``: not tombstoned, but the job's checkpoints show that it drained (signal ``checkpoints``,
  see :func:`statectl.engine.drain.checkpoints.checkpoint_gaps`): only Samza's cluster-based (YARN)
  coordinator runs DrainUtils.cleanup after a clean drain
  (ClusterBasedJobCoordinator.cleanupDrainNotifications); ZkJobCoordinator and
  PassthroughJobCoordinator (standalone jobs) never delete a notification. A drained job stopped
  fetching its sources when it saw the notification: the source records it had not fetched are left
  behind (``left_behind``), not processed;
- ``stale``: its run id is not the job's current one (a redeploy made it moot).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from statectl.errors import DiscardedError, StatectlError, UsageError
from statectl.formats.drain import java_uuid
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity

PENDING = "pending"
SEEN = "seen"
CLEARED = "cleared"
DRAINED = "drained"
STALE = "stale"

# How a notification was found complete: tombstoned (by the job's cleanup), or shown by its checkpoints.
SIGNAL_CLEARED = "cleared"
SIGNAL_CHECKPOINTS = "checkpoints"

# JobConfig.DRAIN_MONITOR_ENABLED (default false).
DRAIN_MONITOR_ENABLED = "job.drain-monitor.enabled"

# Where ``cancel`` marks the notifications it withdrew (statectl's own coordinator-stream namespace).
CANCELLED_NAMESPACE = "statectl-drain-cancelled-v1"
# Where ``start`` marks a notification it withdrew because a concurrent start wrote one for the same run
# first; the value is the winner's uuid (``wait`` follows it).
SUPERSEDED_NAMESPACE = "statectl-drain-superseded-v1"


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
    """A record of the drain namespace Samza cannot read (see :mod:`statectl.engine.drain`): where it is,
    its key, its size in bytes and why Samza's deserializer rejects it."""

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


def left_behind_text(left: list[LeftBehind], limit: int = 8) -> str:
    """``N source records left behind (t[0] 5, t[1] 3 ...)``: what a drain did not process, per partition."""
    shown = ", ".join(f"{b.stream}[{b.partition}] {b.records}" for b in left[:limit])
    more = f" and {len(left) - limit} more partitions" if len(left) > limit else ""
    return f"{sum(b.records for b in left)} source records left behind ({shown}{more})"


def canonical_uuid(uuid: str | None) -> str | None:
    """``uuid`` as Java writes it (UUID.fromString then toString), or as given when it is no UUID."""
    if uuid is None:
        return None
    return java_uuid(uuid) or uuid


def since(began: float) -> float:
    """Seconds since ``began`` (a time.monotonic() reading), to the millisecond: a result's duration."""
    return round(time.monotonic() - began, 3)
