"""A hostile or unlucky operator against restore, end to end (statectl as a real process): targets that
overlap the blob store or other state, snapshots of other stores, indexes that lie, symlinked targets,
signals, odd blob store URLs and file names. Each case failed before its fix; each checks that nothing
existing changed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.local.layout import store_dir
from tests.integration.test_bad_input import (STATECTL, STORE, TASK, WHERE, World, assert_error, assert_unchanged,
                                              capture, capture_after, clean_env, make_world, temp_dirs_beside)
from tests.tools.genstore import fingerprint, make_store


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path, keys=600)


# ---- 2. targets that hold what a restore must never delete ----------------------------------------

def test_force_into_a_dir_that_holds_the_blob_store_is_refused(world: World):
    """It deleted every backup, exit 0."""
    xdg = world.blobs.parent.parent  # $XDG_DATA_HOME, which holds statectl/blobs
    before = capture([world.store], [world.tmp])
    for target in (xdg, world.blobs, world.blobs / "blobs", world.blobs / "new-dir"):
        p = world.run("restore", *WHERE, "--target-dir", str(target), "--force")
        assert_error(p, 2, str(target.resolve()), "blob store")
    assert_unchanged(before, capture_after(before))


def test_force_never_replaces_other_state_or_the_root(world: World):
    other = store_dir(world.state, "other", TASK)
    make_store(other, 100, 100, seed=5)
    before = capture([world.store, other], [world.tmp])
    # The state dir (holds every store), a store's parent, and a dir inside a store.
    for target, words in ((world.state, ["holds the RocksDB store"]),
                          (world.state / "other", ["holds the RocksDB store", str(other)]),
                          (other / "sub", ["inside the RocksDB store", str(other)])):
        p = world.run("restore", *WHERE, "--target-dir", str(target), "--force")
        assert_error(p, 2, str(target), *words)
    p = world.run("restore", *WHERE, "--target-dir", "/", "--force")
    assert_error(p, 2, "root of the filesystem")
    assert_unchanged(before, capture_after(before))


# ---- 3. a snapshot of another store, named by its full id ------------------------------------------

def test_full_snapshot_id_of_another_store_is_refused(world: World):
    """It replaced the live store with the other job's data, exit 0."""
    src = world.tmp / "jo-src"
    make_store(src, 200, 64, seed=7)
    bs = open_blobstore(f"file://{world.blobs}")
    try:
        other = backup(BackupOptions(StoreRef("jo", "1", TASK, "other"), src), bs, BlobCheckpointStore(bs))
    finally:
        bs.close()
    sid = other.snapshot_id
    before = capture([world.store], [world.state, world.blobs])
    for args in ([*world.restore_args(), "--snapshot", sid], ["snapshots", "show", sid, *WHERE],
                 ["snapshots", "verify", sid, *WHERE],
                 ["diff", *WHERE, "--state-dir", str(world.state), "--snapshot", sid]):
        p = world.run(*args)
        assert_error(p, 10, sid, "jo-1/Partition 0/other")
        assert "--from-other-store" in p.stderr
    assert_unchanged(before, capture_after(before))

    # A deliberate cross-restore says what it did.
    target = world.tmp / "cross"
    p = world.run("restore", *WHERE, "--target-dir", str(target), "--snapshot", other.snapshot_id,
                  "--from-other-store")
    assert p.returncode == 0, p.stderr
    assert "jo-1/Partition 0/other" in p.stderr
    assert fingerprint(target) == fingerprint(src)
    assert_error(world.run(*world.restore_args(), "--from-other-store"), 2, "--snapshot")


# ---- 4. indexes that lie -------------------------------------------------------------------------

def _files(index: dict) -> list[dict]:
    return index["dir-index"]["files-present"]


@pytest.mark.parametrize("case", ["files-present-null", "sub-dirs-null", "checksum-missing", "size-beyond-long",
                                  "blob-id-is-a-catalog-record", "huge-size", "huge-size-split"])
def test_index_that_lies_is_refused_before_anything_is_written(world: World, case: str):
    """``files-present: null`` restored an EMPTY store over a good one and verify said OK; a size of
    10**15 grew restore to 22 GB before it was killed."""
    index = world.index()
    f = max(_files(index), key=lambda f: f["file-metadata"]["size"])
    words = ["malformed index"]
    if case == "files-present-null":
        index["dir-index"]["files-present"] = None
    elif case == "sub-dirs-null":
        index["dir-index"]["sub-dirs-present"] = None
    elif case == "checksum-missing":
        del f["checksum"]
    elif case == "size-beyond-long":
        f["file-metadata"]["size"] = 10 ** 20
    elif case == "blob-id-is-a-catalog-record":
        f["blobs"][0]["blob-id"] = "checkpoints/x.json"
    elif case == "huge-size":
        f["file-metadata"]["size"] = 10 ** 15
        words = [f["file-name"], "the index says"]
    else:  # the claim spread over a second blob
        f["blobs"].append({"blob-id": f["blobs"][0]["blob-id"], "offset": 5 * 10 ** 14})
        f["file-metadata"]["size"] = 10 ** 15
        words = [f["file-name"], "the index says"]
    world.write_index(index)
    before = world.capture()
    for args in (world.restore_args(), ["restore", *WHERE, "--target-dir", str(world.tmp / "new")]):
        p = world.run(*args, timeout=30)
        assert_error(p, 1, *words)
    p = world.run("snapshots", "verify", *WHERE, timeout=30)
    assert_error(p, 1)
    assert_unchanged(before, capture_after(before))
    assert not (world.tmp / "new").exists() and not temp_dirs_beside(world.store)


def test_missing_index_blob_of_a_known_snapshot_is_damage_not_absence(world: World):
    world.index_path.unlink()
    before = world.capture()
    for args in (world.restore_args(), ["snapshots", "show", *WHERE], ["snapshots", "verify", *WHERE],
                 [*world.restore_args(), "--snapshot", world.checkpoint_id]):
        assert_error(world.run(*args), 1, world.snapshot_id, "damaged")
    assert_unchanged(before, capture_after(before))


# ---- 5. a target that is a symlink ---------------------------------------------------------------

def test_symlinked_target_is_followed(world: World):
    """It swapped a dir in place of the link, then failed on rmtree of a symlink, exit 1."""
    real = world.tmp / "ssd" / "counts-p0"
    real.parent.mkdir()
    make_store(real, 50, 10, seed=9)
    link = world.tmp / "link"
    link.symlink_to(real)
    p = world.run("restore", *WHERE, "--target-dir", str(link), "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["target_dir"] == str(real.resolve())
    assert link.is_symlink() and os.readlink(link) == str(real)
    expected = world.tmp / "expected"
    assert world.run("restore", *WHERE, "--target-dir", str(expected)).returncode == 0
    assert fingerprint(real) == fingerprint(expected)
    assert sorted(os.listdir(world.tmp)) == sorted(["home", "xdg-data", "state", "ssd", "link", "expected"])
    assert os.listdir(real.parent) == ["counts-p0"]

    # A link in the middle of the path (a state dir on another volume) is followed the same way.
    vol = world.tmp / "vol"
    vol.mkdir()
    (world.tmp / "state-link").symlink_to(vol)
    p = world.run("restore", *WHERE, "--target-dir", str(world.tmp / "state-link" / "counts"))
    assert p.returncode == 0, p.stderr
    assert fingerprint(vol / "counts") == fingerprint(expected)


def test_dangling_or_looping_symlink_target_is_refused(world: World):
    dangling = world.tmp / "dangling"
    dangling.symlink_to(world.tmp / "nowhere")
    loop = world.tmp / "loop"
    loop.symlink_to(loop)
    before = capture([world.store], [world.tmp])
    assert_error(world.run("restore", *WHERE, "--target-dir", str(dangling)), 2, str(dangling), "does not exist")
    assert_error(world.run("restore", *WHERE, "--target-dir", str(loop)), 2, str(loop))
    assert_unchanged(before, capture_after(before))
    assert not (world.tmp / "nowhere").exists()


def test_leftovers_of_a_killed_restore_are_removed_by_the_next(world: World):
    """Temp dirs, replaced stores not yet deleted, and the hidden symlink the old code left."""
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    for name in (f".{world.store.name}.statectl-restore-{dead}-abcd1234",
                 f".{world.store.name}.statectl-old-{dead}-abcd1234"):
        (world.store.parent / name).mkdir()
        (world.store.parent / name / "junk").write_text("x")
    (world.store.parent / f".{world.store.name}.statectl-restore-{dead}-link").symlink_to(world.tmp)
    assert world.run(*world.restore_args()).returncode == 0
    assert not temp_dirs_beside(world.store)
    assert os.path.isdir(world.tmp / "home")  # what the link pointed at is untouched


# ---- 9. signals, URLs and file names -------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_during_restore_unwinds_like_ctrl_c(world: World, sig: signal.Signals):
    """It exited 143 and left the temp dir until the next restore."""
    env = clean_env(world.tmp, STATECTL_FAILPOINTS="during-download=sleep:2")
    before = capture([world.store], [world.state, world.blobs])
    proc = subprocess.Popen([str(STATECTL), *world.restore_args()], cwd=world.tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not temp_dirs_beside(world.store):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == f"Interrupted by {sig.name}."
    assert not temp_dirs_beside(world.store)
    assert_unchanged(before, capture_after(before), mtime_may_change=(STORE,))


@pytest.mark.parametrize("url", ["file:relative", "file:///", "file:///tmp/..", "file:////", "file:"])
def test_blob_store_urls_that_do_not_name_a_dir_of_their_own(world: World, url: str):
    """``file:relative`` wrote relative to the cwd, ``file:///`` into /blobs."""
    before = capture([world.store], [world.tmp])
    for args in (["backup", *WHERE, "--state-dir", str(world.state)], ["snapshots", "list", *WHERE]):
        assert_error(world.run(*args, "--blobstore", url), 2, repr(url))
    assert_unchanged(before, capture_after(before))
    assert not Path("/blobs").exists() or Path("/blobs").stat().st_mtime < time.time() - 600


def test_relative_xdg_data_home_is_ignored(world: World):
    env = clean_env(world.tmp, XDG_DATA_HOME="relative-data")
    p = world.run("backup", *WHERE, "--state-dir", str(world.state), env=env)
    assert p.returncode == 0, p.stderr
    assert not (world.tmp / "relative-data").exists()
    assert (world.tmp / "home" / ".local" / "share" / "statectl" / "blobs").is_dir()


@pytest.mark.parametrize("name", [b"bad-\xff-name", b"back\\slash"], ids=["not-utf8", "backslash"])
def test_file_name_an_index_cannot_carry_fails_before_any_upload(world: World, name: bytes):
    """A non-UTF-8 name failed with "unexpected UnicodeEncodeError" after uploading 42 blobs."""
    cid = f"{time.time_ns() // 1_000_000}-7"
    cp = world.store.with_name(f"{world.store.name}-{cid}")
    shutil.copytree(world.store, cp)
    with open(os.path.join(os.fsencode(cp), name), "wb") as f:
        f.write(b"x")
    before = capture([], [world.blobs / "blobs", world.blobs / "checkpoints"])
    p = world.run("backup", *WHERE, "--state-dir", str(world.state), "--checkpoint-dir", str(cp))
    assert_error(p, 1, "cannot back up")
    assert_unchanged(before, capture_after(before))
    p = world.run("diff", *WHERE, "--store-dir", str(cp), "-o", "json")
    assert_error(p, 1, "cannot back up")


# ---- the same on S3 (SeaweedFS) ------------------------------------------------------------------

def _s3_world(world: World, seaweed) -> tuple[dict[str, str], str, str, str]:
    """Back up the live store into a fresh bucket; return (env, url, bucket, index key)."""
    from tests.integration.test_bad_input import s3_env

    bucket = seaweed.make_bucket()
    url = f"s3://{bucket}/statectl"
    env = s3_env(world.tmp, seaweed.endpoint, seaweed.access_key, seaweed.secret_key)
    p = world.run("backup", *WHERE, "--state-dir", str(world.state), "--blobstore", url, "-o", "json", env=env)
    assert p.returncode == 0, p.stderr
    return env, url, bucket, "statectl/" + json.loads(p.stdout)["snapshot_id"]


@pytest.mark.parametrize("case", ["files-present-null", "huge-size", "index-missing", "other-store"])
def test_s3_index_that_lies_or_belongs_elsewhere(world: World, seaweed, case: str):
    from tests.integration.test_bad_input import bucket_listing

    env, url, bucket, key = _s3_world(world, seaweed)
    client = seaweed.client
    index = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    code, words = 1, ["malformed index"]
    if case == "files-present-null":
        index["dir-index"]["files-present"] = None
    elif case == "huge-size":
        f = max(_files(index), key=lambda f: f["file-metadata"]["size"])
        f["file-metadata"]["size"] = 10 ** 15
        words = [f["file-name"], "the index says"]
    elif case == "other-store":
        index["snapshot-metadata"]["store-name"] = "other"
        code, words = 10, ["page-views-1/Partition 0/other"]
    if case == "index-missing":
        client.delete_object(Bucket=bucket, Key=key)
        words = ["damaged"]
    else:
        client.put_object(Bucket=bucket, Key=key, Body=json.dumps(index).encode())
    listing = bucket_listing(client, bucket)
    before = capture([world.store], [world.tmp])
    for args in (world.restore_args(), ["restore", *WHERE, "--target-dir", str(world.tmp / "new")]):
        assert_error(world.run(*args, "--blobstore", url, env=env, timeout=60), code, *words)
    p = world.run("snapshots", "verify", *WHERE, "--blobstore", url, env=env, timeout=60)
    assert_error(p, code)
    assert (words[0] in p.stdout + p.stderr) or case == "files-present-null"
    assert_unchanged(before, capture_after(before))
    assert bucket_listing(client, bucket) == listing


@pytest.mark.parametrize("command", ["backup", "restore", "verify", "gc"])
def test_absurd_parallelism_is_a_usage_error(world: World, command: str):
    """``-j 100000`` would start a thread per transfer until the host runs out."""
    args = {"backup": ["backup", *WHERE, "--state-dir", str(world.state)], "restore": world.restore_args(),
            "verify": ["snapshots", "verify", "--download", *WHERE], "gc": ["gc"]}[command]
    before = world.capture()
    assert_error(world.run(*args, "-j", "100000"), 2, "--parallelism", "256")
    assert_unchanged(before, capture_after(before))


def test_index_blob_too_big_to_be_an_index_is_refused(world: World, monkeypatch):
    import statectl.catalog.index as common
    from statectl.engine.restore import RestoreOptions, restore
    from statectl.errors import IndexFormatError
    from statectl.catalog.refs import StoreRef

    monkeypatch.setattr(common, "MAX_INDEX_BYTES", 1000)  # stands for 512 MiB: the real one is too big to write
    bs = open_blobstore(f"file://{world.blobs}")
    try:
        with pytest.raises(IndexFormatError) as e:
            restore(RestoreOptions(StoreRef("page-views", "1", TASK, STORE), world.store), bs, BlobCheckpointStore(bs))
    finally:
        bs.close()
    assert "larger than 1000 bytes" in str(e.value)


# ---- a versioned adstore: its sealed versions are never a restore's target ------------------------------

def test_restore_never_overwrites_a_sealed_adstore_version(world: World):
    """After 'adstore switch --version 1', 'restore --store members' followed the version link and
    replaced sealed version 1 with the latest snapshot: the version and its manifest were gone, exit 0."""
    data = world.tmp / "members.csv"
    members = ["--store", "members", "--state-dir", str(world.state)]
    for n in (1, 2):
        data.write_text("id,name\n" + "".join(f"{i},name-{n}-{i}\n" for i in range(50)))
        p = world.run("adstore", "load", "--from-file", str(data), "--key-field", "id", *members)
        assert p.returncode == 0, p.stderr
    p = world.run("adstore", "switch", "--version", "1", *members)
    assert p.returncode == 0, p.stderr
    link = store_dir(world.state, "members", TASK)
    p = world.run("backup", "--job", world_job(), *members)
    assert p.returncode == 0, p.stderr
    p = world.run("backup", *WHERE, "--state-dir", str(world.state))  # a newer snapshot of another store
    assert p.returncode == 0, p.stderr
    versions = link.with_name(link.name + ".versions")
    before = capture([world.store], [world.tmp])
    for args in (["--job", world_job(), *members],
                 [*WHERE, "--target-dir", str(link), "--force"],
                 [*WHERE, "--target-dir", str(versions / "1"), "--force"],
                 [*WHERE, "--target-dir", str(versions / "2" / "sub"), "--force"]):
        p = world.run("restore", *args)
        assert_error(p, 2, "sealed version of the versioned adstore", str(link))
    assert_unchanged(before, capture_after(before))
    assert os.readlink(link) == f"{versions.name}/1"
    p = world.run("-o", "json", "adstore", "versions", *members)
    assert p.returncode == 0, p.stderr
    assert [(v["version"], v["problem"]) for v in json.loads(p.stdout)["versions"]] == [(1, None), (2, None)]


def world_job() -> str:
    return WHERE[WHERE.index("--job") + 1]
