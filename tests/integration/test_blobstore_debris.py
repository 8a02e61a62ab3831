"""BlobStore.sweep_debris, on every backend (through the retry wrapper, as statectl opens stores):
it removes only leftovers of writes that never finished, and only those older than asked."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path


def _leave_a_killed_write(blobstore, tmp_path: Path, request) -> str:
    """What a process killed mid-put leaves: a partial file (file://) or an incomplete multipart upload (S3)."""
    if blobstore.url.startswith("file://"):
        root = Path(blobstore.url[len("file://"):])
        (root / "blobs/ab").mkdir(parents=True, exist_ok=True)
        (root / "blobs/ab/.tmp-abab.0000abcd").write_bytes(b"partial")
        (root / "blobs/ab/abab.ttl").write_bytes(b"1")  # its sidecar, written first
        return "blobs/ab/abab"
    seaweed = request.getfixturevalue("seaweed")
    bucket, prefix = blobstore.url[len("s3://"):].split("/", 1)
    seaweed.client.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/blobs/ab/abab")
    return "blobs/ab/abab"


def test_sweep_debris_removes_only_old_leftovers(blobstore, tmp_path: Path, request):
    keep = blobstore.put(io.BytesIO(b"a finished blob"), size=15, ttl_seconds=3600)
    blobstore.put_at("checkpoints/x/record.json", b"{}")
    assert blobstore.sweep_debris(time.time() + 10) == []  # nothing unfinished yet
    _leave_a_killed_write(blobstore, tmp_path, request)
    assert blobstore.sweep_debris(time.time() - 3600) == []  # too young
    found = blobstore.sweep_debris(time.time() + 10, dry_run=True)
    assert found and all(i.key.startswith("blobs/ab/") for i in found)
    assert blobstore.sweep_debris(time.time() + 10) and blobstore.sweep_debris(time.time() + 10) == []
    assert {i.key for i in blobstore.list("blobs/")} == {keep}
    assert blobstore.stat(keep).expires_at is not None  # its TTL sidecar is no leftover
    assert blobstore.read_at("checkpoints/x/record.json")[0] == b"{}"


def test_file_sweep_stays_in_statectl_dirs(tmp_path: Path):
    """A file:// root may hold other things (a home dir named by mistake): only the leftovers under
    statectl's own top-level dirs are swept, never a user's ``.tmp-*`` or ``*.ttl`` files elsewhere."""
    from statectl.blobstore import open_blobstore
    from statectl.blobstore.base import STATECTL_PREFIXES

    root = tmp_path / "root"
    theirs = [root / "work/.tmp-draft.txt", root / "work/notes.ttl", root / ".tmp-top", root / "top.ttl",
              root / "blobsx/.tmp-near"]
    ours = [root / p / "xy" / ".tmp-partial.0000abcd" for p in STATECTL_PREFIXES]
    for p in theirs + ours:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"data")
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    store = open_blobstore(f"file://{root}")
    found = store.sweep_debris(time.time() - 60)
    assert sorted(i.key for i in found) == sorted(p.relative_to(root).as_posix() for p in ours)
    assert all(p.read_bytes() == b"data" for p in theirs)
    assert not any(p.exists() for p in ours)
    store.close()
