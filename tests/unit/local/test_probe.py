"""The state dir's doctor check: whether the files statectl makes there are the dir owner's."""

from __future__ import annotations

import grp
import os
import pwd

from statectl.local.probe import probe


def test_a_user_whose_files_would_not_be_the_state_dir_owners_is_told(tmp_path, monkeypatch):
    """Run as root the probe's file is root's; taken as another user (geteuid), nothing gives it to the dir's
    owner ``nobody``: the check says so, and stays ok."""
    state = tmp_path / "state"
    state.mkdir()
    nobody = pwd.getpwnam("nobody")
    os.chown(state, nobody.pw_uid, nobody.pw_gid)
    [check] = probe(state)
    assert check.status == "ok" and check.hint is None and "but the files" not in check.detail

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    [check] = probe(state)
    assert check.status == "ok"
    group = grp.getgrgid(nobody.pw_gid).gr_name
    assert check.detail.endswith("; but the files statectl makes there are root:root's, not the dir owner's "
                                 f"(nobody:{group}): the job may not be able to write or restore them")
    assert check.hint == "run statectl as nobody (the dir's owner), or as root, which gives what it makes to nobody"
    assert list(state.iterdir()) == []
