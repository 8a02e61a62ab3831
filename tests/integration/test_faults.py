"""Backup and restore against an S3 store that fails: 503 SlowDown, 500 InternalError, connection resets
and truncated bodies injected by a proxy (tests/faultproxy.py), and a store that goes down for good.

Passing faults must be retried to success with the same bytes in the end; a store that stays down must
fail the command cleanly: a BlobStoreError (exit 1), the previous snapshot still the latest, the local
store and a restore's target exactly as they were, no temp dir left.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.index import read_index
from statectl.catalog.refs import StoreRef
from statectl.local.layout import local_checkpoint_dirs, store_dir
from statectl.catalog.lease import lease_key
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import BlobStoreError
from tests.faultproxy import KINDS
from tests.tools.genstore import fingerprint, make_store
from tests.tools.gcwait import past_mtime_grain

REF = StoreRef("faults", "1", "Partition 0", "counts")
MiB = 1024 * 1024
STATECTL = str(Path(sys.executable).parent / "statectl")


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    d = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(d, 3000, 1024, seed=1, sst_mb=1)
    return d


def listing(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: (kind, size, mtime ns, mode, sha256 of a file's bytes)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
            out[str(p.relative_to(root))] = ("dir" if p.is_dir() else "file", st.st_size, st.st_mtime_ns,
                                             st.st_mode, digest)
    return out


def add_small_files(cp: Path, n: int, size: int, seed: int) -> None:
    """Extra small files in a checkpoint dir: each is a blob to put, make permanent and fetch, so a run
    makes enough requests for every fault kind to come up at 5 %."""
    import random

    rng = random.Random(seed)
    (cp / "extra").mkdir(exist_ok=True)
    for i in range(n):
        (cp / "extra" / f"f{seed}-{i:03d}.bin").write_bytes(rng.randbytes(size))


def assert_committed_cleanly(bs, ref: StoreRef, checkpoint_id: str) -> None:
    """The latest snapshot is ``checkpoint_id``, its cleanup done and every blob it needs present and
    permanent: faults in the post-commit cleanup were retried, not skipped."""
    latest = BlobCheckpointStore(bs).latest(ref)
    assert latest is not None and latest.checkpoint_id == checkpoint_id
    assert latest.cleanup_done
    for key in read_index(bs, latest.index_blob_id).present_blob_ids():
        assert bs.stat(key).expires_at is None, key


def test_the_proxy_relays_byte_for_byte(faulty_s3):
    """Without faults the proxy is transparent: chunked and Content-Length uploads (with Expect:
    100-continue), ranged GETs, HEAD and 204 answers, all on one keep-alive connection."""
    import http.client

    proxy, bucket = faulty_s3.proxy, faulty_s3.bucket
    data = os.urandom(3 * MiB + 17)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    conn.request("PUT", f"/{bucket}/chunked", body=(data[i:i + 100_000] for i in range(0, len(data), 100_000)),
                 encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
    assert conn.getresponse().read() == b""
    conn.request("PUT", f"/{bucket}/sized", body=data, headers={"Expect": "100-continue"})
    assert conn.getresponse().read() == b""
    for key in ("chunked", "sized"):
        conn.request("GET", f"/{bucket}/{key}")
        assert conn.getresponse().read() == data
        conn.request("GET", f"/{bucket}/{key}", headers={"Range": "bytes=5-99"})
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (206, data[5:100])
        conn.request("HEAD", f"/{bucket}/{key}")
        resp = conn.getresponse()
        assert (resp.status, resp.getheader("Content-Length"), resp.read()) == (200, str(len(data)), b"")
    conn.request("DELETE", f"/{bucket}/sized")
    assert conn.getresponse().status == 204
    conn.close()
    stats = proxy.stats()
    assert stats["requests"] == stats["forwarded"] == 9 and stats["faults"] == stats["broken"] == 0


def test_backup_incremental_and_restore_survive_5_percent_faults(faulty_s3, sdir: Path, tmp_path: Path):
    from statectl.rocks.store import create_checkpoint

    proxy = faulty_s3.proxy
    bs = faulty_s3.open()
    cps = BlobCheckpointStore(bs)
    proxy.set_rate(0.05)

    cp1 = sdir.with_name(sdir.name + "-1700000000000-1")
    create_checkpoint(sdir, cp1)
    add_small_files(cp1, 120, 2000, seed=1)
    full = backup(BackupOptions(REF, sdir, checkpoint_dir=cp1, parallelism=4, chunk_size=MiB), bs, cps)
    assert full.files_uploaded == full.files_total

    make_store(sdir, 1500, 1024, seed=2, start=3000, sst_mb=1)  # new SST files
    cp2 = sdir.with_name(sdir.name + "-1700000000001-2")
    create_checkpoint(sdir, cp2)
    add_small_files(cp2, 120, 2000, seed=1)  # the same bytes: retained, not uploaded again
    add_small_files(cp2, 40, 2000, seed=2)
    inc = backup(BackupOptions(REF, sdir, checkpoint_dir=cp2, parallelism=4, chunk_size=MiB), bs, cps)
    assert 0 < inc.files_uploaded < inc.files_total

    target = tmp_path / "restored" / "counts"
    rr = restore(RestoreOptions(REF, tmp_path / "none", target_dir=target, parallelism=4, range_size=MiB), bs, cps)
    assert rr.snapshot_id == inc.snapshot_id and rr.files_downloaded == rr.files_total

    proxy.set_rate(0.0)
    assert fingerprint(target) == fingerprint(cp2) == fingerprint(sdir)
    for p in (cp2 / "extra").iterdir():
        assert (target / "extra" / p.name).read_bytes() == p.read_bytes()
    assert not [p.name for p in target.parent.iterdir() if p.name.startswith(".")]
    assert_committed_cleanly(faulty_s3.open_direct(), REF, inc.checkpoint_id)

    stats = proxy.stats()
    print("fault proxy at 5 %:", stats)
    # Enough traffic that 5 % means a few dozen faults, of every kind (the count of requests itself is not
    # the point: it fell when cleanups stopped sending a HEAD before each DeleteObjectTagging).
    assert stats["requests"] > 400 and stats["faults"] >= 15, stats
    for kind in KINDS:
        assert stats[kind] > 0, (kind, stats)
    assert stats["down"] == stats["upstream_errors"] == stats["broken"] == 0


def test_backup_and_restore_survive_25_percent_faults_with_more_retries(faulty_s3, sdir: Path, tmp_path: Path):
    """A quarter of all requests fail; 20 retries see everything through, a multipart upload included
    (an 11 MiB file in one 16 MiB chunk goes up in three parts)."""
    from statectl.rocks.store import create_checkpoint

    proxy = faulty_s3.proxy
    bs = faulty_s3.open(retries=20)
    bs.max_delay = 0.5  # runs of 5+ failures are common at 25 %: keep their backoff (up to 5 s) short here
    cps = BlobCheckpointStore(bs)
    cp = sdir.with_name(sdir.name + "-1700000000000-3")
    create_checkpoint(sdir, cp)
    (cp / "big.bin").write_bytes(os.urandom(11 * MiB))
    add_small_files(cp, 10, 2000, seed=3)
    proxy.set_rate(0.25)

    r = backup(BackupOptions(REF, sdir, checkpoint_dir=cp, parallelism=4, chunk_size=16 * MiB), bs, cps)
    target = tmp_path / "restored"
    restore(RestoreOptions(REF, tmp_path / "none", target_dir=target, parallelism=4, range_size=MiB), bs, cps)

    proxy.set_rate(0.0)
    assert fingerprint(target) == fingerprint(cp)
    assert (target / "big.bin").read_bytes() == (cp / "big.bin").read_bytes()
    assert_committed_cleanly(faulty_s3.open_direct(), REF, r.checkpoint_id)
    stats = proxy.stats()
    print("fault proxy at 25 %:", stats)
    assert stats["faults"] > stats["requests"] * 0.15
    assert any(m == "POST" and "uploads" in t for m, t, _ in proxy.log)  # it did go up as a multipart upload


def test_a_conditional_write_whose_answer_was_lost_is_not_a_lost_race(faulty_s3, sdir: Path):
    """The backup's first request takes the store's lease with a conditional write (If-None-Match).
    The store executes it, but the answer is a 500: the retry then meets the lease it just wrote, which
    must count as taken, not as another backup holding it (exit 11)."""
    bs = faulty_s3.open()
    cps = BlobCheckpointStore(bs)
    faulty_s3.proxy.inject_next("internal")
    r = backup(BackupOptions(REF, sdir, chunk_size=MiB), bs, cps)
    method, target, fault = faulty_s3.proxy.log[0]
    assert (method, "/leases/" in target, fault) == ("PUT", True, "internal")
    assert faulty_s3.proxy.stats()["internal"] == 1
    assert cps.latest(REF).checkpoint_id == r.checkpoint_id
    # The etag it adopted was the right one: the lease was renewed and released, the next backup runs.
    assert json.loads(faulty_s3.open_direct().read_at(lease_key(REF))[0])["released"] is True
    assert backup(BackupOptions(REF, sdir, chunk_size=MiB), bs, cps).checkpoint_id != r.checkpoint_id


def test_a_response_cut_right_after_its_head_is_not_taken_for_an_empty_one(faulty_s3, sdir: Path):
    """A listing or tag set whose connection closes right after the head has an empty body, which
    botocore would parse as "no objects" / "no tags": the latest snapshot would vanish, a TTL'd blob
    look permanent. The short body must be an error, and the retry must see the real answer."""
    bs = faulty_s3.open()
    cps = BlobCheckpointStore(bs)
    r = backup(BackupOptions(REF, sdir, chunk_size=MiB), bs, cps)
    pending = bs.put(io.BytesIO(b"x" * 100), size=100, ttl_seconds=3600)
    proxy = faulty_s3.proxy
    proxy.truncate_at = 0.0
    checks = [lambda: cps.latest(REF).checkpoint_id, lambda: sorted(i.key for i in bs.list("blobs/")),
              lambda: bs.stat(pending).expires_at is not None]
    for check in checks:
        expected = check()
        proxy.inject_next("truncate")
        assert check() == expected
    assert checks[0]() == r.checkpoint_id and checks[2]() is True
    assert proxy.stats()["truncate"] == len(checks)


def test_a_body_read_straight_into_the_sinks_buffer(faulty_s3, tmp_path: Path, monkeypatch):
    """A restore's sink (CrcSink) takes each GET's body from the socket into its own buffer: the same bytes and
    CRC as a plain read, whole or as a range, the connection back in the pool for the next GET. A blob longer
    than the index says, or a body cut short, fails as with a plain read (the short body the same transient
    error, retried whole), and its connection is never reused."""
    import zlib

    from statectl.blobstore import s3 as s3_mod
    from statectl.errors import ChecksumMismatchError, TransientBlobStoreError
    from statectl.progress import NullProgress
    from statectl.transfer.sink import CrcSink

    into = []
    real = s3_mod.read_into
    monkeypatch.setattr(s3_mod, "read_into", lambda *a: into.append(1) or real(*a))
    data = os.urandom(3 * MiB + 17)
    blob = faulty_s3.open_direct().put(io.BytesIO(data), size=len(data), ttl_seconds=None)
    bs, proxy = faulty_s3.open(retries=0), faulty_s3.proxy
    assert bs.get(blob, io.BytesIO(), start=len(data)) == 0  # the connection is open from here on
    proxy.reset_stats()
    dest = tmp_path / "out"
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        whole = CrcSink(NullProgress(), fd=fd, limit=len(data))
        assert bs.get(blob, whole) == len(data)
    finally:
        os.close(fd)
    assert dest.read_bytes() == data and whole.crc == zlib.crc32(data)
    part = CrcSink(NullProgress(), limit=MiB, allow_more=True)
    assert bs.get(blob, part, start=MiB, length=MiB) == MiB and part.crc == zlib.crc32(data[MiB:2 * MiB])
    assert len(into) == 2 and proxy.stats()["connections"] == 0  # one connection, reused

    with pytest.raises(ChecksumMismatchError, match="longer than the index says"):
        bs.get(blob, CrcSink(NullProgress(), limit=len(data) - 1))
    proxy.truncate_at = 0.5
    errors = []
    for dst in (io.BytesIO(), CrcSink(NullProgress(), limit=len(data))):  # a plain read, then into the buffer
        proxy.inject_next("truncate")
        with pytest.raises(BlobStoreError) as e:
            bs.get(blob, dst)
        errors.append(e.value)
    assert all(isinstance(e.__cause__, TransientBlobStoreError) for e in errors), errors
    assert str(errors[1]).startswith(f"s3: get s3://{faulty_s3.bucket}/"), errors
    assert len(into) == 4 and proxy.stats()["connections"] == 2  # each GET after a failure on a new one
    assert bs.get(blob, CrcSink(NullProgress(), limit=len(data))) == len(data)
    assert proxy.stats()["connections"] == 3

    proxy.inject_next("truncate")
    again = CrcSink(NullProgress(), limit=len(data))
    assert faulty_s3.open().get(blob, again) == len(data) and again.crc == zlib.crc32(data)
    assert proxy.stats()["truncate"] == 3


def run_cli(faulty_s3, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([STATECTL, *args, "--blobstore", faulty_s3.url, "--job", REF.job, "--task", REF.task,
                           "--store", REF.store],
                          env=faulty_s3.cli_env(tmp_path, retries=1), cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


def assert_failed_cleanly(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith("Error: s3: "), proc.stderr
    assert "gave up after 2 attempts" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_backup_with_the_store_down_for_good_fails_cleanly(faulty_s3, sdir: Path, tmp_path: Path):
    bs = faulty_s3.open()
    cps = BlobCheckpointStore(bs)
    first = backup(BackupOptions(REF, sdir, chunk_size=MiB), bs, cps)
    make_store(sdir, 1000, 1024, seed=5, start=3000, sst_mb=1)
    before, checkpoint_dirs = listing(sdir.parent), set(local_checkpoint_dirs(sdir))

    faulty_s3.proxy.set_down(True)
    proc = run_cli(faulty_s3, tmp_path, "backup", "--store-dir", str(sdir), "--chunk-size", "1MiB")
    assert_failed_cleanly(proc)
    assert faulty_s3.proxy.stats()["down"] > 0
    assert listing(sdir.parent) == before  # not even opened: the store is checked before the checkpoint

    # The store dies in the middle of the upload: the new checkpoint dir is removed, nothing commits.
    # (About 8 requests come before the first upload: lease, catalog, previous index; then a stat of
    # each blob the new snapshot keeps from the previous one, at most one per file of that one.)
    faulty_s3.proxy.set_down(True, after=12 + first.files_total)
    with pytest.raises(BlobStoreError) as e:
        backup(BackupOptions(REF, sdir, chunk_size=MiB), faulty_s3.open(retries=1), cps)
    assert "gave up after 2 attempts" in str(e.value)
    assert set(local_checkpoint_dirs(sdir)) == checkpoint_dirs

    faulty_s3.proxy.set_down(False)
    direct = faulty_s3.open_direct()
    direct_cps = BlobCheckpointStore(direct)
    assert_committed_cleanly(direct, REF, first.checkpoint_id)
    latest = direct_cps.latest(REF)
    needed = set(read_index(direct, latest.index_blob_id).present_blob_ids()) | {latest.index_blob_id}
    leftovers = [i.key for i in direct.list("blobs/") if i.key not in needed]
    assert leftovers  # the chunks uploaded before the store went down ...
    for key in leftovers:
        assert direct.stat(key).expires_at is not None  # ... carry their TTL: gc or the TTL reclaims them
    assert fingerprint(sdir)[0] == 4000


def test_restore_with_the_store_down_for_good_fails_cleanly(faulty_s3, sdir: Path, tmp_path: Path):
    bs = faulty_s3.open()
    cps = BlobCheckpointStore(bs)
    backup(BackupOptions(REF, sdir, chunk_size=MiB), bs, cps)
    # A different store sits where the restore goes: every file has to be downloaded.
    other = tmp_path / "other" / "counts"
    make_store(other, 2000, 1024, seed=9, sst_mb=1)
    before, print_before = listing(other), fingerprint(other)
    assert listing(other) == before

    faulty_s3.proxy.set_down(True)
    proc = run_cli(faulty_s3, tmp_path, "restore", "--store-dir", str(other))
    assert_failed_cleanly(proc)
    assert listing(other) == before
    faulty_s3.proxy.set_down(False)

    # Down for the last two requests, once the temp dir is being filled: the last downloads, or the reads of
    # the reader pin's check, which runs on a thread beside them (which come last is the scheduler's choice).
    # Each restore reads blobs and catalog through one store of its own, the failing one with one retry.
    def opened(retries: int) -> tuple:
        store = faulty_s3.open(retries=retries)
        return store, BlobCheckpointStore(store)

    probe = tmp_path / "probe" / "counts"  # the same restore, to count its requests
    shutil.copytree(other, probe)
    stats = faulty_s3.proxy.stats()
    restore(RestoreOptions(REF, probe, parallelism=2, range_size=MiB), *opened(8))
    used = faulty_s3.proxy.stats()["forwarded"] - stats["forwarded"]
    faulty_s3.proxy.reset_stats()
    faulty_s3.proxy.set_down(True, after=used - 2)
    with pytest.raises(BlobStoreError) as e:
        restore(RestoreOptions(REF, other, parallelism=2, range_size=MiB), *opened(1))
    assert "gave up after 2 attempts" in str(e.value)
    blob_gets = [t for m, t, f in faulty_s3.proxy.log if m == "GET" and "/blobs/" in t and f is None]
    assert len(blob_gets) >= 3  # the index, then files: the temp dir was being filled

    assert listing(other) == before
    assert fingerprint(other) == print_before
    assert sorted(p.name for p in other.parent.iterdir()) == ["counts"]  # no temp dir beside it


def test_gc_survives_5_percent_faults_and_fails_cleanly_when_the_store_is_down(faulty_s3, sdir: Path,
                                                                                tmp_path: Path, monkeypatch):
    """gc under faults deletes exactly what is garbage; with the store down it fails (exit 1) and every
    blob a retained snapshot needs is still there."""
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # S3 objects cannot be backdated
    import time

    from statectl.engine.gc import GcOptions, gc

    direct = faulty_s3.open_direct()
    dcps = BlobCheckpointStore(direct)
    for n in range(3):
        if n:
            make_store(sdir, 400, 1024, seed=10 + n, start=10_000 * n, sst_mb=1)
        backup(BackupOptions(REF, sdir, chunk_size=MiB, keep_last=3), direct, dcps)
    orphans = {direct.put(io.BytesIO(b"orphan %03d" % i), size=10, ttl_seconds=3600) for i in range(60)}
    time.sleep(1.1)

    bs = faulty_s3.open()
    faulty_s3.proxy.set_rate(0.05)
    past_mtime_grain(bs)
    res = gc(GcOptions(grace_seconds=0, keep_last=1), bs, BlobCheckpointStore(bs))
    faulty_s3.proxy.set_rate(0.0)
    assert faulty_s3.proxy.stats()["faults"] > 0
    assert res.snapshots_expired == 2 and orphans <= {a.key for a in res.deleted}
    latest = dcps.latest(REF)
    needed = {latest.index_blob_id, *read_index(direct, latest.index_blob_id).present_blob_ids()}
    assert {i.key for i in direct.list("blobs/")} == needed
    target = tmp_path / "t"
    restore(RestoreOptions(REF, tmp_path / "none", target_dir=target), direct, dcps)
    assert fingerprint(target) == fingerprint(sdir)

    faulty_s3.proxy.set_down(True)
    proc = subprocess.run([STATECTL, "gc", "--blobstore", faulty_s3.url, "--grace", "1m"],
                          env=faulty_s3.cli_env(tmp_path, retries=1), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert_failed_cleanly(proc)
    assert {i.key for i in direct.list("blobs/")} == needed
