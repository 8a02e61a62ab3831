"""How a restore's bytes reach the disk: ranges of a MiB and more past the page cache (O_DIRECT) from an
aligned buffer, on the real filesystem of tmp_path; the fallbacks where a filesystem refuses O_DIRECT."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import io
import mmap
import os
import zlib
from pathlib import Path

import pytest

from statectl.blobstore.local import LocalBlobStore
from statectl.errors import ChecksumMismatchError
from statectl.progress import NullProgress
from statectl.snapshot.model import FileBlob, FileIndex, FileMetadata
from statectl.transfer import download as download_mod
from statectl.transfer import sink as sink_mod
from statectl.transfer.download import DownloadItem, download_files
from statectl.transfer.sink import CrcSink

MiB = 1024 * 1024
O_DIRECT = getattr(os, "O_DIRECT", 0)
DATA = os.urandom(3 * MiB + 100)
CHUNKS = (300 * 1024, MiB + 7, 5, 2 * MiB)  # cut across the staging buffer and the blocks


def _resident_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache (mincore of a shared read-only mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        try:
            assert libc.mincore(addr, size, vec) == 0
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec)


def _feed(sink: CrcSink, data: bytes, into: bool) -> None:
    """``data`` handed to ``sink`` in CHUNKS: written, or (``into``) read into its buffer as a socket's
    readinto fills it, a piece at a time."""
    view, pos, i = memoryview(data), 0, 0
    while pos < len(data):
        n = CHUNKS[i % len(CHUNKS)]
        if into:
            buf = sink.recv_buffer()
            n = min(n, len(buf), len(data) - pos)
            buf[:n] = view[pos:pos + n]
            sink.received(n)
        else:
            sink.write(bytes(view[pos:pos + n]))
        pos, i = pos + n, i + 1


def _write(path: Path, *, direct: bool, data: bytes = DATA, into: bool = False) -> CrcSink:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (O_DIRECT if direct else 0), 0o600)
    try:
        sink = CrcSink(NullProgress(), fd=fd, limit=len(data), direct=direct)
        _feed(sink, data, into)
        sink.finish()
        os.fsync(fd)
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT or len(data) % 4096 == 0
    finally:
        os.close(fd)
    return sink


@pytest.fixture
def direct_dir(tmp_path: Path) -> Path:
    if not O_DIRECT:
        pytest.skip("no O_DIRECT here")
    try:
        os.close(os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT | O_DIRECT, 0o600))
    except OSError as e:
        if e.errno == errno.EINVAL:
            pytest.skip("this filesystem takes no O_DIRECT")
        raise
    return tmp_path


@pytest.mark.parametrize("into", [False, True], ids=["write", "into"])
def test_a_direct_range_is_written_past_the_page_cache_but_its_last_partial_block(direct_dir: Path, into: bool):
    cached, direct = direct_dir / "cached", direct_dir / "direct"
    cached_sink = _write(cached, direct=False, into=into)
    assert cached.read_bytes() == DATA and cached_sink.crc == zlib.crc32(DATA)
    sink = _write(direct, direct=True, into=into)
    resident = _resident_pages(direct)  # before any read brings the pages in
    assert direct.read_bytes() == DATA
    assert (sink.written, sink.crc) == (len(DATA), zlib.crc32(DATA))
    if _resident_pages(cached) < -(-len(DATA) // mmap.PAGESIZE):
        pytest.skip("this filesystem does not keep written pages cached: nothing to compare")
    assert resident <= 1  # the tail's page only


def test_a_write_the_filesystem_refuses_goes_through_the_cache(direct_dir: Path, monkeypatch):
    """EINVAL from a direct write (a filesystem with alignment rules of its own): the same bytes, through
    the page cache, and the rest of the range too."""
    real = os.pwrite
    refused = []

    def pwrite(fd, data, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(sink_mod.os, "pwrite", pwrite)
    path = direct_dir / "f"
    _write(path, direct=True)
    assert refused == [0]
    assert path.read_bytes() == DATA


def test_a_rewound_direct_sink_writes_the_retry_from_the_start(direct_dir: Path):
    path = direct_dir / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | O_DIRECT, 0o600)
    try:
        sink = CrcSink(NullProgress(), fd=fd, limit=len(DATA), direct=True)
        sink.write(b"x" * (MiB + 3 * 4096 + 1))  # a buffer written, part of the next staged
        sink.seek(0)
        sink.write(DATA)
        sink.finish()
    finally:
        os.close(fd)
    assert path.read_bytes() == DATA and sink.crc == zlib.crc32(DATA)


@pytest.mark.parametrize("direct", [False, True], ids=["cached", "direct"])
def test_bytes_read_into_the_buffer_are_checked_as_written_ones(direct_dir: Path, direct: bool):
    """``recv_buffer`` offers one byte past the range's end, so a blob longer than the index says shows; a range
    that is not its blob's last keeps what was asked; a rewind starts the count, the CRC and the file again."""
    path = direct_dir / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (O_DIRECT if direct else 0), 0o600)
    try:
        sink = CrcSink(NullProgress(), fd=fd, limit=len(DATA), direct=direct)
        _feed(sink, DATA, into=True)
        assert len(sink.recv_buffer()) == 1
        sink.recv_buffer()[0] = 0
        with pytest.raises(ChecksumMismatchError, match="longer than the index says"):
            sink.received(1)
        sink.seek(0)
        _feed(sink, b"y" * (MiB + 5), into=True)
        sink.seek(0)
        _feed(sink, DATA, into=True)
        sink.finish()
    finally:
        os.close(fd)
    assert path.read_bytes() == DATA and (sink.written, sink.crc) == (len(DATA), zlib.crc32(DATA))
    part = CrcSink(NullProgress(), limit=MiB, allow_more=True)
    _feed(part, DATA[:MiB + 1], into=True)
    assert (part.written, part.crc) == (MiB, zlib.crc32(DATA[:MiB]))


def _blob_file(tmp_path: Path, data: bytes) -> tuple[LocalBlobStore, FileIndex]:
    store = LocalBlobStore(tmp_path / "bs")
    blob = store.put(io.BytesIO(data), size=len(data), ttl_seconds=None)
    meta = FileMetadata(0, 0, len(data), "u", "g", "rw-r--r--")
    return store, FileIndex("000001.sst", (FileBlob(blob, 0),), meta, zlib.crc32(data))


@pytest.mark.parametrize("o_direct", [True, False], ids=["direct", "no-o-direct"])
def test_a_download_lands_whole_with_or_without_o_direct(direct_dir: Path, monkeypatch, o_direct: bool):
    """A restore's file fetched whole, of a MiB and more, is written past the page cache; a filesystem that
    refuses O_DIRECT on open (EINVAL) gets it through the page cache."""
    if not o_direct:
        real = os.open

        def refuse(path, flags, *a):
            if flags & O_DIRECT:
                raise OSError(errno.EINVAL, "Invalid argument")
            return real(path, flags, *a)

        monkeypatch.setattr(download_mod.os, "open", refuse)
    store, fi = _blob_file(direct_dir, DATA)
    dest = direct_dir / "out.sst"
    n = download_files(store, [DownloadItem("000001.sst", dest, fi)], parallelism=2, range_size=4 * MiB,
                       progress=NullProgress())  # one range: the file is fetched whole
    resident = _resident_pages(dest)
    assert n == len(DATA) and dest.read_bytes() == DATA and dest.stat().st_mode & 0o777 == 0o644
    if o_direct:
        assert resident <= 1  # past the cache but its last 100 bytes
    else:
        assert resident == -(-len(DATA) // mmap.PAGESIZE)
