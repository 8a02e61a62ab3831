"""Helpers shared by the operations: reading and writing index blobs, resolving snapshot ids,
and the idempotent post-commit cleanup."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field, replace

from statectl import failpoints
from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.engine.checkpoints import COMMITTED, EXPIRED, BlobCheckpointStore, CheckpointRecord
from statectl.engine.layout import StoreRef, is_checkpoint_id, parse_checkpoint_id
from statectl.engine.transfer import run_parallel
from statectl.errors import BlobNotFoundError, CorruptSnapshotError, IndexFormatError, SnapshotNotFoundError, UsageError
from statectl.snapshot.model import SnapshotIndex, parse_index, serialize_index


MAX_PARALLELISM = 256
MAX_INDEX_BYTES = 512 * 1024 * 1024  # an index of a million files is about 300 MiB


def check_parallelism(value: int) -> None:
    """Raise UsageError unless 1 <= value <= MAX_PARALLELISM: each unit is a thread and a connection, and
    a typo such as ``-j 100000`` must not exhaust the host's threads."""
    if not 1 <= value <= MAX_PARALLELISM:
        raise UsageError(f"--parallelism must be between 1 and {MAX_PARALLELISM}, not {value}")


def read_index(blobstore: BlobStore, blob_id: str, *, what: str = "snapshot") -> SnapshotIndex:
    """Fetch and parse an index blob, and check that every blob id it names is a data blob of this store.

    Raises SnapshotNotFoundError when the blob does not exist, IndexFormatError / UnsafePathError
    when it is malformed. An index naming anything outside ``blobs/`` (a catalog record, a lease) is
    malformed: a cleanup deletes the blobs an index marks removed, so such an index could make it
    delete the catalog.
    """
    buf = io.BytesIO()
    try:
        blobstore.get(blob_id, buf, length=MAX_INDEX_BYTES + 1)
    except BlobNotFoundError:
        raise SnapshotNotFoundError(f"{what} index blob {blob_id} not found in {blobstore.url}") from None
    if buf.tell() > MAX_INDEX_BYTES:
        raise IndexFormatError(f"index blob {blob_id}: malformed index: larger than {MAX_INDEX_BYTES} bytes")
    try:
        index = parse_index(buf.getvalue())
        check_blob_ids(index)
        return index
    except CorruptSnapshotError as e:
        raise type(e)(f"index blob {blob_id}: {e}", hint=e.hint) from None


def is_data_blob_id(blob_id: str) -> bool:
    """Whether ``blob_id`` has the shape of a data blob key: under ``blobs/``; no empty or hidden segment
    (``.``, ``..``, a blob store's ``.tmp-`` files); no control character; not a name a blob store keeps
    for itself (``.ttl`` sidecars, ``.lock`` files)."""
    parts = blob_id.split("/")
    return (blob_id.startswith(BLOB_PREFIX) and len(parts) >= 2 and blob_id.isprintable()
            and all(p and not p.startswith(".") for p in parts) and not parts[-1].endswith((".ttl", ".lock")))


def check_blob_ids(index: SnapshotIndex) -> None:
    """Raise IndexFormatError unless every blob id of ``index`` (present, removed, prev) is a data blob key."""
    ids = index.present_blob_ids() + index.removed_blob_ids()
    if index.prev_snapshot_index_blob_id is not None:
        ids.append(index.prev_snapshot_index_blob_id)
    for blob_id in ids:
        if not is_data_blob_id(blob_id):
            raise IndexFormatError(f"malformed index: blob id {blob_id!r} is not a data blob of this store")


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
                     snapshot: str | None, *, allow_other_store: bool = False) -> ResolvedSnapshot:
    """Find a snapshot of ``ref``: the latest when ``snapshot`` is None, else by checkpoint id, full
    index blob id, or a unique prefix (at least 6 characters) of the index blob's UUID.

    The index's own snapshot metadata must name ``ref`` (job, job id, task, store): a full blob id of
    another store's snapshot is refused unless ``allow_other_store`` (a deliberate cross-restore).

    Raises SnapshotNotFoundError (exit 10) when nothing of ``ref`` matches, UsageError when a prefix is
    ambiguous, CorruptSnapshotError (exit 1) when a recorded snapshot's index blob is missing or
    malformed: that snapshot exists but is damaged, and an older one may still be good.
    """
    if snapshot is None:
        record = checkpoints.latest(ref)
        if record is None:
            raise SnapshotNotFoundError(f"no snapshot of {ref} in {blobstore.url}",
                                        hint="run 'statectl backup' first, or check --job/--task/--store")
        return _owned(_recorded(blobstore, record, "latest snapshot"), ref, allow_other_store)
    records = checkpoints.list(ref)
    matches = [r for r in records if snapshot in (r.checkpoint_id, r.index_blob_id)]
    if not matches and not is_checkpoint_id(snapshot) and len(snapshot) >= 6:
        matches = [r for r in records if short_id(r.index_blob_id).startswith(snapshot)]
    if len(matches) > 1:
        raise UsageError(f"snapshot id {snapshot!r} is ambiguous: {len(matches)} snapshots match",
                         hint="give more characters of the id")
    if matches:
        return _owned(_recorded(blobstore, matches[0], "snapshot"), ref, allow_other_store)
    if is_data_blob_id(snapshot):
        # An index blob no checkpoint of this store records (e.g. a superseded one kept by retention).
        try:
            found = ResolvedSnapshot(snapshot, read_index(blobstore, snapshot), None)
        except SnapshotNotFoundError:
            pass
        else:
            return _owned(found, ref, allow_other_store)
    raise SnapshotNotFoundError(f"no snapshot {snapshot!r} of {ref} in {blobstore.url}",
                                hint="'statectl snapshots list' shows the snapshots there are")


def _recorded(blobstore: BlobStore, record: CheckpointRecord, what: str) -> ResolvedSnapshot:
    """The snapshot a catalog record names; its index blob being gone makes it damaged, not unknown."""
    try:
        return ResolvedSnapshot(record.index_blob_id, read_index(blobstore, record.index_blob_id), record)
    except SnapshotNotFoundError:
        raise CorruptSnapshotError(
            f"{what} {record.index_blob_id} (checkpoint {record.checkpoint_id}) is damaged: its index blob is "
            f"missing from {blobstore.url}",
            hint="restore an older snapshot with --snapshot ('statectl snapshots list' shows them); "
                 "the next backup starts a new chain") from None


def snapshot_owner(index: SnapshotIndex) -> str:
    """The store a snapshot was taken of, as ``job-id/task/store``."""
    m = index.snapshot_metadata
    return f"{m.job_name}-{m.job_id}/{m.task_name}/{m.store_name}"


def _owned(snap: ResolvedSnapshot, ref: StoreRef, allow_other_store: bool) -> ResolvedSnapshot:
    m = snap.index.snapshot_metadata
    if allow_other_store or (m.job_name, m.job_id, m.task_name, m.store_name) == (ref.job, ref.job_id, ref.task,
                                                                                   ref.store):
        return snap
    raise SnapshotNotFoundError(
        f"snapshot {snap.index_blob_id} is a snapshot of {snapshot_owner(snap.index)}, not of {ref}",
        hint="pass that snapshot's own --job/--job-id/--task/--store; to restore it into this store "
             "deliberately, add --from-other-store")


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


def now_ms() -> int:
    return int(time.time() * 1000)
