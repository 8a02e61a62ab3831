"""Download files from a BlobStore in parallel, large blobs as several ranged GETs, each byte written at
its place (a file fetched whole: past the page cache where the filesystem allows, _direct) and CRC-checked
as it streams (transfer.sink.CrcSink); each file fsynced as it completes.

Memory stays bounded by parallelism x one read buffer, whatever the file sizes. On the first failure
every other transfer is cancelled and the error is raised; the caller owns cleanup of what was written
(local.staged.StagedStore does it)."""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.errors import (
    BlobNotFoundError,
    ChecksumMismatchError,
    CorruptSnapshotError,
    DiskFullError,
    StatectlError,
    command,
)
from statectl.parallel import Cancelled, run_parallel
from statectl.progress import ProgressReporter
from statectl.ratelimit import RateLimit
from statectl.snapshot.crc import combine_all
from statectl.snapshot.model import FileIndex
from statectl.transfer.sink import DIRECT_BUF, O_DIRECT, CrcSink

READ_BUF = 1024 * 1024


@dataclass
class DownloadItem:
    """Download ``index`` into ``dest`` (created or truncated) as relative path ``rel`` of the restore."""

    rel: str
    dest: Path
    index: FileIndex


def blob_ranges(index: FileIndex, what: str) -> list[tuple[str, int, int]]:
    """(blob id, file offset, length) for each blob of a file, validated against its size.

    Raises CorruptSnapshotError when offsets do not tile the file exactly.
    """
    size = index.size
    blobs = sorted(index.blobs, key=lambda b: b.offset)
    if not blobs:
        if size:
            raise CorruptSnapshotError(f"{what}: index lists no blobs for a {size}-byte file")
        return []
    if blobs[0].offset != 0:
        raise CorruptSnapshotError(f"{what}: first blob starts at offset {blobs[0].offset}, not 0")
    out = []
    for i, b in enumerate(blobs):
        end = blobs[i + 1].offset if i + 1 < len(blobs) else size
        if end < b.offset or (end == b.offset and size):
            raise CorruptSnapshotError(f"{what}: blob offsets overlap or exceed the file size")
        out.append((b.blob_id, b.offset, end - b.offset))
    return out


# The ranges per download slot a large file is split into (range_size_for). Connections do not share the
# bandwidth evenly: with one whole 64 MiB file per slot, the slowest connection of a 512 MiB restore finished
# up to 0.7 s after the first, alone; with ranges a quarter of a slot's share, the fast slots take the last
# ones. A file of several ranges is also preallocated, which spares the kernel the block allocation of
# each write (a third of the restore's system time there).
RANGES_PER_SLOT = 4


def range_size_for(range_size: int, parallelism: int, total: int) -> int:
    """The size of the ranged GETs that download ``total`` bytes in ``parallelism`` slots: ``range_size`` at
    least, and at least a RANGES_PER_SLOT-th of an even share of the total per slot. Smaller files are
    fetched whole: every GET costs a request, and a file of several ranges a size check before it is
    preallocated."""
    return max(range_size, -(-total // (max(1, parallelism) * RANGES_PER_SLOT)))


def download_files(blobstore: BlobStore, items: list[DownloadItem], *, parallelism: int, range_size: int,
                   progress: ProgressReporter, limit: RateLimit | None = None) -> int:
    """Download files in parallel (blobs larger than ``range_size`` as several ranged GETs: pass
    range_size_for's), verifying size and CRC32, then
    setting permission bits and fsyncing each file as it completes. Returns bytes downloaded. Making
    their directories durable is the caller's. ``limit``: the bucket every byte received is taken from.

    Raises ChecksumMismatchError (CRC or size differs), CorruptSnapshotError (a blob is missing), DiskFullError. Files
    already written are left for the caller to remove.
    """
    tasks: list[tuple[int, Callable[[threading.Event], None]]] = []
    states = []
    for item in items:
        ranges = blob_ranges(item.index, f"file {item.rel}")
        state = _FileState(item, len(ranges))
        states.append(state)
        if not ranges:  # created and sealed (its fsync) in the pool with the others, not before they start
            tasks.append((0, _empty_task(state, progress)))
            continue
        seg_no = 0
        for blob_id, file_offset, blob_len in ranges:
            starts = list(range(0, blob_len, range_size)) or [0]
            for j, start in enumerate(starts):
                last = j == len(starts) - 1
                length = blob_len - start if last else range_size
                tasks.append((length, _download_task(blobstore, state, seg_no, blob_id, file_offset, start, length,
                                                     last, progress, limit)))
                seg_no += 1
        state.segments = seg_no
        # A file of several segments exists before they start, in any order; a one-segment file is created
        # by its own download, in the pool. Only a file of several ranges (whose blob sizes the caller
        # checked: check_blobs) is preallocated: its ranges land in parallel. A one-range file is written in
        # order, and an unchecked size claim must not reserve disk it will never fill.
        if seg_no > 1:
            _create(item.dest, item.index.size if item.index.size > range_size else 0)
    total = sum(i.index.size for i in items)
    progress.start("downloading", total, len(items))
    # Longest first: the last transfers to start are then the short ones, and the slots finish together
    # instead of one large file running on alone at the end.
    tasks.sort(key=lambda t: -t[0])
    try:
        run_parallel([task for _, task in tasks], parallelism)
    finally:
        progress.stop()
    for state in states:
        if not state.finished:
            raise StatectlError(f"internal error: {state.item.rel} was not completed")
    return total


def _open_new(dest: Path, flags: int = os.O_CREAT | os.O_TRUNC) -> int:
    """``dest`` created (or truncated) and open for writing; a full disk is a DiskFullError."""
    try:
        return os.open(dest, os.O_WRONLY | flags, 0o600)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"no space left on device for {dest}") from e
        raise


def _open_range(dest: Path, new: bool, direct: bool) -> tuple[int, bool]:
    """``dest`` open for writing a range (created or truncated if ``new``), past the page cache (O_DIRECT) if
    ``direct`` and the filesystem takes it: (fd, whether it is direct)."""
    flags = os.O_CREAT | os.O_TRUNC if new else 0
    if direct and O_DIRECT:
        try:
            return _open_new(dest, flags | O_DIRECT), True
        except OSError as e:
            if e.errno != errno.EINVAL:  # EINVAL: a filesystem without O_DIRECT
                raise
    return _open_new(dest, flags), False


def _create(dest: Path, size: int) -> None:
    """Create (or truncate) ``dest``, preallocating ``size`` bytes where the filesystem can."""
    fd = _open_new(dest)
    try:
        if size:
            os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"no space left on device for {dest} ({size} bytes)") from e
        # filesystems without fallocate: the writes themselves will report ENOSPC. Where it works it is
        # also faster: parallel ranged writes into a sparse file fragment the allocation, and the fsync
        # then pays for it (measured: 20 % of a 1 GiB restore).
    finally:
        os.close(fd)


@dataclass
class _FileState:
    item: DownloadItem
    segments: int
    crcs: dict[int, tuple[int, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: bool = False

    def finish_empty(self) -> None:
        self._verify_and_seal(0)

    def segment_done(self, seg_no: int, crc: int, length: int) -> None:
        with self.lock:
            self.crcs[seg_no] = (crc, length)
            complete = len(self.crcs) == self.segments
        if complete:
            crc_all = combine_all([self.crcs[i] for i in range(self.segments)])
            self._verify_and_seal(crc_all)

    def _verify_and_seal(self, crc: int) -> None:
        idx = self.item.index
        if crc != idx.checksum:
            raise ChecksumMismatchError(
                f"CRC mismatch for {self.item.rel}: index says {idx.checksum}, downloaded bytes give {crc}",
                hint="the snapshot's blobs are damaged; restore an older snapshot or run 'snapshots verify --download'")
        fd = os.open(self.item.dest, os.O_WRONLY)
        try:
            if os.fstat(fd).st_size != idx.size:
                raise ChecksumMismatchError(f"size mismatch for {self.item.rel}")
            os.fchmod(fd, idx.file_metadata.mode)
            # Durable here, in the worker that completed it: only this file's pages are flushed, while
            # the other downloads go on (a filesystem-wide sync would also flush what other processes wrote).
            os.fsync(fd)
        finally:
            os.close(fd)
        self.finished = True


def _direct(segments: int, length: int) -> bool:
    """Whether a file is written past the page cache (O_DIRECT): one fetched whole, of a staging buffer at
    least. A restore writes bytes it does not read back; past the cache, the kernel neither copies them into
    cache pages nor flushes them at the fsync that follows each file while its thread waits (on the
    benchmark's VM that copy was a third to a half of a restore's CPU, more under memory pressure), and the
    pages other processes cache stay. A file of several ranges is preallocated and handed to the writeback
    as it lands (CrcSink), which takes most of that cost already: there the copy into an aligned buffer
    that a direct write needs saved nothing at low load. Files under a MiB (MANIFEST, OPTIONS) go through
    the cache."""
    return segments == 1 and length >= DIRECT_BUF


def _empty_task(state: _FileState, progress: ProgressReporter):
    def run(cancel: threading.Event) -> None:
        if cancel.is_set():
            raise Cancelled()
        _create(state.item.dest, 0)
        state.finish_empty()
        progress.file_done()

    return run


def _download_task(blobstore: BlobStore, state: _FileState, seg_no: int, blob_id: str, file_offset: int,
                   start: int, length: int, last: bool, progress: ProgressReporter, limit: RateLimit | None):
    def run(cancel: threading.Event) -> None:
        if cancel.is_set():
            raise Cancelled()
        what = f"blob {blob_id} of {state.item.rel}"
        fd, direct = _open_range(state.item.dest, state.segments == 1, _direct(state.segments, length))
        try:
            writer = CrcSink(progress, cancel=cancel, fd=fd, file_offset=file_offset + start, limit=length, what=what,
                             allow_more=not last, rate_limit=limit, flush_tail=state.segments > 1, direct=direct)
            # The blob's last range is requested open-ended, so a blob longer than the index says shows.
            try:
                failpoints.hit("during-download")
                blobstore.get(blob_id, writer, start=start, length=None if last else length)
                writer.finish()
            except BlobNotFoundError:
                # The snapshot exists but is damaged: not "no such snapshot" (exit 10).
                raise CorruptSnapshotError(f"{what} is missing from {blobstore.url}",
                                           hint=("run ", command("snapshots verify"),
                                                 " to list every missing blob")) from None
        finally:
            os.close(fd)
        if writer.written != length:
            raise ChecksumMismatchError(f"{what} is shorter than the index says ({writer.written} of {length} bytes)")
        state.segment_done(seg_no, writer.crc, length)
        if state.finished:
            progress.file_done()

    return run
