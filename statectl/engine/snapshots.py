"""snapshots list / show / verify: what the catalog holds, level by level, one snapshot in full, and
whether every blob of a snapshot is there (and, downloaded, intact)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from statectl import defaults
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import read_index
from statectl.catalog.listing import CatalogTree, check_known, commit_log_latest
from statectl.catalog.pins import ReaderPin
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef, parse_checkpoint_id
from statectl.catalog.resolve import ResolvedSnapshot, resolve_snapshot
from statectl.errors import (
    BlobNotFoundError,
    CorruptSnapshotError,
    NotFoundError,
    SnapshotNotFoundError,
)
from statectl.local.layout import check_name
from statectl.parallel import check_parallelism, run_parallel
from statectl.progress import NullProgress, ProgressReporter
from statectl.snapshot.model import SnapshotIndex, parse_index
from statectl.transfer.download import blob_ranges
from statectl.transfer.sink import CrcSink


# ``kind`` of the elements of the three listings of ``snapshots list`` (docs/json.md): a script that reads
# any of them tells them apart by it.
KIND_JOB, KIND_TASK_STORE, KIND_SNAPSHOT = "job", "task_store", "snapshot"


@dataclass
class SnapshotSummary:
    """One committed snapshot of a task's store."""

    snapshot_id: str
    checkpoint_id: str
    created: str | None
    files: int | None
    bytes: int | None
    latest: bool = False
    problem: str | None = None
    blobstore: str = ""  # the blob store's URL (secrets are masked when printed)
    kind: str = KIND_SNAPSHOT


@dataclass
class JobSummary:
    """One job (job name and job id) a blob store holds snapshots of."""

    job: str
    job_id: str
    stores: list[str]
    tasks: int                      # (store, task) pairs with catalog records
    checkpoints: int                # catalog records, of any state
    latest_checkpoint_id: str
    latest_checkpoint_time: str | None
    blobstore: str
    kind: str = KIND_JOB


@dataclass
class TaskSummary:
    """One task's store of a job: its committed snapshots and the latest of them."""

    job: str
    job_id: str
    store: str
    task: str
    snapshots: int
    latest_snapshot_id: str | None
    latest_checkpoint_id: str | None
    created: str | None
    blobstore: str
    kind: str = KIND_TASK_STORE


def _iso(ms: int) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def list_jobs(checkpoints: BlobCheckpointStore) -> list[JobSummary]:
    """Every job (name and job id) the blob store's catalog holds snapshots of, sorted; an empty list for
    an empty blob store. One listing of the catalog, no record read. With a commit log that knows jobs (Kafka's
    checkpoint topics), a job only it knows (committed by a Samza job itself) is listed too, from the latest
    checkpoint of each of its tasks (its topic read; a job with no blob-store marker is not listed)."""
    tree = CatalogTree.read(checkpoints)
    jobs = getattr(checkpoints.commit_log, "jobs", None)
    known = set(tree.jobs())
    for job, job_id in (jobs() if jobs is not None else ()):
        if (job, job_id) not in known:
            for ref, (checkpoint_id, _) in commit_log_latest(checkpoints, job, job_id).items():
                tree.checkpoints[ref] = [checkpoint_id]
    out = []
    for job, job_id in tree.jobs():
        refs = tree.refs(job, job_id)
        ids = [cid for r in refs for cid in tree.checkpoints[r]]
        latest = max(ids, key=parse_checkpoint_id)
        out.append(JobSummary(job, job_id, sorted({r.store for r in refs}), len(refs), len(ids), latest,
                              _iso(parse_checkpoint_id(latest)[0]), checkpoints.blobstore.url))
    return out


def list_tasks(checkpoints: BlobCheckpointStore, job: str, job_id: str, store: str | None = None,
               task: str | None = None) -> list[TaskSummary]:
    """The stores and tasks of a job (or the tasks of one of its stores; only ``task``'s stores when
    given), sorted by store then task, each with its committed snapshots (one catalog record read per
    snapshot). Raises SnapshotNotFoundError (exit 10) naming the nearest names when the catalog holds
    nothing of the job, job id, store or task. With Kafka, stores only the job's checkpoint topic knows
    (committed by a Samza job) are listed too, with their latest checkpoint (``snapshots`` 1). Raises
    UsageError for a name no store of a snapshot can have (local.layout.check_name)."""
    for what, name in (("job", job), ("job id", job_id), ("store", store), ("task", task)):
        if name is not None:
            check_name(what, name)
    tree = CatalogTree.read(checkpoints, job)
    in_log = {ref: found for ref, found in commit_log_latest(checkpoints, job, job_id).items()
              if (store is None or ref.store == store) and (task is None or ref.task == task)}
    refs = [r for r in tree.refs(job, job_id, store) if task is None or r.task == task]
    for ref, (checkpoint_id, _) in in_log.items():  # what only the commit log knows counts as known too
        tree.checkpoints.setdefault(ref, [checkpoint_id])
    check_known(checkpoints, job, job_id, store, task, tree=tree)
    out = []
    for ref in refs:
        committed = checkpoints.list(ref)
        latest = committed[0] if committed else None
        out.append(TaskSummary(ref.job, ref.job_id, ref.store, ref.task, len(committed),
                               latest.index_blob_id if latest else None, latest.checkpoint_id if latest else None,
                               _iso(latest.created_ms) if latest else None, checkpoints.blobstore.url))
    for ref, (checkpoint_id, index_blob_id) in in_log.items():
        if ref not in refs:
            out.append(TaskSummary(ref.job, ref.job_id, ref.store, ref.task, 1, index_blob_id, checkpoint_id,
                                   _iso(parse_checkpoint_id(checkpoint_id)[0]), checkpoints.blobstore.url))
    return sorted(out, key=lambda t: (t.store, t.task))


def list_snapshots(ref: StoreRef, blobstore: BlobStore, checkpoints: BlobCheckpointStore) -> list[SnapshotSummary]:
    """The recorded snapshots of a store, newest first. An unreadable index is listed with a problem.
    Raises SnapshotNotFoundError (exit 10) naming the nearest names when the catalog holds nothing of the
    store's job, job id, store or task; an empty list when it holds only uncommitted records of it. With
    a commit log (Kafka), a store the catalog has no record of lists the commit log's latest checkpoint
    (e.g. one a Samza job committed)."""
    out = []
    records = checkpoints.list(ref)
    if not records:
        latest = None
        if checkpoints.commit_log is not None:
            try:
                latest = checkpoints.latest(ref)
            except SnapshotNotFoundError:  # no checkpoint topic, no checkpoint of the task: as no record
                check_known(checkpoints, ref.job, ref.job_id, ref.store, ref.task)
                raise
        if latest is None:
            check_known(checkpoints, ref.job, ref.job_id, ref.store, ref.task)
        else:
            records = [latest]
    for i, record in enumerate(records):
        s = SnapshotSummary(record.index_blob_id, record.checkpoint_id, _iso(record.created_ms), None, None, i == 0,
                            blobstore=blobstore.url)
        try:
            index = read_index(blobstore, record.index_blob_id)
            present = list(index.dir_index.walk_present())
            s.files, s.bytes = len(present), sum(f.size for _, f in present)
            s.created = _iso(index.creation_time_millis) or s.created
        except (SnapshotNotFoundError, CorruptSnapshotError) as e:
            s.problem = str(e)
        out.append(s)
    return out


def show_snapshot(ref: StoreRef, blobstore: BlobStore, checkpoints: BlobCheckpointStore, snapshot: str | None) -> ResolvedSnapshot:
    """Resolve and read one snapshot's index (see resolve_snapshot for the id forms)."""
    return resolve_snapshot(blobstore, checkpoints, ref, snapshot)


def read_index_file(path: Path) -> SnapshotIndex:
    """Parse an index saved to a file (e.g. a real Samza job's index blob). Raises NotFoundError,
    IndexFormatError, UnsafePathError."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise NotFoundError(f"index file {path} does not exist") from None
    except OSError as e:
        raise NotFoundError(f"cannot read index file {path}: {e.strerror}") from None
    try:
        return parse_index(data)
    except CorruptSnapshotError as e:
        raise type(e)(f"index file {path}: {e}", hint=e.hint_parts) from None


@dataclass
class VerifyProblem:
    path: str
    blob_id: str
    reason: str


@dataclass
class VerifyResult:
    snapshot_id: str
    ok: bool
    files: int
    blobs: int
    downloaded: bool
    missing: list[VerifyProblem] = field(default_factory=list)
    corrupt: list[VerifyProblem] = field(default_factory=list)
    blobstore: str = ""  # the blob store's URL (printed with its secrets masked)


def verify_snapshot(ref: StoreRef, blobstore: BlobStore, checkpoints: BlobCheckpointStore, snapshot: str | None, *,
                    download: bool, parallelism: int = defaults.PARALLELISM, progress: ProgressReporter | None = None) -> VerifyResult:
    """Check that every blob of a snapshot exists with the right size; with ``download`` also that every
    file's bytes have the CRC32 its index records. Changes nothing; with ``download``, which reads for
    long, the snapshot is pinned meanwhile (catalog.pins; a note says so when no pin can be written)."""
    check_parallelism(parallelism)
    progress = progress or NullProgress()
    if not download:  # a few stat requests: a snapshot expired meanwhile shows as missing blobs
        return _verify(blobstore, resolve_snapshot(blobstore, checkpoints, ref, snapshot), download, parallelism,
                       progress)
    with ReaderPin(blobstore, checkpoints, ref, operation="verify", progress=progress) as pin:
        return _verify(blobstore, pin.resolve(snapshot), download, parallelism, progress)


def _verify(blobstore: BlobStore, snap: ResolvedSnapshot, download: bool, parallelism: int,
            progress: ProgressReporter) -> VerifyResult:
    files = list(snap.index.dir_index.walk_present())
    result = VerifyResult(snap.index_blob_id, True, len(files), 0, download, blobstore=blobstore.url)
    lock = threading.Lock()
    tasks = []
    for rel, fi in files:
        try:
            ranges = blob_ranges(fi, f"file {rel}")
        except CorruptSnapshotError as e:
            result.corrupt.append(VerifyProblem(rel, "", str(e)))
            continue
        result.blobs += len(ranges)
        tasks.append(_verify_file_task(blobstore, rel, fi.checksum, ranges, download, result, lock, progress))
    progress.start("verifying", sum(fi.size for _, fi in files) if download else 0, len(files))
    try:
        run_parallel(tasks, parallelism)
    finally:
        progress.stop()
    result.ok = not result.missing and not result.corrupt
    return result


def _verify_file_task(blobstore, rel, checksum, ranges, download, result: VerifyResult, lock, progress):
    from statectl.snapshot.crc import combine_all

    def run(cancel: threading.Event) -> None:
        pieces = []
        for blob_id, _, length in ranges:
            try:
                if download:
                    sink = CrcSink(progress, cancel=cancel, what=f"blob {blob_id} of {rel}")
                    blobstore.get(blob_id, sink)
                    size = sink.written
                    pieces.append((sink.crc, sink.written))
                else:
                    size = blobstore.stat(blob_id).size
            except BlobNotFoundError:
                with lock:
                    result.missing.append(VerifyProblem(rel, blob_id, "blob not found"))
                return
            if size != length:
                with lock:
                    result.corrupt.append(VerifyProblem(rel, blob_id, f"blob has {size} bytes, index says {length}"))
                return
        if download and combine_all(pieces) != checksum:
            with lock:
                result.corrupt.append(VerifyProblem(rel, "", "CRC32 mismatch"))
        progress.file_done()

    return run


__all__ = ["JobSummary", "SnapshotSummary", "TaskSummary", "list_jobs", "list_tasks", "VerifyResult", "list_snapshots", "read_index_file", "show_snapshot", "verify_snapshot",
           "parse_index"]
