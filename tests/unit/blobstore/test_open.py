"""open_blobstore's checks of a URL, and the file:// root it opens (no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.blobstore.base import STATECTL_PREFIXES
from statectl.blobstore.local import LocalBlobStore
from statectl.errors import UsageError


@pytest.mark.parametrize("bad", ["\x00", "%00", "\n", "%0a", "%0D", "\t", "%1b", "\x7f", "%7F", "%C2%9B", "\x85"])
@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_control_characters_are_refused(tmp_path: Path, bad: str, scheme: str):
    url = f"file://{tmp_path}/a{bad}b" if scheme == "file" else f"s3://bucket/a{bad}b"
    with pytest.raises(UsageError, match="control character"):
        open_blobstore(url)
    assert list(tmp_path.iterdir()) == []


def test_printable_urls_still_open(tmp_path: Path):
    for name in ("with space", "percent%25sign", "ünïcödé", "a%20b"):
        store = open_blobstore(f"file://{tmp_path}/{name}")
        assert store.root.is_dir()
        store.close()


def test_the_root_is_resolved_like_the_os_does(tmp_path: Path):
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "inner")
    store = open_blobstore(f"file://{tmp_path}/link/../blobs")
    assert store.root == tmp_path / "real" / "blobs"
    assert store.root.is_dir() and not (tmp_path / "blobs").exists()
    store.close()
    assert LocalBlobStore(tmp_path / "link").root == tmp_path / "real" / "inner"


def test_a_root_resolving_to_slash_is_refused(tmp_path: Path):
    (tmp_path / "slash").symlink_to("/")
    for url in (f"file://{tmp_path}/slash", f"file://{tmp_path}/slash/.", "file:///", "file:///.."):
        with pytest.raises(UsageError, match="filesystem root"):
            open_blobstore(url)
    with pytest.raises(UsageError):
        LocalBlobStore(tmp_path / "slash")


def test_the_wrapper_exposes_the_root(tmp_path: Path):
    assert open_blobstore(f"file://{tmp_path}/b").root == tmp_path / "b"
    assert open_blobstore("s3://bucket/p").root is None


def test_every_engine_prefix_is_a_statectl_prefix():
    # The file:// debris sweep walks these dirs only: a prefix the engine writes under and the sweep
    # does not know would collect leftovers for ever.
    from statectl.blobstore.base import BLOB_PREFIX
    from statectl.catalog.records import CHECKPOINT_PREFIX
    from statectl.engine.doctor import DOCTOR_PREFIX
    from statectl.catalog.lease import LEASE_PREFIX
    from statectl.catalog.pins import PIN_PREFIX
    from statectl.catalog.rescales import RESCALE_PREFIX

    assert {BLOB_PREFIX, CHECKPOINT_PREFIX, LEASE_PREFIX, DOCTOR_PREFIX, PIN_PREFIX, RESCALE_PREFIX} == \
        set(STATECTL_PREFIXES)
    assert all(p.endswith("/") and p.count("/") == 1 for p in STATECTL_PREFIXES)


def test_a_file_store_is_the_real_path_of_its_dir_whatever_spells_it(tmp_path: Path, monkeypatch):
    (tmp_path / "fb").mkdir()
    (tmp_path / "ln").symlink_to(tmp_path / "fb")
    monkeypatch.chdir(tmp_path)
    urls = [f"file://{tmp_path}/fb", f"file://{tmp_path}/./fb", f"file://{tmp_path}/fb/", f"file://{tmp_path}//fb",
            f"file://{tmp_path}/ln", f"file://{tmp_path}/x/../fb", f"file://localhost{tmp_path}/fb"]
    stores = [open_blobstore(u) for u in urls]
    assert {s.identity for s in stores} == {("file", str(tmp_path / "fb"))}
    other = open_blobstore(f"file://{tmp_path}/fb2")
    assert other.identity != stores[0].identity
    for s in [*stores, other]:
        s.close()


def test_an_s3_store_is_its_endpoint_bucket_and_normalised_prefix():
    from statectl.blobstore import S3Options

    def ident(url: str, endpoint: str | None = "http://127.0.0.1:9000", key: str = "AK") -> tuple[str, ...]:
        store = open_blobstore(url, s3=S3Options(endpoint_url=endpoint, region="us-east-1", access_key_id=key,
                                                 secret_access_key="SK"))
        try:
            return store.identity
        finally:
            store.close()

    one = ident("s3://bk1/p")
    for same in ("s3://bk1/p/", "s3://bk1//p", "s3://bk1/p//", "s3://bk1/./p"):
        assert ident(same) == one, same
    assert ident("s3://bk1/p", "HTTP://127.0.0.1:9000/") == one
    assert ident("s3://bk1/p", key="another identity") == one  # credentials are not the store
    assert ident("s3://bk1/a//b") == ident("s3://bk1/a/b")
    for other in ("s3://bk1/q", "s3://bk1", "s3://bk2/p", "s3://bk1/p/q"):
        assert ident(other) != one, other
    assert ident("s3://bk1/p", "http://127.0.0.1:9001") != one
    assert ident("s3://bk1/p", "https://s3.example.com:443") == ident("s3://bk1/p", "https://S3.example.com")
    assert ident("s3://bk1/p", None)[1] == ""


@pytest.mark.parametrize("sse, key, message", [
    ("aes256", None, "unknown server-side encryption 'aes256': expected AES256 or aws:kms"),
    (None, "alias/k", "a KMS key id needs server-side encryption aws:kms, not none"),
    ("AES256", "alias/k", "a KMS key id needs server-side encryption aws:kms, not AES256"),
])
def test_s3_encryption_settings_that_cannot_work_are_refused(sse, key, message):
    from statectl.blobstore import S3Options

    with pytest.raises(UsageError, match=f"^{message}$"):
        open_blobstore("s3://bucket/p", s3=S3Options(endpoint_url="http://127.0.0.1:9", sse=sse, sse_kms_key_id=key))
