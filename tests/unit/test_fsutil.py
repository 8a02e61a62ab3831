"""statectl.fsutil: the one atomic small-file write."""

from __future__ import annotations

import os

import pytest

from statectl.fsutil import SYNC_ALL, SYNC_FILE, SYNC_NONE, write_atomic


@pytest.mark.parametrize("sync", [SYNC_ALL, SYNC_FILE, SYNC_NONE])
def test_write_atomic_replaces_the_file_whole(tmp_path, sync):
    path = tmp_path / "OFFSET-v2"
    path.write_text("old")
    write_atomic(path, "new ✓", sync=sync)
    assert path.read_text(encoding="utf-8") == "new ✓"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OFFSET-v2"]  # no temporary file left


def test_samzas_tmp_name_or_a_unique_one(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_atomic(tmp_path / "f", b"x")
    write_atomic(tmp_path / "f", b"y", unique=True)
    assert seen == ["f.tmp", f".f.{os.getpid()}.tmp"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_fsync_dirs_and_tree_sync_a_tree_by_name(tmp_path, monkeypatch):
    from statectl import fsutil

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "f").write_bytes(b"x")
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    fsutil.fsync_dirs(tmp_path)
    assert synced == [str(tmp_path / "a" / "b"), str(tmp_path / "a"), str(tmp_path)]  # children first
    synced.clear()
    fsutil.fsync_tree(tmp_path)
    assert synced == [str(tmp_path / "a" / "b"), str(tmp_path / "a" / "f"), str(tmp_path / "a"), str(tmp_path)]
