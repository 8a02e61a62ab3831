"""File owners when statectl runs as root on a job's state that another user owns: here the real user
``nobody`` and its group. Samza's blob-store restore compares every restored file's owner and group names
with the snapshot's FileMetadata and fails the container's start on a difference (DirDiffUtil.areSameFile;
BlobStoreRestoreManager, blob.store.compare.file.owners.on.restore, default true), and the job's user must
write and delete everything in its state dir. So a backup records the store's owner for every file, the
files of statectl's own checkpoint included; restore, restore --from-changelog, standby promote and adstore
load leave what they make the state dir's owner's; rescale and snapshots copy record the target job's user;
doctor, run as another user, says when its files would not be the state dir owner's.

The tests run statectl as root (as CI does), and as ``nobody`` through setpriv where a normal user is meant.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.catalog.index import read_index
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.backup import BackupOptions, backup
from statectl.engine.restore import RestoreOptions, restore
from statectl.local.layout import checkpoint_dir, store_dir
from statectl.snapshot.model import index_to_json
from tests.tools.genstore import fingerprint, make_store
from tests.tools.samza_dirdiff import are_same_dir
from tests.tools.standby_helpers import STATECTL, ChangelogWriter, cli, random_records, read_store

STORE, TASK = "counts", "Partition 0"
REF = StoreRef("page-views", "1", TASK, STORE)
NOBODY = pwd.getpwnam("nobody")
JOB_USER = (NOBODY.pw_uid, NOBODY.pw_gid)
JOB_NAMES = (NOBODY.pw_name, grp.getgrgid(NOBODY.pw_gid).gr_name)  # nobody, nogroup (Debian)


@pytest.fixture(autouse=True)
def _as_root() -> None:
    assert os.geteuid() == 0, "these tests run statectl as root on state owned by nobody: run them as root, as CI does"


def give_to_job_user(*paths: Path) -> None:
    for p in paths:
        subprocess.run(["chown", "-R", f"{JOB_USER[0]}:{JOB_USER[1]}", str(p)], check=True)


def not_owned_by(owner: tuple[int, int], *roots: Path) -> list[str]:
    """Every entry under ``roots`` (the roots too; links themselves) that ``owner`` does not own."""
    out = []
    for root in roots:
        paths = [root]
        for dirpath, dirnames, filenames in os.walk(root):
            paths += [Path(dirpath, n) for n in dirnames + filenames]
        for p in paths:
            st = os.lstat(p)
            if (st.st_uid, st.st_gid) != owner:
                out.append(f"{p} ({st.st_uid}:{st.st_gid})")
    return out


def index_owners(blobstore, snapshot_id: str) -> dict[str, tuple[str, str]]:
    index = read_index(blobstore, snapshot_id)
    return {rel: (f.file_metadata.owner, f.file_metadata.group) for rel, f in index.dir_index.walk_present()}


def job_store(state: Path, *, unflushed: int = 50) -> Path:
    """A store of the job's user in ``state``, with writes only in its WAL (the backup's open flushes them
    into an SST file statectl's process makes)."""
    import rocksdict

    sdir = store_dir(state, STORE, TASK)
    make_store(sdir, 3000, 512, seed=1, sst_mb=1)
    db = rocksdict.Rdict(str(sdir), rocksdict.Options(raw_mode=True))
    for i in range(unflushed):
        db[b"wal-%03d" % i] = b"only in the WAL"
    db.close()
    (sdir / "rocksdict-config.json").unlink(missing_ok=True)
    give_to_job_user(state)
    return sdir


@pytest.fixture
def files(tmp_path: Path):
    store = open_blobstore(f"file://{tmp_path / 'blobs'}", create=True)
    yield store
    store.close()


# -- backup ------------------------------------------------------------------------------------------


def test_backup_as_root_records_the_stores_owner_for_every_file(files, tmp_path: Path):
    state = tmp_path / "state"
    sdir = job_store(state)
    cps = BlobCheckpointStore(files)
    r = backup(BackupOptions(REF, sdir), files, cps)

    owners = index_owners(files, r.snapshot_id)
    made_by_checkpoint = {rel for rel in owners if rel.startswith(("CURRENT", "MANIFEST-", "OPTIONS-"))}
    assert {"CURRENT"} <= made_by_checkpoint and len(made_by_checkpoint) == 3, owners
    assert any(rel.endswith(".log") for rel in owners), owners
    assert set(owners.values()) == {JOB_NAMES}, owners  # every file, CURRENT, MANIFEST and OPTIONS included
    # The store's read-write open (a new MANIFEST, OPTIONS, CURRENT, LOG, the WAL flushed into an SST) and
    # the checkpoint dir left for the job's next start are the job's user's too.
    kept = checkpoint_dir(sdir, r.checkpoint_id)
    assert kept.is_dir()
    assert not_owned_by(JOB_USER, state) == []

    # The next backup retains every SST file: none is uploaded again for its owner.
    again = backup(BackupOptions(REF, sdir), files, cps)
    assert set(index_owners(files, again.snapshot_id).values()) == {JOB_NAMES}
    first, second = (read_index(files, s).dir_index.walk_present() for s in (r.snapshot_id, again.snapshot_id))
    ssts = {rel: f.blobs for rel, f in first if rel.endswith(".sst")}
    assert ssts and {rel: f.blobs for rel, f in second if rel in ssts} == ssts


@pytest.fixture
def shared_tmp():
    """A dir ``nobody`` can reach (pytest's tmp_path is under a root-only dir)."""
    path = Path(tempfile.mkdtemp(prefix="statectl-owners-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_job_user(tmp: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    """``statectl ARGS`` as the job's user (setpriv, no supplementary groups), with HOME and XDG dirs in
    ``tmp``."""
    home = tmp / "home"
    home.mkdir(mode=0o777, exist_ok=True)
    home.chmod(0o777)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_DATA_HOME": str(home / "xdg-data"), "XDG_CONFIG_HOME": str(home / "xdg-config")}
    p = subprocess.run(["setpriv", f"--reuid={JOB_USER[0]}", f"--regid={JOB_USER[1]}", "--clear-groups", STATECTL,
                        *args], env=env, cwd=home, capture_output=True, text=True, timeout=180)
    assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
    return p


def test_backup_as_another_user_records_the_stores_owner_for_the_files_its_checkpoint_made(shared_tmp: Path):
    """Run as a user who may write the store but does not own it, statectl's checkpoint files are its own:
    it cannot give them away, so the index records the store dir's owner for them."""
    state = shared_tmp / "state"
    sdir = store_dir(state, STORE, TASK)
    make_store(sdir, 2000, 256, seed=2, sst_mb=1)
    (sdir / "rocksdict-config.json").unlink(missing_ok=True)
    subprocess.run(["chmod", "-R", "a+rwX", str(state)], check=True)  # root's store, writable by anyone
    blobs = shared_tmp / "blobs"
    blobs.mkdir(mode=0o777)
    blobs.chmod(0o777)
    as_job_user(shared_tmp, "backup", "--blobstore", f"file://{blobs}", "--job", REF.job, "--store", STORE,
                "--task", TASK, "--state-dir", str(state))
    made = [p for p in sdir.parent.iterdir() if p.name.startswith(f"{sdir.name}-")]
    assert len(made) == 1 and os.stat(made[0] / "CURRENT").st_uid == JOB_USER[0]  # its own: it cannot chown
    store = open_blobstore(f"file://{blobs}")
    try:
        latest = BlobCheckpointStore(store).latest(REF)
        assert latest is not None
        assert set(index_owners(store, latest.index_blob_id).values()) == {("root", "root")}
    finally:
        store.close()


# -- restore -----------------------------------------------------------------------------------------


def test_restore_as_root_leaves_every_file_and_dir_the_state_dir_owners(files, tmp_path: Path):
    state = tmp_path / "state"
    sdir = job_store(state)
    cps = BlobCheckpointStore(files)
    snap = backup(BackupOptions(REF, sdir, keep_local_checkpoint=False), files, cps)
    want = fingerprint(sdir)
    index = index_to_json(read_index(files, snap.snapshot_id))

    # Into a state dir that lost the store's dir: the dirs restore makes are the job's user's too.
    shutil.rmtree(state / STORE)
    r = restore(RestoreOptions(REF, sdir, state_dir=state), files, cps)
    assert r.files_downloaded == r.files_total
    assert fingerprint(sdir) == want
    assert not_owned_by(JOB_USER, state) == []
    # What Samza's restore checks after it downloaded a store as the job's user, owners compared.
    why: list[str] = []
    assert are_same_dir(sdir, index["dir-index"], compare_large_file_checksums=True, why=why), why

    # Over the job's store, reusing its files.
    r = restore(RestoreOptions(REF, sdir, state_dir=state), files, cps)
    assert r.files_reused == r.files_total
    assert not_owned_by(JOB_USER, state) == []

    # Elsewhere, into root's dir: root's files, and the job's store it reused files of is still the job's.
    elsewhere = tmp_path / "elsewhere" / "copy"
    r = restore(RestoreOptions(REF, sdir, target_dir=elsewhere), files, cps)
    assert r.files_reused == r.files_total
    assert not_owned_by((0, 0), elsewhere) == []
    assert not_owned_by(JOB_USER, state) == []
    assert any("another owner than the restored files' (root:root)" in n for n in r.notes), r.notes


def test_restore_from_changelog_as_root_leaves_the_state_dir_owners(tansu, tmp_path: Path):
    topic = tansu.create_topic(f"owners-changelog-{uuid.uuid4().hex[:8]}", partitions=1)
    writer = ChangelogWriter(tansu.bootstrap, topic)
    try:
        writer.send(random_records(random.Random(3), 400))
    finally:
        writer.close()
    state = tmp_path / "state"
    state.mkdir()
    give_to_job_user(state)
    cli(tmp_path, "restore", "--from-changelog", topic, "--partition", "0", "--kafka", tansu.bootstrap,
        "--state-dir", str(state), "--store", STORE, "--task", TASK)
    assert not_owned_by(JOB_USER, state) == []  # (before read_store, whose rocksdict leaves a file of root's)
    assert read_store(store_dir(state, STORE, TASK)) == writer.state()


# -- standby promote ---------------------------------------------------------------------------------


def test_standby_promote_as_root_gives_the_store_to_the_state_dir_owner(tansu, tmp_path: Path):
    from statectl.engine.standby.follow import follow
    from statectl.engine.standby.replica import Replica, standby_dir

    topic = tansu.create_topic(f"owners-standby-{uuid.uuid4().hex[:8]}", partitions=1)
    writer = ChangelogWriter(tansu.bootstrap, topic)
    state = tmp_path / "state"
    state.mkdir()
    give_to_job_user(state)
    job = f"owners-{uuid.uuid4().hex[:8]}"
    try:
        writer.send(random_records(random.Random(4), 300))
        replica = Replica(StoreRef(job, "1", TASK, STORE), topic, 0, standby_dir(state, STORE, TASK))
        stop = threading.Event()

        def on_status(st) -> None:
            if st.applied_offset is not None and st.applied_offset >= writer.last_offset:
                stop.set()

        follow(replica, tansu.bootstrap, stop=stop, on_status=on_status, status_every_s=0.05, timeout_s=30)
        writer.send(random_records(random.Random(5), 100))  # the promote's catch-up writes these
        r = json.loads(cli(tmp_path, "standby", "promote", "--kafka", tansu.bootstrap, "--job", job, "--task", TASK,
                           "--store", STORE, "--state-dir", str(state), "--changelog", topic, "--partition", "0",
                           "--non-transactional-restore", "-o", "json").stdout)  # no coordinator stream
    finally:
        writer.close()
    active = store_dir(state, STORE, TASK)
    assert r["promoted_dir"] == str(active) and r["records_applied"] == 100
    assert not_owned_by(JOB_USER, state / STORE) == []  # the store's dir the promote made, and the store
    assert read_store(active) == writer.state()


# -- adstore load ------------------------------------------------------------------------------------


def test_adstore_load_from_a_topic_as_root_leaves_the_state_dir_owners(tansu, tmp_path: Path):
    topic = tansu.create_topic(f"owners-adstore-{uuid.uuid4().hex[:8]}", partitions=1)
    writer = ChangelogWriter(tansu.bootstrap, topic)
    state = tmp_path / "state"
    state.mkdir()
    give_to_job_user(state)
    load = ["adstore", "load", "--kafka", tansu.bootstrap, "--topic", topic, "--store", STORE, "--state-dir",
            str(state)]
    try:
        writer.send(random_records(random.Random(6), 300))
        cli(tmp_path, *load)  # creates the store
        assert not_owned_by(JOB_USER, state) == []
        writer.send(random_records(random.Random(7), 200))
        cli(tmp_path, *load)  # resumes it in place
        assert not_owned_by(JOB_USER, state) == []
        store = store_dir(state, STORE, TASK)
        old = os.stat(store).st_mtime - 3600
        for p in [*store.iterdir(), store]:
            os.utime(p, (old, old))
        r = json.loads(cli(tmp_path, *load, "--max-age", "1s", "-o", "json").stdout)
        assert r["stores"][0]["case"] == "rebuilt"  # built aside and swapped in
    finally:
        writer.close()
    assert not_owned_by(JOB_USER, state) == []
    assert read_store(store) == writer.state()


def test_adstore_load_from_a_file_as_root_leaves_the_state_dir_owners(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir()
    give_to_job_user(state)
    dataset = tmp_path / "rows.jsonl"
    for version in (1, 2):
        dataset.write_text("".join(json.dumps({"id": f"id-{i}", "v": version}) + "\n" for i in range(500)))
        cli(tmp_path, "adstore", "load", "--from-file", str(dataset), "--key-field", "id", "--store", STORE,
            "--state-dir", str(state))
    link = store_dir(state, STORE, TASK)
    assert os.readlink(link).endswith("/2")
    # The link, the versions dir and both versions, the store's lock file: all the job's user's.
    assert not_owned_by(JOB_USER, state) == []
    assert len(read_store(link)) == 500


# -- rescale, snapshots copy: the owners the target indexes record ------------------------------------


@pytest.mark.timeout(600)
def test_rescale_as_root_records_the_sources_owner_or_the_one_given(tmp_path: Path):
    blobs = f"file://{tmp_path / 'blobs'}"
    state = tmp_path / "state"
    from rocksdict import Options, Rdict

    from statectl.formats.adstore import partition_of

    keys = [b"k%012d" % i for i in range(3000)]
    for p in range(2):  # a 2-way murmur2 layout, as the job wrote it: rescale checks that
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        db = Rdict(str(store_dir(state, STORE, f"Partition {p}")), opts)
        for k in keys:
            if partition_of(k, 2) == p:
                db[k] = k * 10
        db.flush()
        db.close()
        (store_dir(state, STORE, f"Partition {p}") / "rocksdict-config.json").unlink(missing_ok=True)
    give_to_job_user(state)
    for p in range(2):
        cli(tmp_path, "backup", "--create", "--blobstore", blobs, "--job", REF.job, "--store", STORE, "--task",
            f"Partition {p}", "--state-dir", str(state))
    where = ["--blobstore", blobs, "--job", REF.job, "--store", STORE, "--from", "2", "--to", "3"]

    plan = json.loads(cli(tmp_path, "rescale", *where, "--file-owner", "app:staff", "--dry-run", "-o", "json").stdout)
    assert plan["file_owner"] == "app:staff"
    r = cli(tmp_path, "rescale", *where, "--file-owner", "app", "--dry-run", code=2)
    assert "--file-owner 'app': expected USER:GROUP" in r.stderr

    # The staged target stores are root's: the indexes record the sources' owner, the job's user.
    r = json.loads(cli(tmp_path, "rescale", *where, "--master", "local[2]", "-o", "json").stdout)
    assert r["committed"] and r["file_owner"] == ":".join(JOB_NAMES)
    store = open_blobstore(blobs)
    try:
        for t in r["targets"]:
            assert set(index_owners(store, t["snapshot_id"]).values()) == {JOB_NAMES}, t
    finally:
        store.close()


def test_snapshots_copy_records_the_owner_given_or_the_sources(files, tmp_path: Path):
    state = tmp_path / "state"
    sdir = job_store(state)
    snap = backup(BackupOptions(REF, sdir), files, BlobCheckpointStore(files))
    blobs = ["--blobstore", files.url, "--job", REF.job, "--store", STORE, "--task", TASK]

    r = json.loads(cli(tmp_path, "snapshots", "copy", *blobs, "--to-task", "Partition 1", "-o", "json").stdout)
    assert index_owners(files, r["snapshot_id"]) == index_owners(files, snap.snapshot_id)
    r = json.loads(cli(tmp_path, "snapshots", "copy", *blobs, "--to-job", "page-views-staging", "--file-owner",
                       "app:staff", "-o", "json").stdout)
    owners = index_owners(files, r["snapshot_id"])
    assert set(owners) == set(index_owners(files, snap.snapshot_id))
    assert set(owners.values()) == {("app", "staff")}
    for bad in ("app", "app:", ":staff", "app:staff:x"):
        p = cli(tmp_path, "snapshots", "copy", *blobs, "--to-task", "Partition 2", "--file-owner", bad, code=2)
        assert p.stderr.startswith(f"Error: --file-owner {bad!r}: expected USER:GROUP"), p.stderr
    assert BlobCheckpointStore(files).latest(StoreRef(REF.job, "1", "Partition 2", STORE)) is None


# -- doctor ------------------------------------------------------------------------------------------


def test_doctor_as_another_user_than_the_state_dirs_owner_says_so(shared_tmp: Path):
    state = shared_tmp / "state"
    state.mkdir(mode=0o777)
    state.chmod(0o777)  # root's, writable by anyone
    blobs = shared_tmp / "blobs"
    blobs.mkdir(mode=0o777)
    blobs.chmod(0o777)
    args = ["doctor", "--blobstore", f"file://{blobs}", "--state-dir", str(state), "-o", "json"]
    checks = {c["name"]: c for c in json.loads(as_job_user(shared_tmp, *args).stdout)["checks"]}
    check = checks["state dir"]
    assert check["status"] == "ok"
    assert check["detail"].endswith(f"; but the files statectl makes there are {':'.join(JOB_NAMES)}'s, not the "
                                    "dir owner's (root:root): the job may not be able to write or restore them")
    assert check["hint"] == "run statectl as root"
    assert list(state.iterdir()) == []

    # Run as root on the job's state dir: what it makes is given to the dir's owner, nothing to say.
    give_to_job_user(state)
    p = subprocess.run([STATECTL, *args], capture_output=True, text=True, timeout=180,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(shared_tmp / "home")})
    check = {c["name"]: c for c in json.loads(p.stdout)["checks"]}["state dir"]
    assert check["status"] == "ok" and "but the files" not in check["detail"] and check["hint"] is None, check
