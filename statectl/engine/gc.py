"""gc: reclaim what no retained snapshot needs, for every job sharing the blob store.

1. For each store in the catalog: reconcile pending records with the commit log, finish an
   interrupted post-commit cleanup, and apply retention (``keep_last``, else each snapshot's own).
2. Collect every blob a retained snapshot references (committed snapshots, and pending ones younger
   than the grace period, whose backup may still commit), reading the catalog after listing the
   blobs, so that a snapshot committed while gc ran protects the listed blobs it references.
3. Delete unreferenced blobs whose TTL has expired, and unreferenced blobs older than ``grace``
   (a blob younger than that may belong to a backup in flight, which has not written its index yet).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.engine.checkpoints import COMMITTED, PENDING, BlobCheckpointStore
from statectl.engine.common import finish_interrupted_cleanup, post_commit_cleanup, read_index, snapshot_blob_ids
from statectl.engine.layout import StoreRef
from statectl.engine.progress import NullProgress, ProgressReporter
from statectl.engine.transfer import run_parallel
from statectl.errors import BlobNotFoundError, CorruptSnapshotError, SnapshotNotFoundError, UsageError

DEFAULT_GRACE_SECONDS = 6 * 3600
DELETE_BATCH = 1000  # S3 DeleteObjects takes at most 1000 keys


@dataclass(frozen=True)
class GcOptions:
    grace_seconds: int = DEFAULT_GRACE_SECONDS
    keep_last: int | None = None
    dry_run: bool = False
    parallelism: int = 8

    def validate(self) -> None:
        if self.grace_seconds < 0:
            raise UsageError("--grace must not be negative")
        if self.keep_last is not None and self.keep_last < 1:
            raise UsageError("--keep-last must be at least 1")


@dataclass
class GcAction:
    key: str
    size: int
    reason: str


@dataclass
class GcResult:
    blobs_deleted: int = 0
    bytes_reclaimed: int = 0
    blobs_kept: int = 0
    snapshots_expired: int = 0
    cleanups_finished: int = 0
    stores: int = 0
    dry_run: bool = False
    duration_s: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    deleted: list[GcAction] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def gc(opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
       progress: ProgressReporter | None = None) -> GcResult:
    """Collect garbage in the whole blob store (see the module doc). With ``dry_run`` nothing is
    deleted and ``deleted`` lists what would go and why. Never deletes a blob that a committed
    snapshot kept by retention references, nor one younger than the grace period unless its TTL ran
    out."""
    opts.validate()
    progress = progress or NullProgress()
    started_wall = time.time()
    started = time.monotonic()
    result = GcResult(dry_run=opts.dry_run)
    deleted: dict[str, GcAction] = {}

    # List first: a blob created after this listing is never a candidate, and every snapshot that
    # could reference a listed blob is committed (or pending) in the catalog we read after it.
    listing = list(blobstore.list(BLOB_PREFIX))
    sizes = {info.key: info.size for info in listing}
    refs = list(checkpoints.refs())
    result.stores = len(refs)
    for ref in refs:
        _settle_store(ref, opts, blobstore, checkpoints, result, deleted, sizes)
    referenced = _referenced(list(checkpoints.refs()), opts, blobstore, checkpoints, started_wall)

    horizon = started_wall - opts.grace_seconds
    doomed: list[GcAction] = []
    for info in listing:
        if info.key in deleted:
            continue
        if info.key in referenced:
            result.blobs_kept += 1
            continue
        if info.modified_at < horizon:
            doomed.append(GcAction(info.key, info.size, "unreferenced, older than the grace period"))
            continue
        expires = info.expires_at
        if not info.ttl_known:
            try:
                expires = blobstore.stat(info.key).expires_at
            except BlobNotFoundError:
                continue
        if expires is not None and expires < started_wall:
            doomed.append(GcAction(info.key, info.size, "TTL expired"))
        else:
            result.blobs_kept += 1
    if not opts.dry_run and doomed:
        keys = [a.key for a in doomed]
        batches = [keys[i:i + DELETE_BATCH] for i in range(0, len(keys), DELETE_BATCH)]
        progress.start("deleting", 0, len(doomed))
        try:
            run_parallel([_delete_task(blobstore, b) for b in batches], opts.parallelism)
        finally:
            progress.stop()
    for a in doomed:
        deleted[a.key] = a
    result.deleted = sorted(deleted.values(), key=lambda a: a.key)
    result.blobs_deleted = len(result.deleted)
    result.bytes_reclaimed = sum(a.size for a in result.deleted)
    result.duration_s = round(time.monotonic() - started, 3)
    result.requests = request_counts(blobstore)
    return result


def _settle_store(ref: StoreRef, opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                  result: GcResult, deleted: dict[str, GcAction], sizes: dict[str, int]) -> None:
    """Finish the store's interrupted cleanup and apply retention (or, dry, say what that would do)."""
    try:
        if not opts.dry_run and finish_interrupted_cleanup(blobstore, checkpoints, ref,
                                                           abandon_after_s=opts.grace_seconds):
            result.cleanups_finished += 1
        latest = checkpoints.latest(ref)
    except SnapshotNotFoundError:
        return
    except CorruptSnapshotError as e:
        result.notes.append(f"{ref}: {e}")
        return
    if latest is None:
        return
    try:
        index = read_index(blobstore, latest.index_blob_id)
    except (SnapshotNotFoundError, CorruptSnapshotError) as e:
        result.notes.append(f"{ref}: latest snapshot unreadable, left alone: {e}")
        return
    needs_cleanup = opts.dry_run and not latest.cleanup_done
    if opts.keep_last is not None or needs_cleanup:
        before = len(checkpoints.list(ref))
        stats = post_commit_cleanup(blobstore, checkpoints, ref, latest, index, keep_last=opts.keep_last,
                                    dry_run=opts.dry_run)
        result.snapshots_expired += stats.records_forgotten if opts.dry_run else before - len(checkpoints.list(ref))
        for key in stats.deleted:
            deleted.setdefault(key, GcAction(key, sizes.get(key, 0), f"retention of {ref}"))


def _referenced(refs: list[StoreRef], opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                started_wall: float) -> set[str]:
    """Blobs of every committed snapshot in the catalog and of pending ones still within the grace."""
    keys: set[str] = set()
    for ref in refs:
        try:
            latest = checkpoints.latest(ref)
        except (SnapshotNotFoundError, CorruptSnapshotError):
            latest = None
        records = checkpoints.records(ref)
        if latest is not None and all(r.checkpoint_id != latest.checkpoint_id for r in records):
            records.append(latest)
        for r in records:
            if r.state == PENDING and r.created_ms / 1000 < started_wall - opts.grace_seconds:
                continue
            if r.state not in (COMMITTED, PENDING):
                continue
            keys.add(r.index_blob_id)
            try:
                keys |= snapshot_blob_ids(r.index_blob_id, read_index(blobstore, r.index_blob_id))
            except SnapshotNotFoundError:
                pass
            except CorruptSnapshotError:
                # An unreadable index: we cannot tell what it references, so delete nothing of this store's.
                raise
    return keys


def _delete_task(blobstore: BlobStore, keys: list[str]):
    def run(cancel) -> None:
        if not cancel.is_set():
            blobstore.delete_many(keys)

    return run


def request_counts(blobstore: BlobStore) -> dict[str, int]:
    """API request counts by operation, where the backend keeps them (S3)."""
    inner = getattr(blobstore, "inner", blobstore)
    counts = getattr(inner, "requests", None)
    return dict(sorted(counts.items())) if isinstance(counts, Counter) else {}
