"""promote of a pre-restored store: what a job restoring the store from the blob store keeps, made in seconds.

With the job restoring the store from the blob store (restore_route), fence the pre-restore's follower
(Invariant 2), check the pre-restored dir is the checkpoint the job's start reads and identical to its snapshot,
bring it there incrementally within the timeout when it is behind, and rename it (one atomic rename: the standby
root is on the state dir's filesystem) to ``<store dir>-<checkpointId>`` for the next start to rename into the
store dir. The active store dir is never touched (the start deletes it). Without a pre-restored dir it is
refused (DiscardedError, exit 14).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.standby.fence import FENCE_TIMEOUT_S, fence, follower_to_fence, restart_fenced
from statectl.engine.standby.prerestore import (
    Halted,
    MadeDir,
    adopt_dir,
    check_here,
    checkpoint_base,
    locate_pre_restore,
    lock_pre_restore,
    make_checkpoint_dir,
    own_status,
    owned_dirs,
    read_snapshot_index,
    revert_status,
    snapshot_differences,
)
from statectl.engine.standby.promote import PromotePlan, PromoteResult
from statectl.engine.standby.replica import (
    FollowStatus,
    PROMOTER,
    PromoteLock,
    Replica,
    check_not_promoting,
    write_status,
)
from statectl.errors import DiscardedError, StatectlError, UsageError
from statectl.formats import jobconfig
from statectl.formats.checkpoint import BLOB_STORE_FACTORY, CheckpointV2
from statectl.formats.jobmodel import JobModel
from statectl.fsutil import fsync_dir, make_dirs, owner_of
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.local.layout import checkpoint_dir, device_of
from statectl.progress import NullProgress, ProgressReporter
from statectl.snapshot.model import SnapshotIndex


@dataclass(frozen=True)
class RestoreRoute:
    """Whether the job's next start restores a store with the blob-store backend (``blob_store``), and the
    coordinator stream as read to say so (``stream``: engine.jobmodel.read_job_model's answer), which a
    changelog promote hands on to resolve_changelog instead of reading the stream again."""

    blob_store: bool
    stream: tuple[JobModel | None, list[str]]


def restore_route(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> RestoreRoute:
    """Whether the job's next start restores ``ref``'s store with the blob-store backend
    (jobconfig.checkpoint_restore_factory over its config on the coordinator stream and the checkpoint that start
    reads for the task, as nextstart.next_start reads them). Not without a coordinator stream or config. Reads
    only; StatectlError for a config Samza cannot read or brokers that cannot be reached."""
    from statectl.engine.jobmodel import read_job_model

    stream = read_job_model(bootstrap, ref.job, ref.job_id, security=security, timeout_s=timeout_s)
    config = stream[0].config if stream[0] is not None else {}
    if not config:
        return RestoreRoute(False, stream)
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, timeout_s=timeout_s, security=security, config=config)
    try:
        cp = log.read_checkpoints().get(ref.task)
    finally:
        log.close()
    try:
        return RestoreRoute(jobconfig.checkpoint_restore_factory(config, ref.store, cp) == BLOB_STORE_FACTORY, stream)
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
    from statectl.engine.standby.nextstart import latest_checkpoints

    anchor = locate_pre_restore(state_dir, ref, root)
    refused = f"refusing to promote store {ref.store!r} of task {ref.task!r}"
    before = own_status(anchor)
    if before is None:
        raise DiscardedError(
            f"{refused}: the job restores the store from the blob store (BlobStoreStateBackendFactory), whose "
            "restore deletes the store dir and every checkpoint dir but one identical to the snapshot, and no "
            "pre-restored checkpoint dir is kept on this host",
            hint=("keep the latest snapshot pre-restored here with ", ref.command("standby follow", "--pre-restore"),
                  ", then promote"))
    if _clean_on_start(bootstrap, ref, security):
        raise DiscardedError(f"{refused}: stores.{ref.store}.clean.on.container.start is true, so the job's start "
                             "downloads the snapshot whatever is here (BlobStoreRestoreManager.shouldRestore)",
                             hint=f"unset stores.{ref.store}.clean.on.container.start, then promote again")
    check_here(anchor, bootstrap if check_locality else None, security=security)
    follower_to_fence(anchor)  # LockHeldError for one this host cannot stop, before anything changes
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
    index = read_snapshot_index(blobstore, blob_id)
    checkpoint_id = index.snapshot_metadata.checkpoint_id
    target = checkpoint_dir(anchor.replica_dir, checkpoint_id)
    if device_of(checkpoint_base(anchor)) != device_of(target.parent):
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
    write_status(anchor, status)
    try:
        make_dirs(target.parent, owner_of(target.parent))
        os.rename(staged, target)
    except OSError as e:
        status.pending_dir = None
        write_status(anchor, status)
        raise StatectlError(f"cannot move the pre-restored dir {staged} to {target}: {e}; it is where it was",
                            hint="keep the standby root on the state dir's filesystem, then promote again") from e
    fsync_dir(target.parent)
    fsync_dir(staged.parent)
    failpoints.hit("pre-restore-moved")
    status.replica_dir, status.pending_dir = str(target), None
    write_status(anchor, status)


def plan_promote_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore, *,
                              security: KafkaSecurity | None = None, locality: bool = True,
                              root: Path | None = None) -> PromotePlan:
    """The plan of ``promote_pre_restored`` (as promote.plan_promote's, ``restore_mode`` "blob-store"), with
    its checks, writing nothing: the follower is not fenced, no file is downloaded. ``locality``: also plan
    update_locality. Raises what promote_pre_restored raises before it fences the follower."""
    from statectl.engine.standby.placement import plan_locality
    from statectl.engine.standby.replica import is_locked, lock_holder

    check_not_promoting(locate_pre_restore(state_dir, ref, root))
    plan = _plan_pre_restored(ref, state_dir, bootstrap, blobstore, security=security, check_locality=True,
                              root=root)
    anchor = plan.anchor
    owned = sorted(owned_dirs(plan.status))
    out = PromotePlan(
        replica_dir=plan.status.replica_dir or str(anchor.replica_dir), promoted_dir=plan.promoted_dir,
        active_dir=str(anchor.replica_dir), restore_mode="blob-store", checkpoint_id=plan.checkpoint_id,
        applied_offset=None, catch_up_to=None,
        fence_pid=lock_holder(anchor)[0] if is_locked(anchor.lock_path) else None, replaces_active=False,
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
    restore_route says so): fence its follower (Invariant 2: nothing is promoted while it runs),
    make sure the pre-restored dir (in the standby root ``root``, or where an older statectl kept it:
    locate_pre_restore) is the snapshot of the checkpoint the job's start reads and identical to it (restoring it
    incrementally within ``timeout_s`` when it is behind), rename it to ``<store dir>-<checkpointId>`` in the
    state dir, delete the follower's older dir and its status and lock files; the job's next start renames the
    dir into the store dir (BlobStoreRestoreManager). A promote killed after that rename is finished by the
    next one. The active store dir is never touched. ``on_locality`` as
    promote.promote; ``restart_follower`` as promote.promote (False: a container's failover);
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
    anchor, before, blob_id = plan.anchor, plan.status, plan.snapshot_id
    cp, target = plan.checkpoint_id, Path(plan.promoted_dir)
    result = PromoteResult(str(target), None, 0, 0.0, restore_mode="blob-store", checkpoint_id=cp)
    was_following = fence(anchor)
    try:
        with lock_pre_restore(anchor, wait_s=FENCE_TIMEOUT_S, role=PROMOTER):
            status = own_status(anchor) or before
            made = _bring_to_snapshot(plan, state_dir, blobstore, catalog, status, began + timeout_s, timeout_s,
                                      progress)
            adopt_dir(anchor, status, made, blob_id)
            if made.target != target:
                _move_in(anchor, status, made.target, target)
            result.records_applied = made.downloaded
            # Only now: until here the status file is what proves the dirs statectl's own.
            anchor.status_path.unlink(missing_ok=True)
        anchor.lock_path.unlink(missing_ok=True)
        anchor.log_path.unlink(missing_ok=True)
    except Exception as e:
        if restart_follower and was_following:  # once the lock is released: the follower takes it again
            said = restart_fenced(anchor, before, bootstrap)
            e.args = (f"{e}; {said}", *e.args[1:]) if isinstance(e, StatectlError) else e.args
        raise
    caught = ("was the latest checkpoint's already" if made.downloaded == 0 and made.reused == 0
              else f"brought to it: {made.downloaded} files downloaded, {made.reused} reused")
    result.notes.append(f"blob-store restore: the pre-restored dir {target} (checkpoint {cp} of checkpoint record "
                        f"{plan.checkpoint}) {caught}; it is identical to snapshot {blob_id}, so the job's next start "
                        "renames it into the store dir instead of downloading (BlobStoreRestoreManager)")
    if on_locality is not None:
        result.locality_updated, note = on_locality()
        if note:
            result.notes.append(note)
    result.duration_s = round(time.monotonic() - began, 3)
    return result


def _bring_to_snapshot(plan: _PreRestorePlan, state_dir: Path, blobstore: BlobStore, catalog: BlobCheckpointStore,
                       status: FollowStatus, deadline: float, timeout_s: float, progress: ProgressReporter) -> MadeDir:
    """The pre-restored dir made identical to the plan's snapshot by ``deadline`` (a dir a killed promote renamed
    into place already is taken as it is). StatectlError, the status and dirs as they were, when it cannot be."""
    anchor, blob_id, index, target = plan.anchor, plan.snapshot_id, plan.index, Path(plan.promoted_dir)
    kept = replace(status)
    try:
        if os.path.lexists(target) and str(target) not in owned_dirs(status):
            raise StatectlError(f"cannot promote into {target}: it exists and statectl did not make it "
                                "(the job's own checkpoint dir)",
                                hint="leave it to the job: its next start checks it against the snapshot")
        if _landed(status, target):  # a promote killed after its rename: the dir is in place already
            made = MadeDir(target, plan.checkpoint_id,
                           differences=tuple(snapshot_differences(target, index.dir_index)))
        else:
            made = make_checkpoint_dir(anchor, state_dir, blob_id, index, blobstore, catalog, status,
                                       lambda: ("timed out" if time.monotonic() > deadline else None), progress)
        if made.differences:
            raise StatectlError(f"cannot promote {target}: it is not identical to snapshot {blob_id} by "
                                f"Samza's rule ({'; '.join(made.differences)}): the job's start would "
                                "download it again", hint="check the owner of the state dir's files "
                                "(Samza compares owner and group names), then promote again")
    except Halted:
        revert_status(anchor, status, kept)
        raise StatectlError(f"promote of {target} timed out after {timeout_s:g}s bringing the pre-restored "
                            f"dir to snapshot {blob_id}: the pre-restored dir is as it was",
                            hint="promote again with a longer --timeout, or let the follower catch up") from None
    except StatectlError:
        revert_status(anchor, status, kept)
        raise
    return made
