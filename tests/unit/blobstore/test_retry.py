"""RetryingBlobStore's bounds: attempts, and the total time since the first attempt (a fake clock; the
same wrapper is exercised against a real store that never answers in tests/integration/test_hostile_endpoints.py)."""

from __future__ import annotations

import pytest

from statectl.blobstore.retry import RetryingBlobStore
from statectl.errors import BlobStoreError, TransientBlobStoreError


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
