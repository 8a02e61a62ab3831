"""standby follow: keep one replica current from its changelog partition until stopped.

The replica is seeded from the latest blob-store snapshot of the store when the job's latest v2 checkpoint
names one together with its changelog position (a job that dual-commits); then the changelog partition is
tailed from there (on the brokers of the changelog's system: changelog.resolve_changelog), records applied in
batches (a null value deletes), and after each flush the applied offset is written to the replica's offset
files (replica.record_offset). A follower killed at any moment restarts from that offset + 1: records applied
after it are applied again, in order, to the same effect. An offset that fell off the changelog (compacted,
truncated, the topic recreated) re-seeds the replica from the latest snapshot, in a staged dir. The changelog
deleted and recreated (kafka.tails.TopicWatch) re-seeds it from the new one; brokers that stop answering are
ridden out. ``--to-checkpoint`` keeps the replica at or behind the task's latest checkpointed changelog offset
(CheckpointCap), for a promote under Samza's transactional restore.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.engine.standby.dirs import check_follow_dirs, relocate_legacy
from statectl.engine.standby.follower import FollowerSettings
from statectl.engine.standby.replica import (
    FollowStatus,
    Replica,
    ReplicaLock,
    applied_offset,
    apply_records,
    disk_full_error,
    open_replica,
    read_status,
    record_offset,
    write_status,
)
from statectl.errors import NotFoundError
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    CheckpointFormatError,
    KAFKA_CHANGELOG_FACTORY,
    decode_changelog_marker,
)
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS
from statectl.fsutil import make_dirs, owner_of
from statectl.kafka.client import (
    DEFAULT_TIMEOUT_S,
    KafkaSecurity,
    OffsetOutOfRange,
    PartitionReader,
    open_consumer,
    require_partition,
)
from statectl.kafka.readahead import ReadAhead
from statectl.kafka.tails import Tail, TopicRecreated, TopicWatch, check_in_range
from statectl.progress import NullProgress, ProgressReporter


FLUSH_RECORDS = 50_000  # flush and record the offset at least this often...


FLUSH_SECONDS = 1.0     # ...and at least this often while records come


FLUSH_AT_END_S = 0.05   # caught up with the end the broker reported: flush now, not after an empty poll


@dataclass
class FollowResult:
    replica_dir: str
    applied_offset: int | None
    records_applied: int
    reseeds: int
    duration_s: float
    notes: list[str] = field(default_factory=list)


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


def follow(replica: Replica, bootstrap: str, *, security: KafkaSecurity | None = None,
           seed: Seeder | None = None, stop: threading.Event | None = None, on_status: Callable[[FollowStatus], None] | None = None,
           progress: ProgressReporter | None = None, status_every_s: float = 1.0,
           settings: FollowerSettings | None = None, state_dir: Path | None = None,
           timeout_s: float = DEFAULT_TIMEOUT_S, legacy_dir: Path | None = None, legacy_files: Path | None = None,
           active_path: bool = False, to_checkpoint: bool = False, container: str | None = None,
           root: Path | None = None) -> FollowResult:
    """Keep ``replica`` current until ``stop`` is set (see the module doc: seeds, re-seeds, broker outages);
    return what was done. ``bootstrap``: the brokers of the job's coordinator stream and checkpoint topic; the
    changelog is read on ``replica.changelog_kafka``. ``seed`` restores a snapshot into the replica dir (None: always
    bootstrap from the changelog). ``settings`` (what the follower runs with) are recorded in the status file: a
    promote that fails starts the follower again from them (None: it says the command instead). ``state_dir``,
    ``root``, ``active_path``: as dirs.check_follow_dirs; the standby root is made with the state dir's owner.
    ``legacy_dir``: where an older statectl kept this replica (its lock and status files in ``legacy_files`` when
    not beside it); a replica there is moved into ``replica.replica_dir`` first (relocate_legacy), which a note
    says. ``to_checkpoint``: apply the changelog only up to the task's checkpointed changelog offset in the
    checkpoint the job's start reads (_CheckpointCap; notes say while nothing can be applied). ``container``: the
    active container this replica is followed for (follow --container), recorded in the status file.

    Raises dirs.check_follow_dirs' errors (UsageError exit 2, DiscardedError exit 14), before anything is
    written; LockHeldError (exit 11) when another follower holds the replica (or the old-layout one to be moved)
    or a process holds its store; NotFoundError (exit 10) when the changelog topic or partition does not exist;
    DiskFullError (exit 1) when the disk fills (the replica keeps what it applied, its offset files no more);
    StatectlError (exit 1) when the brokers cannot be reached at the start or the replica's offset file is
    foreign or malformed."""
    progress = progress or NullProgress()
    began = time.monotonic()
    result = FollowResult(str(replica.replica_dir), None, 0, 0, 0.0)
    check_follow_dirs(replica, bootstrap, security=security, state_dir=state_dir, root=root, active_path=active_path)
    try:
        with _changelog_consumers(replica, bootstrap, security, timeout_s) as (consumer, tail_consumer):
            if root is not None and state_dir is not None:
                make_dirs(root, owner_of(state_dir))
            with ReplicaLock(replica):
                if legacy_dir is not None:
                    moved = relocate_legacy(replica, legacy_dir, legacy_files)
                    if moved:
                        progress.note(moved)
                run = _Following(replica, bootstrap, security, seed, stop or threading.Event(), on_status, progress,
                                 status_every_s, consumer, tail_consumer, result)
                run.start(settings, container)
                run.cap = _CheckpointCap(replica, bootstrap, security) if to_checkpoint else None
                try:
                    run.loop()
                finally:
                    progress.status(f"replica {replica.replica_dir}")  # its line ends with the follower
                    if run.cap is not None:
                        run.cap.close()
    except Exception as e:
        full = disk_full_error(replica, e, "following into")
        if full is None or full is e:
            raise
        raise full from e
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(progress.notes)
    return result


@contextlib.contextmanager
def _changelog_consumers(replica: Replica, bootstrap: str, security: KafkaSecurity | None,
                         timeout_s: float) -> Iterator[tuple[Any, Any]]:
    """Two consumers on the brokers of the replica's changelog (the reader's, the tail watch's), the changelog
    partition checked to exist (NotFoundError) before the second is opened; both closed at the end."""
    cl_bootstrap, cl_security = replica.changelog_kafka(bootstrap, security)
    consumer = open_consumer(cl_bootstrap, timeout_s=timeout_s, security=cl_security, changes=True)
    tail_consumer = None
    try:
        require_partition(consumer, replica.changelog, replica.partition, cl_bootstrap)
        tail_consumer = open_consumer(cl_bootstrap, timeout_s=timeout_s, security=cl_security)
        yield consumer, tail_consumer
    finally:
        consumer.close()
        if tail_consumer is not None:
            tail_consumer.close()


class _Following:
    """One follow() under the replica's lock: seed when there is nothing, apply the changelog, flush and
    report, re-seed when the changelog moved away under it; until ``stop``."""

    def __init__(self, replica: Replica, bootstrap: str, security: KafkaSecurity | None, seed: Seeder | None,
                 stop: threading.Event, on_status: Callable[[FollowStatus], None] | None,
                 progress: ProgressReporter, status_every_s: float, consumer: Any, tail_consumer: Any,
                 result: FollowResult):
        self.replica, self.bootstrap, self.security, self.seed = replica, bootstrap, security, seed
        self.stop, self.on_status, self.progress, self.status_every_s = stop, on_status, progress, status_every_s
        self.consumer, self.tail_consumer, self.result = consumer, tail_consumer, result
        self.cl_bootstrap = replica.changelog_kafka(bootstrap, security)[0]  # the changelog's brokers
        self.cap: _CheckpointCap | None = None
        self.watch: TopicWatch | None = None
        self.changelog_only = False  # after the changelog was recreated, a snapshot's position means nothing

    def start(self, settings: FollowerSettings | None, container: str | None) -> None:
        """The status file, written from the start ('standby status' sees it; it proves the dir ours); a
        changelog recreated since the follower that wrote the previous one re-seeds the replica."""
        replica, result = self.replica, self.result
        previous = read_status(replica)
        self.watch = TopicWatch(self.tail_consumer, replica.changelog, self.cl_bootstrap)
        self.status = status = FollowStatus(
            str(replica.replica_dir), replica.changelog, replica.partition, os.getpid(), socket.gethostname(),
            follower=settings, topic_id=self.watch.topic_id, job=replica.ref.job,
            job_id=replica.ref.job_id, task=replica.ref.task, store=replica.ref.store, container=container)
        if (previous is not None and previous.changelog == replica.changelog and previous.topic_id
                and self.watch.topic_id and previous.topic_id != self.watch.topic_id
                and (replica.replica_dir / OFFSET_V2).exists()):
            self.progress.note(f"replica {replica.replica_dir}: changelog {replica.changelog} was deleted and "
                               f"recreated since it was followed (topic id {previous.topic_id}, now "
                               f"{self.watch.topic_id}); re-seeding it")
            result.reseeds += 1
            status.reseeds = result.reseeds
            self.changelog_only = True
            _reseed(replica)
        write_status(replica, status)

    def loop(self) -> None:
        """Follow until stopped; each pass seeds the replica if it is empty, then applies until stopped
        (the end) or until the replica must be re-seeded (another pass)."""
        replica, status = self.replica, self.status
        while not self.stop.is_set():
            offset = applied_offset(replica) if replica.replica_dir.exists() else None
            seeded = offset is None and not (replica.replica_dir / OFFSET_V2).exists()
            if seeded:
                # A snapshot whose own position is off the changelog (the topic recreated) cannot seed it:
                # after such a re-seed, bootstrap from the changelog alone.
                from_snapshot = self.seed if self.result.reseeds < 2 and not self.changelog_only else None
                status.seeded_from, offset = _seed(replica, self.bootstrap, self.security, from_snapshot)
                what = ("bootstrapping from the changelog" if status.seeded_from == "changelog"
                        else f"seeded from snapshot {status.seeded_from}")
                self.progress.note(f"replica {replica.replica_dir}: {what}")
            if self.watch is None:  # after the changelog was recreated: the main consumer learns of it too
                require_partition(self.consumer, replica.changelog, replica.partition, self.cl_bootstrap)
                self.watch = TopicWatch(self.tail_consumer, replica.changelog, self.cl_bootstrap)
                status.topic_id = self.watch.topic_id
            if self._apply(offset, seeded):
                self.result.applied_offset = status.applied_offset
                write_status(replica, status)
                return
        # Stopped before a pass began (a SIGTERM right after the lock was taken): the result still says
        # where the replica is.
        if replica.replica_dir.exists():
            self.result.applied_offset = applied_offset(replica)

    def _apply(self, offset: int | None, seeded: bool) -> bool:
        """Apply the changelog from after ``offset`` until stopped (True) or until it has moved away from the
        replica, which is then re-seeded (False)."""
        replica, status = self.replica, self.status
        db = open_replica(replica)
        try:
            if seeded:  # the seed's position, over whatever offset files a snapshot may have carried
                record_offset(replica, db, offset)
            status.applied_offset = offset
            self.pending = 0
            try:
                self._read(db, offset)
            except OffsetOutOfRange as e:
                if self.pending:
                    record_offset(replica, db, status.applied_offset)
                db.close()
                self.result.reseeds += 1
                status.reseeds = self.result.reseeds
                _reseed(replica)  # before the note: once it is said, the old offset is gone
                if isinstance(e, TopicRecreated):
                    self.changelog_only, self.watch = True, None
                    self.progress.note(f"replica {replica.replica_dir}: {e}; re-seeding it from the new changelog")
                else:
                    self.progress.note(f"replica {replica.replica_dir}: its offset fell off the changelog ({e}); "
                                       "re-seeding it from the latest snapshot")
                return False
            if self.pending:
                record_offset(replica, db, status.applied_offset)
        finally:
            db.close()
        return True

    def _read(self, db: Any, offset: int | None) -> None:
        """Apply batches as they come, flushing (with the offset files) and reporting as they go."""
        replica, status, consumer, bootstrap = self.replica, self.status, self.consumer, self.cl_bootstrap
        reader = PartitionReader(consumer, replica.changelog, replica.partition, bootstrap)
        check_replica_in_range(consumer, replica, bootstrap, offset)
        reader.seek(None if offset is None else offset + 1)
        self.outage: str | None = None
        last_flush = last_status = time.monotonic()
        newest_applied_ts = -1

        def batches() -> Iterator[list[Any]]:
            return reader.batches(follow=True) if self.cap is None else _capped_batches(
                reader, self.cap, self.stop, offset, lambda at: check_replica_in_range(consumer, replica, bootstrap,
                                                                                       at), status, self.progress)

        # The next batches are fetched and decoded while this thread applies and flushes (kafka.readahead).
        with ReadAhead(batches, name=f"read-{replica.changelog}-{replica.partition}") as ahead:
            for batch in ahead:
                if batch:
                    apply_records(db, batch)
                    self.pending += len(batch)
                    self.result.records_applied += len(batch)
                    status.records_applied = self.result.records_applied
                    status.applied_offset = batch[-1].offset
                    newest_applied_ts = batch[-1].timestamp
                now = time.monotonic()
                if self.pending and (self.pending >= FLUSH_RECORDS or now - last_flush >= FLUSH_SECONDS
                                     or not batch or self.stop.is_set()
                                     or (now - last_flush >= FLUSH_AT_END_S
                                         and reader.at_end(status.applied_offset + 1))):
                    record_offset(replica, db, status.applied_offset)
                    self.pending, last_flush = 0, now
                if now - last_status >= self.status_every_s or self.stop.is_set():
                    self._report(newest_applied_ts)
                    last_status = time.monotonic()
                if self.stop.is_set():
                    break

    def _report(self, newest_applied_ts: int) -> None:
        """The lag (unless stopping: no broker round trip, it may not answer) into the status file and to
        ``on_status``; an outage of the brokers and its end are noted once each."""
        replica, status, watch = self.replica, self.status, self.watch
        if not self.stop.is_set() and watch is not None:
            applied = status.applied_offset
            tails = watch.check({replica.partition: None if applied is None else applied + 1}, last=1)
            if tails is None:
                status.lag_records = status.lag_s = None  # unknown until they answer
                if watch.outage != self.outage:
                    self.progress.note(f"replica {replica.replica_dir}: {watch.outage}; following on")
            else:
                if self.outage is not None:
                    self.progress.note(f"replica {replica.replica_dir}: the brokers answer again")
                _lag(status, tails[replica.partition], newest_applied_ts)
            self.outage = watch.outage
        write_status(replica, status)
        self.progress.status(f"replica {replica.replica_dir}", offset=status.applied_offset,
                             lag=status.lag_records, lag_s=status.lag_s, applied=status.records_applied)
        if self.on_status is not None:
            self.on_status(status)


CAP_POLL_S = 0.5  # follow --to-checkpoint: how often the checkpoint topic is read while nothing can be applied


class _CheckpointCap:
    """follow --to-checkpoint: the task's checkpointed changelog offset for the replica's store in the checkpoint
    the job's start reads (KafkaCheckpointLog.read_changelog_offset), read on from the job's checkpoint topic as
    checkpoints come (KafkaCheckpointLog reads incrementally)."""

    def __init__(self, replica: Replica, bootstrap: str, security: KafkaSecurity | None):
        self.replica = replica
        self._log = KafkaCheckpointLog(bootstrap, replica.ref.job, replica.ref.job_id, security=security)
        self.problem: str | None = None  # why there is no cap (for a note), None when there is one

    def offset(self) -> int | None:
        """The newest offset the replica may apply (None: none yet). The brokers failing keeps the last."""
        ref = self.replica.ref
        found = self._log.read_changelog_offset(ref.task, ref.store, self.replica.ssp)
        if found is None or found[1] is None:
            self.problem = f"task {ref.task!r} has no checkpointed changelog offset for store {ref.store!r} yet"
            return None
        ssp, offset = found
        r = self.replica
        if (ssp.system, ssp.stream, ssp.partition) != (r.system, r.changelog, r.partition):
            self.problem = (f"task {ref.task!r}'s checkpoint names changelog {ssp.system}.{ssp.stream}"
                            f"[{ssp.partition}], not {r.system}.{r.changelog}[{r.partition}]")
            return None
        self.problem = None
        return int(offset)

    def close(self) -> None:
        self._log.close()


def _capped_batches(reader: PartitionReader, cap: _CheckpointCap, stop: threading.Event, position: int | None,
                    recheck: Callable[[int | None], None], status: FollowStatus,
                    progress: ProgressReporter) -> Any:
    """The changelog's batches up to ``cap``'s offset as it moves (follow --to-checkpoint), read from after
    ``position`` (the replica's offset); an empty batch whenever there is nothing to apply, so that the
    follow loop flushes, reports and checks ``stop``. Each read is re-positioned (``recheck`` raises
    OffsetOutOfRange when records after ``position`` are gone) since a read stopped at the cap has fetched
    past it."""
    said: str | None = None
    while not stop.is_set():
        limit = cap.offset()
        status.checkpoint_offset = limit
        if limit is None or (position is not None and position >= limit):
            why = cap.problem if limit is None else (
                None if position == limit else f"the replica is at offset {position}, past the task's latest "
                f"checkpointed changelog offset {limit}: it applies nothing until a checkpoint passes it")
            if why is not None and why != said:
                progress.note(f"replica {cap.replica.replica_dir}: {why}")
            said = why
            yield []
            stop.wait(CAP_POLL_S)
            continue
        said = None
        recheck(position)
        reader.seek(None if position is None else position + 1)
        for batch in reader.batches(stop=limit + 1, follow=True):
            yield batch
            if stop.is_set():
                return
        position = limit  # read through it: what is missing below it was compacted away


def check_replica_in_range(consumer: Any, replica: Replica, bootstrap: str, offset: int | None) -> None:
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
