"""The commit of a new snapshot, shared by every operation that makes one (backup, snapshots copy): the
preparation under the store's lease, the commit itself (the index, then the checkpoint record: the catalog
and, with a Kafka commit log, the job's checkpoint topic) and the post-commit cleanup
(ARCHITECTURE.md "backup"). Blobs uploaded or copied before ``commit_snapshot`` carry a TTL; anything
that fails before the record leaves only TTL'd blobs, which gc reclaims.
"""

from __future__ import annotations

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import write_index
from statectl.catalog.lease import Lease
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord
from statectl.catalog.refs import StoreRef
from statectl.catalog.retention import (
    CleanupStats,
    RetentionPlan,
    finish_interrupted_cleanup,
    plan_retention,
    post_commit_cleanup,
)
from statectl.errors import CorruptSnapshotError, SnapshotNotFoundError
from statectl.progress import ProgressReporter
from statectl.snapshot.model import SnapshotIndex


def prepare_commit(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, *,
                   grace_seconds: int, progress: ProgressReporter) -> CheckpointRecord | None:
    """Before a new snapshot of ``ref`` is built (holding its lease): finish the cleanup an interrupted
    commit left pending, and return the latest committed record to build on, or None when there is none
    or the latest snapshot is damaged (its blobs are missing: the new snapshot then starts a new chain;
    a note says so). Idempotent."""
    # Holding the lease, no other backup of this store is in flight: any pending record is abandoned.
    finished = finish_interrupted_cleanup(blobstore, checkpoints, ref, abandon_after_s=0,
                                          grace_seconds=grace_seconds)
    try:
        prev_record = checkpoints.latest(ref)
    except SnapshotNotFoundError:
        prev_record = None  # e.g. the job's checkpoint topic has no v2 checkpoint for this task yet
    if finished is not None and finished.missing:
        # Building on it would carry its missing blobs into the new snapshot: start a new chain.
        progress.note(f"the latest snapshot of {ref} is damaged ({len(finished.missing)} of its blobs are "
                      f"missing, e.g. {finished.missing[0]}); taking a full backup")
        prev_record = None
    elif finished is not None:
        progress.note(f"finished the interrupted cleanup of the previous backup of {ref}")
        note_held(progress, ref, finished)
    return prev_record


def commit_snapshot(blobstore: BlobStore, checkpoints: BlobCheckpointStore, lease: Lease, ref: StoreRef,
                    index: SnapshotIndex, *, ttl_seconds: int, keep_last: int,
                    input_offsets: dict[str, str] | None = None,
                    markers: dict[str, dict[str, str]] | None = None) -> tuple[str, CheckpointRecord]:
    """The commit of a new snapshot of ``ref`` whose blobs are uploaded (with their TTLs): upload
    ``index`` (TTL'd), then record the checkpoint (the catalog record, and with a Kafka commit log the
    job's checkpoint topic) under ``index.snapshot_metadata.checkpoint_id``, after checking that
    ``lease`` is still held. Returns the index blob id and the committed record. Anything that fails
    before the record leaves only TTL'd blobs (gc reclaims them); ``snapshots copy`` commits through here,
    backup through its two halves (several stores of a task at once). Raises LeaseLostError when another
    process took the store over."""
    index_id, record = stage_snapshot(blobstore, index, ttl_seconds=ttl_seconds, keep_last=keep_last)
    commit_staged(checkpoints, [(lease, ref, record)], input_offsets=input_offsets, markers=markers)
    return index_id, record


def stage_snapshot(blobstore: BlobStore, index: SnapshotIndex, *, ttl_seconds: int,
                   keep_last: int) -> tuple[str, CheckpointRecord]:
    """The first half of ``commit_snapshot``: upload ``index`` (TTL'd); its blob id, and the record that
    ``commit_staged`` commits. Nothing is recorded: what fails from here to the commit leaves TTL'd blobs."""
    index_id = write_index(blobstore, index, ttl_seconds)
    failpoints.hit("after-index-upload")
    return index_id, CheckpointRecord(index.snapshot_metadata.checkpoint_id, index_id, index.creation_time_millis,
                                      keep_last=keep_last)


def commit_staged(checkpoints: BlobCheckpointStore, staged: list[tuple[Lease, StoreRef, CheckpointRecord]], *,
                  input_offsets: dict[str, str] | None = None,
                  markers: dict[str, dict[str, str]] | None = None, exact_markers: bool = False) -> None:
    """The second half: commit the snapshots ``stage_snapshot`` staged (of one or more stores of one task,
    each held by its lease) as ONE checkpoint (BlobCheckpointStore.commit_stores, ``exact_markers`` with it),
    after checking that every lease is still held. Raises LeaseLostError when another process took one of the
    stores over."""
    for lease, _, _ in staged:
        lease.check()  # fencing: never commit after another backup took the store over
    checkpoints.commit_stores([(ref, record) for _, ref, record in staged], input_offsets=input_offsets,
                              markers=markers, exact_markers=exact_markers)


# The index blob id a planned snapshot stands under: it has none before its commit, and retention only
# reads the id of the snapshot it plans for to keep it (never a data blob key: nothing can delete it).
PLANNED_INDEX = "(the new snapshot's index)"


def plan_commit(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, index: SnapshotIndex, *,
                keep_last: int, grace_seconds: int) -> RetentionPlan:
    """What the cleanup after committing ``index`` as the latest snapshot of ``ref`` would do (``finish_commit``
    with these settings): which snapshots retention would expire and which blobs go, decided now, writing
    nothing (a dry run's plan). ``index`` need not be uploaded: its files' blobs count as new, its
    removed files and previous index as what it leaves behind. Raises as catalog.retention.plan_retention."""
    record = CheckpointRecord(index.snapshot_metadata.checkpoint_id, PLANNED_INDEX, index.creation_time_millis,
                              keep_last=keep_last)
    return plan_retention(blobstore, checkpoints, ref, record, index, keep_last=keep_last, new_blob_ids=[],
                          grace_seconds=grace_seconds)


def finish_commit(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, record: CheckpointRecord,
                  index: SnapshotIndex, *, new_blob_ids: list[str], grace_seconds: int, progress: ProgressReporter,
                  what: str = "backup") -> CleanupStats:
    """The post-commit cleanup of a snapshot ``commit_snapshot`` committed: the TTLs of ``new_blob_ids``
    and of the index go, retention applies (catalog.retention.post_commit_cleanup). Idempotent, and re-run
    by the next backup or gc when interrupted. Raises CorruptSnapshotError when blobs of the snapshot
    vanished before their TTL could be removed."""
    failpoints.hit("after-commit")
    cleanup = post_commit_cleanup(blobstore, checkpoints, ref, record, index, new_blob_ids=new_blob_ids,
                                  grace_seconds=grace_seconds)
    failpoints.hit("after-cleanup")
    note_held(progress, ref, cleanup)
    if cleanup.missing:
        raise CorruptSnapshotError(
            f"snapshot {record.index_blob_id} of {ref} was committed, but {len(cleanup.missing)} of its blobs are "
            f"gone (e.g. {cleanup.missing[0]}): something deleted them while the {what} ran",
            hint=("the next backup starts a new full chain; older snapshots are untouched (",
                  ref.command("snapshots verify"), " checks one)"))
    return cleanup


def note_held(progress: ProgressReporter, ref: StoreRef, cleanup: CleanupStats) -> None:
    for h in cleanup.held:
        progress.note(f"kept snapshot {h.record.checkpoint_id} of {ref} past retention: {h.pin.describe()} is "
                      "reading it; the next backup or gc drops it")
