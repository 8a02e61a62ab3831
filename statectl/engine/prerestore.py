"""standby follow --pre-restore / promote of a blob-store job: the latest snapshot kept restored on the standby
host as the checkpoint dir Samza's next start reuses (issue 18, item 4), so a failover there takes seconds.

What the start does (BlobStoreRestoreManager.restoreStores): it deletes the task's store dir
``<state>/<store>/<task dir>``, then reads the SnapshotIndex the task's latest checkpoint names and looks for
``<store dir>-<checkpointId>`` (StorageManagerUtil.getStoreCheckpointDir; the id is the index's
``snapshotMetadata.checkpointId``). If that dir exists and is identical to the snapshot
(shouldRestore: DirDiffUtil.areSameDir(FILES_TO_IGNORE, compareLargeFileChecksums=false,
compareFileOwners=true)), it is renamed into the store dir and nothing is downloaded; else every
checkpoint dir of the task is deleted and the snapshot downloaded whole. (``stores.<s>.clean.on.container.start``
always downloads.)

follow_pre_restored keeps that dir: it reads the job's checkpoint topic on as checkpoints come
(KafkaCheckpointLog), and for each new snapshot of the store it restores the SnapshotIndex into
``<store dir>-<checkpointId>`` with the restore engine (engine.restore: files identical to those of the
previous pre-restored dir, a local checkpoint dir beside it, are hard-linked, only new ones downloaded; the
dir is built aside and renamed into place, fsynced), then deletes the previous one. It deletes only dirs its
status file names (``<state>/.statectl-standby/prerestore/<store>/<task dir>.standby.json``, written before a
dir is made: ``replica_dir``, the complete one, and ``pending_dir``, the one being built or left to delete),
never one it did not make. Its lock (one follower per task and store) and status file sit beside that
status file, in the standby root, where Samza never looks. Only on a host that runs no active of the task
(standby.check_active_path): an active starting here would delete or take the dir.

promote_pre_restored: with the job restoring the store from the blob store, fence that follower (Invariant
2), check the pre-restored dir is the latest checkpoint's and identical to its snapshot, bring it there
incrementally within the timeout when it is behind, and leave it for the next start to rename into the
store dir. The active store dir is never touched (the start deletes it). Without a pre-restored dir it is
refused (DiscardedError, exit 14) as before.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

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
from statectl.formats.checkpoint import BLOB_STORE_FACTORY, checkpoint_topic, parse_checkpoint_id
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.local.layout import STANDBY_ROOT, checkpoint_dir, store_dir
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


def prerestore_replica(state_dir: Path, ref: StoreRef) -> Replica:
    """The follower's handle: ``replica_dir`` is the task's active store dir (whose checkpoint dirs it
    makes; check_active_path reads its LOCK), the lock and status files are
    ``<state>/.statectl-standby/prerestore/<store>/<task dir>.standby.{lock,json}``. UsageError for a name
    store_dir refuses."""
    active = store_dir(Path(state_dir), ref.store, ref.task).absolute()
    files = (Path(state_dir) / STANDBY_ROOT / PRERESTORE_DIR / ref.store).absolute()
    return Replica(ref, checkpoint_topic(ref.job, ref.job_id), 0, active, files_dir=files)


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
    (jobconfig.restore_factory over its config on the coordinator stream and the task's latest v2 checkpoint's
    markers, as standby.next_start reads them). False without a coordinator stream or config. Reads only;
    StatectlError for a config Samza cannot read or brokers that cannot be reached."""
    from statectl.kafka.coordinator import CoordinatorStream

    with CoordinatorStream(bootstrap, ref.job, ref.job_id, timeout_s=timeout_s, security=security) as cs:
        if not cs.refresh():
            return False
        config = cs.config()
    if not config:
        return False
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, timeout_s=timeout_s, security=security)
    try:
        try:
            cp = log.latest_checkpoints()[0].get(ref.task)
        except NotFoundError:
            cp = None
    finally:
        log.close()
    try:
        return jobconfig.restore_factory(config, ref.store, cp.state_checkpoint_markers if cp else {}) \
            == BLOB_STORE_FACTORY
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
    """Make ``<store dir>-<index's checkpoint id>`` hold the snapshot (status says it is ours first), and
    return what it took. A dir there already that the status names and that is identical is kept as it is."""
    from statectl.engine.restore import RestoreOptions, restore

    cp = index.snapshot_metadata.checkpoint_id
    target = checkpoint_dir(anchor.replica_dir, cp)  # StorageManagerUtil.getStoreCheckpointDir
    made = _Made(target, cp)
    if os.path.lexists(target) and str(target) in _owned(status):
        made.differences = tuple(snapshot_differences(target, index.dir_index))
        if not made.differences:
            return made
    if str(target) != status.replica_dir:
        _drop_pending(status, keep=target)
        status.pending_dir = str(target)
    _write_status(anchor, status)  # before the dir exists: it is statectl's from its first byte
    # No state_dir: the target is this task's own checkpoint dir (statectl's, the status says), which
    # check_target would otherwise take for another store's dir in the state dir.
    r = restore(RestoreOptions(anchor.ref, anchor.replica_dir, target_dir=target, snapshot=blob_id, force=True),
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
    parent = anchor.replica_dir.parent
    prefix = f".{anchor.replica_dir.name}-"
    if not parent.is_dir():
        return
    for p in parent.iterdir():
        if p.name.startswith(prefix) and TMP_INFIX in p.name:
            remove_dead_temp_dirs(parent / p.name[1:p.name.index(TMP_INFIX)])


def check_here(anchor: Replica, bootstrap: str, *, security: KafkaSecurity | None = None) -> None:
    """UsageError (exit 2) unless this host runs no active of the task (standby.check_active_path: the store's
    LOCK free, the job's locality elsewhere): a Samza start here would delete or take the pre-restored dir.
    Reads only."""
    try:
        check_active_path(anchor, bootstrap, security=security)
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


def pre_restore_status(state_dir: Path, ref: StoreRef) -> FollowStatus | None:
    """The status of the pre-restore of ``ref``'s store on this host (None: none kept here). Reads only."""
    return _own_status(prerestore_replica(state_dir, ref))


def _own_status(anchor: Replica) -> FollowStatus | None:
    st = read_status(anchor)
    return st if st is not None and st.layout == PRE_RESTORED else None


# -- follow --pre-restore ------------------------------------------------------------------------------------


def follow_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore,
                        catalog: BlobCheckpointStore, *, security: KafkaSecurity | None = None,
                        stop: threading.Event | None = None,
                        on_status: Callable[[FollowStatus], None] | None = None,
                        progress: ProgressReporter | None = None, status_every_s: float = 1.0,
                        poll_s: float = POLL_S, settings: FollowerSettings | None = None) -> FollowResult:
    """Keep the latest snapshot of ``ref``'s store pre-restored as the checkpoint dir Samza's next start
    reuses, until ``stop`` is set (see the module doc); return what was done (``records_applied``: files
    downloaded; ``applied_offset``: None). Each snapshot's dir is built aside and renamed in (a kill leaves no
    partial dir under the checkpoint dir's name) and only then is the previous one deleted; a rerun finishes
    what a killed one left. Status lines (``on_status``) carry ``checkpoint_id`` (the one pre-restored),
    ``lag_records`` (1 while a newer snapshot is not pre-restored yet, else 0) and ``lag_s`` (the age of that
    newer checkpoint).

    Raises UsageError (exit 2, before anything is written) when this host runs the task's active
    (check_here); LockHeldError (exit 11) when another follower pre-restores the store; DiskFullError (exit
    1) when the disk fills (the previous dir kept). Brokers that stop answering and snapshots that cannot be
    read are ridden out with a note (a snapshot that failed is tried again when a newer one lands)."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    anchor = prerestore_replica(state_dir, ref)
    check_here(anchor, bootstrap, security=security)
    result = FollowResult("", None, 0, 0, 0.0)
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security)
    try:
        with _lock(anchor):
            previous = _own_status(anchor)
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
    target = checkpoint_dir(anchor.replica_dir, cp)
    if os.path.lexists(target) and str(target) not in _owned(status):
        # The job's own checkpoint dir (its commit made it): never replaced nor deleted.
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
                       security: KafkaSecurity | None, check_locality: bool) -> _PreRestorePlan:
    """promote_pre_restored's checks and decisions, reading only (see its doc for what it raises)."""
    anchor = prerestore_replica(state_dir, ref)
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
    with KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security) as log:
        latest = log.latest(ref)
    if latest is None:
        raise DiscardedError(f"{refused}: the task's latest checkpoint names no snapshot of the store",
                             hint="promote after the job's next commit")
    checkpoint, blob_id = latest
    index = _index(blobstore, blob_id)
    cp = index.snapshot_metadata.checkpoint_id
    target = checkpoint_dir(anchor.replica_dir, cp)
    return _PreRestorePlan(anchor, before, checkpoint, cp, blob_id, index, str(target))


def plan_promote_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore, *,
                              security: KafkaSecurity | None = None, locality: bool = True) -> PromotePlan:
    """The plan of ``promote_pre_restored`` (as standby.plan_promote's, ``restore_mode`` "blob-store"), with
    its checks, writing nothing: the follower is not fenced, no file is downloaded. ``locality``: also plan
    update_locality. Raises what promote_pre_restored raises before it fences the follower."""
    from statectl.engine.standby import _locked, lock_holder, plan_locality

    check_not_promoting(prerestore_replica(state_dir, ref))
    plan = _plan_pre_restored(ref, state_dir, bootstrap, blobstore, security=security, check_locality=True)
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
                         check_locality: bool = True, promote_lock: bool = True) -> PromoteResult:
    """Promote the pre-restored dir of a job that restores ``ref``'s store from the blob store (call it when
    restores_from_blob_store says so): fence its follower (Invariant 2: nothing is promoted while it runs),
    make sure ``<store dir>-<checkpointId>`` of the task's latest checkpoint is there and identical to its
    snapshot (restoring it incrementally from the pre-restored dir within ``timeout_s`` when that is behind),
    delete the follower's older dir and its status and lock files; the job's next start renames the dir into
    the store dir (BlobStoreRestoreManager). The active store dir is never touched. ``on_locality`` as
    standby.promote; ``restart_follower`` as standby.promote (False: a container's failover);
    ``check_locality`` False: the job's locality may place the task here already (a failover pointed it
    here), only the store's LOCK is checked. ``promote_lock`` False: the caller holds the store's PromoteLock
    (a failover); else it is taken first (LockHeldError, exit 11, while another promote runs). Result:
    ``restore_mode`` "blob-store", ``promoted_dir`` the checkpoint dir,
    ``checkpoint_id``, ``records_applied`` the files downloaded.

    Raises DiscardedError (exit 14, nothing changed) when there is no pre-restore of the store on this host
    (no follower's status file), the latest checkpoint names no snapshot of the store, or
    ``stores.<store>.clean.on.container.start`` (the start downloads the snapshot anyway); UsageError (exit 2)
    when this host runs the task's active; LockHeldError (exit 11) for a follower this host cannot stop;
    StatectlError (exit 1) when the dir cannot be brought to the snapshot within ``timeout_s`` or is not
    identical to it afterwards, and DiskFullError when the disk fills: the follower is then started again and
    its dirs are as they were."""
    import contextlib

    with PromoteLock(prerestore_replica(state_dir, ref)) if promote_lock else contextlib.nullcontext():
        return _promote_pre_restored(ref, state_dir, bootstrap, blobstore, catalog, security, timeout_s, on_locality,
                                     progress or NullProgress(), restart_follower, check_locality)


def _promote_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore,
                          catalog: BlobCheckpointStore, security: KafkaSecurity | None, timeout_s: float,
                          on_locality: Callable[[], tuple[bool, str | None]] | None, progress: ProgressReporter,
                          restart_follower: bool, check_locality: bool) -> PromoteResult:
    began = time.monotonic()
    plan = _plan_pre_restored(ref, state_dir, bootstrap, blobstore, security=security, check_locality=check_locality)
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

