"""RetryingBlobStore against fake inner stores: its bounds (attempts, and the total time since the first
attempt, on a fake clock; the same wrapper meets a real store that never answers in
tests/integration/test_hostile_endpoints.py), rewinding the source or destination before a retry, and which
errors it retries."""

from __future__ import annotations

import io
import os

import pytest

from statectl.blobstore.base import BlobInfo
from statectl.blobstore.retry import RetryingBlobStore
from statectl.errors import BlobNotFoundError, BlobStoreError, TransientBlobStoreError


class Hanging:
    """A store whose every request times out after ``timeout`` seconds of the fake clock."""

    url = "s3://b/p"

    def __init__(self, clock: list[float], timeout: float):
        self.clock, self.timeout, self.calls = clock, timeout, 0

    def stat(self, key: str):
        self.calls += 1
        self.clock[0] += self.timeout
        raise TransientBlobStoreError(f"s3: stat {key}: no answer within {self.timeout:g}s")


def wrap(inner: Hanging, clock: list[float], **kw) -> RetryingBlobStore:
    return RetryingBlobStore(inner, sleep=lambda s: clock.__setitem__(0, clock[0] + s), clock=lambda: clock[0], **kw)


def test_the_deadline_bounds_the_total_wait_whatever_the_attempts():
    clock = [0.0]
    inner = Hanging(clock, timeout=15)
    with pytest.raises(BlobStoreError) as e:
        wrap(inner, clock, attempts=9, deadline_s=60).stat("k")
    assert inner.calls == 4  # 9 attempts at 15 s each would be 135 s and more
    assert clock[0] <= 60 + 15
    assert "gave up after 4 attempts in" in str(e.value) and "no answer" in str(e.value)


def test_without_a_deadline_every_attempt_is_made():
    clock = [0.0]
    inner = Hanging(clock, timeout=15)
    with pytest.raises(BlobStoreError) as e:
        wrap(inner, clock, attempts=3).stat("k")
    assert inner.calls == 3 and "gave up after 3 attempts" in str(e.value)


def test_one_attempt_is_said_in_the_singular():
    clock = [0.0]
    with pytest.raises(BlobStoreError) as e:
        wrap(Hanging(clock, timeout=1), clock, attempts=1, deadline_s=60).stat("k")
    assert "gave up after 1 attempt in 1s" in str(e.value)


# -- rewinding and what is retried (the real backends' own behaviour is in test_blobstore_conformance.py) --


class FlakyStore:
    """Fails ``failures`` times with a transient error, after consuming or producing some bytes."""

    url = "fake://"

    def __init__(self, failures: int, error: type[Exception] = TransientBlobStoreError):
        self.failures = failures
        self.error = error
        self.calls = 0
        self.stored: dict[str, bytes] = {"blobs/k": b"0123456789" * 100}

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"fake: transient failure {self.calls}")

    def put(self, src, *, size, ttl_seconds):
        data = src.read(size)  # the body went out, then the connection dropped before the answer
        self._maybe_fail()
        key = f"blobs/{self.calls}"
        self.stored[key] = data
        return key

    def get(self, key, dst, *, start=0, length=None):
        data = self.stored[key]
        dst.write(data[: len(data) // 2])  # half the body arrived before the connection dropped
        self._maybe_fail()
        dst.write(data[len(data) // 2:])
        return len(data)

    def stat(self, key):
        self._maybe_fail()
        raise BlobNotFoundError(f"fake: {key} not found")

    def close(self) -> None:
        pass


def _retrying(inner: FlakyStore, attempts: int, delays: list[float] | None = None) -> RetryingBlobStore:
    return RetryingBlobStore(inner, attempts=attempts, base_delay=0.1, max_delay=0.3,
                             sleep=(delays.append if delays is not None else lambda s: None))


def test_retry_put_rewinds_source() -> None:
    inner = FlakyStore(failures=2)
    delays: list[float] = []
    store = _retrying(inner, attempts=5, delays=delays)
    payload = os.urandom(1000)
    src = io.BytesIO(b"prefix" + payload)
    src.seek(6)
    key = store.put(src, size=len(payload), ttl_seconds=None)
    assert inner.stored[key] == payload
    assert (inner.calls, store.retries) == (3, 2)
    assert len(delays) == 2 and 0 <= delays[0] <= 0.1 and 0 <= delays[1] <= 0.2


def test_retry_get_rewinds_destination() -> None:
    inner = FlakyStore(failures=3)
    store = _retrying(inner, attempts=4)
    dst = io.BytesIO()
    dst.write(b"head:")
    assert store.get("blobs/k", dst) == 1000
    assert dst.getvalue() == b"head:" + inner.stored["blobs/k"]
    assert inner.calls == 4


def test_retry_gives_up_after_configured_attempts() -> None:
    inner = FlakyStore(failures=100)
    delays: list[float] = []
    store = _retrying(inner, attempts=3, delays=delays)
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts") as exc:
        store.get("blobs/k", io.BytesIO())
    assert not isinstance(exc.value, TransientBlobStoreError), "the final error must not be retried again"
    assert isinstance(exc.value.__cause__, TransientBlobStoreError)
    assert inner.calls == 3 and len(delays) == 2
    assert all(d <= 0.3 for d in delays)


def test_retry_does_not_retry_permanent_errors() -> None:
    inner = FlakyStore(failures=0)
    store = _retrying(inner, attempts=5)
    with pytest.raises(BlobNotFoundError):
        store.stat("blobs/missing")
    assert inner.calls == 1
    inner = FlakyStore(failures=5, error=BlobStoreError)
    with pytest.raises(BlobStoreError):
        _retrying(inner, attempts=5).get("blobs/k", io.BytesIO())
    assert inner.calls == 1


def test_retry_never_retries_into_an_unseekable_stream() -> None:
    class Pipe(io.RawIOBase):
        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            self.data += b
            return len(b)

    inner = FlakyStore(failures=1)
    pipe = Pipe()
    with pytest.raises(BlobStoreError, match="cannot seek back"):
        _retrying(inner, attempts=5).get("blobs/k", pipe)
    assert inner.calls == 1
    inner = FlakyStore(failures=0)
    pipe = Pipe()
    assert _retrying(inner, attempts=5).get("blobs/k", pipe) == 1000
    assert bytes(pipe.data) == inner.stored["blobs/k"]


# -- listings resume, deletes retry one request at a time ---------------------------------------------


class PagedStore:
    """A sorted store listed in pages of ``page`` keys; ``faults`` maps a page number to how many times
    fetching it fails (transiently) before it works. ``fetches`` counts the pages asked for."""

    url = "fake://"
    delete_batch = 4

    def __init__(self, keys: list[str], page: int, faults: dict[int, int] | None = None):
        self.keys = sorted(keys)
        self.page = page
        self.faults = dict(faults or {})
        self.fetches = 0
        self.pages_served = 0
        self.deletes: list[list[str]] = []
        self.delete_faults = 0

    def list(self, prefix="", *, start_after=None):
        keys = [k for k in self.keys if k.startswith(prefix) and (start_after is None or k > start_after)]
        for i in range(0, len(keys), self.page):
            self.fetches += 1
            n = self.pages_served
            if self.faults.get(n, 0) > 0:
                self.faults[n] -= 1
                raise TransientBlobStoreError(f"fake: page {n} failed")
            self.pages_served += 1
            for k in keys[i:i + self.page]:
                yield BlobInfo(k, 1, 0.0)

    def delete(self, keys):
        keys = list(keys)
        if self.delete_faults:
            self.delete_faults -= 1
            raise TransientBlobStoreError("fake: delete failed")
        self.deletes.append(keys)


KEYS = [f"blobs/{i:02x}/{i:032x}" for i in range(25)]


def test_a_listing_resumes_after_the_last_key_without_repeats_or_gaps():
    inner = PagedStore(KEYS, page=10, faults={1: 2, 2: 1})
    store = RetryingBlobStore(inner, attempts=3, sleep=lambda s: None)
    assert [i.key for i in store.list("blobs/")] == KEYS
    assert store.retries == 3 and inner.fetches == 3 + 3


def test_a_listing_consumed_lazily_fetches_only_what_is_read():
    inner = PagedStore(KEYS, page=10)
    listing = RetryingBlobStore(inner, attempts=3, sleep=lambda s: None).list()
    assert inner.fetches == 0
    assert next(listing).key == KEYS[0] and inner.fetches == 1
    listing.close()


def test_every_page_of_a_listing_gets_its_attempts_afresh():
    # Two failures before each page: with 3 attempts a request, the whole listing still comes through.
    inner = PagedStore(KEYS, page=10, faults={0: 2, 1: 2, 2: 2})
    store = RetryingBlobStore(inner, attempts=3, sleep=lambda s: None)
    assert [i.key for i in store.list()] == KEYS
    inner = PagedStore(KEYS, page=10, faults={1: 3})
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts"):
        list(RetryingBlobStore(inner, attempts=3, sleep=lambda s: None).list())


def test_deletes_go_in_batches_and_a_failed_batch_alone_is_retried():
    inner = PagedStore(KEYS, page=10)
    inner.delete_faults = 1
    store = RetryingBlobStore(inner, attempts=3, sleep=lambda s: None)
    store.delete(iter(KEYS[:10]))
    assert inner.deletes == [KEYS[0:4], KEYS[4:8], KEYS[8:10]] and store.retries == 1
    with pytest.raises(TypeError, match="single key"):
        store.delete(KEYS[0])
