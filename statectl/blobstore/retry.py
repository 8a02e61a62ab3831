"""Retries with exponential backoff and full jitter, as a wrapper around any BlobStore.

Only TransientBlobStoreError is retried; backends decide what is transient. A retried ``put``
seeks its source back to where it started, a retried ``get`` seeks its destination back. A stream
that cannot seek (a pipe) gets a single attempt: bytes already sent or written cannot be taken back.
A ``delete`` is retried one request (``delete_batch`` keys) at a time, a listing resumes after the last
key it yielded.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, TypeVar

from statectl.blobstore.base import BlobInfo, BlobStore, key_batches
from statectl.errors import (
    BlobNotFoundError,
    BlobStoreError,
    PreconditionFailedError,
    TransientBlobStoreError,
)

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

    @property
    def delete_batch(self) -> int:
        return self.inner.delete_batch

    @property
    def mtime_grain_s(self) -> float:
        return self.inner.mtime_grain_s

    def request_counts(self) -> dict[str, int]:
        """The wrapped store's request counts (every attempt is a request), or {} if it keeps none."""
        counts = getattr(self.inner, "request_counts", None)
        return counts() if counts is not None else {}

    def _call(self, what: str, fn: Callable[[], T], rewind: Callable[[], None] | None = None,
              retryable: bool = True) -> T:
        started = self._clock()
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except TransientBlobStoreError as e:
                if not retryable:
                    raise BlobStoreError(f"{e} (not retried: the stream cannot seek back)", hint=e.hint_parts) from e
                self._back_off(what, e, attempt, started)
                if rewind is not None:
                    rewind()
        raise AssertionError("unreachable")

    def _back_off(self, what: str, e: TransientBlobStoreError, attempt: int, started: float) -> None:
        """Sleep before attempt ``attempt + 1`` of a request first tried at ``started``, or raise the
        final BlobStoreError when it has had its attempts or its time."""
        import random

        delay = random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
        elapsed = self._clock() - started
        if attempt >= self.attempts or (self.deadline_s is not None and elapsed + delay > self.deadline_s):
            s = "" if attempt == 1 else "s"
            raise BlobStoreError(f"{e} (gave up after {attempt} attempt{s} in {elapsed:.0f}s)",
                                 hint=e.hint_parts or _GAVE_UP_HINT) from e
        log.debug("retrying %s after %s (attempt %d, sleeping %.2fs)", what, e, attempt, delay)
        with self._lock:
            self.retries += 1
        self._sleep(delay)

    def put(self, src: BinaryIO, *, size: int, ttl_seconds: int | None) -> str:
        pos = _position(src)
        return self._call("put", lambda: self.inner.put(src, size=size, ttl_seconds=ttl_seconds),
                          lambda: src.seek(pos), retryable=pos is not None)

    def put_at(self, key: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
               durable: bool = True) -> str:
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
                return self.inner.put_at(key, data, if_match=if_match, if_none_match=if_none_match,
                                          durable=durable)
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

    def delete(self, keys: Iterable[str]) -> None:
        for batch in key_batches(keys, self.delete_batch):
            what = f"delete {batch[0]}" if len(batch) == 1 else f"delete {len(batch)} objects"
            self._call(what, lambda: self.inner.delete(batch))  # idempotent: a retry may meet some gone

    def remove_ttl(self, key: str) -> None:
        return self._call(f"remove_ttl {key}", lambda: self.inner.remove_ttl(key))

    def copy(self, key: str, *, ttl_seconds: int | None, source: BlobStore | None = None,
             size: int | None = None) -> str:
        # Idempotent to retry: an attempt that landed leaves a TTL'd (or, without a TTL, unreferenced)
        # object under a key nobody names, which gc reclaims.
        return self._call(f"copy {key}", lambda: self.inner.copy(key, ttl_seconds=ttl_seconds, source=source,
                                                                 size=size))

    @property
    def copy_domain(self) -> tuple[str, ...]:
        return self.inner.copy_domain

    @property
    def identity(self) -> tuple[str, ...]:
        return self.inner.identity

    def byte_counts(self) -> dict[str, int]:
        """The wrapped store's payload byte counts (``sent``, ``received``), or {} if it keeps none."""
        counts = getattr(self.inner, "byte_counts", None)
        return counts() if counts is not None else {}

    def check_writable(self, key: str) -> None:
        return self._call(f"check write {key}", lambda: self.inner.check_writable(key))

    def stat(self, key: str) -> BlobInfo:
        return self._call(f"stat {key}", lambda: self.inner.stat(key))

    def list(self, prefix: str = "", *, start_after: str | None = None) -> Iterator[BlobInfo]:
        """The inner listing, streamed; after a transient failure it resumes after the last key yielded
        (``start_after`` resumes in the store's listing order), so nothing repeats and nothing is
        skipped. Attempts and retry time count from the last object that came through: each page of a
        long listing gets them afresh."""
        last = start_after
        attempt, started = 1, self._clock()
        while True:
            it = self.inner.list(prefix, start_after=last)
            try:
                for info in it:
                    last = info.key
                    yield info
                    attempt, started = 1, self._clock()  # what follows is the next request's
                return
            except TransientBlobStoreError as e:
                self._back_off(f"list {prefix}", e, attempt, started)
                attempt += 1
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()

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
