"""The upload of a rescale's verified target stores: each a full snapshot with TTLs (backup's upload), its
blobs and index read back, then handed to the commit (statectl.engine.rescale.commit)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import write_index
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord, now_ms
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.engine.rescale.commit import PendingTarget, changelog_markers, commit_targets, take_leases
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.result import RescaleResult
from statectl.local.layout import NEVER_UPLOADED
from statectl.progress import ProgressReporter
from statectl.snapshot.model import parse_file_owner


def upload_targets(opts: RescaleOptions, to_job: str, stores: list[Path], blobstore: BlobStore,
                   checkpoints: BlobCheckpointStore, result: RescaleResult, progress: ProgressReporter,
                   recorder: Any, copied: list[list[Any]] | None = None) -> None:
    """Upload every target as a full snapshot with TTLs (backup's upload), check its blobs, then record the
    rescale (``recorder``: rerun.Recorder), commit all M checkpoint records and run backup's post-commit
    cleanup for each (commit.commit_targets). ``copied``: per target, FileIndexes of blobs already copied into
    the blob store (TTL'd) that its snapshot lists besides the uploads."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.monotonic()
    refs = [StoreRef(to_job, opts.job_id, task, opts.store) for task in opts.target_tasks]
    with ExitStack() as stack:
        leases = take_leases(stack, opts, blobstore, checkpoints, refs, progress)
        markers = changelog_markers(checkpoints, refs)

        def one(k: int) -> tuple[PendingTarget, int]:
            return _upload_target(opts, refs[k], stores[k], copied[k] if copied else [], blobstore, checkpoints,
                                  result, result.targets[k], progress)

        # a few targets at once: each is a few files and several requests one after the other (index, checks)
        with ThreadPoolExecutor(min(_TARGETS_AT_ONCE, len(refs)), thread_name_prefix="statectl-upload") as pool:
            done = list(pool.map(one, range(len(refs))))
        pending = [p for p, _ in done]
        result.bytes_uploaded += sum(n for _, n in done)
        result.phases["upload_s"] = round(time.monotonic() - t0, 3)
        commit_targets(opts, blobstore, checkpoints, leases, pending, markers, recorder, result, progress)


_TARGETS_AT_ONCE = 4


def _upload_target(opts: RescaleOptions, ref: StoreRef, path: Path, extra: list[Any], blobstore: BlobStore,
                   checkpoints: BlobCheckpointStore, result: RescaleResult, info: Any,
                   progress: ProgressReporter) -> tuple[PendingTarget, int]:
    """Upload the target store at ``path`` as a snapshot of ``ref`` listing ``extra`` (copied FileIndexes)
    besides its files, read it back, fill ``info`` (TargetInfo) and return it ready to commit, with the bytes
    uploaded. CorruptSnapshotError when a blob or the index does not read back as uploaded."""
    from statectl.catalog.index import read_index
    from statectl.errors import CorruptSnapshotError
    from statectl.transfer.verify import check_blobs

    checkpoint_id = new_checkpoint_id()
    index, uploaded = _snapshot_of(opts, ref, checkpoint_id, path, extra, blobstore, result, progress)
    index_id = write_index(blobstore, index, opts.ttl_seconds)
    failpoints.hit("rescale-uploaded")
    present = list(index.dir_index.walk_present())
    problems = check_blobs(blobstore, present, opts.parallelism)
    if problems or read_index(blobstore, index_id, what="new snapshot") != index:
        p = problems[0] if problems else None
        raise CorruptSnapshotError(f"the new snapshot of {ref} did not read back as uploaded"
                                   + (f": {p.blob_id} of {p.rel}: {p.reason}" if p else ""),
                                   hint="nothing was committed; run rescale again")
    info.snapshot_id, info.checkpoint_id = index_id, checkpoint_id
    info.files, info.bytes = len(present), sum(f.size for _, f in present)
    sent = sum(f.size for f in uploaded)
    uploaded = list(uploaded) + list(extra)  # the copies' TTLs go with the commit too
    # The commit's cleanup keeps every older snapshot of the target (within one job: the source of
    # its task, kept for a roll-back); the next backup of the task applies its own --keep-last.
    keep = max(opts.keep_last, 1 + len(checkpoints.list(ref)))
    return PendingTarget(ref, CheckpointRecord(checkpoint_id, index_id, index.creation_time_millis, keep_last=keep),
                         index, [b.blob_id for fi in uploaded for b in fi.blobs]), sent


def _snapshot_of(opts: RescaleOptions, ref: StoreRef, checkpoint_id: str, path: Path, extra: list[Any],
                 blobstore: BlobStore, result: RescaleResult, progress: ProgressReporter) -> tuple[Any, list[Any]]:
    """Upload the files of the store at ``path`` (TTL'd) and return the snapshot index of them and ``extra``,
    with the owner the rescale records, and the uploaded FileIndexes."""
    from statectl.snapshot.diff import build_dir_index, diff_local
    from statectl.snapshot.model import SnapshotIndex, SnapshotMetadata
    from statectl.transfer.upload import upload_files

    diff = diff_local(path, None, ignore=NEVER_UPLOADED)
    added = [f for _, f in diff.added()]
    uploaded = upload_files(blobstore, added, chunk_size=opts.chunk_size,  # type: ignore[arg-type]
                            parallelism=opts.parallelism, ttl_seconds=opts.ttl_seconds, progress=progress)
    dir_index = build_dir_index(diff, {id(lf): fi for lf, fi in zip(added, uploaded)})
    if extra:
        dir_index = replace(dir_index, files_present=tuple(sorted(dir_index.files_present + tuple(extra),
                                                                  key=lambda f: f.file_name)))
    if result.file_owner:  # the staged stores' files are the user's statectl runs as
        dir_index = dir_index.with_owner(*parse_file_owner(result.file_owner))
    index = SnapshotIndex(creation_time_millis=now_ms(),
                          snapshot_metadata=SnapshotMetadata(checkpoint_id, ref.job, ref.job_id, ref.task, ref.store),
                          dir_index=dir_index, prev_snapshot_index_blob_id=None)
    return index, list(uploaded)
