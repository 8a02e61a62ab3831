"""adstore load from a file dataset (:func:`load_file`) and its plan: a new version is built beside the
current one (local.versions), sealed with a manifest (rows read, keys, key range, checksum of the entries),
and switched to; older versions beyond ``keep_versions`` are deleted. With ``spark`` the version is built
from SST files a Spark job wrote (engine.adstore.builds), ingested into a new store. Locks:
engine.adstore.common.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from statectl import failpoints
from statectl.engine.adstore.builds import BUILD_DIR_PREFIX, BuildLock, remove_build, remove_old_builds
from statectl.engine.adstore.common import AdstoreExtractError, SparkOptions, check_spec
from statectl.errors import DiskFullError, StatectlError, UsageError, is_disk_full
from statectl.formats.adstore import Digest, ExtractError, KeyValueSpec, VersionManifest, partition_of
from statectl.local.layout import store_dir
from statectl.progress import NullProgress, ProgressReporter
from statectl.ratelimit import RateLimit, format_rate


# With a rate limit, the rows' bytes are taken from it this many at a time: small bursts, few takes.
RATE_STEP = 256 * 1024


class EmptyDatasetError(StatectlError):
    """A file dataset with no rows (none at all, or a CSV header alone): refused as a version unless
    ``allow_empty`` (exit 1; nothing is built, nothing becomes current)."""


@dataclass(frozen=True)
class FileLoadOptions:
    """Load the dataset at ``path`` as a new version of ``store``: broadcast (one store, ``store_dir`` or
    the store dir of ``task``) or ``partitions`` stores ``Partition k`` (rows by Kafka's partitioner over
    the key bytes). ``keep_versions``: sealed versions kept per store (the current one always).
    ``allow_empty``: a dataset without rows makes an empty version (by default it is refused).
    ``rate_limit``: the bucket the rows' bytes (keys and values) are taken from as they are read, in a
    load built here (a Spark build reads the dataset in its executors: not limited, a note says so)."""

    path: Path
    store: str
    state_dir: Path | None = None
    fmt: str | None = None
    task: str = "Partition 0"
    store_dir: Path | None = None
    partitions: int | None = None
    spec: KeyValueSpec = KeyValueSpec()
    keep_versions: int = 2
    batch_rows: int = 10_000
    allow_empty: bool = False
    rate_limit: RateLimit | None = None

    def validate(self) -> None:
        if not self.store:
            raise UsageError("adstore load needs --store")
        if self.store_dir is None and self.state_dir is None:
            raise UsageError("adstore load needs --state-dir (or --store-dir)")
        if self.store_dir is not None and self.partitions is not None:
            raise UsageError("--store-dir names one store; --partition-count makes several under --state-dir")
        if self.partitions is not None and self.partitions < 1:
            raise UsageError("--partition-count must be at least 1")
        if self.keep_versions < 1:
            raise UsageError("--keep-versions must be at least 1")
        if self.state_dir is not None:  # the names (store, task) checked before anything is written
            store_dir(Path(self.state_dir), self.store, self.task)
        check_spec(self.spec, topic=False)

    def store_dirs(self) -> list[Path]:
        if self.partitions is None:
            path = Path(self.store_dir) if self.store_dir is not None else store_dir(Path(self.state_dir),
                                                                                      self.store, self.task)
            return [path.absolute()]
        return [store_dir(Path(self.state_dir), self.store, f"Partition {k}").absolute()
                for k in range(self.partitions)]


@dataclass
class VersionLoad:
    store_dir: str
    version: int
    rows: int
    keys: int
    first_key: str | None
    last_key: str | None
    checksum: str
    previous: int | None
    deleted_versions: list[int] = field(default_factory=list)


@dataclass
class FileLoadResult:
    """``rows`` read, ``records`` written (rows, less none: every row is a put), ``version`` made current
    in every store, and per store its manifest's figures."""

    source: str
    rows: int
    records: int
    bytes: int
    version: int
    built_with: str
    duration_s: float
    stores: list[VersionLoad] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class PlannedVersion:
    """A version a file load makes in one store: ``version`` current instead of ``previous``, ``rows`` of
    the dataset in it (None: not counted, a Spark build counts them), then ``deleted_versions`` pruned."""

    store_dir: str
    version: int
    previous: int | None
    rows: int | None
    deleted_versions: list[int] = field(default_factory=list)


@dataclass
class FileLoadPlan:
    """What ``load_file`` will do, decided with nothing written: read ``files`` (``bytes`` in all) of the
    dataset, ``rows`` rows (None with --spark: not read here), and make version ``version`` current in every
    store of ``stores``. ``adstore load --from-file --dry-run`` prints it; ``load_file`` executes it."""

    source: str
    format: str
    files: list[str]
    bytes: int
    rows: int | None
    version: int
    built_with: str
    stores: list[PlannedVersion]
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)


def plan_file_load(opts: FileLoadOptions, *, spark: SparkOptions | None = None) -> FileLoadPlan:
    """The plan of ``load_file(opts, spark=spark)``, with its checks, writing nothing (no lock file, no build
    dir; builds a killed load left are not removed, and their numbers not counted). Without ``spark`` the
    dataset is read once, as the load reads it: each row's key extracted and routed to its store, so a row
    without its key, a malformed or changing file and an empty dataset fail the plan as they fail the load.
    Raises what ``load_file`` raises before it builds (LockHeldError too: another load or switch runs on a
    store; no lock is taken)."""
    opts.validate()
    from statectl.local.datasets import iter_rows, open_dataset
    from statectl.local.versions import StoreLock, current_version, next_number, prunable

    ds = open_dataset(Path(opts.path), opts.fmt)
    dirs = _file_targets(opts)
    for d in dirs:
        StoreLock(d).check_free()
    number = max(next_number(d, live_builds_only=True) for d in dirs)
    rows: list[int] | None = None
    if spark is None:
        rows = [0] * len(dirs)
        for f, i, row in iter_rows(ds):
            try:
                key, _ = opts.spec.row_entry(row)
            except ExtractError as e:
                raise AdstoreExtractError(f"{f} row {i}: {e}", hint="fix the dataset or --key-field") from None
            rows[0 if len(dirs) == 1 else partition_of(key, len(dirs))] += 1
        _check_not_empty(ds, sum(rows), opts)
    stores = [PlannedVersion(str(d), number, current_version(d), None if rows is None else rows[k],
                             prunable(d, opts.keep_versions, new=number)) for k, d in enumerate(dirs)]
    return FileLoadPlan(str(ds.path), ds.fmt, [str(f) for f in ds.files], sum(f.stat().st_size for f in ds.files),
                        None if rows is None else sum(rows), number, "put" if spark is None else "spark", stores,
                        notes=_key_notes(ds, opts))


def _key_notes(ds: Any, opts: FileLoadOptions) -> list[str]:
    """The note of formats.adstore.text_key_note, from the dataset's first row (none for an empty dataset)."""
    from statectl.formats.adstore import text_key_note
    from statectl.local.datasets import first_row

    column = opts.spec.key_column or ""
    row = first_row(ds)
    note = None if row is None else text_key_note(column, row.get(column))
    return [note] if note else []


def _file_targets(opts: FileLoadOptions) -> list[Path]:
    """The store dirs of a file load, each refused unless it is a versioned adstore or not there yet."""
    from statectl.local.versions import current_version

    dirs = opts.store_dirs()
    for d in dirs:
        current_version(d)  # refuses a plain store dir before anything is built
        if d.exists() and not d.is_symlink():
            raise UsageError(f"{d} is not a versioned adstore")
    return dirs


def load_file(opts: FileLoadOptions, *, progress: ProgressReporter | None = None,
              spark: SparkOptions | None = None) -> FileLoadResult:
    """Build, seal and switch to a new version of every target store from the file dataset (see the
    module doc). The current versions are untouched until each new one is sealed; a failure leaves no
    new version behind. Holds every target's StoreLock throughout.

    Raises UsageError for bad options or a target that is a plain store dir; LockHeldError (exit 11)
    when another adstore load or switch runs on a target; NotFoundError for a missing dataset;
    AdstoreExtractError for a row without its key; DatasetError for a malformed file, or one that changed
    (size, mtime or inode) while it was read; EmptyDatasetError (exit 1) for a dataset without rows unless
    ``opts.allow_empty``; MissingDependencyError (13) for Parquet without pyarrow; DiskFullError (exit 1)
    when the disk fills (no new version is made).

    With ``spark`` the stores are built by a Spark job (statectl.spark) and ingested; its SST files stay
    beside the stores until the versions are switched to, so a load interrupted in the ingest re-runs from
    them; MissingDependencyError (13) without pyspark or Java."""
    opts.validate()
    progress = progress or NullProgress()
    began = time.monotonic()
    from contextlib import ExitStack

    from statectl.local.datasets import open_dataset
    from statectl.local.versions import StoreLock

    ds = open_dataset(Path(opts.path), opts.fmt)
    dirs = _file_targets(opts)
    for note in _key_notes(ds, opts):
        progress.note(note)
    if spark is not None and opts.rate_limit is not None:
        progress.note(f"--limit-rate {format_rate(opts.rate_limit.rate)} does not apply: Spark reads the dataset")
    try:
        with ExitStack() as locks:
            for d in dirs:
                locks.enter_context(StoreLock(d))
            result = _load_file_locked(opts, ds, dirs, progress, spark, locks)
    except Exception as e:  # RocksDB's own "IO error: No space left on device" is no OSError
        if not isinstance(e, DiskFullError) and is_disk_full(e):
            raise DiskFullError(f"no space left on device loading {ds.path} into {dirs[0].parent}; no new "
                                "version was made", hint=f"free some space in {dirs[0].parent}") from e
        raise
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(progress.notes)
    return result


def _load_file_locked(opts: FileLoadOptions, ds: Any, dirs: list[Path], progress: ProgressReporter,
                      spark: SparkOptions | None, locks: Any) -> FileLoadResult:
    from contextlib import ExitStack

    from statectl.local.datasets import iter_rows
    from statectl.local.versions import VersionBuild, next_number, prune, remove_dead_builds, switch

    rows = records = nbytes = 0
    digests: list[Digest] = []
    with ExitStack() as stack:
        for d in dirs:
            remove_dead_builds(d)
        number = max(next_number(d) for d in dirs)
        builds = [stack.enter_context(VersionBuild(d, at_least=number)) for d in dirs]
        number = max(b.number for b in builds)
        phases: dict[str, float] = {}
        build_dir = None
        if spark is not None:
            built_with = "spark"
            build_dir, rows, digests = _spark_files(builds, ds, opts, spark, progress, phases, locks)
            records = rows
            _check_not_empty(ds, rows, opts)
        else:
            built_with = "put"
            t0 = time.monotonic()
            rows, records, nbytes, written = _put_rows(ds, iter_rows(ds), builds, opts, progress)
            phases["write_s"] = round(time.monotonic() - t0, 3)
            _check_not_empty(ds, rows, opts)
            from statectl.rocks.sst import scan_digest

            t0 = time.monotonic()
            digests = [scan_digest(b.path) if d is None else d for b, d in zip(builds, written)]
            if any(d is None for d in written):
                phases["digest_s"] = round(time.monotonic() - t0, 3)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sealed = []
        for b, digest in zip(builds, digests):
            manifest = VersionManifest(b.number, str(ds.path), rows if len(builds) == 1 else digest.keys, digest,
                                       created, built_with, {"format": ds.fmt})
            b.seal(manifest)
            sealed.append((b, digest))
    result = FileLoadResult(str(ds.path), rows, records, nbytes, number, built_with, 0.0, phases=phases)
    for b, digest in sealed:
        previous = switch(b.store, b.number, verify=None)  # just built and sealed by this load
        gone = prune(b.store, opts.keep_versions)
        result.stores.append(VersionLoad(str(b.store), b.number, rows if len(sealed) == 1 else digest.keys,
                                         digest.keys, digest.as_json()["first_key"], digest.as_json()["last_key"],
                                         digest.as_json()["checksum"], previous, gone))
    if build_dir is not None:
        remove_build(build_dir)
    return result


def _check_not_empty(ds: Any, rows: int, opts: FileLoadOptions) -> None:
    if rows == 0 and not opts.allow_empty:
        raise EmptyDatasetError(f"dataset {ds.path} holds no rows: refusing to make an empty version current",
                                hint="check what wrote it; pass --allow-empty to load an empty store on purpose")


def _put_rows(ds: Any, rows: Iterator[tuple[Path, int, dict[str, Any]]], builds: list[Any], opts: FileLoadOptions,
              progress: ProgressReporter) -> tuple[int, int, int, list[Digest | None]]:
    """Write every row into its build's store (one store, or the one Kafka's partitioner picks for its
    key), in WriteBatches of ``batch_rows``; return (rows, records, bytes, digests).

    A store's digest is computed from its batches as they are written, and is exact, when its keys come
    strictly ascending (a dataset sorted by key: no key can be written twice, and file rows never delete).
    Otherwise a key may have been overwritten, and knowing which (to take its first value out of the
    checksum) needs a memory of every key written: that store's digest is None and the caller reads the
    finished store instead (statectl.rocks.sst.scan_digest)."""
    from statectl.rocks.writer import StoreWriter

    writers = [StoreWriter(b.path) for b in builds]
    pending: list[list[tuple[bytes, bytes]]] = [[] for _ in builds]
    digests = [_SortedDigest() for _ in builds]
    subject = f"loading {ds.path}"
    read = _ReadTally(progress, subject, opts.rate_limit, opts.batch_rows)
    ok = False
    progress.start(subject, 0, len(ds.files))
    current_file = None
    try:
        for f, i, row in rows:
            if f is not current_file:
                if current_file is not None:
                    progress.file_done()
                current_file = f
            try:
                key, value = opts.spec.row_entry(row)
            except ExtractError as e:
                raise AdstoreExtractError(f"{f} row {i}: {e}", hint="fix the dataset or --key-field") from None
            k = 0 if len(builds) == 1 else partition_of(key, len(builds))
            pending[k].append((key, value))
            read.add(len(key) + len(value))
            if len(pending[k]) >= opts.batch_rows:
                writers[k].apply(pending[k])
                digests[k].add(pending[k])
                pending[k] = []
        read.flush()
        for k, w in enumerate(writers):
            if pending[k]:
                w.apply(pending[k])
                digests[k].add(pending[k])
        if current_file is not None:
            progress.file_done()
        ok = True
    finally:
        progress.stop()
        for w in writers:
            w.close(flush=ok)
    return read.rows, read.rows, read.bytes, [d.digest for d in digests]


class _ReadTally:
    """The rows read so far and their bytes (keys and values): the bytes taken from the rate limit every
    RATE_STEP, and shown every ``step`` rows (the bar's bytes, the rows as the phase's status), so that
    a load's progress moves as its rows are read."""

    def __init__(self, progress: ProgressReporter, subject: str, rate_limit: RateLimit | None, step: int):
        self.progress, self.subject, self.rate_limit, self.step = progress, subject, rate_limit, step
        self.rows = self.bytes = 0
        self._paid = self._shown_rows = self._shown_bytes = 0

    def add(self, nbytes: int) -> None:
        self.rows += 1
        self.bytes += nbytes
        if self.rate_limit is not None and self.bytes - self._paid >= RATE_STEP:
            self.rate_limit.take(self.bytes - self._paid)
            self._paid = self.bytes
        if self.rows - self._shown_rows >= self.step:
            self._show()

    def flush(self) -> None:
        """Pay for and show what is left (the end of the dataset)."""
        if self.rate_limit is not None:
            self.rate_limit.take(self.bytes - self._paid)
            self._paid = self.bytes
        self._show()

    def _show(self) -> None:
        self.progress.advance(self.bytes - self._shown_bytes)
        self.progress.status(self.subject, rows=self.rows)
        self._shown_rows, self._shown_bytes = self.rows, self.bytes


class _SortedDigest:
    """The Digest of a store's puts while their keys come strictly ascending; ``digest`` None from the
    first key that does not (see :func:`_put_rows`)."""

    def __init__(self) -> None:
        self.digest: Digest | None = Digest()
        self._last: bytes | None = None

    def add(self, batch: list[tuple[bytes, bytes]]) -> None:
        import operator
        from itertools import islice

        if self.digest is None or not batch:
            return
        keys = [e[0] for e in batch]
        ascending = self._last is None or keys[0] > self._last
        if not (ascending and all(map(operator.lt, keys, islice(keys, 1, None)))):
            self.digest = None
            return
        self.digest.add_sorted(batch)
        self._last = keys[-1]


def _spark_files(builds: list[Any], ds: Any, opts: FileLoadOptions, sp: SparkOptions, progress: ProgressReporter,
                 phases: dict[str, float], locks: Any) -> tuple[Path, int, list[Digest]]:
    """Build the versions' stores on Spark and ingest them; return (the build's dir, rows, digests).
    DatasetError (and the build dir removed) when a file of the dataset changed while Spark read it."""
    from statectl.local.datasets import check_unchanged, stamps
    from statectl.rocks.sst import ingest_into_new_store
    from statectl.spark.submit import BuildSpec, run_build

    spec = BuildSpec("files", opts.spec, layout="partitioned" if opts.partitions else "broadcast",
                     partitions_out=opts.partitions, staging=sp.staging, path=str(Path(ds.path).absolute()),
                     fmt=ds.fmt, files=tuple(str(Path(f).absolute()) for f in ds.files))
    build_dir = builds[0].store.parent / f"{BUILD_DIR_PREFIX}{spec.spec_hash()[:16]}"
    remove_old_builds(build_dir)
    locks.enter_context(BuildLock(build_dir))
    before = stamps(ds)
    t0 = time.monotonic()
    manifest = run_build(spec, build_dir, master=sp.master, conf=sp.conf, progress=progress, s3=sp.s3)
    phases["build_s"] = round(time.monotonic() - t0, 3)
    if manifest.spark_ran and manifest.phases:  # the driver's; the rest is the JVM's start and exit
        phases.update({f"spark_{k}": v for k, v in manifest.phases.items()})
    try:
        check_unchanged(ds, before)
    except StatectlError:
        remove_build(build_dir)  # built from files that are no longer there as they were
        raise
    if manifest.path == "jvm":
        progress.note("the Spark job made the entries from Arrow batches, not row by row (a plain key column and "
                      "value column: cast in the JVM; JSON lines parsed by pyarrow)")
    t0 = time.monotonic()
    for k, b in enumerate(builds):
        failpoints.hit("adstore-ingest")
        ingest_into_new_store(b.path, manifest.paths(None if opts.partitions is None else k))
    phases["ingest_s"] = round(time.monotonic() - t0, 3)
    return build_dir, manifest.rows, [manifest.store(None if opts.partitions is None else k).digest
                                      for k in range(len(builds))]


