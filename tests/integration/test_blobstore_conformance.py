"""One conformance suite for every BlobStore backend (file:// and s3:// on a real SeaweedFS).

The ``blobstore`` fixture runs each conformance test once per backend. S3-only behaviour (credentials,
buckets, endpoints) and the retry wrapper's own contract follow at the end.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pytest

from statectl.blobstore import BlobStore, S3Options, open_blobstore
from statectl.blobstore.base import BLOB_PREFIX, BlobInfo
from statectl.blobstore.retry import RetryingBlobStore
from statectl.errors import (
    EXIT_AUTH,
    EXIT_NOT_FOUND,
    AuthError,
    BlobNotFoundError,
    BlobStoreError,
    NotFoundError,
    PreconditionFailedError,
    TransientBlobStoreError,
    UsageError,
)

MiB = 1024 * 1024
LARGE = 12 * MiB + 12345  # three parts at the tests' 5 MiB part size, the last one short
TTL_SLACK = 60  # seconds of clock and request latency tolerated around an expected expiry


def put_bytes(store: BlobStore, data: bytes, ttl_seconds: int | None = None) -> str:
    return store.put(io.BytesIO(data), size=len(data), ttl_seconds=ttl_seconds)


def get_bytes(store: BlobStore, key: str, **kwargs) -> bytes:
    out = io.BytesIO()
    n = store.get(key, out, **kwargs)
    assert n == len(out.getvalue())
    return out.getvalue()


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
def test_put_from_short_source_fails_and_leaves_nothing(blobstore: BlobStore, have: int, size: int) -> None:
    started = time.monotonic()
    with pytest.raises(BlobStoreError, match="early") as exc:
        blobstore.put(io.BytesIO(os.urandom(have)), size=size, ttl_seconds=3600)
    assert not isinstance(exc.value, TransientBlobStoreError)
    assert time.monotonic() - started < 10, "a short source must fail at once, not at the read timeout"
    assert list(blobstore.list()) == []


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
    blobstore.delete(key)
    blobstore.delete(key)
    blobstore.delete("blobs/00/never-existed")
    with pytest.raises(BlobNotFoundError):
        blobstore.stat(key)
    assert list(blobstore.list()) == []


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
    blobstore.delete(key)
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


def test_delete_many(blobstore: BlobStore) -> None:
    keys = [put_bytes(blobstore, b"x") for _ in range(5)]
    blobstore.delete_many(keys[:3] + ["blobs/00/missing"])
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
        "delete": lambda: store.delete("blobs/00/x"),
    }
    for name, call in calls.items():
        with pytest.raises(NotFoundError) as exc:
            call()
        # Not BlobNotFoundError: callers read that as "this blob is gone", not "wrong bucket".
        assert type(exc.value) is NotFoundError, (name, exc.value)
        assert "no-such-bucket-statectl" in str(exc.value), name
        assert exc.value.exit_code == EXIT_NOT_FOUND
    store.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_s3_unreachable_endpoint_gives_up_after_retries() -> None:
    options = S3Options(endpoint_url=f"http://127.0.0.1:{_closed_port()}", access_key_id="AK",
                        secret_access_key="SK")
    store = open_blobstore("s3://some-bucket/p", s3=options, retries=2)
    started = time.monotonic()
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts") as exc:
        store.get("blobs/00/x", io.BytesIO())
    assert not isinstance(exc.value, TransientBlobStoreError)
    assert isinstance(exc.value.__cause__, TransientBlobStoreError)
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts"):
        put_bytes(store, b"data")
    assert time.monotonic() - started < 20
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


class _FaultyS3(BaseHTTPRequestHandler):
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
def faulty_s3():
    handlers: dict[str, type[_FaultyS3]] = {}

    def start(mode: str) -> str:
        handler = type(f"Faulty_{mode}", (_FaultyS3,), {"mode": mode})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        handlers[mode] = server
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in handlers.values():
        server.shutdown()
        server.server_close()


def test_s3_truncated_body_is_transient_and_retried(faulty_s3) -> None:
    options = S3Options(endpoint_url=faulty_s3("truncate"), access_key_id="AK", secret_access_key="SK")
    store = open_blobstore("s3://bucket/p", s3=options, retries=2)
    with pytest.raises(BlobStoreError, match="gave up after 3 attempts") as exc:
        store.get("blobs/00/x", io.BytesIO())
    assert isinstance(exc.value.__cause__, TransientBlobStoreError)
    store.close()


def test_s3_server_ignoring_range_is_an_error(faulty_s3) -> None:
    options = S3Options(endpoint_url=faulty_s3("ignore-range"), access_key_id="AK", secret_access_key="SK")
    store = open_blobstore("s3://bucket/p", s3=options, retries=2)
    assert get_bytes(store, "blobs/00/x") == _FaultyS3.body
    with pytest.raises(BlobStoreError, match="ignored the range") as exc:
        store.get("blobs/00/x", io.BytesIO(), start=10, length=5)
    assert not isinstance(exc.value, TransientBlobStoreError)
    store.close()


# -- RetryingBlobStore (a fake inner store: the real backends are covered above) -----------------------


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
