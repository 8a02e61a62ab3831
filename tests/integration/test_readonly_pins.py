"""Reader pins (statectl.catalog.pins) against retention and gc, with real processes: a restore that is
still downloading keeps its snapshot while backups with --keep-last 1 expire it; a pin whose reader
died or expired binds nobody and gc removes it, then the blobs it protected."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.catalog.pins import pins_prefix, read_pins
from statectl.catalog.records import COMMITTED, BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.backup import BackupOptions, backup
from statectl.engine.gc import GcOptions, gc
from statectl.engine.restore import RestoreOptions, restore
from statectl.blobstore.stats import StatsBlobStore
from statectl.errors import CorruptSnapshotError, SnapshotNotFoundError
from statectl.local.layout import store_dir
from tests.integration.test_retention_gc import all_referenced, blob_keys
from tests.tools.genstore import fingerprint, make_store
from tests.tools.gcwait import past_mtime_grain

REF = StoreRef("pinned", "1", "Partition 0", "counts")
STATECTL = str(Path(sys.executable).parent / "statectl")


@pytest.fixture
def no_grace_floor(monkeypatch):
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # S3 objects cannot be backdated


def cli_env(blobstore, tmp_path: Path, s3_options, request, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "cfg"), **extra)
    if "s3" in request.node.callspec.id:
        env.update(STATECTL_S3_ENDPOINT=s3_options.endpoint_url, AWS_ACCESS_KEY_ID=s3_options.access_key_id,
                   AWS_SECRET_ACCESS_KEY=s3_options.secret_access_key)
    return env


def restore_args(blobstore, target: Path) -> list[str]:
    return [STATECTL, "restore", "--blobstore", blobstore.url, "--job", REF.job, "--task", REF.task,
            "--store", REF.store, "--target-dir", str(target), "--parallelism", "1", "-o", "json"]


def new_store(sdir: Path, seed: int) -> str:
    """Replace the store by another one: its SST files all differ, so the next backup removes those of the
    previous snapshot (and so their blobs)."""
    shutil.rmtree(sdir, ignore_errors=True)
    make_store(sdir, 1500, 512, seed=seed, start=seed * 1_000_000, sst_mb=1)
    return fingerprint(sdir)


def pins(bs) -> list[str]:
    return [i.key for i in bs.list("pins/")]


def wait_for(what, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_slow_restore_keeps_its_snapshot_while_two_backups_expire_it(blobstore, tmp_path: Path, s3_options,
                                                                       request, no_grace_floor):
    cps = BlobCheckpointStore(blobstore)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    expected = new_store(sdir, seed=1)
    first = backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=0), blobstore, cps)
    needed = snapshot_blob_ids(first.snapshot_id, read_index(blobstore, first.snapshot_id))
    target = tmp_path / "restored"
    # The first blob range waits 6 s: the restore has pinned its snapshot and read nothing else yet.
    slow = subprocess.Popen(restore_args(blobstore, target), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=cli_env(blobstore, tmp_path, s3_options, request,
                                        STATECTL_FAILPOINTS="during-download=1*sleep:6"))
    try:
        wait_for(lambda: pins(blobstore) or slow.poll() is not None)
        notes = []
        for seed in (2, 3):  # two backups commit meanwhile, each removing every file of the one before
            new_store(sdir, seed)
            notes += backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=0), blobstore, cps).notes
        # The pinned snapshot is kept past retention (the one in between is not), and says why.
        assert needed <= blob_keys(blobstore)
        assert [(r.checkpoint_id, r.state) for r in cps.records(REF)][1:] == [(first.checkpoint_id, COMMITTED)]
        assert any(f"kept snapshot {first.checkpoint_id}" in n and "a restore on host" in n for n in notes), notes
        assert slow.poll() is None, "the restore finished before the backups: the race was not run"
    finally:
        out, err = slow.communicate(timeout=120)
    assert slow.returncode == 0, err
    assert json.loads(out)["snapshot_id"] == first.snapshot_id
    assert fingerprint(target) == expected
    assert pins(blobstore) == []  # released

    # gc --dry-run shows the plan: the snapshot the pin held expires now, its blobs after the grace.
    dry = subprocess.run([STATECTL, "gc", "--dry-run", "--grace", "1m", "--blobstore", blobstore.url],
                         env=cli_env(blobstore, tmp_path, s3_options, request), capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert (f"would expire snapshot {first.checkpoint_id} of {REF} ({first.snapshot_id}): older than the newest 1 "
            "kept (keep-last 1); its blobs stay until ") in dry.stdout, dry.stdout
    assert f"snapshot {first.checkpoint_id} expired" not in dry.stdout, dry.stdout
    past_mtime_grain(blobstore)
    dry_res = gc(GcOptions(grace_seconds=0, dry_run=True), blobstore, cps)
    assert any(a.reason.startswith(f"retention of {REF}: index of snapshot {first.checkpoint_id} expired")
               for a in dry_res.deleted), dry_res.deleted
    # The next gc drops the snapshot the pin held: only the latest snapshot's blobs are left.
    res = gc(GcOptions(grace_seconds=0), blobstore, cps)
    assert [(e.checkpoint_id, e.snapshot_id) for e in res.expired] == [(first.checkpoint_id, first.snapshot_id)]
    assert res.snapshots_expired == 1
    assert len(cps.records(REF)) == 1
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)


@pytest.mark.parametrize("grace", [0, 3600], ids=["no-grace", "grace"])
def test_without_a_pin_only_the_grace_period_protects_the_restore(tmp_path: Path, monkeypatch, grace: int):
    """The race above with the pin write refused (a reader with read-only credentials): the grace period
    keeps the blobs of the snapshots retention drops, and the restore succeeds. The control: with no grace,
    the backups delete what the restore needs."""
    from statectl.blobstore import open_blobstore

    bs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    cps = BlobCheckpointStore(bs)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    expected = new_store(sdir, seed=1)
    first = backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=grace), bs, cps)
    monkeypatch.setattr("statectl.catalog.pins.ReaderPin._pin", lambda self, owner, snap: False)
    target = tmp_path / "restored"
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            restore(RestoreOptions(REF, tmp_path / "none", target_dir=target, parallelism=1), bs, cps)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - asserted below
            outcome.append(e)

    # The restore is held at its first blob range (it has chosen its snapshot and read its index) until both
    # backups have committed, however slowly the restore or the backups run.
    reached, go = threading.Event(), threading.Event()
    hit = failpoints.hit

    def held(name: str) -> None:
        if name == "during-download" and not reached.is_set():
            reached.set()
            go.wait(60)
        hit(name)

    monkeypatch.setattr(failpoints, "hit", held)
    t = threading.Thread(target=run)
    t.start()
    try:
        while not reached.wait(0.05):
            assert t.is_alive(), f"the restore ended before its first download: {outcome}"
        for seed in (2, 3):
            new_store(sdir, seed)
            backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=grace), bs, cps)
    finally:
        go.set()
        t.join(60)
    assert not t.is_alive()
    if grace:
        assert outcome == [None]
        assert fingerprint(target) == expected
        # Out of the list of snapshots at once, its blobs kept until the grace ends.
        assert first.checkpoint_id not in [r.checkpoint_id for r in cps.list(REF)]
        assert first.snapshot_id in blob_keys(bs)
    else:
        assert isinstance(outcome[0], CorruptSnapshotError) and "missing" in str(outcome[0]), outcome
        assert not target.exists()


def test_a_pin_left_by_a_killed_restore_binds_nobody_and_gc_removes_it(blobstore, tmp_path: Path, s3_options,
                                                                       request, no_grace_floor):
    cps = BlobCheckpointStore(blobstore)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    new_store(sdir, seed=1)
    first = backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=0), blobstore, cps)
    killed = subprocess.run(restore_args(blobstore, tmp_path / "restored"), capture_output=True, timeout=120,
                            env=cli_env(blobstore, tmp_path, s3_options, request,
                                        STATECTL_FAILPOINTS="before-swap=kill"))
    assert killed.returncode == -9
    (left,) = read_pins(blobstore)
    assert left.index_blob_id == first.snapshot_id and left.host == socket.gethostname()
    assert not left.live  # its process is gone: it binds nobody at once, long before its expiry

    new_store(sdir, seed=2)
    second = backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=0), blobstore, cps)
    assert not any("kept snapshot" in n for n in second.notes)
    assert [r.checkpoint_id for r in cps.records(REF)] == [second.checkpoint_id]
    assert first.snapshot_id not in blob_keys(blobstore)

    past_mtime_grain(blobstore)
    res = gc(GcOptions(grace_seconds=0), blobstore, cps)
    assert pins(blobstore) == []
    assert any("deleted 1 reader pins that no longer bind" in n for n in res.notes), res.notes
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)


def test_a_pin_from_another_host_binds_until_it_expires(blobstore, tmp_path: Path, s3_options, request,
                                                        no_grace_floor, monkeypatch):
    """A reader on another host (its pid means nothing here) that died: its pin holds the snapshot until
    its expiry (plus the clock slack, 0 here); then gc deletes the pin, expires the snapshot, sweeps it."""
    monkeypatch.setattr("statectl.catalog.lease.CLOCK_SLACK_SECONDS", 0)
    cps = BlobCheckpointStore(blobstore)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    new_store(sdir, seed=1)
    first = backup(BackupOptions(REF, sdir, keep_last=1), blobstore, cps)
    needed = snapshot_blob_ids(first.snapshot_id, read_index(blobstore, first.snapshot_id))
    expires = time.time() + 120  # binds however long the steps up to the first gc take on a busy machine
    blobstore.put_at(pins_prefix(REF) + "f00d.json", json.dumps({
        "index_blob_id": first.snapshot_id, "checkpoint_id": first.checkpoint_id, "store": str(REF),
        "operation": "restore", "host": "elsewhere.example", "pid": 4242, "started": time.time(),
        "expires_at": expires}).encode())

    new_store(sdir, seed=2)
    second = backup(BackupOptions(REF, sdir, keep_last=1), blobstore, cps)
    assert any("a restore on host elsewhere.example" in n for n in second.notes), second.notes
    dry = subprocess.run([STATECTL, "gc", "--dry-run", "--grace", "1m", "--blobstore", blobstore.url],
                         env=cli_env(blobstore, tmp_path, s3_options, request), capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f"snapshot {first.checkpoint_id} kept past retention" in dry.stderr, dry.stderr
    res = gc(GcOptions(grace_seconds=0), blobstore, cps)  # the pin still binds: nothing of it goes
    assert needed <= blob_keys(blobstore) and res.snapshots_expired == 0
    assert len(read_pins(blobstore)) == 1

    # Past its expiry without waiting for it: a slack of minus the time left ends it now (a pin binds while
    # expires_at + slack >= now).
    monkeypatch.setattr("statectl.catalog.lease.CLOCK_SLACK_SECONDS", -(expires - time.time()) - 0.5)
    past_mtime_grain(blobstore)
    dry_res = gc(GcOptions(grace_seconds=0, dry_run=True), blobstore, cps)
    assert [(e.checkpoint_id, e.reason) for e in dry_res.expired] == \
        [(first.checkpoint_id, "older than the newest 1 kept (keep-last 1)")]
    assert any("would delete 1 reader pins" in n for n in dry_res.notes), dry_res.notes
    res = gc(GcOptions(grace_seconds=0), blobstore, cps)
    assert pins(blobstore) == []
    assert res.snapshots_expired == 1 and [e.checkpoint_id for e in res.expired] == [first.checkpoint_id]
    assert [r.checkpoint_id for r in cps.records(REF)] == [second.checkpoint_id]
    assert blob_keys(blobstore) == all_referenced(blobstore, cps)
    assert first.snapshot_id not in blob_keys(blobstore)


class _PinAfterFirstRead(StatsBlobStore):
    """The blob store, with the reader pin's write held until the first read of one of ``blobs`` has begun,
    and ``meanwhile()`` run then, before that read (a backup that expires the snapshot being restored)."""

    def __init__(self, inner, blobs: set[str], meanwhile):
        super().__init__(inner)
        self.blobs, self.meanwhile, self.read_began = blobs, meanwhile, threading.Event()

    def put_at(self, key, data, **kw):
        if key.startswith("pins/"):
            assert self.read_began.wait(60), "the pin was written before any blob was read"
        return super().put_at(key, data, **kw)

    def get(self, key, dst, **kw):
        if key in self.blobs and not self.read_began.is_set():
            try:
                self.meanwhile()
            finally:
                self.read_began.set()
        return super().get(key, dst, **kw)


@pytest.mark.parametrize("named", [False, True], ids=["latest", "named"])
def test_a_snapshot_expired_while_its_pin_is_written_is_never_swapped_in(blobstore, tmp_path: Path, named: bool):
    """The pin is written and checked while the first blobs download. A backup that expires the snapshot and
    deletes its blobs in that window (before the pin is there to stop it) makes the download fail; the
    check then finds the snapshot expired: the latest is resolved again and restored, a named one is exit 10;
    the target never holds the expired snapshot's half."""
    cps = BlobCheckpointStore(blobstore)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    new_store(sdir, seed=1)
    first = backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=0), blobstore, cps)
    data = snapshot_blob_ids(first.snapshot_id, read_index(blobstore, first.snapshot_id)) - {first.snapshot_id}
    later: list = []

    def expire_it() -> None:
        later.append(new_store(sdir, seed=2))
        later.append(backup(BackupOptions(REF, sdir, keep_last=1, grace_seconds=0), blobstore, cps))
        assert data - blob_keys(blobstore)  # blobs the restore needs are gone (its SST files')

    gated = _PinAfterFirstRead(blobstore, data, expire_it)
    target = tmp_path / "restored"
    opts = RestoreOptions(REF, tmp_path / "none", target_dir=target, parallelism=1,
                          snapshot=first.checkpoint_id if named else None)
    if named:
        with pytest.raises(SnapshotNotFoundError, match="expired by retention"):
            restore(opts, gated, cps)
        assert not target.exists()
    else:
        r = restore(opts, gated, cps)
        expected, second = later
        assert r.snapshot_id == second.snapshot_id and fingerprint(target) == expected
    assert pins(blobstore) == []
