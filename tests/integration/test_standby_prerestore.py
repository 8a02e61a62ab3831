"""standby follow --pre-restore and promote of a blob-store job: on a real Kafka-protocol broker (Tansu), a real
file:// blob store, real RocksDB stores, followers as real processes.

The job's config (on its coordinator stream) restores the store with BlobStoreStateBackendFactory; its
snapshots are made by ``backup`` of a store on "the active host" (a dir of its own), which commits v2
checkpoints with the blob-store marker. What must hold: the follower keeps the latest snapshot in the standby
root beside the state dir, ``<root>/prerestore/<store>/<task dir>-<checkpointId>``, where a container start that
clears the state dir (ContainerStorageManager.clearLoggedStores) does not reach it; a new snapshot makes a new
dir with only the new files downloaded (the others hard links of the previous dir's), and the previous dir goes;
promote fences the follower and renames the dir to ``<state>/<store>/<task dir>-<checkpointId>``, the dir
Samza's BlobStoreRestoreManager renames into the store dir when tests/tools/samza_dirdiff.py (a port of
DirDiffUtil.areSameDir) says it is identical; a promote killed after that rename is finished by the next one;
without a pre-restore it is refused (14); a host running the task's active is refused (2, nothing written); a
follower killed mid-restore leaves no partial dir under the checkpoint dir's name and a restarted one finishes; a
BATCH job's checkpoint topic carries its run id; a pre-restore an older statectl kept in the state dir is listed,
moved by follow and promoted where it is."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.formats.checkpoint import BLOB_STORE_FACTORY
from statectl.kafka.coordinator import CoordinatorStream
from tests.integration.test_standby import (  # noqa: F401 - world and procs are fixtures
    STORE,
    TASK,
    World,
    error_lines,
    procs,
    world,
)
from tests.tools.genstore import fingerprint, make_store
from tests.tools.samza_dirdiff import are_same_dir, should_restore
from tests.tools.samza_scan import clear_logged_stores
from tests.tools.standby_helpers import Follower, clean_env, cli, cli_here, wait_until

BLOB_CONFIG = {f"stores.{STORE}.restore.factories": BLOB_STORE_FACTORY,
               f"stores.{STORE}.backup.factories": BLOB_STORE_FACTORY,
               "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
               # a job restoring from the blob store reads the v2 checkpoints that name its snapshots
               "task.checkpoint.read.versions": "2,1"}


def blobs(w: World) -> str:
    return f"file://{w.tmp / 'blobs'}"


def job_config(w: World, extra: dict[str, str] | None = None, *, host: str = "the-old-host.example.com") -> None:
    """A job restoring the store from the blob store; the task's container on ``host``."""
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.create()
        cs.write_config({**BLOB_CONFIG, **(extra or {})})
        cs.write_changelog_partition(TASK, 0)
        cs.write_task_container(TASK, "0")
        cs.write_container_host("0", host)


def active_host_store(w: World) -> Path:
    return w.tmp / "active-host" / STORE / "Partition_0"


def snapshot(w: World, keys: int, *, start: int, seed: int) -> tuple[str, str]:
    """Add ``keys`` keys to the store on the active host (a new SST file; the old ones stay) and back it up
    as the job's snapshot, committed to its checkpoint topic; return (index blob id, checkpoint id)."""
    from statectl.engine.backup import BackupOptions, backup
    from statectl.session import Session

    store = active_host_store(w)
    store.parent.mkdir(parents=True, exist_ok=True)
    make_store(store, keys, 256, seed=seed, start=start)
    with Session.from_env(kafka=w.bootstrap, blobstore=blobs(w), env=clean_env(w.tmp),
                          create_blobstore=True) as session:
        r = backup(BackupOptions(w.ref, store, keep_local_checkpoint=False), session.blobstore, session.catalog)
    return r.snapshot_id, r.checkpoint_id


def index_json(w: World, blob_id: str) -> dict:
    store = open_blobstore(blobs(w))
    try:
        buf = io.BytesIO()
        store.get(blob_id, buf)
    finally:
        store.close()
    return json.loads(buf.getvalue())


def files_of(index: dict) -> dict[str, tuple]:
    """rel path -> (size, checksum) of every present file of an index JSON."""
    out = {}

    def walk(d: dict, prefix: str) -> None:
        for f in d.get("files-present", []):
            out[prefix + f["file-name"]] = (f["file-metadata"]["size"], f["checksum"])
        for s in d.get("sub-dirs-present", []):
            walk(s, prefix + s["dir-name"] + "/")

    walk(index["dir-index"], "")
    return out


def inodes(d: Path) -> dict[str, int]:
    return {str(p.relative_to(d)): p.stat().st_ino for p in d.rglob("*") if p.is_file()}


def root(w: World) -> Path:
    """The standby root: beside the state dir."""
    return w.tmp / "state.statectl-standby"


def pre_dir(w: World, checkpoint_id: str) -> Path:
    """Where the follower keeps a pre-restored snapshot: in the standby root."""
    return files_dir(w) / f"Partition_0-{checkpoint_id}"


def promoted(w: World, checkpoint_id: str) -> Path:
    """Where promote puts it: the checkpoint dir Samza's start renames into the store dir."""
    return w.state / STORE / f"Partition_0-{checkpoint_id}"


def store_entries(w: World) -> list[str]:
    """The store's dir in the state dir."""
    d = w.state / STORE
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def pre_entries(w: World) -> list[str]:
    """The follower's dirs in the standby root (its lock and status files left out)."""
    d = files_dir(w)
    return sorted(p.name for p in d.iterdir() if ".standby." not in p.name) if d.exists() else []


def files_dir(w: World) -> Path:
    return root(w) / "prerestore" / STORE


def status_file(w: World) -> Path:
    return files_dir(w) / "Partition_0.standby.json"


def start_pre(w: World, procs, *extra: str, env: dict[str, str] | None = None) -> Follower:
    f = Follower(w.tmp, [*w.where(changelog=False), "--blobstore", blobs(w), "--pre-restore", *extra], env=env)
    procs[0].append(f)
    return f


def pre_restored(w: World, f: Follower | None, checkpoint_id: str, timeout: float = 90) -> dict:
    """Wait until the follower's status names ``checkpoint_id`` pre-restored and nothing pending."""
    def done():
        if f is not None:
            f.assert_running()
        try:
            st = json.loads(status_file(w).read_text())
        except (OSError, ValueError):
            return None
        return st if st["checkpoint_id"] == checkpoint_id and st["pending_dir"] is None else None

    return wait_until(done, timeout, f"checkpoint {checkpoint_id} pre-restored" + (f"\n{f.describe()}" if f else ""))


def promote(w: World, *extra: str, code: int = 0):
    return cli(w.tmp, "standby", "promote", *w.where(changelog=False), "--blobstore", blobs(w), *extra, "-o", "json",
               code=code)


@pytest.mark.timeout(300)
def test_pre_restores_the_latest_snapshot_incrementally_and_promote_uses_it(world: World, procs):
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 3000, start=0, seed=1)
    f = start_pre(w, procs)
    st = pre_restored(w, f, cp1)
    dir1 = pre_dir(w, cp1)
    assert st["replica_dir"] == str(dir1) and st["seeded_from"] == blob1 and st["layout"] == "pre-restored"
    assert dir1.is_dir() and pre_entries(w) == [dir1.name] and store_entries(w) == []  # the state dir untouched
    why: list[str] = []
    assert are_same_dir(dir1, index_json(w, blob1)["dir-index"], why=why), why
    assert not should_restore(dir1, index_json(w, blob1))  # Samza's start would rename it, download nothing
    assert fingerprint(dir1) == fingerprint(active_host_store(w))
    before = inodes(dir1)

    # standby status lists it, with its own layout and the checkpoint id.
    rows = json.loads(cli(w.tmp, "standby", "status", "--state-dir", str(w.state), "-o", "json").stdout)
    assert len(rows) == 1, rows
    assert rows[0]["layout"] == "pre-restored" and rows[0]["checkpoint_id"] == cp1
    assert rows[0]["replica_dir"] == str(dir1) and rows[0]["following"] is True and rows[0]["promotable"] is True
    assert rows[0]["follower_pid"] == f.pid

    # A new snapshot lands: a new dir, only the new files downloaded, the unchanged ones hard links.
    blob2, cp2 = snapshot(w, 1000, start=3000, seed=2)
    st = pre_restored(w, f, cp2)
    dir2 = pre_dir(w, cp2)
    assert st["replica_dir"] == str(dir2)
    assert not dir1.exists() and pre_entries(w) == [dir2.name]  # the previous dir is gone
    idx1, idx2 = files_of(index_json(w, blob1)), files_of(index_json(w, blob2))
    unchanged = {rel for rel, v in idx2.items() if idx1.get(rel) == v}
    new = set(idx2) - unchanged
    assert any(rel.endswith(".sst") for rel in unchanged) and any(rel.endswith(".sst") for rel in new), (idx1, idx2)
    after = inodes(dir2)
    ssts_linked = {rel for rel in unchanged if rel.endswith(".sst")}
    assert all(after[rel] == before[rel] for rel in ssts_linked), (before, after)
    assert all(after[rel] not in before.values() for rel in new)
    notes = [line for line in f.stderr().splitlines() if f"checkpoint {cp2}) into" in line]
    assert len(notes) == 1 and f": {len(new)} files downloaded" in notes[0], f.describe()
    why = []
    assert are_same_dir(dir2, index_json(w, blob2)["dir-index"], why=why), why
    assert fingerprint(dir2) == fingerprint(active_host_store(w))

    # promote: the follower fenced (a clean exit), the dir renamed into the state dir (the same files: no copy)
    # for the next start to rename into the store dir.
    p = promote(w)
    assert f.wait(60) == 0, f.describe()
    r = json.loads(p.stdout)
    target = promoted(w, cp2)
    assert r["restore_mode"] == "blob-store" and r["checkpoint_id"] == cp2 and r["promoted_dir"] == str(target)
    assert r["records_applied"] == 0 and r["locality_updated"] is True
    assert "renames it into the store dir" in p.stderr
    assert store_entries(w) == [target.name] and not (w.state / STORE / "Partition_0").exists()
    assert pre_entries(w) == [] and inodes(target) == after
    assert not should_restore(target, index_json(w, blob2))
    assert not status_file(w).exists() and not (files_dir(w) / "Partition_0.standby.lock").exists()
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        assert cs.refresh() and cs.locality().container_hosts["0"] == socket.gethostname()


@pytest.mark.timeout(300)
def test_promote_brings_a_pre_restored_dir_that_is_behind_to_the_latest_snapshot(world: World, procs):
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 2000, start=0, seed=3)
    f = start_pre(w, procs)
    pre_restored(w, f, cp1)
    assert f.terminate() == 0, f.describe()  # the follower stopped: the next snapshot is not pre-restored
    before = inodes(pre_dir(w, cp1))
    blob2, cp2 = snapshot(w, 800, start=2000, seed=4)

    p = promote(w)
    r = json.loads(p.stdout)
    dir2 = promoted(w, cp2)
    assert r["restore_mode"] == "blob-store" and r["checkpoint_id"] == cp2 and r["promoted_dir"] == str(dir2)
    idx1, idx2 = files_of(index_json(w, blob1)), files_of(index_json(w, blob2))
    new = {rel for rel, v in idx2.items() if idx1.get(rel) != v}
    assert r["records_applied"] == len(new)  # files downloaded: only the new ones
    after = inodes(dir2)
    assert all(after[rel] == before[rel] for rel, v in idx2.items() if idx1.get(rel) == v and rel.endswith(".sst"))
    assert store_entries(w) == [dir2.name] and pre_entries(w) == []  # the older dir is gone
    assert not should_restore(dir2, index_json(w, blob2))
    assert fingerprint(dir2) == fingerprint(active_host_store(w))


@pytest.mark.timeout(300)
def test_without_a_pre_restore_promote_is_refused_with_14(world: World, procs):
    w = world
    job_config(w)
    snapshot(w, 500, start=0, seed=5)
    p = promote(w, code=14)
    err = error_lines(p.stderr)
    assert len(err) == 1 and "blob store" in err[0] and "Traceback" not in p.stderr, p.stderr
    # The hint's command follows this store of this job, pre-restoring it.
    hint = next(line for line in p.stderr.splitlines() if line.startswith("Hint: "))
    assert "statectl standby follow " in hint and f" --kafka {w.bootstrap} " in hint and f" --job {w.job} " in hint \
        and " --pre-restore" in hint, hint
    assert json.loads(p.stdout)["exit_code"] == 14
    assert not (w.state / STORE).exists() and not root(w).exists()


@pytest.mark.timeout(300)
def test_refused_where_this_host_runs_the_active(world: World, procs):
    w = world
    job_config(w, host=socket.gethostname())  # the job's locality places the task's container here
    snapshot(w, 500, start=0, seed=6)
    p = cli(w.tmp, "standby", "follow", *w.where(changelog=False), "--blobstore", blobs(w), "--pre-restore", code=2)
    assert "locality places the container 0" in p.stderr and "--pre-restore" in p.stderr, p.stderr
    assert not (w.state / STORE).exists() and not root(w).exists()

    job_config(w)  # placed elsewhere again, but the active store here is open (its RocksDB LOCK held)
    import rocksdict

    w.active.parent.mkdir(parents=True)
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(str(w.active), opts)
    try:
        p = cli(w.tmp, "standby", "follow", *w.where(changelog=False), "--blobstore", blobs(w), "--pre-restore",
                code=2)
        assert "is held by" in p.stderr and "runs the active" in p.stderr, p.stderr
    finally:
        db.close()
    assert store_entries(w) == ["Partition_0"] and not root(w).exists()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flags", [["--to-checkpoint"], ["--layout", "active-path"], ["--replica-dir", "x"]])
def test_pre_restore_excludes_other_modes(world: World, flags: list[str]):
    w = world
    p = cli(w.tmp, "standby", "follow", *w.where(changelog=False), "--pre-restore", *flags, code=2)
    assert "exclude each other" in p.stderr
    assert not root(w).exists()


@pytest.mark.timeout(300)
def test_a_follower_killed_mid_restore_leaves_no_partial_dir_and_a_rerun_finishes(world: World, procs):
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 2000, start=0, seed=7)
    f = start_pre(w, procs)
    pre_restored(w, f, cp1)
    assert f.terminate() == 0, f.describe()
    blob2, cp2 = snapshot(w, 1500, start=2000, seed=8)
    idx1, idx2 = files_of(index_json(w, blob1)), files_of(index_json(w, blob2))
    new = [rel for rel, v in idx2.items() if idx1.get(rel) != v and v[0] > 0]
    assert len(new) >= 2, new

    # Killed (SIGKILL, no cleanup) at the second blob it downloads for the new snapshot.
    f = start_pre(w, procs, env={"STATECTL_FAILPOINTS": "during-download=1*off->kill"})
    assert f.wait(90) == -signal.SIGKILL, f.describe()
    dir1, dir2 = pre_dir(w, cp1), pre_dir(w, cp2)
    assert not dir2.exists()  # no partial dir under the checkpoint dir's name
    staged = [n for n in pre_entries(w) if ".statectl-restore-" in n]
    assert len(staged) == 1 and staged[0].startswith(f".{dir2.name}"), pre_entries(w)
    st = json.loads(status_file(w).read_text())
    assert st["checkpoint_id"] == cp1 and st["replica_dir"] == str(dir1) and st["pending_dir"] == str(dir2)
    assert not should_restore(dir1, index_json(w, blob1))  # the previous dir whole

    f = start_pre(w, procs)
    st = pre_restored(w, f, cp2)
    assert st["replica_dir"] == str(dir2)
    assert pre_entries(w) == [dir2.name], pre_entries(w)  # the staged dir and the previous dir gone
    why: list[str] = []
    assert are_same_dir(dir2, index_json(w, blob2)["dir-index"], why=why), why
    assert fingerprint(dir2) == fingerprint(active_host_store(w))
    assert f.terminate() == 0, f.describe()


@pytest.mark.timeout(300)
def test_a_dir_statectl_did_not_make_is_never_deleted(world: World, procs):
    """The job's own checkpoint dir of the latest checkpoint (or any dir there) is left as it is; only the
    follower's own dirs go."""
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 500, start=0, seed=9)
    other = w.state / STORE / "Partition_0-1700000000000-0"
    other.mkdir(parents=True)
    (other / "MANIFEST-000001").write_bytes(b"the job's")
    f = start_pre(w, procs)
    pre_restored(w, f, cp1)
    blob2, cp2 = snapshot(w, 500, start=500, seed=10)
    pre_restored(w, f, cp2)
    assert other.is_dir() and (other / "MANIFEST-000001").read_bytes() == b"the job's"
    assert store_entries(w) == [other.name] and pre_entries(w) == [pre_dir(w, cp2).name]
    assert f.terminate() == 0, f.describe()
    assert os.path.isdir(pre_dir(w, cp2))


@pytest.mark.timeout(300)
def test_a_promote_that_times_out_restarts_the_follower_and_leaves_the_dirs_as_they_were(world: World, procs):
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 2000, start=0, seed=11)
    nonempty1 = sum(1 for v in files_of(index_json(w, blob1)).values() if v[0] > 0)
    # The follower stalls (5 s) at the first blob of the next snapshot: it is behind when promote fences it.
    f = start_pre(w, procs, env={"STATECTL_FAILPOINTS": f"during-download={nonempty1}*off->sleep:5"})
    pre_restored(w, f, cp1)
    blob2, cp2 = snapshot(w, 1500, start=2000, seed=12)
    wait_until(lambda: json.loads(status_file(w).read_text())["pending_dir"] == str(pre_dir(w, cp2)), 60,
               f.describe())
    dir1 = pre_dir(w, cp1)

    # The promote's own download is slow too (2 s a blob): it cannot finish within --timeout 1s.
    import subprocess

    from tests.tools.standby_helpers import STATECTL

    promote = subprocess.Popen([STATECTL, "standby", "promote", *w.where(changelog=False), "--blobstore", blobs(w),
                                "--timeout", "1", "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=w.tmp, stdin=subprocess.DEVNULL,
                               env={**clean_env(w.tmp), "STATECTL_FAILPOINTS": "during-download=sleep:2"})
    try:
        assert f.wait(60) == 0, f.describe()  # fenced, and its half-built dir removed on the way out...
        # ...seen while the promote still downloads, before it starts the follower again (which builds it anew)
        assert not pre_dir(w, cp2).exists()
        stdout, stderr = promote.communicate(timeout=180)
    finally:
        promote.kill()
    assert promote.returncode == 1, (stdout, stderr)
    assert "timed out" in error_lines(stderr)[0], stderr
    assert store_entries(w) == []  # nothing was moved into the state dir
    # The pre-restored dir as it was, unless the follower the promote started again has adopted the next
    # snapshot already (its status names that one first, then it deletes this one).
    as_it_was = not should_restore(dir1, index_json(w, blob1))
    assert as_it_was or json.loads(status_file(w).read_text())["replica_dir"] != str(dir1)

    # The fenced follower was started again (with its own command line): it takes the lock and goes on.
    def restarted() -> int | None:
        try:
            st = json.loads(status_file(w).read_text())
        except (OSError, ValueError):
            return None
        return st["pid"] if st["pid"] != f.pid else None

    pid = wait_until(restarted, 60, "the follower restarted")
    procs[1].append(pid)
    st = pre_restored(w, None, cp2, timeout=120)
    assert st["pid"] == pid and pre_entries(w) == [pre_dir(w, cp2).name]


@pytest.mark.timeout(300)
def test_a_container_start_that_clears_the_state_dir_leaves_the_pre_restore_which_then_promotes(world: World, procs):
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 1500, start=0, seed=13)
    f = start_pre(w, procs)
    pre_restored(w, f, cp1)
    assert w.state not in pre_dir(w, cp1).parents and w.state not in status_file(w).parents
    (w.state / STORE / "Partition_1").mkdir(parents=True)  # the job's own
    # A container of the job starting here without a checkpoint (a standby container) clears the state dir.
    assert clear_logged_stores(w.state) == [w.state / STORE] and not any(w.state.iterdir())
    f.assert_running()
    blob2, cp2 = snapshot(w, 500, start=1500, seed=14)
    pre_restored(w, f, cp2)  # it goes on
    p = promote(w)
    assert f.wait(60) == 0, f.describe()
    assert json.loads(p.stdout)["promoted_dir"] == str(promoted(w, cp2))
    assert not should_restore(promoted(w, cp2), index_json(w, blob2))


@pytest.mark.timeout(300)
def test_a_promote_killed_after_its_rename_is_finished_by_the_next(world: World, procs):
    w = world
    job_config(w)
    blob1, cp1 = snapshot(w, 800, start=0, seed=15)
    f = start_pre(w, procs)
    pre_restored(w, f, cp1)
    import subprocess

    from tests.tools.standby_helpers import STATECTL

    p = subprocess.run([STATECTL, "standby", "promote", *w.where(changelog=False), "--blobstore", blobs(w)],
                       capture_output=True, text=True, timeout=180, cwd=w.tmp, stdin=subprocess.DEVNULL,
                       env={**clean_env(w.tmp), "STATECTL_FAILPOINTS": "pre-restore-moved=kill"})
    assert p.returncode == -signal.SIGKILL, (p.stdout, p.stderr)
    assert f.wait(60) == 0, f.describe()  # fenced before the kill
    target = promoted(w, cp1)
    assert store_entries(w) == [target.name] and pre_entries(w) == []  # renamed, the promote not ended
    assert json.loads(status_file(w).read_text())["pending_dir"] == str(target)
    # A follower must not take it back: exit 2, the dir where it is.
    q = cli(w.tmp, "standby", "follow", *w.where(changelog=False), "--blobstore", blobs(w), "--pre-restore", code=2)
    assert "was interrupted" in error_lines(q.stderr)[0] and "promote" in q.stderr, q.stderr
    assert store_entries(w) == [target.name]
    r = json.loads(promote(w).stdout)
    assert r["promoted_dir"] == str(target) and r["records_applied"] == 0, r
    assert not status_file(w).exists() and store_entries(w) == [target.name]
    assert not should_restore(target, index_json(w, blob1))


@pytest.mark.timeout(300)
def test_a_batch_jobs_pre_restore_follows_its_run_ids_checkpoint_topic(world: World, procs):
    w = world
    job_config(w, {"app.mode": "BATCH", "app.run.id": "run-7"})
    blob1, cp1 = snapshot(w, 500, start=0, seed=16)
    topic = f"__samza_checkpoint_ver_1_for_{w.job}_1-run-7"
    f = start_pre(w, procs, "--metrics-port", "0", "--metrics-addr", "127.0.0.1")
    st = pre_restored(w, f, cp1)
    assert st["changelog"] == topic and st["seeded_from"] == blob1
    rows = json.loads(cli_here(w.tmp, "standby", "status", "--state-dir", str(w.state), "-o", "json").stdout)
    assert [(r["changelog"], r["checkpoint_id"]) for r in rows] == [(topic, cp1)]
    url = wait_until(lambda: next((line.split("serving metrics on ")[1].strip() for line in f.stderr().splitlines()
                                   if "serving metrics on " in line), None), 60, f.describe())
    import urllib.request

    text = urllib.request.urlopen(url, timeout=30).read().decode()
    assert f'changelog="{topic}"' in text, text
    p = promote(w)
    assert f.wait(60) == 0, f.describe()
    assert json.loads(p.stdout)["promoted_dir"] == str(promoted(w, cp1))


def make_old_pre_restore(w: World, procs) -> tuple[Path, str, str]:
    """A pre-restore as an older statectl kept it: its dir ``<state>/<store>/<task dir>-<cp>``, its status and lock
    files in ``<state>/.statectl-standby/prerestore/<store>/`` (made by this follower, then moved there)."""
    blob, cp = snapshot(w, 600, start=0, seed=17)
    f = start_pre(w, procs)
    pre_restored(w, f, cp)
    assert f.terminate() == 0, f.describe()
    old_files = w.state / ".statectl-standby" / "prerestore" / STORE
    old_files.mkdir(parents=True)
    old_dir = promoted(w, cp)
    old_dir.parent.mkdir(parents=True)
    pre_dir(w, cp).rename(old_dir)
    st = json.loads(status_file(w).read_text())
    (old_files / status_file(w).name).write_text(json.dumps(dict(st, replica_dir=str(old_dir))))
    status_file(w).unlink()
    (files_dir(w) / "Partition_0.standby.lock").unlink()
    return old_dir, cp, blob


@pytest.mark.timeout(300)
def test_an_old_pre_restore_in_the_state_dir_is_listed_and_moved_by_follow(world: World, procs):
    w = world
    job_config(w)
    old_dir, cp, blob = make_old_pre_restore(w, procs)
    rows = json.loads(cli_here(w.tmp, "standby", "status", "--state-dir", str(w.state), "-o", "json").stdout)
    assert [(r["replica_dir"], r["layout"], r["checkpoint_id"]) for r in rows] == [(str(old_dir), "old", cp)], rows
    assert "--pre-restore" in rows[0]["move_command"], rows
    f = start_pre(w, procs)
    wait_until(lambda: "moved the pre-restore" in f.stderr(), 60, f.describe())
    st = pre_restored(w, f, cp)
    assert st["replica_dir"] == str(pre_dir(w, cp)) and not old_dir.exists()
    assert not (w.state / ".statectl-standby" / "prerestore" / STORE / status_file(w).name).exists()
    assert store_entries(w) == [] and pre_entries(w) == [pre_dir(w, cp).name]
    assert f.terminate() == 0, f.describe()
    assert not should_restore(pre_dir(w, cp), index_json(w, blob))


@pytest.mark.timeout(300)
def test_promote_takes_an_old_pre_restore_where_it_is(world: World, procs):
    w = world
    job_config(w)
    old_dir, cp, blob = make_old_pre_restore(w, procs)
    r = json.loads(promote(w).stdout)
    assert r["promoted_dir"] == str(old_dir) and r["records_applied"] == 0, r
    assert store_entries(w) == [old_dir.name] and not should_restore(old_dir, index_json(w, blob))
    assert not (w.state / ".statectl-standby" / "prerestore" / STORE / status_file(w).name).exists()
