"""snapshots copy: a new snapshot of another task/store (and job, blob store) made by copying every blob
of a snapshot, server-side where the stores can (seed 002, "fast duplication"; ARCHITECTURE.md).

resolve and pin the source snapshot -> take the target's lease, finish its interrupted cleanup -> copy
every blob to a new blob id (TTL'd: S3 CopyObject / UploadPartCopy, a file copy on ``file://``, or
streamed through the client between stores that cannot copy from each other) -> the new index ->
commit exactly as backup does (catalog.commit: commit_snapshot, finish_commit).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from statectl import defaults
from statectl.blobstore.base import BlobStore
from statectl.catalog.commit import commit_snapshot, finish_commit, prepare_commit
from statectl.catalog.lease import GC_WAIT_SECONDS, Lease
from statectl.catalog.pins import ReaderPin
from statectl.catalog.records import BlobCheckpointStore, now_ms
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.errors import UsageError
from statectl.parallel import check_parallelism
from statectl.progress import NoteRecorder, ProgressReporter
from statectl.snapshot.model import DirIndex, FileBlob, FileIndex, SnapshotIndex, SnapshotMetadata
from statectl.transfer.copy import copy_blobs
from statectl.transfer.download import blob_ranges



@dataclass(frozen=True)
class CopyOptions:
    """What to copy where. ``snapshot``: an id, id prefix or checkpoint id of ``source`` (None: the latest)."""

    source: StoreRef
    target: StoreRef
    snapshot: str | None = None
    parallelism: int = defaults.PARALLELISM
    ttl_seconds: int = defaults.TTL_SECONDS
    keep_last: int = defaults.KEEP_LAST
    grace_seconds: int = defaults.GRACE_SECONDS

    def validate(self) -> None:
        check_parallelism(self.parallelism)
        if self.keep_last < 1:
            raise UsageError("--keep-last must be at least 1")
        if self.ttl_seconds < 60:
            raise UsageError("--ttl must be at least a minute")
        if self.grace_seconds < 0:
            raise UsageError("--grace must not be negative")
        for name, value in (("--to-job", self.target.job), ("--to-task", self.target.task),
                            ("--to-store", self.target.store), ("--to-job-id", self.target.job_id)):
            if not value or value == "*":
                raise UsageError(f"copy needs {name}")


@dataclass
class CopyResult:
    snapshot_id: str
    checkpoint_id: str
    source_snapshot_id: str
    job: str
    job_id: str
    task: str
    store: str
    files: int
    blobs_copied: int
    bytes_copied: int
    # Payload bytes that went through this client (sent plus received): the indexes, the catalog records and
    # the commit's requests, and every blob's bytes twice (down and up) when it had to be streamed.
    bytes_through_client: int
    server_side: bool
    duration_s: float
    notes: list[str] = field(default_factory=list)
    blobstore: str = ""     # the source's URL (printed with its secrets masked)
    to_blobstore: str = ""  # the target's


def copy_snapshot(opts: CopyOptions, source: BlobStore, source_catalog: BlobCheckpointStore, target: BlobStore,
                  target_catalog: BlobCheckpointStore, progress: ProgressReporter | None = None) -> CopyResult:
    """Copy a snapshot of ``opts.source`` (in ``source``) into a new snapshot of ``opts.target`` (in
    ``target``, which may be the same store): every blob to a new blob id, file metadata and CRCs as they
    were, snapshot metadata naming the target and a new checkpoint id, no previous snapshot (a copy starts
    a new chain of the target); committed like a backup, with the target's retention applied.

    Blobs are copied server-side when ``target.copy_domain == source.copy_domain`` (one S3 endpoint, any
    buckets; ``file://`` to ``file://``), else streamed through the client (a note says so). The source is
    pinned while it is read (catalog.pins) and never written to but for that pin.

    Raises SnapshotNotFoundError (exit 10) for an unknown snapshot, CorruptSnapshotError (exit 1) when a
    blob of the source is missing, AuthError (12), BlobStoreError (1) after retries, LockHeldError (11)
    when a backup of the target runs, UsageError for the target being the source. Anything that fails
    before the commit leaves only TTL'd copies (gc reclaims them) and the target's latest snapshot as it was.
    """
    opts.validate()
    if opts.source == opts.target and source.url == target.url:
        raise UsageError("the target of a copy is the source store itself",
                         hint="name another job, task or store with --to-job/--to-task/--to-store")
    progress = NoteRecorder(progress)
    started = time.monotonic()
    before = _bytes(source) + (_bytes(target) if target is not source else 0)
    server_side = _same_domain(source, target)
    if not server_side:
        progress.note(f"{source.url} and {target.url} cannot copy from each other: the blobs are streamed "
                      "through this host")

    with ReaderPin(source, source_catalog, opts.source, operation="copy", progress=progress) as pin:
        snap = pin.resolve(opts.snapshot)
        files = list(snap.index.dir_index.walk_present())
        jobs: list[tuple[str, int]] = []  # (blob id, length) of every blob, in file order
        for rel, fi in files:
            jobs += [(blob_id, length) for blob_id, _, length in blob_ranges(fi, f"file {rel}")]
        with Lease(target, opts.target, operation="copy", wait_for_gc=GC_WAIT_SECONDS) as lease:
            if lease.notice:
                progress.note(lease.notice)
            prepare_commit(target, target_catalog, opts.target, grace_seconds=opts.grace_seconds, progress=progress)
            new_ids = copy_blobs(jobs, source, target, server_side, ttl_seconds=opts.ttl_seconds,
                                 parallelism=opts.parallelism, progress=progress)
            mapping = {old: new for (old, _), new in zip(jobs, new_ids)}
            checkpoint_id = new_checkpoint_id()
            t = opts.target
            index = SnapshotIndex(
                creation_time_millis=now_ms(),
                snapshot_metadata=SnapshotMetadata(checkpoint_id, t.job, t.job_id, t.task, t.store),
                dir_index=_renamed(snap.index.without_removed().dir_index, mapping),
                prev_snapshot_index_blob_id=None,
            )
            index_id, record = commit_snapshot(target, target_catalog, lease, t, index, ttl_seconds=opts.ttl_seconds,
                                               keep_last=opts.keep_last)
            finish_commit(target, target_catalog, t, record, index, new_blob_ids=new_ids,
                          grace_seconds=opts.grace_seconds, progress=progress, what="copy")
    after = _bytes(source) + (_bytes(target) if target is not source else 0)
    return CopyResult(
        snapshot_id=index_id,
        checkpoint_id=checkpoint_id,
        source_snapshot_id=snap.index_blob_id,
        job=t.job, job_id=t.job_id, task=t.task, store=t.store,
        files=len(files),
        blobs_copied=len(jobs),
        bytes_copied=sum(n for _, n in jobs),
        bytes_through_client=after - before,
        server_side=server_side,
        duration_s=round(time.monotonic() - started, 3),
        notes=progress.notes,
        blobstore=source.url,
        to_blobstore=target.url,
    )


def _same_domain(a: BlobStore, b: BlobStore) -> bool:
    da, db = getattr(a, "copy_domain", None), getattr(b, "copy_domain", None)
    return da is not None and da == db


def _bytes(store: BlobStore) -> int:
    counts = getattr(store, "byte_counts", None)
    return sum(counts().values()) if counts is not None else 0


def _renamed(d: DirIndex, mapping: dict[str, str]) -> DirIndex:
    """``d`` with every blob id replaced by its copy's."""

    def file(f: FileIndex) -> FileIndex:
        return replace(f, blobs=tuple(FileBlob(mapping[b.blob_id], b.offset) for b in f.blobs))

    return replace(d, files_present=tuple(file(f) for f in d.files_present),
                   sub_dirs_present=tuple(_renamed(s, mapping) for s in d.sub_dirs_present))
