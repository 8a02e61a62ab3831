"""The second hostile round: variants of the first round's cases that still got through. Each failed
before its fix (the way it failed is in the test's docstring); each checks that nothing existing changed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from statectl.local.layout import store_dir
from tests.integration.test_bad_input import (STATECTL, TASK, WHERE, World, assert_error, assert_unchanged, capture,
                                              capture_after, make_world, temp_dirs_beside)
from tests.tools.genstore import fingerprint, make_store


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path, keys=600)


def _blob_count(world: World) -> int:
    return sum(1 for p in (world.blobs / "blobs").rglob("*") if p.is_file())


@pytest.fixture
def bind_mount(tmp_path: Path):
    """mount --bind SRC DST, undone at the end (these tests run as root, as CI does)."""
    mounted: list[Path] = []

    def mount(src: Path, dst: Path) -> None:
        dst.mkdir(parents=True, exist_ok=True)
        p = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True, text=True)
        assert p.returncode == 0, f"mount --bind failed: {p.stderr}"
        mounted.append(dst)

    yield mount
    for dst in reversed(mounted):
        if subprocess.run(["umount", str(dst)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(dst)], capture_output=True)


def test_force_into_a_dir_holding_a_bind_mount_of_the_blob_store_is_refused(world: World, bind_mount):
    """The blob store, bind-mounted inside a --force target, was emptied (exit 0): the check compared
    paths only, and os.path.ismount misses a bind mount on the same filesystem."""
    junk = world.tmp / "junk"
    junk.mkdir()
    (junk / "file").write_text("x")
    bind_mount(world.blobs, junk / "m")
    blobs = _blob_count(world)
    before = capture([world.store], [world.blobs])
    p = world.run("restore", *WHERE, "--target-dir", str(junk), "--force")
    assert_error(p, 2, str(junk / "m"), "mount point")
    assert _blob_count(world) == blobs
    assert_unchanged(before, capture_after(before))
    assert not temp_dirs_beside(junk)


def test_a_store_target_holding_a_bind_mount_is_not_replaced(world: World, bind_mount):
    """The same through a target that is a RocksDB store (replaced without --force)."""
    target = world.tmp / "scratch" / "counts"
    make_store(target, 50, 50, seed=4)
    bind_mount(world.blobs, target / "m")
    blobs = _blob_count(world)
    p = world.run("restore", *WHERE, "--target-dir", str(target))
    assert_error(p, 2, "mount point")
    assert _blob_count(world) == blobs


def test_restore_into_another_store_of_the_state_dir_is_refused(world: World):
    """It silently replaced the other store with this one's data (exit 0), directly or through a link."""
    other = store_dir(world.state, "other", TASK)
    make_store(other, 100, 100, seed=5)
    link = world.tmp / "l10"
    link.symlink_to(other)
    before = capture([world.store, other], [world.state])
    for target in (other, link):
        p = world.run(*world.restore_args(), "--target-dir", str(target))
        assert_error(p, 2, str(other), "another store")
    assert_unchanged(before, capture_after(before))
    # Its own dir, and a scratch dir outside the state dir restored twice, still work.
    assert world.run(*world.restore_args()).returncode == 0
    scratch = world.tmp / "scratch" / "counts"
    for _ in range(2):
        p = world.run(*world.restore_args(), "--target-dir", str(scratch))
        assert p.returncode == 0, p.stderr
    assert fingerprint(scratch) == fingerprint(world.store)


def test_a_blob_missing_from_the_latest_snapshot_is_not_carried_into_the_next(world: World):
    """The next backup reused the missing blob, said it was fine (exit 0), and the snapshot it made
    could not be restored on a fresh host."""
    assert world.run("backup", *WHERE, "--state-dir", str(world.state)).returncode == 0
    index = json.loads(world.run("snapshots", "show", *WHERE, "-o", "json").stdout)
    sst = next(f for f in index["dir-index"]["files-present"] if f["file-name"].endswith(".sst"))
    name = sst["file-name"]
    world.blobs.joinpath(*sst["blobs"][0]["blob-id"].split("/")).unlink()
    p = world.run("backup", *WHERE, "--state-dir", str(world.state), "-o", "json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["files_uploaded"] == result["files_total"]  # a new full chain
    assert any("damaged" in n and name in n for n in result["notes"]), result["notes"]
    assert world.run("snapshots", "verify", *WHERE).returncode == 0
    fresh = world.tmp / "fresh" / "counts"
    p = world.run("restore", *WHERE, "--state-dir", str(world.tmp / "empty"), "--target-dir", str(fresh))
    assert p.returncode == 0, p.stderr
    assert fingerprint(fresh) == fingerprint(world.store)


@pytest.mark.parametrize("damage", ["truncated", "files-present-null"])
def test_a_malformed_retained_index_does_not_stop_gc(world: World, damage: str):
    """gc exited 1 for the whole blob store, at every run, while the damaged snapshot was retained."""
    index_path = world.index_path
    if damage == "truncated":
        index_path.write_bytes(index_path.read_bytes()[:100])
    else:
        world.write_index({**world.index(), "dir-index": {**world.index()["dir-index"], "files-present": None}})
    stray = world.blobs / "blobs" / "ff" / "ffstray"
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"unreferenced")
    os.utime(stray, (1, 1))
    for _ in range(2):
        p = world.run("gc", "--grace", "1m", "-o", "json")
        assert p.returncode == 0, p.stderr
        result = json.loads(p.stdout)
        assert any("malformed" in n and world.snapshot_id in n for n in result["notes"]), result["notes"]
        # What the damaged index references is unknown: nothing unreferenced is swept meanwhile.
        assert stray.exists() and result["blobs_deleted"] == 0
    # Retention drops it after the next backup (keep-last 1): gc then sweeps as usual.
    assert world.run("backup", *WHERE, "--state-dir", str(world.state)).returncode == 0
    p = world.run("gc", "--grace", "1m", "-o", "json")
    assert p.returncode == 0, p.stderr
    assert not stray.exists()


def test_small_size_claims_reserve_no_disk(world: World):
    """60 extra entries claiming 16 MiB each, backed by 16-byte blobs, preallocated about 1 GB before
    the restore failed."""
    index = world.index()
    files = index["dir-index"]["files-present"]
    current = next(f for f in files if f["file-name"] == "CURRENT")
    for i in range(60):
        files.append({**current, "file-name": f"fake-{i:02d}",
                      "file-metadata": {**current["file-metadata"], "size": 16 * 1024 * 1024}})
    world.write_index(index)
    target = world.tmp / "it"
    statvfs = os.statvfs(world.tmp)
    free_before = statvfs.f_bavail * statvfs.f_frsize
    p = world.run("restore", *WHERE, "--state-dir", str(world.tmp / "empty"), "--target-dir", str(target))
    assert_error(p, 1, "fake-", "shorter than the index says")
    assert not target.exists() and not temp_dirs_beside(target)
    statvfs = os.statvfs(world.tmp)
    # Whatever else the machine wrote meanwhile, nothing near 60 x 16 MiB was held.
    assert free_before - statvfs.f_bavail * statvfs.f_frsize < 256 * 1024 * 1024


@pytest.mark.parametrize("blob_id", ["blobs/23/236d5e.ttl", "blobs/23/236d5e.lock", "blobs/23/.tmp-236d5e",
                                     "blobs/23/\x1b[2J"])
def test_a_blob_id_a_blob_store_keeps_for_itself_is_a_malformed_index(world: World, blob_id: str):
    """It exited 2 (a usage error from the file store) instead of 1 (a damaged snapshot)."""
    index = world.index()
    index["dir-index"]["files-present"][0]["blobs"][0]["blob-id"] = blob_id
    world.write_index(index)
    before = world.capture()
    assert_error(world.run(*world.restore_args()), 1, "malformed index")
    assert_unchanged(before, capture_after(before))


def test_a_name_that_is_not_unicode_is_a_malformed_index(world: World):
    """A lone surrogate (JSON "\\ud800") failed with "unexpected UnicodeEncodeError"."""
    raw = world.index_path.read_text()
    index = json.loads(raw)
    name = index["dir-index"]["files-present"][0]["file-name"]
    world.index_path.write_text(raw.replace(f'"{name}"', '"bad-\\ud800-name"', 1))
    before = world.capture()
    assert_error(world.run(*world.restore_args(), "--target-dir", str(world.tmp / "new")), 1, "malformed index")
    assert_unchanged(before, capture_after(before))
    assert not (world.tmp / "new").exists()


def test_a_dangling_symlink_among_the_target_parents_is_refused(world: World):
    """``--target-dir l2/sub`` with l2 dangling created the dir l2 names and restored there, exit 0."""
    l2 = world.tmp / "l2"
    l2.symlink_to(world.tmp / "nowhere")
    p = world.run(*world.restore_args(), "--target-dir", str(l2 / "sub"))
    assert_error(p, 2, str(l2), "does not exist")
    assert not (world.tmp / "nowhere").exists()


def test_credentials_botocore_finds_itself_are_masked(tmp_path: Path, seaweed):
    """Keys from ~/.aws (never seen by statectl's settings) appeared in --debug logs unmasked."""
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = AKIDFILE\n"
                                          "aws_secret_access_key = FILESECRETVALUE123\n"
                                          "aws_session_token = FILETOKENVALUE456\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STATECTL_"))}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"), AWS_CONFIG_FILE=str(tmp_path / "config"),
               HOME=str(tmp_path))
    p = subprocess.run([STATECTL, "--debug", "snapshots", "list", *WHERE, "--blobstore", f"s3://{seaweed.make_bucket()}/p",
                        "--s3-endpoint", seaweed.endpoint], env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert "X-Amz-Security-Token" in out or "Security-Token" in out or "****" in out, out[-2000:]
    assert "FILESECRETVALUE123" not in out and "FILETOKENVALUE456" not in out
