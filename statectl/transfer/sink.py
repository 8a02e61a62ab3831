"""The one streaming CRC sink: where a blob's bytes go on their way down, for restore and for verify.

A blob store's ``get`` writes into a file-like object, or reads into the buffer it offers (``recv_buffer``:
the download thread's); :class:`CrcSink` takes those bytes, computes their CRC32 as they pass (never in a
second pass), reports them to the progress reporter, refuses bytes past the length the index promises, and
(for a restore) writes them at their place in the file with pwrite.
``snapshots verify --download`` uses the same object without a file.
"""

from __future__ import annotations

import errno
import os
import threading
from functools import lru_cache

from statectl import failpoints
from statectl.errors import ChecksumMismatchError, DiskFullError
from statectl.parallel import Cancelled
from statectl.progress import ProgressReporter
from statectl.ratelimit import RateLimit
from statectl.snapshot.crc import crc32

WRITEBACK_STEP = 8 * 1024 * 1024
# A range written past the page cache (O_DIRECT) goes out in whole blocks of DIRECT_ALIGN bytes, at aligned
# offsets, from a DIRECT_BUF-byte aligned buffer of the download thread's.
DIRECT_ALIGN = 4096
DIRECT_BUF = 1024 * 1024
O_DIRECT = getattr(os, "O_DIRECT", 0)


class _Buffers(threading.local):
    buf: memoryview | None = None


_buffers = _Buffers()


def _thread_buffer() -> memoryview:
    """This thread's buffer (an anonymous mapping: page-aligned), made on first use: where a direct range is
    staged, and where the bytes of any other range are read before they are written."""
    if _buffers.buf is None:
        import mmap

        _buffers.buf = memoryview(mmap.mmap(-1, DIRECT_BUF))
    return _buffers.buf


def _through_cache(fd: int) -> None:
    """Write through the page cache from now on (O_DIRECT cleared on ``fd``)."""
    import fcntl

    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~O_DIRECT)


@lru_cache(maxsize=1)
def _sync_file_range():
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return fn


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing ``[offset, offset+length)`` of ``fd`` to disk without waiting (Linux
    sync_file_range(SYNC_FILE_RANGE_WRITE); a no-op elsewhere). The fsync that makes a file durable then
    finds most of it written already, instead of flushing the whole file at its end while the network
    idles. Advisory: errors are left for that fsync to report."""
    fn = _sync_file_range()
    if fn is not None and length > 0:
        fn(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE


class CrcSink:
    """A write target for ``BlobStore.get`` that keeps the CRC32 and count of what it was given.

    With ``fd``, bytes are also written at ``file_offset`` + their position with pwrite (ENOSPC/EDQUOT:
    DiskFullError naming ``what``) and handed to the kernel's writeback as they accumulate. With
    ``limit``, more bytes than ``limit`` are a ChecksumMismatchError "longer than the index says", unless
    ``allow_more`` (a range that is not the blob's last: the store sent what was asked, the rest is cut).
    ``cancel`` set: the next write raises Cancelled. ``seek(0)`` (a retried GET) rewinds: the count, the
    CRC and the progress reported start again. With ``rate_limit``, every byte received is taken from the
    bucket before it is written (a slow sink slows the read of the response: TCP holds the sender back).
    ``flush_tail=False``: the bytes after the last full writeback step are left to the fsync that follows
    at once (the range is a whole file), not handed to the writeback first. ``direct``: ``fd`` was opened
    with O_DIRECT and ``file_offset`` is a multiple of DIRECT_ALIGN: bytes are staged in the thread's
    aligned buffer and written a full buffer at a time, past the page cache (no writeback to start);
    ``finish()`` writes what is left. A filesystem that refuses a direct write (EINVAL: alignment rules
    of its own) gets it, and the rest of the range, through the page cache. A blob store may read the bytes
    into ``recv_buffer()`` and hand them over with ``received(n)`` instead of ``write``: the same checks,
    without the copy.
    """

    def __init__(self, progress: ProgressReporter, *, cancel: threading.Event | None = None, fd: int | None = None,
                 file_offset: int = 0, limit: int | None = None, what: str = "blob", allow_more: bool = False,
                 rate_limit: RateLimit | None = None, flush_tail: bool = True, direct: bool = False):
        self._fd = fd
        self._file_offset = file_offset
        self._limit = limit
        self._what = what
        self._cancel = cancel
        self._progress = progress
        self._allow_more = allow_more
        self._rate_limit = rate_limit
        self._flush_tail = flush_tail
        self.written = 0
        self.crc = 0
        self._submitted = 0  # bytes handed to the kernel's writeback already
        self._buf = _thread_buffer() if direct and fd is not None else None
        self._staged = 0  # bytes in the buffer, not yet written
        self._flushed = 0  # bytes written from the buffer

    def write(self, data: bytes) -> int:
        n = self._admit(len(data))
        if n < len(data):
            data = data[:n]
        if self._buf is not None:
            self._stage(data, n)
        elif self._fd is not None:
            self._pwrite(data, n, self._file_offset + self.written)
        self._account(data, n)
        return n

    def recv_buffer(self) -> memoryview:
        """Where the next bytes may be read straight off the network, sparing ``write``'s copy: this thread's
        buffer past what it stages, no longer than the bytes still expected plus one (a blob longer than the
        index says shows). ``received(n)`` then takes its first ``n`` bytes."""
        buf = self._buf if self._buf is not None else _thread_buffer()
        room = DIRECT_BUF - self._staged
        if self._limit is not None:
            room = min(room, max(0, self._limit - self.written) + 1)
        return buf[self._staged:self._staged + room]

    def received(self, n: int) -> None:
        """Take the first ``n`` bytes of the last ``recv_buffer()`` as ``write`` takes its bytes (the CRC, the
        limit, the rate limit, the write at their place)."""
        n = self._admit(n)
        buf = self._buf if self._buf is not None else _thread_buffer()
        view = buf[self._staged:self._staged + n]
        if self._buf is not None:
            self.crc = crc32(view, self.crc)  # before a full buffer is written out and reused
            self._staged += n
            if self._staged == DIRECT_BUF:
                self._write_staged(DIRECT_BUF)
            self._account(None, n)
            return
        if self._fd is not None:
            self._pwrite(view, n, self._file_offset + self.written)
        self._account(view, n)

    def _admit(self, n: int) -> int:
        """How many of ``n`` bytes received to take: the cancel, the rate limit, the limit checked."""
        if self._cancel is not None and self._cancel.is_set():
            raise Cancelled()
        if self._rate_limit is not None:
            self._rate_limit.take(n, self._cancel)
        if self._limit is not None and self.written + n > self._limit:
            if not self._allow_more:
                raise ChecksumMismatchError(f"{self._what} is longer than the index says")
            n = self._limit - self.written  # a range that is not the blob's last: the store sent what we asked
        return n

    def _account(self, data: bytes | memoryview | None, n: int) -> None:
        """``n`` bytes taken (``data``: their CRC is still to add), handed to the writeback as they add up."""
        if data is not None:
            self.crc = crc32(data, self.crc)
        self.written += n
        if self._fd is not None and self._buf is None and (self.written - self._submitted >= WRITEBACK_STEP
                                                           or (self.written == self._limit and self._flush_tail)):
            start_writeback(self._fd, self._file_offset + self._submitted, self.written - self._submitted)
            self._submitted = self.written
        self._progress.advance(n)

    def _pwrite(self, data: bytes | memoryview, n: int, offset: int) -> None:
        try:
            failpoints.hit("download-write")
            view = memoryview(data)
            done = 0
            while done < n:
                done += os.pwrite(self._fd, view[done:], offset + done)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(f"no space left on device writing {self._what}") from e
            raise

    def _stage(self, data: bytes, n: int) -> None:
        buf = self._buf
        assert buf is not None
        view = memoryview(data)
        done = 0
        while done < n:
            take = min(DIRECT_BUF - self._staged, n - done)
            buf[self._staged:self._staged + take] = view[done:done + take]
            self._staged += take
            done += take
            if self._staged == DIRECT_BUF:
                self._write_staged(DIRECT_BUF)

    def _write_staged(self, n: int) -> None:
        """Write the first ``n`` staged bytes at their place (whole blocks, or the last partial one once
        O_DIRECT is cleared), then keep the rest."""
        assert self._buf is not None and self._fd is not None
        offset = self._file_offset + self._flushed
        try:
            self._pwrite(self._buf[:n], n, offset)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            _through_cache(self._fd)
            self._pwrite(self._buf[:n], n, offset)
        self._flushed += n
        self._staged -= n
        if self._staged:  # less than a block, after at least one: the two never overlap
            self._buf[:self._staged] = self._buf[n:n + self._staged]

    def finish(self) -> None:
        """Write what is still staged (``direct``): its whole blocks past the page cache, the last partial
        block through it. Call it once the blob store's ``get`` returned."""
        if self._buf is None or not self._staged:
            return
        whole = self._staged - self._staged % DIRECT_ALIGN
        if whole:
            self._write_staged(whole)
        if self._staged:
            assert self._fd is not None
            _through_cache(self._fd)
            self._write_staged(self._staged)

    def tell(self) -> int:
        return self.written

    def seek(self, pos: int, whence: int = 0) -> int:
        if pos != 0 or whence != 0:
            raise OSError(errno.ESPIPE, "a CRC sink can only rewind to its start")
        self._progress.advance(-self.written)
        self.written = 0
        self.crc = 0
        self._staged = self._flushed = 0
        return 0

