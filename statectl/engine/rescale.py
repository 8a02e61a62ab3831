"""rescale: re-partition the snapshots of a store's N tasks into M tasks on Spark.

Two paths. Hash-partitioned stores (below). Key-group stores (``key_groups``, statectl.engine.rescale_keygroups,
planned by statectl.engine.rescale_plan): each source's MANIFEST gives its files' key ranges; the files
inside a target's key groups are copied server-side into the target's snapshot unread
(statectl.transfer.copy), the others go through the hash path's Spark job cut down to them (their keys
rewritten into per-target partial stores, verified as below), and each target's snapshot is its copies plus
its partial store's files under a MANIFEST written for them (statectl.rocks.manifest), uploaded and
committed as below.

The hash path:

resolve the source snapshots (latest, or named) -> what the blob store records of this rescale: done, or
cut in its commit, it is finished there (statectl.engine.rescale_rerun) -> check that the sources are the
--from layout (statectl.engine.rescale_layout) -> a Spark job (statectl.spark, source "snapshots"): the
executors read each source snapshot from the blob store (CRC32-checked while it streams), check that each
key belongs to its source's task, emit (target, key, value) with the job's partitioner, partition by
target, sort, and write SST files -> ingest each target's files into a staged store -> verify (key count
and order-independent content hash of the targets equal the sources'; every key in the task the
partitioner names) -> upload the M new snapshots with TTLs, as backup does, and check their blobs ->
record the rescale -> commit the M checkpoint records -> post-commit cleanup (the TTLs go;
catalog.commit's prepare_commit and finish_commit, as backup and snapshots copy use them;
statectl.engine.rescale_commit). Nothing is committed before every target is uploaded and verified: a
failure or a kill before that leaves the sources as they were and only TTL'd blobs behind (gc reclaims
them). The source snapshots are only read.

The new checkpoints carry no changelog position: the old partitioning's changelog offsets mean nothing for
the new tasks. With a Kafka checkpoint topic, a target task whose latest checkpoint names a changelog
position for the store gets a marker with no offset (its changelog partition = the task's number).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl import defaults, failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import write_index
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord, now_ms
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.catalog.resolve import resolve_snapshot
from statectl.engine.rescale_commit import WHAT, PendingTarget, changelog_markers, commit_targets, take_leases
from statectl.engine.rescale_layout import check_sources
from statectl.errors import DiskFullError, StatectlError, UsageError
from statectl.local.layout import NEVER_UPLOADED, task_dir_name
from statectl.parallel import check_parallelism
from statectl.progress import NoteRecorder, ProgressReporter
from statectl.snapshot.model import files_owner, parse_file_owner

class VerificationError(StatectlError):
    """The targets do not hold what the sources held (exit 1); nothing was committed."""


@dataclass(frozen=True)
class RescaleOptions:
    """Re-partition ``store`` of ``job`` from ``from_tasks`` source tasks into ``to_tasks`` target tasks of
    ``to_job`` (default: ``job``). ``sources``/``targets``: the task names (default ``Partition k``);
    ``snapshots``: task -> snapshot id (checkpoint id or index blob id; default the latest).
    ``partitioner``: ``module:callable`` f(key: bytes, partitions: int) -> int, None (or ``murmur2``) for
    Kafka's default (toPositive(murmur2(key)) % partitions); ``from_partitioner``: the one that placed the
    sources' keys (default: ``partitioner``). ``key_groups``: the store's keys carry key-group prefixes
    (Flink's layout, statectl.formats.keygroups) of this many groups: the key-group path (module doc).
    ``ignore_other_tasks``: rescale although the store has snapshots of tasks besides the sources
    (statectl.engine.rescale_layout). ``again``: a new rescale whatever the blob store records of this one
    (statectl.engine.rescale_rerun). ``dry_run``: make every check that needs no Spark job and report the
    plan; write nothing. ``work_dir``: where the Spark job's files and the staged target stores go (a
    temporary dir in it, removed at the end; default the system's temp dir). ``file_owner``: ``USER:GROUP``
    the targets' files are recorded with (None: the sources', snapshot.model.files_owner): Samza's restore
    compares them with its restored files'."""

    store: str
    job: str
    job_id: str = "1"
    from_tasks: int = 0
    to_tasks: int = 0
    to_job: str | None = None
    sources: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    snapshots: dict[str, str] = field(default_factory=dict)
    partitioner: str | None = None
    from_partitioner: str | None = None
    key_groups: int | None = None
    ignore_other_tasks: bool = False
    again: bool = False
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    staging: str = "local"  # or the blob store URL the executors hand their SST files over through
    s3: Any = None
    dry_run: bool = False
    work_dir: Path | None = None
    parallelism: int = defaults.PARALLELISM
    chunk_size: int = defaults.CHUNK_SIZE
    ttl_seconds: int = defaults.TTL_SECONDS
    keep_last: int = defaults.KEEP_LAST
    grace_seconds: int = defaults.GRACE_SECONDS
    timeout_s: float | None = None
    file_owner: str | None = None

    @property
    def source_tasks(self) -> list[str]:
        return list(self.sources) or [f"Partition {k}" for k in range(self.from_tasks)]

    @property
    def target_tasks(self) -> list[str]:
        return list(self.targets) or [f"Partition {k}" for k in range(self.to_tasks)]

    @property
    def source_partitioner(self) -> str | None:
        """The partitioner that placed the sources' keys."""
        return self.from_partitioner or self.partitioner

    def validate(self) -> None:
        """UsageError for options that cannot be run."""
        if not self.store or not self.job:
            raise UsageError("rescale needs --store and --job")
        if self.from_tasks < 1 or self.to_tasks < 1:
            raise UsageError("--from and --to must be at least 1")
        if self.sources and len(self.sources) != self.from_tasks:
            raise UsageError(f"the task map names {len(self.sources)} source tasks, --from says {self.from_tasks}")
        if self.targets and len(self.targets) != self.to_tasks:
            raise UsageError(f"the task map names {len(self.targets)} target tasks, --to says {self.to_tasks}")
        self._validate_names()
        unknown = sorted(set(self.snapshots) - set(self.source_tasks))
        if unknown:
            raise UsageError(f"--snapshots names task {unknown[0]!r}, which is not a source task")
        if (self.to_job or self.job) == self.job and self.from_tasks == self.to_tasks and not self.targets:
            raise UsageError("--from equals --to within one job: nothing to rescale")
        self._validate_routing()
        if self.keep_last < 1:
            raise UsageError("--keep-last must be at least 1")
        if self.ttl_seconds < 60:
            raise UsageError("--ttl must be at least a minute")
        check_parallelism(self.parallelism)
        if self.file_owner is not None:
            parse_file_owner(self.file_owner)

    def _validate_names(self) -> None:
        """Every task name must name a store dir and a catalog key segment, as --task must (check_name)."""
        from statectl.local.layout import check_name

        if self.to_job is not None:
            check_name("to job", self.to_job)
        for what, names in (("source", self.source_tasks), ("target", self.target_tasks)):
            if len(set(names)) != len(names) or not all(names):
                raise UsageError(f"the {what} task names must be distinct and not empty")
            for name in names:
                try:
                    check_name("task", name)
                except UsageError as e:
                    raise UsageError(f"--task-map: {what} task: {e}") from None

    def _validate_routing(self) -> None:
        import re

        if self.key_groups is not None:
            from statectl.formats.keygroups import check_key_groups

            if self.partitioner is not None or self.from_partitioner is not None:
                raise UsageError("--key-groups and --partitioner exclude each other: a key-group store routes "
                                 "every key by its key-group prefix")
            try:
                check_key_groups(self.key_groups)
            except ValueError as e:
                raise UsageError(f"--key-groups: {e}") from None
        for flag, name in (("--partitioner", self.partitioner), ("--from-partitioner", self.from_partitioner)):
            if name is not None and name != "murmur2" and not re.fullmatch(r"[\w.]+:[\w.]+", name):
                raise UsageError(f"{flag} {name!r}: expected module:callable (or murmur2)")


@dataclass
class SourceInfo:
    task: str
    snapshot_id: str
    checkpoint_id: str
    files: int
    bytes: int
    keys: int | None = None


@dataclass
class TargetInfo:
    task: str
    keys: int
    snapshot_id: str | None = None
    checkpoint_id: str | None = None
    files: int = 0
    bytes: int = 0
    files_copied: int = 0  # the key-group path: duplicated server-side from the sources, unread
    bytes_copied: int = 0
    files_read: int = 0  # ... and read by the executors, their keys in this target rewritten
    bytes_read: int = 0


@dataclass
class RescaleResult:
    store: str
    job: str
    to_job: str
    tasks_in: int
    tasks_out: int
    keys: int
    partitioner: str
    sources: list[SourceInfo]
    targets: list[TargetInfo]
    bytes_read: int = 0  # by the executors: the source snapshots' files, from the blob store
    bytes_written: int = 0  # by the executors: the targets' SST files
    bytes_uploaded: int = 0
    # The key-group path: the bytes of the files duplicated server-side into the targets, unread, and of
    # those the executors read and rewrote (the boundary files and what shares their key groups).
    key_groups: int | None = None
    bytes_copied: int = 0
    files_copied: int = 0
    files_rewritten: int = 0
    bytes_rewritten: int = 0
    content_hash: str = ""
    verified: bool = False
    committed: bool = False
    dry_run: bool = False
    # The new checkpoints point at no changelog offsets: those of the old partitioning mean nothing now.
    changelog_position: str | None = None
    duration_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    file_owner: str = ""  # USER:GROUP the targets' files are recorded with ("": the sources have no files)
    # This command run again (statectl.engine.rescale_rerun): "done" (nothing to do, nothing written) or
    # "finished" (it committed the targets a cut commit left); "" for a new rescale.
    rerun: str = ""


def rescale(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
            progress: ProgressReporter | None = None) -> RescaleResult:
    """Re-partition the source snapshots into new target snapshots and commit them (see the module doc).

    Raises UsageError for bad options (a partitioner that does not import among them); SnapshotNotFoundError
    (exit 10) for a source task without a snapshot (or without the named one); LayoutError (exit 1) when the
    sources are not the layout the options say (statectl.engine.rescale_layout); RecordedRescaleError
    (exit 1) when what the blob store records of this rescale, or of another one into the target store,
    forbids it (statectl.engine.rescale_rerun); MissingDependencyError (13) without pyspark or Java;
    StatectlError (exit 1) when the Spark job fails, e.g. on a damaged source snapshot (a file whose CRC32 or
    size differs from its index) or a source key outside its task; VerificationError (exit 1) when the
    targets do not hold exactly the sources' entries, each in its partitioner's task; LockHeldError (11) when
    a backup of a target store is running; PartialError (exit 3) when the commit of a target fails after
    others were committed (the commit step takes milliseconds: a broker or blob store failing right then).
    In every failure before the commit nothing is committed and the sources are untouched; the uploads made
    so far carry a TTL (gc reclaims them). A dry run makes every check but the Spark job's and writes nothing.

    Idempotent as a command: the rescale is recorded before its first commit, and the same rescale run again
    commits what a cut commit left, or, done, does nothing (statectl.engine.rescale_rerun).
    """
    from statectl.engine import rescale_rerun as rerun

    opts.validate()
    _check_partitioners(opts)
    if opts.key_groups is not None:
        from dataclasses import replace

        from statectl.formats.keygroups import PARTITIONER_PREFIX

        opts = replace(opts, partitioner=f"{PARTITIONER_PREFIX}{opts.key_groups}")
    progress = NoteRecorder(progress)
    began = time.monotonic()
    to_job = opts.to_job or opts.job
    result = RescaleResult(opts.store, opts.job, to_job, opts.from_tasks, opts.to_tasks, 0,
                           opts.partitioner or "murmur2", [], [], dry_run=opts.dry_run, key_groups=opts.key_groups)
    t0 = time.monotonic()
    snapshots, indexes = _resolve(opts, blobstore, checkpoints, result)
    found = rerun.check_recorded(opts, blobstore, checkpoints, [s.snapshot_id for s in result.sources])
    if found.record is not None:
        rerun.finish(opts, found, blobstore, checkpoints, result, progress)
        return _ended(result, progress, began)
    manifests = check_sources(opts, blobstore, checkpoints, indexes, found.leftovers)
    kg_plan = None
    if opts.key_groups is not None:
        from statectl.engine.rescale_keygroups import plan_key_groups

        kg_plan = plan_key_groups(opts, manifests, indexes, result)
    result.phases["resolve_s"] = round(time.monotonic() - t0, 3)
    if opts.dry_run:
        if kg_plan is None or kg_plan.whole or kg_plan.reads:  # the run's Spark job checks this before it starts
            from statectl.spark.submit import check_spark

            check_spark(WHAT)
        if not result.targets:
            result.targets = [TargetInfo(t, 0) for t in opts.target_tasks]
        return _ended(result, progress, began)

    recorder = rerun.Recorder(blobstore, opts, found.etag)
    with _WorkDir(opts.work_dir) as work:
        if kg_plan is None:
            stores, manifest = _build(opts, snapshots, blobstore, work, result, progress)
            _verify(opts, stores, manifest, result)
            _upload_and_commit(opts, to_job, stores, blobstore, checkpoints, result, progress, recorder)
        else:
            from statectl.engine.rescale_keygroups import rescale_key_groups

            rescale_key_groups(opts, to_job, kg_plan, snapshots, manifests, indexes, blobstore, checkpoints, work,
                               result, progress, recorder)
    return _ended(result, progress, began)


def _ended(result: RescaleResult, progress: NoteRecorder, began: float) -> RescaleResult:
    result.notes = progress.notes
    result.duration_s = round(time.monotonic() - began, 3)
    return result


def _check_partitioners(opts: RescaleOptions) -> None:
    """UsageError for a partitioner that does not import here, before anything runs: statectl's own
    verification routes every key with it too."""
    from statectl.spark.job import BuildError, load_partitioner

    for flag, name in (("--partitioner", opts.partitioner), ("--from-partitioner", opts.from_partitioner)):
        try:
            load_partitioner(name)
        except BuildError as e:
            raise UsageError(f"{flag}: {e}", hint="it must import where statectl runs and where the executors run "
                                                  "(e.g. through PYTHONPATH); nothing was run") from None


def _resolve(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
             result: RescaleResult) -> tuple[list[dict[str, Any]], list[Any]]:
    """Resolve every source's snapshot (the latest, or the one --snapshots names) into ``result.sources``;
    return them as BuildSpec.snapshots holds them, and their indexes."""
    snapshots = []
    indexes = []
    for task in opts.source_tasks:
        ref = StoreRef(opts.job, opts.job_id, task, opts.store)
        snap = resolve_snapshot(blobstore, checkpoints, ref, opts.snapshots.get(task))
        files = [{"path": rel, "size": fi.file_metadata.size, "checksum": fi.checksum,
                  "blobs": [[b.blob_id, b.offset] for b in fi.blobs]}
                 for rel, fi in snap.index.dir_index.walk_present() if Path(rel).name not in NEVER_UPLOADED]
        snapshots.append({"task": task, "snapshot": snap.index_blob_id, "files": files})
        indexes.append(snap.index)
        result.sources.append(SourceInfo(task, snap.index_blob_id, snap.index.snapshot_metadata.checkpoint_id,
                                         len(files), sum(f["size"] for f in files)))
    owner = parse_file_owner(opts.file_owner) if opts.file_owner else files_owner([i.dir_index for i in indexes])
    result.file_owner = ":".join(owner) if owner else ""
    return snapshots, indexes


WORK_PREFIX = "statectl-rescale-"
WORK_LOCK = "RESCALE.lock"


class _WorkDir:
    """A temporary dir of this rescale in ``parent`` (default the temp dir), flock'ed while it runs and
    removed at the end. The dirs that killed rescales left there (their lock free) are removed first."""

    def __init__(self, parent: Path | None):
        self.parent = Path(parent) if parent is not None else Path(tempfile.gettempdir())
        self._fd: int | None = None

    def __enter__(self) -> Path:
        import fcntl
        import os

        self.parent.mkdir(parents=True, exist_ok=True)
        for old in self.parent.glob(WORK_PREFIX + "*"):
            if old.is_symlink() or not old.is_dir() or not (old / WORK_LOCK).is_file():
                continue
            try:
                fd = os.open(old / WORK_LOCK, os.O_RDONLY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a running rescale's
            finally:
                os.close(fd)
            shutil.rmtree(old, ignore_errors=True)
        self.path = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=self.parent))
        self._fd = os.open(self.path / WORK_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self.path

    def __exit__(self, *exc: object) -> None:
        import os

        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _build(opts: RescaleOptions, snapshots: list[dict[str, Any]], blobstore: BlobStore, work: Path,
           result: RescaleResult, progress: ProgressReporter) -> tuple[list[Path], Any]:
    """Run the Spark job and ingest each target's SST files into a staged store; return the stores and the
    job's BuildManifest."""
    from statectl.local.staged import StagedStore
    from statectl.rocks.sst import ingest_into_new_store
    from statectl.spark.submit import BuildSpec, run_build

    hashed = opts.key_groups is None
    spec = BuildSpec("snapshots", layout="partitioned", partitions_out=opts.to_tasks, snapshots=tuple(snapshots),
                     source_store=blobstore.url, partitioner=opts.partitioner, staging=opts.staging,
                     partitions_in=opts.from_tasks if hashed else None,
                     source_partitioner=opts.source_partitioner if hashed else None)
    t0 = time.monotonic()
    try:
        manifest = run_build(spec, work / "build", master=opts.master, conf=opts.conf, progress=progress,
                             timeout_s=opts.timeout_s, s3=opts.s3)
    except StatectlError as e:
        _keep_log(e, work / "build")
        raise
    result.phases["spark_s"] = round(time.monotonic() - t0, 3)
    by_task = {s["task"]: s for s in manifest.sources}
    for src in result.sources:
        got = by_task.get(src.task)
        if got is None:
            raise VerificationError(f"the Spark job did not report reading the snapshot of {src.task}")
        src.keys = int(got["keys"])
        result.bytes_read += int(got["bytes_read"])
    result.bytes_written = sum(f.size for f in manifest.files)
    t0 = time.monotonic()
    out = []
    for k, task in enumerate(opts.target_tasks):
        target = work / "stores" / task_dir_name(task)

        def full(target: Path = target) -> DiskFullError:
            return DiskFullError(f"no space left on device building {target}", hint=f"free space in {work}, "
                                 "or give --work-dir on a larger disk")
        failpoints.hit("rescale-ingest")
        with StagedStore(target, what=WHAT, disk_full=full, sync="dirs") as staged:
            ingest_into_new_store(staged.path, manifest.paths(k))
            staged.commit()
        out.append(target)
    result.phases["ingest_s"] = round(time.monotonic() - t0, 3)
    return out, manifest


def _keep_log(e: StatectlError, build: Path) -> None:
    """The Spark job's log that ``e``'s hint names lives in the work dir, which goes when the rescale ends: keep
    a copy beside the work dir and name that instead."""
    import os

    from statectl.spark.submit import LOG_FILE

    log = build / LOG_FILE
    if not e.hint or str(log) not in e.hint or not log.is_file():
        return
    kept = build.parent.parent / f"{WORK_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{LOG_FILE}"
    try:
        shutil.copyfile(log, kept)
    except OSError:
        e.hint = None
        return
    e.hint = e.hint.replace(str(log), str(kept))


def _verify(opts: RescaleOptions, stores: list[Path], manifest: Any, result: RescaleResult) -> None:
    """Read every target store back: its keys must all route to it, and the targets together must hold the
    sources' key count and content hash (statectl.formats.adstore.Digest: order-independent)."""
    from statectl.formats.adstore import Digest
    from statectl.rocks.store import open_readonly
    from statectl.spark.job import load_partitioner

    route = load_partitioner(opts.partitioner)
    m = opts.to_tasks
    t0 = time.monotonic()
    want = Digest()
    for s in manifest.sources:
        want.merge(Digest.from_json(s["digest"]))
    got = Digest()
    problems: list[str] = []
    for k, (task, path) in enumerate(zip(opts.target_tasks, stores)):
        digest = Digest()
        misrouted = [0]
        example: list[bytes] = []

        def entries(cursor: Any, k: int = k, misrouted: list[int] = misrouted, example: list[bytes] = example):
            while cursor.valid():
                key = cursor.key()
                if route(key, m) != k:
                    misrouted[0] += 1
                    if not example:
                        example.append(key)
                yield key, cursor.value()
                cursor.next()

        db = open_readonly(path)
        try:
            cursor = db.iter()
            cursor.seek_to_first()
            digest.add_sorted(entries(cursor))
            del cursor
        finally:
            db.close()
        if misrouted[0]:
            problems.append(f"{misrouted[0]} keys of target {task} belong to another task (e.g. {example[0]!r})")
        if digest.checksum != manifest.store(k).digest.checksum or digest.keys != manifest.store(k).digest.keys:
            problems.append(f"target {task} holds {digest.keys} keys, the Spark job wrote "
                            f"{manifest.store(k).digest.keys}")
        got.merge(digest)
        if k < len(result.targets):  # the key-group path planned them: these are the keys it rewrote
            result.targets[k].keys = digest.keys
        else:
            result.targets.append(TargetInfo(task, digest.keys))
    result.keys = got.keys
    result.content_hash = f"{got.checksum:016x}"
    if got.keys != want.keys:
        problems.append(f"the targets hold {got.keys} keys, the sources {want.keys}")
    elif got.checksum != want.checksum:
        problems.append(f"the targets' content hash {got.checksum:016x} differs from the sources' {want.checksum:016x}")
    result.phases["verify_s"] = round(time.monotonic() - t0, 3)
    if problems:
        raise VerificationError(f"rescale verification failed, nothing was committed: {problems[0]}"
                                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                                hint="the source snapshots are untouched; with duplicate keys across source "
                                     "tasks the store was not partitioned by this partitioner")
    result.verified = True


def _upload_and_commit(opts: RescaleOptions, to_job: str, stores: list[Path], blobstore: BlobStore,
                       checkpoints: BlobCheckpointStore, result: RescaleResult, progress: ProgressReporter,
                       recorder: Any, copied: list[list[Any]] | None = None) -> None:
    """Upload every target as a full snapshot with TTLs (backup's upload), check its blobs, then record the
    rescale (``recorder``: rescale_rerun.Recorder), commit all M checkpoint records and run backup's
    post-commit cleanup for each. ``copied``: per target, FileIndexes of blobs already copied into the blob
    store (TTL'd) that its snapshot lists besides the uploads."""
    from statectl.catalog.index import read_index
    from statectl.errors import CorruptSnapshotError
    from statectl.snapshot.diff import build_dir_index, diff_local
    from statectl.snapshot.model import SnapshotIndex, SnapshotMetadata
    from statectl.transfer.upload import upload_files
    from statectl.transfer.verify import check_blobs

    t0 = time.monotonic()
    refs = [StoreRef(to_job, opts.job_id, task, opts.store) for task in opts.target_tasks]
    pending = []
    with ExitStack() as stack:
        leases = take_leases(stack, opts, blobstore, checkpoints, refs, progress)
        markers = changelog_markers(checkpoints, refs)
        for ref, path, info in zip(refs, stores, result.targets):
            checkpoint_id = new_checkpoint_id()
            diff = diff_local(path, None, ignore=NEVER_UPLOADED)
            added = [f for _, f in diff.added()]
            uploaded = upload_files(blobstore, added, chunk_size=opts.chunk_size,  # type: ignore[arg-type]
                                    parallelism=opts.parallelism, ttl_seconds=opts.ttl_seconds, progress=progress)
            dir_index = build_dir_index(diff, {id(lf): fi for lf, fi in zip(added, uploaded)})
            extra = copied[len(pending)] if copied else []
            if extra:
                from dataclasses import replace

                dir_index = replace(dir_index, files_present=tuple(sorted(dir_index.files_present + tuple(extra),
                                                                          key=lambda f: f.file_name)))
            if result.file_owner:  # the staged stores' files are the user's statectl runs as
                dir_index = dir_index.with_owner(*parse_file_owner(result.file_owner))
            index = SnapshotIndex(creation_time_millis=now_ms(),
                                  snapshot_metadata=SnapshotMetadata(checkpoint_id, ref.job, ref.job_id, ref.task,
                                                                     ref.store),
                                  dir_index=dir_index, prev_snapshot_index_blob_id=None)
            index_id = write_index(blobstore, index, opts.ttl_seconds)
            failpoints.hit("rescale-uploaded")
            present = list(dir_index.walk_present())
            problems = check_blobs(blobstore, present, opts.parallelism)
            if problems or read_index(blobstore, index_id, what="new snapshot") != index:
                p = problems[0] if problems else None
                raise CorruptSnapshotError(f"the new snapshot of {ref} did not read back as uploaded"
                                           + (f": {p.blob_id} of {p.rel}: {p.reason}" if p else ""),
                                           hint="nothing was committed; run rescale again")
            info.snapshot_id, info.checkpoint_id = index_id, checkpoint_id
            info.files, info.bytes = len(present), sum(f.size for _, f in present)
            result.bytes_uploaded += sum(f.size for f in uploaded)
            uploaded = list(uploaded) + list(extra)  # the copies' TTLs go with the commit too
            # The commit's cleanup keeps every older snapshot of the target (within one job: the source of
            # its task, kept for a roll-back); the next backup of the task applies its own --keep-last.
            keep = max(opts.keep_last, 1 + len(checkpoints.list(ref)))
            pending.append(PendingTarget(ref, CheckpointRecord(checkpoint_id, index_id, index.creation_time_millis,
                                                                keep_last=keep), index,
                                         [b.blob_id for fi in uploaded for b in fi.blobs]))
        result.phases["upload_s"] = round(time.monotonic() - t0, 3)
        commit_targets(opts, blobstore, checkpoints, leases, pending, markers, recorder, result, progress)


def load_snapshots_file(path: Path) -> dict[str, str]:
    """``--snapshots FILE``: a JSON object task name -> snapshot id. UsageError when malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"--snapshots {path}: {e}") from None
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
        raise UsageError(f"--snapshots {path}: expected a JSON object of task name -> snapshot id")
    return doc


def load_task_map(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--task-map FILE``: JSON {"from": [source task names], "to": [target task names]} (either may be
    left out: ``Partition k``). UsageError when malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"--task-map {path}: {e}") from None
    if not isinstance(doc, dict) or set(doc) - {"from", "to"}:
        raise UsageError(f"--task-map {path}: expected a JSON object with \"from\" and/or \"to\" lists")
    out = []
    for key in ("from", "to"):
        names = doc.get(key) or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UsageError(f"--task-map {path}: {key!r} must be a list of task names")
        out.append(tuple(names))
    return out[0], out[1]
