"""statectl.fsutil: the one atomic small-file write, and the owners of what statectl makes."""

from __future__ import annotations

import os
import pwd

import pytest

from statectl.fsutil import SYNC_ALL, SYNC_FILE, SYNC_NONE, chown_tree, make_dirs, owner_of, write_atomic


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


# -- owners: the real user nobody (the tests run as root, as CI does) --------------------------------------

NOBODY = (pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)


def _owner(p) -> tuple[int, int]:
    st = os.lstat(p)
    return st.st_uid, st.st_gid


def test_owner_of_is_the_paths_or_its_nearest_existing_parents(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, *NOBODY)
    assert owner_of(state) == NOBODY
    assert owner_of(state / "store" / "Partition_0") == NOBODY
    (state / "store").mkdir()
    assert owner_of(state / "store" / "Partition_0") == (0, 0)


def test_chown_tree_gives_everything_links_themselves_and_never_what_they_point_to(tmp_path):
    assert os.geteuid() == 0, "run the unit tests as root, as CI does"
    outside = tmp_path / "outside"
    outside.write_text("x")
    root = tmp_path / "store"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_text("f")
    (root / "CURRENT").write_text("MANIFEST-000001\n")
    (root / "link").symlink_to(outside)
    (root / "dirlink").symlink_to(tmp_path)
    chown_tree(root, NOBODY)
    for p in (root, root / "sub", root / "sub" / "f", root / "CURRENT", root / "link", root / "dirlink"):
        assert _owner(p) == NOBODY, p
    assert _owner(outside) == (0, 0) and _owner(tmp_path) == (0, 0)
    chown_tree(root / "CURRENT", (0, 0))  # a single file
    assert _owner(root / "CURRENT") == (0, 0) and _owner(root) == NOBODY


def test_make_dirs_gives_the_dirs_it_makes_only(tmp_path):
    made = tmp_path / "a" / "b" / "c"
    make_dirs(made, NOBODY)
    assert [_owner(p) for p in (tmp_path / "a", tmp_path / "a" / "b", made)] == [NOBODY] * 3
    assert _owner(tmp_path) == (0, 0)
    make_dirs(made, (0, 0))  # there already: left as it is
    assert _owner(made) == NOBODY


def test_as_another_user_nothing_is_given_away(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    (tmp_path / "f").write_text("x")
    chown_tree(tmp_path, NOBODY)
    make_dirs(tmp_path / "d", NOBODY)
    assert _owner(tmp_path / "f") == (0, 0) and _owner(tmp_path / "d") == (0, 0)
