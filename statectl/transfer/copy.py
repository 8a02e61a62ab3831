"""Copying blobs to new TTL'd blobs: server-side where two stores share a copy domain (S3 CopyObject /
UploadPartCopy, a file copy on ``file://``), else streamed through this host (snapshots copy, and the
files a key-group rescale duplicates into its targets)."""

from __future__ import annotations

import tempfile
import threading
from typing import Any

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.errors import BlobNotFoundError, CorruptSnapshotError, command
from statectl.parallel import Cancelled, run_parallel
from statectl.progress import ProgressReporter
from statectl.ratelimit import RateLimit

# A streamed blob is buffered in memory up to this size, then in a temporary file (seekable: a retried
# put rewinds it), so memory stays bounded by parallelism x this whatever the blob sizes.
SPOOL_BYTES = 8 * 1024 * 1024


def copy_blobs(jobs: list[tuple[str, int]], source: BlobStore, target: BlobStore, server_side: bool, *,
               ttl_seconds: int, parallelism: int, progress: ProgressReporter,
               limit: RateLimit | None = None, cancel: threading.Event | None = None,
               check: bool = False) -> list[str]:
    """Copy each (blob id, length) to a new TTL'd blob of ``target``; the new ids in order. A missing
    source blob is CorruptSnapshotError: the snapshot exists but is damaged. ``limit``: the bucket a
    streamed blob's bytes are taken from, once each, as they come in from ``source`` (a server-side copy
    moves none through this host and takes nothing). ``cancel``: set by a caller running this in the
    background, it stops the copies (Cancelled). ``check``: each copy is stat'ed as it lands, a
    CorruptSnapshotError unless it is there with the length asked. The largest blobs start first: the last
    to finish is a small one."""
    half = len(jobs) // 2

    def task(i: int, blob_id: str, length: int):
        def run(cancel: threading.Event) -> str:
            if i == half:
                failpoints.hit("during-copy")  # half the blobs are (being) copied: a kill leaves TTL'd copies
            if cancel.is_set():
                raise Cancelled()
            try:
                if server_side:
                    new = target.copy(blob_id, ttl_seconds=ttl_seconds, source=source, size=length)
                else:
                    new = _stream(blob_id, length, source, target, ttl_seconds, limit, cancel)
            except BlobNotFoundError:
                raise CorruptSnapshotError(f"blob {blob_id} of the snapshot is missing from {source.url}",
                                           hint=("run ", command("snapshots verify"), " on the source to list "
                                                 "every missing blob; nothing was committed")) from None
            if check:
                _check_copy(target, blob_id, new, length)
            progress.advance(length)
            progress.file_done()
            return new

        return run

    order = sorted(range(len(jobs)), key=lambda k: -jobs[k][1])
    progress.start("copying", sum(n for _, n in jobs), len(jobs))
    try:
        new_ids = run_parallel([task(i, *jobs[k]) for i, k in enumerate(order)], parallelism, cancel)
    finally:
        progress.stop()
    out = [""] * len(jobs)
    for k, new in zip(order, new_ids):
        out[k] = new
    return out


def _check_copy(target: BlobStore, blob_id: str, new: str, length: int) -> None:
    try:
        size: int | None = target.stat(new).size
    except BlobNotFoundError:
        size = None
    if size != length:
        raise CorruptSnapshotError(f"the copy {new} of blob {blob_id} in {target.url} "
                                   + ("is missing" if size is None else f"has {size} bytes, not {length}"),
                                   hint="nothing was committed; run it again")


def _stream(blob_id: str, length: int, source: BlobStore, target: BlobStore, ttl_seconds: int,
            limit: RateLimit | None, cancel: threading.Event) -> str:
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as buf:
        n = source.get(blob_id, buf if limit is None else _Metered(buf, limit, cancel))
        if n != length:
            raise CorruptSnapshotError(f"blob {blob_id} has {n} bytes, its snapshot's index says {length}")
        buf.seek(0)
        return target.put(buf, size=n, ttl_seconds=ttl_seconds)


class _Metered:
    """A download's destination that takes each byte written from ``limit`` before it passes it on to
    ``dst`` (tell and seek are ``dst``'s: a retried GET rewinds it)."""

    def __init__(self, dst: Any, limit: RateLimit, cancel: threading.Event):
        self._dst = dst
        self._limit = limit
        self._cancel = cancel

    def write(self, data: bytes) -> int:
        self._limit.take(len(data), self._cancel)
        return self._dst.write(data)

    def tell(self) -> int:
        return self._dst.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._dst.seek(pos, whence)

    def seekable(self) -> bool:
        return True
