"""gc: reclaim what no retained snapshot needs, for every job sharing the blob store.

1. Read the live leases: a blob modified after (a clock slack before) the start of a live backup's
   lease may be referenced by that backup's snapshot once it commits, so it is kept, TTL or not,
   whatever ``grace`` says.
2. For each store in the catalog, holding the store's lease (the one its backups take, so that
   nothing here races a backup of it): reconcile pending records with the commit log, finish an
   interrupted post-commit cleanup, and apply retention (``keep_last``, else each snapshot's own).
   A store whose lease a live backup holds is skipped with a note.
3. Collect every blob a retained snapshot references (committed snapshots, and pending ones younger
   than the grace period, whose backup may still commit), reading the catalog after the leases: a
   backup that released its lease before that read had committed, so its snapshot protects its blobs.
   Then, after the catalog, the snapshots live reader pins name (catalog.pins): their blobs are kept
   too; pins that no longer bind are deleted.
4. Stream the listing of the blobs and delete, in batches as they come, unreferenced blobs whose TTL
   has expired and unreferenced blobs older than ``grace`` (at least MIN_GRACE_SECONDS: writers that
   take no lease, such as a Samza job uploading to the same store, get that long to commit what they
   upload); then the leftovers of killed writes that the listing does not show
   (``BlobStore.sweep_debris``), older than the same horizon. Ages and TTLs are compared with gc's
   start (ages less the grain of the store's modification times, ``mtime_grain_s``), so a blob written
   after it started (by a backup whose lease or snapshot came too late for steps 1 and 3) is never a
   candidate. An age is ``BlobInfo.modified_at``: on file:// a hard-linked copy's is its TTL sidecar's,
   not its source's. Only the referenced ids are held: memory does not grow with the number of blobs in
   the store.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

from statectl import defaults
from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.catalog.lease import CLOCK_SLACK_SECONDS, LEASE_PREFIX, Lease, check_can_write, live_leases, read_lease
from statectl.catalog.pins import pinned_index_ids, read_pins, stale_pins
from statectl.catalog.records import COMMITTED, EXPIRED, PENDING, BlobCheckpointStore, CheckpointRecord, iso_utc, now_ms
from statectl.catalog.refs import StoreRef
from statectl.catalog.retention import CleanupStats, due_ms, execute, finish_interrupted_cleanup, plan_retention
from statectl.errors import (
    BlobNotFoundError,
    CorruptSnapshotError,
    LockHeldError,
    SnapshotNotFoundError,
    UsageError,
)
from statectl.parallel import check_parallelism, run_parallel
from statectl.progress import NullProgress, ProgressReporter

DEFAULT_GRACE_SECONDS = defaults.GRACE_SECONDS
# Like --ttl: younger blobs may belong to a write in flight that takes no lease. Tests lower it to sweep
# fresh S3 objects, whose modification times cannot be backdated.
MIN_GRACE_SECONDS = 60
# A partial write this fresh may be one in progress, of any writer, leased or not (a lease or catalog
# record being written): leftovers are swept only once older than this, whatever the grace.
DEBRIS_MIN_AGE_SECONDS = 60


@dataclass(frozen=True)
class GcOptions:
    grace_seconds: int = DEFAULT_GRACE_SECONDS
    keep_last: int | None = None
    dry_run: bool = False
    parallelism: int = defaults.PARALLELISM
    # List every deleted blob and leftover in the result (``deleted``, ``debris``); off, only the counts
    # and sizes, and gc's memory stays flat however many blobs it deletes.
    itemize: bool = True

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
    expired: list["GcExpiry"] = field(default_factory=list)
    blobstore: str = ""  # the blob store's URL (printed with its secrets masked)


@dataclass
class GcExpiry:
    """A snapshot retention expired (or, dry, would expire): its store, checkpoint, index blob, and why;
    ``blobs_kept_until``: when its grace ends and a later backup or gc deletes its blobs (ISO 8601 UTC),
    None when they went in this run."""

    store: str
    checkpoint_id: str
    snapshot_id: str
    reason: str
    blobs_kept_until: str | None = None


def gc(opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
       progress: ProgressReporter | None = None) -> GcResult:
    """Collect garbage in the whole blob store (see the module doc). With ``dry_run`` nothing is
    written (not even a lease) and ``deleted`` and ``debris`` list what would go and why. Never
    deletes a blob that a committed snapshot kept by retention references, nor one a live backup may
    still commit, nor one younger than the grace period unless its TTL ran out.

    Raises UsageError for bad options, AuthError (exit 12) at once for credentials that cannot write, with
    ``dry_run`` too (BlobStore.check_writable), BlobStoreError / AuthError for blob store failures. A retained
    snapshot whose index is malformed suspends the sweep of unreferenced blobs (what it references is
    unknown) with a note; everything else goes on. Idempotent; safe to run while backups run and alongside another gc.
    """
    opts.validate()
    # Credentials that cannot write are refused at once, dry run or not: a gc writes (leases, deletes), and a
    # dry run exits as the gc would.
    check_can_write(blobstore, f"{LEASE_PREFIX}gc", "gc", "taking the stores' leases and deleting blobs")
    progress = progress or NullProgress()
    started_wall, started = time.time(), time.monotonic()
    result = GcResult(dry_run=opts.dry_run, blobstore=blobstore.url)
    counts_at_start = request_counts(blobstore)
    protect_from = _live_backups_start(blobstore)
    deleted: dict[str, GcAction] = {}  # by retention, while the stores are settled
    refs = list(checkpoints.refs())
    result.stores = len(refs)
    sizing = _SizingStore(blobstore, opts.parallelism)
    for ref in refs:
        _settle_store(ref, opts, blobstore, checkpoints, result, deleted, sizing)
    referenced, unreadable = _referenced(list(checkpoints.refs()), opts, blobstore, checkpoints, started_wall,
                                         result.notes)
    for ref, blob_id, error in unreadable:
        result.notes.append(f"{ref}: the index {blob_id} of a retained snapshot is malformed ({error}); what it "
                            "references is unknown, so no unreferenced blob is swept until retention drops it "
                            "(the next backups do) or it is repaired")
    # A blob written just after gc started may show a modification time before it (S3: whole seconds).
    grain = getattr(blobstore, "mtime_grain_s", 1.0)
    horizon = min(started_wall - grain - opts.grace_seconds, protect_from)
    sweep = _Sweep(blobstore, opts, progress)
    _sweep_listing(blobstore, sweep, result, deleted, referenced, keep_from=protect_from,
                   old_before=float("-inf") if unreadable else horizon, now=started_wall)
    debris = [GcAction(i.key, i.size, "left by a write that never finished")
              for i in blobstore.sweep_debris(min(horizon, started_wall - DEBRIS_MIN_AGE_SECONDS),
                                              dry_run=opts.dry_run)]
    result.debris_deleted = len(debris)
    result.blobs_deleted = len(deleted) + sweep.count
    result.bytes_reclaimed = sum(a.size for a in deleted.values()) + sweep.bytes + sum(a.size for a in debris)
    if opts.itemize:
        result.deleted = sorted([*deleted.values(), *sweep.actions], key=lambda a: a.key)
        result.debris = debris
    result.duration_s = round(time.monotonic() - started, 3)
    result.requests = _since(counts_at_start, request_counts(blobstore))
    for note in result.notes:
        progress.note(note)
    return result


def _live_backups_start(blobstore: BlobStore) -> float:
    """When the earliest live backup lease began, less the clock slack (inf when none is live): blobs
    modified from then on may belong to a snapshot still to commit.

    The leases are read first: a backup that takes its lease after this read writes only blobs younger
    than gc's start, which are never candidates, and one that released its lease before it had
    committed, so the catalog read after this sees its snapshot."""
    in_flight = [h for h in live_leases(blobstore) if h.operation != "gc"]  # a gc uploads nothing
    return min((h.started_s for h in in_flight), default=float("inf")) - CLOCK_SLACK_SECONDS


def _sweep_listing(blobstore: BlobStore, sweep: "_Sweep", result: GcResult, deleted: dict[str, GcAction],
                   referenced: set[str], *, keep_from: float, old_before: float, now: float) -> None:
    """Stream the listing of the blobs into ``sweep``: an unreferenced blob goes when it was modified before
    ``old_before`` or its TTL ran out before ``now``; one modified from ``keep_from`` on is kept (a live
    backup's). ``deleted`` (retention's) are passed over; the others kept are counted in ``result``."""
    try:
        for info in blobstore.list(BLOB_PREFIX):
            if info.key in deleted:
                continue
            if info.key in referenced or info.modified_at >= keep_from:
                result.blobs_kept += 1
                continue
            if info.modified_at < old_before:
                sweep.doom(info.key, info.size, "unreferenced, older than the grace period")
                continue
            expires = info.expires_at
            if not info.ttl_known:
                try:
                    expires = blobstore.stat(info.key).expires_at
                except BlobNotFoundError:
                    continue
            if expires is not None and expires < now:
                sweep.doom(info.key, info.size, "TTL expired")
            else:
                result.blobs_kept += 1
    except BaseException:
        sweep.abort()
        raise
    sweep.finish()


def _settle_store(ref: StoreRef, opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                  result: GcResult, deleted: dict[str, GcAction], sizing: "_SizingStore") -> None:
    """Settle one store holding its lease; skip it with a note while a live backup holds that. A dry
    run takes no lease (it writes nothing) but skips the same stores. A store with nothing to settle
    (cleanup done, retention satisfied, none asked for here, no commit log to reconcile with) is not
    leased at all."""
    if checkpoints.commit_log is None and opts.keep_last is None:
        try:
            records = checkpoints.records(ref)
        except CorruptSnapshotError as e:
            result.notes.append(f"{ref}: {e}")
            return
        latest = next((r for r in records if r.state == COMMITTED), None)
        if latest is None or not _unsettled(latest, records, opts.grace_seconds):
            return
    if opts.dry_run:
        holder = read_lease(blobstore, ref)
        if holder is not None and holder.live:
            result.notes.append(f"{ref}: skipped: a {holder.operation} holds its lease (host {holder.host}, "
                                f"pid {holder.pid}, since {holder.started})")
            return
        _settle_leased(ref, opts, blobstore, checkpoints, result, deleted, sizing)
        return
    try:
        with Lease(blobstore, ref, operation="gc"):
            _settle_leased(ref, opts, blobstore, checkpoints, result, deleted, sizing)
    except LockHeldError as e:
        result.notes.append(f"{ref}: skipped: {e}")


def _unsettled(latest: CheckpointRecord, records: list[CheckpointRecord], grace_seconds: float) -> bool:
    """Whether retention has work left in a store: the latest snapshot's cleanup is pending, a snapshot
    marked expired is past its grace (or was held for a reader pin), or more snapshots are committed
    than the latest one's retention keeps (one a reader pin held)."""
    committed = sum(1 for r in records if r.state == COMMITTED)
    now = now_ms()
    return (not latest.cleanup_done or any(r.state == EXPIRED and due_ms(r, grace_seconds) <= now for r in records)
            or committed > max(1, latest.keep_last))


def _settle_leased(ref: StoreRef, opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                   result: GcResult, deleted: dict[str, GcAction], sizing: "_SizingStore") -> None:
    """Finish the store's interrupted cleanup and apply retention; dry, plan them (catalog.retention)
    and say what they would do. Deletes go through ``sizing``, which learns each blob's size first (the
    listing comes later)."""
    finished = None
    try:
        if not opts.dry_run:
            # Holding the lease, no backup of this store is in flight: a pending record older than the
            # grace belongs to one that died.
            finished = finish_interrupted_cleanup(sizing, checkpoints, ref, abandon_after_s=opts.grace_seconds,
                                                  grace_seconds=opts.grace_seconds)
            if finished is not None and finished.missing:
                result.notes.append(f"{ref}: latest snapshot damaged ({len(finished.missing)} blobs missing, e.g. "
                                    f"{finished.missing[0]}), left alone; the next backup starts a new chain")
                return
            if finished is not None:
                result.cleanups_finished += 1
                _account(ref, finished, result, deleted, sizing)
        latest = checkpoints.latest(ref)
        records = checkpoints.records(ref) if latest is not None else []
    except SnapshotNotFoundError:
        return
    except CorruptSnapshotError as e:
        result.notes.append(f"{ref}: {e}")
        return
    if latest is None:
        return
    if opts.keep_last is None and (finished is not None or not _unsettled(latest, records, opts.grace_seconds)):
        return  # the cleanup just finished applied the store's own retention
    try:
        index = read_index(blobstore, latest.index_blob_id)
    except (SnapshotNotFoundError, CorruptSnapshotError) as e:
        result.notes.append(f"{ref}: latest snapshot unreadable, left alone: {e}")
        return
    plan = plan_retention(sizing, checkpoints, ref, latest, index, keep_last=opts.keep_last,
                          check_present=opts.dry_run, grace_seconds=opts.grace_seconds,
                          parallelism=opts.parallelism)
    if opts.dry_run:
        stats = plan.as_stats()
        sizing.measure(stats.deleted)  # nothing goes through delete: they are all still there
    else:
        stats = execute(plan, sizing, checkpoints, parallelism=opts.parallelism)
    if stats.missing:
        result.notes.append(f"{ref}: latest snapshot damaged ({len(stats.missing)} blobs missing, e.g. "
                            f"{stats.missing[0]}), retention {'would not be' if opts.dry_run else 'not'} applied; "
                            "the next backup starts a new chain")
        return
    _account(ref, stats, result, deleted, sizing)


def _account(ref: StoreRef, stats: CleanupStats, result: GcResult, deleted: dict[str, GcAction],
             sizing: "_SizingStore") -> None:
    """Add what one retention run of ``ref`` expired, deleted and held to the result."""
    result.snapshots_expired += stats.snapshots_expired
    result.expired += [GcExpiry(str(ref), e.record.checkpoint_id, e.record.index_blob_id, e.reason,
                                iso_utc(e.until_ms / 1000) if e.until_ms else None)
                       for e in stats.expired]
    for key in stats.deleted:
        why = stats.why.get(key)
        deleted.setdefault(key, GcAction(key, sizing.size(key), f"retention of {ref}" + (f": {why}" if why else "")))
    for h in stats.held:
        result.notes.append(f"{ref}: snapshot {h.record.checkpoint_id} kept past retention: {h.pin.describe()} "
                            "is reading it; a later gc or backup drops it")


def _referenced(refs: list[StoreRef], opts: GcOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                started_wall: float,
                notes: list[str] | None = None) -> tuple[set[str], list[tuple[StoreRef, str, str]]]:
    """Blobs of every committed snapshot in the catalog, of pending ones still within the grace, of
    expired ones (retention deletes their blobs when their grace ends; settling the stores did that for
    those it could) and of the snapshots live reader pins name, and (ref, index blob id, error) of each such snapshot whose
    index is malformed: what it references is unknown, so while there is one the caller sweeps no
    unreferenced blob.

    The pins are read after the catalog (catalog.pins): a reader whose snapshot was already out of the
    catalog when it was read sees that and lets it go. Pins that no longer bind are deleted (not
    ``dry_run``), with a line in ``notes``."""
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
            keys.add(r.index_blob_id)
            try:
                keys |= snapshot_blob_ids(r.index_blob_id, read_index(blobstore, r.index_blob_id))
            except SnapshotNotFoundError:
                pass
            except CorruptSnapshotError as e:
                if r.state != EXPIRED:  # retention drops an expired one whole, whatever its index says
                    unreadable.append((ref, r.index_blob_id, str(e)))
    pins = read_pins(blobstore)
    for index_blob_id in pinned_index_ids(pins) - keys:
        keys.add(index_blob_id)
        try:
            keys |= snapshot_blob_ids(index_blob_id, read_index(blobstore, index_blob_id))
        except (SnapshotNotFoundError, CorruptSnapshotError):
            pass  # nobody can be reading a snapshot whose index cannot be read
    stale = stale_pins(pins, older_than=started_wall - getattr(blobstore, 'mtime_grain_s', 1.0) - opts.grace_seconds)
    if stale:
        if not opts.dry_run:
            blobstore.delete([p.key for p in stale])
        if notes is not None:
            p = stale[0]
            why = p.problem or f"{p.describe()}, gone or expired"
            notes.append(f"{'would delete' if opts.dry_run else 'deleted'} {len(stale)} reader pins that no longer "
                         f"bind (e.g. {p.key}: {why})")
    return keys, unreadable


class _Sweep:
    """Deletes the doomed blobs in batches of the store's ``delete_batch`` as the listing finds them, on
    ``parallelism`` threads, with at most twice as many batches waiting: memory holds a few batches,
    whatever the listing holds. The first failed batch stops it: ``doom`` or ``close`` raises its error.
    With ``dry_run`` nothing is deleted; with ``itemize`` the actions are kept for the result."""

    def __init__(self, blobstore: BlobStore, opts: GcOptions, progress: ProgressReporter):
        self._blobstore = blobstore
        self._dry_run = opts.dry_run
        self._itemize = opts.itemize
        self._progress = progress
        self._size = blobstore.delete_batch
        self._batch: list[str] = []
        self._batch_bytes = 0
        self.actions: list[GcAction] = []
        self.count = 0
        self.bytes = 0
        self._pool: ThreadPoolExecutor | None = None
        self._slots = threading.Semaphore(2 * opts.parallelism)
        self._parallelism = opts.parallelism
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    def doom(self, key: str, size: int, reason: str) -> None:
        self.count += 1
        self.bytes += size
        if self._itemize:
            self.actions.append(GcAction(key, size, reason))
        if self._dry_run:
            return
        self._batch.append(key)
        self._batch_bytes += size
        if len(self._batch) >= self._size:
            self._flush()

    def _flush(self) -> None:
        self._check()
        if not self._batch:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._parallelism, thread_name_prefix="statectl-gc")
            self._progress.start("deleting", 0, 0)
        batch, nbytes = self._batch, self._batch_bytes
        self._batch, self._batch_bytes = [], 0
        self._slots.acquire()
        try:
            self._pool.submit(self._delete, batch, nbytes)
        except BaseException:
            self._slots.release()
            raise

    def _delete(self, keys: list[str], nbytes: int) -> None:
        try:
            if self._error is None:
                self._blobstore.delete(keys)
                self._progress.advance(nbytes)
                for _ in keys:
                    self._progress.file_done()
        except BaseException as e:  # noqa: BLE001 - raised in the sweeping thread by _check
            with self._lock:
                if self._error is None:
                    self._error = e
        finally:
            self._slots.release()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def finish(self) -> None:
        """Delete the last batch and wait for every batch; raise the first failure."""
        try:
            self._flush()
        finally:
            self._shutdown(cancel=False)
        self._check()

    def abort(self) -> None:
        """The caller failed (the listing, a stat): drop the batches not started, wait for the others."""
        self._shutdown(cancel=True)

    def _shutdown(self, cancel: bool) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
            self._pool = None
            self._progress.stop()


class _SizingStore:
    """The blob store as retention sees it inside gc: before it deletes blobs, their sizes are read
    (``stat``, in parallel), so that gc reports what retention reclaimed without holding a listing.
    Retention deletes only what the catalog names: a snapshot's worth of blobs, not the whole store."""

    def __init__(self, inner: BlobStore, parallelism: int):
        self._inner = inner
        self._parallelism = parallelism
        self._sizes: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        self.measure(keys)
        self._inner.delete(keys)

    def measure(self, keys: Iterable[str]) -> None:
        todo = [k for k in dict.fromkeys(keys) if k not in self._sizes]

        def task(key: str):
            def run(cancel: threading.Event) -> None:
                if not cancel.is_set():
                    try:
                        self._sizes[key] = self._inner.stat(key).size
                    except BlobNotFoundError:
                        self._sizes[key] = 0  # gone already: nothing reclaimed here
            return run

        run_parallel([task(k) for k in todo], self._parallelism)

    def size(self, key: str) -> int:
        return self._sizes.get(key, 0)


def request_counts(blobstore: BlobStore) -> dict[str, int]:
    """Requests the store has seen, by kind, where it counts them (stores from ``open_blobstore`` do:
    statectl/blobstore/stats.py), else {}."""
    counts = getattr(blobstore, "request_counts", None)
    return dict(sorted(counts().items())) if callable(counts) else {}


def _since(before: dict[str, int], now: dict[str, int]) -> dict[str, int]:
    """The requests counted between two readings (a store may have served others before this gc)."""
    return {k: n - before.get(k, 0) for k, n in now.items() if n - before.get(k, 0) > 0}
