"""One conformance suite for every BlobStore backend (file:// and s3:// on a real SeaweedFS).

The ``blobstore`` fixture runs each conformance test once per backend. S3-only behaviour (credentials,
buckets, endpoints) follows at the end; the retry wrapper's own contract is in tests/unit/blobstore/test_retry.py.
No test measures time: a call that should fail at once but would wait for a timeout is caught as a hang,
by pytest-timeout.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pytest

from statectl.blobstore import BlobStore, S3Options, open_blobstore
from statectl.blobstore.base import BLOB_PREFIX, BlobInfo
from statectl.blobstore.stats import StatsBlobStore
from statectl.errors import (
    EXIT_AUTH,
    EXIT_NOT_FOUND,
    AuthError,
    BlobNotFoundError,
    BlobStoreMissingError,
    BlobStoreError,
    NotFoundError,
    PreconditionFailedError,
    TransientBlobStoreError,
    UsageError,
)

MiB = 1024 * 1024
LARGE = 12 * MiB + 12345  # three parts at the tests' 5 MiB part size, the last one short
TTL_SLACK = 60  # seconds of clock and request latency tolerated around an expected expiry
# Every test is bounded: a hang fails its test instead of the whole run (the first S3 test also starts
# the server). Tests whose point is to fail at once rather than wait for a timeout set a tighter bound.
pytestmark = pytest.mark.timeout(300)


def put_bytes(store: BlobStore, data: bytes, ttl_seconds: int | None = None) -> str:
    return store.put(io.BytesIO(data), size=len(data), ttl_seconds=ttl_seconds)


def get_bytes(store: BlobStore, key: str, **kwargs) -> bytes:
    out = io.BytesIO()
    n = store.get(key, out, **kwargs)
    assert n == len(out.getvalue())
    return out.getvalue()


def backend(store: BlobStore) -> BlobStore:
    """The backend under the wrappers ``open_blobstore`` puts around it."""
    while hasattr(store, "inner"):
        store = store.inner
    return store


def assert_expires_in(info: BlobInfo, ttl_seconds: int) -> None:
    assert info.expires_at is not None, f"{info.key} has no TTL"
    assert abs(info.expires_at - (time.time() + ttl_seconds)) < TTL_SLACK


# -- put / get ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1000, LARGE], ids=["empty", "small", "multipart"])
def test_put_get_round_trip(blobstore: BlobStore, size: int) -> None:
    data = os.urandom(size)
    key = put_bytes(blobstore, data)
    assert key.startswith(BLOB_PREFIX)
    assert get_bytes(blobstore, key) == data
    info = blobstore.stat(key)
    assert (info.key, info.size, info.expires_at) == (key, size, None)
    assert abs(info.modified_at - time.time()) < TTL_SLACK


@pytest.mark.parametrize("size", [1000, LARGE], ids=["small", "multipart"])
def test_put_reads_exactly_size_bytes_from_current_position(blobstore: BlobStore, size: int) -> None:
    payload = os.urandom(size)
    src = io.BytesIO(b"HEADER" + payload + b"TRAILER")
    src.seek(len(b"HEADER"))
    key = blobstore.put(src, size=size, ttl_seconds=None)
    assert get_bytes(blobstore, key) == payload
    assert blobstore.stat(key).size == size


@pytest.mark.parametrize("have, size", [(10, 20), (6 * MiB, LARGE)], ids=["small", "multipart"])
@pytest.mark.timeout(60)  # a put that waited for the server's read timeout would retry for minutes
def test_put_from_short_source_fails_and_leaves_nothing(blobstore: BlobStore, have: int, size: int) -> None:
    with pytest.raises(BlobStoreError, match="early") as exc:
        blobstore.put(io.BytesIO(os.urandom(have)), size=size, ttl_seconds=3600)
    assert not isinstance(exc.value, TransientBlobStoreError), "a short source must fail at once, not be retried"
    assert list(blobstore.list()) == []


def test_another_spelling_of_the_url_is_the_same_store(blobstore: BlobStore, request: pytest.FixtureRequest) -> None:
    """``identity`` is what the store holds, not how its URL is written: what one spelling wrote, the other
    reads; a sibling is another store."""
    url = blobstore.url
    s3 = request.getfixturevalue("s3_options") if url.startswith("s3://") else None
    if s3:
        bucket_end = url.index("/", len("s3://"))
        spellings = [url + "/", url[:bucket_end] + "/" + url[bucket_end:]]
    else:
        path = url[len("file://"):]
        spellings = [url + "/", f"file://{os.path.dirname(path)}/./{os.path.basename(path)}"]
    key = put_bytes(blobstore, b"one store")
    for spelling in spellings:
        other = open_blobstore(spelling, s3=s3)
        try:
            assert other.identity == blobstore.identity, spelling
            assert get_bytes(other, key) == b"one store", spelling
        finally:
            other.close()
    sibling = open_blobstore(url.rstrip("/") + "-sibling", s3=s3)
    try:
        assert sibling.identity != blobstore.identity
    finally:
        sibling.close()


def test_check_writable_passes_where_a_write_would_and_writes_nothing(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"there")
    blobstore.put_at("leases/j/1/t/s.json", b"{}")
    before = {i.key: (i.size, i.modified_at) for i in blobstore.list("")}
    for probe in ("leases/j/1/t/s.json", "leases/new/dir/x.json", key, "checkpoints/a"):
        blobstore.check_writable(probe)
    assert {i.key: (i.size, i.modified_at) for i in blobstore.list("")} == before
    assert blobstore.read_at("leases/j/1/t/s.json")[0] == b"{}"


def test_ranged_get(blobstore: BlobStore) -> None:
    data = bytes(range(256)) * 40
    key = put_bytes(blobstore, data)
    assert get_bytes(blobstore, key, start=100, length=50) == data[100:150]
    assert get_bytes(blobstore, key, start=100) == data[100:]
    assert get_bytes(blobstore, key, start=0, length=1) == data[:1]
    assert get_bytes(blobstore, key, start=len(data) - 1) == data[-1:]
    assert get_bytes(blobstore, key, start=len(data) - 10, length=100) == data[-10:]  # clipped at the end
    assert get_bytes(blobstore, key, start=len(data)) == b""
    assert get_bytes(blobstore, key, start=len(data) + 5, length=3) == b""
    assert get_bytes(blobstore, key, start=7, length=0) == b""


def test_ranged_get_across_parts(blobstore: BlobStore) -> None:
    data = os.urandom(LARGE)
    key = put_bytes(blobstore, data)
    boundary = 5 * MiB
    assert get_bytes(blobstore, key, start=boundary - 10, length=20) == data[boundary - 10:boundary + 10]
    assert get_bytes(blobstore, key, start=2 * boundary + 1) == data[2 * boundary + 1:]


def test_get_appends_at_destination_position(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"payload")
    out = io.BytesIO()
    out.write(b"already here:")
    assert blobstore.get(key, out) == len(b"payload")
    assert out.getvalue() == b"already here:payload"


def test_empty_blob_ranged_get(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"")
    assert get_bytes(blobstore, key) == b""
    assert get_bytes(blobstore, key, start=0, length=10) == b""


def test_keys_are_never_reused(blobstore: BlobStore) -> None:
    keys = [put_bytes(blobstore, b"same bytes") for _ in range(5)]
    keys.append(blobstore.copy(keys[0], ttl_seconds=None))
    assert len(set(keys)) == len(keys)
    assert all(k.startswith(BLOB_PREFIX) for k in keys)


def test_get_missing_raises_not_found(blobstore: BlobStore) -> None:
    out = io.BytesIO()
    with pytest.raises(BlobNotFoundError):
        blobstore.get("blobs/00/00000000000000000000000000000000", out)
    with pytest.raises(BlobNotFoundError):
        blobstore.get("blobs/00/00000000000000000000000000000000", out, start=0, length=0)
    assert out.getvalue() == b""


def test_an_error_of_the_destination_reaches_the_caller_as_it_is(blobstore: BlobStore) -> None:
    """A cancelled transfer raises from the sink's write: the caller sees that, not a blob store error with
    an empty message that could be reported in place of the failure that cancelled it."""
    from statectl.parallel import Cancelled

    class CancelledSink(io.BytesIO):
        def write(self, b) -> int:  # type: ignore[override]
            raise Cancelled()

    key = put_bytes(blobstore, b"some bytes")
    with pytest.raises(Cancelled):
        blobstore.get(key, CancelledSink())


def test_key_prefix_is_not_an_object(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"x")
    prefix = key.rsplit("/", 1)[0]
    with pytest.raises(BlobNotFoundError):
        blobstore.get(prefix, io.BytesIO())
    with pytest.raises(BlobNotFoundError):
        blobstore.stat(prefix)


def test_stat_missing_raises_not_found(blobstore: BlobStore) -> None:
    with pytest.raises(BlobNotFoundError):
        blobstore.stat("blobs/00/00000000000000000000000000000000")


def test_delete_is_idempotent(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"doomed", ttl_seconds=3600)
    blobstore.delete([key])
    blobstore.delete([key])
    blobstore.delete(["blobs/00/never-existed"])
    blobstore.delete([])
    with pytest.raises(BlobNotFoundError):
        blobstore.stat(key)
    assert list(blobstore.list()) == []


def test_delete_refuses_a_single_key_string(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"kept")
    with pytest.raises(TypeError, match="single key"):
        blobstore.delete(key)  # type: ignore[arg-type]  # a str is an iterable of one-letter "keys"
    assert get_bytes(blobstore, key) == b"kept"


# -- TTL ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [10, LARGE], ids=["small", "multipart"])
def test_put_with_ttl_sets_expiry(blobstore: BlobStore, size: int) -> None:
    key = put_bytes(blobstore, os.urandom(size), ttl_seconds=3600)
    assert_expires_in(blobstore.stat(key), 3600)


def test_remove_ttl_makes_permanent_and_is_idempotent(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"keep me", ttl_seconds=600)
    assert_expires_in(blobstore.stat(key), 600)
    blobstore.remove_ttl(key)
    assert blobstore.stat(key).expires_at is None
    blobstore.remove_ttl(key)
    assert blobstore.stat(key).expires_at is None
    assert get_bytes(blobstore, key) == b"keep me"


def test_remove_ttl_of_missing_raises_not_found(blobstore: BlobStore) -> None:
    with pytest.raises(BlobNotFoundError):
        blobstore.remove_ttl("blobs/00/00000000000000000000000000000000")
    key = put_bytes(blobstore, b"gone", ttl_seconds=600)
    blobstore.delete([key])
    with pytest.raises(BlobNotFoundError):
        blobstore.remove_ttl(key)


# -- copy --------------------------------------------------------------------------------------------


def test_copy_gives_new_key_same_bytes_requested_ttl(blobstore: BlobStore) -> None:
    data = os.urandom(3000)
    src = put_bytes(blobstore, data)
    dst = blobstore.copy(src, ttl_seconds=900)
    assert dst != src and dst.startswith(BLOB_PREFIX)
    assert get_bytes(blobstore, dst) == data
    assert_expires_in(blobstore.stat(dst), 900)
    assert blobstore.stat(src).expires_at is None, "the source keeps its own (absent) TTL"


def test_copy_without_ttl_drops_the_source_ttl(blobstore: BlobStore) -> None:
    src = put_bytes(blobstore, b"pending", ttl_seconds=600)
    dst = blobstore.copy(src, ttl_seconds=None)
    assert blobstore.stat(dst).expires_at is None
    assert_expires_in(blobstore.stat(src), 600)


def test_copy_large_blob(blobstore: BlobStore) -> None:
    data = os.urandom(LARGE)
    dst = blobstore.copy(put_bytes(blobstore, data, ttl_seconds=600), ttl_seconds=1200)
    assert get_bytes(blobstore, dst) == data
    assert_expires_in(blobstore.stat(dst), 1200)


def test_copy_outlives_its_source(blobstore: BlobStore) -> None:
    data = os.urandom(777)
    src = put_bytes(blobstore, data, ttl_seconds=600)
    empty = put_bytes(blobstore, b"")
    dst, dst_empty = blobstore.copy(src, ttl_seconds=None), blobstore.copy(empty, ttl_seconds=None)
    blobstore.delete([src, empty])
    assert get_bytes(blobstore, dst) == data and get_bytes(blobstore, dst_empty) == b""
    assert {i.key: i.size for i in blobstore.list(BLOB_PREFIX)} == {dst: 777, dst_empty: 0}


def test_copy_of_missing_raises_not_found(blobstore: BlobStore) -> None:
    with pytest.raises(BlobNotFoundError):
        blobstore.copy("blobs/00/00000000000000000000000000000000", ttl_seconds=60)
    assert list(blobstore.list()) == []


# -- list --------------------------------------------------------------------------------------------


def test_list_by_prefix(blobstore: BlobStore) -> None:
    blobs = {put_bytes(blobstore, os.urandom(n), ttl_seconds=600 if n % 2 else None): n for n in (0, 7, 100)}
    records = {"records/a": b"a", "records/b/c": b"bc", "rec2": b"r2-data"}
    for key, data in records.items():
        blobstore.put_at(key, data)

    def listed(prefix: str = "") -> dict[str, int]:
        infos = list(blobstore.list(prefix))
        assert len({i.key for i in infos}) == len(infos), "a listing must not repeat keys"
        return {i.key: i.size for i in infos}

    record_sizes = {k: len(v) for k, v in records.items()}
    assert listed(BLOB_PREFIX) == blobs
    assert listed("records/") == {"records/a": 1, "records/b/c": 2}
    assert listed("rec") == record_sizes  # a prefix need not end at a "/"
    assert listed("records/b") == {"records/b/c": 2}
    assert listed() == {**blobs, **record_sizes}
    assert listed("nothing/") == {}
    one = next(iter(blobs))
    assert listed(one) == {one: blobs[one]}


def test_list_of_empty_store(blobstore: BlobStore) -> None:
    assert list(blobstore.list()) == []
    assert list(blobstore.list("blobs/")) == []
    assert list(blobstore.list(start_after="a")) == []


# Keys whose code-point order is not the order of a directory walk: "x-y" < "x/z" < "x0" ('-' < '/' < '0'),
# while a walk that reads the dir "x" where "x" sorts gives "x/z" first. AWS S3 lists in code-point (UTF-8
# byte) order, and so does file://; SeaweedFS, whose filer is a directory tree, lists such keys in walk
# order. What every backend must give is one order that ``start_after`` resumes in: what a retried or
# paged listing relies on. Blob keys (blobs/<2 hex>/<32 hex>) sort alike in both orders.
ORDERED = ["records/w", "records/x-y", "records/x/z", "records/x0", "records2"]


def test_list_is_in_one_order_that_start_after_resumes(blobstore: BlobStore) -> None:
    for key in reversed(ORDERED):
        blobstore.put_at(key, key.encode())
    blob_keys = [put_bytes(blobstore, b"b") for _ in range(5)]
    listed = [i.key for i in blobstore.list()]
    assert listed[:5] == sorted(blob_keys) and sorted(listed) == sorted(blob_keys + ORDERED)
    assert [i.key for i in blobstore.list("records")] == listed[5:]
    for n, key in enumerate(listed):
        assert [i.key for i in blobstore.list(start_after=key)] == listed[n + 1:], key
        assert [i.key for i in blobstore.list("records/", start_after=key)] == \
            [k for k in listed[n + 1:] if k.startswith("records/")], key
    assert [i.key for i in blobstore.list(start_after="")] == listed
    assert [i.key for i in blobstore.list(start_after="a")] == listed
    assert [i.key for i in blobstore.list(start_after="zzz")] == []


@pytest.mark.parametrize("start_after, prefix, expected", [
    ("records/", "", ORDERED),
    ("records/x", "", ORDERED[1:]),  # "records/x" itself sorts before "records/x-y"
    ("records/x/", "", ORDERED[2:]),
    ("records/x/zz", "records/", ORDERED[3:4]),
    ("a", "records/x", ORDERED[1:4]),
])
def test_file_lists_in_code_point_order(tmp_path, start_after: str, prefix: str, expected: list[str]) -> None:
    store = open_blobstore(f"file://{tmp_path}")
    for key in reversed(ORDERED):
        store.put_at(key, b"r")
    assert [i.key for i in store.list()] == ORDERED
    assert [i.key for i in store.list(prefix, start_after=start_after)] == expected


def test_list_streams_pages(blobstore: BlobStore) -> None:
    # More than an S3 page (1000 keys): the second page is asked for with the first page's last key.
    keys = [f"records/{i:05d}" for i in range(1234)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: blobstore.put_at(k, b"."), keys))
    listing = blobstore.list("records/")
    first = next(listing)  # a stream: what follows is fetched as it is consumed
    assert [first.key, *(i.key for i in listing)] == keys
    assert [i.key for i in blobstore.list("records/", start_after=keys[1100])] == keys[1101:]
    assert all(i.size == 1 for i in blobstore.list("records/0100"))


def test_delete_takes_any_iterable_in_batches(blobstore: BlobStore, monkeypatch) -> None:
    keys = [put_bytes(blobstore, b"x") for _ in range(8)]
    monkeypatch.setattr(backend(blobstore), "delete_batch", 3)
    counted = StatsBlobStore(blobstore)
    counted.delete(k for k in keys[:7] + ["blobs/00/missing"])  # a generator, with a missing key
    assert [i.key for i in blobstore.list(BLOB_PREFIX)] == keys[7:]
    assert counted.request_counts() == {"delete": 3}  # 8 keys, 3 a request


# -- put_at ------------------------------------------------------------------------------------------


def test_put_at_overwrites(blobstore: BlobStore) -> None:
    blobstore.put_at("checkpoints/task-0/store", b"first version, rather long")
    assert get_bytes(blobstore, "checkpoints/task-0/store") == b"first version, rather long"
    blobstore.put_at("checkpoints/task-0/store", b"second")
    assert get_bytes(blobstore, "checkpoints/task-0/store") == b"second"
    info = blobstore.stat("checkpoints/task-0/store")
    assert (info.size, info.expires_at) == (len(b"second"), None)
    assert [i.key for i in blobstore.list("checkpoints/")] == ["checkpoints/task-0/store"]


def test_put_at_over_a_blob_with_ttl_leaves_no_ttl(blobstore: BlobStore) -> None:
    key = put_bytes(blobstore, b"uncommitted", ttl_seconds=600)
    blobstore.put_at(key, b"record")
    info = blobstore.stat(key)
    assert (info.size, info.expires_at) == (len(b"record"), None)


def test_conditional_put_at_and_read_at(blobstore: BlobStore) -> None:
    key = "leases/job/1/task/store.json"
    with pytest.raises(BlobNotFoundError):
        blobstore.read_at(key)
    etag1 = blobstore.put_at(key, b"first", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        blobstore.put_at(key, b"second", if_none_match=True)
    data, etag = blobstore.read_at(key)
    assert (data, etag) == (b"first", etag1)
    etag2 = blobstore.put_at(key, b"second", if_match=etag1)
    assert etag2 != etag1
    with pytest.raises(PreconditionFailedError):
        blobstore.put_at(key, b"third", if_match=etag1)  # stale etag: someone else wrote meanwhile
    assert blobstore.read_at(key) == (b"second", etag2)


def test_conditional_create_has_one_winner(blobstore: BlobStore) -> None:
    key = "leases/race.json"
    wins: list[int] = []
    lost: list[int] = []
    barrier = threading.Barrier(6)

    def racer(i: int) -> None:
        barrier.wait()
        try:
            blobstore.put_at(key, str(i).encode(), if_none_match=True)
            wins.append(i)
        except PreconditionFailedError:
            lost.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(lost) == 5
    assert blobstore.read_at(key)[0] == str(wins[0]).encode()


def test_delete_several_with_a_missing_one(blobstore: BlobStore) -> None:
    keys = [put_bytes(blobstore, b"x") for _ in range(5)]
    blobstore.delete(keys[:3] + ["blobs/00/missing"])
    assert sorted(i.key for i in blobstore.list(BLOB_PREFIX)) == sorted(keys[3:])


def test_put_at_is_atomic_for_readers(blobstore: BlobStore) -> None:
    key = "checkpoints/hot"
    versions = [bytes([65 + i]) * (256 * 1024 + i) for i in range(6)]
    blobstore.put_at(key, versions[0])
    seen: list[bytes] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                seen.append(get_bytes(blobstore, key))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for data in versions[1:] * 3:
            blobstore.put_at(key, data)
    finally:
        done.set()
        t.join()
    assert not errors, errors
    assert seen and all(s in versions for s in seen), "a reader saw a partial or mixed object"
    assert get_bytes(blobstore, key) == versions[-1]


# -- file only -------------------------------------------------------------------------------------


def test_file_failed_put_leaves_no_files(tmp_path) -> None:
    store = open_blobstore(f"file://{tmp_path}")
    with pytest.raises(BlobStoreError):
        store.put(io.BytesIO(b"short"), size=100, ttl_seconds=600)
    with pytest.raises(BlobNotFoundError):
        store.copy("blobs/00/missing", ttl_seconds=600)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [], "no stray data, temp or TTL files"


def test_file_copy_with_a_ttl_is_a_link_as_old_as_the_copy(tmp_path) -> None:
    """A copy with a TTL is a hard link to the source's file (no byte written): deleting either name leaves
    the other's bytes, and its age (which gc's grace reads) is the copy's, from its TTL sidecar, not the file's
    it shares with its source, whose age stays as it was. Without its TTL (committed) it is as old as its
    bytes; a copy without a TTL, which nothing would date, is a byte copy."""
    store = open_blobstore(f"file://{tmp_path}")
    data = os.urandom(5000)
    src, other = put_bytes(store, data), put_bytes(store, b"other")
    old = time.time() - 3 * 24 * 3600
    for key in (src, other):
        os.utime(tmp_path / key, (old, old))
    before = time.time() - 1  # file times come from a coarser clock than time.time()
    dst = store.copy(src, ttl_seconds=900)
    assert os.stat(tmp_path / dst).st_ino == os.stat(tmp_path / src).st_ino
    listed = {i.key: i for i in store.list(BLOB_PREFIX)}
    assert listed[dst].modified_at >= before and store.stat(dst).modified_at >= before
    assert listed[src].modified_at == store.stat(src).modified_at == old, "the source's age is its own"
    assert_expires_in(listed[dst], 900)
    assert store.stat(src).expires_at is None
    store.delete([dst])
    assert get_bytes(store, src) == data
    again = store.copy(src, ttl_seconds=900)
    store.delete([src])
    assert get_bytes(store, again) == data
    store.remove_ttl(again)
    assert store.stat(again).modified_at == old
    plain = store.copy(other, ttl_seconds=None)
    assert os.stat(tmp_path / plain).st_ino != os.stat(tmp_path / other).st_ino
    assert store.stat(plain).modified_at >= before and get_bytes(store, plain) == b"other"


@pytest.mark.parametrize("errno_name", ["EXDEV", "EPERM", "EMLINK"])
def test_file_copy_where_no_link_can_be_made_is_a_byte_copy(tmp_path, monkeypatch, errno_name: str) -> None:
    """Another filesystem, a file of another user under protected_hardlinks, an inode at its link limit: the
    copy is written byte for byte instead."""
    import errno

    store = open_blobstore(f"file://{tmp_path}")
    src = put_bytes(store, b"bytes")

    def refuse(*_args, **_kwargs):
        raise OSError(getattr(errno, errno_name), "refused")

    monkeypatch.setattr(os, "link", refuse)
    dst = store.copy(src, ttl_seconds=900)
    assert get_bytes(store, dst) == b"bytes" and os.stat(tmp_path / dst).st_nlink == 1
    assert_expires_in(store.stat(dst), 900)


@pytest.mark.parametrize("key", ["records/x.ttl", "records/.tmp-x", "../escape", "/abs", "a//b", ""])
def test_file_rejects_reserved_and_unsafe_keys(tmp_path, key: str) -> None:
    store = open_blobstore(f"file://{tmp_path}")
    with pytest.raises(UsageError):
        store.put_at(key, b"x")


# -- S3 only -----------------------------------------------------------------------------------------


def _bucket_and_prefix(s3_url: str) -> tuple[str, str]:
    u = urlparse(s3_url)
    return u.netloc, u.path.strip("/") + "/"


def test_s3_large_put_is_multipart_with_ttl_tags(seaweed, s3_url: str, s3_options: S3Options) -> None:
    store = open_blobstore(s3_url, s3=s3_options)
    key = put_bytes(store, os.urandom(LARGE), ttl_seconds=3600)
    bucket, prefix = _bucket_and_prefix(s3_url)
    head = seaweed.client.head_object(Bucket=bucket, Key=prefix + key)
    assert head["ETag"].strip('"').endswith("-3"), f"expected a 3-part upload, ETag {head['ETag']}"
    tags = {t["Key"]: t["Value"] for t in seaweed.client.get_object_tagging(Bucket=bucket, Key=prefix + key)["TagSet"]}
    assert tags["statectl-ttl"] == "pending"
    store.remove_ttl(key)
    assert seaweed.client.get_object_tagging(Bucket=bucket, Key=prefix + key)["TagSet"] == []
    store.close()


def test_s3_check_writable_refuses_an_identity_that_can_only_read(seaweed_auth) -> None:
    """The read-only identity (Read, List): a conditional PUT that could not land is still AccessDenied (the
    store authorizes before it compares the etag): AuthError, nothing written; the admin passes."""
    bucket = seaweed_auth.make_bucket()
    opts = dict(endpoint_url=seaweed_auth.endpoint, region="us-east-1")
    rw = open_blobstore(f"s3://{bucket}/p", s3=S3Options(**opts, access_key_id="AK", secret_access_key="SK"))
    ro = open_blobstore(f"s3://{bucket}/p", s3=S3Options(**opts, access_key_id=seaweed_auth.readonly_access_key,
                                                         secret_access_key=seaweed_auth.readonly_secret_key))
    try:
        rw.check_writable("leases/x.json")
        with pytest.raises(AuthError) as e:
            ro.check_writable("leases/x.json")
        assert e.value.exit_code == 12 and "AccessDenied" in str(e.value)
        assert seaweed_auth.client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
        assert rw.request_counts().get("check_writable") == 1
    finally:
        rw.close()
        ro.close()


@pytest.mark.parametrize("access_key, secret_key, code", [("AK", "wrong-secret", "SignatureDoesNotMatch"),
                                                          ("NOSUCHKEY", "SK", "InvalidAccessKeyId")])
def test_s3_wrong_credentials_are_auth_error(seaweed_auth, access_key: str, secret_key: str, code: str) -> None:
    bucket = seaweed_auth.make_bucket()
    good = open_blobstore(f"s3://{bucket}/p", s3=S3Options(endpoint_url=seaweed_auth.endpoint, access_key_id="AK",
                                                           secret_access_key="SK"))
    key = put_bytes(good, b"secret data")
    bad = open_blobstore(f"s3://{bucket}/p", s3=S3Options(endpoint_url=seaweed_auth.endpoint,
                                                          access_key_id=access_key, secret_access_key=secret_key))
    calls = {
        "put": lambda: put_bytes(bad, b"x"),
        "get": lambda: bad.get(key, io.BytesIO()),
        "stat": lambda: bad.stat(key),
        "list": lambda: list(bad.list()),
        "remove_ttl": lambda: bad.remove_ttl(key),
        "copy": lambda: bad.copy(key, ttl_seconds=None),
    }
    for name, call in calls.items():
        with pytest.raises(AuthError) as exc:
            call()
        assert exc.value.exit_code == EXIT_AUTH == 12, name
        assert exc.value.hint
        if name not in ("stat", "remove_ttl"):  # HEAD answers carry no error code
            assert code in str(exc.value), (name, str(exc.value))
    assert get_bytes(good, key) == b"secret data"
    good.close()
    bad.close()


def test_s3_missing_bucket_is_not_found_naming_it(seaweed, s3_options: S3Options) -> None:
    store = open_blobstore("s3://no-such-bucket-statectl/p", s3=s3_options)
    calls = {
        "put": lambda: put_bytes(store, b"x"),
        "put_at": lambda: store.put_at("records/a", b"x"),
        "get": lambda: store.get("blobs/00/x", io.BytesIO()),
        "stat": lambda: store.stat("blobs/00/x"),
        "list": lambda: list(store.list()),
        "remove_ttl": lambda: store.remove_ttl("blobs/00/x"),
        "copy": lambda: store.copy("blobs/00/x", ttl_seconds=None),
        "delete": lambda: store.delete(["blobs/00/x"]),
    }
    for name, call in calls.items():
        with pytest.raises(NotFoundError) as exc:
            call()
        # The store is missing, not a blob: callers read BlobNotFoundError as "this blob is gone".
        assert type(exc.value) is BlobStoreMissingError, (name, exc.value)
        assert not isinstance(exc.value, BlobNotFoundError), name
        assert "no-such-bucket-statectl" in str(exc.value), name
        assert exc.value.exit_code == EXIT_NOT_FOUND
    store.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(60)  # a refused connection fails each attempt at once: only the backoff waits
def test_s3_unreachable_endpoint_gives_up_after_retries() -> None:
    options = S3Options(endpoint_url=f"http://127.0.0.1:{_closed_port()}", access_key_id="AK",
                        secret_access_key="SK")
    store = open_blobstore("s3://some-bucket/p", s3=options, retries=2)
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts") as exc:
        store.get("blobs/00/x", io.BytesIO())
    assert not isinstance(exc.value, TransientBlobStoreError)
    assert isinstance(exc.value.__cause__, TransientBlobStoreError)
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts"):
        put_bytes(store, b"data")
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts"):
        list(store.list())
    assert store.request_counts() == {"get": 3, "list": 3, "put": 3}, "every attempt is a request"
    store.close()


def test_s3_ignores_tls_and_proxy_settings_for_loopback(monkeypatch, s3_url: str, s3_options: S3Options) -> None:
    for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.setenv(name, "/nonexistent/ca-bundle.pem")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{_closed_port()}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    store = open_blobstore(s3_url, s3=s3_options, retries=1)
    key = put_bytes(store, b"through no proxy")
    assert get_bytes(store, key) == b"through no proxy"
    store.close()


class _MisbehavingS3(BaseHTTPRequestHandler):
    """Answers every GET with a broken response: a body cut short, or a full body for a ranged GET."""

    mode = "truncate"
    body = bytes(range(256)) * 4

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        self.wfile.write(self.body[:100] if self.mode == "truncate" else self.body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def misbehaving_s3():
    handlers: dict[str, type[_MisbehavingS3]] = {}

    def start(mode: str) -> str:
        handler = type(f"Misbehaving_{mode}", (_MisbehavingS3,), {"mode": mode})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        handlers[mode] = server
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in handlers.values():
        server.shutdown()
        server.server_close()


def test_s3_truncated_body_is_transient_and_retried(misbehaving_s3) -> None:
    options = S3Options(endpoint_url=misbehaving_s3("truncate"), access_key_id="AK", secret_access_key="SK")
    store = open_blobstore("s3://bucket/p", s3=options, retries=2)
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts") as exc:
        store.get("blobs/00/x", io.BytesIO())
    assert isinstance(exc.value.__cause__, TransientBlobStoreError)
    store.close()


def test_s3_server_ignoring_range_is_an_error(misbehaving_s3) -> None:
    options = S3Options(endpoint_url=misbehaving_s3("ignore-range"), access_key_id="AK", secret_access_key="SK")
    store = open_blobstore("s3://bucket/p", s3=options, retries=2)
    assert get_bytes(store, "blobs/00/x") == _MisbehavingS3.body
    with pytest.raises(BlobStoreError, match="ignored the range") as exc:
        store.get("blobs/00/x", io.BytesIO(), start=10, length=5)
    assert not isinstance(exc.value, TransientBlobStoreError)
    store.close()

