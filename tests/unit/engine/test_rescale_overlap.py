"""What a hash-path rescale does beside its Spark job, on a file:// blob store: the source snapshots downloaded
for a local master's executors while the job starts (a damaged one left to the executor, which reports it), and
the targets' files uploaded as the executors finish them, taken by the targets' upload only for a file of the
same inode, size and mtime."""

from __future__ import annotations

import dataclasses
import io
import os
import time
from pathlib import Path

from statectl.blobstore import open_blobstore
from statectl.engine.rescale.build import Prefetch, local_cores
from statectl.engine.rescale.early import EarlyUploads
from statectl.engine.rescale.options import RescaleOptions
from statectl.snapshot.diff import LocalFile
from statectl.spark.rescale_reader import prefetched
from tests.unit.engine.test_rescale import _source


def test_the_sources_are_fetched_ahead_and_a_damaged_one_is_left_to_its_executor(tmp_path: Path):
    payloads = {"000007.sst": b"x" * 5000, "CURRENT": b"MANIFEST-000001\n"}
    blobs, good = _source(tmp_path, payloads)
    bad = {**good, "files": [{**good["files"][0], "checksum": good["files"][0]["checksum"] ^ 1}]}
    into = tmp_path / "work" / "sources"
    assert prefetched(str(into), 0) is None  # no such dir: another machine's executor fetches its own
    with Prefetch([good, bad], blobs, into):
        got = prefetched(str(into), 0)  # waits for it
        assert got == into / "0"
        assert prefetched(str(into), 1) is None  # damaged: the executor fetches it and says so
    assert {n: (got / n).read_bytes() for n in payloads} == payloads
    assert sorted(p.name for p in into.iterdir()) == ["0", "0.ready", "1", "1.failed"]
    assert prefetched(None, 0) is None
    with Prefetch([good], blobs, None):  # not a local master: nothing fetched
        pass
    blobs.close()


def test_the_sources_are_fetched_as_many_at_once_as_a_local_master_runs_tasks():
    assert [local_cores(m) for m in ("local", "local[3]", "local[4,2]", "local-cluster[2,3,1024]")] == [1, 3, 4, 6]
    assert local_cores("local[*]") == (os.cpu_count() or 2)


def test_the_targets_files_upload_as_they_land_and_count_only_for_the_same_file(tmp_path: Path):
    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    out = tmp_path / "build"
    out.mkdir()
    opts = RescaleOptions(store="s", job="j", from_tasks=2, to_tasks=2, ttl_seconds=3600)
    with EarlyUploads(blobs, opts, out) as early:
        (out / ".store-0-0000-0000.sst.tmp-0").write_bytes(b"a" * 3000)  # unfinished: never uploaded
        for name, data in (("store-0-0000-0000.sst", b"a" * 3000), ("store-1-0000-0000.sst", b"b" * 2000)):
            (out / f".{name}.tmp-0").write_bytes(data)
            os.replace(out / f".{name}.tmp-0", out / name)
        while sum(1 for _ in blobs.list("blobs/")) < 2:
            time.sleep(0.02)
        staged = tmp_path / "staged"
        staged.mkdir()
        os.link(out / "store-0-0000-0000.sst", staged / "000008.sst")  # as the ingest links it
        (staged / "000009.sst").write_bytes(b"b" * 2000)  # the same bytes, another file
        (staged / "MANIFEST-000005").write_bytes(b"m")
        files = [LocalFile.from_stat(p, p.stat()) for p in sorted(staged.iterdir())]
        taken = early.take(files)
    assert list(taken) == [0]
    fi = taken[0]
    assert fi.file_name == "000008.sst" and fi.file_metadata == files[0].metadata
    got = io.BytesIO()
    for b in fi.blobs:
        blobs.get(b.blob_id, got)
    assert got.getvalue() == b"a" * 3000
    assert all(blobs.stat(b.blob_id).expires_at is not None for b in fi.blobs)  # gc takes them unless committed
    blobs.close()


class _Shrunk:
    """The file:// store, but every blob stats a byte short: a blob that does not read back as uploaded."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def stat(self, blob_id):
        return dataclasses.replace(self._inner.stat(blob_id), size=self._inner.stat(blob_id).size - 1)


def test_a_file_uploaded_early_counts_only_once_its_blobs_read_back_as_uploaded(tmp_path: Path):
    """The early uploads check their blobs as the targets' upload checks its own: one that does not read back
    as uploaded is not taken (the targets' upload sends the file again, and checks it)."""
    inner = open_blobstore(f"file://{tmp_path / 'blobs'}")
    out = tmp_path / "build"
    out.mkdir()
    opts = RescaleOptions(store="s", job="j", from_tasks=2, to_tasks=2, ttl_seconds=3600)
    with EarlyUploads(_Shrunk(inner), opts, out) as early:
        (out / ".store-0-0000-0000.sst.tmp-0").write_bytes(b"a" * 3000)
        os.replace(out / ".store-0-0000-0000.sst.tmp-0", out / "store-0-0000-0000.sst")
        while not any(True for _ in inner.list("blobs/")):
            time.sleep(0.02)
        files = [LocalFile.from_stat(out / "store-0-0000-0000.sst", (out / "store-0-0000-0000.sst").stat())]
        assert early.take(files) == {}
    inner.close()
