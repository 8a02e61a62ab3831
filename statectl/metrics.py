"""Prometheus metrics of standby: what an on-call engineer graphs, in the text exposition format,
through prometheus_client (imported inside functions only: ``statectl --help`` stays fast).

Per replica, labelled ``samza_job, samza_job_id, task, store, changelog, partition, replica_dir`` (the job
label is ``samza_job``, not ``job``: Prometheus puts its own ``job`` and ``instance`` labels on every
series it scrapes, and a series' own ``job`` would become ``exported_job``):

- ``statectl_standby_follower_up``: 1 while a follower follows the replica, else 0.
- ``statectl_standby_applied_offset``, ``statectl_standby_end_offset``: the newest changelog offset the
  replica holds; the changelog's end (the offset its next record gets), as the follower last saw it.
- ``statectl_standby_lag_records``, ``statectl_standby_lag_seconds``: how far behind the changelog the
  replica is (seconds: the newest record's time minus the newest applied record's). A value not known (no
  offset yet, the brokers not answering) has no sample: alert on ``absent()`` or on the follower's report
  getting old.
- ``statectl_standby_status_updated_timestamp_seconds``: when the follower last reported.
- follower only (``FollowerMetrics``): ``statectl_standby_records_applied_total`` and
  ``statectl_standby_reseeds_total``, counted since the follower started.
- status only: ``statectl_standby_promotable`` (1: the replica has an offset file and no follower seeding it).

Per job's task and store (``standby promote --metrics-file``), labelled ``samza_job, samza_job_id, task,
store, result``: ``statectl_standby_failovers_total`` with ``result="promoted"`` for a promote done,
``"refused"`` for one refused because the job's next start would delete what it made (exit 14), ``"failed"``
for any other promote that could not use the standby; ``statectl_standby_last_failover_timestamp_seconds``.
Counters kept in a textfile have no process to remember them: the file is the counter's store, read back
before each increment (record_failover).

Per job (``standby check --metrics-file``), labelled ``samza_job, samza_job_id``:
``statectl_standby_placement_violations`` (tasks on the same host as one of their standbys),
``statectl_standby_placement_violation{task, standby, host}`` (1 for each), ``statectl_standby_tasks{role}``
(role ``active`` or ``standby``), ``statectl_standby_check_timestamp_seconds``.

A textfile is written whole or not at all: into a temporary file in the same dir (hidden, not ``*.prom``, so
node_exporter's textfile collector never reads it half-written), fsynced, renamed over the file.
"""

from __future__ import annotations

import calendar
import fcntl
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statectl.errors import DiscardedError, UsageError

PREFIX = "statectl_standby_"
REPLICA_LABELS = ("samza_job", "samza_job_id", "task", "store", "changelog", "partition", "replica_dir")
FAILOVER_LABELS = ("samza_job", "samza_job_id", "task", "store", "result")
JOB_LABELS = ("samza_job", "samza_job_id")

FOLLOWER_UP = PREFIX + "follower_up"
APPLIED_OFFSET = PREFIX + "applied_offset"
END_OFFSET = PREFIX + "end_offset"
LAG_RECORDS = PREFIX + "lag_records"
LAG_SECONDS = PREFIX + "lag_seconds"
UPDATED = PREFIX + "status_updated_timestamp_seconds"
RECORDS_APPLIED = PREFIX + "records_applied"  # a counter: exposed as ..._total
RESEEDS = PREFIX + "reseeds"  # a counter: exposed as ..._total
PROMOTABLE = PREFIX + "promotable"
FAILOVERS = PREFIX + "failovers"  # a counter: exposed as ..._total
LAST_FAILOVER = PREFIX + "last_failover_timestamp_seconds"
VIOLATIONS = PREFIX + "placement_violations"
VIOLATION = PREFIX + "placement_violation"
TASKS = PREFIX + "tasks"
CHECKED = PREFIX + "check_timestamp_seconds"
UNMAPPED = PREFIX + "unmapped_containers"

RESULT_PROMOTED = "promoted"
RESULT_REFUSED = "refused"
RESULT_FAILED = "failed"

DEFAULT_ADDR = "0.0.0.0"  # all IPv4 interfaces, as node_exporter's :9100: Prometheus scrapes from another host


@dataclass
class ReplicaSample:
    """One replica's values at one moment; None: not known (no sample)."""

    labels: tuple[str, ...]  # REPLICA_LABELS' values
    up: bool
    applied_offset: int | None = None
    end_offset: int | None = None
    lag_records: int | None = None
    lag_s: float | None = None
    updated: float | None = None  # unix time of the follower's last report
    records_applied: int | None = None  # follower only
    reseeds: int | None = None  # follower only
    promotable: bool | None = None  # status only


def replica_labels(job: str | None, job_id: str | None, task: str | None, store: str | None, changelog: str,
                   partition: int, replica_dir: str | Path) -> tuple[str, ...]:
    """REPLICA_LABELS' values; an unknown part is "" (a replica whose follower an older statectl ran)."""
    return (job or "", job_id or "", task or "", store or "", changelog, str(partition), str(replica_dir))


def replica_families(samples: Iterable[ReplicaSample]) -> list[Any]:
    """The metric families (prometheus_client) of ``samples``; families without a sample are left out."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = list(REPLICA_LABELS)
    fams = {
        FOLLOWER_UP: GaugeMetricFamily(FOLLOWER_UP, "1 while a follower follows the replica, else 0.", labels=labels),
        APPLIED_OFFSET: GaugeMetricFamily(APPLIED_OFFSET, "The newest changelog offset the replica holds.",
                                          labels=labels),
        END_OFFSET: GaugeMetricFamily(END_OFFSET, "The changelog partition's end offset (its next record's), as "
                                      "the follower last saw it.", labels=labels),
        LAG_RECORDS: GaugeMetricFamily(LAG_RECORDS, "Changelog records not yet applied to the replica.",
                                       labels=labels),
        LAG_SECONDS: GaugeMetricFamily(LAG_SECONDS, "The newest changelog record's time minus the newest applied "
                                       "record's.", labels=labels),
        UPDATED: GaugeMetricFamily(UPDATED, "When the replica's follower last reported (unix time).", labels=labels),
        RECORDS_APPLIED: CounterMetricFamily(RECORDS_APPLIED, "Changelog records applied since the follower "
                                             "started.", labels=labels),
        RESEEDS: CounterMetricFamily(RESEEDS, "Times the follower re-seeded the replica since it started (its "
                                     "offset fell off the changelog, the changelog was recreated).", labels=labels),
        PROMOTABLE: GaugeMetricFamily(PROMOTABLE, "1 when the replica can be promoted (it has an offset file, no "
                                      "follower is seeding it).", labels=labels),
    }
    for s in samples:
        values: list[tuple[str, float | None]] = [
            (FOLLOWER_UP, 1 if s.up else 0), (APPLIED_OFFSET, s.applied_offset), (END_OFFSET, s.end_offset),
            (LAG_RECORDS, s.lag_records), (LAG_SECONDS, s.lag_s), (UPDATED, s.updated),
            (RECORDS_APPLIED, s.records_applied), (RESEEDS, s.reseeds),
            (PROMOTABLE, None if s.promotable is None else int(s.promotable))]
        for name, value in values:
            if value is not None:
                fams[name].add_metric(list(s.labels), float(value))
    return [f for f in fams.values() if f.samples]


# -- the follower's port ---------------------------------------------------------------------------------


class FollowerMetrics:
    """The metrics of one follower (a prometheus_client collector): ``update`` with each FollowStatus the
    follower reports (engine.standby.follow.follow's on_status; any object with its fields), ``stopped`` when it
    stops. Thread-safe: the follower updates, the HTTP server's threads collect."""

    def __init__(self, labels: tuple[str, ...]):
        self._lock = threading.Lock()
        self._sample = ReplicaSample(labels, up=True, records_applied=0, reseeds=0)

    def update(self, status: Any) -> None:
        """Take the values of ``status`` (a FollowStatus): offsets, lag, records applied, re-seeds."""
        with self._lock:
            s = self._sample
            s.applied_offset, s.end_offset = status.applied_offset, status.end_offset
            s.lag_records, s.lag_s = status.lag_records, status.lag_s
            s.updated = status.updated or None
            s.records_applied = status.records_applied
            s.reseeds = getattr(status, "reseeds", 0)

    def stopped(self) -> None:
        with self._lock:
            self._sample.up = False

    def sample(self) -> ReplicaSample:
        """A copy of the replica's values now."""
        with self._lock:
            return ReplicaSample(**vars(self._sample))

    def collect(self) -> Iterator[Any]:
        yield from replica_families([self.sample()])

    def feeding(self, then: Callable[[Any], None] | None = None) -> Callable[[Any], None]:
        """An on_status callback that updates these metrics, then calls ``then``."""

        def on_status(status: Any) -> None:
            self.update(status)
            if then is not None:
                then(status)

        return on_status


class ContainerMetrics(FollowerMetrics):
    """The metrics of a follower process of one replica or of a container's (follow --container): one
    FollowerMetrics per replica, keyed by its replica dir (FollowStatus.replica_dir routes each status to its
    own), collected as one set of families with a series per replica."""

    def __init__(self, replicas: dict[str, tuple[str, ...]]):
        self._each = {d: FollowerMetrics(labels) for d, labels in replicas.items()}

    def update(self, status: Any) -> None:
        # one replica: every status is its own (a pre-restoring follower's replica_dir moves with each snapshot)
        each = (next(iter(self._each.values())) if len(self._each) == 1
                else self._each.get(str(status.replica_dir)))
        if each is not None:
            each.update(status)

    def stopped(self) -> None:
        for each in self._each.values():
            each.stopped()

    def sample(self) -> ReplicaSample:  # pragma: no cover - a container has many: collect() takes them all
        raise TypeError("a container's metrics have one sample per replica")

    def collect(self) -> Iterator[Any]:
        yield from replica_families([each.sample() for each in self._each.values()])


class MetricsServer:
    """An HTTP server of /metrics (prometheus_client's, on a daemon thread); ``address`` is what it
    listens on (the port chosen when 0 was asked)."""

    def __init__(self, httpd: Any, thread: threading.Thread):
        self._httpd, self._thread = httpd, thread
        host, port = httpd.server_address[:2]
        self.address: tuple[str, int] = (host, port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port. Idempotent."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(10)
            self._httpd = None


def serve(collector: Any, port: int, addr: str = DEFAULT_ADDR) -> MetricsServer:
    """Serve ``collector``'s metrics on http://addr:port/metrics from a registry of its own (no process
    or platform collectors). Raises UsageError (exit 2, one line) when the port is out of range or cannot be
    listened on (in use, a privileged port, an address not of this host)."""
    from prometheus_client import CollectorRegistry, start_http_server

    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be 0 to 65535, not {port}")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        httpd, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as e:
        why = e.strerror or str(e)
        raise UsageError(f"cannot serve metrics on {addr}:{port}: {why}",
                         hint="pass another --metrics-port (or --metrics-addr)") from None
    return MetricsServer(httpd, thread)


# -- textfiles ---------------------------------------------------------------------------------------------


def check_textfile(path: Path) -> Path:
    """``path`` made absolute; UsageError (exit 2) unless its dir exists and is writable and ``path`` is not
    a dir. Reads only: call it before the command does anything."""
    path = Path(path).absolute()
    if path.is_dir():
        raise UsageError(f"--metrics-file {path} is a directory", hint="name a file, e.g. <dir>/statectl.prom")
    if not path.parent.is_dir():
        raise UsageError(f"--metrics-file {path}: no such directory {path.parent}",
                         hint="point it into node_exporter's --collector.textfile.directory")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise UsageError(f"--metrics-file {path}: directory {path.parent} is not writable")
    return path


def render(families: Iterable[Any]) -> bytes:
    """``families`` in the Prometheus text format."""
    from prometheus_client import CollectorRegistry, generate_latest

    fams = list(families)

    class _Fixed:
        def collect(self) -> Iterator[Any]:
            return iter(fams)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed())
    return generate_latest(registry)


def write_textfile(path: Path, families: Iterable[Any]) -> None:
    """Replace ``path`` with ``families`` atomically: written to ``.<name>.<pid>.tmp`` in its dir (mode 0644
    less the umask: node_exporter may run as another user), fsynced, renamed over ``path``, the dir fsynced.
    A reader sees the old file or the new one, whole. Raises OSError (the temporary file removed, ``path`` as
    it was) when it cannot be written."""
    data = render(families)
    path = Path(path)
    from statectl.fsutil import SYNC_ALL, write_atomic

    write_atomic(path, data, sync=SYNC_ALL, unique=True)


def _updated_s(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def status_families(rows: Iterable[Any]) -> list[Any]:
    """The families of ``standby status``'s rows (engine.standby.status.ReplicaStatus: any object with its fields)."""
    samples = [ReplicaSample(replica_labels(r.job, r.job_id, r.task, r.store, r.changelog, r.partition,
                                            r.replica_dir),
                             up=bool(r.following), applied_offset=r.applied_offset, end_offset=r.end_offset,
                             lag_records=r.lag_records, lag_s=r.lag_s, updated=_updated_s(r.updated),
                             promotable=bool(r.promotable)) for r in rows]
    return replica_families(samples)


def check_families(job: str, job_id: str, result: Any, *, now: float | None = None) -> list[Any]:
    """The families of ``standby check``'s result (engine.standby.placement.PlacementResult: tasks, standbys,
    violations with task, standby and host, unmapped standby containers)."""
    from prometheus_client.core import GaugeMetricFamily

    labels = [job, job_id]
    count = GaugeMetricFamily(VIOLATIONS, "Tasks placed on the same host as one of their standbys (a host "
                              "lost takes both copies).", labels=list(JOB_LABELS))
    count.add_metric(labels, float(len(result.violations)))
    each = GaugeMetricFamily(VIOLATION, "1 for each task placed on the same host as its standby.",
                             labels=[*JOB_LABELS, "task", "standby", "host"])
    for v in result.violations:
        each.add_metric([*labels, v.task, v.standby, v.host], 1.0)
    tasks = GaugeMetricFamily(TASKS, "The job's tasks on its coordinator stream, by role.",
                              labels=[*JOB_LABELS, "role"])
    tasks.add_metric([*labels, "active"], float(result.tasks))
    tasks.add_metric([*labels, "standby"], float(result.standbys))
    unmapped = GaugeMetricFamily(UNMAPPED, "Standby containers with no host mapping (none, or Samza's empty "
                                 "ANY_HOST), as after a failover until the job places them again.",
                                 labels=list(JOB_LABELS))
    unmapped.add_metric(labels, float(len(result.unmapped)))
    checked = GaugeMetricFamily(CHECKED, "When the placement was last checked (unix time).", labels=list(JOB_LABELS))
    checked.add_metric(labels, time.time() if now is None else now)
    return [f for f in (count, each, tasks, unmapped, checked) if f.samples]


@dataclass
class Failovers:
    """The failover counters a promote metrics file holds: label values (FAILOVER_LABELS) -> count, and ->
    the unix time of the last one."""

    counts: dict[tuple[str, ...], float]
    last: dict[tuple[str, ...], float]


def read_failovers(path: Path) -> tuple[Failovers, str | None]:
    """The failover counters in ``path`` (none when it does not exist), and a note when it could not be read
    or parsed (its counters then start again from 0: Prometheus's rate() and increase() take that for a
    counter reset). Samples with other labels, negative or non-finite values are left out."""
    from prometheus_client.parser import text_string_to_metric_families

    out = Failovers({}, {})
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out, None
    except (OSError, UnicodeDecodeError) as e:
        return out, f"--metrics-file {path}: cannot read its failover counters ({e}): they start again from 0"
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as e:
        return out, f"--metrics-file {path} is not Prometheus text ({e}): its failover counters start again from 0"
    for fam in families:
        for s in fam.samples:
            if set(s.labels) != set(FAILOVER_LABELS) or not math.isfinite(s.value) or s.value < 0:
                continue
            key = tuple(s.labels[n] for n in FAILOVER_LABELS)
            if s.name == FAILOVERS + "_total":
                out.counts[key] = s.value
            elif s.name == LAST_FAILOVER:
                out.last[key] = s.value
    return out, None


def failover_families(failovers: Failovers) -> list[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    counts = CounterMetricFamily(FAILOVERS, "Promotes of a standby replica run on this host, by result: promoted; "
                                 "refused (the job's next start would delete what it made, exit 14); failed (any "
                                 "other error: the failover could not use the standby).", labels=list(FAILOVER_LABELS))
    for key, value in sorted(failovers.counts.items()):
        counts.add_metric(list(key), value)
    last = GaugeMetricFamily(LAST_FAILOVER, "When the last promote of that result ended (unix time).",
                             labels=list(FAILOVER_LABELS))
    for key, value in sorted(failovers.last.items()):
        last.add_metric(list(key), value)
    return [f for f in (counts, last) if f.samples]


def record_failover(path: Path, job: str, job_id: str, task: str, store: str, result: str, *,
                    now: float | None = None) -> str | None:
    """Add one failover of ``result`` (RESULT_PROMOTED, RESULT_REFUSED, RESULT_FAILED) for the store to the
    counters in ``path`` and rewrite it (write_textfile). The file is the counters' store: the previous
    values are read from it, every task's and store's kept, under an exclusive lock (``.<name>.lock``
    beside it) so that promotes running at once each count. Return a note when the previous counters could
    not be read (they start again from 0). Raises OSError when the file cannot be written (it stays as it
    was)."""
    if result not in (RESULT_PROMOTED, RESULT_REFUSED, RESULT_FAILED):
        raise ValueError(f"not a failover result: {result!r}")
    path = Path(path)
    lock = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failovers, note = read_failovers(path)
        key = (job, job_id, task, store, result)
        failovers.counts[key] = failovers.counts.get(key, 0.0) + 1
        failovers.last[key] = time.time() if now is None else now
        write_textfile(path, failover_families(failovers))
    finally:
        os.close(lock)  # drops the flock
    return note


def result_of(error: BaseException | None) -> str:
    """The failover result of a promote that raised ``error`` (None: it promoted)."""
    if error is None:
        return RESULT_PROMOTED
    return RESULT_REFUSED if isinstance(error, DiscardedError) else RESULT_FAILED

