"""The upload of a rescale's verified target stores: each a full snapshot with TTLs (backup's upload), its
blobs and index read back, then handed to the commit (statectl.engine.rescale.commit)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, TypeVar

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import write_index
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord, now_ms
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.engine.rescale.commit import PendingTarget, changelog_markers, commit_targets, take_leases
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.result import RescaleResult
from statectl.local.layout import NEVER_UPLOADED
from statectl.parallel import run_parallel
from statectl.progress import NullProgress, ProgressReporter
from statectl.snapshot.model import parse_file_owner

T = TypeVar("T")


def upload_targets(opts: RescaleOptions, to_job: str, stores: list[Path], blobstore: BlobStore,
                   checkpoints: BlobCheckpointStore, result: RescaleResult, progress: ProgressReporter,
                   recorder: Any, copies: Callable[[], list[list[Any]]] | None = None) -> None:
    """Upload every target as a full snapshot with TTLs (backup's upload), check its blobs, then record the
    rescale (``recorder``: rerun.Recorder), commit all M checkpoint records and run backup's post-commit
    cleanup for each (commit.commit_targets). ``copies``: a key-group rescale's copies, in flight (their
    progress shows, the targets' own small files go up quietly meanwhile); called once those are up, it
    returns per target the FileIndexes of the blobs copied (TTL'd) that its snapshot lists besides them."""
    t0 = time.monotonic()
    refs = [StoreRef(to_job, opts.job_id, task, opts.store) for task in opts.target_tasks]
    with ExitStack() as stack:
        leases = take_leases(stack, opts, blobstore, checkpoints, refs, progress)
        markers = changelog_markers(checkpoints, refs)
        # several targets at a time, each with a share of --parallelism: as many requests in flight as asked
        at_once = max(1, min(len(stores), opts.parallelism))
        share = max(1, opts.parallelism // at_once)
        if copies is None:  # one target at a time, its bytes on the progress bar
            ups = [_upload_files(path, blobstore, opts, opts.parallelism, progress) for path in stores]
        else:
            ups = _each([lambda path=path: _upload_files(path, blobstore, opts, share, NullProgress())
                         for path in stores], at_once)
        waited = time.monotonic()
        extra = copies() if copies is not None else [[] for _ in stores]
        waited = time.monotonic() - waited
        pending = _each([lambda k=k: _snapshot(opts, refs[k], ups[k], extra[k], blobstore, checkpoints, share,
                                               result.file_owner) for k in range(len(stores))], at_once)
        for info, (target, uploaded) in zip(result.targets, pending):
            info.snapshot_id, info.checkpoint_id = target.record.index_blob_id, target.record.checkpoint_id
            info.files, info.bytes = uploaded
        result.bytes_uploaded += sum(f.size for _, uploaded, _ in ups for f in uploaded)
        result.phases["upload_s"] = round(time.monotonic() - t0 - waited, 3)
        commit_targets(opts, blobstore, checkpoints, leases, [t for t, _ in pending], markers, recorder, result,
                       progress)


def _each(calls: list[Callable[[], T]], parallelism: int) -> list[T]:
    """The results of ``calls`` run ``parallelism`` at a time (the first error raised)."""
    return run_parallel([lambda _cancel, call=call: call() for call in calls], parallelism)


def _upload_files(path: Path, blobstore: BlobStore, opts: RescaleOptions, parallelism: int,
                  progress: ProgressReporter) -> tuple[Any, list[Any], list[Any]]:
    """Upload the files of the target store at ``path`` (TTL'd), ``parallelism`` at a time: its diff against
    nothing, the files added and their FileIndexes."""
    from statectl.snapshot.diff import diff_local
    from statectl.transfer.upload import upload_files

    diff = diff_local(path, None, ignore=NEVER_UPLOADED)
    added = [f for _, f in diff.added()]
    uploaded = upload_files(blobstore, added, chunk_size=opts.chunk_size,  # type: ignore[arg-type]
                            parallelism=parallelism, ttl_seconds=opts.ttl_seconds, progress=progress)
    return diff, added, uploaded


def _snapshot(opts: RescaleOptions, ref: StoreRef, up: tuple[Any, list[Any], list[Any]], extra: list[Any],
              blobstore: BlobStore, checkpoints: BlobCheckpointStore, parallelism: int,
              file_owner: str) -> tuple[PendingTarget, tuple[int, int]]:
    """The snapshot of ``ref``: the uploaded files ``up`` (_upload_files) and ``extra`` (copied FileIndexes),
    its index written and read back, every blob checked (``parallelism`` at a time); ready to commit, with its
    files and bytes. CorruptSnapshotError when a blob or the index does not read back as uploaded."""
    from statectl.catalog.index import read_index
    from statectl.errors import CorruptSnapshotError
    from statectl.transfer.verify import check_blobs

    checkpoint_id = new_checkpoint_id()
    index = _index_of(ref, checkpoint_id, up, extra, file_owner)
    index_id = write_index(blobstore, index, opts.ttl_seconds)
    failpoints.hit("rescale-uploaded")
    present = list(index.dir_index.walk_present())
    problems = check_blobs(blobstore, present, parallelism)
    if problems or read_index(blobstore, index_id, what="new snapshot") != index:
        p = problems[0] if problems else None
        raise CorruptSnapshotError(f"the new snapshot of {ref} did not read back as uploaded"
                                   + (f": {p.blob_id} of {p.rel}: {p.reason}" if p else ""),
                                   hint="nothing was committed; run rescale again")
    # The commit's cleanup keeps every older snapshot of the target (within one job: the source of
    # its task, kept for a roll-back); the next backup of the task applies its own --keep-last.
    keep = max(opts.keep_last, 1 + len(checkpoints.list(ref)))
    new = list(up[2]) + list(extra)  # the copies' TTLs go with the commit too
    target = PendingTarget(ref, CheckpointRecord(checkpoint_id, index_id, index.creation_time_millis, keep_last=keep),
                           index, [b.blob_id for fi in new for b in fi.blobs])
    return target, (len(present), sum(f.size for _, f in present))


def _index_of(ref: StoreRef, checkpoint_id: str, up: tuple[Any, list[Any], list[Any]], extra: list[Any],
              file_owner: str) -> Any:
    """The snapshot index of the uploaded files ``up`` and ``extra``, with the owner the rescale records."""
    from statectl.snapshot.diff import build_dir_index
    from statectl.snapshot.model import SnapshotIndex, SnapshotMetadata

    diff, added, uploaded = up
    dir_index = build_dir_index(diff, {id(lf): fi for lf, fi in zip(added, uploaded)})
    if extra:
        dir_index = replace(dir_index, files_present=tuple(sorted(dir_index.files_present + tuple(extra),
                                                                  key=lambda f: f.file_name)))
    if file_owner:  # the staged stores' files are the user's statectl runs as
        dir_index = dir_index.with_owner(*parse_file_owner(file_owner))
    return SnapshotIndex(creation_time_millis=now_ms(),
                         snapshot_metadata=SnapshotMetadata(checkpoint_id, ref.job, ref.job_id, ref.task, ref.store),
                         dir_index=dir_index, prev_snapshot_index_blob_id=None)
