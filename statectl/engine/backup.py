"""backup: an incremental snapshot of a RocksDB store into a blob store (ARCHITECTURE.md).

checkpoint -> diff against the previous snapshot (the BackupPlan) -> upload what changed (TTL'd) ->
upload the index (TTL'd, with its prev pointer) -> record the checkpoint (the commit) -> post-commit
cleanup -> delete stale local checkpoint dirs. ``backup_stores`` backs up stores of one task as one
checkpoint (a job committing a task with its input offsets: statectl.pipeline). ``plan_backup`` decides
the same with nothing written (backup --dry-run): the files uploaded or kept, and what retention would
then expire and delete.
``backup_all`` backs up (or plans) every task dir of a state dir, each under the task a TaskNamer names, several
stores at once (engine.at_once).
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl import defaults, failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import read_index
from statectl.catalog.lease import GC_WAIT_SECONDS, Lease
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord, iso_utc, now_ms
from statectl.catalog.refs import StoreRef, is_checkpoint_id, new_checkpoint_id
from statectl.catalog.retention import RetentionPlan
from statectl.catalog.commit import commit_staged, finish_commit, plan_commit, prepare_commit, stage_snapshot
from statectl.engine.at_once import SharedProgress, run_at_once, shares
from statectl.engine.task_namer import TaskNamer
from statectl.errors import (
    CorruptSnapshotError,
    NotAStoreError,
    NotFoundError,
    PartialError,
    SnapshotNotFoundError,
    StatectlError,
    UsageError,
    one_cause,
)
from statectl.fsutil import chown_tree, owner_of
from statectl.local.layout import (
    CHECKPOINT_MARK,
    NEVER_UPLOADED,
    TaskDir,
    checkpoint_dir,
    local_checkpoint_dirs,
    not_in_checkpoint,
    task_dirs,
)
from statectl.parallel import check_parallelism
from statectl.progress import NoteRecorder, NullProgress, ProgressReporter
from statectl.ratelimit import RateLimit
from statectl.rocks.store import (
    create_checkpoint,
    lock_holder,
    locked_error,
    require_store,
)
from statectl.snapshot.diff import DirDiff, LocalFile, build_dir_index, diff_local
from statectl.snapshot.model import FileIndex, SnapshotIndex, SnapshotMetadata
from statectl.transfer.upload import upload_files
from statectl.transfer.verify import check_blobs


@dataclass(frozen=True)
class BackupOptions:
    """What to back up and how. ``checkpoint_dir`` backs up a checkpoint the job made instead of
    checkpointing ``store_dir`` (needed when the job holds the store open)."""

    ref: StoreRef
    store_dir: Path
    checkpoint_dir: Path | None = None
    parallelism: int = defaults.PARALLELISM
    chunk_size: int = defaults.CHUNK_SIZE
    ttl_seconds: int = defaults.TTL_SECONDS
    keep_last: int = defaults.KEEP_LAST
    keep_local_checkpoint: bool = True
    # The blobs of a snapshot retention drops stay this long after (catalog.retention); 0: go at once.
    grace_seconds: int = defaults.GRACE_SECONDS
    # A job committing its progress with its state (statectl.pipeline): the task's input offsets and other
    # state backends' markers (factory -> store -> marker) go into the same checkpoint (needs Kafka).
    input_offsets: dict[str, str] | None = None
    markers: dict[str, dict[str, str]] | None = None
    # The job's state base dir, when the store dir was found in it: a note then names the store's other
    # task dirs there, which this backup leaves out (backup --all-tasks takes them all).
    state_dir: Path | None = None
    # The bucket every byte uploaded is taken from (Session.rate_limit: one for the whole command, which
    # backup_all's stores share); None: no limit.
    rate_limit: RateLimit | None = None

    def validate(self) -> None:
        if self.keep_last < 1:
            raise UsageError("--keep-last must be at least 1")
        check_parallelism(self.parallelism)
        if self.chunk_size < 1024 * 1024 or self.chunk_size > 5 * 1024 ** 3:
            raise UsageError("--chunk-size must be between 1MiB and 5GiB")
        if self.ttl_seconds < 60:
            raise UsageError("--ttl must be at least a minute")
        if self.grace_seconds < 0:
            raise UsageError("--grace must not be negative")


@dataclass
class BackupResult:
    snapshot_id: str
    checkpoint_id: str
    store: str
    task: str
    files_total: int
    files_uploaded: int
    bytes_total: int
    bytes_uploaded: int
    files_removed: int
    duration_s: float
    notes: list[str] = field(default_factory=list)
    blobstore: str = ""  # the blob store's URL (printed with its secrets masked)


@dataclass
class BackupPlan:
    """What one backup uploads, decided against the latest snapshot before anything goes up: the
    checkpoint it reads (``source``, named ``checkpoint_id``), the snapshot it builds on (``prev_record``;
    None: a full backup, also when the latest one is unusable or damaged) and the diff of the checkpoint's
    files against that snapshot's: the ``added`` files go up, the retained ones keep their blobs.
    ``previous_files``: how many files that snapshot has (the diff leaves out names it ignores)."""

    checkpoint_id: str
    source: Path
    prev_record: CheckpointRecord | None
    diff: DirDiff
    previous_files: int = 0

    @property
    def added(self) -> list[LocalFile]:
        files = [f for _, f in self.diff.added()]
        assert all(isinstance(f, LocalFile) for f in files)
        return files  # type: ignore[return-value]


@dataclass
class _Staged:
    """A store's backup carried out up to its commit, under its ``lease``: the snapshot's files uploaded and
    its index (its blob ``index_id``) written, TTL'd; the ``record`` to commit; the files uploaded for it;
    its notes."""

    opts: BackupOptions
    lease: Lease
    plan: BackupPlan
    index_id: str
    record: CheckpointRecord
    index: SnapshotIndex
    uploaded: list[FileIndex]
    progress: NoteRecorder


def backup(opts: BackupOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
           progress: ProgressReporter | None = None) -> BackupResult:
    """Back up one store; return what was uploaded.

    Raises LockHeldError (exit 11) when the store is held by a running process and no checkpoint dir
    was given, or when another backup of the same store is running (the store's lease; one a gc holds
    is waited for, up to lease.GC_WAIT_SECONDS);
    NotFoundError / NotAStoreError for a missing or non-RocksDB dir; BlobStoreError, AuthError for
    blob store failures. A failure before the commit leaves only TTL'd blobs behind (collected by
    their TTL or gc); the previous snapshot stays the latest and intact. After the commit the cleanup
    is idempotent and re-run by the next backup or gc if it is interrupted. CorruptSnapshotError (exit 1)
    when blobs of the new snapshot vanished before its cleanup (the next backup then starts a new chain).

    The steps: pick the checkpoint to read; under the store's lease, finish an interrupted cleanup,
    make the checkpoint, plan against the latest snapshot, upload and commit (what fails before the commit
    takes the checkpoint statectl made with it), clean up after the commit; then drop stale local
    checkpoint dirs and note the store's task dirs this backup leaves out.
    """
    return backup_stores([opts], blobstore, checkpoints, progress)[0]


def backup_stores(stores: list[BackupOptions], blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                  progress: ProgressReporter | None = None, *, exact_markers: bool = False) -> list[BackupResult]:
    """Back up ``stores`` of one task as ONE checkpoint, in the order Samza's TaskStorageCommitManager commits
    a task: each store's backup up to its commit (its lease held until the end, its checkpoint id the same),
    then one commit naming every store's snapshot with the task's input offsets and every store's markers
    (catalog.commit.commit_staged; ``exact_markers``: ``stores`` are all the task has, and the checkpoint keeps
    no other store's marker from the task's latest, as a job's own commit; else those stay, as a backup of some
    of them keeps them), then each store's post-commit cleanup. A failure before that commit
    leaves every store's latest snapshot (and the task's checkpoint) as it was. Raises as ``backup``, and
    UsageError for stores of several tasks, a store given twice, checkpoint dirs naming different checkpoint
    ids or different input offsets, before anything is written."""
    for opts in stores:
        opts.validate()
    started = time.monotonic()
    sources = _sources(stores)
    offsets, markers = _task_state(stores)
    staged: list[_Staged] = []
    with ExitStack() as leases:
        try:
            for opts, (source, checkpoint_id) in zip(stores, sources):
                staged.append(_stage(opts, source, checkpoint_id, blobstore, checkpoints, leases, progress))
            commit_staged(checkpoints, [(s.lease, s.opts.ref, s.record) for s in staged], input_offsets=offsets,
                          markers=markers, exact_markers=exact_markers)
        except BaseException:  # before the commit: the checkpoints statectl made go with it
            for s in staged:
                if s.opts.checkpoint_dir is None:
                    shutil.rmtree(s.plan.source, ignore_errors=True)
            raise
        for s in staged:
            finish_commit(blobstore, checkpoints, s.opts.ref, s.record, s.index,
                          new_blob_ids=[b.blob_id for fi in s.uploaded for b in fi.blobs],
                          grace_seconds=s.opts.grace_seconds, progress=s.progress, what="backup")
    return [_finished(s, started, blobstore.url) for s in staged]


def _sources(stores: list[BackupOptions]) -> list[tuple[Path, str]]:
    """The checkpoint dir each store's backup reads, and the checkpoint id they share (_source)."""
    refs = [opts.ref for opts in stores]
    if len({(r.job, r.job_id, r.task) for r in refs}) > 1 or len({r.store for r in refs}) < len(refs):
        raise UsageError("stores backed up as one checkpoint must be different stores of one task")
    shared = new_checkpoint_id()
    sources = [_source(opts, shared) for opts in stores]
    ids = sorted({checkpoint_id for _, checkpoint_id in sources})
    if len(ids) > 1:
        raise UsageError(f"stores backed up as one checkpoint share its id, but their checkpoint dirs name "
                         f"{', '.join(ids)}")
    return sources


def _task_state(stores: list[BackupOptions]) -> tuple[dict[str, str] | None, dict[str, dict[str, str]] | None]:
    """The task's input offsets (the stores' own, which must agree) and every store's markers, merged."""
    given = [opts.input_offsets for opts in stores if opts.input_offsets is not None]
    if any(offsets != given[0] for offsets in given):
        raise UsageError("stores backed up as one checkpoint carry the task's input offsets: theirs differ")
    markers: dict[str, dict[str, str]] = {}
    for opts in stores:
        for factory, marks in (opts.markers or {}).items():
            markers.setdefault(factory, {}).update(marks)
    return (given[0] if given else None), (markers or None)


def _stage(opts: BackupOptions, source: Path, checkpoint_id: str, blobstore: BlobStore,
           checkpoints: BlobCheckpointStore, leases: ExitStack, progress: ProgressReporter | None) -> _Staged:
    """One store's backup up to its commit, its lease held until ``leases`` closes: finish an interrupted
    cleanup, make the checkpoint (unless given), plan against the latest snapshot, upload, write the index.
    What fails takes the checkpoint statectl made with it."""
    notes = NoteRecorder(progress)
    # Talk to the blob store before checkpointing: opening the store read-write rewrites its MANIFEST
    # and logs, so a missing bucket, bad credentials or an unreachable store must fail before that.
    # gc holds a store's lease only while it settles the store: wait for it rather than fail.
    lease = leases.enter_context(Lease(blobstore, opts.ref, wait_for_gc=GC_WAIT_SECONDS))
    if lease.notice:
        notes.note(lease.notice)
    prev_record = prepare_commit(blobstore, checkpoints, opts.ref, grace_seconds=opts.grace_seconds, progress=notes)
    makes_checkpoint = opts.checkpoint_dir is None
    try:
        adopt = _make_checkpoint(opts.store_dir, source) if makes_checkpoint else None
        plan = _plan(opts, blobstore, checkpoint_id, source, prev_record, adopt, notes)
        failpoints.hit("before-upload")
        uploaded = upload_files(blobstore, plan.added, chunk_size=opts.chunk_size, parallelism=opts.parallelism,
                                ttl_seconds=opts.ttl_seconds, progress=notes, limit=opts.rate_limit)
        ref = opts.ref
        index = SnapshotIndex(
            creation_time_millis=now_ms(),
            snapshot_metadata=SnapshotMetadata(checkpoint_id, ref.job, ref.job_id, ref.task, ref.store),
            dir_index=build_dir_index(plan.diff, {id(lf): fi for lf, fi in zip(plan.added, uploaded)}),
            prev_snapshot_index_blob_id=plan.prev_record.index_blob_id if plan.prev_record else None,
        )
        index_id, record = stage_snapshot(blobstore, index, ttl_seconds=opts.ttl_seconds, keep_last=opts.keep_last)
    except BaseException:
        if makes_checkpoint:
            shutil.rmtree(source, ignore_errors=True)
        raise
    return _Staged(opts, lease, plan, index_id, record, index, uploaded, notes)


def _finished(s: _Staged, started: float, url: str) -> BackupResult:
    """After the commit and its cleanup: drop stale local checkpoint dirs, note the store's task dirs left
    out; the store's result."""
    opts, plan = s.opts, s.plan
    if opts.checkpoint_dir is None:
        _delete_stale_checkpoint_dirs(opts.store_dir, keep=s.record.checkpoint_id if opts.keep_local_checkpoint
                                      else None)
    _note_other_tasks(opts, s.progress)
    present = list(s.index.dir_index.walk_present())
    return BackupResult(
        snapshot_id=s.index_id, checkpoint_id=s.record.checkpoint_id, store=opts.ref.store, task=opts.ref.task,
        files_total=len(present), files_uploaded=len(s.uploaded), bytes_total=sum(f.size for _, f in present),
        bytes_uploaded=sum(f.size for f in s.uploaded), files_removed=sum(1 for _ in plan.diff.removed()),
        duration_s=round(time.monotonic() - started, 3), notes=s.progress.notes, blobstore=url,
    )


@dataclass(frozen=True)
class PlannedUpload:
    """A file of the snapshot a backup would make: uploaded (``upload``) or kept from the previous one (``keep``)."""

    path: str
    size: int
    action: str


@dataclass(frozen=True)
class PlannedExpiry:
    """A snapshot the backup's retention would expire: its blobs go at that cleanup, or (``until``, UTC) once
    the grace period after it has passed."""

    checkpoint_id: str
    snapshot_id: str
    reason: str
    until: str | None


@dataclass(frozen=True)
class PlannedDeletion:
    blob_id: str
    reason: str


@dataclass
class BackupDryRun:
    """What ``backup`` would do, decided with nothing written (``backup --dry-run``): the dir it would read
    (``source``), the snapshot it would build on, each file uploaded or kept (counts named as
    BackupResult's), and what its cleanup would then expire and delete. Planned from a live store dir (no
    --checkpoint-dir), the files are the store's now: the backup's own checkpoint also flushes what the
    write-ahead log holds into a new SST file, which is not counted."""

    store: str
    task: str
    source: str
    previous_snapshot_id: str | None
    files_total: int
    files_uploaded: int
    bytes_total: int
    bytes_uploaded: int
    files_removed: int
    files: list[PlannedUpload]
    expired: list[PlannedExpiry]
    deleted: list[PlannedDeletion]
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)
    blobstore: str = ""


def plan_backup(opts: BackupOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                progress: ProgressReporter | None = None) -> BackupDryRun:
    """The plan of ``backup(opts)``, writing nothing anywhere: no checkpoint dir, lease, blob, catalog or
    Kafka record; the store's files are read (CRCs of the small ones, as a backup compares them), never
    opened as a store. Raises what ``backup`` raises before it uploads: bad options, a missing or non-RocksDB
    dir, a store a running process holds (LockHeldError, without --checkpoint-dir), a blob store that is not
    there, credentials that cannot write (AuthError), the store's lease held by another backup (LockHeldError;
    one a gc holds is a note: the backup would wait for it). Idempotent."""
    opts.validate()
    progress = NoteRecorder(progress)
    source, checkpoint_id = _source(opts)
    notice = Lease(blobstore, opts.ref, wait_for_gc=GC_WAIT_SECONDS).preflight()
    if notice:
        progress.note(notice)
    prev_record = _latest(checkpoints, opts.ref, progress)
    live = opts.checkpoint_dir is None
    if live:  # the checkpoint the backup would make: the store dir as it is now
        source = Path(opts.store_dir)
        plan = _plan(opts, blobstore, checkpoint_id, source, prev_record, _adopted(source), progress,
                     ignore=not_in_checkpoint(source))
    else:
        plan = _plan(opts, blobstore, checkpoint_id, source, prev_record, None, progress)
    index = SnapshotIndex(
        creation_time_millis=now_ms(),
        snapshot_metadata=SnapshotMetadata(checkpoint_id, opts.ref.job, opts.ref.job_id, opts.ref.task, opts.ref.store),
        dir_index=build_dir_index(plan.diff, {id(f): FileIndex(f.name, (), f.metadata, 0) for f in plan.added}),
        prev_snapshot_index_blob_id=plan.prev_record.index_blob_id if plan.prev_record else None)
    retention = plan_commit(blobstore, checkpoints, opts.ref, index, keep_last=opts.keep_last,
                            grace_seconds=opts.grace_seconds)
    return _dry_run(opts, plan, retention, source, live, progress.notes, blobstore.url)


def _latest(checkpoints: BlobCheckpointStore, ref: StoreRef, progress: ProgressReporter) -> CheckpointRecord | None:
    """The latest committed snapshot of ``ref`` a backup would build on, read only (prepare_commit, which
    finishes an interrupted cleanup first, writes): a note when that cleanup is pending."""
    try:
        record = checkpoints.latest(ref)
    except SnapshotNotFoundError:
        return None
    if record is not None and record.created_ms and not record.cleanup_done:
        progress.note(f"the cleanup after snapshot {record.checkpoint_id} of {ref} did not finish: the backup "
                      "finishes it first ('statectl gc --dry-run' lists what that deletes)")
    return record


def _dry_run(opts: BackupOptions, plan: BackupPlan, retention: RetentionPlan, source: Path, live: bool,
             notes: list[str], url: str) -> BackupDryRun:
    """The plan's result. From a ``live`` store dir, the files RocksDB writes anew whenever the store is
    opened (as the backup's checkpoint opens it) count as uploads, even where they are the same now."""
    added = [(rel, f.size) for rel, f in plan.diff.added()]
    kept = [(rel, f.size) for rel, f in plan.diff.retained()]
    if live:  # such a file replaces its namesake in the previous snapshot
        rewritten = [(rel, size) for rel, size in kept if _rewritten_at_open(rel)]
        added, kept = added + rewritten, [k for k in kept if k not in rewritten]
    removed = plan.previous_files - len(kept)  # every file of the previous snapshot not kept
    files = sorted([PlannedUpload(rel, size, "upload") for rel, size in added]
                   + [PlannedUpload(rel, size, "keep") for rel, size in kept], key=lambda f: f.path)
    cooling = {id(e) for e in retention.cooling}
    expired = [PlannedExpiry(e.record.checkpoint_id, e.record.index_blob_id, e.reason,
                             iso_utc(e.until_ms / 1000) if id(e) in cooling else None)
               for e in retention.newly_expired]
    return BackupDryRun(
        store=opts.ref.store, task=opts.ref.task, source=str(source),
        previous_snapshot_id=plan.prev_record.index_blob_id if plan.prev_record else None,
        files_total=len(files), files_uploaded=len(added), bytes_total=sum(f.size for f in files),
        bytes_uploaded=sum(size for _, size in added), files_removed=removed,
        files=files, expired=expired, deleted=[PlannedDeletion(d.blob_id, d.reason) for d in retention.delete],
        notes=notes, blobstore=url)


def _rewritten_at_open(rel: str) -> bool:
    """Whether RocksDB writes the file anew at each open of the store: CURRENT, the MANIFEST, the OPTIONS
    file and the write-ahead log (a new number each time)."""
    return "/" not in rel and (rel == "CURRENT" or rel.startswith(("MANIFEST-", "OPTIONS-")) or rel.endswith(".log"))


def _source(opts: BackupOptions, checkpoint_id: str | None = None) -> tuple[Path, str]:
    """The checkpoint dir the backup reads and its checkpoint id: the job's (``opts.checkpoint_dir``,
    whose id is its name's suffix when that is one), or a new one beside the store, which must then not
    be held by a running process (LockHeldError). ``checkpoint_id``: the id when the dir names none (a
    new one when None)."""
    checkpoint_id = checkpoint_id or new_checkpoint_id()
    if opts.checkpoint_dir is not None:
        source = Path(opts.checkpoint_dir)
        require_store(source, "checkpoint dir")
        suffix = source.name[len(opts.store_dir.name) + 1:] if source.name.startswith(opts.store_dir.name + "-") else ""
        return source, suffix if is_checkpoint_id(suffix) else checkpoint_id
    require_store(opts.store_dir)
    pid = lock_holder(opts.store_dir)
    if pid is not None:
        raise locked_error(opts.store_dir, pid)
    return checkpoint_dir(opts.store_dir, checkpoint_id), checkpoint_id


def _make_checkpoint(store: Path, source: Path) -> tuple[int, int] | None:
    """Checkpoint ``store`` into ``source``, marked as statectl's; the owner to record its files with
    (see _store_owner)."""
    create_checkpoint(store, source)
    (source / CHECKPOINT_MARK).touch()
    return _store_owner(store, source / CHECKPOINT_MARK)


def _plan(opts: BackupOptions, blobstore: BlobStore, checkpoint_id: str, source: Path,
          prev_record: CheckpointRecord | None, adopt: tuple[int, int] | None,
          progress: ProgressReporter, ignore: Any = NEVER_UPLOADED) -> BackupPlan:
    """Diff ``source`` against the snapshot of ``prev_record``; a full backup (and a note saying why) when
    that snapshot's index is unusable or its blobs are not all there. ``ignore``: the names left out (a
    live store dir planned from leaves out what a checkpoint of it would not hold)."""
    prev_index: SnapshotIndex | None = None
    if prev_record is not None:
        try:
            prev_index = read_index(blobstore, prev_record.index_blob_id, what="previous snapshot")
        except (SnapshotNotFoundError, CorruptSnapshotError) as e:
            progress.note(f"previous snapshot unusable ({e}); taking a full backup")
            prev_record = None
    diff = diff_local(source, prev_index.dir_index if prev_index else None, ignore=ignore, adopt=adopt)
    if prev_index is not None:
        # The new snapshot will reference the blobs of every retained file: make sure they are still
        # there (one stat each), or a blob deleted behind statectl's back would be carried into every
        # later snapshot while each backup said it was fine.
        problems = check_blobs(blobstore, list(diff.retained()), opts.parallelism)
        if problems:
            p = problems[0]
            progress.note(f"the latest snapshot of {opts.ref} is damaged ({len(problems)} of its blobs are missing "
                          f"or the wrong size, e.g. {p.blob_id} of {p.rel}: {p.reason}); taking a full backup")
            prev_record = None
            diff = diff_local(source, None, ignore=ignore, adopt=adopt)
    previous = sum(1 for _ in prev_index.dir_index.walk_present()) if prev_index and prev_record else 0
    return BackupPlan(checkpoint_id, source, prev_record, diff, previous)


def _note_other_tasks(opts: BackupOptions, progress: ProgressReporter) -> None:
    """Name the store's other task dirs under the job's state dir (when known), which this backup left out."""
    if opts.state_dir is None or not Path(opts.state_dir).is_dir():
        return
    ref = opts.ref
    others = [d.name for d in task_dirs(Path(opts.state_dir), store=ref.store)
              if not d.damaged and d.path.resolve() != Path(opts.store_dir).resolve()]
    if others:
        progress.note(f"backed up task {ref.task!r} of store {ref.store} only; {len(others)} other task "
                      f"dir{'s' if len(others) > 1 else ''} of the store under {opts.state_dir} not backed up: "
                      f"{', '.join(others)} (--all-tasks backs up every one)")


def _store_owner(store: Path, mark: Path) -> tuple[int, int] | None:
    """The owner the files of the checkpoint statectl made of ``store`` are recorded with: the store dir's.
    Samza records each file's owner and group names (FileMetadata.fromFile) and its restore fails when the
    restored files' differ (DirDiffUtil.areSameFile, blob.store.compare.file.owners.on.restore): the job's
    user's, never statectl's. Run as root, the checkpoint's files are that owner's already (rocks.store.
    create_checkpoint), the ``mark`` now too; as another user than the store's, the files it made are its
    own and are recorded as the store's (returned: diff_local's ``adopt``); None when nothing is to adopt."""
    chown_tree(mark, owner_of(store))
    return _adopted(store)


def _adopted(store: Path) -> tuple[int, int] | None:
    """The owner of ``store`` when the files a checkpoint of it makes are this process's user's and recorded
    as the store's (see _store_owner); None when there is none to adopt."""
    owner = owner_of(store)
    return owner if os.geteuid() not in (0, owner[0]) else None


def _delete_stale_checkpoint_dirs(store: Path, keep: str | None) -> None:
    """Delete the checkpoint dirs beside ``store`` that a backup made (they carry CHECKPOINT_MARK), but
    ``keep``. A checkpoint dir without the mark is the job's (Samza restores from its latest one at its
    next start) or another tool's: never touched."""
    for cid, path in local_checkpoint_dirs(store).items():
        if cid != keep and (path / CHECKPOINT_MARK).is_file():
            shutil.rmtree(path, ignore_errors=True)


@dataclass
class BackupAllResult:
    """``backup --all`` / ``--all-tasks``: a result per store backed up (with ``dry_run``, its plan), and the
    store dirs that failed, each with its error."""

    results: list[BackupResult | BackupDryRun]
    failures: list[tuple[str, str]]
    blobstore: str = ""
    dry_run: bool = False


def backup_all(state_dir: Path, base: BackupOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
               progress: ProgressReporter | None = None, *, store: str | None = None,
               dry_run: bool = False) -> BackupAllResult:
    """Back up every store under ``state_dir`` (every task dir of ``store`` only, when given: backup
    --all-tasks), each under the task a TaskNamer names; with ``dry_run``, plan each (plan_backup) instead.
    Several stores run at once (engine.at_once), each with its share of ``base.parallelism``; the results
    come in task dir order. A dir it cannot name, a damaged store (store files but no CURRENT) and a store
    that fails are listed in ``failures`` and do not stop the others (the CLI exits 3 then); when every store
    failed in its backup with the same error, that error is raised (errors.one_cause). NotFoundError when
    there is no store."""
    from dataclasses import replace

    if not state_dir.is_dir():
        raise NotFoundError(f"state dir {state_dir} does not exist")
    found = task_dirs(state_dir, store=store)
    if not found:
        if store is not None:
            raise NotFoundError(f"no RocksDB task dirs of store {store} under {state_dir}",
                                hint=f"the layout is <state-dir>/<store>/<task>: {state_dir / store}/<task>")
        raise NotFoundError(f"no RocksDB stores under {state_dir}", hint="the layout is <state-dir>/<store>/<task>")
    # Every dir is named before any is backed up: a source that cannot be read stops the run before an upload.
    namer = TaskNamer(base.ref, checkpoints)
    todo: list[tuple[TaskDir, StoreRef]] = []
    failures: list[tuple[str, str]] = []
    for d in found:
        try:
            if d.damaged:
                raise NotAStoreError("a damaged store (RocksDB's or Samza's files, but no CURRENT naming a "
                                     "MANIFEST): not backed up")
            todo.append((d, StoreRef(base.ref.job, base.ref.job_id, namer.name(d), d.store)))
        except (NotAStoreError, PartialError) as e:
            failures.append((str(d.path), str(e)))
    run = plan_backup if dry_run else backup
    at_once, each = shares(len(todo), base.parallelism)
    shared = SharedProgress(progress if progress is not None else NullProgress())

    def one(item: tuple[TaskDir, StoreRef]) -> BackupResult | BackupDryRun:
        return run(replace(base, ref=item[1], store_dir=item[0].path, checkpoint_dir=None, state_dir=None,
                           parallelism=each), blobstore, checkpoints, shared)

    if not dry_run:
        shared.inner.start(f"backing up {len(todo)} store{'s' if len(todo) != 1 else ''}", 0, 0)
    try:
        outcomes = run_at_once(todo, one, at_once, shared)
    finally:
        if not dry_run:
            shared.inner.stop()
    results = [o for o in outcomes if not isinstance(o, StatectlError)]
    errors = [o for o in outcomes if isinstance(o, StatectlError)]
    failures += [(str(d.path), str(o)) for (d, _), o in zip(todo, outcomes) if isinstance(o, StatectlError)]
    cause = one_cause(errors, len(failures), len(results))
    if cause is not None:
        raise cause
    return BackupAllResult(results, failures, blobstore.url, dry_run)
