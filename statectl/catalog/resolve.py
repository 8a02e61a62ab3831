"""Find a snapshot of a store by what an operator types: nothing (the latest), a checkpoint id, a full
index blob id, or a unique prefix of its UUID; refuse a snapshot of another store unless asked."""

from __future__ import annotations

from dataclasses import dataclass

from statectl.blobstore.base import BlobStore
from statectl.catalog.index import is_data_blob_id, read_index, short_id, snapshot_owner
from statectl.catalog.records import COMMITTED, EXPIRED, BlobCheckpointStore, CheckpointRecord, iso_utc, now_ms
from statectl.catalog.refs import StoreRef, is_checkpoint_id
from statectl.errors import CorruptSnapshotError, SnapshotNotFoundError, UsageError
from statectl.snapshot.model import SnapshotIndex


@dataclass(frozen=True)
class ResolvedSnapshot:
    """A snapshot found by id: its index blob, its parsed index and (when recorded) its checkpoint."""

    index_blob_id: str
    index: SnapshotIndex
    record: CheckpointRecord | None


def resolve_snapshot(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef,
                     snapshot: str | None, *, allow_other_store: bool = False) -> ResolvedSnapshot:
    """Find a snapshot of ``ref``: the latest when ``snapshot`` is None, else by checkpoint id, full
    index blob id, or a unique prefix (at least 6 characters) of the index blob's UUID.

    The index's own snapshot metadata must name ``ref`` (job, job id, task, store): a full blob id of
    another store's snapshot is refused unless ``allow_other_store`` (a deliberate cross-restore).

    Raises SnapshotNotFoundError (exit 10) when nothing of ``ref`` matches, UsageError when a prefix is
    ambiguous, CorruptSnapshotError (exit 1) when a recorded snapshot's index blob is missing or
    malformed: that snapshot exists but is damaged, and an older one may still be good. A checkpoint id or
    prefix of a snapshot retention expired raises expired_error's SnapshotNotFoundError (a full index blob id
    of one still reads its index while its blobs are kept: diff compares with it; a reader pin refuses it).
    """
    if snapshot is None:
        record = checkpoints.latest(ref)
        if record is None:
            _raise_if_unknown(blobstore, checkpoints, ref)
            raise SnapshotNotFoundError(f"no snapshot of {ref} in {blobstore.url}",
                                        hint=("run ", ref.command("backup"), " first, or check --job/--task/--store"))
        return _owned(_recorded(blobstore, ref, record, "latest snapshot"), ref, allow_other_store)
    every = checkpoints.records(ref)
    records = [r for r in every if r.state == COMMITTED]
    matches = _matching(records, snapshot)
    if len(matches) > 1:
        raise UsageError(f"snapshot id {snapshot!r} is ambiguous: {len(matches)} snapshots match",
                         hint="give more characters of the id")
    if matches:
        return _owned(_recorded(blobstore, ref, matches[0], "snapshot"), ref, allow_other_store)
    expired = _matching([r for r in every if r.state == EXPIRED], snapshot)
    if len(expired) == 1 and expired[0].index_blob_id != snapshot:
        raise expired_error(blobstore.url, ref, expired[0])
    if is_data_blob_id(snapshot):
        # An index blob no checkpoint of this store records (e.g. a superseded one kept by retention).
        try:
            found = ResolvedSnapshot(snapshot, read_index(blobstore, snapshot), None)
        except SnapshotNotFoundError:
            pass
        else:
            return _owned(found, ref, allow_other_store)
    if not records and (checkpoints.commit_log is None or _latest_or_none(checkpoints, ref) is None):
        _raise_if_unknown(blobstore, checkpoints, ref)  # not a job the commit log knows either
    raise SnapshotNotFoundError(f"no snapshot {snapshot!r} of {ref} in {blobstore.url}",
                                hint=(ref.command("snapshots list"), " shows the snapshots there are"))


def _matching(records: list[CheckpointRecord], snapshot: str) -> list[CheckpointRecord]:
    """The records ``snapshot`` names: by checkpoint id or full index blob id, else by a prefix (at least 6
    characters) of the index blob's UUID."""
    matches = [r for r in records if snapshot in (r.checkpoint_id, r.index_blob_id)]
    if not matches and not is_checkpoint_id(snapshot) and len(snapshot) >= 6:
        matches = [r for r in records if short_id(r.index_blob_id).startswith(snapshot)]
    return matches


def expired_error(where: str, ref: StoreRef, record: CheckpointRecord) -> SnapshotNotFoundError:
    """The error for a snapshot of ``ref`` in blob store ``where`` that retention expired (``record``, in
    state expired): when, until when its blobs are kept, and how to keep snapshots restorable longer."""
    when = f" at {iso_utc(record.expired_ms / 1000)}" if record.expired_ms else ""
    kept = (f"its blobs are kept until {iso_utc(record.delete_after_ms / 1000)} (the grace period), then deleted"
            if record.delete_after_ms > now_ms() else "its grace period is over: its blobs go with the next backup "
                                                      "or gc of the store")
    return SnapshotNotFoundError(
        f"snapshot {record.index_blob_id} (checkpoint {record.checkpoint_id}) of {ref} in {where} was expired by "
        f"retention{when} (keep-last {record.keep_last}): it is no longer restorable; {kept}",
        hint=("take one that ", ref.command("snapshots list"), " shows; to keep more snapshots restorable, "
              "back up with a higher --keep-last (keep_last in the profile); to keep one, clone it with "
              "'snapshots copy --to-job/--to-task/--to-store' while it is restorable"))


def _latest_or_none(checkpoints: BlobCheckpointStore, ref: StoreRef) -> CheckpointRecord | None:
    try:
        return checkpoints.latest(ref)
    except SnapshotNotFoundError:  # the commit log has no checkpoint topic or task: as no checkpoint
        return None


def _raise_if_unknown(blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef) -> None:
    """Raise the unknown-job/store/task error (naming the nearest names) when the catalog holds nothing
    of ``ref``'s job, store or task (one listing of the job's records)."""
    from statectl.catalog.listing import check_known

    check_known(checkpoints, ref.job, ref.job_id, ref.store, ref.task)


def _recorded(blobstore: BlobStore, ref: StoreRef, record: CheckpointRecord, what: str) -> ResolvedSnapshot:
    """The snapshot a catalog record names; its index blob being gone makes it damaged, not unknown."""
    try:
        return ResolvedSnapshot(record.index_blob_id, read_index(blobstore, record.index_blob_id), record)
    except SnapshotNotFoundError:
        raise CorruptSnapshotError(
            f"{what} {record.index_blob_id} (checkpoint {record.checkpoint_id}) is damaged: its index blob is "
            f"missing from {blobstore.url}",
            hint=("restore an older snapshot with --snapshot (", ref.command("snapshots list"), " shows them); "
                  "the next backup starts a new chain")) from None


def _owned(snap: ResolvedSnapshot, ref: StoreRef, allow_other_store: bool) -> ResolvedSnapshot:
    m = snap.index.snapshot_metadata
    if allow_other_store or (m.job_name, m.job_id, m.task_name, m.store_name) == (ref.job, ref.job_id, ref.task,
                                                                                   ref.store):
        return snap
    raise SnapshotNotFoundError(
        f"snapshot {snap.index_blob_id} is a snapshot of {snapshot_owner(snap.index)}, not of {ref}",
        hint="pass that snapshot's own --job/--job-id/--task/--store; to restore it into this store "
             "deliberately, add --from-other-store")
