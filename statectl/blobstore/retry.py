"""Retries with exponential backoff and full jitter, as a wrapper around any BlobStore.

Only TransientBlobStoreError is retried; backends decide what is transient. A retried ``put``
seeks its source back to where it started, a retried ``get`` seeks its destination back. A stream
that cannot seek (a pipe) gets a single attempt: bytes already sent or written cannot be taken back.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, TypeVar

from statectl.blobstore.base import BlobInfo, BlobStore
from statectl.errors import BlobNotFoundError, BlobStoreError, PreconditionFailedError, TransientBlobStoreError

log = logging.getLogger(__name__)
_GAVE_UP_HINT = ("the blob store is down, unreachable or overloaded: check --blobstore and --s3-endpoint; "
                 "STATECTL_RETRIES, STATECTL_RETRY_TIME and STATECTL_TIMEOUT set how long statectl waits")
T = TypeVar("T")


class RetryingBlobStore:
    """Wraps a BlobStore; every call is retried up to ``attempts`` times on transient errors, and never
    after ``deadline_s`` seconds since its first attempt began (None: no deadline): a store that accepts
    connections and never answers costs one request timeout per attempt, and the deadline bounds the sum.

    After the last attempt the transient error is re-raised as a BlobStoreError naming the attempts.
    """

    def __init__(self, inner: BlobStore, *, attempts: int = 8, base_delay: float = 0.1, max_delay: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep, deadline_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.inner = inner
        self.url = inner.url
        self.attempts = max(1, attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self.deadline_s = deadline_s
        self._clock = clock
        self.retries = 0
        self._lock = threading.Lock()

    @property
    def root(self) -> Path | None:
        """The wrapped store's real root dir (``file://``; a Path), or None (S3): what a restore target
        must not overlap."""
        return getattr(self.inner, "root", None)

    def _call(self, what: str, fn: Callable[[], T], rewind: Callable[[], None] | None = None,
              retryable: bool = True) -> T:
        started = self._clock()
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except TransientBlobStoreError as e:
                if not retryable:
                    raise BlobStoreError(f"{e} (not retried: the stream cannot seek back)", hint=e.hint) from e
                delay = random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
                elapsed = self._clock() - started
                if attempt == self.attempts or (self.deadline_s is not None and elapsed + delay > self.deadline_s):
                    s = "" if attempt == 1 else "s"
                    raise BlobStoreError(f"{e} (gave up after {attempt} attempt{s} in {elapsed:.0f}s)",
                                         hint=e.hint or _GAVE_UP_HINT) from e
                log.debug("retrying %s after %s (attempt %d, sleeping %.2fs)", what, e, attempt, delay)
                with self._lock:
                    self.retries += 1
                self._sleep(delay)
                if rewind is not None:
                    rewind()
        raise AssertionError("unreachable")

    def put(self, src: BinaryIO, *, size: int, ttl_seconds: int | None) -> str:
        pos = _position(src)
        return self._call("put", lambda: self.inner.put(src, size=size, ttl_seconds=ttl_seconds),
                          lambda: src.seek(pos), retryable=pos is not None)

    def put_at(self, key: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        """A conditional write whose attempt failed after the store may have executed it (a 500, a reset
        after the request went out) meets its own write on the retry and fails its precondition. The
        object then holding exactly ``data`` means the earlier attempt landed: its etag is returned.
        Callers that race make ``data`` unique to the writer (the lease writes its owner id), so
        another writer's object never matches; any other content is PreconditionFailedError.
        """
        maybe_landed = False

        def attempt() -> str:
            nonlocal maybe_landed
            try:
                return self.inner.put_at(key, data, if_match=if_match, if_none_match=if_none_match)
            except TransientBlobStoreError:
                maybe_landed = True
                raise
            except PreconditionFailedError:
                if maybe_landed:
                    etag = self._own_write(key, data)
                    if etag is not None:
                        log.debug("put %s: an earlier attempt landed", key)
                        return etag
                raise

        return self._call(f"put {key}", attempt)

    def _own_write(self, key: str, data: bytes) -> str | None:
        """The object's etag if it holds exactly ``data``, else None."""
        try:
            current, etag = self.read_at(key)
        except BlobNotFoundError:
            return None
        return etag if current == data else None

    def read_at(self, key: str) -> tuple[bytes, str]:
        return self._call(f"get {key}", lambda: self.inner.read_at(key))

    def get(self, key: str, dst: BinaryIO, *, start: int = 0, length: int | None = None) -> int:
        pos = _position(dst)
        return self._call(f"get {key}", lambda: self.inner.get(key, dst, start=start, length=length),
                          lambda: dst.seek(pos), retryable=pos is not None)

    def delete(self, key: str) -> None:
        return self._call(f"delete {key}", lambda: self.inner.delete(key))

    def delete_many(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            batch = keys[i:i + 1000]
            self._call(f"delete {len(batch)} objects", lambda: self.inner.delete_many(batch))

    def remove_ttl(self, key: str) -> None:
        return self._call(f"remove_ttl {key}", lambda: self.inner.remove_ttl(key))

    def copy(self, key: str, *, ttl_seconds: int | None) -> str:
        return self._call(f"copy {key}", lambda: self.inner.copy(key, ttl_seconds=ttl_seconds))

    def stat(self, key: str) -> BlobInfo:
        return self._call(f"stat {key}", lambda: self.inner.stat(key))

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        # A listing is retried whole: it is materialised so a fault halfway cannot yield duplicates.
        return iter(self._call(f"list {prefix}", lambda: list(self.inner.list(prefix))))

    def sweep_debris(self, older_than: float, *, dry_run: bool = False) -> list[BlobInfo]:
        return self._call("sweep debris", lambda: self.inner.sweep_debris(older_than, dry_run=dry_run))

    def close(self) -> None:
        self.inner.close()


def _position(stream: BinaryIO) -> int | None:
    """The stream's position, or None when it cannot seek (pipes, sockets)."""
    try:
        if hasattr(stream, "seekable") and not stream.seekable():
            return None
        return stream.tell()
    except (AttributeError, OSError, ValueError):
        return None
