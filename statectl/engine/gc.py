"""gc: reclaim what no retained snapshot needs, for every job sharing the blob store.

1. List the blobs, then read the live leases: a blob modified after (a clock slack before) the start
   of a live backup's lease may be referenced by that backup's snapshot once it commits, so it is
   kept, TTL or not, whatever ``grace`` says.
2. For each store in the catalog, holding the store's lease (the one its backups take, so that
   nothing here races a backup of it): reconcile pending records with the commit log, finish an
   interrupted post-commit cleanup, and apply retention (``keep_last``, else each snapshot's own).
   A store whose lease a live backup holds is skipped with a note.
3. Collect every blob a retained snapshot references (committed snapshots, and pending ones younger
   than the grace period, whose backup may still commit), reading the catalog after listing the
   blobs and the leases, so that a snapshot committed meanwhile protects the listed blobs it
   references.
4. Delete unreferenced blobs whose TTL has expired, and unreferenced blobs older than ``grace``
   (at least MIN_GRACE_SECONDS: writers that take no lease, such as a Samza job uploading to the same
   store, get that long to commit what they upload); then the leftovers of killed writes that the
   listing does not show (``BlobStore.sweep_debris``), older than the same horizon.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.catalog.lease import CLOCK_SLACK_SECONDS, Lease, live_leases, read_lease
from statectl.catalog.records import COMMITTED, PENDING, BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.catalog.retention import finish_interrupted_cleanup, post_commit_cleanup
from statectl.errors import (
    BlobNotFoundError,
    CorruptSnapshotError,
    LockHeldError,
    SnapshotNotFoundError,
    UsageError,
)
from statectl.parallel import check_parallelism, run_parallel
from statectl.progress import NullProgress, ProgressReporter

DEFAULT_GRACE_SECONDS = 6 * 3600
# Like --ttl: younger blobs may belong to a write in flight that takes no lease. Tests lower it to sweep
# fresh S3 objects, whose modification times cannot be backdated.
MIN_GRACE_SECONDS = 60
# A partial write this fresh may be one in progress, of any writer, leased or not (a lease or catalog
# record being written): leftovers are swept only once older than this, whatever the grace.
DEBRIS_MIN_AGE_SECONDS = 60
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
        if self.grace_seconds < MIN_GRACE_SECONDS:
            raise UsageError("--grace must be at least a minute",
                             hint="younger blobs may belong to an upload in flight; a later gc reclaims them")
        if self.keep_last is not None and self.keep_last < 1:
            raise UsageError("--keep-last must be at least 1")
        check_parallelism(self.parallelism)


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
    debris_deleted: int = 0
    debris: list[GcAction] = field(default_factory=list)


def gc(opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
       progress: ProgressReporter | None = None) -> GcResult:
    """Collect garbage in the whole blob store (see the module doc). With ``dry_run`` nothing is
    written (not even a lease) and ``deleted`` and ``debris`` list what would go and why. Never
    deletes a blob that a committed snapshot kept by retention references, nor one a live backup may
    still commit, nor one younger than the grace period unless its TTL ran out.

    Raises UsageError for bad options, BlobStoreError / AuthError for blob store failures. A retained
    snapshot whose index is malformed suspends the sweep of unreferenced blobs (what it references is
    unknown) with a note; everything else goes on. Idempotent; safe to run while backups run and alongside another gc.
    """
    opts.validate()
    progress = progress or NullProgress()
    started_wall = time.time()
    started = time.monotonic()
    result = GcResult(dry_run=opts.dry_run)
    deleted: dict[str, GcAction] = {}

    # List first: a blob created after this listing is never a candidate. Then the leases: a backup
    # that took its lease after this read uploads only blobs the listing does not have, and one that
    # released its lease before it had committed, so the catalog read below sees its snapshot.
    listing = list(blobstore.list(BLOB_PREFIX))
    sizes = {info.key: info.size for info in listing}
    in_flight = [h for h in live_leases(blobstore) if h.operation != "gc"]  # a gc uploads nothing
    protect_from = min((h.started_s for h in in_flight), default=float("inf")) - CLOCK_SLACK_SECONDS
    refs = list(checkpoints.refs())
    result.stores = len(refs)
    for ref in refs:
        _settle_store(ref, opts, blobstore, checkpoints, result, deleted, sizes)
    referenced, unreadable = _referenced(list(checkpoints.refs()), opts, blobstore, checkpoints, started_wall)
    for ref, blob_id, error in unreadable:
        result.notes.append(f"{ref}: the index {blob_id} of a retained snapshot is malformed ({error}); what it "
                            "references is unknown, so no unreferenced blob is swept until retention drops it "
                            "(the next backups do) or it is repaired")

    horizon = min(started_wall - opts.grace_seconds, protect_from)
    doomed: list[GcAction] = []
    for info in listing:
        if info.key in deleted:
            continue
        if info.key in referenced or info.modified_at >= protect_from:
            result.blobs_kept += 1
            continue
        if info.modified_at < horizon and not unreadable:
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
    result.debris = [GcAction(i.key, i.size, "left by a write that never finished")
                     for i in blobstore.sweep_debris(min(horizon, started_wall - DEBRIS_MIN_AGE_SECONDS),
                                                     dry_run=opts.dry_run)]
    result.debris_deleted = len(result.debris)
    result.deleted = sorted(deleted.values(), key=lambda a: a.key)
    result.blobs_deleted = len(result.deleted)
    result.bytes_reclaimed = sum(a.size for a in result.deleted) + sum(a.size for a in result.debris)
    result.duration_s = round(time.monotonic() - started, 3)
    result.requests = request_counts(blobstore)
    for note in result.notes:
        progress.note(note)
    return result


def _settle_store(ref: StoreRef, opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                  result: GcResult, deleted: dict[str, GcAction], sizes: dict[str, int]) -> None:
    """Settle one store holding its lease; skip it with a note while a live backup holds that. A dry
    run takes no lease (it writes nothing) but skips the same stores. A store with nothing to settle
    (cleanup done, no retention asked for, no commit log to reconcile with) is not leased at all."""
    if checkpoints.commit_log is None and opts.keep_last is None:
        try:
            latest = checkpoints.latest(ref)
        except CorruptSnapshotError as e:
            result.notes.append(f"{ref}: {e}")
            return
        if latest is None or latest.cleanup_done:
            return
    if opts.dry_run:
        holder = read_lease(blobstore, ref)
        if holder is not None and holder.live:
            result.notes.append(f"{ref}: skipped: a {holder.operation} holds its lease (host {holder.host}, "
                                f"pid {holder.pid}, since {holder.started})")
            return
        _settle_leased(ref, opts, blobstore, checkpoints, result, deleted, sizes)
        return
    try:
        with Lease(blobstore, ref, operation="gc"):
            _settle_leased(ref, opts, blobstore, checkpoints, result, deleted, sizes)
    except LockHeldError as e:
        result.notes.append(f"{ref}: skipped: {e}")


def _settle_leased(ref: StoreRef, opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                   result: GcResult, deleted: dict[str, GcAction], sizes: dict[str, int]) -> None:
    """Finish the store's interrupted cleanup and apply retention (or, dry, say what that would do)."""
    try:
        if not opts.dry_run:
            # Holding the lease, no backup of this store is in flight: a pending record older than the
            # grace belongs to one that died.
            finished = finish_interrupted_cleanup(blobstore, checkpoints, ref, abandon_after_s=opts.grace_seconds)
            if finished is not None and finished.missing:
                result.notes.append(f"{ref}: latest snapshot damaged ({len(finished.missing)} blobs missing, e.g. "
                                    f"{finished.missing[0]}), left alone; the next backup starts a new chain")
                return
            if finished is not None:
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
        if stats.missing:
            result.notes.append(f"{ref}: latest snapshot damaged ({len(stats.missing)} blobs missing, e.g. "
                                f"{stats.missing[0]}), retention not applied; the next backup starts a new chain")
            return
        result.snapshots_expired += stats.records_forgotten if opts.dry_run else before - len(checkpoints.list(ref))
        for key in stats.deleted:
            deleted.setdefault(key, GcAction(key, sizes.get(key, 0), f"retention of {ref}"))


def _referenced(refs: list[StoreRef], opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                started_wall: float) -> tuple[set[str], list[tuple[StoreRef, str, str]]]:
    """Blobs of every committed snapshot in the catalog and of pending ones still within the grace, and
    (ref, index blob id, error) of each such snapshot whose index is malformed: what it references is
    unknown, so while there is one the caller sweeps no unreferenced blob."""
    keys: set[str] = set()
    unreadable: list[tuple[StoreRef, str, str]] = []
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
            except CorruptSnapshotError as e:
                unreadable.append((ref, r.index_blob_id, str(e)))
    return keys, unreadable


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
