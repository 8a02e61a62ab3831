"""A replica of one task's store and the files beside it: its dir, its lock, its status file, its offsets.

A replica is the store ``Replica.ref`` kept current from changelog partition ``Replica.ssp`` in
``replica_dir``. Beside it (or, for ``--layout active-path``, in the standby root) are statectl's files:

- ``<replica>.standby.lock``: an flock its follower holds for its life (ReplicaLock; the kernel drops it when
  the holder dies), or the promote that fenced the follower (the file names the holder and its role);
- ``<replica>.standby.promote.lock``: one promote or failover of the replica at a time (PromoteLock);
- ``<replica>.standby.json``: what the follower reports (FollowStatus: pid, changelog, applied offset, lag, the
  settings it runs with, the changelog's topic id). Written before anything is seeded and naming the replica
  dir, it is also what proves the dir statectl's (made_by_follower).

The applied offset is written the way Samza's standby stores write it: ``OFFSET-v2`` and
``SIDE-INPUT-OFFSETS``, a JSON map ``<system>.<changelog>.<partition>`` -> the newest offset applied, after a
flush (record_offset: the offset never claims more than is durable).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.catalog.refs import StoreRef
from statectl.engine.standby.follower import FollowerSettings
from statectl.errors import DiskFullError, LockHeldError, StatectlError, UsageError, command, is_disk_full
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, OffsetFileError, SIDE_INPUT_OFFSETS, read_offsets, write_offsets
from statectl.kafka.client import KafkaSecurity
from statectl.local.layout import old_standby_root, standby_replica_dir, store_dir
from statectl.local.staged import out_of_space
from statectl.rocks.live import LiveStore


LOCK_SUFFIX = ".standby.lock"


STATUS_SUFFIX = ".standby.json"


PROMOTE_LOCK_SUFFIX = ".standby.promote.lock"


LOG_SUFFIX = ".standby.log"  # the stderr of a follower a failed promote started again


FOLLOWER, PROMOTER = "follow", "promote"  # who holds a replica's lock, as its lock file says


MAX_OPEN_FILES = 32  # a replica is written, hardly read: opening it must not take longer as it grows


def standby_dir(state_dir: Path, store: str, task: str, replica: int = 0, root: Path | None = None) -> Path:
    """The default replica dir: ``<standby root>/<n>/<store>/<task, spaces -> _>`` (local.layout.standby_replica_dir;
    ``root``: the standby root, default beside the state dir). UsageError for a negative replica number or a name
    store_dir refuses."""
    return standby_replica_dir(state_dir, store, task, replica, root)


def legacy_standby_dir(state_dir: Path, store: str, task: str, replica: int = 0) -> Path:
    """Where the oldest statectl versions kept a replica by default: ``<state>/<store>/Standby-<task dir>-<n>``,
    a name Samza's restore of the task deletes (module doc). Only ever moved away from."""
    if replica < 0:
        raise UsageError(f"--replica must be 0 or more, not {replica}")
    return store_dir(state_dir, store, f"Standby-{task}-{replica}")


def old_root_standby_dir(state_dir: Path, store: str, task: str, replica: int = 0) -> Path:
    """Where older statectl versions kept a replica by default: ``<state>/.statectl-standby/<n>/<store>/<task dir>``,
    in the state dir Samza clears (module doc). Only ever moved away from."""
    return standby_replica_dir(state_dir, store, task, replica, old_standby_root(state_dir))


def old_replica_dirs(state_dir: Path, store: str, task: str, replica: int = 0) -> list[Path]:
    """The places older statectl versions kept replica ``replica`` of a task by default, the newer first."""
    return [old_root_standby_dir(state_dir, store, task, replica).absolute(),
            legacy_standby_dir(state_dir, store, task, replica).absolute()]


@dataclass(frozen=True)
class Replica:
    """One replica: the store it follows (``ref``), its changelog partition and its dir. ``system``: the
    changelog's Samza system (resolve_changelog), which the offset files' keys name: an active task starting
    on the replica keeps it only if its OFFSET-v2 names exactly its changelog SSP
    (StorageManagerUtil.isOffsetFileValid), and wipes it otherwise. The changelog is read on
    :meth:`changelog_kafka`; the job's coordinator stream and checkpoint topic on the brokers callers pass."""

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
        return (self.files_dir or self.replica_dir.parent) / (self.replica_dir.name + LOCK_SUFFIX)

    @property
    def status_path(self) -> Path:
        return (self.files_dir or self.replica_dir.parent) / (self.replica_dir.name + STATUS_SUFFIX)

    @property
    def promote_lock_path(self) -> Path:
        return (self.files_dir or self.replica_dir.parent) / (self.replica_dir.name + PROMOTE_LOCK_SUFFIX)

    @property
    def log_path(self) -> Path:
        return (self.files_dir or self.replica_dir.parent) / (self.replica_dir.name + LOG_SUFFIX)

    # Where the lock and status files live: beside the replica dir (None), or, for a replica in the
    # active's store dir (--layout active-path), in the standby root, out of reach of Samza's clean-ups.
    files_dir: Path | None = None
    # The brokers of the changelog's system and their security, when the job's config puts it on another
    # cluster than the job's coordinator and checkpoint topics (kafka.systems.system_brokers); None: there.
    changelog_bootstrap: str | None = field(default=None, compare=False)
    changelog_security: KafkaSecurity | None = field(default=None, compare=False, repr=False)

    def changelog_kafka(self, bootstrap: str, security: KafkaSecurity | None) -> tuple[str, KafkaSecurity | None]:
        """(brokers, security) the changelog is read on: its system's, else ``bootstrap`` with ``security``."""
        if self.changelog_bootstrap is None:
            return bootstrap, security
        return self.changelog_bootstrap, self.changelog_security


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
    follower: FollowerSettings | None = None  # what it runs with: a failed promote starts it again from these
    topic_id: str | None = None  # the changelog's topic id when the follower started (None: not reported)
    checkpoint_offset: int | None = None  # --to-checkpoint: the task's checkpointed changelog offset it stops at
    # Whose replica it is (None in a status file an older statectl wrote): the labels of its metrics.
    job: str | None = None
    job_id: str | None = None
    task: str | None = None
    store: str | None = None
    reseeds: int = 0  # re-seeds since the follower started (the changelog recreated, its offset fell off)
    container: str | None = None  # follow --container: the active container whose standby this follower is
    # follow --pre-restore (engine.standby.prerestore): layout "pre-restored", the checkpoint id whose snapshot
    # replica_dir holds complete (None: none yet), and the other dir it made (being built, or left to delete).
    layout: str | None = None
    checkpoint_id: str | None = None
    pending_dir: str | None = None


def _flock(path: Path, wait_s: float = 0.0) -> int | None:
    """An fd holding an exclusive flock on ``path`` (made if missing, its dir too), or None when another
    process holds it for ``wait_s``. The fd is of the file ``path`` names once locked: a holder that unlinked
    the file when done does not leave a lock on a file no one else sees."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
            continue
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _write_holder(fd: int, role: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {role}".encode(), 0)


def holder_of(path: Path) -> tuple[int | None, str | None, str]:
    """(pid, host, role) the holder of lock file ``path`` wrote ((None, None, FOLLOWER) when unknown; a lock
    file an older statectl wrote names no role: its follower's)."""
    try:
        words = path.read_text().split(" ")
        return int(words[0]), words[1], words[2] if len(words) > 2 else FOLLOWER
    except (OSError, ValueError, IndexError):
        return None, None, FOLLOWER


def _who(path: Path) -> str:
    pid, host, _ = holder_of(path)
    return f"pid {pid} on {host}" if pid else "another process"


class ReplicaLock:
    """The one-follower-per-replica lock (flock on ``<replica>.standby.lock``; the kernel drops it when
    its holder dies), held by its follower, or by the promote that fenced it (``role``), as the file says.
    Raises LockHeldError (exit 11) naming the holder when taken."""

    def __init__(self, replica: Replica, *, wait_s: float = 0.0, role: str = FOLLOWER):
        self.replica = replica
        fd = _flock(replica.lock_path, wait_s)
        if fd is None:
            promoting = holder_of(replica.lock_path)[2] == PROMOTER
            raise LockHeldError(f"replica {replica.replica_dir} is {'being promoted' if promoting else 'followed'} by "
                                f"{_who(replica.lock_path)}",
                                hint="let that promote end" if promoting else
                                "stop that follower first, or promote the replica (which fences it)")
        self._fd: int | None = fd
        _write_holder(fd, role)

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
    return holder_of(replica.lock_path)[:2]


class PromoteLock:
    """One promote or failover of a replica at a time: an flock on ``<replica>.standby.promote.lock``, taken
    before the follower is fenced and held until the promote ends, then the file removed. Nothing is taken
    for a replica whose dir of lock files does not exist (there is no replica to promote). Raises
    LockHeldError (exit 11) naming the holder."""

    def __init__(self, replica: Replica):
        path = replica.promote_lock_path
        self._path, self._fd = path, None
        if not path.parent.is_dir():
            return
        fd = _flock(path)
        if fd is None:
            raise promoting_error(replica)
        self._fd = fd
        _write_holder(fd, PROMOTER)

    def release(self) -> None:
        if self._fd is not None:
            self._path.unlink(missing_ok=True)  # while held: a waiter then finds the file gone and retries
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PromoteLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def promoting_error(replica: Replica) -> LockHeldError:
    return LockHeldError(f"replica {replica.replica_dir} is being promoted by {_who(replica.promote_lock_path)}",
                         hint=("let that promote (or failover) end, then see ", command("standby status")))


def check_not_promoting(replica: Replica) -> None:
    """LockHeldError (exit 11) naming the holder when a promote or failover of ``replica`` runs. Reads only."""
    if is_locked(replica.promote_lock_path):
        raise promoting_error(replica)


def is_locked(path: Path) -> bool:
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


def status_from_json(obj: Any) -> FollowStatus:
    """A status file's FollowStatus: keys it does not know (an older statectl's command line) ignored, the
    follower's settings checked (engine.standby.follower: None when they are not what a follower records).
    TypeError for a file that is not one."""
    if not isinstance(obj, dict):
        raise TypeError("not a status")
    known = {f.name for f in fields(FollowStatus)}
    values = {k: v for k, v in obj.items() if k in known}
    values["follower"] = FollowerSettings.from_json(values.get("follower"))
    return FollowStatus(**values)


def read_status(replica: Replica) -> FollowStatus | None:
    try:
        return status_from_json(json.loads(replica.status_path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_status(replica: Replica, st: FollowStatus) -> None:
    from statectl.fsutil import SYNC_NONE, write_atomic

    st.updated = time.time()
    try:
        write_atomic(replica.status_path, json.dumps(asdict(st)), sync=SYNC_NONE)
    except OSError:
        pass  # a full disk: the status file stays as it was, whole
        raise


def made_by_follower(replica: Replica) -> bool:
    """Whether statectl's follower made the replica dir: its status file (``<replica>.standby.json``,
    written by the follower before it seeds anything) is there and names this very dir. A store's own
    OFFSET-v2 proves nothing (a job's active store names the same changelog), and promote removes the
    status file once the replica is the active store."""
    st = read_status(replica)
    return st is not None and os.path.realpath(st.replica_dir) == os.path.realpath(replica.replica_dir)


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


def record_offset(replica: Replica, db: LiveStore, offset: int | None) -> None:
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


def apply_records(db: LiveStore, records: list[Any]) -> None:
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
    db.db.write(wb, db.write_options)


def open_replica(replica: Replica) -> LiveStore:
    """The replica's store, opened read-write and written without a WAL (record_offset flushes before it
    records an offset: a kill loses only what no offset file names yet); LockHeldError (exit 11) with a
    hint of its own when a process holds it (the store's hint is backup's)."""
    try:
        return LiveStore(replica.replica_dir, max_open_files=MAX_OPEN_FILES, wal=False)
    except LockHeldError as e:
        raise LockHeldError(str(e), hint="stop the process that has the replica's store open, then follow or "
                                         "promote again") from None


def disk_full_error(replica: Replica, e: BaseException, what: str) -> DiskFullError | None:
    """The DiskFullError for a write that failed because the disk is full (an OSError ENOSPC/EDQUOT, or
    RocksDB's own error saying so), None for any other failure."""
    if isinstance(e, DiskFullError):
        return e
    if not is_disk_full(e) and not out_of_space(replica.replica_dir):
        return None
    untouched = "; the active dir is untouched" if what == "promoting" else ""
    return DiskFullError(f"no space left on device {what} {replica.replica_dir}: the replica keeps what it applied, "
                         f"its {OFFSET_V2} names no more than that{untouched}",
                         hint=f"free some space in {replica.replica_dir.parent}, then run it again")
