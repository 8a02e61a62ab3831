"""standby follow --pre-restore: the pre-restored dirs of a job that restores a store from the blob store.

What the job's start does (BlobStoreRestoreManager.restoreStores): it deletes the task's store dir
``<state>/<store>/<task dir>``, then reads the SnapshotIndex the task's latest checkpoint names and looks for
``<store dir>-<checkpointId>`` (StorageManagerUtil.getStoreCheckpointDir; the id is the index's
``snapshotMetadata.checkpointId``). If that dir exists and is identical to the snapshot (shouldRestore:
DirDiffUtil.areSameDir(FILES_TO_IGNORE, compareLargeFileChecksums=false, compareFileOwners=true)), it is renamed
into the store dir and nothing is downloaded; else every checkpoint dir of the task is deleted and the snapshot
downloaded whole. (``stores.<s>.clean.on.container.start`` always downloads.)

A pre-restore keeps that dir in the standby root (local.layout.standby_root), at
``<root>/prerestore/<store>/<task dir>-<checkpointId>``: never in the state dir, which a container of the job
starting on this host without a checkpoint clears whole. This module owns those dirs: their handle
(prerestore_replica), Samza's rule for "identical" (snapshot_differences), building one snapshot's dir with the
restore engine (make_checkpoint_dir: files identical to those of the previous dir are hard-linked, only new ones
downloaded; built aside and renamed into place), and the status file that names them
(``<root>/prerestore/<store>/<task dir>.standby.json``: ``replica_dir``, the complete one, and ``pending_dir``,
the one being built or left to delete), written before a dir is made: only dirs it names are ever deleted. A
pre-restore an older statectl kept (its status file in ``<state>/.statectl-standby/prerestore/``, its dir at
``<state>/<store>/<task dir>-<checkpointId>``) is moved into the standby root by the next follow
(move_old_pre_restore), and promoted from where it is.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from statectl.blobstore.base import BlobStore
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.standby.dirs import check_active_path
from statectl.engine.standby.replica import FOLLOWER, FollowStatus, Replica, ReplicaLock, read_status, write_status
from statectl.errors import LockHeldError, StatectlError, UsageError
from statectl.formats.checkpoint import checkpoint_topic
from statectl.formats.jobconfig import batch_suffix
from statectl.fsutil import fsync_dir, make_dirs, owner_of
from statectl.kafka.client import KafkaSecurity
from statectl.local.layout import checkpoint_dir, old_standby_root, standby_root, store_dir, task_dir_name
from statectl.local.staged import TMP_INFIX, remove_dead_temp_dirs
from statectl.progress import NoteRecorder, ProgressReporter
from statectl.snapshot.model import DirIndex, SnapshotIndex


PRE_RESTORED = "pre-restored"


# Level 1 of the standby root for the pre-restore followers' files: no "-" in it, so that Samza's
# TaskStorageCommitManager.deleteOldCheckpointDirs (``<state>/<x>/<task dir>-*``) never matches it.
PRERESTORE_DIR = "prerestore"


# BlobStoreRestoreManager.FILES_TO_IGNORE: written into a checkpoint dir after its upload
# (TaskStorageCommitManager.writeCheckpointToStoreDirectories), not compared with the snapshot.
FILES_TO_IGNORE = frozenset({"OFFSET", "OFFSET-v2", "SIDE-INPUT-OFFSETS", "CHECKPOINT-V2"})


def prerestore_replica(state_dir: Path, ref: StoreRef, root: Path | None = None,
                       config: Mapping[str, str] | None = None) -> Replica:
    """The follower's handle: ``replica_dir`` is the task's active store dir (promote renames a pre-restored dir
    beside it; check_active_path reads its LOCK), the lock and status files are
    ``<root>/prerestore/<store>/<task dir>.standby.{lock,json}`` (``root``: the standby root, default beside the
    state dir), the pre-restored dirs beside them (:func:`checkpoint_base`); its ``changelog`` names the job's checkpoint
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
    if own_status(anchor) is None:
        old = _old_prerestore_replica(state_dir, ref)
        if own_status(old) is not None:
            return old
    return anchor


def checkpoint_base(anchor: Replica) -> Path:
    """The dir whose checkpoint dirs (``<base>-<checkpointId>``) the pre-restored dirs are: ``<task dir>`` beside
    the lock and status files in the standby root; for a pre-restore an older statectl kept (its files in the
    state dir), the active store dir itself."""
    assert anchor.files_dir is not None
    if _in_state_dir(anchor, anchor.files_dir):
        return anchor.replica_dir
    return anchor.files_dir / task_dir_name(anchor.ref.task)


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


class Halted(StatectlError):
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
            raise Halted(why)

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        self._check()
        super().start(description, total_bytes, total_files)

    def advance(self, nbytes: int) -> None:
        self._check()
        super().advance(nbytes)


@dataclass
class MadeDir:
    target: Path
    checkpoint_id: str
    downloaded: int = 0
    reused: int = 0
    bytes_downloaded: int = 0
    differences: tuple[str, ...] = ()


def read_snapshot_index(blobstore: BlobStore, blob_id: str) -> SnapshotIndex:
    from statectl.catalog.index import read_index

    return read_index(blobstore, blob_id)


def make_checkpoint_dir(anchor: Replica, state_dir: Path, blob_id: str, index: SnapshotIndex, blobstore: BlobStore,
          catalog: BlobCheckpointStore, status: FollowStatus, halt: Callable[[], str | None],
          progress: ProgressReporter) -> MadeDir:
    """Make ``<base>-<index's checkpoint id>`` (:func:`checkpoint_base`) hold the snapshot (status says it is ours first),
    and return what it took. A dir there already that the status names and that is identical is kept as it is."""
    from statectl.engine.restore import RestoreOptions, restore

    cp = index.snapshot_metadata.checkpoint_id
    base = checkpoint_base(anchor)
    target = checkpoint_dir(base, cp)  # named as StorageManagerUtil.getStoreCheckpointDir names it
    made = MadeDir(target, cp)
    if os.path.lexists(target) and str(target) in owned_dirs(status):
        made.differences = tuple(snapshot_differences(target, index.dir_index))
        if not made.differences:
            return made
    if str(target) != status.replica_dir:
        _drop_pending(status, keep=target)
        status.pending_dir = str(target)
    write_status(anchor, status)  # before the dir exists: it is statectl's from its first byte
    # No state_dir: the target is this task's own pre-restored dir (statectl's, the status says), which
    # check_target would otherwise take for another store's dir in the state dir.
    r = restore(RestoreOptions(anchor.ref, base, target_dir=target, snapshot=blob_id, force=True),
                blobstore, catalog, _Watch(progress, halt))
    made.downloaded, made.reused, made.bytes_downloaded = r.files_downloaded, r.files_reused, r.bytes_downloaded
    made.differences = tuple(snapshot_differences(target, index.dir_index))
    return made


def owned_dirs(status: FollowStatus) -> set[str]:
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


def adopt_dir(anchor: Replica, status: FollowStatus, made: MadeDir, blob_id: str) -> None:
    """The new dir is complete: the status names it, then the other dir it named is deleted."""
    others = sorted(owned_dirs(status) - {str(made.target)})  # at most one: make_checkpoint_dir keeps it so
    status.replica_dir, status.checkpoint_id, status.seeded_from = str(made.target), made.checkpoint_id, blob_id
    status.pending_dir = others[0] if others else None
    write_status(anchor, status)  # a kill from here on: the next run deletes it (still named)
    for d in others:
        _remove_dir(d)
    status.pending_dir = None
    write_status(anchor, status)


def revert_status(anchor: Replica, status: FollowStatus, kept: FollowStatus) -> None:
    """Back to the status ``kept``: a dir made since (named by ``status`` only) is deleted."""
    for d in owned_dirs(status) - owned_dirs(kept):
        _remove_dir(d)
    write_status(anchor, kept)


def remove_dead_stages(anchor: Replica) -> None:
    """The staged dirs restores killed part-way left beside the task's checkpoint dirs (local.staged names
    them ``.<target><TMP_INFIX><pid>-``; only those whose pid is gone)."""
    base = checkpoint_base(anchor)
    parent = base.parent
    prefix = f".{base.name}-"
    if not parent.is_dir():
        return
    for p in parent.iterdir():
        if p.name.startswith(prefix) and TMP_INFIX in p.name:
            remove_dead_temp_dirs(parent / p.name[1:p.name.index(TMP_INFIX)])


def check_here(anchor: Replica, bootstrap: str, *, security: KafkaSecurity | None = None) -> None:
    """UsageError (exit 2) unless this host runs no active of the task (dirs.check_active_path: the store's
    LOCK free, the job's locality elsewhere): a standby stands by where its active is not, and promote's rename
    into the state dir must not land under a running active. Reads only."""
    try:
        check_active_path(anchor, bootstrap, security=security, in_state_dir=False)
    except UsageError as e:
        raise UsageError(str(e).replace("--layout active-path", "--pre-restore"),
                         hint="pre-restore on a host that runs no active of this task") from None


def lock_pre_restore(anchor: Replica, wait_s: float = 0.0, role: str = FOLLOWER) -> ReplicaLock:
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
    return own_status(locate_pre_restore(state_dir, ref, root))


def own_status(anchor: Replica) -> FollowStatus | None:
    st = read_status(anchor)
    return st if st is not None and st.layout == PRE_RESTORED else None


def move_old_pre_restore(anchor: Replica, state_dir: Path, progress: ProgressReporter) -> None:
    """Move the pre-restore an older statectl kept (its files in ``<state>/.statectl-standby/prerestore/``, its dir
    beside the active store dir, both in the state dir Samza clears) into the standby root ``anchor`` is in: the
    status file naming the new place is written first, then the dir is renamed, the old one's other dir (being
    built or left to delete: its own) deleted, its files last; a rerun after a kill finishes the move. Call it
    holding ``anchor``'s lock. LockHeldError (exit 11) while its follower runs; StatectlError when the rename
    fails."""
    old = _old_prerestore_replica(state_dir, anchor.ref)
    st = own_status(old)
    if st is None or old.files_dir == anchor.files_dir:
        return
    moved = checkpoint_dir(checkpoint_base(anchor), st.checkpoint_id) if st.replica_dir and st.checkpoint_id else None
    now = own_status(anchor)
    if now is not None and now.replica_dir and os.path.lexists(now.replica_dir) and now.replica_dir != str(moved):
        progress.note(f"a pre-restore an older statectl kept is left in {old.files_dir}: one is kept at "
                      f"{now.replica_dir}; delete the old one's {old.status_path} and {st.replica_dir}")
        return
    with lock_pre_restore(old):
        write_status(anchor, replace(st, replica_dir=str(moved) if moved else "", pending_dir=None,
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


def check_not_half_promoted(anchor: Replica, status: FollowStatus | None) -> None:
    """UsageError (exit 2) when ``status`` says a promote renamed its dir into the state dir and was killed
    before it ended: the follower must not take that dir back; promote again finishes it."""
    if status is not None and status.pending_dir and _in_state_dir(anchor, Path(status.pending_dir)) \
            and not _in_state_dir(anchor, checkpoint_base(anchor)):
        raise UsageError(f"a promote of store {anchor.ref.store!r} of task {anchor.ref.task!r} was interrupted after "
                         f"it moved the pre-restored dir to {status.pending_dir}",
                         hint=("run ", anchor.ref.command("standby promote"), " again: it finishes the promote"))


def _in_state_dir(anchor: Replica, path: Path) -> bool:
    state = Path(os.path.realpath(anchor.replica_dir.parents[1]))
    return state in Path(os.path.realpath(path)).parents
