"""A Samza job's coordinator stream, its metadata store: the job's config (``set-config``, where
``app.run.id`` lives), its drain notifications (``samza-drain-v1``), its locality and task assignments
(``set-container-host-assignment``, ``set-task-container-assignment``, ``set-task-mode-assignment``) and its
changelog partition mapping (``set-changelog``), read and written. :meth:`CoordinatorStream.job_model` gives
them all at once, as one :class:`JobModel`.

The topic ``__samza_coordinator_<job>_<job-id>`` (one partition, compacted) is read through
:class:`~statectl.kafka.compacted.CompactedTopic`: the latest value per ``(namespace, key)``, read on
incrementally, tombstones kept. A record this reader cannot parse (a malformed key, or a malformed
value in a namespace it reads) is skipped and described in ``problems``, never raised: the stream is
shared with Samza and other tools, and one bad record must not stop a drain.
"""

from __future__ import annotations

import getpass
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from statectl.errors import NotFoundError
from statectl.formats.coordinator import (
    JOB_RUNNER_SOURCE,
    RUN_ID_CONFIG,
    SET_CHANGELOG,
    SET_CONFIG,
    SET_CONTAINER_HOST,
    SET_TASK_CONTAINER,
    SET_TASK_MODE,
    CoordinatorFormatError,
    coordinator_topic,
    decode_changelog_partition,
    decode_container_host,
    decode_key,
    decode_set_config,
    decode_task_container,
    decode_task_mode,
    encode_changelog_partition,
    encode_container_host,
    encode_key,
    encode_set_config,
    encode_task_container,
    encode_task_mode,
)
from statectl.formats.drain import (
    DRAIN_NAMESPACE,
    DrainFormatError,
    DrainNotification,
    decode_notification,
    encode_notification,
    java_uuid,
)
from statectl.formats.jobmodel import JobModel, Locality
from statectl.kafka.client import (
    DEFAULT_TIMEOUT_S,
    KafkaSecurity,
    create_topic,
    open_producer,
    produce,
)
from statectl.kafka.compacted import CompactedTopic, LatestRecord

T = TypeVar("T")
COORDINATOR_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class NotificationRecord:
    """A drain notification as the coordinator stream holds it. ``uuid``: the canonical form of its value's
    uuid (``UUID.fromString(..).toString()``: what Samza's DrainUtils.cleanup tombstones), or of its key
    when compaction removed the value; ``key``: the key it is stored under (None: its uuid), which Samza
    never compares with the value (DrainMonitor reads values only); ``notification``: its value (for a
    cleared one, the value it had before its tombstone; None when compaction removed that too);
    ``cleared``: its key is tombstoned (by the job after a clean shutdown, or by ``drain cancel``);
    ``canonical_cleared``: stored under another key, and the canonical key was tombstoned after it (the
    job's cleanup ran for it, but this record stays live); ``offset`` and ``timestamp_ms`` of its latest
    record (the tombstone for a cleared one)."""

    uuid: str
    notification: DrainNotification | None
    cleared: bool
    offset: int
    timestamp_ms: int
    key: str | None = None
    canonical_cleared: bool = False

    @property
    def run_id(self) -> str | None:
        return self.notification.run_id if self.notification else None

    @property
    def stored_key(self) -> str:
        return self.uuid if self.key is None else self.key

    @property
    def miskeyed(self) -> bool:
        """Stored under a key other than its canonical uuid: Samza's cleanup never tombstones it."""
        return self.stored_key != self.uuid


@dataclass(frozen=True)
class BadNotification:
    """A live record of namespace ``samza-drain-v1`` that Samza's DrainNotificationObjectMapper cannot
    read (``why``). While it is there, Samza's DrainMonitor throws on every read of the namespace: a
    container with job.drain-monitor.enabled fails at start, and a running one's poll dies (it never
    sees a drain). ``size``: its value's length in bytes."""

    key: str
    offset: int
    timestamp_ms: int
    size: int
    why: str


class CoordinatorStream:
    """The coordinator stream of job ``job``-``job_id`` on ``bootstrap``.

    ``refresh()`` reads on to the end (False: the topic does not exist); the accessors answer from what
    was read. Writes go to partition 0 and return once acknowledged by all in-sync replicas. Not
    thread-safe. Errors as kafka.client says (unreachable brokers: StatectlError, exit 1).
    """

    def __init__(self, bootstrap: str, job: str, job_id: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: KafkaSecurity | None = None):
        self.bootstrap, self.job, self.job_id = bootstrap, job, job_id
        self.topic = coordinator_topic(job, job_id)
        self.timeout_s = timeout_s
        self.security = security
        self._topic: CompactedTopic[tuple[str, str]] = CompactedTopic(
            bootstrap, self.topic, decode=_decode_key, timeout_s=timeout_s, security=security)
        self._producer: Any = None
        self._bad: dict[int, str] = {}  # offset -> what is wrong with the record there

    # -- reading -----------------------------------------------------------------------------------

    def refresh(self) -> bool:
        return self._topic.refresh()

    def require(self) -> None:
        """Read on to the end; raise NotFoundError (exit 10) naming the topic when it does not exist."""
        if not self.refresh():
            raise self.missing()

    def missing(self) -> NotFoundError:
        """The error for a stream that does not exist (require raises it)."""
        return NotFoundError(f"coordinator stream {self.topic} of job {self.job}-{self.job_id} does not exist on "
                             f"{self.bootstrap}", hint="check --job and --job-id; the job creates it when it first "
                                                       "starts (a standalone job's model is in ZooKeeper: pass "
                                                       "--zookeeper)")

    @property
    def problems(self) -> list[str]:
        """The records skipped as malformed (at most the last 100 kinds), with their offsets."""
        out = [f"{self._topic.skipped} record(s) with a malformed key"] if self._topic.skipped else []
        return out + [f"offset {o}: {why}" for o, why in sorted(self._bad.items())[-100:]]

    def _namespace(self, namespace: str) -> list[LatestRecord[tuple[str, str]]]:
        return [r for ident, r in self._topic.latest.items() if ident[0] == namespace]

    def namespace_values(self, namespace: str) -> dict[str, bytes | None]:
        """The raw latest value of each key of ``namespace`` (None: deleted), for namespaces of other tools."""
        return {r.key[1]: r.value for r in self._namespace(namespace)}

    def config(self) -> dict[str, str]:
        """The job's config as its set-config messages hold it (deleted keys left out)."""
        return self._decoded(SET_CONFIG, decode_set_config)

    def _decoded(self, namespace: str, decode: Callable[[bytes | None], T | None]) -> dict[str, T]:
        """key -> decoded value of ``namespace`` (deleted keys left out, malformed values skipped into
        ``problems``)."""
        out: dict[str, T] = {}
        for rec in self._namespace(namespace):
            try:
                value = decode(rec.value)
            except CoordinatorFormatError as e:
                self._bad[rec.offset] = f"{namespace} {_clip(rec.key[1])!r}: {_clip(str(e), 200)}"
                continue
            if value is not None:
                out[rec.key[1]] = value
        return out

    def locality(self) -> Locality:
        """The container hosts, task containers and task modes the stream holds, as Samza's
        LocalityManager and TaskAssignmentManager read them (the latest value per key; a tombstone deletes).
        A malformed value is skipped (see ``problems``)."""
        return Locality(container_hosts=self._decoded(SET_CONTAINER_HOST, decode_container_host),
                        task_containers=self._decoded(SET_TASK_CONTAINER, decode_task_container),
                        task_modes=self._decoded(SET_TASK_MODE, decode_task_mode))

    def changelog_partitions(self) -> dict[str, int]:
        """Task name -> changelog partition, from the set-changelog messages (ChangelogStreamManager): the
        latest value per task; a tombstone or a blank value deletes; a malformed one is skipped (see
        ``problems``)."""
        return self._decoded(SET_CHANGELOG, decode_changelog_partition)

    def job_model(self) -> JobModel:
        """Config, changelog partition mapping and locality as one :class:`JobModel`, from what was read
        (``refresh``/``require`` first)."""
        loc = self.locality()
        return JobModel(config=self.config(), changelog_partitions=self.changelog_partitions(),
                        container_hosts=loc.container_hosts, task_containers=loc.task_containers,
                        task_modes=loc.task_modes, where=f"the coordinator stream of job {self.job}-{self.job_id}")

    def read_job_model(self) -> JobModel | None:
        """The job model, read on to the end of the stream (None: the stream does not exist): the
        formats.jobmodel.JobModelSource of a job whose model is on its coordinator stream."""
        return self.job_model() if self.refresh() else None

    def run_id(self) -> str | None:
        """The job's current run id (``app.run.id``), or None when it has none."""
        return self.config().get(RUN_ID_CONFIG) or None

    def notifications(self) -> list[NotificationRecord]:
        """Every drain notification the stream holds that Samza can read (cleared ones included), oldest
        first, whatever key it is stored under: Samza reads the namespace's values only (DrainMonitor),
        so one stored under a key other than its uuid drains the job all the same. A live record Samza
        cannot read is left out (see :meth:`bad_notifications`); so is a tombstoned one whose value was
        unreadable (it is gone for Samza)."""
        out = []
        records = sorted(self._namespace(DRAIN_NAMESPACE), key=lambda r: r.offset)
        tombstoned_at = {r.key[1]: r.offset for r in records if r.value is None}
        for rec in records:
            value = rec.value if rec.value is not None else rec.last_value
            notification = None
            if value is not None:
                try:
                    notification = decode_notification(value)
                except DrainFormatError:
                    continue  # live: bad_notifications() names it; tombstoned: Samza no longer sees it
            key = rec.key[1]
            uuid = notification.uuid if notification is not None else (java_uuid(key) or key)
            canonical_cleared = (rec.value is not None and uuid != key
                                 and tombstoned_at.get(uuid, -1) > rec.offset)
            out.append(NotificationRecord(uuid, notification, rec.value is None, rec.offset, rec.timestamp_ms,
                                          key=None if key == uuid else key, canonical_cleared=canonical_cleared))
        return out

    def bad_notifications(self) -> list[BadNotification]:
        """The live records of the drain namespace that Samza's deserializer rejects (see
        :class:`BadNotification`), oldest first."""
        out = []
        for rec in sorted(self._namespace(DRAIN_NAMESPACE), key=lambda r: r.offset):
            if rec.value is None:
                continue
            try:
                decode_notification(rec.value)
            except DrainFormatError as e:
                out.append(BadNotification(rec.key[1], rec.offset, rec.timestamp_ms, len(rec.value), str(e)))
        return out

    # -- writing -----------------------------------------------------------------------------------

    def _producer_client(self) -> Any:
        if self._producer is None:
            self._producer = open_producer(self.bootstrap, timeout_s=self.timeout_s, security=self.security)
        return self._producer

    def put(self, namespace: str, key: str, value: bytes | None) -> int:
        """Write one message (None: a tombstone); return its offset."""
        return produce(self._producer_client(), self.topic, 0, encode_key(namespace, key), value, self.bootstrap,
                       timeout_s=max(30.0, self.timeout_s))

    def create(self) -> bool:
        """Create the topic (one partition, compacted) if it does not exist; True if this call created it."""
        return create_topic(self.bootstrap, self.topic, partitions=1, configs=COORDINATOR_TOPIC_CONFIGS,
                            security=self.security, timeout_s=self.timeout_s)

    def write_config(self, values: dict[str, str], *, source: str = JOB_RUNNER_SOURCE) -> None:
        """Write ``values`` as set-config messages, as Samza's JobRunner does (this host's address, this
        user, now); keys the stream holds that ``values`` lacks are deleted (tombstones)."""
        host, user, now = _host_address(), getpass.getuser(), int(time.time() * 1000)
        if self.refresh():
            for key in sorted(set(self.config()) - set(values)):
                self.put(SET_CONFIG, key, None)
        for key, value in values.items():
            self.put(SET_CONFIG, key, encode_set_config(value, host=host, source=source, username=user,
                                                        timestamp_ms=now))

    def write_container_host(self, container_id: str, host_name: str) -> int:
        """Record that container ``container_id`` runs on host ``host_name``, as the Samza container itself
        does at start (this host's address as the writer, this user, now); return the offset."""
        return self.put(SET_CONTAINER_HOST, container_id, encode_container_host(
            host_name, writer_host=_host_address(), username=getpass.getuser(), timestamp_ms=_now_ms()))

    def delete_container_host(self, container_id: str) -> int:
        """Delete container ``container_id``'s host mapping, as Samza's metadata store deletes a key
        (CoordinatorStreamStore.delete: a message with a null value); return the offset."""
        return self.put(SET_CONTAINER_HOST, container_id, None)

    def write_task_container(self, task: str, container_id: str) -> int:
        """Assign task ``task`` to container ``container_id`` as Samza's job coordinator does; return the
        offset."""
        return self.put(SET_TASK_CONTAINER, task, encode_task_container(
            container_id, writer_host=_host_address(), username=getpass.getuser(), timestamp_ms=_now_ms()))

    def write_task_mode(self, task: str, mode: str) -> int:
        """Record task ``task``'s mode ("Active" or "Standby"; anything else raises CoordinatorFormatError
        before writing); return the offset."""
        value = encode_task_mode(mode, writer_host=_host_address(), username=getpass.getuser(),
                                 timestamp_ms=_now_ms())
        return self.put(SET_TASK_MODE, task, value)

    def write_changelog_partition(self, task: str, partition: int | None) -> int:
        """Map task ``task`` to changelog partition ``partition`` (None: delete its mapping), as Samza's job
        coordinator does (ChangelogStreamManager.writePartitionMapping); return the offset. ValueError for a
        partition that is not an int >= 0, before writing."""
        value = None if partition is None else encode_changelog_partition(
            partition, writer_host=_host_address(), username=getpass.getuser(), timestamp_ms=_now_ms())
        return self.put(SET_CHANGELOG, task, value)

    def write_notification(self, notification: DrainNotification) -> int:
        """Write a drain notification under its uuid; return its offset."""
        return self.put(DRAIN_NAMESPACE, notification.uuid, encode_notification(notification))

    def clear_notification(self, key: str) -> int:
        """Tombstone the drain notification stored under ``key`` (its uuid, or the other key it was written
        under); return the tombstone's offset."""
        return self.put(DRAIN_NAMESPACE, key, None)

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(timeout=5)
        self._topic.close()

    def __enter__(self) -> CoordinatorStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decode_key(data: bytes | None) -> tuple[str, str]:
    try:
        return decode_key(data)
    except CoordinatorFormatError as e:
        raise ValueError(str(e)) from None


def _clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: a note stays one short line."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _now_ms() -> int:
    """System.currentTimeMillis()."""
    return int(time.time() * 1000)


def _host_address() -> str:
    """This host's address, as Samza's Util.getLocalHost().getHostAddress() gives it ('' when unknown)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return ""
