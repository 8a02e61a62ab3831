"""The Spark side of a rescale: its work dir (WorkDir), the Spark job that re-routes the sources' keys into
each target's SST files, ingested into staged stores (build_targets), and the check of what the job reports
(verify_targets), which refuses targets that do not hold exactly the sources' entries; the executors refuse
any key outside the task the partitioner names."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.engine.rescale.commit import WHAT
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.result import RescaleResult, TargetInfo
from statectl.errors import DiskFullError, StatectlError
from statectl.local.layout import task_dir_name
from statectl.progress import ProgressReporter


class VerificationError(StatectlError):
    """The targets do not hold what the sources held (exit 1); nothing was committed."""


WORK_PREFIX = "statectl-rescale-"
WORK_LOCK = "RESCALE.lock"


class WorkDir:
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


def file_bytes(snapshots: list[dict[str, Any]], targets: int) -> int:
    """The size at which the executors roll a target's file over: about a target's share of the sources' bytes
    over max(8, sources), within 16-256 MiB. A file closed before its task ends is uploaded while the job runs
    (EarlyUploads) instead of after it; a target then holds about max(8, sources) files (in L0 until
    compacted, below RocksDB's default slowdown trigger of 20 unless the sources alone are more), and never
    more than one per 16 MiB or fewer than one per 256 MiB."""
    total = sum(int(f["size"]) for s in snapshots for f in s["files"])
    share = total // max(1, targets) // max(8, len(snapshots))
    return max(16 << 20, min(256 << 20, share * 5 // 4))  # a quarter over: a source's share is not exact


def build_targets(opts: RescaleOptions, snapshots: list[dict[str, Any]], blobstore: BlobStore, work: Path,
                  result: RescaleResult, progress: ProgressReporter, started: Any = None) -> tuple[list[Path], Any]:
    """Run the Spark job (``started``: the one started ahead in ``work / "build"``, early.StartedAhead) and ingest
    each target's SST files into a staged store; return the stores and the job's BuildManifest. A target's files
    are one per source (or more, rolled over at max_file_bytes): their key ranges overlap, each key in one file;
    RocksDB's ingestion puts such files in L0 at sequence numbers of their own."""
    from statectl.spark.submit import BuildSpec, run_build

    hashed = opts.key_groups is None
    local = opts.master.startswith("local")
    spec = BuildSpec("snapshots", layout="partitioned", partitions_out=opts.to_tasks, snapshots=tuple(snapshots),
                     source_store=blobstore.url, partitioner=opts.partitioner, staging=opts.staging,
                     partitions_in=opts.from_tasks if hashed else None,
                     source_partitioner=opts.source_partitioner if hashed else None,
                     prefetched=str(work / "sources") if local else None,
                     max_file_bytes=file_bytes(snapshots, opts.to_tasks))
    t0 = time.monotonic()
    prefetch = Prefetch(snapshots, blobstore, work / "sources" if local else None, local_cores(opts.master))
    with StagedTargets(opts.target_tasks, work) as targets:  # made while the job runs
        try:
            try:
                with prefetch:
                    manifest = run_build(spec, work / "build", master=opts.master, conf=opts.conf, progress=progress,
                                         timeout_s=opts.timeout_s, s3=opts.s3, started=started)
            except StatectlError as e:
                _keep_log(e, work / "build")
                raise
            prefetch.discard()  # the executors are done with the copies: they go while the targets are ingested
            result.phases["spark_s"] = round(time.monotonic() - t0, 3)
            result.phases.update({f"spark_{k}": v for k, v in manifest.phases.items()})  # the job's own (BuildManifest)
            by_task = {s["task"]: s for s in manifest.sources}
            for src in result.sources:
                got = by_task.get(src.task)
                if got is None:
                    raise VerificationError(f"the Spark job did not report reading the snapshot of {src.task}")
                src.keys = int(got["keys"])
                result.bytes_read += int(got["bytes_read"])
            result.bytes_written = sum(f.size for f in manifest.files)
            t0 = time.monotonic()
            out = _ingest(opts, manifest, targets)
        finally:
            prefetch.join()  # before the work dir goes
    result.phases["ingest_s"] = round(time.monotonic() - t0, 3)
    return out, manifest


def _ingest(opts: RescaleOptions, manifest: Any, targets: "StagedTargets") -> list[Path]:
    """Each target's files of ``manifest`` ingested into its staged store (``targets``), several targets at once
    (each mostly waits for its files' links and syncs); their paths."""
    from concurrent.futures import ThreadPoolExecutor

    tasks = opts.target_tasks
    with ThreadPoolExecutor(max(1, min(len(tasks), 4)), thread_name_prefix="statectl-ingest") as pool:
        return list(pool.map(lambda k: targets.ingest(k, manifest.paths(k)), range(len(tasks))))


class StagedTargets:
    """While entered, each target's staged store under ``work / "stores"`` (statectl.local.staged.StagedStore)
    holding an empty RocksDB store (statectl.rocks.sst.create_store), made in a thread of their own while the
    Spark job runs: a store's creation syncs a handful of files and dirs (0.05-0.3 s each beside the job's last
    uploads), which the job's end no longer waits for. :meth:`ingest` fills and commits one; the block's end
    removes those not committed. A store not made ahead (its creation failed) is made by :meth:`ingest`, which
    then reports what fails."""

    def __init__(self, tasks: list[str], work: Path):
        import threading

        self.work = work
        self.targets = [work / "stores" / task_dir_name(task) for task in tasks]
        self._made: list[Any] = [None] * len(tasks)
        self._thread = threading.Thread(target=self._make, name="statectl-stores-ahead")

    def __enter__(self) -> "StagedTargets":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join()
        for made in self._made:
            if made is not None:
                made[1].close()
                made[0].abort()
        self._made = [None] * len(self._made)

    def _staged(self, target: Path) -> Any:
        from statectl.local.staged import StagedStore

        def full() -> DiskFullError:
            return DiskFullError(f"no space left on device building {target}", hint=f"free space in {self.work}, "
                                 "or give --work-dir on a larger disk")
        return StagedStore(target, what=WHAT, disk_full=full, sync="dirs")

    def _make(self) -> None:
        from statectl.rocks.sst import create_store

        for k, target in enumerate(self.targets):
            staged = self._staged(target)
            try:
                staged.open()
                self._made[k] = (staged, create_store(staged.path))
            except BaseException:  # noqa: BLE001 - ingest makes it again and reports the error
                staged.abort()
                return

    def ingest(self, k: int, files: list[Path]) -> Path:
        """Ingest ``files`` into target ``k``'s store and commit it; its path."""
        from statectl.rocks.sst import ingest_into_new_store

        self._thread.join()
        failpoints.hit("rescale-ingest")
        made, self._made[k] = self._made[k], None
        if made is None:
            with self._staged(self.targets[k]) as staged:
                ingest_into_new_store(staged.path, files)
                staged.commit()
            return self.targets[k]
        staged, db = made
        try:
            ingest_into_new_store(staged.path, files, db)
            staged.commit()
        except BaseException as e:
            staged.__exit__(type(e), e, e.__traceback__)  # removed; an OSError named after the target
            raise
        return self.targets[k]


def local_cores(master: str) -> int:
    """The tasks a local master runs at once: N of ``local[N]`` (``local``: 1, ``local[*]``: every core), n * c of
    ``local-cluster[n,c,m]``; 2 for anything else."""
    import os
    import re

    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m:
        n = m.group(1)
        return (os.cpu_count() or 2) if n == "*" else int(n or 1)
    m = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,.*\]", master.strip())
    return int(m.group(1)) * int(m.group(2)) if m else 2


class Prefetch:
    """While entered, the source snapshots downloaded into ``into`` (None: nothing) for a local master's
    executors (BuildSpec.prefetched), ``at_once`` at a time (as many as the executors run) in the tasks' order:
    the statectl process does it while the job's JVM starts, which leaves a core idle. Each source is checked
    as the executors check it (statectl.spark.rescale_reader.fetch_snapshot), then marked ready; one that fails
    is marked failed and the executor fetches it itself, which reports the error as without. :meth:`discard`
    removes them once the job is done, in a thread of its own."""

    def __init__(self, snapshots: list[dict[str, Any]], blobstore: BlobStore, into: Path | None, at_once: int = 2):
        self.snapshots, self.blobstore, self.into, self.at_once = snapshots, blobstore, into, at_once
        self._pool: Any = None
        self._removal = Removal()

    def __enter__(self) -> "Prefetch":
        from concurrent.futures import ThreadPoolExecutor

        if self.into is not None:
            self.into.mkdir(parents=True)
            self._pool = ThreadPoolExecutor(max(1, self.at_once), thread_name_prefix="statectl-prefetch")
            for i, source in enumerate(self.snapshots):
                self._pool.submit(self._fetch, i, source)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def discard(self) -> None:
        """Remove the downloaded sources in a thread of their own (:meth:`join` waits for it)."""
        if self.into is not None:
            self._removal.start(self.into)

    def join(self) -> None:
        self._removal.join()

    def _fetch(self, i: int, source: dict[str, Any]) -> None:
        from statectl.spark.rescale_reader import fetch_snapshot

        assert self.into is not None
        try:
            fetch_snapshot(self.blobstore, source, self.into / str(i))
        except Exception:  # noqa: BLE001 - the executor fetches it again and reports the error in the job's words
            (self.into / f"{i}.failed").touch()
            return
        (self.into / f"{i}.ready").touch()


class Removal:
    """Paths removed in a thread of their own, started once (:meth:`start`); :meth:`join` waits for it."""

    def __init__(self) -> None:
        self._thread: Any = None

    def start(self, *paths: Path) -> None:
        import threading

        if self._thread is None:
            self._thread = threading.Thread(target=_remove, args=paths, name="statectl-discard")
            self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


def _remove(*paths: Path) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


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


def verify_targets(opts: RescaleOptions, stores: list[Path], manifest: Any, result: RescaleResult) -> None:
    """Check what the Spark job reports, without reading a key: its writers refused any key outside their
    target (the partitioner, in the executors) and digested what they wrote; the targets' digests must add
    up to the Digest of every entry the readers took from the sources (key count and order-independent
    content hash: statectl.formats.adstore.Digest), and each staged store must hold the entries of the files
    written for it (their count, from the files' table properties). VerificationError naming the first
    problem (and how many more) otherwise."""
    from statectl.formats.adstore import Digest

    t0 = time.monotonic()
    want = manifest.source_digest
    got = Digest()
    problems: list[str] = []
    if want is None:
        problems.append("the Spark job did not report the digest of what it read")
        want = Digest()
    for k, (task, path) in enumerate(zip(opts.target_tasks, stores)):
        wrote = manifest.store(k).digest
        held = _entries(path)
        if held != wrote.keys:
            problems.append(f"target {task} holds {held} keys, the Spark job wrote {wrote.keys}")
        got.merge(wrote)
        if k < len(result.targets):  # the key-group path planned them: these are the keys it rewrote
            result.targets[k].keys = wrote.keys
        else:
            result.targets.append(TargetInfo(task, wrote.keys))
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


def _entries(path: Path) -> int:
    """The entries of the store at ``path`` as its SST files' table properties count them (the staged store
    holds ingested files only: no deletion, no key twice)."""
    from statectl.rocks.store import open_readonly

    db = open_readonly(path)
    try:
        files = db.live_files()
    finally:
        db.close()
    return sum(int(f["num_entries"]) - int(f["num_deletions"]) for f in files)
