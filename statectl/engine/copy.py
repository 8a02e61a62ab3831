"""snapshots copy: a new snapshot of another task/store (and job, blob store) made by copying every blob
of a snapshot, server-side where the stores can (ARCHITECTURE.md).

resolve and pin the source snapshot -> take the target's lease, finish its interrupted cleanup -> copy
every blob to a new blob id (TTL'd: S3 CopyObject / UploadPartCopy, a file copy on ``file://``, or
streamed through the client between stores that cannot copy from each other) -> the new index ->
commit exactly as backup does (catalog.commit: commit_snapshot, finish_commit). ``copy_all`` copies every
task of a store, or every store of a job, task by task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from statectl import defaults
from statectl.blobstore.base import BlobStore
from statectl.catalog.commit import commit_snapshot, finish_commit, prepare_commit
from statectl.catalog.lease import GC_WAIT_SECONDS, Lease
from statectl.catalog.listing import CatalogTree, check_known
from statectl.catalog.pins import ReaderPin
from statectl.catalog.records import BlobCheckpointStore, now_ms
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.catalog.resolve import ResolvedSnapshot, resolve_snapshot
from statectl.errors import StatectlError, UsageError, one_cause
from statectl.parallel import check_parallelism
from statectl.progress import NoteRecorder, ProgressReporter
from statectl.ratelimit import RateLimit, format_rate
from statectl.snapshot.model import DirIndex, FileBlob, FileIndex, SnapshotIndex, SnapshotMetadata, parse_file_owner
from statectl.transfer.copy import copy_blobs
from statectl.transfer.download import blob_ranges
from statectl.transfer.verify import require_blobs



@dataclass(frozen=True)
class CopyOptions:
    """What to copy where. ``snapshot``: an id, id prefix or checkpoint id of ``source`` (None: the latest).
    ``file_owner``: ``USER:GROUP`` every file of the target is recorded with, the target job's user (None:
    each file's owner as the source records it); Samza's restore compares them with the restored files'."""

    source: StoreRef
    target: StoreRef
    snapshot: str | None = None
    parallelism: int = defaults.PARALLELISM
    ttl_seconds: int = defaults.TTL_SECONDS
    keep_last: int = defaults.KEEP_LAST
    grace_seconds: int = defaults.GRACE_SECONDS
    file_owner: str | None = None
    # The bucket the bytes of blobs streamed through this host are taken from (Session.rate_limit); a
    # server-side copy moves none and is not limited.
    rate_limit: RateLimit | None = None

    def validate(self) -> None:
        check_parallelism(self.parallelism)
        if self.file_owner is not None:
            parse_file_owner(self.file_owner)
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


@dataclass(frozen=True)
class PlannedBlob:
    """A blob of the source snapshot the copy copies (in file order): its id, length and file."""

    blob_id: str
    size: int
    path: str


@dataclass
class CopyPlan:
    """What ``copy_snapshot`` will do, decided with nothing written: the source snapshot, the target, every
    blob copied and whether server-side. Counts carry CopyResult's names; ``copy_snapshot`` executes exactly
    this plan (``snapshots copy --dry-run`` prints it). ``snapshot``: the resolved source (not in the JSON)."""

    source_snapshot_id: str
    source_checkpoint_id: str
    target_blobstore: str
    job: str
    job_id: str
    task: str
    store: str
    files: int
    blobs_copied: int
    bytes_copied: int
    server_side: bool
    blobs: list[PlannedBlob]
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)
    snapshot: ResolvedSnapshot | None = field(default=None, repr=False, metadata={"internal": True})


def plan_copy(opts: CopyOptions, source: BlobStore, source_catalog: BlobCheckpointStore, target: BlobStore,
              progress: ProgressReporter | None = None) -> CopyPlan:
    """The plan of ``copy_snapshot(opts, ...)``, writing nothing anywhere: no reader pin on the source, no
    lease, no cleanup of the target. Raises what ``copy_snapshot`` raises before it copies, in its order (bad
    options, the target being the source, an unknown or damaged snapshot, a missing source blob, a target
    blob store that is not there, credentials that cannot write it, its lease held by a backup or another
    copy); a note says when a gc holds the target's lease (the copy would wait for it). Idempotent."""
    progress = _checked(opts, source, target, progress)
    snap = resolve_snapshot(source, source_catalog, opts.source, opts.snapshot)
    plan = _plan(opts, snap, source, target, progress)
    notice = Lease(target, opts.target, operation="copy", wait_for_gc=GC_WAIT_SECONDS).preflight()
    if notice:
        progress.note(notice)
    plan.notes = progress.notes
    return plan


def copy_snapshot(opts: CopyOptions, source: BlobStore, source_catalog: BlobCheckpointStore, target: BlobStore,
                  target_catalog: BlobCheckpointStore, progress: ProgressReporter | None = None) -> CopyResult:
    """Copy a snapshot of ``opts.source`` (in ``source``) into a new snapshot of ``opts.target`` (in
    ``target``, which may be the same store): every blob to a new blob id, file metadata (but for the
    owners ``file_owner`` names) and CRCs as they were, snapshot metadata naming the target and a new
    checkpoint id, no previous snapshot (a copy starts a new chain of the target); committed like a backup,
    with the target's retention applied. The blobs copied are those of the plan ``plan_copy`` computes (made
    here once the source is pinned).

    Blobs are copied server-side when ``target.copy_domain == source.copy_domain`` (one S3 endpoint, any
    buckets; ``file://`` to ``file://``), else streamed through the client (a note says so). The source is
    pinned while it is read (catalog.pins) and never written to but for that pin.

    Raises SnapshotNotFoundError (exit 10) for an unknown snapshot, CorruptSnapshotError (exit 1) when a
    blob of the source is missing or of another size (every one is stat'ed before the target is written
    to), AuthError (12), BlobStoreError (1) after retries, LockHeldError (11) when a backup of the target
    runs, UsageError for the target being the source (by identity: any spelling of its URL). Anything that
    fails once copying began leaves only TTL'd copies (gc reclaims them) and the target's latest snapshot
    as it was.
    """
    progress = _checked(opts, source, target, progress)
    started = time.monotonic()
    before = _bytes(source) + (_bytes(target) if target is not source else 0)
    with ReaderPin(source, source_catalog, opts.source, operation="copy", progress=progress) as pin:
        plan = _plan(opts, pin.resolve(opts.snapshot), source, target, progress)
        index_id, checkpoint_id = execute_copy(plan, opts, source, target, target_catalog, progress)
    after = _bytes(source) + (_bytes(target) if target is not source else 0)
    return CopyResult(
        snapshot_id=index_id,
        checkpoint_id=checkpoint_id,
        source_snapshot_id=plan.source_snapshot_id,
        job=plan.job, job_id=plan.job_id, task=plan.task, store=plan.store,
        files=plan.files,
        blobs_copied=plan.blobs_copied,
        bytes_copied=plan.bytes_copied,
        bytes_through_client=after - before,
        server_side=plan.server_side,
        duration_s=round(time.monotonic() - started, 3),
        notes=progress.notes,
        blobstore=source.url,
        to_blobstore=target.url,
    )


def _checked(opts: CopyOptions, source: BlobStore, target: BlobStore,
             progress: ProgressReporter | None) -> NoteRecorder:
    opts.validate()
    if opts.source == opts.target and source.identity == target.identity:
        same = "" if source.url == target.url else f" ({target.url} is {source.url})"
        raise UsageError(f"the target of a copy is the source store itself{same}",
                         hint="name another job, task, store or blob store with --to-job/--to-task/--to-store/"
                              "--to-blobstore")
    progress = NoteRecorder(progress)
    if not _same_domain(source, target):
        progress.note(f"{source.url} and {target.url} cannot copy from each other: the blobs are streamed "
                      "through this host")
    elif opts.rate_limit is not None:
        progress.note(f"--limit-rate {format_rate(opts.rate_limit.rate)} does not apply: the blobs are copied "
                      "server-side, none through this host")
    return progress


def _plan(opts: CopyOptions, snap: ResolvedSnapshot, source: BlobStore, target: BlobStore,
          progress: ProgressReporter) -> CopyPlan:
    files = list(snap.index.dir_index.walk_present())
    # Every source blob there with its size before the target is written to (a lease, the first copies).
    require_blobs(source, files, opts.parallelism)
    blobs = [PlannedBlob(blob_id, length, rel)
             for rel, fi in files for blob_id, _, length in blob_ranges(fi, f"file {rel}")]
    t = opts.target
    return CopyPlan(source_snapshot_id=snap.index_blob_id,
                    source_checkpoint_id=snap.index.snapshot_metadata.checkpoint_id, target_blobstore=target.url,
                    job=t.job, job_id=t.job_id, task=t.task, store=t.store, files=len(files),
                    blobs_copied=len(blobs), bytes_copied=sum(b.size for b in blobs),
                    server_side=_same_domain(source, target), blobs=blobs, snapshot=snap)


def execute_copy(plan: CopyPlan, opts: CopyOptions, source: BlobStore, target: BlobStore,
                 target_catalog: BlobCheckpointStore, progress: ProgressReporter) -> tuple[str, str]:
    """Carry out ``plan`` (the source pinned by the caller): take the target's lease, finish its interrupted
    cleanup, copy exactly the planned blobs, commit the new index. Returns its index blob id and checkpoint
    id. Raises what ``copy_snapshot`` raises."""
    if plan.snapshot is None:
        raise UsageError("execute_copy takes a plan made by plan_copy (it carries the source's index)")
    jobs = [(b.blob_id, b.size) for b in plan.blobs]
    t = opts.target
    with Lease(target, t, operation="copy", wait_for_gc=GC_WAIT_SECONDS) as lease:
        if lease.notice:
            progress.note(lease.notice)
        prepare_commit(target, target_catalog, t, grace_seconds=opts.grace_seconds, progress=progress)
        new_ids = copy_blobs(jobs, source, target, plan.server_side, ttl_seconds=opts.ttl_seconds,
                             parallelism=opts.parallelism, progress=progress, limit=opts.rate_limit)
        mapping = {old: new for (old, _), new in zip(jobs, new_ids)}
        checkpoint_id = new_checkpoint_id()
        index = SnapshotIndex(
            creation_time_millis=now_ms(),
            snapshot_metadata=SnapshotMetadata(checkpoint_id, t.job, t.job_id, t.task, t.store),
            dir_index=_owned(_renamed(plan.snapshot.index.without_removed().dir_index, mapping), opts.file_owner),
            prev_snapshot_index_blob_id=None,
        )
        index_id, record = commit_snapshot(target, target_catalog, lease, t, index, ttl_seconds=opts.ttl_seconds,
                                           keep_last=opts.keep_last)
        finish_commit(target, target_catalog, t, record, index, new_blob_ids=new_ids,
                      grace_seconds=opts.grace_seconds, progress=progress, what="copy")
    return index_id, checkpoint_id


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


def _owned(d: DirIndex, file_owner: str | None) -> DirIndex:
    return d if file_owner is None else d.with_owner(*parse_file_owner(file_owner))


@dataclass
class CopyAllResult:
    """``snapshots copy --all-tasks`` / ``--all``: a result per task copied (with ``dry_run``, its plan), in
    store then task order, and the source stores that failed (``<store>/<task>``), each with its error."""

    results: list[CopyResult | CopyPlan]
    failures: list[tuple[str, str]]
    blobstore: str = ""
    to_blobstore: str = ""
    dry_run: bool = False


def copy_all(opts: CopyOptions, source: BlobStore, source_catalog: BlobCheckpointStore, target: BlobStore,
             target_catalog: BlobCheckpointStore, progress: ProgressReporter | None = None, *,
             all_stores: bool = False, dry_run: bool = False) -> CopyAllResult:
    """Copy the latest snapshot of every task of store ``opts.source.store`` (``all_stores``: of every store)
    of the source job into the same task of ``opts.target``'s job (and store: ``opts.target.store``, or with
    ``all_stores`` the same store), each task by ``copy_snapshot`` (``dry_run``: ``plan_copy``): server-side
    where the stores can, committed task by task. The tasks are those the source catalog holds (with a Kafka
    commit log also those only the job's checkpoint topic knows). ``opts.snapshot`` must be None (each task's
    latest); the task of ``opts.source``/``opts.target`` is ignored.

    Raises SnapshotNotFoundError (exit 10) when the source holds nothing of the job (or store), before
    anything is written. A task whose copy fails is listed in ``failures`` (nothing committed for it) and
    the others go on (the CLI exits 3); when every task failed with the same error (a target that is the
    source, credentials that cannot write, a target blob store that is not there), that error is raised."""
    if opts.snapshot is not None:
        raise UsageError("a snapshot id names one task's snapshot: a copy of every task copies each one's latest")
    src = opts.source
    store = None if all_stores else src.store
    tree = CatalogTree.read(source_catalog, src.job, job_id=src.job_id)
    check_known(source_catalog, src.job, src.job_id, store, tree=tree)
    results: list[CopyResult | CopyPlan] = []
    failures: list[tuple[str, str]] = []
    errors: list[StatectlError] = []
    for ref in tree.refs(src.job, src.job_id, store):
        target_ref = replace(opts.target, task=ref.task, store=ref.store if all_stores else opts.target.store)
        one = replace(opts, source=ref, target=target_ref)
        try:
            results.append(plan_copy(one, source, source_catalog, target, progress) if dry_run else
                           copy_snapshot(one, source, source_catalog, target, target_catalog, progress))
        except StatectlError as e:
            failures.append((f"{ref.store}/{ref.task}", str(e)))
            errors.append(e)
    cause = one_cause(errors, len(failures), len(results))
    if cause is not None:
        raise cause
    return CopyAllResult(results, failures, source.url, target.url, dry_run)
