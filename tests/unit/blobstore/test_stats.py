"""StatsBlobStore: requests counted by kind, on its own and beneath or above the retry wrapper."""

from __future__ import annotations

import io

import pytest

from statectl.blobstore import open_blobstore
from statectl.blobstore.local import LocalBlobStore
from statectl.blobstore.retry import RetryingBlobStore
from statectl.blobstore.stats import StatsBlobStore
from statectl.errors import BlobNotFoundError, TransientBlobStoreError


def test_counts_each_operation_by_kind(tmp_path):
    store = StatsBlobStore(LocalBlobStore(tmp_path))
    key = store.put(io.BytesIO(b"abc"), size=3, ttl_seconds=60)
    store.get(key, io.BytesIO())
    store.stat(key)
    store.remove_ttl(key)
    store.copy(key, ttl_seconds=None)
    store.put_at("checkpoints/r", b"x")
    store.read_at("checkpoints/r")
    assert len(list(store.list())) == 3
    store.sweep_debris(0)
    with pytest.raises(BlobNotFoundError):
        store.stat("blobs/00/missing")  # a failed request is a request
    store.delete([])
    assert store.request_counts() == {"copy": 1, "get": 1, "list": 1, "put": 1, "put_at": 1, "read_at": 1,
                                      "remove_ttl": 1, "stat": 2, "sweep_debris": 1}
    assert store.root == tmp_path and store.url == f"file://{tmp_path}"


def test_a_delete_counts_one_request_per_batch(tmp_path, monkeypatch):
    inner = LocalBlobStore(tmp_path)
    monkeypatch.setattr(inner, "delete_batch", 2)
    store = StatsBlobStore(inner)
    store.delete(f"blobs/00/{i:032x}" for i in range(5))
    assert store.request_counts() == {"delete": 3}


class Flaky:
    url = "fake://"
    delete_batch = 10

    def __init__(self, failures: int):
        self.failures = failures

    def stat(self, key):
        if self.failures:
            self.failures -= 1
            raise TransientBlobStoreError("fake: try again")
        raise BlobNotFoundError(key)


def test_beneath_the_retry_wrapper_every_attempt_counts_and_the_wrapper_forwards_the_counts():
    store = RetryingBlobStore(StatsBlobStore(Flaky(failures=2)), attempts=5, sleep=lambda s: None)
    with pytest.raises(BlobNotFoundError):
        store.stat("k")
    assert store.request_counts() == {"stat": 3}
    above = StatsBlobStore(RetryingBlobStore(Flaky(failures=2), attempts=5, sleep=lambda s: None))
    with pytest.raises(BlobNotFoundError):
        above.stat("k")
    assert above.request_counts() == {"stat": 1}  # above it: the calls made, retries hidden
    assert RetryingBlobStore(Flaky(0)).request_counts() == {}  # nothing beneath counts


def test_stores_from_open_blobstore_count(tmp_path):
    store = open_blobstore(f"file://{tmp_path}")
    store.put_at("leases/x", b"1")
    store.delete(["leases/x"])
    assert store.request_counts() == {"delete": 1, "put_at": 1}
    assert store.delete_batch == LocalBlobStore.delete_batch
