"""The blob store's probe (statectl doctor's ``blob store`` check) against stores that misbehave in one way
each: a real file:// store with one method broken. The real servers are in tests/integration/test_doctor.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statectl.blobstore.base import BlobInfo
from statectl.blobstore.local import LocalBlobStore
from statectl.blobstore.probe import NAMES, probe
from statectl.errors import AuthError, BlobStoreError, TransientBlobStoreError, UsageError
from statectl.probe import Check


class Broken:
    """A LocalBlobStore with some methods replaced."""

    def __init__(self, root: Path, **overrides):
        self.inner = LocalBlobStore(root)
        self.url = self.inner.url
        self.overrides = overrides

    def __getattr__(self, name):
        return self.overrides.get(name) or getattr(self.inner, name)


def check(tmp_path: Path, store, url: str | None = None) -> Check:
    checks = probe(store, url=url or f"file://{tmp_path / 'b'}")
    assert [c.name for c in checks] == list(NAMES) == ["blob store"]
    return checks[0]


def keys(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_healthy_store_passes_and_keeps_nothing(tmp_path: Path):
    c = check(tmp_path, LocalBlobStore(tmp_path / "b"))
    assert (c.status, c.detail, c.hint) == ("ok", f"file://{tmp_path / 'b'}: writable, TTL works", None)
    assert keys(tmp_path / "b") == []


def test_a_store_that_drops_ttls_fails_ttl_tagging(tmp_path: Path):
    store = Broken(tmp_path / "b")
    real_stat = store.inner.stat
    store.overrides["stat"] = lambda key: BlobInfo(**{**real_stat(key).__dict__, "expires_at": None})
    c = check(tmp_path, store)
    assert c.status == "fail"
    assert c.detail == f"file://{tmp_path / 'b'}: TTL tagging does not work: a blob written with a TTL shows no expiry"
    assert "object tags" in c.hint
    assert keys(tmp_path / "b") == []  # the probes are removed after a failure too


def test_a_store_whose_remove_ttl_does_nothing_fails(tmp_path: Path):
    c = check(tmp_path, Broken(tmp_path / "b", remove_ttl=lambda key: None))
    assert c.status == "fail" and "remove_ttl did not clear the TTL of blobs/" in c.detail
    assert keys(tmp_path / "b") == []


def test_access_denied_after_the_first_request_is_a_missing_permission_not_bad_credentials(tmp_path: Path):
    def deny(*a, **kw):
        raise AuthError("s3: put s3://b/blobs/x: access denied (AccessDenied: no)")

    c = check(tmp_path, Broken(tmp_path / "b", put=deny), "s3://bucket/p")
    assert c.status == "fail"
    assert c.detail.startswith("s3://bucket/p: access denied writing a blob with a TTL: ")
    assert "s3:PutObject" in c.hint


def test_credentials_rejected_on_the_first_request(tmp_path: Path):
    def deny(*a, **kw):
        raise AuthError("s3: list s3://b/doctor/: access denied (InvalidAccessKeyId: no)")

    c = check(tmp_path, Broken(tmp_path / "b", list=deny), "s3://bucket/p")
    assert c.detail == ("s3://bucket/p: credentials rejected: s3: list s3://b/doctor/: access denied "
                        "(InvalidAccessKeyId: no)")


def test_ignored_conditional_writes_fail_on_s3(tmp_path: Path):
    store = Broken(tmp_path / "b")
    store.overrides["put_at"] = lambda key, data, **kw: store.inner.put_at(key, data)  # drops the condition
    c = check(tmp_path, store, "s3://bucket/p")
    assert c.status == "fail" and "conditional writes are ignored" in c.detail
    assert keys(tmp_path / "b") == []


def test_a_store_that_keeps_failing_but_answers_is_not_called_unreachable(tmp_path: Path):
    def slow_down(*a, **kw):
        err = BlobStoreError("s3: list s3://b/doctor/: SlowDown (gave up after 2 attempts)")
        err.__cause__ = TransientBlobStoreError("s3: list s3://b/doctor/: SlowDown")
        raise err

    c = check(tmp_path, Broken(tmp_path / "b", list=slow_down), "s3://bucket/p")
    assert c.detail == ("s3://bucket/p: listing doctor/ failed: s3: list s3://b/doctor/: SlowDown "
                        "(gave up after 2 attempts)")


def test_an_unexpected_exception_is_a_finding(tmp_path: Path):
    def boom(*a, **kw):
        raise RuntimeError("boom")

    c = check(tmp_path, Broken(tmp_path / "b", get=boom))
    assert c.status == "fail"
    assert c.detail.endswith(" failed: unexpected RuntimeError: boom") and "reading the blob blobs/" in c.detail
    assert c.hint == "run again with --debug, and report it"
    assert keys(tmp_path / "b") == []


def test_stale_probe_records_are_removed(tmp_path: Path):
    store = LocalBlobStore(tmp_path / "b")
    store.put_at("doctor/old", b"x")
    store.put_at("doctor/new", b"x")
    os.utime(tmp_path / "b" / "doctor" / "old", (0, 0))
    c = check(tmp_path, store)
    assert c.status == "ok" and c.detail.endswith("(removed 1 stale probe under doctor/)")
    assert keys(tmp_path / "b") == ["doctor/new"]


def test_a_store_that_cannot_be_opened_is_a_failed_check(tmp_path: Path):
    from statectl.errors import BlobStoreError as Err

    def fails():
        raise Err("file: cannot create /x: Permission denied")

    c = check(tmp_path, fails)
    assert c.status == "fail"
    assert c.detail == f"file://{tmp_path / 'b'} cannot be opened: file: cannot create /x: Permission denied"


def test_a_usage_error_opening_the_store_is_raised_not_reported(tmp_path: Path):
    def bad_url():
        raise UsageError("invalid blob store URL")

    with pytest.raises(UsageError):
        probe(bad_url, url="file:///x")
