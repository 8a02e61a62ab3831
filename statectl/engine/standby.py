"""standby: a hot replica of one task's store kept current from its changelog, promoted in seconds.

follow: the replica (default: ``<standby root>/<n>/<store>/<task dir>``, the standby root beside the job's state
dir: local.layout.standby_root) is seeded from the latest blob-store snapshot of the store when the job's latest
v2 checkpoint names one together with its changelog position (a job that dual-commits); then the changelog
partition is tailed from there (on the brokers of the changelog's system: resolve_changelog), records applied in
batches (a null value deletes). After each flush the applied offset is
written the way Samza's standby stores write it: ``OFFSET-v2`` and ``SIDE-INPUT-OFFSETS``, a JSON map
``<system>.<changelog>.<partition>`` -> the newest offset applied, written to a temporary file, fsynced
and renamed. A follower killed at any moment restarts from that offset + 1: records applied after it
are applied again, in order, to the same effect. An offset that fell off the changelog (compacted,
truncated, the topic recreated) re-seeds the replica from the latest snapshot, in a staged dir.

Where a replica lives. Never in the job's state dir by default: a Samza container that reads no checkpoint for
any of its active tasks deletes every entry of the state dir (ContainerStorageManager.clearLoggedStores: a new
job, a reset checkpoint topic, no checkpoint manager, every start of a standby-only container), and the restore of
a task takes every entry of its store's dir whose name contains ``<task dir>-`` for one of its checkpoint dirs
(StorageManagerUtil.getTaskStoreCheckpointDirs) and deletes it, or hard-links it into the active dir
(TransactionalStateTaskRestoreManager, BlobStoreRestoreManager). Older statectl versions kept a replica at
``<state>/<store>/Standby-<task dir>-<n>`` (legacy_standby_dir), then in ``<state>/.statectl-standby``
(old_root_standby_dir): a replica found in either (its status file naming it) is moved into the standby root by
the next ``follow`` with the default dir, when no follower holds it; ``status`` lists it with the command that
moves it until then; ``promote`` takes it from any of them. The standby root is on the state dir's filesystem
(local.layout.check_standby_root), so promote's final move into the state dir is one atomic rename.
``--layout active-path`` (follow) keeps the replica where Samza's own standby keeps it, the active's store dir
(getTaskStoreDir maps ``Standby-X-n`` to ``X``): a failover then needs no move at all, but the replica is in the
state dir, which a container of the job starting on this host without a checkpoint clears (a Samza standby
container clears it at each start), so check_active_path refuses it (DiscardedError) where the job's locality
places such a container here. Only where this host runs no active of the task (the store's RocksDB LOCK is free,
and the job's locality does not place the task's container here), and only over a dir that is new, empty,
statectl's, or a store whose OFFSET-v2 names the same changelog partition (Samza's standby's); the lock and
status files stay in the standby root.

One follower per replica: it holds ``<replica>.standby.lock`` (flock) for its life and describes itself in
``<replica>.standby.json`` (pid, changelog, applied offset, lag, the settings it runs with as typed fields
(engine.follower: never a command line), the changelog's topic id), which ``status`` reads; both beside the replica
(in the standby root for ``--layout active-path``). That status file, written before anything is seeded and naming
the replica dir, is also what proves the dir statectl's: follow seeds, wipes and re-seeds only a replica dir that
does not exist, is empty, or has it; never the task's active store dir, another store, a dir of plain files. The
changelog deleted and recreated (kafka.tails.TopicWatch) re-seeds the replica from the new one; brokers that stop
answering are ridden out.

promote: one at a time per replica (``<replica>.standby.promote.lock``, taken before anything else: a second
promote or failover of the replica exits 11 naming the first, and never signals it); refuse a replica whose
changelog was deleted and recreated since its follower recorded the topic id (its offset names a record of
the old topic: the follower re-seeds it); fence the follower (SIGTERM, then wait until its lock is free;
only a follower, never a promote holding the replica), catch up to the changelog's
end (or to the active's last checkpointed changelog offset), flush, write the offset files, and swap the
replica into the active store dir with one atomic rename (local.staged); the old active dir is kept
aside until the swap is done. The active dir replaced must not exist, be empty, or be a RocksDB store
(local.staged.check_target, as restore), never another store's dir in the state dir nor a versioned
adstore; the status file goes only after the swap. Its time is the tail's catch-up plus a rename, whatever the state size.
That is under Samza's non-transactional restore, which reuses the active dir. First promote reads how the job's
next start restores the store (next_start: its config on the coordinator stream, the checkpoint that start reads
for the task, KafkaCheckpointLog.read_checkpoints): under the default transactional restore the start deletes
the active dir and keeps only a checkpoint dir at the offset it restores to, so the replica is caught up exactly
to that offset and renamed to ``<active dir>-<checkpointId>``; what the start would delete anyway (the
blob-store backend, a replica past that offset) is refused with DiscardedError (exit 14), nothing changed. ``follow
--to-checkpoint`` keeps a replica at or behind the task's latest checkpointed changelog offset for that. Without
the job's config (``unchecked``) nothing says the start keeps the dir: refused (exit 14) unless the caller says
the job restores the store non-transactionally.
A promote that fails after fencing the follower starts it
again from its recorded settings (engine.follower) and says whether it came back.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.engine.follower import FollowerSettings
from statectl.engine.follower import restart as restart_process
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef
from statectl.errors import (
    ConfigError,
    DiscardedError,
    DiskFullError,
    LockHeldError,
    NotFoundError,
    StatectlError,
    UsageError,
    is_disk_full,
)
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    CheckpointFormatError,
    CheckpointV1,
    decode_changelog_marker,
    parse_checkpoint_id,
    split_changelog_offset,
)
from statectl.formats import jobconfig
from statectl.formats.offsets import (
    OFFSET,
    OFFSET_V2,
    SIDE_INPUT_OFFSETS,
    OffsetFileError,
    read_offsets,
    write_offset,
    write_offsets,
)
from statectl.fsutil import chown_tree, fsync_dirs, make_dirs, owner_of, process_alive
from statectl.kafka.client import (
    DEFAULT_TIMEOUT_S,
    KafkaSecurity,
    LazyConsumer,
    OffsetOutOfRange,
    PartitionReader,
    open_consumer,
    require_partition,
)
from statectl.formats.coordinator import active_of_standby, coordinator_topic
from statectl.kafka.coordinator import CoordinatorStream, JobModel, Locality
from statectl.kafka.tails import Tail, TopicRecreated, TopicWatch, check_in_range, read_tails, topic_identity
from statectl.local.layout import (
    check_standby_root,
    checkpoint_dir,
    device_of,
    old_standby_root,
    samza_would_take,
    standby_replica_dir,
    standby_root,
    store_dir,
    task_dir_name,
)
from statectl.local.staged import discard_old, out_of_space, swap_into_place
from statectl.progress import NullProgress, ProgressReporter
from statectl.rocks.live import LiveStore

LOCK_SUFFIX = ".standby.lock"
STATUS_SUFFIX = ".standby.json"
PROMOTE_LOCK_SUFFIX = ".standby.promote.lock"
LOG_SUFFIX = ".standby.log"  # the stderr of a follower a failed promote started again
FOLLOWER, PROMOTER = "follow", "promote"  # who holds a replica's lock, as its lock file says
FLUSH_RECORDS = 50_000  # flush and record the offset at least this often...
FLUSH_SECONDS = 1.0     # ...and at least this often while records come
FLUSH_AT_END_S = 0.05   # caught up with the end the broker reported: flush now, not after an empty poll
FENCE_TIMEOUT_S = 60.0
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
    # follow --pre-restore (engine.prerestore): layout "pre-restored", the checkpoint id whose snapshot
    # replica_dir holds complete (None: none yet), and the other dir it made (being built, or left to delete).
    layout: str | None = None
    checkpoint_id: str | None = None
    pending_dir: str | None = None


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
    # How the job's next start restores the store (NextStart.mode): "non-transactional" (promoted into the
    # active dir), "transactional" (promoted into <active dir>-<checkpoint_id>), "unchecked" (no
    # coordinator stream: into the active dir, not known to be kept).
    restore_mode: str = "unchecked"
    checkpoint_id: str | None = None


@dataclass
class LocalityPlan:
    """What promote writes to the job's coordinator stream after the move: with ``write``, container
    ``container``'s set-container-host-assignment becomes ``host`` (from ``current``); else nothing, and
    ``why`` says why not. ``note``: the note promote's result then carries (None when it adds none)."""

    container: str | None
    host: str
    current: str | None
    write: bool
    why: str
    note: str | None = None


@dataclass
class PromotePlan:
    """What ``promote`` will do, decided with nothing written: fence the follower ``fence_pid`` (None: none
    runs), catch ``replica_dir`` up from ``applied_offset`` to ``catch_up_to`` (under transactional restore
    exactly that offset; otherwise the changelog's end as the plan read it, or the checkpointed offset with
    --to-checkpoint: a promote run later catches up to the end as it then is), put it at ``promoted_dir``
    (``replaces_active``: over an existing active dir; ``in_place``: nothing moved), then ``locality``.
    Field names as PromoteResult's where they meet; ``standby promote --dry-run`` prints it, ``promote``
    executes it."""

    replica_dir: str
    promoted_dir: str
    active_dir: str
    restore_mode: str
    checkpoint_id: str | None
    applied_offset: int | None
    catch_up_to: int | None
    fence_pid: int | None
    replaces_active: bool
    in_place: bool
    locality: LocalityPlan | None = None
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)
    start: NextStart | None = field(default=None, repr=False, metadata={"internal": True})


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
    layout: str = "standby-root"  # "standby-root", "active-path", "old" (Samza's restore deletes it), "pre-restored"
    move_command: str | None = None  # for an old-layout replica: the command that moves it
    end_offset: int | None = None  # the changelog's end as the follower last saw it
    job: str | None = None  # whose replica it is, as its follower says (None: an older statectl's follower)
    job_id: str | None = None
    task: str | None = None
    store: str | None = None
    container: str | None = None  # the active container a container follower (follow --container) follows
    checkpoint_id: str | None = None  # layout "pre-restored": the checkpoint whose snapshot it holds


# -- the lock --------------------------------------------------------------------------------------


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


def _holder(path: Path) -> tuple[int | None, str | None, str]:
    """(pid, host, role) the holder of lock file ``path`` wrote ((None, None, FOLLOWER) when unknown; a lock
    file an older statectl wrote names no role: its follower's)."""
    try:
        words = path.read_text().split(" ")
        return int(words[0]), words[1], words[2] if len(words) > 2 else FOLLOWER
    except (OSError, ValueError, IndexError):
        return None, None, FOLLOWER


def _who(path: Path) -> str:
    pid, host, _ = _holder(path)
    return f"pid {pid} on {host}" if pid else "another process"


class ReplicaLock:
    """The one-follower-per-replica lock (flock on ``<replica>.standby.lock``; the kernel drops it when
    its holder dies), held by its follower, or by the promote that fenced it (``role``), as the file says.
    Raises LockHeldError (exit 11) naming the holder when taken."""

    def __init__(self, replica: Replica, *, wait_s: float = 0.0, role: str = FOLLOWER):
        self.replica = replica
        fd = _flock(replica.lock_path, wait_s)
        if fd is None:
            promoting = _holder(replica.lock_path)[2] == PROMOTER
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
    return _holder(replica.lock_path)[:2]


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
                         hint="let that promote (or failover) end, then see 'statectl standby status'")


def check_not_promoting(replica: Replica) -> None:
    """LockHeldError (exit 11) naming the holder when a promote or failover of ``replica`` runs. Reads only."""
    if _locked(replica.promote_lock_path):
        raise promoting_error(replica)


def _status_from_json(obj: Any) -> FollowStatus:
    """A status file's FollowStatus: keys it does not know (an older statectl's command line) ignored, the
    follower's settings checked (engine.follower: None when they are not what a follower records).
    TypeError for a file that is not one."""
    if not isinstance(obj, dict):
        raise TypeError("not a status")
    known = {f.name for f in fields(FollowStatus)}
    values = {k: v for k, v in obj.items() if k in known}
    values["follower"] = FollowerSettings.from_json(values.get("follower"))
    return FollowStatus(**values)


def read_status(replica: Replica) -> FollowStatus | None:
    try:
        return _status_from_json(json.loads(replica.status_path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_status(replica: Replica, st: FollowStatus) -> None:
    from statectl.fsutil import SYNC_NONE, write_atomic

    st.updated = time.time()
    try:
        write_atomic(replica.status_path, json.dumps(asdict(st)), sync=SYNC_NONE)
    except OSError:
        pass  # a full disk: the status file stays as it was, whole
        raise


# -- whose dir it is ---------------------------------------------------------------------------------


def made_by_follower(replica: Replica) -> bool:
    """Whether statectl's follower made the replica dir: its status file (``<replica>.standby.json``,
    written by the follower before it seeds anything) is there and names this very dir. A store's own
    OFFSET-v2 proves nothing (a job's active store names the same changelog), and promote removes the
    status file once the replica is the active store."""
    st = read_status(replica)
    return st is not None and os.path.realpath(st.replica_dir) == os.path.realpath(replica.replica_dir)


def check_replica_dir(replica: Replica, state_dir: Path | None = None, *, active_path: bool = False) -> None:
    """Raise UsageError (exit 2) unless follow may seed, wipe and re-seed ``replica.replica_dir``: it does
    not exist, is empty, or statectl's follower made it (:func:`made_by_follower`). Refused whatever its
    content: the task's active store dir (with ``state_dir``; unless ``active_path``, where that is the
    replica dir and a store whose OFFSET-v2 names the replica's changelog partition, a Samza standby's, is
    adopted: see check_active_path for the rest), a symlink, a dir inside a RocksDB store, and a
    ``--replica-dir`` directly in the task's store's dir whose name (or its lock or status file's) Samza's
    restore of the task would take for a checkpoint dir (local.layout.samza_would_take). Reads only."""
    from statectl.rocks.store import is_store

    path = replica.replica_dir
    hint = ("follow into the standby dir (leave --replica-dir out), or a new or empty dir; a dir statectl's "
            "follower did not make is never wiped")
    if state_dir is not None:
        active = store_dir(state_dir, replica.ref.store, replica.ref.task)
        is_active = os.path.realpath(path) == os.path.realpath(active.absolute())
        if is_active and not active_path:
            raise UsageError(f"refusing to follow into {path}: it is the active store dir of task {replica.ref.task!r}",
                             hint=hint)
        task_dir = task_dir_name(replica.ref.task)
        exposed = [p.name for p in (path, replica.lock_path, replica.status_path)
                   if os.path.realpath(p.parent) == os.path.realpath(active.parent.absolute())
                   and samza_would_take(p.name, task_dir)]
        if exposed:
            moves = " (it moves a replica an older statectl kept there)" if made_by_follower(replica) else ""
            raise UsageError(f"refusing to follow into {path}: Samza's restore of task {replica.ref.task!r} deletes "
                             f"{exposed[0]} (its name contains '{task_dir}-')",
                             hint=f"leave --replica-dir out{moves}: the standby root, where Samza never looks; or "
                                  "pick a dir outside the store's dir")
        if is_active:
            if not os.path.lexists(path) or made_by_follower(replica) or _samza_standby_store(replica):
                return
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


def _samza_standby_store(replica: Replica) -> bool:
    """Whether the replica dir is a RocksDB store whose OFFSET-v2 names the replica's changelog partition,
    and only it: what a Samza standby container leaves in the active's store dir (TaskSideInputStorageManager
    writes the standby's changelog offset there), which ``--layout active-path`` may adopt."""
    from statectl.rocks.store import is_store

    if not is_store(replica.replica_dir):
        return False
    try:
        return set(read_offsets(replica.replica_dir / OFFSET_V2)) == {replica.ssp}
    except (OSError, OffsetFileError):
        return False


def _check_own_files(replica: Replica) -> None:
    """Raise UsageError (exit 2) when the replica's status file names another replica dir that exists: the
    lock and status files of a task's replica are one pair, whichever layout it has (the standby root's, or
    the active's store dir); following another dir would take them from it."""
    st = read_status(replica)
    if st is None or os.path.realpath(st.replica_dir) == os.path.realpath(replica.replica_dir):
        return
    if os.path.lexists(st.replica_dir):
        other = "the default layout" if replica.files_dir is not None else "--layout active-path"
        raise UsageError(f"refusing to follow into {replica.replica_dir}: this task's replica is at {st.replica_dir}",
                         hint=f"follow that one ({other}), or promote or delete it first")


def active_path_replica(replica: Replica, state_dir: Path) -> Replica:
    """``replica`` (in the standby root) kept instead in the task's active store dir, as a Samza standby
    keeps it (StorageManagerUtil.getTaskStoreDir maps ``Standby-X-n`` to ``X``); its lock and status files
    stay where ``replica``'s are, in the standby root."""
    active = store_dir(state_dir, replica.ref.store, replica.ref.task).absolute()
    return replace(replica, replica_dir=active, files_dir=replica.lock_path.parent)


def check_active_path(replica: Replica, bootstrap: str | None, *, security: KafkaSecurity | None = None,
                      in_state_dir: bool = True) -> None:
    """Raise UsageError (exit 2, one line) unless this host runs no active of the replica's task, so that
    the active's store dir may hold its replica (``--layout active-path``): the store's RocksDB LOCK is not
    held (but by this replica's own follower, which the replica's lock then says: follow exits 11), and,
    when the job's coordinator stream is on ``bootstrap``, its locality does not place the task's
    container on this host. DiscardedError (exit 14) when the locality places here a container whose next
    start clears the state dir, the replica with it (wipes_state_dir; not checked without ``in_state_dir``: a
    pre-restore, kept in the standby root). Reads only; errors reading the stream as kafka.client says."""
    from statectl.rocks.store import lock_holder as store_lock_holder

    task = replica.ref.task
    hint = "follow into the standby root (leave --layout out), or on a host that runs no active of this task"
    pid = store_lock_holder(replica.replica_dir)
    if pid is not None and not _locked(replica.lock_path):
        who = f"process {pid}" if pid > 0 else "another process"
        raise UsageError(f"refusing --layout active-path: the store {replica.replica_dir} is held by {who}, so this "
                         f"host runs the active of task {task!r}", hint=hint)
    if bootstrap is None:
        return
    with CoordinatorStream(bootstrap, replica.ref.job, replica.ref.job_id, security=security) as cs:
        if not cs.refresh():
            return
        loc = cs.locality()
        config = cs.config()
    container = loc.task_containers.get(task)
    host = loc.container_hosts.get(container) if container is not None else None
    here = {socket.gethostname(), socket.getfqdn()}
    if host and host in here:
        raise UsageError(f"refusing --layout active-path: the job's locality places the container {container} of "
                         f"task {task!r} on this host ({host})", hint=hint)
    placed = sorted(c for c, h in loc.container_hosts.items() if h and h in here)
    why = wipes_state_dir(placed, loc, config, bootstrap, replica.ref, security) if placed and in_state_dir else None
    if why is not None:
        raise DiscardedError(f"refusing --layout active-path: {why}, deleting every entry of the state dir, "
                             f"{replica.replica_dir} among them", hint=hint)


def wipes_state_dir(containers: list[str], loc: Locality, config: dict[str, str], bootstrap: str, ref: StoreRef,
                    security: KafkaSecurity | None) -> str | None:
    """Why the next start of one of ``containers`` (of job ``ref``'s, per its locality ``loc``) deletes every entry
    of the state dir, or None when none does: a container reads checkpoints only for its active tasks, and one
    that reads none clears the logged store base dir (ContainerStorageManager.restoreStores -> clearLoggedStores):
    a container of standby tasks only, a job without a checkpoint manager (``task.checkpoint.factory``), or no
    checkpoint the job reads (KafkaCheckpointLog.read_checkpoints, ``task.checkpoint.read.versions``) for any of
    its active tasks. Reads the checkpoint topic only when needed."""
    checkpoints: dict[str, Any] | None = None
    for container in containers:
        tasks = sorted(t for t, c in loc.task_containers.items() if c == container)
        actives = [t for t in tasks if _active_name(t, loc.task_modes) == t]
        if tasks and not actives:
            return (f"the job's locality places its standby container {container} on this host, and each start of "
                    "a container without active tasks reads no checkpoint and clears the state dir")
        if not actives:
            continue
        if config and not jobconfig.has_checkpoint_manager(config):
            return (f"the job's locality places its container {container} on this host, and the job has no "
                    f"checkpoint manager ({jobconfig.CHECKPOINT_FACTORY}), so each of its starts clears the state dir")
        if checkpoints is None:
            checkpoints = latest_checkpoints(bootstrap, ref, security, config=config)
        if not any(t in checkpoints for t in actives):
            return (f"the job's locality places its container {container} on this host, and the job's checkpoints "
                    f"name none of its active tasks ({jobconfig.CHECKPOINT_READ_VERSIONS}: "
                    f"{','.join(map(str, jobconfig.checkpoint_read_versions(config)))}), so its next start clears "
                    "the state dir")
    return None


def old_replica(replica: Replica, state_dir: Path, number: int = 0) -> tuple[Path, Path | None] | None:
    """Where an older statectl kept ``replica`` (replica ``number`` of its task; in the standby root, or from
    active_path_replica) by default, for relocate_legacy: (its dir, the dir of its lock and status files when not
    beside it), the first of old_replica_dirs whose status file is there; for an active-path replica, its files
    in the old standby root. None when there is none. Reads only."""
    ref = replica.ref
    if replica.files_dir is not None:  # --layout active-path: only its lock and status files ever moved
        files = old_root_standby_dir(state_dir, ref.store, ref.task, number).parent.absolute()
        found = replace(replica, files_dir=files)
        return (replica.replica_dir, files) if read_status(found) is not None else None
    for path in old_replica_dirs(state_dir, ref.store, ref.task, number):
        if read_status(replace(replica, replica_dir=path, files_dir=None)) is not None:
            return path, None
    return None


def relocate_legacy(replica: Replica, legacy_dir: Path, legacy_files: Path | None = None) -> str | None:
    """Move the replica an older statectl kept at ``legacy_dir`` (old_replica_dirs, where Samza deletes it) into
    ``replica.replica_dir``, with its status file, and return a note saying so; None when there is none to move.
    ``legacy_files``: where that replica's lock and status files are when not beside it (an ``--layout
    active-path`` replica's, in an old standby root: only they move, the replica being the active dir itself).
    Only a dir a follower made (made_by_follower), only when no follower holds it, and only into a place that
    does not exist or is an empty dir (else it is left, with a note). The status file naming the new place is
    written first, then the dir is renamed in one step (local.staged.swap_into_place): a kill at any point leaves
    either place whole, and the next call finishes the move. Call it holding ``replica``'s lock. Raises
    LockHeldError (exit 11) when a follower holds the old replica; StatectlError when the rename fails."""
    old = replace(replica, replica_dir=Path(legacy_dir).absolute(), files_dir=legacy_files)
    target = replica.replica_dir
    files_only = os.path.realpath(old.replica_dir) == os.path.realpath(target)
    if not os.path.lexists(old.replica_dir):
        st = read_status(old)  # a move killed after its rename: the old status file names a dir now gone
        if st is not None and made_by_follower(replica) and not _locked(old.lock_path):
            old.status_path.unlink(missing_ok=True)
            old.lock_path.unlink(missing_ok=True)
        return None
    if old.replica_dir.is_symlink() or not old.replica_dir.is_dir() or not made_by_follower(old):
        return None  # not statectl's: never touched
    if not files_only and os.path.lexists(target) and (target.is_symlink() or not target.is_dir()
                                                       or any(target.iterdir())):
        return (f"a replica an older statectl kept at {old.replica_dir} is left there (Samza deletes it there): a "
                f"replica is already at {target}; delete the old one once it is not needed")
    try:
        held = ReplicaLock(old)
    except LockHeldError as e:
        raise LockHeldError(f"{e}: it is the replica an older statectl kept where Samza deletes it, to be "
                            f"moved to {target}", hint="stop that follower, then follow again: the replica is moved "
                                                       "with its data and offset") from None
    with held:
        st = read_status(old)
        if st is None:
            return None
        st.replica_dir = str(target)
        _write_status(replica, st)  # first: the new place is statectl's before anything is in it
        if not files_only:
            _move_replica_dir(old.replica_dir, target)
        old.status_path.unlink(missing_ok=True)
        old.lock_path.unlink(missing_ok=True)
    if files_only:
        return f"moved the lock and status files of the replica {target} to {replica.status_path.parent}"
    return (f"moved the replica from {old.replica_dir} (where Samza deletes it) to {target}, with its data "
            "and offset")


def _move_replica_dir(source: Path, target: Path) -> None:
    """Rename a replica dir to ``target`` (an empty dir there replaced), its parent made as needed."""
    try:
        make_dirs(target.parent, owner_of(source))
        if os.path.lexists(target):
            target.rmdir()  # empty: the rename then replaces nothing
        swap_into_place(source, target)
    except OSError as e:
        raise StatectlError(f"moving the replica {source} to {target} failed: {e}; it is where it was",
                            hint="fix that (the standby root must be on the state dir's filesystem), then follow "
                                 "again") from e


def locate_replica(replica: Replica, state_dir: Path, number: int = 0) -> tuple[Replica, str | None]:
    """The replica promote takes when no dir was given (``replica`` is the default, replica ``number`` in
    the standby root): the one the status file there names when it is the task's active store dir (a
    follower with ``--layout active-path`` made it); else ``replica`` when its dir exists; else one an older
    statectl kept (old_replica_dirs; an active-path replica whose files are in the old standby root), with a
    note; else ``replica`` (promote says there is none). Reads only."""
    in_place = active_path_replica(replica, state_dir)
    for files in (replica.lock_path.parent, old_root_standby_dir(state_dir, replica.ref.store, replica.ref.task,
                                                                  number).parent.absolute()):
        candidate = replace(in_place, files_dir=files)
        st = read_status(candidate)
        if st is not None and os.path.realpath(st.replica_dir) == os.path.realpath(in_place.replica_dir) \
                and made_by_follower(candidate):
            return candidate, None if files == in_place.files_dir else (
                f"promoting the replica {candidate.replica_dir} whose lock and status files an older statectl keeps "
                f"in {files}")
    if os.path.lexists(replica.replica_dir):
        return replica, None
    for old_dir in old_replica_dirs(state_dir, replica.ref.store, replica.ref.task, number):
        legacy = replace(replica, replica_dir=old_dir, files_dir=None)
        if made_by_follower(legacy):
            return legacy, (f"promoting the replica an older statectl kept at {legacy.replica_dir} (a following "
                            f"'statectl standby follow' would have moved it to {replica.replica_dir})")
    return replica, None


def _disk_full(replica: Replica, e: BaseException, what: str) -> DiskFullError | None:
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
           settings: FollowerSettings | None = None, state_dir: Path | None = None,
           timeout_s: float = DEFAULT_TIMEOUT_S, legacy_dir: Path | None = None, legacy_files: Path | None = None,
           active_path: bool = False, to_checkpoint: bool = False, container: str | None = None,
           root: Path | None = None) -> FollowResult:
    """Keep ``replica`` current until ``stop`` is set (see the module doc); return what was done.
    ``bootstrap``: the brokers of the job's coordinator stream and checkpoint topic; the changelog is read on
    ``replica.changelog_kafka``. ``seed`` restores a snapshot into the replica dir (None: always bootstrap from the
    changelog). ``settings`` (what the follower runs with) are recorded in the status file: a promote that fails
    starts the follower again from them (None: it says the command instead). ``state_dir``: the job's state dir,
    whose active store dir of the task is never a replica, unless ``active_path`` (``replica`` from
    active_path_replica; check_active_path must pass); ``root``: the standby root the replica is in
    (check_standby_root: on the state dir's filesystem, where promote renames the replica into the state dir), made
    with the state dir's owner. ``legacy_dir``: where an older statectl kept this replica (its lock and status files in
    ``legacy_files`` when not beside it); a replica there is moved into ``replica.replica_dir`` first
    (relocate_legacy), which a note says. ``to_checkpoint``: apply the changelog only up to the task's checkpointed
    changelog offset in the checkpoint the job's start reads (read from the job's checkpoint topic as new
    checkpoints come), so that a promote under Samza's transactional restore finds the replica at or behind the
    offset the job restores to; nothing is applied while the task has no such checkpoint, and a replica already
    past it waits until a checkpoint passes it (notes say so). ``container``: the active container this replica
    is followed for (follow --container), recorded in the status file.

    The changelog deleted and recreated under a running follower (a new topic id, another partition count,
    or its end now before the replica's offset) re-seeds the replica from the new changelog; so does a
    topic id that changed since the follower that wrote the status file. Brokers that stop answering are
    ridden out: the follower keeps polling, its status says the lag is unknown, and it goes on when they
    answer again.

    Raises UsageError (exit 2, before anything is written) for a replica dir it may not seed or wipe
    (check_replica_dir, check_active_path), a standby root in the state dir or on another filesystem
    (check_placement_dirs), or whose status file names another replica of the task that exists; DiscardedError (exit 14)
    for ``active_path`` where a container of the job starting on this host clears the state dir
    (check_active_path); LockHeldError (exit 11) when another follower holds the replica (or the old-layout one
    to be moved) or a process holds its store; NotFoundError (exit 10) when the changelog topic or partition does
    not exist; DiskFullError (exit 1) when the disk fills (the replica keeps what it applied, its offset files no
    more); StatectlError (exit 1) when the brokers cannot be reached at the start or the replica's offset file
    is foreign or malformed."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    result = FollowResult(str(replica.replica_dir), None, 0, 0, 0.0)
    check_replica_dir(replica, state_dir, active_path=active_path)
    if state_dir is not None:
        check_placement_dirs(replica, state_dir, root)
    _check_own_files(replica)
    if active_path:
        check_active_path(replica, bootstrap, security=security)
    cl_bootstrap, cl_security = replica.changelog_kafka(bootstrap, security)
    consumer = open_consumer(cl_bootstrap, timeout_s=timeout_s, security=cl_security)
    tail_consumer = None
    cap: _CheckpointCap | None = None
    try:
        require_partition(consumer, replica.changelog, replica.partition, cl_bootstrap)
        tail_consumer = open_consumer(cl_bootstrap, timeout_s=timeout_s, security=cl_security)
        if root is not None and state_dir is not None:
            make_dirs(root, owner_of(state_dir))
        with ReplicaLock(replica):
            if legacy_dir is not None:
                moved = relocate_legacy(replica, legacy_dir, legacy_files)
                if moved:
                    progress.note(moved)
            run = _Following(replica, bootstrap, security, seed, stop, on_status, progress, status_every_s, consumer,
                             tail_consumer, result)
            run.start(settings, container)
            cap = run.cap = _CheckpointCap(replica, bootstrap, security) if to_checkpoint else None
            run.loop()
    except Exception as e:
        full = _disk_full(replica, e, "following into")
        if full is None or full is e:
            raise
        raise full from e
    finally:
        consumer.close()
        if tail_consumer is not None:
            tail_consumer.close()
        if cap is not None:
            cap.close()
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(getattr(progress, "notes", []))
    return result


def check_placement_dirs(replica: Replica, state_dir: Path, root: Path | None) -> None:
    """Raise UsageError (exit 2) unless ``root`` (when given: the replica is in it) may be the standby root of
    ``state_dir`` (local.layout.check_standby_root: outside it, on its filesystem, where promote's rename into the
    state dir is atomic). An explicit replica dir elsewhere is the caller's: promote checks it
    (check_same_filesystem). Reads only."""
    if root is not None:
        check_standby_root(state_dir, root)


def check_same_filesystem(replica: Replica, target: Path) -> None:
    """Raise UsageError (exit 2) unless the replica dir and the dir promote renames it to (``target``, or its
    nearest existing parent) are on one filesystem: a rename across filesystems is a copy, not one atomic step.
    Reads only."""
    if device_of(replica.replica_dir) != device_of(target):
        raise UsageError(f"refusing to promote {replica.replica_dir} to {target}: they are on different filesystems, "
                         "so it cannot be renamed there in one atomic step",
                         hint="follow into a replica dir on the state dir's filesystem (leave --replica-dir out; "
                              "--standby-root on that filesystem), then promote")


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
        _write_status(replica, status)

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
                _write_status(replica, status)
                return
        # Stopped before a pass began (a SIGTERM right after the lock was taken): the result still says
        # where the replica is.
        if replica.replica_dir.exists():
            self.result.applied_offset = applied_offset(replica)

    def _apply(self, offset: int | None, seeded: bool) -> bool:
        """Apply the changelog from after ``offset`` until stopped (True) or until it has moved away from the
        replica, which is then re-seeded (False)."""
        replica, status = self.replica, self.status
        db = _open_replica(replica)
        try:
            if seeded:  # the seed's position, over whatever offset files a snapshot may have carried
                _record_offset(replica, db, offset)
            status.applied_offset = offset
            self.pending = 0
            try:
                self._read(db, offset)
            except OffsetOutOfRange as e:
                if self.pending:
                    _record_offset(replica, db, status.applied_offset)
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
                _record_offset(replica, db, status.applied_offset)
        finally:
            db.close()
        return True

    def _read(self, db: Any, offset: int | None) -> None:
        """Apply batches as they come, flushing (with the offset files) and reporting as they go."""
        replica, status, consumer, bootstrap = self.replica, self.status, self.consumer, self.cl_bootstrap
        reader = PartitionReader(consumer, replica.changelog, replica.partition, bootstrap)
        _check_in_range(consumer, replica, bootstrap, offset)
        reader.seek(None if offset is None else offset + 1)
        self.outage: str | None = None
        last_flush = last_status = time.monotonic()
        newest_applied_ts = -1
        batches = (reader.batches(follow=True) if self.cap is None else _capped_batches(
            reader, self.cap, self.stop, offset, lambda at: _check_in_range(consumer, replica, bootstrap, at),
            status, self.progress))
        for batch in batches:
            if batch:
                _apply(db, batch)
                self.pending += len(batch)
                self.result.records_applied += len(batch)
                status.records_applied = self.result.records_applied
                status.applied_offset = batch[-1].offset
                newest_applied_ts = batch[-1].timestamp
            now = time.monotonic()
            if self.pending and (self.pending >= FLUSH_RECORDS or now - last_flush >= FLUSH_SECONDS
                                 or not batch or self.stop.is_set()
                                 or (now - last_flush >= FLUSH_AT_END_S and reader.at_end())):
                _record_offset(replica, db, status.applied_offset)
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
        _write_status(replica, status)
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


# -- what the job's next start keeps ------------------------------------------------------------------

RESTORE_NON_TRANSACTIONAL = "non-transactional"
RESTORE_TRANSACTIONAL = "transactional"
RESTORE_UNCHECKED = "unchecked"


@dataclass(frozen=True)
class NextStart:
    """How the job's next start restores the task's store, from the job's config (its coordinator stream)
    and the task's latest v2 checkpoint, and so what of a promoted replica it keeps:

    - ``non-transactional`` (``task.transactional.state.restore.enabled=false``, standby tasks on, or
      ``task.async.commit``; TaskConfig.getTransactionalStateRestoreEnabled): NonTransactionalStateTaskRestoreManager
      keeps the active store dir when its offset file names exactly the changelog partition and is not
      stale, and restores the changelog after its offset.
    - ``transactional`` (the default): TransactionalStateTaskRestoreManager.getStoreActions deletes the
      active store dir and keeps at most one checkpoint dir ``<store dir>-<id>`` whose valid, fresh offset
      file names an offset between the changelog's oldest and the target (the checkpointed changelog offset
      ``checkpointed_offset`` of checkpoint ``checkpoint_id``; the newest offset once the checkpoint is older
      than 0.9 x ``min_compaction_lag_ms``).
    - ``unchecked``: the job has no coordinator stream, or no config on it; nothing known.

    ``delete_retention_ms``: a kept dir's offset file must be younger (StorageManagerUtil.isStaleStore).
    The checkpoint read is the task's latest v2 one: a job that writes checkpoints v1 and v2 (Samza's
    default) writes both with the same id and offsets."""

    mode: str
    why: str
    checkpoint_id: str | None = None
    checkpoint_millis: int | None = None
    checkpointed_offset: int | None = None
    min_compaction_lag_ms: int = jobconfig.DEFAULT_MIN_COMPACTION_LAG_MS
    delete_retention_ms: int = jobconfig.DEFAULT_DELETE_RETENTION_MS
    assumed: bool = False  # ``unchecked``, taken as non-transactional on the caller's word


def kept_by_next_start(start: NextStart, replica: Replica, assume_non_transactional: bool = False) -> NextStart:
    """``start``, once it is known that the job's next start keeps what promote makes there. An ``unchecked``
    one (no config to read) is refused with DiscardedError (exit 14): the job's default, transactional
    restore deletes the dir; unless ``assume_non_transactional``, the caller's word that the job restores the
    store non-transactionally (then ``assumed``). UsageError (exit 2) for that word when the config says
    another restore. Pure."""
    if start.mode == RESTORE_UNCHECKED:
        if assume_non_transactional:
            return replace(start, assumed=True)
        raise DiscardedError(
            f"refusing to promote the replica of store {replica.ref.store!r} of task {replica.ref.task!r}: how the "
            f"job's next start restores it is not known ({start.why}), and Samza's default, transactional "
            "restore deletes the promoted dir",
            hint="promote once the job's config is on its coordinator stream, or pass --non-transactional-restore "
                 "if the job restores the store non-transactionally (task.transactional.state.restore.enabled="
                 "false, standby tasks or async commit)")
    if assume_non_transactional and start.mode != RESTORE_NON_TRANSACTIONAL:
        raise UsageError(f"--non-transactional-restore: the job's config says {start.mode} restore"
                         + (f" ({start.why})" if start.why else ""),
                         hint="leave --non-transactional-restore out: the job's config decides")
    return start


def next_start(replica: Replica, bootstrap: str, *, security: KafkaSecurity | None = None,
               config: dict[str, str] | None = None, checkpoints: dict[str, Any] | None = None) -> NextStart:
    """How the job's next start restores ``replica``'s store (NextStart). Reads only. ``config`` (the job's,
    from its coordinator stream) and ``checkpoints`` (task -> the checkpoint the job's start reads, v1 or v2, as
    latest_checkpoints gives them: ``task.checkpoint.read.versions`` honoured): already read by a caller asking
    for many stores.

    Raises DiscardedError (exit 14) when that start deletes the store dir and every checkpoint dir of the
    task whatever promote puts there: the store is restored by the blob store backend (BlobStoreRestoreManager
    deletes them, keeping only a checkpoint dir identical to the snapshot), by a backend statectl does not
    know, or not at all (a store without a changelog is not logged: always deleted);
    ``stores.<store>.clean.on.container.start``; under transactional restore, a task without a checkpoint the
    job reads naming an offset for the store (a v2 Kafka changelog marker, a v1 ``<checkpointId>:<offset>``
    entry: Samza then restores from the changelog's oldest offset, all dirs deleted), or whose marker names
    another changelog partition than the replica's (its offset file would not be valid). The restore backend
    is the one that checkpoint selects (a v1 checkpoint: the Kafka changelog's, whatever the store's restore
    factories say). StatectlError for a config value Samza cannot parse,
    or brokers that cannot be reached."""
    ref = replica.ref
    if config is None:
        with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
            if not cs.refresh():
                return NextStart(RESTORE_UNCHECKED, f"job {ref.job}-{ref.job_id} has no coordinator stream {cs.topic}")
            config = cs.config()
    if not config:  # the stream holds the job's locality (or nothing) but no config: nothing to read it from
        return NextStart(RESTORE_UNCHECKED, f"the coordinator stream {coordinator_topic(ref.job, ref.job_id)} "
                                            "holds no config of the job")
    if checkpoints is None:
        checkpoints = latest_checkpoints(bootstrap, ref, security, config=config)
    checkpoint = checkpoints.get(ref.task)
    store, task = ref.store, ref.task
    refused = f"refusing to promote the replica of store {store!r} of task {task!r}"
    try:
        factory = jobconfig.checkpoint_restore_factory(config, store, checkpoint)
        if factory == BLOB_STORE_FACTORY:
            raise DiscardedError(
                f"{refused}: the job restores the store from the blob store (BlobStoreStateBackendFactory), "
                "whose restore deletes the store dir and every checkpoint dir but one identical to the snapshot",
                hint="keep the snapshot pre-restored on this host with 'statectl standby follow --pre-restore', "
                     "then promote without --replica-dir and --active-dir")
        if factory is None:
            raise DiscardedError(f"{refused}: the job's config gives the store no changelog "
                                 f"(stores.{store}.changelog) nor restore factories, so its start deletes the dir",
                                 hint="check --job and --store")
        if factory != KAFKA_CHANGELOG_FACTORY:
            raise DiscardedError(f"{refused}: the job restores the store with {factory}, whose start statectl "
                                 "cannot tell keeps a promoted dir",
                                 hint="restore the store from the Kafka changelog in the job's config")
        if jobconfig.clean_on_start(config, store):
            raise DiscardedError(f"{refused}: stores.{store}.clean.on.container.start is true, so the job's start "
                                 "deletes the store dir and every checkpoint dir",
                                 hint=f"unset stores.{store}.clean.on.container.start, then promote again")
        why = jobconfig.restore_reason(config)
        if not jobconfig.transactional_restore_enabled(config):
            return NextStart(RESTORE_NON_TRANSACTIONAL, why)
        lag_ms = jobconfig.changelog_min_compaction_lag_ms(config, store)
        retention_ms = jobconfig.changelog_delete_retention_ms(config, store)
    except jobconfig.JobConfigError as e:
        raise StatectlError(f"the config of job {ref.job}-{ref.job_id}: {e}",
                            hint="the job cannot start with it either: fix the job's config") from None
    position = checkpointed_position(checkpoint, store, replica.ssp)
    if checkpoint is None or position is None or not (position[2] or "").strip() or position[0] is None:
        what = (f"has no checkpoint the job reads ({jobconfig.CHECKPOINT_READ_VERSIONS}: "
                f"{','.join(map(str, jobconfig.checkpoint_read_versions(config)))})" if checkpoint is None else
                "'s checkpoint the job reads names no changelog offset for the store")
        raise DiscardedError(
            f"{refused}: under transactional restore ({why}) the task {what}, so the job's next start deletes "
            "the store dir and every checkpoint dir and restores from the changelog",
            hint="promote after the job's first commit with a changelog offset, or set "
                 "task.transactional.state.restore.enabled=false in the job's config")
    checkpoint_id, ssp, offset = position
    if (ssp.system, ssp.stream, ssp.partition) != (replica.system, replica.changelog, replica.partition):
        raise DiscardedError(
            f"{refused}: the task's checkpoint {checkpoint_id} names changelog {ssp.key()}, the "
            f"replica follows {replica.ssp.key()}: its offset file would not be valid for the job",
            hint="follow the changelog partition the job's checkpoint names")
    millis, second = parse_checkpoint_id(checkpoint_id)
    return NextStart(RESTORE_TRANSACTIONAL, why, f"{millis}-{second}", millis, int(offset),  # type: ignore[arg-type]
                     lag_ms, retention_ms)


def checkpointed_position(checkpoint: Any, store: str, ssp: SSP) -> tuple[str | None, SSP, str | None] | None:
    """(checkpoint id, changelog SSP, offset) of ``store`` in ``checkpoint`` (the one the job's start reads), as
    TransactionalStateTaskRestoreManager takes them (getCheckpointedChangelogOffsets, getCheckpointId): a v2
    checkpoint's id and Kafka changelog marker; a v1 checkpoint's entry for the store's changelog partition
    ``ssp``, ``<checkpointId>:<offset>`` (KafkaChangelogSSPOffset; a bare offset names no id). None when it names
    no position (or a malformed marker). Pure."""
    if checkpoint is None:
        return None
    if isinstance(checkpoint, CheckpointV1):
        key = (ssp.system, ssp.stream, ssp.partition)
        values = [v for s, v in checkpoint.offsets.items() if (s.system, s.stream, s.partition) == key]
        if not values or not (values[0] or "").strip():
            return None
        checkpoint_id, offset = split_changelog_offset(values[0])
        return checkpoint_id, ssp, offset
    text = checkpoint.state_checkpoint_markers.get(KAFKA_CHANGELOG_FACTORY, {}).get(store)
    try:
        marker = decode_changelog_marker(text) if text is not None else None
    except CheckpointFormatError:
        marker = None
    return None if marker is None else (checkpoint.checkpoint_id, marker.ssp, marker.offset)


def latest_checkpoints(bootstrap: str, ref: StoreRef, security: KafkaSecurity | None = None, *,
                       config: dict[str, str] | None = None) -> dict[str, Any]:
    """Task -> the checkpoint the job's next start reads for it (CheckpointV1 or CheckpointV2) from job ``ref``'s
    checkpoint topic, by its ``task.checkpoint.read.versions`` (KafkaCheckpointLog.read_checkpoints); {} when
    there is none. ``config``: the job's, when the caller has it (else read from its coordinator stream)."""
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security, config=config)
    try:
        return log.read_checkpoints()
    finally:
        log.close()


def _transactional_target(start: NextStart, tail: Tail, replica: Replica) -> int:
    """The offset a checkpoint dir must hold to be kept (TransactionalStateTaskRestoreManager.getStoreActions):
    the checkpointed offset, or the changelog's newest once the checkpoint is older than 0.9 x
    min.compaction.lag.ms. DiscardedError when the checkpointed offset is off the changelog (every dir is
    deleted then)."""
    assert start.checkpointed_offset is not None and start.checkpoint_millis is not None
    oldest, newest = tail.beginning, tail.end - 1
    offset = start.checkpointed_offset
    if tail.end <= tail.beginning or not oldest <= offset <= newest:
        raise DiscardedError(
            f"refusing to promote {replica.replica_dir}: the task's checkpointed changelog offset {offset} is not "
            f"in {replica.changelog}[{replica.partition}] (offsets {oldest} to {newest}), so the job's next start "
            "deletes every local dir of the store and restores the whole changelog",
            hint="let the job restore from the changelog; promote after its next commit")
    if time.time() * 1000 - start.checkpoint_millis > 0.9 * start.min_compaction_lag_ms:
        return newest  # Samza restores on to the newest offset then (the changelog may have been compacted)
    return offset


# -- promote ---------------------------------------------------------------------------------------


def promote(replica: Replica, active_dir: Path, bootstrap: str, *, security: KafkaSecurity | None = None,
            timeout_s: float = 60.0, to_checkpoint: bool = False,
            on_locality: Callable[[], tuple[bool, str | None]] | None = None, progress: ProgressReporter | None = None,
            kafka_timeout_s: float = DEFAULT_TIMEOUT_S, state_dir: Path | None = None,
            restart_follower: bool = True, start: NextStart | None = None,
            assume_non_transactional: bool = False, promote_lock: bool = True) -> PromoteResult:
    """Fence the follower, catch the replica up, and put it where the job's next start keeps it (see the
    module doc). ``on_locality`` (after the move) updates the job's locality and returns whether it did, and
    a note (or None). ``state_dir``: the job's state dir, whose other stores are never replaced.
    ``restart_follower``: start a follower this promote fenced again when it fails, from its recorded
    settings, the error saying whether it came back (False for a container's promote, which leaves the
    fenced container follower stopped: Invariant 2). ``start``: next_start's answer when the caller has it
    already (a container's promote checks every store first). ``promote_lock`` False: the caller holds the
    replica's PromoteLock (a failover holds its container's).

    Where it goes depends on how the job's next start restores the store (next_start, from the job's
    config on its coordinator stream; ``result.restore_mode`` says which): non-transactional restore, or no config
    to read (``unchecked``: only with ``assume_non_transactional``, the caller's word that the job restores the
    store non-transactionally, with a note): caught up to the changelog's end (``to_checkpoint``: to the active's
    last checkpointed changelog offset) and swapped into ``active_dir``. Transactional restore: caught up exactly to
    the offset getStoreActions restores to (the task's checkpointed changelog offset; the newest when the checkpoint
    is older than 0.9 x min.compaction.lag.ms) and renamed to ``<active_dir>-<checkpoint id>`` of the task's latest
    checkpoint, with the offset files Samza reads there (``OFFSET-v2``, ``OFFSET``); ``active_dir`` is left as it is
    (the start deletes it). That dir must not exist or be empty (else UsageError, exit 2).

    Raises LockHeldError (exit 11) naming the holder, before anything else, when another promote or failover
    of the replica runs (PromoteLock), or a follower this host cannot stop holds it. StatectlError (exit 1),
    nothing changed, when the changelog was deleted and recreated since the follower recorded its topic id
    (check_changelog_identity). DiscardedError (exit 14) without the job's config unless
    ``assume_non_transactional``; UsageError (exit 2) for ``assume_non_transactional`` when the config says
    another restore.

    The replica must be one statectl's follower made (made_by_follower), and the active dir it replaces
    must not exist, be empty, or be a RocksDB store (not another store's dir in
    ``state_dir``, nor a versioned adstore), and the replica must be on its filesystem (one atomic rename:
    check_same_filesystem); else UsageError (exit 2), before anything is done. A replica that is ``active_dir``
    itself (``--layout active-path``: from active_path_replica) is caught up where it
    is, nothing moved (under transactional restore it is renamed like any other). Raises
    DiscardedError (exit 14), nothing changed, when the job's next start would delete what promote makes
    (next_start's cases; under transactional restore also a checkpointed offset off the changelog, or a
    replica already past the target offset: it cannot be rolled back, a follower run with
    ``to_checkpoint`` never passes it); a follower fenced meanwhile is started again.
    NotFoundError (exit 10) when there is no replica; LockHeldError (exit 11) when a process holds the
    active store; StatectlError (exit 1) when it cannot catch up within ``timeout_s`` (the replica keeps
    what it applied, with its offset files, and a follower that was running is started again where it ran),
    or when the follower cannot be fenced; DiskFullError (exit 1) when the disk fills (the active dir is
    untouched)."""
    progress = progress or NullProgress()
    began = time.monotonic()
    with (PromoteLock(replica) if promote_lock else contextlib.nullcontext()), \
            _changelog_consumer(replica, bootstrap, security, kafka_timeout_s) as consumer_of:
        plan = _plan_promote(replica, active_dir, bootstrap, consumer_of, security=security,
                             to_checkpoint=to_checkpoint, state_dir=state_dir, start=start,
                             assume_non_transactional=assume_non_transactional)
        return _execute_promote(plan, replica, bootstrap, consumer_of(), security=security,
                                to_checkpoint=to_checkpoint, timeout_s=timeout_s, on_locality=on_locality,
                                restart_follower=restart_follower, began=began)


def _changelog_consumer(replica: Replica, bootstrap: str, security: KafkaSecurity | None,
                        timeout_s: float) -> LazyConsumer:
    """A LazyConsumer on the brokers of the replica's changelog (Replica.changelog_kafka)."""
    where, how = replica.changelog_kafka(bootstrap, security)
    return LazyConsumer(where, timeout_s=timeout_s, security=how)


def plan_promote(replica: Replica, active_dir: Path, bootstrap: str, *, security: KafkaSecurity | None = None,
                 to_checkpoint: bool = False, kafka_timeout_s: float = DEFAULT_TIMEOUT_S,
                 state_dir: Path | None = None, locality: bool = True,
                 assume_non_transactional: bool = False) -> PromotePlan:
    """The plan of ``promote(replica, active_dir, bootstrap, ...)`` with the same checks, reading the replica,
    the changelog's tail and the job's coordinator stream and checkpoint topic, writing nothing: no follower
    is fenced, nothing is applied, moved or written to Kafka. ``locality``: also plan update_locality (what
    the CLI's promote runs after the move). Raises what ``promote`` raises before it fences the follower,
    with the same exit codes (a promote that runs: LockHeldError)."""
    check_not_promoting(replica)
    with _changelog_consumer(replica, bootstrap, security, kafka_timeout_s) as consumer_of:
        plan = _plan_promote(replica, active_dir, bootstrap, consumer_of, security=security,
                             to_checkpoint=to_checkpoint, state_dir=state_dir, start=None,
                             assume_non_transactional=assume_non_transactional)
    if locality:
        plan.locality = plan_locality(bootstrap, replica.ref, security=security)
    return plan


def _plan_promote(replica: Replica, active_dir: Path, bootstrap: str, consumer_of: Callable[[], Any], *,
                  security: KafkaSecurity | None, to_checkpoint: bool, state_dir: Path | None,
                  start: NextStart | None, assume_non_transactional: bool) -> PromotePlan:
    if not (replica.replica_dir / OFFSET_V2).exists():
        raise NotFoundError(f"no replica at {replica.replica_dir} (no {OFFSET_V2})",
                            hint="start one with 'statectl standby follow'")
    if not made_by_follower(replica):  # a promote moves the replica dir away: only one a follower made
        raise UsageError(f"refusing to promote {replica.replica_dir}: statectl's follower did not make it (no "
                         f"{replica.replica_dir.name}{STATUS_SUFFIX} beside it naming it)",
                         hint="promote a replica 'statectl standby follow' keeps (leave --replica-dir out)")
    fence_pid = _follower_to_fence(replica)
    cl_bootstrap = replica.changelog_kafka(bootstrap, security)[0]
    check_changelog_identity(replica, consumer_of(), cl_bootstrap)
    if start is None:
        start = next_start(replica, bootstrap, security=security)
    start = kept_by_next_start(start, replica, assume_non_transactional)
    transactional = start.mode == RESTORE_TRANSACTIONAL
    # A replica kept in the active's store dir (--layout active-path) is promoted where it is: no move. Its
    # store's LOCK is checked when the catch-up opens it, once its own follower is fenced.
    in_place = replica.files_dir is not None and (
        os.path.realpath(replica.replica_dir) == os.path.realpath(Path(active_dir).absolute()))
    active_dir = Path(os.path.realpath(active_dir)) if in_place else check_active_dir(replica, active_dir, state_dir)
    target_dir = active_dir
    if transactional:
        assert start.checkpoint_id is not None
        target_dir = checkpoint_dir(active_dir, start.checkpoint_id)
        _check_checkpoint_dir(replica, target_dir)
        in_place = False  # the start deletes the active dir, a replica in it too: it moves
    if not in_place:
        check_same_filesystem(replica, target_dir)
    consumer = consumer_of()
    if transactional:
        target = _transactional_target(start, _tail(consumer, replica, cl_bootstrap), replica)
        _check_not_ahead(replica, target, start)  # before the follower is fenced: nothing changes
    else:
        target = _catch_up_target(replica, bootstrap, security, consumer, to_checkpoint)
    return PromotePlan(
        replica_dir=str(replica.replica_dir), promoted_dir=str(target_dir), active_dir=str(active_dir),
        restore_mode=start.mode, checkpoint_id=start.checkpoint_id if transactional else None,
        applied_offset=applied_offset(replica), catch_up_to=target, fence_pid=fence_pid,
        replaces_active=not in_place and not transactional and os.path.lexists(target_dir), in_place=in_place,
        notes=[_restore_note(start, replica, active_dir, target_dir, target)], start=start)


def _execute_promote(plan: PromotePlan, replica: Replica, bootstrap: str, consumer: Any, *,
                     security: KafkaSecurity | None, to_checkpoint: bool, timeout_s: float,
                     on_locality: Callable[[], tuple[bool, str | None]] | None, restart_follower: bool,
                     began: float) -> PromoteResult:
    """Carry out ``plan`` (see promote)."""
    start = plan.start
    assert start is not None
    cl_bootstrap = replica.changelog_kafka(bootstrap, security)[0]
    transactional = plan.restore_mode == RESTORE_TRANSACTIONAL
    in_place = plan.in_place
    active_dir, target_dir = Path(plan.active_dir), Path(plan.promoted_dir)
    target = plan.catch_up_to if transactional else None
    result = PromoteResult(str(target_dir), None, 0, 0.0, restore_mode=start.mode,
                           checkpoint_id=start.checkpoint_id if transactional else None)
    try:
        before = read_status(replica)
        was_following = _fence(replica)
        try:
            with ReplicaLock(replica, wait_s=FENCE_TIMEOUT_S, role=PROMOTER):
                _still_promotable(replica, consumer, cl_bootstrap)
                if transactional:
                    try:
                        _check_not_ahead(replica, target, start)  # the follower may have applied more meanwhile
                    except DiscardedError as e:
                        raise _NotPromoted(str(e), hint=e.hint, exit_as=DiscardedError) from None
                    position = _catch_up(replica, consumer, cl_bootstrap, lambda: target, began + timeout_s, result)
                    if position != target:  # nothing below the target left to read: never claim more
                        raise _NotPromoted(f"cannot promote {replica.replica_dir}: the changelog ends at offset "
                                           f"{position}, short of the offset {target} the job restores to",
                                           hint="promote again once the changelog holds it")
                    write_offset(replica.replica_dir / OFFSET, str(position))  # StorageManagerUtil.writeOffsetFile
                else:
                    position = _catch_up(
                        replica, consumer, cl_bootstrap,
                        lambda: _catch_up_target(replica, bootstrap, security, consumer, to_checkpoint),
                        began + timeout_s, result)
                result.caught_up_offset = position
                # Run as root, the job's user must own what it starts on: the store replaced's owner, or
                # the state dir's (local.staged.StagedStore's rule).
                owner = owner_of(target_dir if not in_place and os.path.lexists(target_dir) else target_dir.parent)
                chown_tree(replica.replica_dir, owner)
                fsync_dirs(replica.replica_dir)
                if not in_place:  # the store's dir need not exist: the replica is not in it
                    make_dirs(target_dir.parent, owner)
                old = None if in_place else swap_into_place(replica.replica_dir, target_dir)
                if in_place:
                    result.notes.append(f"{active_dir} held the replica already (--layout active-path): nothing moved")
                # Only now: until the swap the status file is what proves the replica dir statectl's own.
                replica.status_path.unlink(missing_ok=True)
                result.replaced_active = old is not None and not transactional
                note = discard_old(old)
                if note:
                    result.notes.append(note)
            replica.lock_path.unlink(missing_ok=True)
            replica.log_path.unlink(missing_ok=True)
        except _NotPromoted as e:
            said = str(e)
            if restart_follower and was_following:  # once the lock is released: the follower takes it again
                said += "; " + _restart(replica, before, bootstrap)
            raise e.exit_as(said, hint=e.hint) from None
    except Exception as e:
        full = _disk_full(replica, e, "promoting")
        if full is None or full is e:
            raise
        raise full from e
    result.notes.append(_restore_note(start, replica, active_dir, target_dir, result.caught_up_offset))
    if on_locality is not None:
        result.locality_updated, note = on_locality()
        if note:
            result.notes.append(note)
    result.duration_s = round(time.monotonic() - began, 3)
    return result


def _restore_note(start: NextStart, replica: Replica, active_dir: Path, target_dir: Path,
                  offset: int | None) -> str:
    if start.mode == RESTORE_TRANSACTIONAL:
        hours = start.delete_retention_ms / 3_600_000
        return (f"transactional restore ({start.why}): the job's next start deletes {active_dir} and restores it "
                f"from {target_dir} (checkpoint {start.checkpoint_id}, changelog offset {offset}); it must start "
                f"within {hours:g}h (stores.{replica.ref.store}.changelog.delete.retention.ms), or it takes the "
                "dir for stale and deletes it")
    if start.mode == RESTORE_NON_TRANSACTIONAL:
        return f"non-transactional restore ({start.why}): the job's next start reuses {target_dir}"
    if start.assumed:
        return (f"could not check how the job's next start restores the store ({start.why}): {target_dir} is kept "
                "if, as --non-transactional-restore says, the job restores it non-transactionally")
    return (f"could not check how the job's next start restores the store ({start.why}): it keeps {target_dir} only "
            "under non-transactional restore from the Kafka changelog (task.transactional.state.restore.enabled="
            "false, standby tasks or async commit); the default transactional restore deletes it")


def _still_promotable(replica: Replica, consumer: Any, bootstrap: str) -> None:
    """Raise _NotPromoted unless the replica, as its fenced follower left it, is what the plan checked: its
    offset file there (a follower fenced mid re-seed has none), its changelog the topic it followed."""
    if not (replica.replica_dir / OFFSET_V2).exists():
        raise _NotPromoted(f"cannot promote {replica.replica_dir}: its follower was re-seeding it (no {OFFSET_V2}); "
                           "the active dir is untouched", hint="let the follower seed it, then promote")
    try:
        check_changelog_identity(replica, consumer, bootstrap)
    except StatectlError as e:
        raise _NotPromoted(str(e), hint=e.hint) from None


def _tail(consumer: Any, replica: Replica, bootstrap: str) -> Tail:
    require_partition(consumer, replica.changelog, replica.partition, bootstrap)
    return read_tails(consumer, replica.changelog, [replica.partition], bootstrap)[replica.partition]


def _check_not_ahead(replica: Replica, target: int | None, start: NextStart) -> None:
    """DiscardedError (exit 14) when the replica holds changelog records past ``target``: a store cannot be
    rolled back, and a checkpoint dir past the target is deleted at the job's start (getStoreActions)."""
    applied = applied_offset(replica)
    if applied is not None and target is not None and applied > target:
        raise DiscardedError(
            f"refusing to promote {replica.replica_dir}: it holds changelog offset {applied}, past the offset "
            f"{target} the job's next start restores to (checkpoint {start.checkpoint_id}, transactional restore): "
            "the start would delete it, and a store cannot be rolled back",
            hint="follow with 'statectl standby follow --to-checkpoint' (it applies only up to the task's latest "
                 "checkpoint), or promote once the job has checkpointed past it")


def _check_checkpoint_dir(replica: Replica, target: Path) -> None:
    """UsageError (exit 2) unless the checkpoint dir promote makes under transactional restore does not
    exist or is an empty dir: a dir there is the job's own (Samza's commit made it), never replaced."""
    if not os.path.lexists(target):
        return
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        return
    raise UsageError(f"refusing to promote {replica.replica_dir} into {target}: it exists (the job's own checkpoint "
                     "dir: its next start restores from it already)",
                     hint="leave it to the job, or move it away and promote again")


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
    """The replica could not be caught up, or may not be promoted: nothing was swapped (promote restarts
    the follower, then raises ``exit_as``)."""

    def __init__(self, message: str, *, hint: str | None = None, exit_as: type[StatectlError] = StatectlError):
        super().__init__(message, hint=hint)
        self.exit_as = exit_as


def _catch_up(replica: Replica, consumer: Any, bootstrap: str, target_of: Callable[[], int | None],
              deadline: float, result: PromoteResult) -> int | None:
    """Apply the changelog to the replica up to the offset ``target_of()`` names, by ``deadline``; record the
    offset reached either way (the target itself once every record up to it was read, compacted gaps
    included). Return it; raise _NotPromoted when out of range or out of time."""
    offset = applied_offset(replica)
    try:
        _check_in_range(consumer, replica, bootstrap, offset)
    except OffsetOutOfRange as e:
        raise _NotPromoted(f"cannot promote {replica.replica_dir}: {e}; the active dir is untouched",
                           hint="let 'statectl standby follow' re-seed the replica, then promote") from None
    target = target_of()
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
            if reader.position is not None and reader.position > target:
                position = target  # read through the target: what is missing below it was compacted away
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
            found = log.read_changelog_offset(replica.ref.task, replica.ref.store, replica.ssp)
        finally:
            log.close()
        if found is None:
            raise NotFoundError(f"task {replica.ref.task!r} has no checkpointed changelog offset for store "
                                f"{replica.ref.store!r}", hint="promote to the changelog's end (without --to-checkpoint)")
        return None if found[1] is None else int(found[1])
    where = replica.changelog_kafka(bootstrap, security)[0]
    tail = read_tails(consumer, replica.changelog, [replica.partition], where)[replica.partition]
    return tail.end - 1 if tail.end > tail.beginning else None


def _follower_to_fence(replica: Replica) -> int | None:
    """The pid of the follower :func:`_fence` stops (None: none runs). Raises LockHeldError (exit 11) when the
    replica's lock is held by a promote, or by a follower this host cannot stop (on another host, gone, or
    this process). Reads only."""
    if not _locked(replica.lock_path):
        return None
    pid, host, role = _holder(replica.lock_path)
    if role == PROMOTER:
        raise LockHeldError(f"replica {replica.replica_dir} is being promoted by pid {pid} on {host}",
                            hint="let that promote end, then see 'statectl standby status'")
    if pid is None or host != socket.gethostname() or pid == os.getpid() or not process_alive(pid):
        raise LockHeldError(f"replica {replica.replica_dir} is held by a follower this host cannot stop "
                            f"(pid {pid} on {host})", hint="stop that follower, then promote again")
    return pid


def _fence(replica: Replica) -> bool:
    """Stop the replica's follower on this host (SIGTERM) and wait until it has; True if one was running.
    Only a follower (:func:`_follower_to_fence`), never a promote that holds the replica."""
    pid = _follower_to_fence(replica)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + FENCE_TIMEOUT_S
    while process_alive(pid):
        if time.monotonic() > deadline:
            raise StatectlError(f"the follower of {replica.replica_dir} (pid {pid}) did not stop within "
                                f"{FENCE_TIMEOUT_S:g}s", hint="stop it yourself, then promote again")
        time.sleep(0.05)
    return True


def _restart(replica: Replica, status: FollowStatus | None, bootstrap: str) -> str:
    """Start the follower a failed promote fenced again, from the settings its status file records, checked
    against the replica (engine.follower.restart); return the sentence that says whether it came back, or
    the command that starts it (built from the replica's own fields when the file records none that fit)."""
    settings = status.follower if status is not None else None
    why = "its status file records no settings" if settings is None else _not_its(settings, replica)
    if settings is None or why is not None:
        ref = replica.ref
        where: dict[str, Any] = (
            {"pre_restore": True, "state_dir": str(replica.replica_dir.parents[1]),  # engine.prerestore's anchor
             "standby_root": str(replica.files_dir.parents[1]) if replica.files_dir is not None else None}
            if status is not None and status.layout == "pre-restored" else
            {"changelog": f"{replica.system}.{replica.changelog}", "partition": replica.partition,
             "replica_dir": str(replica.replica_dir)})
        command = FollowerSettings(bootstrap, ref.job, ref.job_id, task=ref.task, store=ref.store, **where).command()
        return f"its follower was stopped and is not started again ({why}): start it with: {command}"

    def following(pid: int) -> bool:
        return _locked(replica.lock_path) and lock_holder(replica) == (pid, socket.gethostname())

    return restart_process(settings, cwd=replica.lock_path.parent, log=replica.log_path, following=following)


def _not_its(settings: FollowerSettings, replica: Replica) -> str | None:
    """Why ``settings`` do not start ``replica``'s follower (None: they do): they must name its job, task (or
    a container), store and changelog partition, and its dir (or the state dir it is in)."""
    ref = replica.ref
    if (settings.job, settings.job_id) != (ref.job, ref.job_id) or settings.store not in (None, ref.store) or (
            settings.store is None and settings.container is None):
        return "its settings name another job or store"
    if settings.container is None and settings.task != ref.task:
        return "its settings name another task"
    if settings.changelog is not None and (settings.changelog, settings.partition) != (
            f"{replica.system}.{replica.changelog}", replica.partition):
        return "its settings name another changelog partition"
    where = os.path.realpath(replica.replica_dir)
    if settings.replica_dir is not None:
        return None if os.path.realpath(settings.replica_dir) == where else "its settings name another replica dir"
    if settings.state_dir is None:
        return "its settings name no state dir"
    # In its state dir (--layout active-path, a pre-restore's anchor) or in the standby root its settings give.
    homes = (settings.state_dir, standby_root(Path(settings.state_dir), settings.standby_root))
    if not any(where.startswith(os.path.realpath(home) + os.sep) for home in homes):
        return "its settings name another state dir"
    return None


def check_changelog_identity(replica: Replica, consumer: Any, bootstrap: str, status: FollowStatus | None = None,
                             *, topic_ids: dict[str, str | None] | None = None) -> None:
    """Raise StatectlError (exit 1) when the changelog's topic id is not the one the replica's follower
    recorded (its status file): the changelog was deleted and recreated since, and the replica's offset names
    a record of the old topic, whatever the new one holds there. Nothing is known (and nothing raised) when
    the follower recorded no id or the brokers report none (kafka.tails.topic_identity). ``topic_ids``: a
    cache of ids by topic, for a caller checking many replicas. Reads only."""
    status = status if status is not None else read_status(replica)
    if status is None or not status.topic_id or status.changelog != replica.changelog:
        return
    if topic_ids is not None and replica.changelog in topic_ids:
        now = topic_ids[replica.changelog]
    else:
        now = topic_identity(consumer, replica.changelog, bootstrap)[0]
        if topic_ids is not None:
            topic_ids[replica.changelog] = now
    if now is None or now == status.topic_id:
        return
    raise StatectlError(f"refusing to promote {replica.replica_dir}: changelog {replica.changelog} was deleted and "
                        f"recreated since the replica was followed (topic id {status.topic_id}, now {now}): its "
                        "records and offset are the old topic's",
                        hint="run 'statectl standby follow' for it (it re-seeds the replica from the new changelog), "
                             "then promote")


# -- status ----------------------------------------------------------------------------------------


def replicas(state_dir: Path, root: Path | None = None) -> list[ReplicaStatus]:
    """The replicas of ``state_dir`` (their status files: in its standby root, ``root`` or the default beside it;
    in the standby root an older statectl kept in the state dir; beside a replica dir in a store's dir), with
    their lag as last reported, whether their follower runs, whether they are promotable (an offset file, no
    follower mid-seed), and their layout: ``standby-root``, ``active-path`` (the task's active store dir),
    ``pre-restored`` (follow --pre-restore), ``old`` (where an older statectl kept it, in the state dir:
    ``<state>/.statectl-standby/...``, which a container starting without a checkpoint clears, or
    ``<store>/Standby-<task>-<n>``, which the task's restore deletes; ``move_command`` names the command that
    moves it) or ``replica-dir`` (another dir in a store's dir). Reads only; NotFoundError (exit 10) when
    ``state_dir`` does not exist."""
    import shlex

    from statectl.formats.coordinator import active_of_standby

    if not state_dir.is_dir():
        raise NotFoundError(f"state dir {state_dir} does not exist")
    old_root = old_standby_root(state_dir)
    found = [(p, "root") for p in sorted(standby_root(state_dir, root).glob(f"*/*/*{STATUS_SUFFIX}"))]
    found += [(p, "old-root") for p in sorted(old_root.glob(f"*/*/*{STATUS_SUFFIX}"))]
    found += [(p, "store") for p in sorted(state_dir.glob(f"*/*{STATUS_SUFFIX}")) if p.parent.name != old_root.name]
    out = []
    for path, where in found:
        try:
            obj = json.loads(path.read_text())
            st = _status_from_json(obj)
        except (OSError, ValueError, TypeError):
            continue
        name = path.name[:-len(STATUS_SUFFIX)]
        beside = os.path.realpath(st.replica_dir) == os.path.realpath(path.with_name(name))
        if where == "store" and not beside:
            continue  # a status file that names another dir: not a replica kept here
        lock = path.with_name(name + LOCK_SUFFIX)
        following = st.host == socket.gethostname() and process_alive(st.pid) and _locked(lock)
        row = ReplicaStatus(st.replica_dir, st.changelog, st.partition, st.applied_offset, st.lag_records,
                            st.lag_s, st.pid if following else None, following,
                            (Path(st.replica_dir) / OFFSET_V2).exists(),
                            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.updated)) if st.updated else None,
                            end_offset=st.end_offset, job=st.job, job_id=st.job_id, task=st.task, store=st.store,
                            container=st.container)
        if st.layout == "pre-restored":  # follow --pre-restore (engine.prerestore): a blob-store checkpoint dir
            row.layout, row.checkpoint_id = st.layout, st.checkpoint_id
            row.promotable = st.checkpoint_id is not None and Path(st.replica_dir).is_dir()
        elif where == "root":
            row.layout = "standby-root" if beside else "active-path"
        elif where == "store" and active_of_standby(name) is None:
            row.layout = "replica-dir"
        if where == "old-root" or (where == "store" and row.layout != "replica-dir"):
            row.layout = "old"
            row.move_command = _move_command(st, obj.get("argv"), shlex, following)
        out.append(row)
    return out


def _move_command(st: FollowStatus, argv: Any, shlex: Any, following: bool) -> str:
    """What moves an old-layout replica into the standby root: its follower's own command (without
    --replica-dir: the default dir is what moves it), run by this statectl once that follower stopped. The
    command is shown, never run: from its recorded settings, else from the command line an older statectl's
    follower recorded (``argv``), as statectl's arguments only."""
    if st.follower is not None:
        command = st.follower.command(replica_dir=False)
        return f"stop its follower (pid {st.pid}), then: {command}" if following else command
    args = [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
    if args[1:3] == ["-m", "statectl"]:
        args = args[3:]
    elif args:
        args = args[1:]
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--replica-dir":
            skip = True
        elif not a.startswith("--replica-dir="):
            kept.append(a)
    command = "statectl " + shlex.join(kept) if kept else ("statectl standby follow (with the --kafka, --job, "
                                                           "--task, --store and --state-dir of its follower)")
    return (f"stop its follower (pid {st.pid}), then: {command}" if following else command)


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
    ``partition``; ``notes``: the guesses made to get there (warnings for the operator). ``bootstrap`` and
    ``security``: the brokers of that system and how to reach them when the job's config puts it on another
    cluster (kafka.systems.system_brokers), else None (the brokers the job's coordinator stream is on)."""

    system: str
    topic: str
    partition: int
    notes: tuple[str, ...] = ()
    bootstrap: str | None = None
    security: KafkaSecurity | None = field(default=None, repr=False)

    def replica(self, ref: StoreRef, replica_dir: Path, **kwargs: Any) -> Replica:
        """The Replica of ``ref`` at ``replica_dir`` that follows this changelog partition, on its brokers."""
        return Replica(ref, self.topic, self.partition, replica_dir, system=self.system,
                       changelog_bootstrap=self.bootstrap, changelog_security=self.security, **kwargs)


# The system a changelog is taken to be on when nothing says otherwise: KafkaSystemFactory's usual name.
GUESSED_SYSTEM = "kafka"


def resolve_changelog(bootstrap: str, ref: StoreRef, *, changelog: str | None = None, partition: int | None = None,
                      security: KafkaSecurity | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                      model: JobModel | None = None, problems: list[str] | None = None,
                      counted: set[str] | None = None, zookeeper: str | None = None) -> ChangelogPartition:
    """The changelog system, topic and partition of ``ref``'s store, as the job's model says (read whole, once:
    engine.jobmodel.read_job_model, from the coordinator stream, or with ``zookeeper`` a standalone job's model
    in ZooKeeper with the stream's config). Reads only.

    Topic and system: ``changelog`` if given, else ``stores.<store>.changelog`` of the job's config, either
    qualified as Samza's StorageConfig.getChangelogStream does (``<system>.<topic>`` split at the first dot;
    a bare topic is on ``job.changelog.system``, else ``job.default.system``). A bare ``changelog`` whose
    config names neither (or with no coordinator stream) is taken to be on system "kafka", with a note.
    Partition: ``partition`` if given (an override: the mapping is not consulted), else the task's
    changelog partition in the model (the stream's ``set-changelog`` mapping, ChangelogStreamManager; a
    TaskModel's changelog-partition in ZooKeeper). JobModelCalculator gives partitions out in lexicographic
    task-name order, so ``Partition 10`` of 12 tasks is on partition 2. Only without a coordinator stream
    (and no ``zookeeper``) is it guessed from a task named ``Partition N``, with a note. Brokers: the changelog's
    system's (``systems.<system>.consumer.bootstrap.servers``, its producer's, ``systems.<system>.bootstrap.servers``,
    with that system's consumer security: kafka.systems.system_brokers) when the config puts it on another cluster
    than ``bootstrap``, in the result's ``bootstrap`` and ``security`` (with a note); the partition count is checked
    there.

    Raises UsageError (exit 2, before any broker is asked) for a negative ``partition`` or an empty
    ``changelog``, and without a partition for a task that does not say one with no coordinator stream;
    ConfigError (exit 2) for a changelog on a system the job's config does not define (no
    ``systems.<system>.samza.factory``), a bare one the config gives no system, or consumer security settings
    of its system statectl cannot use; NotFoundError (exit 10)
    when there is no coordinator stream and no ``changelog``, the config names no changelog for the store,
    the mapping has no partition for the task, or the changelog topic has fewer partitions than the mapping
    names; StatectlError (exit 1) when the task's partition is mapped to another task as well (naming both);
    read_job_model's errors (ZooKeeper unreachable, no model there, a malformed one).
    ``model`` (with the stream's ``problems``): the job model already read (CoordinatorStream.job_model), for
    a caller resolving many stores at once; the stream is then not read again. ``counted``: the topics whose
    partition count was checked against that same model's mapping already (by this caller: the check is
    then not repeated, each costing a metadata round trip); the topic checked here is added to it."""
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
    if model is None:
        from statectl.engine.jobmodel import read_job_model

        model, problems = read_job_model(bootstrap, ref.job, ref.job_id, zookeeper=zookeeper, security=security,
                                         timeout_s=timeout_s)
    problems = problems or []
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
            raise NotFoundError(f"the config of job {job} names no changelog for store {ref.store!r} ({key})"
                                + ("" if config else f" (it has no config on coordinator stream "
                                                     f"{coordinator_topic(ref.job, ref.job_id)})"),
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
                         + ("no coordinator stream" if model is None else f"no config of job {job} on its coordinator "
                            "stream" if not config else f"the config of job {job} defines neither "
                            "job.changelog.system nor job.default.system")
                         + f"); pass --changelog <system>.{changelog} if the job names it otherwise")
    if not ss.stream:
        raise UsageError(f"{where} names no topic", hint="pass the changelog topic, as <system>.<topic> or <topic>")
    if config:  # a coordinator stream with no config at all (locality only) says nothing about systems
        require_system(config, ss.system, where=where)
    from statectl.kafka.systems import system_brokers

    # The changelog's system may be on another cluster than the job's coordinator and checkpoint topics.
    brokers = system_brokers(config, ss.system, bootstrap, security)
    cl_bootstrap, cl_security = (brokers.bootstrap, brokers.security) if brokers.elsewhere else (bootstrap, security)
    if brokers.elsewhere:
        notes.append(f"changelog {ss.stream} is on system {ss.system!r}'s brokers {brokers.bootstrap} "
                     f"({brokers.key})")

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
            partition = _mapped_partition(model, ref.task, problems)
            if counted is None or ss.stream not in counted:
                _check_partition_count(cl_bootstrap, ss.stream, model, security=cl_security, timeout_s=timeout_s)
                if counted is not None:
                    counted.add(ss.stream)
    return ChangelogPartition(ss.system, ss.stream, partition, tuple(notes),
                              brokers.bootstrap if brokers.elsewhere else None,
                              brokers.security if brokers.elsewhere else None)


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


def _mapped_partition(model: JobModel, task: str, problems: list[str]) -> int:
    """The task's partition in the job model's mapping; NotFoundError (exit 10) when it has none;
    StatectlError (exit 1) when another task (not one of its standbys) has it too."""
    from statectl.formats.coordinator import SET_CHANGELOG

    mapping, modes = model.changelog_partitions, model.task_modes
    partition = mapping.get(task)
    if partition is None:
        bad = [p for p in problems if f"{SET_CHANGELOG} {task!r}" in p]
        # A model that lists its tasks' SSPs (ZooKeeper's) has every task it knows: no set-changelog to miss.
        why = (f"no {SET_CHANGELOG} message for it{': ' + bad[-1] if bad else ''}" if not model.task_ssps else
               f"no such task in its {len(mapping)} task(s)")
        raise NotFoundError(f"{model.where} maps task {task!r} to no changelog partition ({why})",
                            hint="pass --partition with the task's changelog partition")
    me = _active_name(task, modes)
    others = sorted({_active_name(t, modes) for t, p in mapping.items() if p == partition} - {me})
    if others:
        raise StatectlError(f"{model.where} maps changelog partition {partition} to both task "
                            f"{me!r} and task {others[0]!r}" + (f" (and {len(others) - 1} more)" if len(others) > 1
                                                                else "") + ": whose data it holds is unknown",
                            hint="pass --partition if you know the task's changelog partition")
    return partition


def _check_partition_count(bootstrap: str, topic: str, model: JobModel, *,
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
    task, highest = max(model.changelog_partitions.items(), key=lambda kv: (kv[1], kv[0]))
    if n is not None and n <= highest:
        raise NotFoundError(f"changelog topic {topic} has {n} partition{'s' if n != 1 else ''}, but {model.where} "
                            f"maps task {task!r} to partition {highest}: the mapping is not "
                            "this topic's", hint="check --changelog and the job's stores.<store>.changelog, or pass "
                                                 "--partition")


def update_locality(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None) -> tuple[bool, str | None]:
    """Point the container of ``ref.task`` at this host (set-container-host-assignment, as a Samza
    container writes it), so that the job places the active task where its promoted store now is; return
    whether it did, and a note when it did not. Not when the job's coordinator stream or the task's
    container assignment is not there, nor when that container runs other active tasks too: a container
    moves whole, and repointing it for one promoted task would place the others away from their
    state (promote --container or failover moves them all). What it writes is plan_locality's plan."""
    with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
        plan = _plan_locality(cs, ref)
        if plan.write:
            assert plan.container is not None
            cs.write_container_host(plan.container, plan.host)
    return plan.write, plan.note


def plan_locality(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None) -> LocalityPlan:
    """What update_locality would write, reading the job's coordinator stream only."""
    with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
        return _plan_locality(cs, ref)


def _plan_locality(cs: CoordinatorStream, ref: StoreRef) -> LocalityPlan:
    host = socket.gethostname()
    if not cs.refresh():
        return LocalityPlan(None, host, None, False, f"job {ref.job}-{ref.job_id} has no coordinator stream")
    loc = cs.locality()
    container = loc.task_containers.get(ref.task)
    if container is None:
        return LocalityPlan(None, host, None, False, f"the coordinator stream assigns task {ref.task!r} no container")
    current = loc.container_hosts.get(container)
    others = sorted(t for t, c in loc.task_containers.items()
                    if c == container and t != ref.task and _active_name(t, loc.task_modes) == t)
    if others:
        note = (f"container {container} also runs task{'s' if len(others) > 1 else ''} "
                f"{', '.join(repr(t) for t in others[:3])}{' ...' if len(others) > 3 else ''}: its "
                "locality is left as it is (a container moves whole); 'statectl standby failover "
                f"--container {container}' moves all its tasks")
        return LocalityPlan(container, host, current, False, note, note)
    return LocalityPlan(container, host, current, True, f"task {ref.task!r} runs in container {container}")


@dataclass
class Violation:
    """A task whose active and standby containers are mapped to one host (no task may share a host with its
    standby: that host's loss would take both)."""

    task: str
    standby: str
    host: str
    container: str
    standby_container: str


@dataclass
class UnmappedStandby:
    """A standby container with no host mapping (none, or an empty host: Samza's ANY_HOST). After a failover
    Samza deletes the standby's mapping and asks for any host (StandbyContainerManager), so this is a state to
    report, not an error. ``active_container``: the container of its tasks' actives (None: not known);
    ``tasks``: its standby tasks, sorted."""

    container: str
    active_container: str | None
    tasks: list[str]


@dataclass
class Proposal:
    """Where standby container ``standby_container`` can be placed keeping invariant 1 as Samza's
    StandbyContainerManager.checkStandbyConstraints checks it: ``candidate_hosts`` (sorted; empty: none) are the
    candidates that no conflicting container (its active, another standby replica of the same active) is
    mapped to. ``reason``: "unmapped"; "violation" (it shares a host with its active: a :class:`Violation`);
    "replica_on_same_host" (it shares a host with another standby replica of the same active, which Samza's
    allocator does not do, though not the seed's invariant)."""

    standby_container: str
    active_container: str | None
    reason: str
    candidate_hosts: list[str]


@dataclass
class PlacementResult:
    tasks: int
    standbys: int
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmapped: list[UnmappedStandby] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)


def check_placement(bootstrap: str, job: str, job_id: str, *, hosts: list[str] | None = None,
                    security: KafkaSecurity | None = None) -> PlacementResult:
    """The seed's first invariant: no task on the same host as one of its standbys, from the job's
    task -> container and container -> host assignments on its coordinator stream. Also lists the standby
    containers with no host mapping, and proposes for each of them and each standby container in violation
    the hosts it can be placed on (:func:`placement_hosts`), from ``hosts`` (default: every host the job's
    locality names). Reads only. Raises UsageError (exit 2) for an empty host in ``hosts``, before reading;
    NotFoundError (exit 10) when the coordinator stream does not exist."""
    if hosts is not None and any(not h.strip() for h in hosts):
        raise UsageError("--host must name a host, not an empty string")
    with CoordinatorStream(bootstrap, job, job_id, security=security) as cs:
        cs.require()
        loc = cs.locality()
        problems = list(cs.problems)
    result = PlacementResult(0, 0, notes=[f"skipped a malformed record: {p}" for p in problems])
    for name, container in sorted(loc.task_containers.items()):
        parsed = _standby_of(name, loc)
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
        if host is None:
            result.notes.append(f"{task}: no host known for its container yet")
        elif host == standby_host:
            result.violations.append(Violation(task, name, host, active_container, container))
    _propose(result, loc, hosts)
    return result


def _propose(result: PlacementResult, loc: Locality, hosts: list[str] | None) -> None:
    """Fill ``result.unmapped`` and ``result.proposals`` (and their notes) from ``loc``."""
    candidates = sorted(set(hosts) if hosts is not None else {h for h in loc.container_hosts.values() if h})
    in_violation = {v.standby_container for v in result.violations}
    for container, tasks in sorted(standby_containers(loc).items()):
        active = active_container_of(container, loc)
        if not loc.container_hosts.get(container):
            result.unmapped.append(UnmappedStandby(container, active, tasks))
            reason = "unmapped"
        elif container in in_violation:
            reason = "violation"
        elif shared := _replicas_on_host(container, loc):
            # Not the seed's invariant (exit 0), but Samza's: it does not start two replicas of one active on a
            # host (StandbyContainerManager.checkStandbyConstraints), as one host's loss would take both.
            result.notes.append(f"standby container {container} shares host {loc.container_hosts[container]} with "
                                f"standby container{'s' if len(shared) > 1 else ''} {', '.join(shared)} of the same "
                                "active")
            reason = "replica_on_same_host"
        else:
            continue
        fit = placement_hosts(container, loc, candidates)
        result.proposals.append(Proposal(container, active, reason, fit))
        if not fit:
            why = ("the job's locality names no host (pass --host)" if not candidates else
                   f"every candidate ({', '.join(candidates)}) runs its active or another replica of it")
            result.notes.append(f"no host to propose for standby container {container}: {why}")


def _replicas_on_host(container: str, loc: Locality) -> list[str]:
    """The other standby containers of the same active mapped to ``container``'s host (sorted)."""
    host = loc.container_hosts.get(container)
    standbys = standby_containers(loc)
    return [c for c in conflicting_containers(container, loc) if c in standbys and loc.container_hosts.get(c) == host]


def _standby_of(task: str, loc: Locality) -> tuple[str, int] | None:
    """(active task, replica) when ``task`` is a standby task: Samza's record of its mode says, else its name's
    shape (formats.coordinator.active_of_standby)."""
    return active_of_standby(task) if loc.task_modes.get(task) in (None, "Standby") else None


def _active_tasks(container: str, loc: Locality) -> set[str]:
    """The active tasks of container ``container``'s tasks: its active tasks and the actives of its standby
    tasks (StandbyTaskUtil.getCorrespondingActiveTasks)."""
    out = set()
    for task, c in loc.task_containers.items():
        if c == container:
            parsed = _standby_of(task, loc)
            out.add(task if parsed is None else parsed[0])
    return out


def standby_containers(loc: Locality) -> dict[str, list[str]]:
    """Container id -> its standby tasks (sorted), for every container that holds a standby task. Pure."""
    out: dict[str, list[str]] = {}
    for task, container in sorted(loc.task_containers.items()):
        if _standby_of(task, loc) is not None:
            out.setdefault(container, []).append(task)
    return out


def active_container_of(container: str, loc: Locality) -> str | None:
    """The container that runs the active tasks of standby container ``container``'s tasks, when that is one
    container; else Samza's own rule for the ids it makes, ``<active container id>-<replica n>``
    (StandbyTaskUtil.getActiveContainerId), when that names a container of the job; else None. Pure."""
    actives = {loc.task_containers[a] for a in _active_tasks(container, loc)
               if a in loc.task_containers and _standby_of(a, loc) is None} - {container}
    if len(actives) == 1:
        return next(iter(actives))
    prefix = container.split("-")[0]
    if not actives and prefix != container and prefix in set(loc.task_containers.values()):
        return prefix
    return None


def conflicting_containers(container: str, loc: Locality) -> list[str]:
    """The containers container ``container`` may not share a host with (sorted): every other container whose
    tasks' active tasks overlap its own, so a standby's active and the other standby replicas of the same
    active (StandbyTaskUtil.getStandbyContainerConstraints, which StandbyContainerManager.checkStandbyConstraints
    enforces when it starts a container on a host). Pure."""
    mine = _active_tasks(container, loc)
    others = set(loc.task_containers.values()) - {container}
    return sorted(c for c in others if mine & _active_tasks(c, loc))


def placement_hosts(container: str, loc: Locality, candidates: list[str]) -> list[str]:
    """The hosts of ``candidates`` (sorted, each once) that container ``container`` can be placed on keeping
    invariant 1 as Samza checks it: none of its :func:`conflicting_containers` is mapped there. A conflicting
    container with no host (or Samza's empty ANY_HOST) rules out no host. Pure."""
    taken = {loc.container_hosts.get(c) for c in conflicting_containers(container, loc)}
    return sorted(set(candidates) - taken)
