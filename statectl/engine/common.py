"""Helpers shared by the operations: reading and writing index blobs, resolving snapshot ids,
and the idempotent post-commit cleanup."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.engine.checkpoints import CheckpointRecord, CheckpointStore
from statectl.engine.layout import StoreRef, is_checkpoint_id
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


def resolve_snapshot(blobstore: BlobStore, checkpoints: CheckpointStore, ref: StoreRef,
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


def post_commit_cleanup(blobstore: BlobStore, checkpoints: CheckpointStore, ref: StoreRef, record: CheckpointRecord,
                        index: SnapshotIndex, *, new_blob_ids: list[str] | None = None) -> CleanupStats:
    """The cleanup after a commit (seed 000, "Post-Commit cleanup"). Idempotent; safe to re-run.

    Removes the TTL of the snapshot's blobs (only ``new_blob_ids`` when given, else every present blob)
    and of its index; deletes the blobs its index marks removed and the previous index blob; forgets
    older checkpoint records of the store; finally marks the record's cleanup done.
    """
    stats = CleanupStats()
    for blob_id in (new_blob_ids if new_blob_ids is not None else index.present_blob_ids()):
        blobstore.remove_ttl(blob_id)
        stats.ttl_removed += 1
    blobstore.remove_ttl(record.index_blob_id)
    for blob_id in index.removed_blob_ids():
        blobstore.delete(blob_id)
        stats.blobs_deleted += 1
    if index.prev_snapshot_index_blob_id and index.prev_snapshot_index_blob_id != record.index_blob_id:
        blobstore.delete(index.prev_snapshot_index_blob_id)
        stats.blobs_deleted += 1
    for older in checkpoints.list(ref):
        if older.checkpoint_id != record.checkpoint_id and older.index_blob_id != record.index_blob_id:
            blobstore.delete(older.index_blob_id)  # superseded; no record will point at it any more
            checkpoints.forget(ref, older.checkpoint_id)
            stats.records_forgotten += 1
    checkpoints.mark_cleanup_done(ref, record)
    return stats


def finish_interrupted_cleanup(blobstore: BlobStore, checkpoints: CheckpointStore, ref: StoreRef) -> bool:
    """Re-run the cleanup of the latest checkpoint if it did not complete. Returns True if it ran."""
    record = checkpoints.latest(ref)
    if record is None or record.cleanup_done:
        return False
    index = read_index(blobstore, record.index_blob_id)
    post_commit_cleanup(blobstore, checkpoints, ref, record, index)
    return True


def now_ms() -> int:
    return int(time.time() * 1000)
