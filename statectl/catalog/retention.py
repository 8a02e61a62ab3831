"""Helpers shared by the operations: reading and writing index blobs, resolving snapshot ids,
and the idempotent post-commit cleanup."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import is_data_blob_id, read_index, snapshot_blob_ids
from statectl.catalog.records import (
    COMMITTED,
    EXPIRED,
    BlobCheckpointStore,
    CheckpointRecord,
)
from statectl.catalog.refs import StoreRef, parse_checkpoint_id
from statectl.errors import (
    BlobNotFoundError,
    CorruptSnapshotError,
    SnapshotNotFoundError,
)
from statectl.parallel import run_parallel
from statectl.snapshot.model import SnapshotIndex


@dataclass
class CleanupStats:
    ttl_removed: int = 0
    blobs_deleted: int = 0
    records_forgotten: int = 0
    deleted: list[str] = field(default_factory=list)
    # Blobs of the snapshot found gone (its index blob when that is missing or unreadable): the snapshot
    # is damaged, so retention was not applied and its cleanup stays pending (the next backup then sees
    # the damage and starts a new chain instead of building on it).
    missing: list[str] = field(default_factory=list)

def post_commit_cleanup(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef,
                        record: CheckpointRecord, index: SnapshotIndex, *, keep_last: int | None = None,
                        new_blob_ids: list[str] | None = None, dry_run: bool = False,
                        parallelism: int = 8) -> CleanupStats:
    """The cleanup after a commit (seed 000, "Post-Commit cleanup"), with retention. Idempotent.

    Removes the TTL of the snapshot's blobs (only ``new_blob_ids`` when given, else every present
    blob) and of its index. Keeps the newest ``keep_last`` committed snapshots of the store (default:
    the record's own policy) and deletes every blob of the older ones, and of the files this snapshot
    removed, that no kept snapshot references; then forgets the older records and marks the cleanup
    done. A blob any kept snapshot references is never deleted. With ``dry_run`` nothing changes and
    the stats say what would be deleted.

    A blob of the snapshot that is already gone does not stop the cleanup (that made every later
    backup and gc of the store fail): it is listed in ``missing``, and then nothing is deleted or
    forgotten, since older snapshots may be the only good ones left, and the cleanup stays pending.
    """
    keep = max(1, keep_last if keep_last is not None else record.keep_last)
    stats = CleanupStats()
    if not dry_run:
        pending = list(new_blob_ids if new_blob_ids is not None else index.present_blob_ids())
        run_parallel([_remove_ttl_task(blobstore, b, stats.missing) for b in pending], parallelism)
        stats.ttl_removed = len(pending) - len(stats.missing)
        if stats.missing:
            return stats
        try:
            blobstore.remove_ttl(record.index_blob_id)  # last: a permanent index means all its blobs are
        except BlobNotFoundError:
            stats.missing.append(record.index_blob_id)
            return stats
    records = checkpoints.records(ref)
    committed = [r for r in records if r.state == COMMITTED and r.checkpoint_id != record.checkpoint_id]
    newer = [r for r in committed if parse_checkpoint_id(r.checkpoint_id) > parse_checkpoint_id(record.checkpoint_id)]
    older = [r for r in committed if r not in newer]
    kept = newer + [record] + older[: max(0, keep - 1 - len(newer))]
    # Snapshots an interrupted run of this cleanup had already marked expired: their blobs may be half gone.
    expired = [r for r in older if r not in kept] + [r for r in records if r.state == EXPIRED]

    referenced: set[str] = snapshot_blob_ids(record.index_blob_id, index)
    for r in kept:
        if r.checkpoint_id != record.checkpoint_id:
            referenced |= _blob_ids_or_empty(blobstore, r)
    candidates: list[str] = list(index.removed_blob_ids())
    if index.prev_snapshot_index_blob_id:
        candidates.append(index.prev_snapshot_index_blob_id)
    for r in expired:
        candidates.extend(sorted(_blob_ids_or_empty(blobstore, r) - {r.index_blob_id}))
        candidates.append(r.index_blob_id)  # last: while it exists, a re-run can still find its blobs
    # Only data blobs: a damaged catalog record naming another kind of object must not delete it.
    doomed = list(dict.fromkeys(c for c in candidates if c not in referenced and is_data_blob_id(c)))
    stats.deleted = doomed
    if dry_run:
        stats.blobs_deleted = len(doomed)
        stats.records_forgotten = len(expired)
        return stats
    # Out of the list of restorable snapshots before any of their blobs goes; the records stay (marked
    # expired) until the end, so that a re-run after a crash still knows which blobs were theirs.
    for r in expired:
        if r.state != EXPIRED:
            checkpoints.write(ref, replace(r, state=EXPIRED))
    half = len(doomed) // 2
    blobstore.delete_many(doomed[:half])
    failpoints.hit("during-cleanup")
    blobstore.delete_many(doomed[half:])
    stats.blobs_deleted = len(doomed)
    for r in expired:
        checkpoints.forget(ref, r.checkpoint_id)
        stats.records_forgotten += 1
    if not record.cleanup_done or record.keep_last != keep:
        checkpoints.write(ref, replace(record, cleanup_done=True, keep_last=keep))
    return stats

def _remove_ttl_task(blobstore: BlobStore, blob_id: str, missing: list[str]):
    def run(cancel) -> None:
        if not cancel.is_set():
            try:
                blobstore.remove_ttl(blob_id)
            except BlobNotFoundError:
                missing.append(blob_id)  # list.append is atomic: the tasks share it safely

    return run

def _blob_ids_or_empty(blobstore: BlobStore, record: CheckpointRecord) -> set[str]:
    """The blobs of a recorded snapshot; just its index id when the index is gone or unreadable
    (an earlier cleanup got that far; gc sweeps whatever that leaves unreferenced)."""
    try:
        return snapshot_blob_ids(record.index_blob_id, read_index(blobstore, record.index_blob_id))
    except (SnapshotNotFoundError, CorruptSnapshotError):
        return {record.index_blob_id}

def finish_interrupted_cleanup(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, *,
                               abandon_after_s: float = 6 * 3600) -> CleanupStats | None:
    """Reconcile the catalog with the commit log and re-run the cleanup of the latest checkpoint if
    it did not complete. Returns the cleanup's stats if one ran, else None. Idempotent. Writes to the
    blob store: call it only holding the store's lease.

    A latest snapshot that turns out damaged (its index blob missing or malformed, or blobs gone) does
    not raise: the stats list what is missing, nothing is deleted, and the cleanup stays pending; the
    caller starts a new chain (backup) or leaves the store alone (gc).
    """
    try:
        record = checkpoints.reconcile(ref, abandon_after_s=abandon_after_s)
    except SnapshotNotFoundError:
        return None  # nothing committed yet (e.g. a job without a checkpoint for this task)
    if record is None or record.cleanup_done:
        return None
    try:
        index = read_index(blobstore, record.index_blob_id)
    except (SnapshotNotFoundError, CorruptSnapshotError):
        return CleanupStats(missing=[record.index_blob_id])
    return post_commit_cleanup(blobstore, checkpoints, ref, record, index)
