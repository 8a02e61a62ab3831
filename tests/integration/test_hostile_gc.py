"""gc as a hostile operator runs it: in a loop with the shortest grace while backups commit, after
backups killed at random moments, against a damaged latest snapshot, and with stale leases.

Backups run as real processes; gc runs in this process where it loops with a zero grace (the floor of
one minute is lowered: S3 objects cannot be backdated), to prove that what protects a backup in flight
is its lease, not the grace period.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

import statectl.engine.gc as gc_mod
from statectl.blobstore import open_blobstore
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.engine.gc import GcOptions, gc
from statectl.catalog.refs import StoreRef
from statectl.local.layout import store_dir
from statectl.catalog.lease import lease_key
from statectl.engine.snapshots import verify_snapshot
from statectl.errors import UsageError
from tests.integration.test_retention_gc import blob_keys
from tests.tools.genstore import fingerprint, make_store
from tests.tools.gcwait import past_mtime_grain

STATECTL = Path(sys.executable).parent / "statectl"
JOB = "hostile-gc"
REF = StoreRef(JOB, "1", "Partition 0", "counts")
WHERE = ["--job", JOB, "--task", REF.task, "--store", REF.store]
DAY = 24 * 3600


def cli_env(tmp: Path, blobstore, request) -> dict[str, str]:
    env = {"PATH": f"{STATECTL.parent}:/usr/bin:/bin", "HOME": str(tmp / "home"), "LANG": "C.UTF-8",
           "XDG_DATA_HOME": str(tmp / "xdg-data"), "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
           "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    if blobstore.url.startswith("s3://"):
        o = request.getfixturevalue("s3_options")
        env.update(STATECTL_S3_ENDPOINT=o.endpoint_url, STATECTL_S3_REGION="us-east-1",
                   AWS_ACCESS_KEY_ID=o.access_key_id, AWS_SECRET_ACCESS_KEY=o.secret_access_key,
                   AWS_EC2_METADATA_DISABLED="true")
    return env


def statectl(env: dict[str, str], *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(STATECTL), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, **kw)


@pytest.fixture
def no_grace_floor(monkeypatch):
    monkeypatch.setattr(gc_mod, "MIN_GRACE_SECONDS", 0, raising=False)


# ---- 1. gc in a loop while backups commit --------------------------------------------------------------


def test_gc_in_a_loop_never_eats_a_backup_in_flight(blobstore, tmp_path: Path, request, no_grace_floor):
    """Two stores backed up again and again by real processes (each pausing between its uploads and its
    commit), while gc with a zero grace loops: every committed snapshot verifies byte for byte."""
    env = cli_env(tmp_path, blobstore, request)
    env["STATECTL_FAILPOINTS"] = "after-index-upload=sleep:0.7"
    refs = [REF, replace(REF, store="other")]
    dirs = {ref: store_dir(tmp_path / "state", ref.store, ref.task) for ref in refs}
    stop = threading.Event()
    gc_errors: list[BaseException] = []
    cps = BlobCheckpointStore(blobstore)
    runs = {"gc": 0}

    def gc_loop() -> None:
        # A pause between passes: still a dozen passes in each backup's 0.7 s between its uploads and its
        # commit, not hundreds (a pass on file:// takes a few ms, and back to back they were most of the CPU).
        while not stop.wait(0.05):
            try:
                gc(GcOptions(grace_seconds=0), blobstore, cps)
                runs["gc"] += 1
            except BaseException as e:  # noqa: BLE001 - reported by the test
                gc_errors.append(e)
                return

    failures: list[str] = []

    def backups(ref: StoreRef, seed: int) -> None:
        for n in range(4):
            make_store(dirs[ref], 300, 1024, seed=seed + n, start=10_000 * n, sst_mb=1)
            p = statectl(env, "backup", "--blobstore", blobstore.url, "--job", ref.job, "--task", ref.task,
                         "--store", ref.store, "--store-dir", str(dirs[ref]), "--keep-last", "10", "-q")
            if p.returncode != 0:
                failures.append(f"{ref} #{n}: exit {p.returncode}: {p.stderr}")

    looper = threading.Thread(target=gc_loop)
    looper.start()
    workers = [threading.Thread(target=backups, args=(ref, 10 * i)) for i, ref in enumerate(refs)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        stop.set()
        looper.join()
    assert not gc_errors, gc_errors
    assert not failures, failures
    assert runs["gc"] >= 3
    for ref in refs:
        records = cps.list(ref)
        assert len(records) == 4
        for r in records:
            v = verify_snapshot(ref, blobstore, cps, r.checkpoint_id, download=True)
            assert v.ok, (ref, r.checkpoint_id, v.missing, v.corrupt)
        target = tmp_path / "restored" / ref.store
        p = statectl(env | {"STATECTL_FAILPOINTS": ""}, "restore", "--blobstore", blobstore.url, "--job", ref.job,
                     "--task", ref.task, "--store", ref.store, "--target-dir", str(target), "-q")
        assert p.returncode == 0, p.stderr
        assert fingerprint(target) == fingerprint(dirs[ref])


def test_gc_keeps_blobs_of_a_backup_holding_its_lease(blobstore, tmp_path: Path, request, no_grace_floor):
    """Blobs uploaded by a backup that has not committed yet survive a zero-grace gc, TTL expired or not."""
    env = cli_env(tmp_path, blobstore, request)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(sdir, 500, 1024, seed=3, sst_mb=1)
    cps = BlobCheckpointStore(blobstore)
    slow = subprocess.Popen([str(STATECTL), "backup", "--blobstore", blobstore.url, *WHERE, "--store-dir", str(sdir),
                             "-q"], env=dict(env, STATECTL_FAILPOINTS="after-index-upload=sleep:6"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(blob_keys(blobstore)) < 2:
            time.sleep(0.1)
        time.sleep(0.5)
        uploaded = blob_keys(blobstore)
        assert uploaded, "the backup uploaded nothing"
        res = gc(GcOptions(grace_seconds=0), blobstore, cps)
        assert res.blobs_deleted == 0 and uploaded <= blob_keys(blobstore)
    finally:
        out, err = slow.communicate(timeout=60)
    assert slow.returncode == 0, err
    assert verify_snapshot(REF, blobstore, cps, None, download=True).ok


def test_a_backup_that_outlived_its_lease_does_not_commit(blobstore, tmp_path: Path):
    """gc stops protecting a backup's uploads when its lease expires: a backup that stalled past that
    must not commit, even when nobody took the lease over."""
    from statectl.catalog.lease import Lease
    from statectl.errors import LeaseLostError

    lease = Lease(blobstore, REF, seconds=1)
    lease.acquire()
    time.sleep(1.2)
    with pytest.raises(LeaseLostError):
        lease.check()


# ---- the grace floor ------------------------------------------------------------------------------------


def test_grace_below_a_minute_is_refused_like_ttl(tmp_path: Path):
    url = f"file://{tmp_path / 'blobs'}"
    bs = open_blobstore(url)
    cps = BlobCheckpointStore(bs)
    keep = bs.put(io.BytesIO(b"young orphan"), size=12, ttl_seconds=None)
    with pytest.raises(UsageError, match="at least a minute"):
        past_mtime_grain(bs)
        gc(GcOptions(grace_seconds=0), bs, cps)
    env = {"PATH": f"{STATECTL.parent}:/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c")}
    for grace in ("0", "0s", "59s"):
        p = statectl(env, "gc", "--blobstore", url, "--grace", grace, "-q")
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith("Error: --grace must be at least a minute"), p.stderr
    assert blob_keys(bs) == {keep}
    p = statectl(env, "gc", "--blobstore", url, "--grace", "1m", "-q")
    assert p.returncode == 0, p.stderr
    assert blob_keys(bs) == {keep}


# ---- 2. a damaged latest snapshot -----------------------------------------------------------------------


def _damaged_world(blobstore, tmp_path: Path, what: str):
    """Two snapshots (keep-last 3); the latest one's cleanup pending and one of its blobs gone."""
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(sdir, 800, 1024, seed=1, sst_mb=1)
    cps = BlobCheckpointStore(blobstore)
    older = backup(BackupOptions(REF, sdir, keep_last=3), blobstore, cps)
    older_fp = fingerprint(sdir)
    make_store(sdir, 400, 1024, seed=2, start=50_000, sst_mb=1)
    latest = backup(BackupOptions(REF, sdir, keep_last=3), blobstore, cps)
    record = cps.latest(REF)
    cps.write(REF, replace(record, cleanup_done=False))
    if what == "data blob":
        new = set(read_index(blobstore, latest.snapshot_id).present_blob_ids()) - \
            set(read_index(blobstore, older.snapshot_id).present_blob_ids())
        blobstore.delete([sorted(new)[0]])
    else:
        blobstore.delete([latest.snapshot_id])
    return sdir, cps, older, older_fp, latest


@pytest.mark.parametrize("what", ["data blob", "index blob"])
def test_a_damaged_latest_snapshot_blocks_nothing(blobstore, tmp_path: Path, request, what):
    sdir, cps, older, older_fp, latest = _damaged_world(blobstore, tmp_path, what)
    env = cli_env(tmp_path, blobstore, request)
    base = ["--blobstore", blobstore.url, *WHERE]

    p = statectl(env, "restore", *base, "--snapshot", older.checkpoint_id, "--target-dir", str(tmp_path / "old"))
    assert p.returncode == 0, p.stderr
    assert fingerprint(tmp_path / "old") == older_fp

    p = statectl(env, "gc", "--blobstore", blobstore.url, "-o", "json")
    assert p.returncode == 0, p.stderr
    assert any("damaged" in n or "unreadable" in n for n in json.loads(p.stdout)["notes"]), p.stdout
    assert verify_snapshot(REF, blobstore, cps, older.checkpoint_id, download=True).ok

    p = statectl(env, "backup", *base, "--store-dir", str(sdir), "--keep-last", "3", "-o", "json")
    assert p.returncode == 0, p.stderr
    new = json.loads(p.stdout)
    assert new["files_uploaded"] == new["files_total"]  # a full backup: a new chain
    assert read_index(blobstore, new["snapshot_id"]).prev_snapshot_index_blob_id is None
    assert verify_snapshot(REF, blobstore, cps, None, download=True).ok
    p = statectl(env, "restore", *base, "--target-dir", str(tmp_path / "new"))
    assert p.returncode == 0, p.stderr
    assert fingerprint(tmp_path / "new") == fingerprint(sdir)
    # The older good snapshot survived all of it.
    p = statectl(env, "restore", *base, "--snapshot", older.checkpoint_id, "--target-dir", str(tmp_path / "old2"))
    assert p.returncode == 0, p.stderr
    assert fingerprint(tmp_path / "old2") == older_fp
    p = statectl(env, "gc", "--blobstore", blobstore.url, "-q")
    assert p.returncode == 0, p.stderr


def test_a_backup_whose_blobs_vanish_before_its_cleanup_fails_and_the_next_starts_over(blobstore, tmp_path: Path,
                                                                                      monkeypatch):
    import statectl.catalog.commit as commit_mod  # backup's (and copy's, rescale's) commit path

    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(sdir, 800, 1024, seed=1, sst_mb=1)
    cps = BlobCheckpointStore(blobstore)
    backup(BackupOptions(REF, sdir, keep_last=2), blobstore, cps)
    make_store(sdir, 400, 1024, seed=2, start=50_000, sst_mb=1)
    real = commit_mod.post_commit_cleanup

    def cleanup_after_a_thief(bs, cps_, ref, record, index, **kw):
        bs.delete(kw["new_blob_ids"][:1])  # what the old gc did to a backup in flight
        return real(bs, cps_, ref, record, index, **kw)

    monkeypatch.setattr(commit_mod, "post_commit_cleanup", cleanup_after_a_thief)
    from statectl.errors import CorruptSnapshotError

    with pytest.raises(CorruptSnapshotError, match="blobs are gone"):
        backup(BackupOptions(REF, sdir, keep_last=2), blobstore, cps)
    monkeypatch.undo()
    r = backup(BackupOptions(REF, sdir, keep_last=2), blobstore, cps)
    assert r.files_uploaded == r.files_total
    assert verify_snapshot(REF, blobstore, cps, None, download=True).ok


# ---- 6. leftovers of killed writes ----------------------------------------------------------------------


def _backdate(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _kill_mid_write(tmp_path: Path, url: str, sdir: Path, root: Path) -> None:
    """SIGKILL a real backup while a partial file of its upload exists (retried until caught)."""
    env = {"PATH": f"{STATECTL.parent}:/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c")}
    for _ in range(20):
        proc = subprocess.Popen([str(STATECTL), "backup", "--blobstore", url, *WHERE, "--store-dir", str(sdir),
                                 "--chunk-size", "64MiB", "-j", "1", "-q"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        caught = False
        while proc.poll() is None:
            if any(p.name.startswith(".tmp-") for p in (root / "blobs").rglob("*")):
                proc.send_signal(signal.SIGKILL)
                caught = True
                break
        proc.wait()
        if caught and any(p.name.startswith(".tmp-") for p in (root / "blobs").rglob("*")):
            return
    pytest.fail("never caught a backup mid-write")


def test_gc_reclaims_every_leftover_of_killed_writes_on_file(tmp_path: Path):
    root = tmp_path / "blobs"
    url = f"file://{root}"
    bs = open_blobstore(url)
    cps = BlobCheckpointStore(bs)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(sdir, 800, 1024, seed=1, sst_mb=1)
    backup(BackupOptions(REF, sdir), bs, cps)
    make_store(sdir, 30_000, 4096, seed=2, start=100_000, sst_mb=128)
    _kill_mid_write(tmp_path, url, sdir, root)

    fake = [root / "blobs/ab/.tmp-abcdef.1234abcd", root / "blobs/ab/.tmp-abcdef.ttl.5678abcd",
            root / "blobs/cd/cdcdcd.ttl", root / "checkpoints/.tmp-x.json.0000abcd",
            root / "leases/.tmp-y.json.1111abcd"]
    for p in fake:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"partial")
    young = root / "blobs/ef/.tmp-efef.2222abcd"
    young.parent.mkdir(parents=True, exist_ok=True)
    young.write_bytes(b"a write in progress")
    debris = [p for p in root.rglob("*") if p.is_file() and (p.name.startswith(".tmp-") or
              (p.name.endswith(".ttl") and not p.with_name(p.name[:-4]).exists()))]
    for p in debris:
        if p != young:
            _backdate(p, 2 * DAY)
    # Everything else (blobs, sidecars of live blobs, records, lease and lock files) is old too.
    others = [p for p in root.rglob("*") if p.is_file() and p not in debris]
    for p in others:
        _backdate(p, 2 * DAY)
    before_others = {p: p.read_bytes() for p in others}
    latest = cps.latest(REF)
    needed = snapshot_blob_ids(latest.index_blob_id, read_index(bs, latest.index_blob_id))

    dry = gc(GcOptions(dry_run=True), bs, cps)
    expected = {p.relative_to(root).as_posix() for p in debris if p != young}
    assert {a.key for a in dry.debris} == expected and dry.debris_deleted == len(expected)
    assert all(p.exists() for p in debris)

    res = gc(GcOptions(), bs, cps)
    assert {a.key for a in res.debris} == expected
    assert [p for p in debris if p.exists()] == [young]
    # Nothing else went but unreferenced blobs of the killed backup (older than the grace).
    for p, data in before_others.items():
        if p.exists():
            continue
        key = p.relative_to(root).as_posix()
        assert key.startswith("blobs/") and key.removesuffix(".ttl") not in needed, key
    assert needed <= blob_keys(bs)
    assert verify_snapshot(REF, bs, cps, None, download=True).ok
    assert gc(GcOptions(), bs, cps).debris_deleted == 0


def test_gc_aborts_incomplete_multipart_uploads_on_s3(s3_url, s3_options, seaweed, no_grace_floor, monkeypatch):
    bs = open_blobstore(s3_url, s3=s3_options)
    try:
        cps = BlobCheckpointStore(bs)
        client = seaweed.client
        bucket, prefix = s3_url[len("s3://"):].split("/", 1)
        inner = getattr(bs, "inner", bs)
        key = f"{prefix}/blobs/aa/{'a' * 32}"
        up = client.create_multipart_upload(Bucket=bucket, Key=key)
        client.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=1, Body=b"x" * 1024)
        foreign = client.create_multipart_upload(Bucket=bucket, Key="someone-else/upload")
        time.sleep(1.1)
        # With the default grace the upload is too young to go, and so is it with none, at first.
        assert gc(GcOptions(), bs, cps).debris_deleted == 0
        past_mtime_grain(bs)
        assert gc(GcOptions(grace_seconds=0), bs, cps).debris_deleted == 0
        monkeypatch.setattr(gc_mod, "DEBRIS_MIN_AGE_SECONDS", 0, raising=False)  # S3 uploads cannot be backdated
        dry = gc(GcOptions(grace_seconds=0, dry_run=True), bs, cps)
        assert [a.key for a in dry.debris] == [f"blobs/aa/{'a' * 32}"]
        res = gc(GcOptions(grace_seconds=0), bs, cps)
        assert res.debris_deleted == 1
        left = [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]
        assert key not in left and "someone-else/upload" in left
        client.abort_multipart_upload(Bucket=bucket, Key="someone-else/upload", UploadId=foreign["UploadId"])
        assert inner is not None
    finally:
        bs.close()


# ---- 9. stale leases ------------------------------------------------------------------------------------


def _stale_lease(bs, *, host: str = "elsewhere.example", pid: int = 4242) -> bytes:
    now = time.time()
    body = json.dumps({"owner": "dead", "host": host, "pid": pid, "operation": "backup", "store": str(REF),
                       "started": now - 60, "acquired": now - 10, "expires": now + 290, "released": False}).encode()
    bs.put_at(lease_key(REF), body)
    return body


def test_a_stale_lease_from_another_host_is_broken_from_the_cli(blobstore, tmp_path: Path, request):
    env = cli_env(tmp_path, blobstore, request)
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(sdir, 300, 1024, seed=1, sst_mb=1)
    body = _stale_lease(blobstore)
    base = ["--blobstore", blobstore.url, *WHERE]

    p = statectl(env, "backup", *base, "--store-dir", str(sdir))
    assert p.returncode == 11, p.stderr
    hint = p.stderr.splitlines()[1]
    day = time.strftime("%Y-%m-%dT", time.gmtime(time.time() + 290))
    assert hint.startswith("Hint: ") and f"expires at {day}" in hint and "statectl lease break" in hint, p.stderr

    # No --yes and no terminal: refused, nothing changed.
    p = statectl(env, "lease", "break", *base)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("Error: lease break needs confirmation"), p.stderr
    assert blobstore.read_at(lease_key(REF))[0] == body

    p = statectl(env, "lease", "show", *base, "-o", "json")
    assert p.returncode == 0, p.stderr
    shown = json.loads(p.stdout)
    assert shown["host"] == "elsewhere.example" and shown["live"] and not shown["released"]

    p = statectl(env, "lease", "break", *base, "--yes")
    assert p.returncode == 0, p.stderr
    assert json.loads(blobstore.read_at(lease_key(REF))[0])["released"] is True
    p = statectl(env, "backup", *base, "--store-dir", str(sdir), "-q")
    assert p.returncode == 0, p.stderr


def test_lease_break_refuses_a_live_holder_on_this_host_without_force(blobstore, tmp_path: Path, request):
    env = cli_env(tmp_path, blobstore, request)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        body = _stale_lease(blobstore, host=socket.gethostname(), pid=sleeper.pid)
        base = ["--blobstore", blobstore.url, *WHERE]
        p = statectl(env, "lease", "break", *base, "--yes")
        assert p.returncode == 11, p.stderr
        assert blobstore.read_at(lease_key(REF))[0] == body
        p = statectl(env, "lease", "break", *base, "--yes", "--force")
        assert p.returncode == 0, p.stderr
    finally:
        sleeper.kill()
        sleeper.wait()
    p = statectl(env, "lease", "break", "--blobstore", blobstore.url, "--job", "never", "--store", "x", "--yes")
    assert p.returncode == 10, p.stderr
