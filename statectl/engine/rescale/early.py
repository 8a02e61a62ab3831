"""What a hash-path rescale does ahead of its steps. Its work dir and Spark job, started before the blob store
is opened and the rescale planned (:class:`StartedAhead`): the job's JVM and SparkContext start while statectl
plans, and its driver waits for the job file (statectl.spark.submit.start_rescale_build). The target files
uploaded while the Spark job still runs (:class:`EarlyUploads`): each SST file
the executors finish in the build dir is uploaded (TTL'd, backup's upload) as soon as it is there, so that the
upload overlaps the job's later tasks instead of following them. Ingesting a file into its target's staged
store hard-links it unchanged (statectl.rocks.sst.ingest_into_new_store), so the target's upload
(statectl.engine.rescale.upload) takes the blobs of a file of the same inode, size and mtime as already up;
any other file it uploads itself. What is uploaded here and never committed carries its TTL: gc reclaims it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from statectl.blobstore.base import BlobStore
from statectl.engine.rescale.options import RescaleOptions
from statectl.progress import NullProgress
from statectl.snapshot.model import FileIndex

_POLL_S = 0.05


class StartedAhead:
    """While entered, a hash-path rescale's work dir (build.WorkDir) and its Spark job started in it (``work``,
    ``started``; both None for a dry run or a key-group rescale, ``started`` None when the job cannot start
    ahead: build_targets starts it). The job not taken by then (launch.Started.take, by the build that writes its
    job file) is killed (:meth:`cancel`) when the block ends, before the work dir goes: a plan that refuses, or
    finds no Spark job to run, leaves nothing."""

    def __init__(self, opts: RescaleOptions):
        self.opts = opts
        self.work: Path | None = None
        self.started: Any = None
        self._dir: Any = None

    def __enter__(self) -> "StartedAhead":
        from statectl.engine.rescale.build import WorkDir
        from statectl.spark.submit import start_rescale_build

        opts = self.opts
        if opts.dry_run or opts.key_groups is not None:
            return self
        self._dir = WorkDir(opts.work_dir)
        self.work = self._dir.__enter__()
        try:
            self.started = start_rescale_build(self.work / "build", master=opts.master, conf=opts.conf, s3=opts.s3)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.cancel()
        finally:
            if self._dir is not None:
                self._dir.__exit__()
                self._dir = None

    def cancel(self) -> None:
        """Kill the started job unless it was taken; idempotent."""
        if self.started is not None:
            self.started.cancel()


class EarlyUploads:
    """Uploads every finished SST file (``store-*.sst``) that appears in ``out_dir`` while it is entered: a thread
    of its own looks for them, and each is uploaded as soon as it is seen, up to --parallelism at once (the last
    files of the job then go up together, beside the targets' ingest). :meth:`take` waits for those and gives
    the uploads a target store's files can reuse."""

    def __init__(self, blobstore: BlobStore, opts: RescaleOptions, out_dir: Path):
        from concurrent.futures import ThreadPoolExecutor

        self.blobstore, self.opts, self.out_dir = blobstore, opts, Path(out_dir)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statectl-early-upload", daemon=True)
        self._pool = ThreadPoolExecutor(max(1, opts.parallelism), thread_name_prefix="statectl-early-upload")
        self._done: dict[tuple[int, int], tuple[tuple[int, int], FileIndex]] = {}  # (dev, ino) -> ((size, mtime), index)
        self._seen: set[tuple[int, int]] = set()

    def __enter__(self) -> "EarlyUploads":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=exc[0] is not None if exc else False)

    def take(self, files: list[Any]) -> dict[int, FileIndex]:
        """Stop looking, wait for the uploads begun, and return, by position in ``files``
        (statectl.snapshot.diff.LocalFiles), the index of each file whose blobs are up and checked: the same inode,
        size and mtime as a file uploaded here."""
        self.__exit__()
        out = {}
        for i, lf in enumerate(files):
            try:
                st = os.stat(lf.path)
            except OSError:
                continue
            got = self._done.get((st.st_dev, st.st_ino))
            if got is not None and got[0] == (lf.size, lf.mtime_ms) == (st.st_size, st.st_mtime_ns // 1_000_000):
                fi = got[1]
                out[i] = FileIndex(lf.name, fi.blobs, lf.metadata, fi.checksum)
        return out

    def _run(self) -> None:
        while not self._stop.wait(_POLL_S):
            for found in self._new_files():
                self._pool.submit(self._upload, [found])

    def _new_files(self) -> list[tuple[Any, tuple[int, int]]]:
        """The finished SST files in out_dir not uploaded yet."""
        from statectl.snapshot.diff import LocalFile
        from statectl.spark.submit import SST_PREFIX

        out = []
        try:
            entries = list(os.scandir(self.out_dir))
        except OSError:
            return []  # not made yet
        for e in entries:
            if not (e.name.startswith(SST_PREFIX) and e.name.endswith(".sst")):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in self._seen:
                self._seen.add((st.st_dev, st.st_ino))
                out.append((LocalFile.from_stat(Path(e.path), st), (st.st_dev, st.st_ino)))
        return out

    def _upload(self, files: list[tuple[Any, tuple[int, int]]]) -> None:
        """Upload ``files`` (LocalFiles with their (dev, inode) when listed) and check their blobs as the targets'
        upload checks its own (statectl.transfer.verify.check_blobs), while the job runs; when either fails they
        are left to the targets' own upload, which reports what fails again."""
        from statectl.transfer.upload import upload_files
        from statectl.transfer.verify import check_blobs

        opts = self.opts
        try:
            done = upload_files(self.blobstore, [lf for lf, _ in files], chunk_size=opts.chunk_size,
                                parallelism=1, ttl_seconds=opts.ttl_seconds, progress=NullProgress())
            if check_blobs(self.blobstore, [(fi.file_name, fi) for fi in done], 1):
                return
        except Exception:  # noqa: BLE001 - only a head start (a task attempt run again replaces its files)
            return
        for (lf, inode), fi in zip(files, done):
            self._done[inode] = ((lf.size, lf.mtime_ms), fi)
