"""standby follow --pre-restore / promote of a blob-store job: the latest snapshot kept restored on the standby
host, out of the job's state dir, and renamed by promote into the checkpoint dir Samza's next start reuses, so a
failover there takes seconds.

What the start does (BlobStoreRestoreManager.restoreStores): it deletes the task's store dir
``<state>/<store>/<task dir>``, then reads the SnapshotIndex the task's latest checkpoint names and looks for
``<store dir>-<checkpointId>`` (StorageManagerUtil.getStoreCheckpointDir; the id is the index's
``snapshotMetadata.checkpointId``). If that dir exists and is identical to the snapshot
(shouldRestore: DirDiffUtil.areSameDir(FILES_TO_IGNORE, compareLargeFileChecksums=false,
compareFileOwners=true)), it is renamed into the store dir and nothing is downloaded; else every
checkpoint dir of the task is deleted and the snapshot downloaded whole. (``stores.<s>.clean.on.container.start``
always downloads.)

follow_pre_restored keeps that dir in the standby root (local.layout.standby_root), at
``<root>/prerestore/<store>/<task dir>-<checkpointId>``: never in the state dir, which a container of the job
starting on this host without a checkpoint clears whole (ContainerStorageManager.clearLoggedStores; a Samza
standby container at each start). It reads the job's checkpoint topic on as checkpoints come
(KafkaCheckpointLog), and for each new snapshot of the store it restores the SnapshotIndex into that dir with the
restore engine (engine.restore: files identical to those of the previous pre-restored dir beside it are
hard-linked, only new ones downloaded; the dir is built aside and renamed into place, fsynced), then deletes the
previous one. It deletes only dirs its status file names (``<root>/prerestore/<store>/<task dir>.standby.json``,
written before a dir is made: ``replica_dir``, the complete one, and ``pending_dir``, the one being built or left
to delete), never one it did not make. Its lock (one follower per task and store) and status file sit beside
that status file. Only on a host that runs no active of the task (standby.check_active_path). A pre-restore an
older statectl kept (its status file in ``<state>/.statectl-standby/prerestore/``, its dir at
``<state>/<store>/<task dir>-<checkpointId>``) is moved into the standby root by the next follow, and promoted
from where it is.

promote_pre_restored: with the job restoring the store from the blob store, fence that follower (Invariant
2), check the pre-restored dir is the checkpoint the job's start reads and identical to its snapshot, bring it
there incrementally within the timeout when it is behind, and rename it (one atomic rename: the standby root is
on the state dir's filesystem) to ``<store dir>-<checkpointId>`` for the next start to rename into the store
dir. The active store dir is never touched (the start deletes it). Without a pre-restored dir it is refused
(DiscardedError, exit 14) as before.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.standby import (
    FENCE_TIMEOUT_S,
    FOLLOWER,
    PROMOTER,
    FollowResult,
    FollowStatus,
    PromoteLock,
    PromotePlan,
    PromoteResult,
    Replica,
    ReplicaLock,
    _fence,
    _follower_to_fence,
    _restart,
    _write_status,
    check_active_path,
    check_not_promoting,
    read_status,
)
from statectl.engine.follower import FollowerSettings
from statectl.errors import (
    DiscardedError,
    DiskFullError,
    LockHeldError,
    NotFoundError,
    StatectlError,
    UsageError,
)
from statectl.formats import jobconfig
from statectl.formats.jobconfig import batch_suffix
from statectl.formats.checkpoint import BLOB_STORE_FACTORY, CheckpointV2, checkpoint_topic, parse_checkpoint_id
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.local.layout import (
    check_standby_root,
    checkpoint_dir,
    device_of,
    old_standby_root,
    standby_root,
    store_dir,
    task_dir_name,
)
from statectl.fsutil import fsync_dir, make_dirs, owner_of
from statectl.local.staged import TMP_INFIX, remove_dead_temp_dirs
from statectl.progress import NoteRecorder, NullProgress, ProgressReporter
from statectl.snapshot.model import DirIndex, SnapshotIndex

PRE_RESTORED = "pre-restored"
# Level 1 of the standby root for the pre-restore followers' files: no "-" in it, so that Samza's
# TaskStorageCommitManager.deleteOldCheckpointDirs (``<state>/<x>/<task dir>-*``) never matches it.
PRERESTORE_DIR = "prerestore"
# BlobStoreRestoreManager.FILES_TO_IGNORE: written into a checkpoint dir after its upload
# (TaskStorageCommitManager.writeCheckpointToStoreDirectories), not compared with the snapshot.
FILES_TO_IGNORE = frozenset({"OFFSET", "OFFSET-v2", "SIDE-INPUT-OFFSETS", "CHECKPOINT-V2"})
POLL_S = 0.5


def prerestore_replica(state_dir: Path, ref: StoreRef, root: Path | None = None,
                       config: Mapping[str, str] | None = None) -> Replica:
    """The follower's handle: ``replica_dir`` is the task's active store dir (promote renames a pre-restored dir
    beside it; check_active_path reads its LOCK), the lock and status files are
    ``<root>/prerestore/<store>/<task dir>.standby.{lock,json}`` (``root``: the standby root, default beside the
    state dir), the pre-restored dirs beside them (:func:`_base`); its ``changelog`` names the job's checkpoint
    topic as KafkaCheckpointLog.topic does, ``-<app.run.id>`` for a BATCH job of ``config`` (None: the
    stream's). UsageError for a name store_dir refuses."""
    active = store_dir(Path(state_dir), ref.store, ref.task).absolute()
    files = standby_root(state_dir, root) / PRERESTORE_DIR / ref.store
    topic = checkpoint_topic(ref.job, ref.job_id) + batch_suffix(config or {})
    return Replica(ref, topic, 0, active, files_dir=files)


def checkpoint_log_topic(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None) -> str:
    """The job's checkpoint topic, as a pre-restore follows it (KafkaCheckpointLog.topic: the BATCH suffix from
    the job's config on its coordinator stream). StatectlError when the brokers cannot be reached."""
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security)
    try:
        return log.topic
    finally:
        log.close()


def _old_prerestore_replica(state_dir: Path, ref: StoreRef) -> Replica:
    """The handle of a pre-restore an older statectl kept: its files in ``<state>/.statectl-standby/prerestore/``,
    its dirs beside the active store dir."""
    return prerestore_replica(state_dir, ref, old_standby_root(state_dir))


def locate_pre_restore(state_dir: Path, ref: StoreRef, root: Path | None = None) -> Replica:
    """The handle promote takes: the pre-restore in the standby root when it has a status file, else one an older
    statectl kept in the state dir when that has one, else the standby root's (promote then finds none). Reads
    only."""
    anchor = prerestore_replica(state_dir, ref, root)
    if _own_status(anchor) is None:
        old = _old_prerestore_replica(state_dir, ref)
        if _own_status(old) is not None:
            return old
    return anchor


def _base(anchor: Replica) -> Path:
    """The dir whose checkpoint dirs (``<base>-<checkpointId>``) the pre-restored dirs are: ``<task dir>`` beside
    the lock and status files in the standby root; for a pre-restore an older statectl kept (its files in the
    state dir), the active store dir itself."""
    assert anchor.files_dir is not None
    if _in_state_dir(anchor, anchor.files_dir):
        return anchor.replica_dir
    return anchor.files_dir / task_dir_name(anchor.ref.task)


# -- what "identical to the snapshot" means -------------------------------------------------------------


def snapshot_differences(local: Path, index: DirIndex, *, limit: int = 5) -> list[str]:
    """How ``local`` differs from the snapshot's DirIndex by Samza's rule for reusing a checkpoint dir
    (DirDiffUtil.areSameDir(FILES_TO_IGNORE, false, true) in BlobStoreRestoreManager.shouldRestore): the same
    files (Java's File.isFile: symlinks followed) and sub-dirs, recursively, names in FILES_TO_IGNORE left out on
    both sides, each file the same by snapshot.diff.same_local_file (DirDiffUtil.areSameFile with owners
    compared, never looser). Empty when identical; at most ``limit`` lines. Reads only."""
    from statectl.snapshot.diff import LocalFile, same_local_file

    out: list[str] = []

    def walk(path: Path, d: DirIndex, rel: str) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError as e:
            out.append(f"{rel or '.'}: {e.strerror or e}")
            return
        files = {e.name: e for e in entries if e.is_file()}
        dirs = {e.name: e for e in entries if e.is_dir()}
        remote_files = {f.file_name: f for f in d.files_present}
        remote_dirs = {s.dir_name: s for s in d.sub_dirs_present}
        for name in sorted(set(files) | set(remote_files)):
            if name in FILES_TO_IGNORE:
                continue
            if name not in files:
                out.append(f"{rel}{name}: missing")
            elif name not in remote_files:
                out.append(f"{rel}{name}: not in the snapshot")
            else:
                p = Path(files[name].path)
                if not same_local_file(LocalFile.from_stat(p, p.stat()), remote_files[name]):
                    out.append(f"{rel}{name}: differs (size, owner, permissions or CRC)")
        for name in sorted(set(dirs) | set(remote_dirs)):
            if name not in dirs:
                out.append(f"{rel}{name}/: missing")
            elif name not in remote_dirs:
                out.append(f"{rel}{name}/: not in the snapshot")
            else:
                walk(Path(dirs[name].path), remote_dirs[name], f"{rel}{name}/")

    if not local.is_dir():
        return [f"{local}: no such dir"]
    walk(local, index, "")
    return out[:limit]


# -- the job's side ---------------------------------------------------------------------------------------


def restores_from_blob_store(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None,
                             timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether the job's next start restores ``ref``'s store with the blob-store backend
    (jobconfig.checkpoint_restore_factory over its config on the coordinator stream and the checkpoint that start
    reads for the task, as standby.next_start reads them). False without a coordinator stream or config. Reads
    only; StatectlError for a config Samza cannot read or brokers that cannot be reached."""
    from statectl.kafka.coordinator import CoordinatorStream

    with CoordinatorStream(bootstrap, ref.job, ref.job_id, timeout_s=timeout_s, security=security) as cs:
        if not cs.refresh():
            return False
        config = cs.config()
    if not config:
        return False
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, timeout_s=timeout_s, security=security, config=config)
    try:
        cp = log.read_checkpoints().get(ref.task)
    finally:
        log.close()
    try:
        return jobconfig.checkpoint_restore_factory(config, ref.store, cp) == BLOB_STORE_FACTORY
    except jobconfig.JobConfigError as e:
        raise StatectlError(f"the config of job {ref.job}-{ref.job_id}: {e}",
                            hint="the job cannot start with it either: fix the job's config") from None


def _clean_on_start(bootstrap: str, ref: StoreRef, security: KafkaSecurity | None) -> bool:
    from statectl.kafka.coordinator import CoordinatorStream

    with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
        config = cs.config() if cs.refresh() else {}
    try:
        return jobconfig.clean_on_start(config, ref.store)
    except jobconfig.JobConfigError as e:
        raise StatectlError(f"the config of job {ref.job}-{ref.job_id}: {e}") from None


# -- restoring one snapshot into its checkpoint dir --------------------------------------------------------


class _Halted(StatectlError):
    """A pre-restore stopped part-way (the follower asked to stop, or promote's deadline): the restore's
    staged dir is removed, the checkpoint dir not made."""


class _Watch(NoteRecorder):
    """Progress that halts the restore (between the chunks it writes) once ``halt()`` says why."""

    def __init__(self, inner: ProgressReporter, halt: Callable[[], str | None]):
        super().__init__(inner)
        self._halt = halt

    def _check(self) -> None:
        why = self._halt()
        if why:
            raise _Halted(why)

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        self._check()
        super().start(description, total_bytes, total_files)

    def advance(self, nbytes: int) -> None:
        self._check()
        super().advance(nbytes)


@dataclass
class _Made:
    target: Path
    checkpoint_id: str
    downloaded: int = 0
    reused: int = 0
    bytes_downloaded: int = 0
    differences: tuple[str, ...] = ()


def _index(blobstore: BlobStore, blob_id: str) -> SnapshotIndex:
    from statectl.catalog.index import read_index

    return read_index(blobstore, blob_id)


def _make(anchor: Replica, state_dir: Path, blob_id: str, index: SnapshotIndex, blobstore: BlobStore,
          catalog: BlobCheckpointStore, status: FollowStatus, halt: Callable[[], str | None],
          progress: ProgressReporter) -> _Made:
    """Make ``<base>-<index's checkpoint id>`` (:func:`_base`) hold the snapshot (status says it is ours first),
    and return what it took. A dir there already that the status names and that is identical is kept as it is."""
    from statectl.engine.restore import RestoreOptions, restore

    cp = index.snapshot_metadata.checkpoint_id
    base = _base(anchor)
    target = checkpoint_dir(base, cp)  # named as StorageManagerUtil.getStoreCheckpointDir names it
    made = _Made(target, cp)
    if os.path.lexists(target) and str(target) in _owned(status):
        made.differences = tuple(snapshot_differences(target, index.dir_index))
        if not made.differences:
            return made
    if str(target) != status.replica_dir:
        _drop_pending(status, keep=target)
        status.pending_dir = str(target)
    _write_status(anchor, status)  # before the dir exists: it is statectl's from its first byte
    # No state_dir: the target is this task's own pre-restored dir (statectl's, the status says), which
    # check_target would otherwise take for another store's dir in the state dir.
    r = restore(RestoreOptions(anchor.ref, base, target_dir=target, snapshot=blob_id, force=True),
                blobstore, catalog, _Watch(progress, halt))
    made.downloaded, made.reused, made.bytes_downloaded = r.files_downloaded, r.files_reused, r.bytes_downloaded
    made.differences = tuple(snapshot_differences(target, index.dir_index))
    return made


def _owned(status: FollowStatus) -> set[str]:
    return {d for d in (status.replica_dir, status.pending_dir) if d}


def _remove_dir(path: str) -> None:
    p = Path(path)
    if p.is_symlink():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)


def _drop_pending(status: FollowStatus, *, keep: Path | None = None) -> None:
    """Delete the dir ``pending_dir`` names unless it is ``keep`` or the complete one (it is ours: the
    status named it before it was made)."""
    pending = status.pending_dir
    if pending and pending != status.replica_dir and (keep is None or pending != str(keep)):
        _remove_dir(pending)
    status.pending_dir = None


def _adopt(anchor: Replica, status: FollowStatus, made: _Made, blob_id: str) -> None:
    """The new dir is complete: the status names it, then the other dir it named is deleted."""
    others = sorted(_owned(status) - {str(made.target)})  # at most one: _make keeps it so
    status.replica_dir, status.checkpoint_id, status.seeded_from = str(made.target), made.checkpoint_id, blob_id
    status.pending_dir = others[0] if others else None
    _write_status(anchor, status)  # a kill from here on: the next run deletes it (still named)
    for d in others:
        _remove_dir(d)
    status.pending_dir = None
    _write_status(anchor, status)


def _revert(anchor: Replica, status: FollowStatus, kept: FollowStatus) -> None:
    """Back to the status ``kept``: a dir made since (named by ``status`` only) is deleted."""
    for d in _owned(status) - _owned(kept):
        _remove_dir(d)
    _write_status(anchor, kept)


def _remove_dead_stages(anchor: Replica) -> None:
    """The staged dirs restores killed part-way left beside the task's checkpoint dirs (local.staged names
    them ``.<target><TMP_INFIX><pid>-``; only those whose pid is gone)."""
    base = _base(anchor)
    parent = base.parent
    prefix = f".{base.name}-"
    if not parent.is_dir():
        return
    for p in parent.iterdir():
        if p.name.startswith(prefix) and TMP_INFIX in p.name:
            remove_dead_temp_dirs(parent / p.name[1:p.name.index(TMP_INFIX)])


def check_here(anchor: Replica, bootstrap: str, *, security: KafkaSecurity | None = None) -> None:
    """UsageError (exit 2) unless this host runs no active of the task (standby.check_active_path: the store's
    LOCK free, the job's locality elsewhere): a standby stands by where its active is not, and promote's rename
    into the state dir must not land under a running active. Reads only."""
    try:
        check_active_path(anchor, bootstrap, security=security, in_state_dir=False)
    except UsageError as e:
        raise UsageError(str(e).replace("--layout active-path", "--pre-restore"),
                         hint="pre-restore on a host that runs no active of this task") from None


def _lock(anchor: Replica, wait_s: float = 0.0, role: str = FOLLOWER) -> ReplicaLock:
    try:
        return ReplicaLock(anchor, wait_s=wait_s, role=role)
    except LockHeldError as e:
        raise LockHeldError(str(e).replace(f"replica {anchor.replica_dir}",
                                           f"the pre-restore of store {anchor.ref.store!r} of task "
                                           f"{anchor.ref.task!r}"),
                            hint="stop that follower first, or promote (which fences it)") from None


def pre_restore_status(state_dir: Path, ref: StoreRef, root: Path | None = None) -> FollowStatus | None:
    """The status of the pre-restore of ``ref``'s store on this host, in the standby root ``root`` (default beside
    the state dir) or where an older statectl kept it (None: none kept here). Reads only."""
    return _own_status(locate_pre_restore(state_dir, ref, root))


def _own_status(anchor: Replica) -> FollowStatus | None:
    st = read_status(anchor)
    return st if st is not None and st.layout == PRE_RESTORED else None


def _move_old(anchor: Replica, state_dir: Path, progress: ProgressReporter) -> None:
    """Move the pre-restore an older statectl kept (its files in ``<state>/.statectl-standby/prerestore/``, its dir
    beside the active store dir, both in the state dir Samza clears) into the standby root ``anchor`` is in: the
    status file naming the new place is written first, then the dir is renamed, the old one's other dir (being
    built or left to delete: its own) deleted, its files last; a rerun after a kill finishes the move. Call it
    holding ``anchor``'s lock. LockHeldError (exit 11) while its follower runs; StatectlError when the rename
    fails."""
    old = _old_prerestore_replica(state_dir, anchor.ref)
    st = _own_status(old)
    if st is None or old.files_dir == anchor.files_dir:
        return
    moved = checkpoint_dir(_base(anchor), st.checkpoint_id) if st.replica_dir and st.checkpoint_id else None
    now = _own_status(anchor)
    if now is not None and now.replica_dir and os.path.lexists(now.replica_dir) and now.replica_dir != str(moved):
        progress.note(f"a pre-restore an older statectl kept is left in {old.files_dir}: one is kept at "
                      f"{now.replica_dir}; delete the old one's {old.status_path} and {st.replica_dir}")
        return
    with _lock(old):
        _write_status(anchor, replace(st, replica_dir=str(moved) if moved else "", pending_dir=None,
                                      checkpoint_id=st.checkpoint_id if moved else None))
        if moved is not None and os.path.isdir(st.replica_dir) and not os.path.lexists(moved):
            try:
                make_dirs(moved.parent, owner_of(moved.parent))
                os.rename(st.replica_dir, moved)
                fsync_dir(moved.parent)
            except OSError as e:
                raise StatectlError(f"moving the pre-restored dir {st.replica_dir} to {moved} failed: {e}; it is "
                                    "where it was", hint="fix that, then follow again") from e
        if st.pending_dir and st.pending_dir != st.replica_dir:
            _remove_dir(st.pending_dir)
        old.status_path.unlink(missing_ok=True)
    old.lock_path.unlink(missing_ok=True)
    progress.note(f"moved the pre-restore an older statectl kept in the state dir (where Samza deletes it) to "
                  f"{moved or anchor.files_dir}")


def _check_not_half_promoted(anchor: Replica, status: FollowStatus | None) -> None:
    """UsageError (exit 2) when ``status`` says a promote renamed its dir into the state dir and was killed
    before it ended: the follower must not take that dir back; promote again finishes it."""
    if status is not None and status.pending_dir and _in_state_dir(anchor, Path(status.pending_dir)) \
            and not _in_state_dir(anchor, _base(anchor)):
        raise UsageError(f"a promote of store {anchor.ref.store!r} of task {anchor.ref.task!r} was interrupted after "
                         f"it moved the pre-restored dir to {status.pending_dir}",
                         hint="run 'statectl standby promote' for it again: it finishes the promote")


def _in_state_dir(anchor: Replica, path: Path) -> bool:
    state = Path(os.path.realpath(anchor.replica_dir.parents[1]))
    return state in Path(os.path.realpath(path)).parents


# -- follow --pre-restore ------------------------------------------------------------------------------------


def follow_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore,
                        catalog: BlobCheckpointStore, *, security: KafkaSecurity | None = None,
                        stop: threading.Event | None = None,
                        on_status: Callable[[FollowStatus], None] | None = None,
                        progress: ProgressReporter | None = None, status_every_s: float = 1.0,
                        poll_s: float = POLL_S, settings: FollowerSettings | None = None,
                        root: Path | None = None) -> FollowResult:
    """Keep the latest snapshot of ``ref``'s store pre-restored in the standby root (``root``, default beside the
    state dir), as the checkpoint dir Samza's next start reuses once promote renames it into the state dir, until
    ``stop`` is set (see the module doc); return what was done (``records_applied``: files
    downloaded; ``applied_offset``: None). Each snapshot's dir is built aside and renamed in (a kill leaves no
    partial dir under the checkpoint dir's name) and only then is the previous one deleted; a rerun finishes
    what a killed one left. Status lines (``on_status``) carry ``checkpoint_id`` (the one pre-restored),
    ``lag_records`` (1 while a newer snapshot is not pre-restored yet, else 0) and ``lag_s`` (the age of that
    newer checkpoint). A pre-restore an older statectl kept in the state dir is moved into the standby root
    first (with a note).

    Raises UsageError (exit 2, before anything is written) when this host runs the task's active
    (check_here), for a standby root in the state dir or on another filesystem (check_standby_root), or when a
    promote of the store was interrupted after its rename (promote again finishes it); LockHeldError (exit 11)
    when another follower pre-restores the store; DiskFullError (exit 1) when the disk fills (the previous dir
    kept). Brokers that stop answering and snapshots that cannot be
    read are ridden out with a note (a snapshot that failed is tried again when a newer one lands)."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    anchor = prerestore_replica(state_dir, ref, root)
    check_standby_root(state_dir, standby_root(state_dir, root))
    check_here(anchor, bootstrap, security=security)
    result = FollowResult("", None, 0, 0, 0.0)
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security)
    try:
        anchor = replace(anchor, changelog=log.topic)  # a BATCH job's carries its run id, as the log reads it
        make_dirs(standby_root(state_dir, root), owner_of(state_dir))
        with _lock(anchor):
            _move_old(anchor, state_dir, progress)
            previous = _own_status(anchor)
            _check_not_half_promoted(anchor, previous)
            status = FollowStatus(previous.replica_dir if previous else "", anchor.changelog, 0, os.getpid(),
                                  socket.gethostname(), follower=settings,
                                  job=ref.job, job_id=ref.job_id, task=ref.task, store=ref.store,
                                  layout=PRE_RESTORED,
                                  checkpoint_id=previous.checkpoint_id if previous else None,
                                  pending_dir=previous.pending_dir if previous else None,
                                  seeded_from=previous.seeded_from if previous else None)
            _remove_dead_stages(anchor)
            if status.replica_dir and not Path(status.replica_dir).is_dir():
                status.replica_dir, status.checkpoint_id = "", None  # gone (a Samza start took it)
            _write_status(anchor, status)
            said: dict[str, str] = {}
            failed: set[str] = set()
            last_status = 0.0
            latest: tuple[str, str] | None = None

            def say(kind: str, text: str | None) -> None:
                if text is not None and said.get(kind) != text:
                    progress.note(text)
                if text is None:
                    said.pop(kind, None)
                else:
                    said[kind] = text

            while not stop.is_set():
                try:
                    latest = log.latest(ref)
                    say("kafka", None)
                    if latest is None:
                        say("wait", f"the latest checkpoint of task {ref.task!r} names no snapshot of store "
                                    f"{ref.store!r}: waiting for one")
                except NotFoundError as e:
                    latest = None
                    say("wait", f"{e}: waiting for one")
                except StatectlError as e:
                    say("kafka", f"checkpoint topic {log.topic}: {e}; following on")
                if latest is not None and latest[1] != status.seeded_from and latest[1] not in failed:
                    say("wait", None)
                    try:
                        _pre_restore(anchor, state_dir, latest[1], blobstore, catalog, status, stop, progress,
                                     result)
                    except _Halted:
                        break
                    except DiskFullError:
                        raise
                    except StatectlError as e:
                        failed.add(latest[1])
                        progress.note(f"pre-restoring snapshot {latest[1]} of checkpoint {latest[0]} failed: {e}; "
                                      "trying again when a newer snapshot lands")
                now = time.monotonic()
                if now - last_status >= status_every_s or stop.is_set():
                    _lag(status, latest)
                    _write_status(anchor, status)
                    if on_status is not None:
                        on_status(status)
                    last_status = now
                stop.wait(poll_s)
            _lag(status, latest)
            _write_status(anchor, status)
    finally:
        log.close()
    result.replica_dir = status.replica_dir
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(getattr(progress, "notes", []))
    return result


def _lag(status: FollowStatus, latest: tuple[str, str] | None) -> None:
    if latest is None:
        return
    if latest[1] == status.seeded_from:
        status.lag_records, status.lag_s = 0, 0.0
        return
    status.lag_records = 1
    try:
        status.lag_s = round(max(0.0, time.time() - parse_checkpoint_id(latest[0])[0] / 1000), 3)
    except ValueError:
        status.lag_s = None


def _pre_restore(anchor: Replica, state_dir: Path, blob_id: str, blobstore: BlobStore, catalog: BlobCheckpointStore,
                 status: FollowStatus, stop: threading.Event, progress: ProgressReporter,
                 result: FollowResult) -> None:
    began = time.monotonic()
    index = _index(blobstore, blob_id)
    cp = index.snapshot_metadata.checkpoint_id
    target = checkpoint_dir(_base(anchor), cp)
    if os.path.lexists(target) and str(target) not in _owned(status):
        # Not statectl's (in an old layout, the job's own checkpoint dir): never replaced nor deleted.
        status.seeded_from = blob_id
        progress.note(f"{target} exists and statectl did not make it (the job's own checkpoint dir): left as it is")
        return
    made = _make(anchor, state_dir, blob_id, index, blobstore, catalog, status,
                 lambda: "stopped" if stop.is_set() else None, progress)
    _adopt(anchor, status, made, blob_id)
    result.records_applied += made.downloaded
    progress.note(f"pre-restored snapshot {blob_id} (checkpoint {cp}) into {target}: {made.downloaded} files "
                  f"downloaded ({made.bytes_downloaded} bytes), {made.reused} reused from local files, in "
                  f"{time.monotonic() - began:.2f}s")
    if made.differences:
        progress.note(f"warning: {target} is not identical to the snapshot by Samza's rule "
                      f"({'; '.join(made.differences)}): the job's start would download it again")


# -- promote ---------------------------------------------------------------------------------------------------


@dataclass
class _PreRestorePlan:
    anchor: Replica
    status: FollowStatus
    checkpoint: str
    checkpoint_id: str
    snapshot_id: str
    index: SnapshotIndex
    promoted_dir: str


def _plan_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore, *,
                       security: KafkaSecurity | None, check_locality: bool,
                       root: Path | None = None) -> _PreRestorePlan:
    """promote_pre_restored's checks and decisions, reading only (see its doc for what it raises)."""
    from statectl.engine.standby import latest_checkpoints

    anchor = locate_pre_restore(state_dir, ref, root)
    refused = f"refusing to promote store {ref.store!r} of task {ref.task!r}"
    before = _own_status(anchor)
    follow_cmd = ("statectl standby follow --pre-restore --kafka ... --job ... --task ... --store ... "
                  "--state-dir ... --blobstore ...")
    if before is None:
        raise DiscardedError(
            f"{refused}: the job restores the store from the blob store (BlobStoreStateBackendFactory), whose "
            "restore deletes the store dir and every checkpoint dir but one identical to the snapshot, and no "
            "pre-restored checkpoint dir is kept on this host",
            hint=f"keep the latest snapshot pre-restored here with '{follow_cmd}', then promote")
    if _clean_on_start(bootstrap, ref, security):
        raise DiscardedError(f"{refused}: stores.{ref.store}.clean.on.container.start is true, so the job's start "
                             "downloads the snapshot whatever is here (BlobStoreRestoreManager.shouldRestore)",
                             hint=f"unset stores.{ref.store}.clean.on.container.start, then promote again")
    check_here(anchor, bootstrap if check_locality else None, security=security)
    _follower_to_fence(anchor)  # LockHeldError for one this host cannot stop, before anything changes
    # The checkpoint the job's start reads (task.checkpoint.read.versions), not merely the latest v2 one.
    cp = latest_checkpoints(bootstrap, ref, security).get(ref.task)
    blob_id = cp.state_checkpoint_markers.get(BLOB_STORE_FACTORY, {}).get(ref.store) if isinstance(
        cp, CheckpointV2) else None
    if blob_id is None:
        what = ("reads no checkpoint of the task, so its start deletes the store dir and every checkpoint dir"
                if cp is None else "reads a checkpoint of the task that names no snapshot of the store")
        raise DiscardedError(f"{refused}: the job {what} (task.checkpoint.read.versions decides which it reads)",
                             hint="promote after the job's next commit; a job restoring from the blob store reads "
                                  "v2 checkpoints (task.checkpoint.read.versions=2,1)")
    index = _index(blobstore, blob_id)
    checkpoint_id = index.snapshot_metadata.checkpoint_id
    target = checkpoint_dir(anchor.replica_dir, checkpoint_id)
    if device_of(_base(anchor)) != device_of(target.parent):
        raise UsageError(f"{refused}: its pre-restored dir is on another filesystem than {target.parent}, so it "
                         "cannot be renamed there in one atomic step",
                         hint="keep the standby root on the state dir's filesystem (--standby-root)")
    return _PreRestorePlan(anchor, before, cp.checkpoint_id, checkpoint_id, blob_id, index, str(target))


def _landed(status: FollowStatus, target: Path) -> bool:
    """Whether a promote renamed the pre-restored dir to ``target`` and was killed before it ended: the status
    names ``target`` as the dir being made, and its complete dir is gone."""
    return (status.pending_dir == str(target) and target.is_dir() and not target.is_symlink()
            and not (status.replica_dir and os.path.lexists(status.replica_dir)))


def _move_in(anchor: Replica, status: FollowStatus, staged: Path, target: Path) -> None:
    """Rename the complete pre-restored dir ``staged`` to ``target`` in the state dir, in one step: the status
    names ``target`` first (statectl's before it exists: a kill after the rename leaves it to the next promote,
    _landed), then the rename, fsynced, then the status names it as the complete dir. StatectlError when the
    rename fails (``staged`` is where it was)."""
    status.pending_dir = str(target)
    _write_status(anchor, status)
    try:
        make_dirs(target.parent, owner_of(target.parent))
        os.rename(staged, target)
    except OSError as e:
        status.pending_dir = None
        _write_status(anchor, status)
        raise StatectlError(f"cannot move the pre-restored dir {staged} to {target}: {e}; it is where it was",
                            hint="keep the standby root on the state dir's filesystem, then promote again") from e
    fsync_dir(target.parent)
    fsync_dir(staged.parent)
    failpoints.hit("pre-restore-moved")
    status.replica_dir, status.pending_dir = str(target), None
    _write_status(anchor, status)


def plan_promote_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore, *,
                              security: KafkaSecurity | None = None, locality: bool = True,
                              root: Path | None = None) -> PromotePlan:
    """The plan of ``promote_pre_restored`` (as standby.plan_promote's, ``restore_mode`` "blob-store"), with
    its checks, writing nothing: the follower is not fenced, no file is downloaded. ``locality``: also plan
    update_locality. Raises what promote_pre_restored raises before it fences the follower."""
    from statectl.engine.standby import _locked, lock_holder, plan_locality

    check_not_promoting(locate_pre_restore(state_dir, ref, root))
    plan = _plan_pre_restored(ref, state_dir, bootstrap, blobstore, security=security, check_locality=True,
                              root=root)
    anchor = plan.anchor
    owned = sorted(_owned(plan.status))
    out = PromotePlan(
        replica_dir=plan.status.replica_dir or str(anchor.replica_dir), promoted_dir=plan.promoted_dir,
        active_dir=str(anchor.replica_dir), restore_mode="blob-store", checkpoint_id=plan.checkpoint_id,
        applied_offset=None, catch_up_to=None,
        fence_pid=lock_holder(anchor)[0] if _locked(anchor.lock_path) else None, replaces_active=False,
        in_place=plan.promoted_dir in owned,
        notes=[f"blob-store restore: {plan.promoted_dir} is to be identical to snapshot {plan.snapshot_id} "
               f"(checkpoint {plan.checkpoint_id}); the pre-restored dirs now: {', '.join(owned) or 'none'}"])
    if locality:
        out.locality = plan_locality(bootstrap, ref, security=security)
    return out


def promote_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore,
                         catalog: BlobCheckpointStore, *, security: KafkaSecurity | None = None,
                         timeout_s: float = 60.0, on_locality: Callable[[], tuple[bool, str | None]] | None = None,
                         progress: ProgressReporter | None = None, restart_follower: bool = True,
                         check_locality: bool = True, promote_lock: bool = True,
                         root: Path | None = None) -> PromoteResult:
    """Promote the pre-restored dir of a job that restores ``ref``'s store from the blob store (call it when
    restores_from_blob_store says so): fence its follower (Invariant 2: nothing is promoted while it runs),
    make sure the pre-restored dir (in the standby root ``root``, or where an older statectl kept it:
    locate_pre_restore) is the snapshot of the checkpoint the job's start reads and identical to it (restoring it
    incrementally within ``timeout_s`` when it is behind), rename it to ``<store dir>-<checkpointId>`` in the
    state dir, delete the follower's older dir and its status and lock files; the job's next start renames the
    dir into the store dir (BlobStoreRestoreManager). A promote killed after that rename is finished by the
    next one. The active store dir is never touched. ``on_locality`` as
    standby.promote; ``restart_follower`` as standby.promote (False: a container's failover);
    ``check_locality`` False: the job's locality may place the task here already (a failover pointed it
    here), only the store's LOCK is checked. ``promote_lock`` False: the caller holds the store's PromoteLock
    (a failover); else it is taken first (LockHeldError, exit 11, while another promote runs). Result:
    ``restore_mode`` "blob-store", ``promoted_dir`` the checkpoint dir,
    ``checkpoint_id``, ``records_applied`` the files downloaded.

    Raises DiscardedError (exit 14, nothing changed) when there is no pre-restore of the store on this host
    (no follower's status file), the checkpoint the job reads for the task names no snapshot of the store (or
    there is none: ``task.checkpoint.read.versions``), or
    ``stores.<store>.clean.on.container.start`` (the start downloads the snapshot anyway); UsageError (exit 2)
    when this host runs the task's active, or the pre-restored dir is on another filesystem than the state dir;
    LockHeldError (exit 11) for a follower this host cannot stop;
    StatectlError (exit 1) when the dir cannot be brought to the snapshot within ``timeout_s`` or is not
    identical to it afterwards, and DiskFullError when the disk fills: the follower is then started again and
    its dirs are as they were."""
    import contextlib

    with PromoteLock(locate_pre_restore(state_dir, ref, root)) if promote_lock else contextlib.nullcontext():
        return _promote_pre_restored(ref, state_dir, bootstrap, blobstore, catalog, security, timeout_s, on_locality,
                                     progress or NullProgress(), restart_follower, check_locality, root)


def _promote_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore,
                          catalog: BlobCheckpointStore, security: KafkaSecurity | None, timeout_s: float,
                          on_locality: Callable[[], tuple[bool, str | None]] | None, progress: ProgressReporter,
                          restart_follower: bool, check_locality: bool, root: Path | None) -> PromoteResult:
    began = time.monotonic()
    plan = _plan_pre_restored(ref, state_dir, bootstrap, blobstore, security=security, check_locality=check_locality,
                              root=root)
    anchor, before, blob_id, index = plan.anchor, plan.status, plan.snapshot_id, plan.index
    checkpoint, cp, target = plan.checkpoint, plan.checkpoint_id, Path(plan.promoted_dir)
    result = PromoteResult(str(target), None, 0, 0.0, restore_mode="blob-store", checkpoint_id=cp)
    deadline = began + timeout_s
    was_following = _fence(anchor)
    try:
        with _lock(anchor, wait_s=FENCE_TIMEOUT_S, role=PROMOTER):
            status = _own_status(anchor) or before
            kept = replace(status)
            try:
                if os.path.lexists(target) and str(target) not in _owned(status):
                    raise StatectlError(f"cannot promote into {target}: it exists and statectl did not make it "
                                        "(the job's own checkpoint dir)",
                                        hint="leave it to the job: its next start checks it against the snapshot")
                if _landed(status, target):  # a promote killed after its rename: the dir is in place already
                    made = _Made(target, cp, differences=tuple(snapshot_differences(target, index.dir_index)))
                else:
                    made = _make(anchor, state_dir, blob_id, index, blobstore, catalog, status,
                                 lambda: ("timed out" if time.monotonic() > deadline else None), progress)
                if made.differences:
                    raise StatectlError(f"cannot promote {target}: it is not identical to snapshot {blob_id} by "
                                        f"Samza's rule ({'; '.join(made.differences)}): the job's start would "
                                        "download it again", hint="check the owner of the state dir's files "
                                        "(Samza compares owner and group names), then promote again")
            except _Halted:
                _revert(anchor, status, kept)
                raise StatectlError(f"promote of {target} timed out after {timeout_s:g}s bringing the pre-restored "
                                    f"dir to snapshot {blob_id}: the pre-restored dir is as it was",
                                    hint="promote again with a longer --timeout, or let the follower catch up") \
                    from None
            except StatectlError:
                _revert(anchor, status, kept)
                raise
            _adopt(anchor, status, made, blob_id)
            if made.target != target:
                _move_in(anchor, status, made.target, target)
            result.records_applied = made.downloaded
            # Only now: until here the status file is what proves the dirs statectl's own.
            anchor.status_path.unlink(missing_ok=True)
        anchor.lock_path.unlink(missing_ok=True)
        anchor.log_path.unlink(missing_ok=True)
    except Exception as e:
        if restart_follower and was_following:  # once the lock is released: the follower takes it again
            said = _restart(anchor, before, bootstrap)
            e.args = (f"{e}; {said}", *e.args[1:]) if isinstance(e, StatectlError) else e.args
        raise
    caught = ("was the latest checkpoint's already" if made.downloaded == 0 and made.reused == 0
              else f"brought to it: {made.downloaded} files downloaded, {made.reused} reused")
    result.notes.append(f"blob-store restore: the pre-restored dir {target} (checkpoint {cp} of checkpoint record "
                        f"{checkpoint}) {caught}; it is identical to snapshot {blob_id}, so the job's next start "
                        "renames it into the store dir instead of downloading (BlobStoreRestoreManager)")
    if on_locality is not None:
        result.locality_updated, note = on_locality()
        if note:
            result.notes.append(note)
    result.duration_s = round(time.monotonic() - began, 3)
    return result

