"""Backup and restore end to end, through the engine, on every blob store backend."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.index import read_index
from statectl.catalog.refs import StoreRef
from statectl.local.layout import local_checkpoint_dirs, store_dir
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import LockHeldError, SnapshotNotFoundError
from statectl.failpoints import FailpointError
from tests.tools.genstore import fingerprint, make_store

REF = StoreRef("page-views", "1", "Partition 0", "counts")
MiB = 1024 * 1024


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def sdir(state: Path) -> Path:
    d = store_dir(state, REF.store, REF.task)
    make_store(d, 3000, 1024, seed=1, sst_mb=1)
    return d


def referenced_keys(bs, checkpoints: BlobCheckpointStore, ref: StoreRef) -> set[str]:
    keys = set()
    for record in checkpoints.list(ref):
        keys.add(record.index_blob_id)
        keys.update(read_index(bs, record.index_blob_id).present_blob_ids())
    return keys


def test_full_backup_then_restore_elsewhere(blobstore, sdir: Path, tmp_path: Path):
    cps = BlobCheckpointStore(blobstore)
    before = fingerprint(sdir)
    r = backup(BackupOptions(REF, sdir, parallelism=4), blobstore, cps)
    assert r.files_uploaded == r.files_total > 0
    assert r.bytes_uploaded == r.bytes_total
    assert r.snapshot_id.startswith("blobs/")
    assert list(local_checkpoint_dirs(sdir)) == [r.checkpoint_id]

    target = tmp_path / "elsewhere" / "counts"
    rr = restore(RestoreOptions(REF, tmp_path / "nothing-here", target_dir=target), blobstore, cps)
    assert rr.snapshot_id == r.snapshot_id
    assert rr.files_downloaded == rr.files_total == r.files_total
    assert rr.bytes_downloaded == r.bytes_total
    assert fingerprint(target) == before
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_incremental_backup_uploads_only_new_files_and_cleans_up(blobstore, sdir: Path):
    cps = BlobCheckpointStore(blobstore)
    first = backup(BackupOptions(REF, sdir, grace_seconds=0), blobstore, cps)
    first_index = read_index(blobstore, first.snapshot_id)
    make_store(sdir, 500, 1024, seed=2, start=3000, sst_mb=1)  # adds new SST files
    second = backup(BackupOptions(REF, sdir, grace_seconds=0), blobstore, cps)

    assert 0 < second.files_uploaded < second.files_total
    index = read_index(blobstore, second.snapshot_id)
    assert index.prev_snapshot_index_blob_id == first.snapshot_id
    old_ssts = {f.file_name: f for _, f in first_index.dir_index.walk_present() if f.file_name.endswith(".sst")}
    new_ssts = {f.file_name: f for _, f in index.dir_index.walk_present() if f.file_name.endswith(".sst")}
    for name in old_ssts.keys() & new_ssts.keys():
        assert new_ssts[name].blobs == old_ssts[name].blobs  # retained, not re-uploaded
    uploaded_ssts = [n for n in new_ssts if n not in old_ssts]
    assert uploaded_ssts
    sst_bytes = sum(new_ssts[n].size for n in uploaded_ssts)
    assert second.bytes_uploaded <= sst_bytes + MiB

    # The commit's cleanup: one record left, the previous index and removed files' blobs deleted,
    # every remaining blob referenced and permanent.
    assert [c.checkpoint_id for c in cps.list(REF)] == [second.checkpoint_id]
    assert cps.latest(REF).cleanup_done
    blobs = {i.key for i in blobstore.list("blobs/")}
    assert first.snapshot_id not in blobs
    assert blobs == referenced_keys(blobstore, cps, REF)
    for key in blobs:
        assert blobstore.stat(key).expires_at is None
    # Only the newest local checkpoint dir is kept.
    assert list(local_checkpoint_dirs(sdir)) == [second.checkpoint_id]


def test_restore_reuses_identical_local_checkpoint(blobstore, sdir: Path):
    cps = BlobCheckpointStore(blobstore)
    backup(BackupOptions(REF, sdir), blobstore, cps)
    before = fingerprint(sdir)
    shutil.rmtree(sdir)
    rr = restore(RestoreOptions(REF, sdir), blobstore, cps)
    assert rr.files_downloaded == 0 and rr.bytes_downloaded == 0
    assert rr.files_reused == rr.files_total
    assert fingerprint(sdir) == before


def test_restore_downloads_only_what_differs_locally(blobstore, sdir: Path):
    cps = BlobCheckpointStore(blobstore)
    r = backup(BackupOptions(REF, sdir), blobstore, cps)
    before = fingerprint(sdir)
    # Lose the checkpoint dir and one SST of the store: only that file (and none else) is fetched.
    cp = local_checkpoint_dirs(sdir)[r.checkpoint_id]
    shutil.rmtree(cp)
    index = read_index(blobstore, r.snapshot_id)
    sst = next(f for _, f in index.dir_index.walk_present() if f.file_name.endswith(".sst"))
    (sdir / sst.file_name).unlink()
    rr = restore(RestoreOptions(REF, sdir), blobstore, cps)
    assert rr.files_downloaded >= 1
    assert rr.bytes_downloaded < r.bytes_total
    assert fingerprint(sdir) == before


def test_subdirs_empty_files_chunks_and_permissions_round_trip(blobstore, sdir: Path, tmp_path: Path):
    """A hand-made checkpoint dir with nested sub-dirs, an empty file, an empty dir, a file split into
    several chunks and unusual permission bits comes back exactly."""
    cps = BlobCheckpointStore(blobstore)
    from statectl.rocks.store import create_checkpoint

    cp = sdir.with_name(sdir.name + "-1700000000000-42")
    create_checkpoint(sdir, cp)
    (cp / "sub" / "deeper").mkdir(parents=True)
    (cp / "sub" / "deeper" / "nested.bin").write_bytes(os.urandom(1000))
    (cp / "sub" / "empty-file").write_bytes(b"")
    (cp / "empty-dir").mkdir()
    big = os.urandom(int(3.5 * MiB))
    (cp / "big.bin").write_bytes(big)
    (cp / "big.bin").chmod(0o640)
    (cp / "private").write_bytes(b"secret")
    (cp / "private").chmod(0o600)

    r = backup(BackupOptions(REF, sdir, checkpoint_dir=cp, chunk_size=MiB), blobstore, cps)
    assert r.checkpoint_id == "1700000000000-42"
    index = read_index(blobstore, r.snapshot_id)
    big_index = next(f for _, f in index.dir_index.walk_present() if f.file_name == "big.bin")
    assert [b.offset for b in big_index.blobs] == [0, MiB, 2 * MiB, 3 * MiB]

    target = tmp_path / "restored"
    restore(RestoreOptions(REF, tmp_path / "none", target_dir=target, range_size=MiB), blobstore, cps)
    assert (target / "big.bin").read_bytes() == big
    assert stat.S_IMODE((target / "big.bin").stat().st_mode) == 0o640
    assert stat.S_IMODE((target / "private").stat().st_mode) == 0o600
    assert (target / "sub" / "deeper" / "nested.bin").read_bytes() == (cp / "sub" / "deeper" / "nested.bin").read_bytes()
    assert (target / "sub" / "empty-file").read_bytes() == b""
    assert (target / "empty-dir").is_dir() and not any((target / "empty-dir").iterdir())
    assert fingerprint(target) == fingerprint(sdir)


def test_restore_named_snapshot_and_unknown_snapshot(blobstore, sdir: Path, tmp_path: Path):
    cps = BlobCheckpointStore(blobstore)
    r = backup(BackupOptions(REF, sdir), blobstore, cps)
    short = r.snapshot_id.rsplit("/", 1)[1][:8]
    for ident in (r.snapshot_id, short, r.checkpoint_id):
        rr = restore(RestoreOptions(REF, tmp_path / "x", target_dir=tmp_path / f"t-{ident[:4]}", snapshot=ident),
                     blobstore, cps)
        assert rr.snapshot_id == r.snapshot_id
    with pytest.raises(SnapshotNotFoundError) as e:
        restore(RestoreOptions(REF, sdir, snapshot="1600000000000-1"), blobstore, cps)
    assert e.value.exit_code == 10
    with pytest.raises(SnapshotNotFoundError):
        restore(RestoreOptions(StoreRef("other-job", "1", "Partition 0", "counts"), sdir), blobstore, cps)


def test_failed_backup_leaves_only_ttl_blobs_and_previous_snapshot(blobstore, sdir: Path):
    cps = BlobCheckpointStore(blobstore)
    first = backup(BackupOptions(REF, sdir), blobstore, cps)
    make_store(sdir, 300, 1024, seed=3, start=9000, sst_mb=1)
    with failpoints.active("after-index-upload=raise"), pytest.raises(FailpointError):  # fails before the commit
        backup(BackupOptions(REF, sdir), blobstore, cps)
    assert cps.latest(REF).checkpoint_id == first.checkpoint_id
    referenced = referenced_keys(blobstore, cps, REF)
    leftovers = [i.key for i in blobstore.list("blobs/") if i.key not in referenced]
    assert leftovers
    for key in leftovers:
        expires = blobstore.stat(key).expires_at
        assert expires is not None and expires > 0  # TTL'd: gc or the store's TTL will reclaim it
    assert list(local_checkpoint_dirs(sdir)) == [first.checkpoint_id]  # the failed one's dir is gone


def test_restore_leaves_an_interrupted_cleanup_to_the_next_backup(blobstore, sdir: Path, tmp_path: Path):
    cps = BlobCheckpointStore(blobstore)
    first = backup(BackupOptions(REF, sdir, grace_seconds=0), blobstore, cps)
    make_store(sdir, 300, 1024, seed=4, start=20000, sst_mb=1)
    with failpoints.active("after-commit=raise"), pytest.raises(FailpointError):  # fails right after the commit
        backup(BackupOptions(REF, sdir, grace_seconds=0), blobstore, cps)
    latest = cps.latest(REF)
    assert latest.checkpoint_id != first.checkpoint_id and not latest.cleanup_done
    # A restore only reads: it may run with read-only credentials, and it does not hold the store's lease.
    listing = sorted((i.key, i.size) for i in blobstore.list(""))
    restore(RestoreOptions(REF, tmp_path / "n", target_dir=tmp_path / "t"), blobstore, cps)
    assert sorted((i.key, i.size) for i in blobstore.list("")) == listing
    assert not cps.latest(REF).cleanup_done
    backup(BackupOptions(REF, sdir, grace_seconds=0), blobstore, cps)  # nothing changed: it finishes the cleanup and commits
    latest = cps.latest(REF)
    assert latest.cleanup_done
    assert [c.checkpoint_id for c in cps.list(REF)] == [latest.checkpoint_id]
    blobs = {i.key for i in blobstore.list("blobs/")}
    assert first.snapshot_id not in blobs
    for key in read_index(blobstore, latest.index_blob_id).present_blob_ids():
        assert blobstore.stat(key).expires_at is None


def test_held_store_is_refused_but_checkpoint_dir_works(blobstore, sdir: Path, tmp_path: Path):
    import subprocess
    import sys

    cps = BlobCheckpointStore(blobstore)
    cp = sdir.with_name(sdir.name + "-1700000000001-7")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, rocksdict as r; db = r.Rdict(sys.argv[1], r.Options(raw_mode=True)); "
         "r.Checkpoint(db).create_checkpoint(sys.argv[2]); print('ready', flush=True); sys.stdin.read()",
         str(sdir), str(cp)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(LockHeldError) as e:
            backup(BackupOptions(REF, sdir), blobstore, cps)
        assert e.value.exit_code == 11 and str(holder.pid) in str(e.value)
        r = backup(BackupOptions(REF, sdir, checkpoint_dir=cp), blobstore, cps)
        assert r.checkpoint_id == "1700000000001-7"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    target = tmp_path / "t"
    restore(RestoreOptions(REF, tmp_path / "n", target_dir=target), blobstore, cps)
    assert fingerprint(target) == fingerprint(cp)


def test_backup_deletes_only_the_checkpoint_dirs_it_made(blobstore, sdir: Path):
    """A backup deleted every '<store>-<checkpointId>' dir beside the store, the job's own among them:
    Samza restores from its latest checkpoint dir at its next start (without it: a full changelog replay).
    Only the dirs a backup made (they carry its mark) go."""
    from statectl.local.layout import CHECKPOINT_MARK, checkpoint_dir
    from statectl.rocks.store import create_checkpoint

    cps = BlobCheckpointStore(blobstore)
    samza = checkpoint_dir(sdir, "1700000000000-123456")
    create_checkpoint(sdir, samza)  # as the job makes one at a commit
    samza_files = fingerprint(samza)
    first = backup(BackupOptions(REF, sdir, keep_local_checkpoint=True), blobstore, cps)
    ours = local_checkpoint_dirs(sdir)[first.checkpoint_id]
    assert (ours / CHECKPOINT_MARK).is_file()
    index = read_index(blobstore, first.snapshot_id)
    assert CHECKPOINT_MARK not in {f.file_name for _, f in index.dir_index.walk_present()}
    second = backup(BackupOptions(REF, sdir, keep_local_checkpoint=True), blobstore, cps)
    assert set(local_checkpoint_dirs(sdir)) == {"1700000000000-123456", second.checkpoint_id}
    assert fingerprint(samza) == samza_files


@pytest.mark.parametrize("parallelism, ranges_per_file", [(1, 1), (2, 2), (8, 2)])
def test_a_file_is_split_into_ranged_gets_only_when_larger_than_a_quarter_of_a_slots_share(
        blobstore, tmp_path: Path, parallelism: int, ranges_per_file: int):
    """A store of a few KiB plus four 2 MiB files (one blob each): with 1 slot a quarter of its share is over
    2 MiB, so every file is one GET and none is preallocated (no size check first); with 2 slots (a quarter
    share just over 1 MiB) and with 8 (the 1 MiB range size) each 2 MiB file is two ranged GETs, its blob size
    checked before anything is written. Either way every byte comes back."""
    from statectl.blobstore.stats import StatsBlobStore
    from statectl.rocks.store import create_checkpoint

    cps = BlobCheckpointStore(blobstore)
    small = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(small, 10, 100, seed=3)
    cp = small.with_name(small.name + "-1700000000000-7")
    create_checkpoint(small, cp)
    data = {f"f{i}.bin": os.urandom(2 * MiB) for i in range(4)}
    for name, body in data.items():
        (cp / name).write_bytes(body)
    files = [p for p in cp.rglob("*") if p.is_file() and p.stat().st_size]
    b = backup(BackupOptions(REF, small, checkpoint_dir=cp, chunk_size=4 * MiB), blobstore, cps)
    data_blobs = read_index(blobstore, b.snapshot_id).present_blob_ids()

    class Counted(StatsBlobStore):
        data_gets = 0

        def get(self, key, dst, *, start=0, length=None):
            if key in data_blobs:
                type(self).data_gets += 1
            return super().get(key, dst, start=start, length=length)

    counted = Counted(blobstore)
    r = restore(RestoreOptions(REF, tmp_path / "none", target_dir=tmp_path / "restored", parallelism=parallelism,
                               range_size=MiB), counted, BlobCheckpointStore(counted))
    assert r.bytes_downloaded == sum(p.stat().st_size for p in files)
    assert Counted.data_gets == len(files) + 4 * (ranges_per_file - 1)
    assert counted.request_counts().get("stat", 0) == (4 if ranges_per_file > 1 else 0)
    assert {name: (tmp_path / "restored" / name).read_bytes() for name in data} == data
