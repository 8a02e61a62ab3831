"""The doctor's blob store check against stores that misbehave in one way each (a real file:// store
with one method broken), and its small parsers. The real servers are in tests/integration/test_doctor.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.blobstore.base import BlobInfo
from statectl.blobstore.local import LocalBlobStore
from statectl.engine.doctor import DoctorOptions, check_blobstore, doctor, java_major
from statectl.errors import AuthError, BlobStoreError, TransientBlobStoreError, UsageError


class Broken:
    """A LocalBlobStore with some methods replaced."""

    def __init__(self, root: Path, **overrides):
        self.inner = LocalBlobStore(root)
        self.url = self.inner.url
        self.overrides = overrides

    def __getattr__(self, name):
        return self.overrides.get(name) or getattr(self.inner, name)


def opts(tmp_path: Path, url: str | None = None, **kw) -> DoctorOptions:
    return DoctorOptions(blobstore_url=url or f"file://{tmp_path / 'b'}", **kw)


def keys(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_healthy_store_passes_and_keeps_nothing(tmp_path: Path):
    store = LocalBlobStore(tmp_path / "b")
    c = check_blobstore(opts(tmp_path), store)
    assert (c.status, c.detail) == ("ok", f"file://{tmp_path / 'b'}: writable, TTL works")
    assert keys(tmp_path / "b") == []


def test_a_store_that_drops_ttls_fails_ttl_tagging(tmp_path: Path):
    store = Broken(tmp_path / "b")
    real_stat = store.inner.stat
    store.overrides["stat"] = lambda key: BlobInfo(**{**real_stat(key).__dict__, "expires_at": None})
    c = check_blobstore(opts(tmp_path), store)
    assert c.status == "fail"
    assert c.detail == f"file://{tmp_path / 'b'}: TTL tagging does not work: a blob written with a TTL shows no expiry"
    assert "object tags" in c.hint
    assert keys(tmp_path / "b") == []  # the probes are removed after a failure too


def test_a_store_whose_remove_ttl_does_nothing_fails(tmp_path: Path):
    store = Broken(tmp_path / "b", remove_ttl=lambda key: None)
    c = check_blobstore(opts(tmp_path), store)
    assert c.status == "fail" and "remove_ttl did not clear the TTL of blobs/" in c.detail
    assert keys(tmp_path / "b") == []


def test_access_denied_after_the_first_request_is_a_missing_permission_not_bad_credentials(tmp_path: Path):
    def deny(*a, **kw):
        raise AuthError("s3: put s3://b/blobs/x: access denied (AccessDenied: no)")

    c = check_blobstore(opts(tmp_path, "s3://bucket/p"), Broken(tmp_path / "b", put=deny))
    assert c.status == "fail"
    assert c.detail.startswith("s3://bucket/p: access denied writing a blob with a TTL: ")
    assert "s3:PutObject" in c.hint


def test_credentials_rejected_on_the_first_request(tmp_path: Path):
    def deny(*a, **kw):
        raise AuthError("s3: list s3://b/doctor/: access denied (InvalidAccessKeyId: no)")

    c = check_blobstore(opts(tmp_path, "s3://bucket/p"), Broken(tmp_path / "b", list=deny))
    assert c.detail == "s3://bucket/p: credentials rejected: s3: list s3://b/doctor/: access denied (InvalidAccessKeyId: no)"


def test_ignored_conditional_writes_fail_on_s3(tmp_path: Path):
    store = Broken(tmp_path / "b")
    store.overrides["put_at"] = lambda key, data, **kw: store.inner.put_at(key, data)  # drops the condition
    c = check_blobstore(opts(tmp_path, "s3://bucket/p"), store)
    assert c.status == "fail" and "conditional writes are ignored" in c.detail
    assert keys(tmp_path / "b") == []


def test_a_store_that_keeps_failing_but_answers_is_not_called_unreachable(tmp_path: Path):
    def slow_down(*a, **kw):
        err = BlobStoreError("s3: list s3://b/doctor/: SlowDown (gave up after 2 attempts)")
        err.__cause__ = TransientBlobStoreError("s3: list s3://b/doctor/: SlowDown")
        raise err

    c = check_blobstore(opts(tmp_path, "s3://bucket/p"), Broken(tmp_path / "b", list=slow_down))
    assert c.detail == "s3://bucket/p: listing doctor/ failed: s3: list s3://b/doctor/: SlowDown (gave up after 2 attempts)"


def test_stale_probe_records_are_removed(tmp_path: Path):
    import os

    store = LocalBlobStore(tmp_path / "b")
    store.put_at("doctor/old", b"x")
    store.put_at("doctor/new", b"x")
    old = tmp_path / "b" / "doctor" / "old"
    os.utime(old, (0, 0))
    c = check_blobstore(opts(tmp_path), store)
    assert c.status == "ok" and c.detail.endswith("(removed 1 stale probe under doctor/)")
    assert keys(tmp_path / "b") == ["doctor/new"]


def test_a_usage_error_opening_the_store_is_raised_not_reported(tmp_path: Path):
    def bad_url():
        raise UsageError("invalid blob store URL")

    with pytest.raises(UsageError):
        doctor(opts(tmp_path), bad_url)


@pytest.mark.parametrize("kw, message", [
    ({"timeout_s": 0}, "--timeout"),
    ({"kafka": " , "}, "no Kafka brokers"),
    ({"job": "a/b"}, "checkpoint topic"),
])
def test_bad_options_are_usage_errors_before_any_check(tmp_path: Path, kw, message):
    with pytest.raises(UsageError, match=message):
        doctor(opts(tmp_path, **kw), lambda: pytest.fail("no check may run"))


@pytest.mark.parametrize("version, major", [("17.0.15", 17), ("1.8.0_392", 8), ("21", 21), ("11.0.2-ea", 11),
                                            ("x", None)])
def test_java_major(version: str, major):
    assert java_major(version) == major
