"""Upload local files to a BlobStore in parallel, in chunks, CRC32 computed as the bytes stream out;
returns the FileIndex of each file (its blobs, metadata and checksum)."""

from __future__ import annotations

import errno
import os
import threading
from typing import Callable

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.errors import StatectlError
from statectl.formats.java import JAVA_INT_MAX
from statectl.parallel import Cancelled, run_parallel
from statectl.progress import ProgressReporter
from statectl.ratelimit import RateLimit
from statectl.snapshot.crc import combine_all, crc32
from statectl.snapshot.diff import LocalFile
from statectl.snapshot.model import (
    FileBlob,
    FileIndex,
)
from statectl.transfer.download import READ_BUF


class _ChunkReader:
    """Reads ``length`` bytes of a file from ``offset``, keeping the CRC32 of what was read.

    Each byte enters the CRC once, the first time it is read: the reader may be rewound to any position
    it has already reached (a retry rewinds to the start; botocore rewinds each multipart part to the
    part's start after hashing it) and re-reads of the same, immutable bytes leave the CRC as it is.
    Seeking past the furthest byte read would leave a gap in the CRC and is refused.

    With ``limit``, every byte read (re-reads too: a retry sends them again) is taken from the bucket
    before it is handed on, in reads of at most READ_BUF.
    """

    def __init__(self, f, offset: int, length: int, progress: ProgressReporter, cancel: threading.Event,
                 limit: RateLimit | None = None):
        self._f = f
        self._offset = offset
        self._length = length
        self._pos = 0
        self.crc = 0
        self._progress = progress
        self._cancel = cancel
        self._reached = 0  # bytes [0, _reached) are in the CRC and were reported to progress
        self._limit = limit
        self._max_read = READ_BUF if limit is not None else READ_BUF * 8
        f.seek(offset)

    def read(self, n: int = -1) -> bytes:
        if self._cancel.is_set():
            raise Cancelled()
        left = self._length - self._pos
        n = left if n is None or n < 0 or n > left else n
        data = self._f.read(min(n, self._max_read))
        if data:
            if self._limit is not None:
                self._limit.take(len(data), self._cancel)
            end = self._pos + len(data)
            if end > self._reached:
                new = data if self._pos == self._reached else memoryview(data)[self._reached - self._pos:]
                self.crc = crc32(new, self.crc)
                self._progress.advance(end - self._reached)
                self._reached = end
            self._pos = end
        return data

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        target = {0: pos, 1: self._pos + pos, 2: self._length + pos}[whence]
        if target < 0 or target > self._reached:
            raise OSError(errno.ESPIPE, "chunk reader can only seek back to bytes it has read")
        self._f.seek(self._offset + target)
        self._pos = target
        return target


def chunk_spans(size: int, chunk_size: int) -> list[tuple[int, int]]:
    """(offset, length) of each chunk a file of ``size`` bytes is uploaded in: ``chunk_size`` bytes each,
    except that no chunk starts past 2**31-1. Samza's FileBlob reads its offset as a Java int (its Jackson
    refuses a larger one), so the chunk that would start beyond it takes the rest of the file: a file over
    2 GiB ends in one large blob, which a blob store's multipart upload takes and ranged GETs still
    download in parallel."""
    spans: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        length = min(chunk_size, size - offset)
        if offset + length < size and offset + length > JAVA_INT_MAX:
            length = size - offset
        spans.append((offset, length))
        offset += length
    return spans


def upload_files(blobstore: BlobStore, files: list[LocalFile], *, chunk_size: int, parallelism: int,
                 ttl_seconds: int | None, progress: ProgressReporter,
                 limit: RateLimit | None = None) -> list[FileIndex]:
    """Upload files in chunks (:func:`chunk_spans`), in parallel; return their FileIndexes. ``limit``: the
    bucket every byte sent is taken from (None: as fast as it goes).

    Every blob carries ``ttl_seconds``. A file whose size or mtime changes while it is read raises
    StatectlError: checkpoint files are immutable, so a change means someone is writing into it.
    """
    if chunk_size <= 0:
        raise StatectlError("chunk size must be positive")
    tasks: list[Callable[[threading.Event], tuple[str, int, int]]] = []
    owners: list[tuple[int, int, int]] = []  # (file index, chunk offset, chunk length) per task
    for i, lf in enumerate(files):
        for offset, length in chunk_spans(lf.size, chunk_size):
            tasks.append(_upload_task(blobstore, lf, offset, length, ttl_seconds, progress, limit))
            owners.append((i, offset, length))
    progress.start("uploading", sum(lf.size for lf in files), len(files))
    try:
        results = run_parallel(tasks, parallelism)
    finally:
        progress.stop()
    chunks: dict[int, list[tuple[int, str, int, int]]] = {i: [] for i in range(len(files))}
    for (i, offset, length), (blob_id, crc, n) in zip(owners, results):
        chunks[i].append((offset, blob_id, crc, n))
    out = []
    for i, lf in enumerate(files):
        st = os.stat(lf.path)
        if st.st_size != lf.size or st.st_mtime_ns // 1_000_000 != lf.mtime_ms:
            raise StatectlError(f"{lf.path} changed while it was being backed up",
                                hint="back up a checkpoint dir, which RocksDB never modifies")
        parts = sorted(chunks[i])
        blobs = tuple(FileBlob(blob_id, offset) for offset, blob_id, _, _ in parts)
        crc = combine_all([(c, n) for _, _, c, n in parts])
        out.append(FileIndex(lf.name, blobs, lf.metadata, crc))
    return out


def _upload_task(blobstore: BlobStore, lf: LocalFile, offset: int, length: int, ttl_seconds: int | None,
                 progress: ProgressReporter,
                 limit: RateLimit | None) -> Callable[[threading.Event], tuple[str, int, int]]:
    def run(cancel: threading.Event) -> tuple[str, int, int]:
        if cancel.is_set():
            raise Cancelled()
        with open(lf.path, "rb") as f:
            reader = _ChunkReader(f, offset, length, progress, cancel, limit)
            blob_id = blobstore.put(reader, size=length, ttl_seconds=ttl_seconds)
            failpoints.hit("during-upload")
            if reader.tell() != length:
                raise StatectlError(f"{lf.path} is shorter than when it was listed")
        if offset + length >= lf.size:
            progress.file_done()
        return blob_id, reader.crc, length

    return run
