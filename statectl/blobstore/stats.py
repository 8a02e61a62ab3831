"""Request counts by kind, as a wrapper around any BlobStore (gc and the benchmarks report them).

A kind is the protocol operation: ``put``, ``put_at``, ``read_at``, ``get``, ``stat``, ``remove_ttl``,
``copy``, ``delete`` (one per ``delete_batch`` keys, as S3 sends DeleteObjects), ``list`` (one per listing,
however many pages it streams), ``sweep_debris`` and ``check_writable``. Beneath RetryingBlobStore (as
``open_blobstore`` stacks them) every attempt counts: the figures are the requests the store saw. A call
counts when it is made, whether it succeeds or not.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from statectl.blobstore.base import BlobInfo, BlobStore, key_batches


class StatsBlobStore:
    """Wraps a BlobStore and counts the requests made through it; thread-safe."""

    def __init__(self, inner: BlobStore):
        self.inner = inner
        self.url = inner.url
        self._counts: Counter[str] = Counter()
        self._bytes: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def root(self) -> Path | None:
        return getattr(self.inner, "root", None)

    @property
    def delete_batch(self) -> int:
        return self.inner.delete_batch

    @property
    def mtime_grain_s(self) -> float:
        return self.inner.mtime_grain_s

    def request_counts(self) -> dict[str, int]:
        """Requests so far by kind (a copy; kinds never used are absent), sorted by kind."""
        with self._lock:
            return dict(sorted(self._counts.items()))

    def _count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def _bytes_moved(self, direction: str, n: int) -> None:
        with self._lock:
            self._bytes[direction] += n

    @property
    def copy_domain(self) -> tuple[str, ...]:
        return self.inner.copy_domain

    @property
    def identity(self) -> tuple[str, ...]:
        return self.inner.identity

    def byte_counts(self) -> dict[str, int]:
        """Payload bytes so far that went through this client: ``sent`` (put, put_at bodies) and
        ``received`` (get, read_at bodies). A server-side copy moves none. Attempts that failed count what
        they were asked to move (a put) or nothing (a get)."""
        with self._lock:
            return {"sent": self._bytes["sent"], "received": self._bytes["received"]}

    def put(self, src: BinaryIO, *, size: int, ttl_seconds: int | None) -> str:
        self._count("put")
        self._bytes_moved("sent", size)
        return self.inner.put(src, size=size, ttl_seconds=ttl_seconds)

    def put_at(self, key: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
               durable: bool = True) -> str:
        self._count("put_at")
        self._bytes_moved("sent", len(data))
        return self.inner.put_at(key, data, if_match=if_match, if_none_match=if_none_match, durable=durable)

    def read_at(self, key: str) -> tuple[bytes, str]:
        self._count("read_at")
        data, etag = self.inner.read_at(key)
        self._bytes_moved("received", len(data))
        return data, etag

    def get(self, key: str, dst: BinaryIO, *, start: int = 0, length: int | None = None) -> int:
        self._count("get")
        n = self.inner.get(key, dst, start=start, length=length)
        self._bytes_moved("received", n)
        return n

    def delete(self, keys: Iterable[str]) -> None:
        for batch in key_batches(keys, self.delete_batch):
            self._count("delete")
            self.inner.delete(batch)

    def remove_ttl(self, key: str) -> None:
        self._count("remove_ttl")
        self.inner.remove_ttl(key)

    def copy(self, key: str, *, ttl_seconds: int | None, source: BlobStore | None = None,
             size: int | None = None) -> str:
        self._count("copy")
        return self.inner.copy(key, ttl_seconds=ttl_seconds, source=source, size=size)

    def check_writable(self, key: str) -> None:
        self._count("check_writable")
        self.inner.check_writable(key)

    def stat(self, key: str) -> BlobInfo:
        self._count("stat")
        return self.inner.stat(key)

    def list(self, prefix: str = "", *, start_after: str | None = None) -> Iterator[BlobInfo]:
        self._count("list")
        return self.inner.list(prefix, start_after=start_after)

    def sweep_debris(self, older_than: float, *, dry_run: bool = False) -> list[BlobInfo]:
        self._count("sweep_debris")
        return self.inner.sweep_debris(older_than, dry_run=dry_run)

    def close(self) -> None:
        self.inner.close()
