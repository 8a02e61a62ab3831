"""Retention, gc and the per-store lease, on every blob store backend."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.engine.gc import GcOptions, gc
from statectl.catalog.lease import Lease, lease_key
from statectl.errors import LeaseLostError
from statectl.catalog.refs import StoreRef
from statectl.local.layout import store_dir
from statectl.engine.restore import RestoreOptions, restore
from statectl.engine.snapshots import list_snapshots, verify_snapshot
from statectl.errors import LockHeldError, SnapshotNotFoundError
from statectl.failpoints import FailpointError
from tests.tools.genstore import fingerprint, make_store
from tests.tools.gcwait import past_mtime_grain
from tests.tools.standby_helpers import process_state, wait_until

REF = StoreRef("page-views", "1", "Partition 0", "counts")


def all_referenced(bs, cps: BlobCheckpointStore) -> set[str]:
    keys: set[str] = set()
    for ref in cps.refs():
        for r in cps.list(ref):
            keys |= snapshot_blob_ids(r.index_blob_id, read_index(bs, r.index_blob_id))
    return keys


def blob_keys(bs) -> set[str]:
    return {i.key for i in bs.list("blobs/")}


def grow(sdir: Path, n: int, seed: int) -> None:
    make_store(sdir, 300, 512, seed=seed, start=100_000 * n, sst_mb=1)


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    d = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(d, 2000, 512, seed=1, sst_mb=1)
    return d


def test_keep_last_keeps_n_restorable_snapshots(blobstore, sdir: Path, tmp_path: Path, monkeypatch):
    cps = BlobCheckpointStore(blobstore)
    taken = []
    for n in range(4):
        if n:
            grow(sdir, n, seed=n)
        r = backup(BackupOptions(REF, sdir, keep_last=3, grace_seconds=0), blobstore, cps)
        taken.append((r, fingerprint(sdir)))
    rows = list_snapshots(REF, blobstore, cps)
    assert [row.checkpoint_id for row in rows] == [r.checkpoint_id for r, _ in reversed(taken[1:])]
    assert rows[0].latest and not rows[1].latest
    for i, (r, fp) in enumerate(taken[1:]):
        target = tmp_path / f"restore-{i}"
        restore(RestoreOptions(REF, tmp_path / "none", target_dir=target, snapshot=r.checkpoint_id), blobstore, cps)
        assert fingerprint(target) == fp
    with pytest.raises(SnapshotNotFoundError):
        restore(RestoreOptions(REF, tmp_path / "none", target_dir=tmp_path / "gone", snapshot=taken[0][0].checkpoint_id),
                blobstore, cps)
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)

    # gc --keep-last 1 then drops all but the latest at once; their blobs stay for the grace period (a
    # restore that could not pin them may still be reading them), even through a sweep.
    retained = blob_keys(blobstore)
    res = gc(GcOptions(keep_last=1), blobstore, cps)
    assert res.snapshots_expired == 2 and res.blobs_deleted == 0
    assert all(e.blobs_kept_until for e in res.expired)
    assert [s.checkpoint_id for s in list_snapshots(REF, blobstore, cps)] == [taken[-1][0].checkpoint_id]
    assert blob_keys(blobstore) == retained
    # Once the grace is over, the next gc deletes only what the latest does not need.
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)
    past_mtime_grain(blobstore)
    res = gc(GcOptions(grace_seconds=0), blobstore, cps)
    assert res.snapshots_expired == 0 and res.blobs_deleted > 0
    assert all(a.reason.startswith(f"retention of {REF}") for a in res.deleted), res.deleted
    assert any("expired: marked expired at " in a.reason for a in res.deleted), res.deleted
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)
    assert len(cps.records(REF)) == 1
    assert verify_snapshot(REF, blobstore, cps, None, download=True).ok


def test_gc_sweeps_unreferenced_and_expired_blobs_but_not_young_ones(blobstore, sdir: Path, monkeypatch):
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # S3 objects cannot be backdated
    cps = BlobCheckpointStore(blobstore)
    backup(BackupOptions(REF, sdir), blobstore, cps)
    live = all_referenced(blobstore, cps)
    orphan = blobstore.put(io.BytesIO(b"left by a crashed backup"), size=24, ttl_seconds=3600)
    young = blobstore.put(io.BytesIO(b"a backup in flight"), size=18, ttl_seconds=3600)
    expired = blobstore.put(io.BytesIO(b"ttl ran out"), size=11, ttl_seconds=1)
    time.sleep(2.1)

    # With a 6h grace nothing young goes, except what its own TTL says is dead.
    dry = gc(GcOptions(dry_run=True), blobstore, cps)
    assert [(a.key, a.reason) for a in dry.deleted] == [(expired, "TTL expired")]
    assert blob_keys(blobstore) == live | {orphan, young, expired}  # dry run: nothing deleted

    res = gc(GcOptions(), blobstore, cps)
    assert res.blobs_deleted == 1 and res.bytes_reclaimed == 11
    assert blob_keys(blobstore) == live | {orphan, young}

    # Once past the grace period the unreferenced ones go; every referenced blob stays.
    res = gc(GcOptions(grace_seconds=1), blobstore, cps)
    assert {a.key for a in res.deleted} == {orphan, young}
    assert all(a.reason == "unreferenced, older than the grace period" for a in res.deleted)
    assert blob_keys(blobstore) == live
    assert res.blobs_kept == len(live)


def test_gc_with_several_jobs_sharing_the_prefix(blobstore, tmp_path: Path, monkeypatch):
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # S3 objects cannot be backdated
    cps = BlobCheckpointStore(blobstore)
    refs = [StoreRef("job-a", "1", "Partition 0", "s"), StoreRef("job-b", "2", "Partition 3", "s"),
            StoreRef("job-a", "1", "Partition 1", "t")]
    dirs = {}
    for i, ref in enumerate(refs):
        d = store_dir(tmp_path / ref.job, ref.store, ref.task)
        make_store(d, 800, 512, seed=10 + i, sst_mb=1)
        dirs[ref] = d
        for n in range(3):
            if n:
                grow(d, n, seed=20 + n)
            backup(BackupOptions(ref, d, keep_last=2), blobstore, cps)
    assert set(cps.refs()) == set(refs)
    orphan = blobstore.put(io.BytesIO(b"x"), size=1, ttl_seconds=3600)
    time.sleep(1.1)
    past_mtime_grain(blobstore)
    res = gc(GcOptions(grace_seconds=0, keep_last=1), blobstore, cps)
    assert res.stores == 3 and res.snapshots_expired == 3
    assert orphan in {a.key for a in res.deleted}
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)
    for ref in refs:
        assert len(cps.list(ref)) == 1
        target = tmp_path / "restored" / ref.job / ref.task
        restore(RestoreOptions(ref, tmp_path / "none", target_dir=target), blobstore, cps)
        assert fingerprint(target) == fingerprint(dirs[ref])


def test_gc_never_deletes_what_a_snapshot_committed_during_gc_references(blobstore, sdir: Path, tmp_path: Path,
                                                                          monkeypatch):
    """A backup commits while gc runs (right after gc listed the blobs): with a zero grace period its
    new blobs are unreferenced at listing time, yet none of them may be deleted."""
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # S3 objects cannot be backdated
    cps = BlobCheckpointStore(blobstore)
    backup(BackupOptions(REF, sdir), blobstore, cps)
    grow(sdir, 1, seed=5)
    inner_list = blobstore.list
    state = {"done": False}

    def list_then_backup(prefix=""):
        listing = list(inner_list(prefix))
        if prefix == "blobs/" and not state["done"]:
            state["done"] = True
            time.sleep(1.1)
            backup(BackupOptions(REF, sdir), blobstore, cps)  # commits a snapshot mid-gc
        return iter(listing)

    monkeypatch.setattr(blobstore, "list", list_then_backup)
    gc(GcOptions(grace_seconds=0), blobstore, cps)
    monkeypatch.undo()
    assert state["done"]
    assert verify_snapshot(REF, blobstore, cps, None, download=True).ok
    target = tmp_path / "t"
    restore(RestoreOptions(REF, tmp_path / "none", target_dir=target), blobstore, cps)
    assert fingerprint(target) == fingerprint(sdir)


def test_gc_keeps_blobs_written_in_its_first_second(blobstore, sdir: Path, tmp_path: Path, monkeypatch):
    """A backup that takes its lease after gc read the leases and commits after gc read the catalog,
    within the second gc started in: S3 reports its blobs' modification times truncated to that second,
    before gc's start; none of them may be deleted (gc compares ages less the store's mtime_grain_s)."""
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)
    cps = BlobCheckpointStore(blobstore)
    backup(BackupOptions(REF, sdir), blobstore, cps)
    inner_list = blobstore.list
    for attempt in range(5):  # gc must reach its listing within its first second: retried when it did not
        grow(sdir, 1, seed=7 + attempt)
        seen: dict = {}

        def backup_then_list(prefix=""):
            if prefix == "blobs/" and not seen:
                seen["at"] = time.time()
                seen["cp"] = backup(BackupOptions(REF, sdir), blobstore, cps)  # uploads, commits, mid-gc
            return inner_list(prefix)

        while time.time() % 1 > 0.05:  # start gc at the top of a second
            time.sleep(0.01)
        monkeypatch.setattr(blobstore, "list", backup_then_list)
        started = time.time()
        gc(GcOptions(grace_seconds=0), blobstore, cps)
        monkeypatch.setattr(blobstore, "list", inner_list)
        assert verify_snapshot(REF, blobstore, cps, seen["cp"].checkpoint_id, download=True).ok
        if int(seen["at"]) == int(started):
            return
    pytest.fail("gc never reached its listing within its first second in 5 attempts")


def test_gc_finishes_an_interrupted_cleanup(blobstore, sdir: Path, monkeypatch):
    cps = BlobCheckpointStore(blobstore)
    first = backup(BackupOptions(REF, sdir), blobstore, cps)
    grow(sdir, 1, seed=6)
    with failpoints.active("after-commit=raise"), pytest.raises(FailpointError):  # fails right after the commit
        backup(BackupOptions(REF, sdir), blobstore, cps)
    res = gc(GcOptions(), blobstore, cps)
    assert res.cleanups_finished == 1
    assert cps.latest(REF).cleanup_done
    # The snapshot it dropped is out of the list; its blobs go once the grace is over.
    assert [r.checkpoint_id for r in cps.list(REF)] != [first.checkpoint_id]
    assert first.snapshot_id in blob_keys(blobstore)
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)
    past_mtime_grain(blobstore)
    gc(GcOptions(grace_seconds=0), blobstore, cps)
    assert first.snapshot_id not in blob_keys(blobstore)
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)


def test_lease_one_holder_and_fencing(blobstore):
    a = Lease(blobstore, REF, seconds=60)
    a.acquire()
    b = Lease(blobstore, REF, seconds=60)
    with pytest.raises(LockHeldError) as e:
        b.acquire()
    assert e.value.exit_code == 11 and "another backup" in str(e.value)
    a.release()
    b.acquire()  # a released lease is free
    # Someone takes b's lease over behind its back (e.g. b stalled past its expiry): b must not commit.
    _, etag = blobstore.read_at(lease_key(REF))
    blobstore.put_at(lease_key(REF), b'{"owner": "someone-else", "expires": 0}', if_match=etag)
    with pytest.raises(LeaseLostError):
        b.check()


def test_concurrent_backup_of_the_same_store_fails_cleanly(blobstore, sdir: Path, tmp_path: Path, s3_options,
                                                            request):
    """A second backup of a store while one is running exits 11; a killed holder frees the store at once."""
    if "s3" in request.node.callspec.id:
        url = blobstore.url
        env_extra = {"STATECTL_S3_ENDPOINT": s3_options.endpoint_url, "AWS_ACCESS_KEY_ID": s3_options.access_key_id,
                     "AWS_SECRET_ACCESS_KEY": s3_options.secret_access_key}
    else:
        url, env_extra = blobstore.url, {}
    statectl = str(Path(sys.executable).parent / "statectl")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    env.update(env_extra, XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    args = [statectl, "backup", "--blobstore", url, "--job", REF.job, "--task", REF.task, "--store", REF.store,
            "--store-dir", str(sdir), "-q"]
    # The first one stops itself before its upload, under the lease, until the second one has run: held
    # however long the second takes to start on a busy machine.
    slow = subprocess.Popen(args, env=dict(env, STATECTL_FAILPOINTS="before-upload=1*stop"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: slow.poll() is not None or process_state(slow.pid) == "T", 60,
                   "the first backup reaches its upload")
        assert slow.poll() is None, slow.communicate()
        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 11, second.stderr
        assert second.stderr.startswith("Error: another backup of page-views-1/Partition 0/counts is running")
    finally:
        slow.send_signal(signal.SIGCONT)
        out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0, err
    # A backup killed while holding the lease does not block the next one on this host.
    killed = subprocess.Popen(args, env=dict(env, STATECTL_FAILPOINTS="after-index-upload=kill"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed.wait(timeout=60)
    assert killed.returncode == -9
    third = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0, third.stderr
