"""standby: a hot replica of one task's store kept current from its changelog, promoted in seconds
(seed 001).

follow: the replica (default: the standby task's store dir, ``<state>/<store>/Standby-<task>-<n>``) is
seeded from the latest blob-store snapshot of the store when the job's latest v2 checkpoint names one
together with its changelog position (a job that dual-commits); then the changelog partition is tailed
from there, records applied in batches (a null value deletes). After each flush the applied offset is
written the way Samza's standby stores write it: ``OFFSET-v2`` and ``SIDE-INPUT-OFFSETS``, a JSON map
``<system>.<changelog>.<partition>`` -> the newest offset applied, written to a temporary file, fsynced
and renamed. A follower killed at any moment restarts from that offset + 1: records applied after it
are applied again, in order, to the same effect. An offset that fell off the changelog (compacted,
truncated, the topic recreated) re-seeds the replica from the latest snapshot, in a staged dir.

One follower per replica: it holds ``<replica>.standby.lock`` (flock) for its life and describes itself
in ``<replica>.standby.json`` (pid, changelog, applied offset, lag, its command line and cwd, the
changelog's topic id), which ``status`` reads. That status file, written before anything is seeded and
naming the replica dir, is also what proves the dir statectl's: follow seeds, wipes and re-seeds only a
replica dir that does not exist, is empty, or has it; never the task's active store dir, another store,
a dir of plain files. The changelog deleted and recreated (kafka.tails.TopicWatch) re-seeds the replica
from the new one; brokers that stop answering are ridden out.

promote: fence the follower (SIGTERM, then wait until its lock is free), catch up to the changelog's
end (or to the active's last checkpointed changelog offset), flush, write the offset files, and swap the
replica into the active store dir with one atomic rename (local.staged); the old active dir is kept
aside until the swap is done. The active dir replaced must not exist, be empty, or be a RocksDB store
(local.staged.check_target, as restore), never another store's dir in the state dir nor a versioned
adstore; the status file goes only after the swap. Its time is the tail's catch-up plus a rename, whatever the state size.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef
from statectl.errors import ConfigError, DiskFullError, LockHeldError, NotFoundError, StatectlError, UsageError
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    CheckpointFormatError,
    decode_changelog_marker,
)
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, OffsetFileError, read_offsets, write_offsets
from statectl.kafka.client import (
    DEFAULT_TIMEOUT_S,
    KafkaSecurity,
    OffsetOutOfRange,
    PartitionReader,
    open_consumer,
    require_partition,
)
from statectl.formats.coordinator import active_of_standby, coordinator_topic
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import Tail, TopicRecreated, TopicWatch, check_in_range, read_tails
from statectl.local.layout import store_dir
from statectl.local.staged import discard_old, fsync_dirs, process_alive, swap_into_place
from statectl.progress import NullProgress, ProgressReporter
from statectl.rocks.live import LiveStore

LOCK_SUFFIX = ".standby.lock"
STATUS_SUFFIX = ".standby.json"
FLUSH_RECORDS = 50_000  # flush and record the offset at least this often...
FLUSH_SECONDS = 1.0     # ...and at least this often while records come
FENCE_TIMEOUT_S = 60.0
MAX_OPEN_FILES = 32  # a replica is written, hardly read: opening it must not take longer as it grows


def standby_dir(state_dir: Path, store: str, task: str, replica: int = 0) -> Path:
    """The standby task's store dir: ``<state>/<store>/Standby-<task, spaces -> _>-<n>``. UsageError for a
    negative replica number or a name store_dir refuses."""
    if replica < 0:
        raise UsageError(f"--replica must be 0 or more, not {replica}")
    return store_dir(state_dir, store, f"Standby-{task}-{replica}")


@dataclass(frozen=True)
class Replica:
    """One replica: the store it follows (``ref``), its changelog partition and its dir. ``system``: the
    changelog's Samza system (resolve_changelog), which the offset files' keys name: an active task starting
    on the replica keeps it only if its OFFSET-v2 names exactly its changelog SSP
    (StorageManagerUtil.isOffsetFileValid), and wipes it otherwise."""

    ref: StoreRef
    changelog: str
    partition: int
    replica_dir: Path
    system: str = "kafka"

    def __post_init__(self) -> None:
        if self.partition < 0:
            raise UsageError(f"--partition must be 0 or more, not {self.partition}")
        if not self.changelog:
            raise UsageError("no changelog topic given", hint="pass --changelog")

    @property
    def ssp(self) -> SSP:
        return SSP(self.system, self.changelog, self.partition)

    @property
    def lock_path(self) -> Path:
        return self.replica_dir.with_name(self.replica_dir.name + LOCK_SUFFIX)

    @property
    def status_path(self) -> Path:
        return self.replica_dir.with_name(self.replica_dir.name + STATUS_SUFFIX)


@dataclass
class FollowStatus:
    """What a follower reports (and writes to its status file): the offset it applied last, the
    changelog's end, the lag in records and in seconds (the newest record's time minus the newest
    applied record's), and what it did."""

    replica_dir: str
    changelog: str
    partition: int
    pid: int
    host: str
    applied_offset: int | None = None
    end_offset: int | None = None
    lag_records: int | None = None
    lag_s: float | None = None
    records_applied: int = 0
    seeded_from: str | None = None  # a snapshot id, "changelog" (bootstrapped) or None (resumed)
    updated: float = 0.0
    argv: list[str] = field(default_factory=list)
    cwd: str | None = None  # where argv ran: a failed promote restarts the follower there (relative paths)
    topic_id: str | None = None  # the changelog's topic id when the follower started (None: not reported)


@dataclass
class FollowResult:
    replica_dir: str
    applied_offset: int | None
    records_applied: int
    reseeds: int
    duration_s: float
    notes: list[str] = field(default_factory=list)


@dataclass
class PromoteResult:
    promoted_dir: str
    caught_up_offset: int | None
    records_applied: int
    duration_s: float
    replaced_active: bool = False
    locality_updated: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class ReplicaStatus:
    replica_dir: str
    changelog: str
    partition: int
    applied_offset: int | None
    lag_records: int | None
    lag_s: float | None
    follower_pid: int | None
    following: bool
    promotable: bool
    updated: str | None


# -- the lock --------------------------------------------------------------------------------------


class ReplicaLock:
    """The one-follower-per-replica lock (flock on ``<replica>.standby.lock``; the kernel drops it when
    its holder dies). Raises LockHeldError (exit 11) naming the holder when taken."""

    def __init__(self, replica: Replica, *, wait_s: float = 0.0):
        self.replica = replica
        replica.replica_dir.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(replica.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self._fd)
                    pid, host = lock_holder(replica)
                    who = f"pid {pid} on {host}" if pid else "another process"
                    raise LockHeldError(f"replica {replica.replica_dir} is followed by {who}",
                                        hint="stop that follower first, or promote the replica (which fences it)")
                time.sleep(0.05)
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()} {socket.gethostname()}".encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ReplicaLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(replica: Replica) -> tuple[int | None, str | None]:
    """(pid, host) its holder wrote into the replica's lock file ((None, None) when unknown)."""
    try:
        pid, host = replica.lock_path.read_text().split(" ", 1)
        return int(pid), host
    except (OSError, ValueError):
        return None, None


def read_status(replica: Replica) -> FollowStatus | None:
    try:
        obj = json.loads(replica.status_path.read_text())
        return FollowStatus(**obj)
    except (OSError, ValueError, TypeError):
        return None


def _write_status(replica: Replica, st: FollowStatus) -> None:
    st.updated = time.time()
    tmp = replica.status_path.with_name(replica.status_path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(asdict(st)))
        os.replace(tmp, replica.status_path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: the status file stays as it was, whole
        raise


# -- whose dir it is ---------------------------------------------------------------------------------


def made_by_follower(replica: Replica) -> bool:
    """Whether statectl's follower made the replica dir: its status file (``<replica>.standby.json``,
    written by the follower before it seeds anything) is there and names this very dir. A store's own
    OFFSET-v2 proves nothing (a job's active store names the same changelog), and promote removes the
    status file once the replica is the active store."""
    st = read_status(replica)
    return st is not None and os.path.realpath(st.replica_dir) == os.path.realpath(replica.replica_dir)


def check_replica_dir(replica: Replica, state_dir: Path | None = None) -> None:
    """Raise UsageError (exit 2) unless follow may seed, wipe and re-seed ``replica.replica_dir``: it does
    not exist, is empty, or statectl's follower made it (:func:`made_by_follower`). Refused whatever its
    content: the task's active store dir (with ``state_dir``), a symlink, a dir inside a RocksDB store.
    Reads only."""
    from statectl.rocks.store import is_store

    path = replica.replica_dir
    hint = ("follow into the standby dir (leave --replica-dir out), or a new or empty dir; a dir statectl's "
            "follower did not make is never wiped")
    if state_dir is not None:
        active = store_dir(state_dir, replica.ref.store, replica.ref.task)
        if os.path.realpath(path) == os.path.realpath(active.absolute()):
            raise UsageError(f"refusing to follow into {path}: it is the active store dir of task {replica.ref.task!r}",
                             hint=hint)
    if path.is_symlink():
        raise UsageError(f"refusing to follow into {path}: it is a symlink (to {os.readlink(path)})",
                         hint="pass the dir it points to, if statectl's follower made it")
    for parent in Path(os.path.realpath(path)).parents:
        if is_store(parent):
            raise UsageError(f"refusing to follow into {path}: it is inside the RocksDB store {parent}", hint=hint)
    if not os.path.lexists(path) or made_by_follower(replica):
        return
    if not path.is_dir():
        raise UsageError(f"refusing to follow into {path}: it exists and is not a directory", hint=hint)
    if not any(path.iterdir()):
        return
    what = "a RocksDB store" if is_store(path) else "not empty"
    raise UsageError(f"refusing to follow into {path}: it is {what}, and statectl's follower did not make it "
                     f"(no {path.name}{STATUS_SUFFIX} beside it naming it)", hint=hint)


def _disk_full(replica: Replica, e: BaseException, what: str) -> DiskFullError | None:
    """The DiskFullError for a write that failed because the disk is full (an OSError ENOSPC/EDQUOT, or
    RocksDB's own error saying so), None for any other failure."""
    if isinstance(e, DiskFullError):
        return e
    if isinstance(e, OSError):
        full = e.errno in (errno.ENOSPC, errno.EDQUOT)
    else:
        full = "no space left on device" in str(e).lower()
    if not full:
        return None
    untouched = "; the active dir is untouched" if what == "promoting" else ""
    return DiskFullError(f"no space left on device {what} {replica.replica_dir}: the replica keeps what it applied, "
                         f"its {OFFSET_V2} names no more than that{untouched}",
                         hint=f"free some space in {replica.replica_dir.parent}, then run it again")


# -- offsets ---------------------------------------------------------------------------------------


def applied_offset(replica: Replica) -> int | None:
    """The newest changelog offset the replica holds (its OFFSET-v2), None when it has none. Raises
    StatectlError when the file names another changelog partition or is malformed."""
    path = replica.replica_dir / OFFSET_V2
    try:
        offsets = read_offsets(path)
    except FileNotFoundError:
        return None
    except (OSError, OffsetFileError) as e:
        raise StatectlError(f"replica {replica.replica_dir}: unreadable {OFFSET_V2}: {e}",
                            hint="delete the replica dir: the next follow seeds it again") from None
    value = offsets.get(replica.ssp, "missing")
    if value == "missing" or len(offsets) != 1:
        raise StatectlError(f"replica {replica.replica_dir} follows {', '.join(s.key() for s in offsets)}, not "
                            f"{replica.ssp.key()}", hint="pass that changelog and partition, or another replica dir")
    return None if value is None else int(value)


def _record_offset(replica: Replica, db: LiveStore, offset: int | None) -> None:
    """Flush the memtables, then write the offset files (the offset never claims more than is durable)."""
    db.db.flush()
    value = None if offset is None else str(offset)
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        path = replica.replica_dir / name
        try:
            write_offsets(path, {replica.ssp: value})
        except OSError:
            path.with_name(path.name + ".tmp").unlink(missing_ok=True)  # the file stays as it was, whole
            raise


def _apply(db: LiveStore, records: list[Any]) -> None:
    import rocksdict

    failpoints.hit("standby-apply")
    wb = rocksdict.WriteBatch(raw_mode=True)
    for r in records:
        if r.key is None:
            continue  # a changelog record without a key changes nothing
        if r.value is None:
            wb.delete(r.key)
        else:
            wb.put(r.key, r.value)
    db.db.write(wb)


def _open_replica(replica: Replica) -> LiveStore:
    """The replica's store, opened read-write; LockHeldError (exit 11) with a hint of its own when a
    process holds it (the store's hint is backup's)."""
    try:
        return LiveStore(replica.replica_dir, max_open_files=MAX_OPEN_FILES)
    except LockHeldError as e:
        raise LockHeldError(str(e), hint="stop the process that has the replica's store open, then follow or "
                                         "promote again") from None


# -- seeding ---------------------------------------------------------------------------------------


Seeder = Callable[[str, Path], None]


def _seed(replica: Replica, bootstrap: str, security: KafkaSecurity | None,
          seed: Seeder | None) -> tuple[str, int | None]:
    """Make the replica dir from the latest snapshot that names its changelog position (``seed``
    restores a snapshot, by index blob id, into a dir, replacing it atomically), or an empty one; return
    (what it was seeded from, the newest changelog offset it covers)."""
    snap = _snapshot_position(replica, bootstrap, security) if seed is not None else None
    if snap is not None:
        index_id, offset = snap
        seed(index_id, replica.replica_dir)
        return index_id, offset
    if replica.replica_dir.exists():
        import shutil

        shutil.rmtree(replica.replica_dir)
    return "changelog", None


def _snapshot_position(replica: Replica, bootstrap: str,
                       security: KafkaSecurity | None) -> tuple[str, int | None] | None:
    """(index blob id, changelog offset) of the task's latest v2 checkpoint when it names both a snapshot
    of the store and the store's changelog position for this partition; None otherwise."""
    log = KafkaCheckpointLog(bootstrap, replica.ref.job, replica.ref.job_id, security=security)
    try:
        try:
            checkpoints, _ = log.latest_checkpoints()
        except NotFoundError:
            return None
    finally:
        log.close()
    cp = checkpoints.get(replica.ref.task)
    if cp is None:
        return None
    index_id = cp.state_checkpoint_markers.get(BLOB_STORE_FACTORY, {}).get(replica.ref.store)
    text = cp.state_checkpoint_markers.get(KAFKA_CHANGELOG_FACTORY, {}).get(replica.ref.store)
    if not index_id or text is None:
        return None
    try:
        marker = decode_changelog_marker(text)
    except CheckpointFormatError:
        return None
    if (marker.ssp.system, marker.ssp.stream, marker.ssp.partition) != (replica.system, replica.changelog,
                                                                       replica.partition):
        return None
    return index_id, None if marker.offset is None else int(marker.offset)


# -- follow ----------------------------------------------------------------------------------------


def follow(replica: Replica, bootstrap: str, *, security: KafkaSecurity | None = None,
           seed: Seeder | None = None, stop: threading.Event | None = None, on_status: Callable[[FollowStatus], None] | None = None,
           progress: ProgressReporter | None = None, status_every_s: float = 1.0,
           argv: list[str] | None = None, cwd: str | None = None, state_dir: Path | None = None,
           timeout_s: float = DEFAULT_TIMEOUT_S) -> FollowResult:
    """Keep ``replica`` current until ``stop`` is set (see the module doc); return what was done.
    ``seed`` restores a snapshot into the replica dir (None: always bootstrap from the changelog). ``argv``
    and ``cwd`` (default: this process's) are recorded in the status file: a promote that fails starts the
    follower again with them. ``state_dir``: the job's state dir, whose active store dir of the task is
    never a replica.

    The changelog deleted and recreated under a running follower (a new topic id, another partition count,
    or its end now before the replica's offset) re-seeds the replica from the new changelog; so does a
    topic id that changed since the follower that wrote the status file. Brokers that stop answering are
    ridden out: the follower keeps polling, its status says the lag is unknown, and it goes on when they
    answer again.

    Raises UsageError (exit 2, before anything is written) for a replica dir it may not seed or wipe
    (check_replica_dir); LockHeldError (exit 11) when another follower holds the replica or a process holds
    its store; NotFoundError (exit 10) when the changelog topic or partition does not exist; DiskFullError
    (exit 1) when the disk fills (the replica keeps what it applied, its offset files no more); StatectlError
    (exit 1) when the brokers cannot be reached at the start or the replica's offset file is foreign or
    malformed."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    result = FollowResult(str(replica.replica_dir), None, 0, 0, 0.0)
    check_replica_dir(replica, state_dir)
    consumer = open_consumer(bootstrap, timeout_s=timeout_s, security=security)
    tail_consumer = None
    try:
        require_partition(consumer, replica.changelog, replica.partition, bootstrap)
        tail_consumer = open_consumer(bootstrap, timeout_s=timeout_s, security=security)
        with ReplicaLock(replica):
            previous = read_status(replica)
            watch: TopicWatch | None = TopicWatch(tail_consumer, replica.changelog, bootstrap)
            status = FollowStatus(str(replica.replica_dir), replica.changelog, replica.partition, os.getpid(),
                                  socket.gethostname(), argv=list(argv or []), cwd=cwd or os.getcwd(),
                                  topic_id=watch.topic_id)
            changelog_only = False  # after the changelog was recreated, a snapshot's position means nothing
            if (previous is not None and previous.changelog == replica.changelog and previous.topic_id
                    and watch.topic_id and previous.topic_id != watch.topic_id
                    and (replica.replica_dir / OFFSET_V2).exists()):
                progress.note(f"replica {replica.replica_dir}: changelog {replica.changelog} was deleted and "
                              f"recreated since it was followed (topic id {previous.topic_id}, now "
                              f"{watch.topic_id}); re-seeding it")
                result.reseeds += 1
                changelog_only = True
                _reseed(replica)
            _write_status(replica, status)  # 'standby status' sees it from the start; it proves the dir ours
            while not stop.is_set():
                offset = applied_offset(replica) if replica.replica_dir.exists() else None
                seeded = offset is None and not (replica.replica_dir / OFFSET_V2).exists()
                if seeded:
                    # A snapshot whose own position is off the changelog (the topic recreated) cannot seed it:
                    # after such a re-seed, bootstrap from the changelog alone.
                    from_snapshot = seed if result.reseeds < 2 and not changelog_only else None
                    status.seeded_from, offset = _seed(replica, bootstrap, security, from_snapshot)
                    what = ("bootstrapping from the changelog" if status.seeded_from == "changelog"
                            else f"seeded from snapshot {status.seeded_from}")
                    progress.note(f"replica {replica.replica_dir}: {what}")
                if watch is None:  # after the changelog was recreated: the main consumer learns of it too
                    require_partition(consumer, replica.changelog, replica.partition, bootstrap)
                    watch = TopicWatch(tail_consumer, replica.changelog, bootstrap)
                    status.topic_id = watch.topic_id
                db = _open_replica(replica)
                try:
                    if seeded:  # the seed's position, over whatever offset files a snapshot may have carried
                        _record_offset(replica, db, offset)
                    reader = PartitionReader(consumer, replica.changelog, replica.partition, bootstrap)
                    status.applied_offset = offset
                    pending = 0
                    outage: str | None = None
                    try:
                        _check_in_range(consumer, replica, bootstrap, offset)
                        reader.seek(None if offset is None else offset + 1)
                        last_flush = last_status = time.monotonic()
                        newest_applied_ts = -1
                        for batch in reader.batches(follow=True):
                            if batch:
                                _apply(db, batch)
                                pending += len(batch)
                                result.records_applied += len(batch)
                                status.records_applied = result.records_applied
                                status.applied_offset = batch[-1].offset
                                newest_applied_ts = batch[-1].timestamp
                            now = time.monotonic()
                            if pending and (pending >= FLUSH_RECORDS or now - last_flush >= FLUSH_SECONDS
                                            or not batch or stop.is_set()):
                                _record_offset(replica, db, status.applied_offset)
                                pending, last_flush = 0, now
                            if now - last_status >= status_every_s or stop.is_set():
                                if not stop.is_set():  # stopping: no broker round trip (it may not answer)
                                    applied = status.applied_offset
                                    tails = watch.check({replica.partition: None if applied is None else applied + 1},
                                                        last=1)
                                    if tails is None:
                                        status.lag_records = status.lag_s = None  # unknown until they answer
                                        if watch.outage != outage:
                                            progress.note(f"replica {replica.replica_dir}: {watch.outage}; "
                                                          "following on")
                                    else:
                                        if outage is not None:
                                            progress.note(f"replica {replica.replica_dir}: the brokers answer again")
                                        _lag(status, tails[replica.partition], newest_applied_ts)
                                    outage = watch.outage
                                _write_status(replica, status)
                                if on_status is not None:
                                    on_status(status)
                                last_status = time.monotonic()
                            if stop.is_set():
                                break
                    except OffsetOutOfRange as e:
                        if pending:
                            _record_offset(replica, db, status.applied_offset)
                        db.close()
                        result.reseeds += 1
                        _reseed(replica)  # before the note: once it is said, the old offset is gone
                        if isinstance(e, TopicRecreated):
                            changelog_only, watch = True, None
                            progress.note(f"replica {replica.replica_dir}: {e}; re-seeding it from the new "
                                          "changelog")
                        else:
                            progress.note(f"replica {replica.replica_dir}: its offset fell off the changelog ({e}); "
                                          "re-seeding it from the latest snapshot")
                        continue
                    if pending:
                        _record_offset(replica, db, status.applied_offset)
                finally:
                    db.close()
                result.applied_offset = status.applied_offset
                _write_status(replica, status)
                break
    except Exception as e:
        full = _disk_full(replica, e, "following into")
        if full is None or full is e:
            raise
        raise full from e
    finally:
        consumer.close()
        if tail_consumer is not None:
            tail_consumer.close()
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(getattr(progress, "notes", []))
    return result


def _check_in_range(consumer: Any, replica: Replica, bootstrap: str, offset: int | None) -> None:
    """Raise OffsetOutOfRange when reading on after ``offset`` would skip records (kafka.tails)."""
    if offset is not None:  # from the log start: a compacted changelog holds the latest value of every key there
        check_in_range(consumer, replica.changelog, replica.partition, bootstrap, offset + 1)


def _reseed(replica: Replica) -> None:
    """Forget the replica's offset (the next round seeds it again into a staged dir: restore swaps)."""
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        (replica.replica_dir / name).unlink(missing_ok=True)


def _lag(status: FollowStatus, tail: Tail, newest_applied_ts: int) -> None:
    status.end_offset = tail.end
    applied = -1 if status.applied_offset is None else status.applied_offset
    status.lag_records = max(0, tail.end - (applied + 1))
    newest = tail.records[-1].timestamp if tail.records else -1
    if status.lag_records == 0:
        status.lag_s = 0.0
    elif newest >= 0 and newest_applied_ts >= 0:
        status.lag_s = round(max(0.0, (newest - newest_applied_ts) / 1000), 3)
    else:
        status.lag_s = None


# -- promote ---------------------------------------------------------------------------------------


def promote(replica: Replica, active_dir: Path, bootstrap: str, *, security: KafkaSecurity | None = None,
            timeout_s: float = 60.0, to_checkpoint: bool = False,
            on_locality: Callable[[], bool] | None = None, progress: ProgressReporter | None = None,
            kafka_timeout_s: float = DEFAULT_TIMEOUT_S, state_dir: Path | None = None) -> PromoteResult:
    """Fence the follower, catch the replica up, and swap it into ``active_dir`` (see the module doc).
    ``on_locality`` (after the swap) updates the job's locality and returns whether it did. ``state_dir``:
    the job's state dir, whose other stores are never replaced.

    The replica must be one statectl's follower made (made_by_follower), and the active dir it replaces
    must not exist, be empty, or be a RocksDB store (not another store's dir in
    ``state_dir``, nor a versioned adstore); else UsageError (exit 2), before anything is done. Raises
    NotFoundError (exit 10) when there is no replica; LockHeldError (exit 11) when a process holds the
    active store; StatectlError (exit 1) when it cannot catch up within ``timeout_s`` (the replica keeps
    what it applied, with its offset files, and a follower that was running is started again where it ran),
    or when the follower cannot be fenced; DiskFullError (exit 1) when the disk fills (the active dir is
    untouched)."""
    progress = progress or NullProgress()
    began = time.monotonic()
    if not (replica.replica_dir / OFFSET_V2).exists():
        raise NotFoundError(f"no replica at {replica.replica_dir} (no {OFFSET_V2})",
                            hint="start one with 'statectl standby follow'")
    if not made_by_follower(replica):  # a promote moves the replica dir away: only one a follower made
        raise UsageError(f"refusing to promote {replica.replica_dir}: statectl's follower did not make it (no "
                         f"{replica.replica_dir.name}{STATUS_SUFFIX} beside it naming it)",
                         hint="promote a replica 'statectl standby follow' keeps (leave --replica-dir out)")
    active_dir = check_active_dir(replica, active_dir, state_dir)
    before = read_status(replica)
    was_following = _fence(replica)
    result = PromoteResult(str(active_dir), None, 0, 0.0)
    consumer = open_consumer(bootstrap, timeout_s=kafka_timeout_s, security=security)
    try:
        with ReplicaLock(replica, wait_s=FENCE_TIMEOUT_S):
            position = _catch_up(replica, consumer, bootstrap, security, to_checkpoint, began + timeout_s, result)
            result.caught_up_offset = position
            fsync_dirs(replica.replica_dir)
            old = swap_into_place(replica.replica_dir, active_dir)
            # Only now: until the swap the status file is what proves the replica dir statectl's own.
            replica.status_path.unlink(missing_ok=True)
            result.replaced_active = old is not None
            note = discard_old(old)
            if note:
                result.notes.append(note)
        replica.lock_path.unlink(missing_ok=True)
    except _NotPromoted as e:
        _restart(before, was_following)  # once the lock is released: the follower takes it again
        raise StatectlError(str(e), hint=e.hint) from None
    except Exception as e:
        full = _disk_full(replica, e, "promoting")
        if full is None or full is e:
            raise
        raise full from e
    finally:
        consumer.close()
    if on_locality is not None:
        result.locality_updated = on_locality()
    result.duration_s = round(time.monotonic() - began, 3)
    return result


def check_active_dir(replica: Replica, active_dir: Path, state_dir: Path | None = None) -> Path:
    """The real dir promote swaps the replica into (symlinks followed, as restore does); raise UsageError
    (exit 2) unless it does not exist, is empty or is a RocksDB store (local.staged.check_target, with the
    task's own store dir in ``state_dir`` the only store there it may replace), and for a versioned adstore
    (``S -> S.versions/<n>``) or the replica itself; LockHeldError (exit 11) for a store a process holds.
    Reads only."""
    from statectl.local.staged import check_target, resolve_target

    hint = "promote into the task's store dir (leave --active-dir out), or into an empty or new --active-dir"
    own = store_dir(state_dir, replica.ref.store, replica.ref.task) if state_dir is not None else None
    try:
        target = resolve_target(Path(active_dir).absolute(), verb="promote")
        if target == Path(os.path.realpath(replica.replica_dir)):
            raise UsageError(f"refusing to promote {replica.replica_dir} into itself")
        check_target(target, False, own_store=own, state_dir=state_dir, verb="promote")
    except LockHeldError as e:  # check_target's hint is restore's
        raise LockHeldError(str(e), hint="stop the job (container) that holds it, then promote again") from None
    except UsageError as e:  # check_target's hints are restore's (its --target-dir, --force)
        raise UsageError(str(e), hint=hint) from None
    return target


class _NotPromoted(StatectlError):
    """The replica could not be caught up: nothing was swapped (promote restarts the follower)."""


def _catch_up(replica: Replica, consumer: Any, bootstrap: str, security: KafkaSecurity | None, to_checkpoint: bool,
              deadline: float, result: PromoteResult) -> int | None:
    """Apply the changelog to the replica up to the target offset, by ``deadline``; record the offset
    reached either way. Return it; raise _NotPromoted when out of range or out of time."""
    offset = applied_offset(replica)
    try:
        _check_in_range(consumer, replica, bootstrap, offset)
    except OffsetOutOfRange as e:
        raise _NotPromoted(f"cannot promote {replica.replica_dir}: {e}; the active dir is untouched",
                           hint="let 'statectl standby follow' re-seed the replica, then promote") from None
    target = _catch_up_target(replica, bootstrap, security, consumer, to_checkpoint)
    db = _open_replica(replica)
    position = offset
    try:
        reader = PartitionReader(consumer, replica.changelog, replica.partition, bootstrap)
        reader.seek(None if offset is None else offset + 1)
        if target is not None and (position is None or position < target):
            for batch in reader.batches(stop=target + 1):
                _apply(db, batch)
                result.records_applied += len(batch)
                position = batch[-1].offset
                if time.monotonic() > deadline:
                    raise _NotPromoted(
                        f"promote of {replica.replica_dir} timed out at changelog offset {position} of {target}: the "
                        "replica keeps what it applied; the active dir is untouched",
                        hint="promote again with a longer --timeout, or let the follower catch up")
    finally:
        _record_offset(replica, db, position)  # what it holds, whatever happened
        db.close()
    return position


def _catch_up_target(replica: Replica, bootstrap: str, security: KafkaSecurity | None, consumer: Any,
                     to_checkpoint: bool) -> int | None:
    """The newest offset to apply: the changelog's (true) end - 1, or with ``to_checkpoint`` the active's
    last checkpointed changelog offset."""
    if to_checkpoint:
        log = KafkaCheckpointLog(bootstrap, replica.ref.job, replica.ref.job_id, security=security)
        try:
            found = log.latest_changelog_offset(replica.ref.task, replica.ref.store, changelog_topic=replica.changelog)
        finally:
            log.close()
        if found is None:
            raise NotFoundError(f"task {replica.ref.task!r} has no checkpointed changelog offset for store "
                                f"{replica.ref.store!r}", hint="promote to the changelog's end (without --to-checkpoint)")
        return None if found[1] is None else int(found[1])
    tail = read_tails(consumer, replica.changelog, [replica.partition], bootstrap)[replica.partition]
    return tail.end - 1 if tail.end > tail.beginning else None


def _fence(replica: Replica) -> bool:
    """Stop the replica's follower on this host (SIGTERM) and wait until it has; True if one was running.
    A follower is running when the replica's lock is held; its status file names its pid."""
    if not _locked(replica.lock_path):
        return False
    pid, host = lock_holder(replica)
    if pid is None or host != socket.gethostname() or pid == os.getpid() or not process_alive(pid):
        raise LockHeldError(f"replica {replica.replica_dir} is held by a follower this host cannot stop "
                            f"(pid {pid} on {host})", hint="stop that follower, then promote again")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + FENCE_TIMEOUT_S
    while process_alive(pid):
        if time.monotonic() > deadline:
            raise StatectlError(f"the follower of {replica.replica_dir} (pid {pid}) did not stop within "
                                f"{FENCE_TIMEOUT_S:g}s", hint="stop it yourself, then promote again")
        time.sleep(0.05)
    return True


def _restart(status: FollowStatus | None, was_following: bool) -> None:
    """Start the follower a failed promote fenced again, with the command line it ran with, in the dir it
    ran in (its relative paths mean what they meant to it)."""
    if was_following and status is not None and status.argv:
        import subprocess

        if status.cwd is not None and not os.path.isdir(status.cwd):
            return  # started elsewhere, its relative paths would name other dirs
        subprocess.Popen(status.argv, cwd=status.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


# -- status ----------------------------------------------------------------------------------------


def replicas(state_dir: Path) -> list[ReplicaStatus]:
    """The replicas under ``state_dir`` (their status files), with their lag as last reported, whether
    their follower runs, and whether they are promotable (an offset file, no follower mid-seed)."""
    if not state_dir.is_dir():
        raise NotFoundError(f"state dir {state_dir} does not exist")
    out = []
    for path in sorted(state_dir.glob(f"*/*{STATUS_SUFFIX}")):
        try:
            st = FollowStatus(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        replica_dir = Path(st.replica_dir)
        following = st.host == socket.gethostname() and process_alive(st.pid) and _locked(
            replica_dir.with_name(replica_dir.name + LOCK_SUFFIX))
        out.append(ReplicaStatus(st.replica_dir, st.changelog, st.partition, st.applied_offset, st.lag_records,
                                 st.lag_s, st.pid if following else None, following,
                                 (replica_dir / OFFSET_V2).exists(),
                                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.updated)) if st.updated else None))
    return out


def _locked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False





# -- the job's side: its config and its placement ---------------------------------------------------


@dataclass(frozen=True)
class ChangelogPartition:
    """Where a task's store is logged: changelog ``topic`` on Samza system ``system``, partition
    ``partition``; ``notes``: the guesses made to get there (warnings for the operator)."""

    system: str
    topic: str
    partition: int
    notes: tuple[str, ...] = ()


# The system a changelog is taken to be on when nothing says otherwise: KafkaSystemFactory's usual name.
GUESSED_SYSTEM = "kafka"


def resolve_changelog(bootstrap: str, ref: StoreRef, *, changelog: str | None = None, partition: int | None = None,
                      security: KafkaSecurity | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> ChangelogPartition:
    """The changelog system, topic and partition of ``ref``'s store, as the job's coordinator stream says
    (read whole, once). Reads only.

    Topic and system: ``changelog`` if given, else ``stores.<store>.changelog`` of the job's config, either
    qualified as Samza's StorageConfig.getChangelogStream does (``<system>.<topic>`` split at the first dot;
    a bare topic is on ``job.changelog.system``, else ``job.default.system``). A bare ``changelog`` whose
    config names neither (or with no coordinator stream) is taken to be on system "kafka", with a note.
    Partition: ``partition`` if given (an override: the mapping is not consulted), else the task's
    ``set-changelog`` mapping (ChangelogStreamManager; JobModelCalculator gives partitions out in
    lexicographic task-name order, so ``Partition 10`` of 12 tasks is on partition 2). Only without a
    coordinator stream is it guessed from a task named ``Partition N``, with a note.

    Raises UsageError (exit 2, before any broker is asked) for a negative ``partition`` or an empty
    ``changelog``, and without a partition for a task that does not say one with no coordinator stream;
    ConfigError (exit 2) for a changelog on a system the job's config does not define (no
    ``systems.<system>.samza.factory``) or a bare one the config gives no system; NotFoundError (exit 10)
    when there is no coordinator stream and no ``changelog``, the config names no changelog for the store,
    the mapping has no partition for the task, or the changelog topic has fewer partitions than the mapping
    names; StatectlError (exit 1) when the task's partition is mapped to another task as well (naming both)."""
    from statectl.formats.jobconfig import (
        SystemStream,
        changelog_stream,
        changelog_system,
        qualify_stream,
        require_system,
        store_changelog_key,
    )

    if partition is not None and partition < 0:
        raise UsageError(f"--partition must be 0 or more, not {partition}")
    if changelog is not None and not changelog.strip():
        raise UsageError("--changelog is empty", hint="pass the changelog topic, as <system>.<topic> or <topic>")
    job = f"{ref.job}-{ref.job_id}"
    notes: list[str] = []
    with CoordinatorStream(bootstrap, ref.job, ref.job_id, timeout_s=timeout_s, security=security) as cs:
        model = cs.job_model() if cs.refresh() else None
        problems = list(cs.problems) if model is not None else []
    config = model.config if model is not None else {}

    if changelog is None:
        if model is None:
            raise NotFoundError(f"coordinator stream {coordinator_topic(ref.job, ref.job_id)} of job {job} does not "
                                f"exist on {bootstrap}: nothing says the changelog of store {ref.store!r}",
                                hint="check --job and --job-id, or pass --changelog and --partition")
        key = store_changelog_key(ref.store)
        try:
            ss = changelog_stream(config, ref.store)
        except ConfigError as e:
            raise ConfigError(f"the config of job {job}: {e}", hint=e.hint) from None
        if ss is None:
            raise NotFoundError(f"the config of job {job} names no changelog for store {ref.store!r} ({key})",
                                hint="pass --changelog")
        where = f"the config of job {job}: {key}={config[key]}"
    else:
        changelog = changelog.strip()
        where = f"--changelog {changelog}"
        if "." in changelog or changelog_system(config) is not None:
            ss = qualify_stream(changelog, config, where=where)
        else:
            ss = SystemStream(GUESSED_SYSTEM, changelog)
            notes.append(f"taking changelog {changelog!r} to be on system {GUESSED_SYSTEM!r} ("
                         + ("no coordinator stream" if model is None else f"the config of job {job} defines neither "
                            "job.changelog.system nor job.default.system")
                         + f"); pass --changelog <system>.{changelog} if the job names it otherwise")
    if not ss.stream:
        raise UsageError(f"{where} names no topic", hint="pass the changelog topic, as <system>.<topic> or <topic>")
    if config:  # a coordinator stream with no config at all (locality only) says nothing about systems
        require_system(config, ss.system, where=where)

    if partition is None:
        if model is None:
            partition = _partition_from_name(ref.task)
            if partition is None:
                raise UsageError(f"task {ref.task!r} does not say its changelog partition and job {job} has no "
                                 "coordinator stream to map it", hint="pass --partition")
            notes.append(f"job {job} has no coordinator stream: guessing changelog partition {partition} from the task "
                         f"name {ref.task!r}; Samza gives partitions out in task-name order (with 11 or more tasks "
                         "'Partition 10' is not on partition 10), so pass --partition unless the job has always "
                         "had fewer than 11 tasks")
        else:
            partition = _mapped_partition(model.changelog_partitions, model.task_modes, ref.task, job, problems)
            _check_partition_count(bootstrap, ss.stream, model.changelog_partitions, job,
                                   security=security, timeout_s=timeout_s)
    return ChangelogPartition(ss.system, ss.stream, partition, tuple(notes))


def _partition_from_name(task: str) -> int | None:
    """N of a GroupByPartition task named ``Partition N`` (Partition.toString of ``new Partition(N)``)."""
    name = task.split(" ")
    if len(name) == 2 and name[0] == "Partition" and name[1].isascii() and name[1].isdigit():
        return int(name[1])
    return None


def _active_name(task: str, modes: dict[str, str]) -> str:
    """The active task a task name stands for: a standby's active (it shares its changelog partition,
    TaskNameGrouperProxy.generateStandbyTasks), else the task itself. The task mode decides when there is
    one; else the name's shape."""
    parsed = active_of_standby(task) if modes.get(task) in (None, "Standby") else None
    return parsed[0] if parsed is not None else task


def _mapped_partition(mapping: dict[str, int], modes: dict[str, str], task: str, job: str,
                      problems: list[str]) -> int:
    """The task's partition in the job's set-changelog mapping; NotFoundError (exit 10) when it has none;
    StatectlError (exit 1) when another task (not one of its standbys) has it too."""
    from statectl.formats.coordinator import SET_CHANGELOG

    partition = mapping.get(task)
    if partition is None:
        bad = [p for p in problems if f"{SET_CHANGELOG} {task!r}" in p]
        raise NotFoundError(f"the coordinator stream of job {job} maps task {task!r} to no changelog partition (no "
                            f"{SET_CHANGELOG} message for it{': ' + bad[-1] if bad else ''})",
                            hint="pass --partition with the task's changelog partition")
    me = _active_name(task, modes)
    others = sorted({_active_name(t, modes) for t, p in mapping.items() if p == partition} - {me})
    if others:
        raise StatectlError(f"the coordinator stream of job {job} maps changelog partition {partition} to both task "
                            f"{me!r} and task {others[0]!r}" + (f" (and {len(others) - 1} more)" if len(others) > 1
                                                                else "") + ": whose data it holds is unknown",
                            hint="pass --partition if you know the task's changelog partition")
    return partition


def _check_partition_count(bootstrap: str, topic: str, mapping: dict[str, int], job: str, *,
                           security: KafkaSecurity | None, timeout_s: float) -> None:
    """NotFoundError (exit 10) when ``topic`` exists with fewer partitions than the mapping names (Samza's
    KafkaSystemAdmin.validateStream refuses such a changelog: the mapping is not this topic's). A missing
    topic is left to the caller (follow says so)."""
    from statectl.kafka.client import partition_count

    consumer = open_consumer(bootstrap, timeout_s=timeout_s, security=security)
    try:
        n = partition_count(consumer, topic, bootstrap)
    finally:
        consumer.close()
    task, highest = max(mapping.items(), key=lambda kv: (kv[1], kv[0]))
    if n is not None and n <= highest:
        raise NotFoundError(f"changelog topic {topic} has {n} partition{'s' if n != 1 else ''}, but the coordinator "
                            f"stream of job {job} maps task {task!r} to partition {highest}: the mapping is not "
                            "this topic's", hint="check --changelog and the job's stores.<store>.changelog, or pass "
                                                 "--partition")


def update_locality(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None) -> bool:
    """Point the container of ``ref.task`` at this host (set-container-host-assignment, as a Samza
    container writes it), so that the job places the active task where its promoted store now is.
    False when the job's coordinator stream or the task's container assignment is not there."""
    with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
        if not cs.refresh():
            return False
        container = cs.locality().task_containers.get(ref.task)
        if container is None:
            return False
        cs.write_container_host(container, socket.gethostname())
    return True


@dataclass
class Violation:
    task: str
    standby: str
    host: str
    container: str
    standby_container: str


@dataclass
class PlacementResult:
    tasks: int
    standbys: int
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_placement(bootstrap: str, job: str, job_id: str, *,
                    security: KafkaSecurity | None = None) -> PlacementResult:
    """The seed's first invariant: no task on the same host as one of its standbys, from the job's
    task -> container and container -> host assignments on its coordinator stream. Raises NotFoundError
    (exit 10) when the coordinator stream does not exist."""
    with CoordinatorStream(bootstrap, job, job_id, security=security) as cs:
        cs.require()
        loc = cs.locality()
        problems = list(cs.problems)
    result = PlacementResult(0, 0, notes=[f"skipped a malformed record: {p}" for p in problems])
    for name, container in sorted(loc.task_containers.items()):
        mode = loc.task_modes.get(name)  # Samza's record of the role; the name when there is none
        parsed = active_of_standby(name) if mode in (None, "Standby") else None
        if parsed is None:
            result.tasks += 1
            continue
        result.standbys += 1
        task = parsed[0]
        active_container = loc.task_containers.get(task)
        if active_container is None:
            result.notes.append(f"standby {name} has no active task {task!r} in the assignments")
            continue
        # An empty host is Samza's "any host": not a placement yet.
        host = loc.container_hosts.get(active_container) or None
        standby_host = loc.container_hosts.get(container) or None
        if host is None or standby_host is None:
            result.notes.append(f"{task if host is None else name}: no host known for its container yet")
        elif host == standby_host:
            result.violations.append(Violation(task, name, host, active_container, container))
    return result
