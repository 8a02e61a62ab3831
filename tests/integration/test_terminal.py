"""statectl in a real terminal (tmux): progress bars on a TTY, and Ctrl-C stops cleanly with exit 130
leaving nothing half-written."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.local.layout import local_checkpoint_dirs, store_dir
from tests.tools.genstore import fingerprint, make_store

REF = StoreRef("tty", "1", "Partition 0", "counts")
STATECTL = str(Path(sys.executable).parent / "statectl")


class Tmux:
    """One detached tmux session running a shell command in a 160x30 terminal."""

    def __init__(self, tmp: Path):
        if shutil.which("tmux") is None:
            pytest.fail("tmux is not installed (make test installs it)")
        self.name = f"statectl-{uuid.uuid4().hex[:8]}"
        self.socket = str(tmp / "tmux.sock")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def start(self, command: str, env: dict[str, str]) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self._tmux("new-session", "-d", "-s", self.name, "-x", "160", "-y", "30",
                   f"env -i {exports} bash --norc --noprofile -c {shlex.quote(command + '; echo EXIT=$?; sleep 60')}")

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; screen:\n{self.screen()}")

    def ctrl_c(self) -> None:
        self._tmux("send-keys", "-t", self.name, "C-c")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path: Path):
    t = Tmux(tmp_path)
    yield t
    t.close()


@pytest.fixture
def world(tmp_path: Path):
    sdir = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(sdir, 6000, 1024, seed=1, sst_mb=1)
    url = f"file://{tmp_path / 'blobs'}"
    (tmp_path / "blobs").mkdir()  # an existing blob store (a missing file:// dir is an error without --create)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TERM": "xterm-256color",
           "LANG": "C.UTF-8", "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    args = f"--blobstore {url} --job {REF.job} --store {REF.store} --store-dir {sdir} --chunk-size 1MiB -j 2"
    return sdir, url, env, args


def blob_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def test_backup_shows_progress_and_ctrl_c_leaves_nothing_half_written(tmux: Tmux, world, tmp_path: Path):
    sdir, url, env, args = world
    before = fingerprint(sdir)
    slow = dict(env, STATECTL_FAILPOINTS="during-upload=sleep:0.5")
    tmux.start(f"{STATECTL} backup {args}", slow)
    screen = tmux.wait_for("uploading")
    assert "MiB" in screen and "files" in screen  # bytes, rate/ETA columns and the file count
    tmux.ctrl_c()
    screen = tmux.wait_for("EXIT=")
    assert "EXIT=130" in screen, screen
    assert "Interrupted." in screen and "Traceback" not in screen
    assert local_checkpoint_dirs(sdir) == {}  # the checkpoint it made is gone
    bs = open_blobstore(url)
    assert BlobCheckpointStore(bs).latest(REF) is None  # nothing committed
    for info in bs.list("blobs/"):
        assert info.expires_at is not None  # what was uploaded carries its TTL: gc reclaims it
    assert fingerprint(sdir) == before


def test_restore_ctrl_c_leaves_the_old_store_as_it_was(tmux: Tmux, world, tmp_path: Path):
    sdir, url, env, args = world
    bs = open_blobstore(url)
    backup(BackupOptions(REF, sdir, chunk_size=1024 * 1024), bs, BlobCheckpointStore(bs))
    old = store_dir(tmp_path / "other", REF.store, REF.task)
    make_store(old, 500, 100, seed=9, sst_mb=1)
    old_fp = fingerprint(old)
    # Downloads are slowed down (one connection, a pause per range); the old store must survive Ctrl-C.
    tmux.start(f"{STATECTL} restore --blobstore {url} --job {REF.job} --store {REF.store} --store-dir {old} -j 1",
               dict(env, STATECTL_FAILPOINTS="during-download=sleep:0.5"))
    tmux.wait_for("downloading")
    tmux.ctrl_c()
    screen = tmux.wait_for("EXIT=")
    assert "EXIT=130" in screen, screen
    assert fingerprint(old) == old_fp
    assert not [p.name for p in old.parent.iterdir() if p.name.startswith(".")]  # no temp dir left


def test_no_progress_and_only_the_result_when_not_a_tty(world, tmp_path: Path):
    sdir, url, env, args = world
    proc = subprocess.run([STATECTL, "backup", *shlex.split(args)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("snapshot ") and proc.stdout.count("\n") == 1


@pytest.mark.timeout(240)
def test_standby_follow_shows_the_replicas_offset_and_lag_on_a_terminal(tmux: Tmux, tansu, tmp_path: Path):
    import random

    from tests.tools.standby_helpers import ChangelogWriter, random_records

    topic = tansu.create_topic(f"tty-changelog-{uuid.uuid4().hex[:8]}", partitions=1)
    writer = ChangelogWriter(tansu.bootstrap, topic)
    try:
        writer.send(random_records(random.Random(3), 300))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TERM": "xterm-256color",
               "LANG": "C.UTF-8", "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
        (tmp_path / "state").mkdir()
        tmux.start(f"{STATECTL} standby follow --kafka {tansu.bootstrap} --job tty --task 'Partition 0' --store counts "
                   f"--state-dir {tmp_path / 'state'} --changelog {topic} --partition 0", env)
        tmux.wait_for("offset 299  lag 0")
        writer.send(random_records(random.Random(4), 200))
        tmux.wait_for("offset 499  lag 0")  # the line moves on as the replica does
        tmux.ctrl_c()
        screen = tmux.wait_for("EXIT=")
        assert "EXIT=130" in screen and "stopped following" in screen, screen
    finally:
        writer.close()
