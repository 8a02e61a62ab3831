"""Check blobs without downloading them: each exists and has the size an index says (a stat per blob,
in parallel); :func:`require_blobs` raises for the first that does not."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from statectl.blobstore.base import BlobStore
from statectl.errors import BlobNotFoundError, ChecksumMismatchError, CorruptSnapshotError, command
from statectl.parallel import Cancelled, run_parallel
from statectl.snapshot.model import FileIndex
from statectl.transfer.download import blob_ranges


@dataclass(frozen=True)
class BlobProblem:
    """A blob of a snapshot that is missing, or whose size is not what the index says."""

    rel: str
    blob_id: str
    missing: bool
    reason: str


def check_blobs(blobstore: BlobStore, files: list[tuple[str, FileIndex]], parallelism: int) -> list[BlobProblem]:
    """Stat every blob of ``files`` (rel path, FileIndex) in parallel and return the missing ones and those
    whose size differs from the index (empty: all there). Reads only. Raises CorruptSnapshotError when a
    file's blob offsets do not tile it (blob_ranges), and the blob store's errors."""
    problems: list[BlobProblem] = []
    lock = threading.Lock()

    def task(rel: str, blob_id: str, length: int) -> Callable[[threading.Event], None]:
        def run(cancel: threading.Event) -> None:
            if cancel.is_set():
                raise Cancelled()
            try:
                size = blobstore.stat(blob_id).size
            except BlobNotFoundError:
                problem = BlobProblem(rel, blob_id, True, "blob not found")
            else:
                if size == length:
                    return
                problem = BlobProblem(rel, blob_id, False, f"blob has {size} bytes, the index says {length}")
            with lock:
                problems.append(problem)
        return run

    tasks = [task(rel, blob_id, length) for rel, fi in files for blob_id, _, length in blob_ranges(fi, f"file {rel}")]
    run_parallel(tasks, parallelism)
    return sorted(problems, key=lambda p: (p.rel, p.blob_id))


def require_blobs(blobstore: BlobStore, files: list[tuple[str, FileIndex]], parallelism: int,
                  *, larger_than: int = 0) -> None:
    """Check, before anything is written, that the blobs tile every file of ``files`` as the index says and
    that the blobs of every file larger than ``larger_than`` bytes exist with their sizes (check_blobs).
    Raises CorruptSnapshotError for the first missing blob, ChecksumMismatchError for one of another size
    (saying what to do), CorruptSnapshotError when a file's blob offsets do not tile it. Reads only."""
    for rel, fi in files:
        blob_ranges(fi, f"file {rel}")
    problems = check_blobs(blobstore, [(rel, fi) for rel, fi in files if fi.size > larger_than], parallelism)
    for p in problems:
        if p.missing:
            raise CorruptSnapshotError(f"blob {p.blob_id} of {p.rel} is missing from {blobstore.url}",
                                       hint=("run ", command("snapshots verify"), " to list every missing blob"))
        raise ChecksumMismatchError(f"blob {p.blob_id} of {p.rel}: {p.reason}",
                                    hint="the snapshot's index or blobs are damaged; restore an older snapshot "
                                         "with --snapshot")
