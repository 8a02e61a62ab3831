"""The upload of a rescale's verified target stores: each a full snapshot with TTLs (backup's upload), its
blobs and index read back, then handed to the commit (statectl.engine.rescale.commit)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
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
                   recorder: Any, copies: Callable[[], list[list[Any]]] | None = None, early: Any = None,
                   uploaded: Callable[[], None] | None = None) -> None:
    """Upload every target as a full snapshot with TTLs (backup's upload), check its blobs, then record the
    rescale (``recorder``: rerun.Recorder), commit all M checkpoint records and run backup's post-commit
    cleanup for each (commit.commit_targets). ``copies``: a key-group rescale's copies, in flight and each
    checked as it lands (their progress shows; the targets' own small files go up and are checked quietly
    meanwhile); called once those are up, it returns per target the FileIndexes of the blobs copied (TTL'd)
    that its snapshot lists besides them. ``early``: the files uploaded while the Spark job ran
    (statectl.engine.rescale.early.EarlyUploads), whose blobs the targets take instead of uploading them again.
    ``uploaded``: called once every target's files are up and checked (the stores at ``stores`` are not read
    after that)."""
    t0 = time.monotonic()
    refs = [StoreRef(to_job, opts.job_id, task, opts.store) for task in opts.target_tasks]
    with ExitStack() as stack:
        leases = take_leases(stack, opts, blobstore, checkpoints, refs, progress)
        markers = changelog_markers(checkpoints, refs)
        # several targets at a time, each with a share of --parallelism: as many requests in flight as asked
        at_once = max(1, min(len(stores), opts.parallelism))
        share = max(1, opts.parallelism // at_once)
        if copies is None:  # every target's files in one transfer, their bytes on the progress bar
            ups = _upload(refs, stores, blobstore, checkpoints, opts, opts.parallelism, progress, early)
        else:
            ups = _each([lambda ref=ref, path=path: _upload([ref], [path], blobstore, checkpoints, opts, share,
                                                             NullProgress())[0] for ref, path in zip(refs, stores)],
                        at_once)
        if uploaded is not None:
            uploaded()
        waited = time.monotonic()
        extra = copies() if copies is not None else [[] for _ in stores]
        waited = time.monotonic() - waited
        pending = _each([lambda k=k: _snapshot(opts, refs[k], ups[k], extra[k], blobstore, result.file_owner)
                         for k in range(len(stores))], at_once)
        for info, target in zip(result.targets, pending):
            present = list(target.index.dir_index.walk_present())
            info.snapshot_id, info.checkpoint_id = target.record.index_blob_id, target.record.checkpoint_id
            info.files, info.bytes = len(present), sum(f.size for _, f in present)
        result.bytes_uploaded += sum(f.size for up in ups for f in up.uploaded)
        result.phases["upload_s"] = round(time.monotonic() - t0 - waited, 3)
        commit_targets(opts, blobstore, checkpoints, leases, pending, markers, recorder, result, progress)


def _each(calls: list[Callable[[], T]], parallelism: int) -> list[T]:
    """The results of ``calls`` run ``parallelism`` at a time (the first error raised)."""
    return run_parallel([lambda _cancel, call=call: call() for call in calls], parallelism)


@dataclass
class _Upload:
    """A target store's own files uploaded (TTL'd) and checked: its diff against nothing, the files added,
    their FileIndexes, and the snapshots its commit keeps."""

    diff: Any
    added: list[Any]
    uploaded: list[Any]
    keep_last: int


def _upload(refs: list[StoreRef], paths: list[Path], blobstore: BlobStore, checkpoints: BlobCheckpointStore,
            opts: RescaleOptions, parallelism: int, progress: ProgressReporter, early: Any = None) -> list[_Upload]:
    """Upload the files of the target stores of ``refs`` at ``paths`` (TTL'd) in one transfer, ``parallelism``
    at a time, but those ``early`` uploaded and checked already (upload_targets), and check every blob of the
    others (CorruptSnapshotError when one does not read back as uploaded)."""
    from statectl.errors import CorruptSnapshotError
    from statectl.snapshot.diff import diff_local
    from statectl.transfer.upload import upload_files
    from statectl.transfer.verify import check_blobs

    diffs = [diff_local(path, None, ignore=NEVER_UPLOADED) for path in paths]
    added = [[f for _, f in diff.added()] for diff in diffs]
    every = [f for files in added for f in files]
    up = early.take(every) if early is not None else {}
    rest = iter(upload_files(blobstore, [f for i, f in enumerate(every) if i not in up], chunk_size=opts.chunk_size,  # type: ignore[arg-type]
                             parallelism=parallelism, ttl_seconds=opts.ttl_seconds, progress=progress))
    flat = [up[i] if i in up else next(rest) for i in range(len(every))]
    cuts = [0]
    for files in added:
        cuts.append(cuts[-1] + len(files))
    # every target's blobs checked in one batch, and every target's snapshots listed, at once
    target_of = {b.blob_id: k for k in range(len(refs)) for fi in flat[cuts[k]:cuts[k + 1]] for b in fi.blobs}
    listed = _each([lambda ref=ref: len(checkpoints.list(ref)) for ref in refs], max(1, min(len(refs), 8)))
    problems = check_blobs(blobstore, [(fi.file_name, fi) for i, fi in enumerate(flat) if i not in up], parallelism)
    if problems:
        p = min(problems, key=lambda p: target_of[p.blob_id])
        raise CorruptSnapshotError(f"the new snapshot of {refs[target_of[p.blob_id]]} did not read back as uploaded: "
                                   f"{p.blob_id} of {p.rel}: {p.reason}", hint="nothing was committed; run rescale again")
    # The commit's cleanup keeps every older snapshot of the target (within one job: the source of its task, kept
    # for a roll-back); the next backup of the task applies its own --keep-last.
    return [_Upload(diff, files, flat[cuts[k]:cuts[k + 1]], max(opts.keep_last, 1 + listed[k]))
            for k, (diff, files) in enumerate(zip(diffs, added))]


def _snapshot(opts: RescaleOptions, ref: StoreRef, up: _Upload, extra: list[Any], blobstore: BlobStore,
              file_owner: str) -> PendingTarget:
    """The snapshot of ``ref``: the uploaded files ``up`` and ``extra`` (copied FileIndexes, checked as they
    landed), its index written and read back; ready to commit. CorruptSnapshotError when the index does not
    read back as uploaded."""
    from statectl.catalog.index import read_index
    from statectl.errors import CorruptSnapshotError

    checkpoint_id = new_checkpoint_id()
    index = _index_of(ref, checkpoint_id, up, extra, file_owner)
    index_id = write_index(blobstore, index, opts.ttl_seconds)
    failpoints.hit("rescale-uploaded")
    if read_index(blobstore, index_id, what="new snapshot") != index:
        raise CorruptSnapshotError(f"the new snapshot of {ref} did not read back as uploaded",
                                   hint="nothing was committed; run rescale again")
    new = list(up.uploaded) + list(extra)  # the copies' TTLs go with the commit too
    return PendingTarget(ref, CheckpointRecord(checkpoint_id, index_id, index.creation_time_millis,
                                               keep_last=up.keep_last), index,
                         [b.blob_id for fi in new for b in fi.blobs])


def _index_of(ref: StoreRef, checkpoint_id: str, up: _Upload, extra: list[Any], file_owner: str) -> Any:
    """The snapshot index of the uploaded files ``up`` and ``extra``, with the owner the rescale records."""
    from statectl.snapshot.diff import build_dir_index
    from statectl.snapshot.model import SnapshotIndex, SnapshotMetadata

    dir_index = build_dir_index(up.diff, {id(lf): fi for lf, fi in zip(up.added, up.uploaded)})
    if extra:
        dir_index = replace(dir_index, files_present=tuple(sorted(dir_index.files_present + tuple(extra),
                                                                  key=lambda f: f.file_name)))
    if file_owner:  # the staged stores' files are the user's statectl runs as
        dir_index = dir_index.with_owner(*parse_file_owner(file_owner))
    return SnapshotIndex(creation_time_millis=now_ms(),
                         snapshot_metadata=SnapshotMetadata(checkpoint_id, ref.job, ref.job_id, ref.task, ref.store),
                         dir_index=dir_index, prev_snapshot_index_blob_id=None)
