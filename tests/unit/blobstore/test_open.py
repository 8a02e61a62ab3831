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
