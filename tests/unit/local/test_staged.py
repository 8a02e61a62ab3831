import errno

import pytest

from statectl.errors import DiskFullError, StatectlError
from statectl.local.staged import StagedStore


def _staged(target):
    return StagedStore(target, what="test", disk_full=lambda: DiskFullError(f"full at {target}"), sync="dirs")


def test_open_commit_swaps_the_built_dir_in(tmp_path):
    target = tmp_path / "store"
    target.mkdir()
    (target / "old").write_text("old")
    staged = _staged(target).open()
    assert staged.path.is_dir() and not any(staged.path.iterdir())
    (staged.path / "new").write_text("new")
    staged.commit()
    staged.abort()  # a no-op once committed
    assert sorted(p.name for p in target.iterdir()) == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_abort_removes_the_temp_dir_and_leaves_the_target(tmp_path):
    target = tmp_path / "store"
    target.mkdir()
    (target / "old").write_text("old")
    staged = _staged(target).open()
    (staged.path / "new").write_text("new")
    staged.abort()
    staged.abort()  # idempotent
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert (target / "old").read_text() == "old"


def test_the_block_aborts_and_names_the_target_on_an_os_error(tmp_path):
    target = tmp_path / "store"
    with pytest.raises(StatectlError, match="test into .*store failed"):
        with _staged(target) as staged:
            raise OSError(errno.EIO, "I/O error")
    assert not staged.path.exists() and not target.exists()
    with pytest.raises(DiskFullError, match="full at"):
        with _staged(target):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_right_after_the_temp_dir_is_made_leaves_nothing(tmp_path, monkeypatch):
    """SIGTERM (statectl raises Terminated, a KeyboardInterrupt) can land between the mkdir and the with
    block: __exit__ then never runs, so open() itself removes what it made."""
    from pathlib import Path

    mkdir = Path.mkdir

    def mkdir_then_interrupted(self, *args, **kwargs):
        mkdir(self, *args, **kwargs)
        if ".statectl-restore-" in self.name:
            raise KeyboardInterrupt

    monkeypatch.setattr(Path, "mkdir", mkdir_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        with _staged(tmp_path / "store"):
            pass
    assert list(tmp_path.iterdir()) == []


def test_what_is_swapped_in_and_the_parents_made_are_the_state_dirs_owners(tmp_path):
    """Run as root (as the tests are): a store built aside is given to the owner of the state dir, or of
    the store it replaces, before the swap; so are the parents of the target it makes."""
    import os
    import pwd

    nobody = (pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, *nobody)
    target = state / "store" / "Partition_0"
    with _staged(target) as staged:
        (staged.path / "sub").mkdir()
        (staged.path / "sub" / "CURRENT").write_text("x")
        staged.commit()
    owners = {p: (os.lstat(p).st_uid, os.lstat(p).st_gid)
              for p in (state / "store", target, target / "sub", target / "sub" / "CURRENT")}
    assert set(owners.values()) == {nobody}, owners

    os.chown(target, 0, 0)  # the store it replaces is root's: so is the new one
    with _staged(target) as staged:
        (staged.path / "CURRENT").write_text("y")
        staged.commit()
    assert (os.stat(target).st_uid, os.stat(target / "CURRENT").st_uid) == (0, 0)
