"""S3 server-side encryption (the sse and sse_kms_key_id settings) against a SeaweedFS that encrypts as S3
does: every request that makes an object (PutObject, put_at's conditional PUTs, CreateMultipartUpload,
CopyObject, the CreateMultipartUpload of a multipart copy) carries x-amz-server-side-encryption, and the KMS
key id with aws:kms, as a recording proxy in front of the server sees them; the server stores the objects
encrypted, and they read back as written."""

from __future__ import annotations

import dataclasses
import io
import os
import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlparse

import pytest

from statectl.blobstore import S3Options, open_blobstore
from statectl.errors import BlobStoreError, TransientBlobStoreError
from statectl.local.layout import store_dir
from tests.conftest import TEST_PART_SIZE
from tests.faultproxy import FaultProxy
from tests.servers import SeaweedServer, ServerStartError
from tests.tools.genstore import make_store

MiB = 1024 * 1024
KMS_KEY = SeaweedServer.SSE_KMS_KEY
SSE = "x-amz-server-side-encryption"
KMS_KEY_ID = "x-amz-server-side-encryption-aws-kms-key-id"


@pytest.fixture(scope="module")
def seaweed_sse() -> Iterator[SeaweedServer]:
    try:
        server = SeaweedServer(sse=True).start()
    except ServerStartError as e:
        pytest.fail(f"SeaweedFS did not start: {e}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def proxy(seaweed_sse: SeaweedServer) -> Iterator[FaultProxy]:
    """A proxy without faults that records every request's headers."""
    with FaultProxy(seaweed_sse.endpoint) as p:
        yield p


def _object_writes(proxy: FaultProxy) -> list[tuple[str, str, dict[str, str]]]:
    """The requests that make an object: PutObject and CopyObject (a PUT without partNumber or tagging) and
    CreateMultipartUpload (POST ?uploads)."""
    out = []
    for method, target, headers in proxy.requests:
        params = parse_qs(urlparse(target).query, keep_blank_values=True)
        if (method == "PUT" and not {"partNumber", "tagging"} & params.keys()) or (method == "POST" and "uploads" in params):
            out.append((method, target, headers))
    return out


def _kinds(writes: list[tuple[str, str, dict[str, str]]]) -> set[str]:
    kinds = set()
    for method, target, headers in writes:
        if method == "POST":
            kinds.add("create multipart upload")
        elif "x-amz-copy-source" in headers:
            kinds.add("copy")
        else:
            kinds.add("conditional put" if {"if-match", "if-none-match"} & headers.keys() else "put")
    return kinds


def _encrypted_as(writes: list[tuple[str, str, dict[str, str]]], sse: str, key: str | None) -> None:
    for method, target, headers in writes:
        assert headers.get(SSE) == sse, (method, target, headers)
        assert headers.get(KMS_KEY_ID) == key, (method, target, headers)


@pytest.mark.parametrize("sse, key", [("AES256", None), ("aws:kms", KMS_KEY)], ids=["aes256", "kms"])
def test_every_kind_of_write_carries_the_encryption(seaweed_sse: SeaweedServer, proxy: FaultProxy, sse: str,
                                                    key: str | None):
    bucket = seaweed_sse.make_bucket()
    options = S3Options(endpoint_url=proxy.url, region="us-east-1", access_key_id=seaweed_sse.access_key,
                        secret_access_key=seaweed_sse.secret_key, part_size=TEST_PART_SIZE, max_connections=8,
                        copy_threshold=TEST_PART_SIZE, copy_part_size=TEST_PART_SIZE, sse=sse, sse_kms_key_id=key)
    store = open_blobstore(f"s3://{bucket}/p", s3=options)
    # SeaweedFS cannot UploadPartCopy from an SSE-KMS object (501; AWS can): the multipart copy's source is
    # written without encryption. The copy's encryption is its destination's either way.
    plain = open_blobstore(f"s3://{bucket}/p", s3=dataclasses.replace(options, sse=None, sse_kms_key_id=None))
    small, big = os.urandom(1000), os.urandom(2 * TEST_PART_SIZE + 1)
    try:
        big_plain = plain.put(io.BytesIO(big), size=len(big), ttl_seconds=3600)
        proxy.reset_stats()
        small_key = store.put(io.BytesIO(small), size=len(small), ttl_seconds=3600)
        big_key = store.put(io.BytesIO(big), size=len(big), ttl_seconds=3600)  # a multipart upload
        etag = store.put_at("leases/l.json", b"1", if_none_match=True)
        store.put_at("leases/l.json", b"2", if_match=etag)
        store.put_at("checkpoints/c.json", b"3")
        small_copy = store.copy(small_key, ttl_seconds=3600, size=len(small))
        big_copy = store.copy(big_plain, ttl_seconds=3600, size=len(big), source=plain)  # UploadPartCopy parts
        writes = _object_writes(proxy)
        assert _kinds(writes) == {"put", "create multipart upload", "conditional put", "copy"}, writes
        assert sum(m == "POST" for m, _, _ in writes) == 2  # the upload's and the copy's
        _encrypted_as(writes, sse, key)
        # A part carries nothing of its own: its upload's CreateMultipartUpload said how to encrypt it.
        parts = [h for m, t, h in proxy.requests if m == "PUT" and "partNumber=" in t]
        assert sum("x-amz-copy-source" in h for h in parts) == 3 and len(parts) == 6
        assert not any(SSE in h for h in parts)
        for k, data in ((small_key, small), (big_key, big), (small_copy, small), (big_copy, big)):
            head = seaweed_sse.client.head_object(Bucket=bucket, Key=f"p/{k}")
            assert head.get("ServerSideEncryption") == sse, (k, head)
            assert (head.get("SSEKMSKeyId") is not None) == (key is not None), (k, head)
            out = io.BytesIO()
            store.get(k, out)
            assert out.getvalue() == data
        assert store.read_at("leases/l.json")[0] == b"2"
    finally:
        store.close()
        plain.close()


def test_an_encryption_the_store_does_not_implement_fails_at_once(seaweed_sse: SeaweedServer, proxy: FaultProxy):
    """A 501 NotImplemented (here SeaweedFS's UploadPartCopy from an SSE-KMS source) is no transient error:
    one attempt, not eight retries over a minute, and the hint names the encryption settings."""
    bucket = seaweed_sse.make_bucket()
    options = S3Options(endpoint_url=proxy.url, region="us-east-1", access_key_id=seaweed_sse.access_key,
                        secret_access_key=seaweed_sse.secret_key, part_size=TEST_PART_SIZE,
                        copy_threshold=TEST_PART_SIZE, copy_part_size=TEST_PART_SIZE, sse="aws:kms",
                        sse_kms_key_id=KMS_KEY)
    store = open_blobstore(f"s3://{bucket}/p", s3=options, retries=8)
    try:
        data = os.urandom(TEST_PART_SIZE + 1)
        blob = store.put(io.BytesIO(data), size=len(data), ttl_seconds=3600)
        with pytest.raises(BlobStoreError) as exc:
            store.copy(blob, ttl_seconds=3600, size=len(data))
    finally:
        store.close()
    assert not isinstance(exc.value, TransientBlobStoreError)
    assert "NotImplemented" in str(exc.value) and "gave up" not in str(exc.value)
    assert exc.value.hint is not None and "sse_kms_key_id" in exc.value.hint
    assert sum(m == "POST" and "uploads" in t for m, t, _ in proxy.requests) == 2  # the put's, one copy's


def test_no_encryption_settings_send_no_encryption_headers(seaweed_sse: SeaweedServer, proxy: FaultProxy):
    """The bucket's default encryption decides then, as before: statectl adds no header of its own."""
    bucket = seaweed_sse.make_bucket()
    options = S3Options(endpoint_url=proxy.url, region="us-east-1", access_key_id=seaweed_sse.access_key,
                        secret_access_key=seaweed_sse.secret_key, part_size=TEST_PART_SIZE)
    store = open_blobstore(f"s3://{bucket}/p", s3=options)
    try:
        blob = store.put(io.BytesIO(b"x" * 100), size=100, ttl_seconds=60)
        store.put_at("leases/l.json", b"1", if_none_match=True)
        store.copy(blob, ttl_seconds=60, size=100)
    finally:
        store.close()
    writes = _object_writes(proxy)
    assert len(writes) == 3 and not any(SSE in h or KMS_KEY_ID in h for _, _, h in writes)


def test_backup_and_snapshots_copy_encrypt_every_write(seaweed_sse: SeaweedServer, proxy: FaultProxy, cli,
                                                       tmp_path: Path):
    """statectl backup --sse aws:kms --sse-kms-key-id K of a store with a file above the 64 MiB part size (a
    multipart upload), then snapshots copy within the server to another job with --to-sse AES256: the backup's
    every write (blobs, index, lease, checkpoint record) carries KMS, the copy's (CopyObject, index, lease,
    record) AES256, and its reader pin on the source the source's KMS settings; the copy verifies."""
    bucket = seaweed_sse.make_bucket()
    url = f"s3://{bucket}/statectl/{uuid.uuid4().hex[:6]}"
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 70_000, 1024, sst_mb=128)  # one SST of ~69 MiB
    env = {"STATECTL_S3_ENDPOINT": proxy.url, "STATECTL_S3_REGION": "us-east-1",
           "STATECTL_S3_ACCESS_KEY_ID": seaweed_sse.access_key, "STATECTL_S3_SECRET_ACCESS_KEY": seaweed_sse.secret_key,
           "STATECTL_BLOBSTORE": url, "STATECTL_JOB": "page-views", "STATECTL_STORE": "counts"}
    cli("backup", "--state-dir", str(state), "--chunk-size", "128MiB", "--sse", "aws:kms", "--sse-kms-key-id", KMS_KEY,
        env=env)
    writes = _object_writes(proxy)
    assert {"put", "create multipart upload", "conditional put"} <= _kinds(writes), writes
    _encrypted_as(writes, "aws:kms", KMS_KEY)
    assert any("partNumber=2" in t for _, t, _ in proxy.requests)  # the SST went up in more than one part

    proxy.reset_stats()
    kms = dict(env, STATECTL_SSE="aws:kms", STATECTL_SSE_KMS_KEY_ID=KMS_KEY)  # the source's, as a profile would
    cli("snapshots", "copy", "--to-job", "page-views-staging", "--to-sse", "AES256", env=kms)
    writes = _object_writes(proxy)
    pins = [w for w in writes if "/pins/" in w[1]]
    assert pins and {"copy", "put", "conditional put"} <= _kinds(writes), writes
    _encrypted_as(pins, "aws:kms", KMS_KEY)
    _encrypted_as([w for w in writes if w not in pins], "AES256", None)

    cli("snapshots", "verify", "--download", "--job", "page-views-staging", env=env)
