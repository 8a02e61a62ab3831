"""Helpers shared by the operations: reading and writing index blobs, resolving snapshot ids,
and the idempotent post-commit cleanup."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field, replace

from statectl import failpoints
from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.engine.checkpoints import BlobCheckpointStore, CheckpointRecord
from statectl.engine.layout import StoreRef, is_checkpoint_id, parse_checkpoint_id
from statectl.engine.transfer import run_parallel
from statectl.errors import BlobNotFoundError, CorruptSnapshotError, SnapshotNotFoundError, UsageError
from statectl.snapshot.model import SnapshotIndex, parse_index, serialize_index


def read_index(blobstore: BlobStore, blob_id: str, *, what: str = "snapshot") -> SnapshotIndex:
    """Fetch and parse an index blob.

    Raises SnapshotNotFoundError when the blob does not exist, IndexFormatError / UnsafePathError
    when it is malformed.
    """
    buf = io.BytesIO()
    try:
        blobstore.get(blob_id, buf)
    except BlobNotFoundError:
        raise SnapshotNotFoundError(f"{what} index blob {blob_id} not found in {blobstore.url}") from None
    try:
        return parse_index(buf.getvalue())
    except CorruptSnapshotError as e:
        raise type(e)(f"index blob {blob_id}: {e}", hint=e.hint) from None


def write_index(blobstore: BlobStore, index: SnapshotIndex, ttl_seconds: int | None) -> str:
    data = serialize_index(index)
    return blobstore.put(io.BytesIO(data), size=len(data), ttl_seconds=ttl_seconds)


@dataclass(frozen=True)
class ResolvedSnapshot:
    """A snapshot found by id: its index blob, its parsed index and (when recorded) its checkpoint."""

    index_blob_id: str
    index: SnapshotIndex
    record: CheckpointRecord | None


def short_id(blob_id: str) -> str:
    """The last path component of a blob id (the UUID for statectl's own blobs)."""
    return blob_id.rsplit("/", 1)[-1]


def resolve_snapshot(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef,
                     snapshot: str | None) -> ResolvedSnapshot:
    """Find a snapshot of ``ref``: the latest when ``snapshot`` is None, else by checkpoint id, full
    index blob id, or a unique prefix (at least 6 characters) of the index blob's UUID.

    Raises SnapshotNotFoundError (exit 10) when nothing matches, UsageError when a prefix is ambiguous.
    """
    if snapshot is None:
        record = checkpoints.latest(ref)
        if record is None:
            raise SnapshotNotFoundError(f"no snapshot of {ref} in {blobstore.url}",
                                        hint="run 'statectl backup' first, or check --job/--task/--store")
        return ResolvedSnapshot(record.index_blob_id, read_index(blobstore, record.index_blob_id), record)
    records = checkpoints.list(ref)
    matches = [r for r in records if snapshot in (r.checkpoint_id, r.index_blob_id)]
    if not matches and not is_checkpoint_id(snapshot) and len(snapshot) >= 6:
        matches = [r for r in records if short_id(r.index_blob_id).startswith(snapshot)]
    if len(matches) > 1:
        raise UsageError(f"snapshot id {snapshot!r} is ambiguous: {len(matches)} snapshots match",
                         hint="give more characters of the id")
    if matches:
        r = matches[0]
        return ResolvedSnapshot(r.index_blob_id, read_index(blobstore, r.index_blob_id), r)
    if snapshot.startswith(BLOB_PREFIX) or "/" in snapshot:
        # An index blob no checkpoint records (e.g. a superseded one kept by retention): use it as is.
        try:
            return ResolvedSnapshot(snapshot, read_index(blobstore, snapshot), None)
        except (SnapshotNotFoundError, UsageError):  # UsageError: not even a valid key for this store
            pass
    raise SnapshotNotFoundError(f"no snapshot {snapshot!r} of {ref} in {blobstore.url}",
                                hint="'statectl snapshots list' shows the snapshots there are")


@dataclass
class CleanupStats:
    ttl_removed: int = 0
    blobs_deleted: int = 0
    records_forgotten: int = 0
    deleted: list[str] = field(default_factory=list)


def snapshot_blob_ids(index_blob_id: str, index: SnapshotIndex) -> set[str]:
    """Every blob a snapshot needs: its index blob and the blobs of its present files."""
    return {index_blob_id, *index.present_blob_ids()}


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
    """
    keep = max(1, keep_last if keep_last is not None else record.keep_last)
    stats = CleanupStats()
    if not dry_run:
        pending = list(new_blob_ids if new_blob_ids is not None else index.present_blob_ids())
        run_parallel([_remove_ttl_task(blobstore, b) for b in pending], parallelism)
        stats.ttl_removed = len(pending)
        blobstore.remove_ttl(record.index_blob_id)  # last: a permanent index means all its blobs are
    committed = [r for r in checkpoints.list(ref) if r.checkpoint_id != record.checkpoint_id]
    newer = [r for r in committed if parse_checkpoint_id(r.checkpoint_id) > parse_checkpoint_id(record.checkpoint_id)]
    older = [r for r in committed if r not in newer]
    kept = newer + [record] + older[: max(0, keep - 1 - len(newer))]
    expired = [r for r in older if r not in kept]

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
    doomed = list(dict.fromkeys(c for c in candidates if c not in referenced))
    stats.deleted = doomed
    if dry_run:
        stats.blobs_deleted = len(doomed)
        stats.records_forgotten = len(expired)
        return stats
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


def _remove_ttl_task(blobstore: BlobStore, blob_id: str):
    def run(cancel) -> None:
        if not cancel.is_set():
            blobstore.remove_ttl(blob_id)

    return run


def _blob_ids_or_empty(blobstore: BlobStore, record: CheckpointRecord) -> set[str]:
    """The blobs of a recorded snapshot; just its index id when the index is gone or unreadable
    (an earlier cleanup got that far; gc sweeps whatever that leaves unreferenced)."""
    try:
        return snapshot_blob_ids(record.index_blob_id, read_index(blobstore, record.index_blob_id))
    except (SnapshotNotFoundError, CorruptSnapshotError):
        return {record.index_blob_id}


def finish_interrupted_cleanup(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, *,
                               abandon_after_s: float = 6 * 3600) -> bool:
    """Reconcile the catalog with the commit log and re-run the cleanup of the latest checkpoint if
    it did not complete. Returns True if a cleanup ran. Idempotent."""
    try:
        record = checkpoints.reconcile(ref, abandon_after_s=abandon_after_s)
    except SnapshotNotFoundError:
        return False  # nothing committed yet (e.g. a job without a checkpoint for this task)
    if record is None or record.cleanup_done:
        return False
    index = read_index(blobstore, record.index_blob_id)
    post_commit_cleanup(blobstore, checkpoints, ref, record, index)
    return True


def now_ms() -> int:
    return int(time.time() * 1000)
