"""Retention as plan -> execute: the idempotent cleanup after a commit, with ``keep_last`` and a grace
period.

``plan_retention`` reads the catalog, the indexes and the live reader pins of one store and decides,
writing nothing: which TTLs to remove, which snapshots expire (and why), which blobs go (and why), which
snapshots a reader pin holds past retention. ``execute`` carries a plan out, in the order that keeps a
crash anywhere harmless: TTLs, then the ``expired`` marks, then the pins again (a reader that pinned
since the plan: catalog.pins), then the deletions, then the records. ``post_commit_cleanup`` composes
the two for the backup; gc calls them separately, so that ``gc --dry-run`` shows the plan.

A dropped snapshot goes in two steps. Retention marks it ``expired`` (no longer restorable, out of
``snapshots list``) with a deadline ``grace`` seconds later; its blobs stay until then, for a restore
that started before and could not pin it (read-only credentials); the first retention run after it
(the next backup, or gc) deletes them and forgets the record. A run with a shorter grace of its own
(``gc --grace 1m``) deletes them once that much has passed since the marking. With ``grace`` 0 both
happen at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import is_data_blob_id, read_index, snapshot_blob_ids
from statectl.catalog.pins import PinInfo, live_pins, pinned_index_ids
from statectl.catalog.records import (
    COMMITTED,
    EXPIRED,
    BlobCheckpointStore,
    CheckpointRecord,
)
from statectl.catalog.records import iso_utc
from statectl.catalog.records import now_ms as records_now_ms
from statectl.catalog.refs import StoreRef, parse_checkpoint_id
from statectl.errors import (
    BlobNotFoundError,
    CorruptSnapshotError,
    SnapshotNotFoundError,
)
from statectl.parallel import run_parallel
from statectl.snapshot.model import SnapshotIndex


@dataclass(frozen=True)
class Deletion:
    """A blob retention deletes, and why."""

    blob_id: str
    reason: str


@dataclass(frozen=True)
class Expiry:
    """A snapshot retention drops: its record, why, and every blob it references (its index included).
    ``until_ms``: in ``RetentionPlan.cooling``, when its grace ends (its blobs stay until then)."""

    record: CheckpointRecord
    reason: str
    blobs: frozenset[str]
    until_ms: int = 0


@dataclass(frozen=True)
class Held:
    """A snapshot retention would drop, kept because a live reader pin names it."""

    record: CheckpointRecord
    pin: PinInfo


@dataclass
class RetentionPlan:
    """What the cleanup of ``record`` (a committed snapshot of ``ref``, normally the latest) will do.

    ``ttl_to_remove``: its blobs whose TTL goes, its index blob last (a permanent index means all its
    blobs are). Of the snapshots retention drops (those older than the newest ``keep_last`` committed
    ones, and those marked expired before): ``cooling``, the ones still within their grace (the
    committed ones are marked expired now, their blobs kept); ``expire``, those whose grace is over
    (all of them with a grace of 0): their blobs go and their records are forgotten; ``held``: ones a
    live reader pin names. ``delete``: every blob of ``expire`` and every blob ``record``'s snapshot
    removed (files it no longer has, the previous index) that no kept, cooling or pinned snapshot
    references, data blobs before index blobs. ``missing``: blobs of the snapshot found gone (only looked for with
    ``check_present``; ``execute`` finds them as it removes TTLs).
    """

    ref: StoreRef
    record: CheckpointRecord
    keep_last: int
    ttl_to_remove: list[str]
    kept: list[CheckpointRecord] = field(default_factory=list)
    expire: list[Expiry] = field(default_factory=list)
    cooling: list[Expiry] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    delete: list[Deletion] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # The blobs each pinned index references, as planned (execute adds pins that came later).
    pinned_blobs: dict[str, frozenset[str]] = field(default_factory=dict)
    now_ms: int = 0  # the time the plan judged deadlines by; execute marks expiries with it

    @property
    def newly_expired(self) -> list[Expiry]:
        """The committed snapshots this plan marks expired (not those marked before)."""
        return [e for e in self.expire + self.cooling if e.record.state == COMMITTED]

    @property
    def snapshots_expired(self) -> int:
        return len(self.newly_expired)

    def as_stats(self) -> "CleanupStats":
        """What executing the plan would report, were no pin to come meanwhile (a dry run)."""
        return CleanupStats(blobs_deleted=len(self.delete), records_forgotten=len(self.expire),
                            snapshots_expired=self.snapshots_expired, deleted=[d.blob_id for d in self.delete],
                            missing=list(self.missing), held=list(self.held),
                            why={d.blob_id: d.reason for d in self.delete}, expired=self.newly_expired,
                            forgotten=list(self.expire))


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
    # Committed snapshots marked expired by this run (records_forgotten counts the records forgotten:
    # those whose grace ended, possibly marked by an earlier run, and not the held ones).
    snapshots_expired: int = 0
    # Snapshots kept past retention for a live reader pin; a later backup or gc drops them.
    held: list[Held] = field(default_factory=list)
    # Why each blob of ``deleted`` went; the snapshots this run marked expired, with why (``until_ms``:
    # when their blobs may go); the ones whose records it forgot.
    why: dict[str, str] = field(default_factory=dict)
    expired: list[Expiry] = field(default_factory=list)
    forgotten: list[Expiry] = field(default_factory=list)


def plan_retention(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef,
                   record: CheckpointRecord, index: SnapshotIndex, *, keep_last: int | None = None,
                   new_blob_ids: list[str] | None = None, check_present: bool = False,
                   grace_seconds: float = 0, now_ms: int | None = None, parallelism: int = 8) -> RetentionPlan:
    """Plan the cleanup of ``record`` (whose parsed index is ``index``) with retention: keep the newest
    ``keep_last`` committed snapshots (default: the record's own policy), never fewer than one; keep
    the blobs of a dropped snapshot until ``grace_seconds`` after it is marked expired (one marked
    before goes at its deadline, or ``grace_seconds`` after it was marked if that comes first: an
    operator's shorter grace wins; ``now_ms``: the time to judge by, default the clock).

    Reads the catalog records of ``ref``, the indexes of the snapshots it keeps or drops and the live
    reader pins of ``ref``; writes nothing. ``new_blob_ids``: the blobs whose TTL is still on (a backup
    knows what it uploaded); None means every present blob. With ``check_present`` each of those is
    stat'ed and the gone ones are listed in ``missing`` (what ``execute`` would find).

    A blob any kept, held or pinned snapshot references is never in ``delete``; nor is anything that is
    not a data blob (a damaged catalog record naming another kind of object must not delete it). An
    unreadable index of a dropped snapshot contributes just its own id. Raises CorruptSnapshotError for
    a malformed catalog record.
    """
    keep = max(1, keep_last if keep_last is not None else record.keep_last)
    ttl = list(new_blob_ids if new_blob_ids is not None else index.present_blob_ids())
    plan = RetentionPlan(ref, record, keep, ttl + [record.index_blob_id])
    plan.now_ms = now_ms if now_ms is not None else records_now_ms()
    cache: dict[str, frozenset[str]] = {}

    def blobs_of(index_blob_id: str) -> frozenset[str]:
        return _blob_ids_or_self(blobstore, index_blob_id, cache)

    dropping = _keep_newest(plan, checkpoints.records(ref))
    pins = live_pins(blobstore, ref)
    _place_dropped(plan, dropping, pins, blobs_of, grace_seconds)
    plan.pinned_blobs = {i: blobs_of(i) for i in sorted(pinned_index_ids(pins))}
    plan.delete = _deletions(plan, index, _still_referenced(plan, index, blobs_of))
    if check_present:
        run_parallel([_stat_task(blobstore, b, plan.missing) for b in plan.ttl_to_remove], parallelism)
    return plan


def _keep_newest(plan: RetentionPlan, records: list[CheckpointRecord]) -> list[tuple[CheckpointRecord, str]]:
    """Fill ``plan.kept`` (the snapshots newer than the plan's, the plan's, and the newest older ones up to
    ``keep_last`` in all); return the snapshots retention drops, with why."""
    keep, checkpoint_id = plan.keep_last, plan.record.checkpoint_id
    committed = [r for r in records if r.state == COMMITTED and r.checkpoint_id != checkpoint_id]
    newer = [r for r in committed if parse_checkpoint_id(r.checkpoint_id) > parse_checkpoint_id(checkpoint_id)]
    older = [r for r in committed if r not in newer]
    plan.kept = newer + [plan.record] + older[: max(0, keep - 1 - len(newer))]
    dropping = [(r, f"older than the newest {keep} kept (keep-last {keep})") for r in older if r not in plan.kept]
    # Marked by an interrupted run of a cleanup (or held by a pin then): their blobs may be half gone.
    return dropping + [(r, _expired_reason(r)) for r in records if r.state == EXPIRED]


def _place_dropped(plan: RetentionPlan, dropping: list[tuple[CheckpointRecord, str]], pins: list[PinInfo],
                   blobs_of: Callable[[str], frozenset[str]], grace_seconds: float) -> None:
    """Sort the dropped snapshots into ``cooling`` (within their grace), ``held`` (a live pin names them)
    and ``expire`` (their blobs go now)."""
    now, grace_ms = plan.now_ms, int(grace_seconds * 1000)
    pinned = pinned_index_ids(pins)
    for r, reason in dropping:
        blobs = blobs_of(r.index_blob_id)
        if r.state == EXPIRED and due_ms(r, grace_seconds) > now:
            plan.cooling.append(Expiry(r, reason, blobs, due_ms(r, grace_seconds)))
        elif r.index_blob_id in pinned:
            plan.held.append(Held(r, next(p for p in pins if p.index_blob_id == r.index_blob_id)))
        elif r.state != EXPIRED and grace_ms > 0:
            plan.cooling.append(Expiry(r, reason, blobs, now + grace_ms))
        else:
            plan.expire.append(Expiry(r, reason, blobs))


def _still_referenced(plan: RetentionPlan, index: SnapshotIndex,
                      blobs_of: Callable[[str], frozenset[str]]) -> set[str]:
    """Every blob the plan's snapshot, a kept, a pinned or a cooling snapshot references."""
    referenced: set[str] = snapshot_blob_ids(plan.record.index_blob_id, index)
    for r in plan.kept:
        if r.checkpoint_id != plan.record.checkpoint_id:
            referenced |= blobs_of(r.index_blob_id)
    for blobs in plan.pinned_blobs.values():
        referenced |= blobs
    for e in plan.cooling:
        referenced |= e.blobs
    return referenced


def _deletions(plan: RetentionPlan, index: SnapshotIndex, referenced: set[str]) -> list[Deletion]:
    """The blobs to delete, with why: the files the plan's snapshot removed, its previous index, and the
    blobs of the expiring snapshots, data blobs before index blobs, none that is ``referenced`` or not
    a data blob."""
    checkpoint_id = plan.record.checkpoint_id
    data: list[Deletion] = [Deletion(b.blob_id, f"file {f.file_name} removed by checkpoint {checkpoint_id}")
                            for f in index.dir_index.removed_files() for b in f.blobs]
    indexes: list[Deletion] = []
    if index.prev_snapshot_index_blob_id:
        indexes.append(Deletion(index.prev_snapshot_index_blob_id,
                                f"index of the snapshot before checkpoint {checkpoint_id}, which retention does "
                                "not keep"))
    for e in plan.expire:
        why = f"snapshot {e.record.checkpoint_id} expired: {e.reason}"
        data.extend(Deletion(b, why) for b in sorted(e.blobs - {e.record.index_blob_id}))
        # Index blobs last: while one exists, a re-run after a crash can still find that snapshot's blobs.
        indexes.append(Deletion(e.record.index_blob_id, f"index of {why}"))
    found: list[Deletion] = []
    seen: set[str] = set()
    for d in data + indexes:
        if d.blob_id not in seen and d.blob_id not in referenced and is_data_blob_id(d.blob_id):
            found.append(d)
        seen.add(d.blob_id)
    return found


def execute(plan: RetentionPlan, blobstore: BlobStore, checkpoints: BlobCheckpointStore, *,
            parallelism: int = 8) -> CleanupStats:
    """Carry out ``plan``. Idempotent: a crash anywhere leaves what a new plan finishes.

    1. Remove the TTLs (the index blob's last). A blob found gone stops everything here: it is listed in
       ``missing``, nothing is deleted or forgotten (older snapshots may be the only good ones left) and
       the cleanup stays pending.
    2. Mark the snapshots to expire and the cooling ones ``expired`` in the catalog, with the time: out
       of the list of restorable snapshots before any of their blobs goes; the records stay until their
       blobs are gone, so that a re-run after a crash still knows which blobs were theirs.
    3. Read the live reader pins again, *after* step 2 (catalog.pins): a reader that pinned a snapshot
       since the plan keeps its blobs, and its record stays (expired) for a later run to finish.
    4. Delete the planned blobs (the ``during-cleanup`` failpoint sits half way), forget the expired
       records, and mark the cleanup done with its retention.
    """
    stats = CleanupStats(held=list(plan.held))
    if not _remove_ttls(plan, blobstore, stats, parallelism):
        return stats
    _mark_expired(plan, checkpoints, stats)
    protected, forget = _pinned_now(plan, blobstore, stats)
    doomed = [d.blob_id for d in plan.delete if d.blob_id not in protected]
    stats.why = {d.blob_id: d.reason for d in plan.delete if d.blob_id not in protected}
    half = len(doomed) // 2
    blobstore.delete(doomed[:half])
    failpoints.hit("during-cleanup")
    blobstore.delete(doomed[half:])
    stats.blobs_deleted = len(doomed)
    stats.deleted = doomed
    for e in forget:
        checkpoints.forget(plan.ref, e.record.checkpoint_id)
        stats.records_forgotten += 1
        stats.forgotten.append(e)
    record = plan.record
    if not record.cleanup_done or record.keep_last != plan.keep_last:
        checkpoints.write(plan.ref, replace(record, cleanup_done=True, keep_last=plan.keep_last))
    return stats


def _remove_ttls(plan: RetentionPlan, blobstore: BlobStore, stats: CleanupStats, parallelism: int) -> bool:
    """Step 1 of ``execute``: remove the TTLs, the index blob's last; False (the blobs found gone in
    ``stats.missing``) when the snapshot is damaged."""
    pending = plan.ttl_to_remove[:-1]
    run_parallel([_remove_ttl_task(blobstore, b, stats.missing) for b in pending], parallelism)
    stats.ttl_removed = len(pending) - len(stats.missing)
    if stats.missing:
        return False
    try:
        blobstore.remove_ttl(plan.ttl_to_remove[-1])
    except BlobNotFoundError:
        stats.missing.append(plan.ttl_to_remove[-1])
        return False
    stats.ttl_removed += 1
    return True


def _mark_expired(plan: RetentionPlan, checkpoints: BlobCheckpointStore, stats: CleanupStats) -> None:
    """Step 2 of ``execute``: mark the committed snapshots to expire or cool ``expired``, with the plan's time."""
    for e in plan.expire + plan.cooling:
        if e.record.state != EXPIRED:
            checkpoints.write(plan.ref, replace(e.record, state=EXPIRED, expired_ms=plan.now_ms,
                                                delete_after_ms=e.until_ms))
            stats.snapshots_expired += 1
            stats.expired.append(e)


def _pinned_now(plan: RetentionPlan, blobstore: BlobStore, stats: CleanupStats) -> tuple[set[str], list[Expiry]]:
    """Step 3 of ``execute``: read the live pins again; the blobs they protect, and the expiring snapshots
    no pin names (their records go). One a pin names since the plan is added to ``stats.held``."""
    pins = live_pins(blobstore, plan.ref)
    protected: set[str] = set()
    for blob_id in pinned_index_ids(pins):
        blobs = plan.pinned_blobs.get(blob_id)
        if blobs is None:
            blobs = next((e.blobs for e in plan.expire if e.record.index_blob_id == blob_id), None)
        protected |= blobs if blobs is not None else _blob_ids_or_self(blobstore, blob_id, {})
    forget = []
    for e in plan.expire:
        pin = next((p for p in pins if p.index_blob_id == e.record.index_blob_id), None)
        if pin is None:
            forget.append(e)
        else:
            stats.held.append(Held(replace(e.record, state=EXPIRED), pin))
    return protected, forget


def post_commit_cleanup(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef,
                        record: CheckpointRecord, index: SnapshotIndex, *, keep_last: int | None = None,
                        new_blob_ids: list[str] | None = None, dry_run: bool = False,
                        grace_seconds: float = 0, parallelism: int = 8) -> CleanupStats:
    """The cleanup after a commit: ``execute(plan_retention(...))`` (see both). With ``dry_run`` nothing
    changes and the stats say what would be deleted. Idempotent.

    Removes the TTL of the snapshot's blobs (only ``new_blob_ids`` when given, else every present
    blob) and of its index; keeps the newest ``keep_last`` committed snapshots and those a reader pins;
    marks the rest expired; deletes the blobs of those expired over ``grace_seconds`` ago and of the
    files this snapshot removed, unless a kept, cooling or pinned snapshot references them; forgets the
    records of the deleted ones and marks the cleanup done. A snapshot blob
    that is already gone stops it before anything is deleted (``missing``; the cleanup stays pending).
    """
    plan = plan_retention(blobstore, checkpoints, ref, record, index, keep_last=keep_last,
                          new_blob_ids=new_blob_ids, grace_seconds=grace_seconds, parallelism=parallelism)
    if dry_run:
        return plan.as_stats()
    return execute(plan, blobstore, checkpoints, parallelism=parallelism)


def due_ms(record: CheckpointRecord, grace_seconds: float) -> int:
    """When the blobs of an expired snapshot may go, for a run with ``grace_seconds``: its deadline, or
    that run's grace after the marking if that comes first (0 for a record without the time fields)."""
    return min(record.delete_after_ms, record.expired_ms + int(grace_seconds * 1000))


def _expired_reason(r: CheckpointRecord) -> str:
    if not r.expired_ms:
        return "marked expired earlier"
    return f"marked expired at {iso_utc(r.expired_ms / 1000)}"


def _remove_ttl_task(blobstore: BlobStore, blob_id: str, missing: list[str]):
    def run(cancel) -> None:
        if not cancel.is_set():
            try:
                blobstore.remove_ttl(blob_id)
            except BlobNotFoundError:
                missing.append(blob_id)  # list.append is atomic: the tasks share it safely

    return run


def _stat_task(blobstore: BlobStore, blob_id: str, missing: list[str]):
    def run(cancel) -> None:
        if not cancel.is_set():
            try:
                blobstore.stat(blob_id)
            except BlobNotFoundError:
                missing.append(blob_id)

    return run


def _blob_ids_or_self(blobstore: BlobStore, index_blob_id: str, cache: dict[str, frozenset[str]]) -> frozenset[str]:
    """The blobs of a snapshot (its index included); just its index id when the index is gone or
    unreadable (an earlier cleanup got that far; gc sweeps whatever that leaves unreferenced)."""
    found = cache.get(index_blob_id)
    if found is None:
        try:
            found = frozenset(snapshot_blob_ids(index_blob_id, read_index(blobstore, index_blob_id)))
        except (SnapshotNotFoundError, CorruptSnapshotError):
            found = frozenset({index_blob_id})
        cache[index_blob_id] = found
    return found


def finish_interrupted_cleanup(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, *,
                               abandon_after_s: float = 6 * 3600, grace_seconds: float = 0) -> CleanupStats | None:
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
    return post_commit_cleanup(blobstore, checkpoints, ref, record, index, grace_seconds=grace_seconds)
