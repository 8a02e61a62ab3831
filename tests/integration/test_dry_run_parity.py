"""A dry run exits as the command would: for each state-changing command with --dry-run, every refusal it
makes before it writes (and what it finds only when it starts to write: a missing source blob, credentials
that cannot write, a lock held) gives the same exit code with --dry-run, and neither run changes anything.

Each case runs the command twice, as it is and with --dry-run, asserting the expected exit code both times
and that what the command would change (the blob store's objects, the state dir, the coordinator stream) is
as it was. Against the real components: rocksdict stores, file:// and SeaweedFS blob stores (a read-only
identity, a read-only mount), a Tansu broker. rescale and standby have their own parity tests."""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from statectl.local.layout import store_dir
from tests.integration.test_bad_input import bucket_listing
from tests.integration.test_drain_cli import make_job  # noqa: F401 - the drain tests' job fixture
from tests.integration.test_dry_run import tree
from tests.tools.genstore import make_store

JOB, STORE, TASK = "pv", "counts", "Partition 0"
REF = ["--job", JOB, "--store", STORE, "--task", TASK]
# Its RocksDB info log goes elsewhere: RocksDB's threads keep writing to it after the open, which would change
# the store's dir while the test compares it.
HOLDER = """import shutil, sys, tempfile, rocksdict
opts = rocksdict.Options(raw_mode=True)
logs = tempfile.mkdtemp(prefix="statectl-test-holder-log-")
opts.set_db_log_dir(logs)
db = rocksdict.Rdict(sys.argv[1], opts)
print("ready", flush=True)
sys.stdin.read()
db.close()
shutil.rmtree(logs)
"""


@dataclass
class Case:
    """A command that must refuse with ``code``, dry run or not; ``state()`` is what neither run may change;
    ``cleanup`` runs after both."""

    args: list[str]
    code: int
    state: Callable[[], Any]
    env: dict[str, str] | None = None
    words: str = ""  # in the error line of both runs
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def check(cli, case: Case) -> None:
    try:
        before = case.state()
        for dry in ([], ["--dry-run"]):
            r = cli(*case.args, *dry, code=case.code, env=case.env)
            [line] = [x for x in r.stderr.splitlines() if x.startswith("Error: ")]
            assert "unexpected" not in line, (dry, r.stderr)
            assert case.words.lower() in line.lower(), (dry, line)
            assert case.state() == before, dry
    finally:
        for f in case.cleanup:
            f()


class Blobs:
    """A blob store holding one snapshot of ``pv/counts/Partition 0``: file:// (a dir) or SeaweedFS (a
    bucket); ``env`` reaches it, ``listing()`` is every object it holds."""

    def __init__(self, request: pytest.FixtureRequest, tmp: Path, backend: str, *, server: str = "seaweed"):
        self.tmp, self.backend = tmp, backend
        self.state = tmp / "state"
        self.sdir = store_dir(self.state, STORE, TASK)
        make_store(self.sdir, 400, 300, seed=1)
        make_store(self.sdir, 30, 100, seed=2, start=10_000)  # a second, small SST file
        if backend == "file":
            self.url, self.env, self.sw = f"file://{tmp / 'blobs'}", None, None
            (tmp / "blobs").mkdir()
        else:
            self.sw = request.getfixturevalue(server)
            self.bucket = self.sw.make_bucket()
            self.url = f"s3://{self.bucket}/p"
            self.env = self.env_for(self.sw.access_key, self.sw.secret_key)
        self.cli = request.getfixturevalue("cli")
        self.cli("backup", "--blobstore", self.url, *REF, "--state-dir", str(self.state), env=self.env)

    def env_for(self, key: str, secret: str) -> dict[str, str]:
        return {"STATECTL_S3_ENDPOINT": self.sw.endpoint, "STATECTL_S3_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}

    def listing(self) -> Any:
        if self.backend == "file":
            return objects(self.tmp / "blobs")
        return bucket_listing(self.sw.client, self.bucket)

    def blob_keys(self) -> list[str]:
        """The data blobs, smallest first."""
        if self.backend == "file":
            found = [(p.stat().st_size, str(p.relative_to(self.tmp / "blobs")))
                     for p in (self.tmp / "blobs" / "blobs").rglob("*") if p.is_file() and "." not in p.name]
        else:
            found = [(size, key) for key, size, *_ in bucket_listing(self.sw.client, self.bucket) if "/blobs/" in key]
        return [k for _, k in sorted(found)]

    def remove(self, key: str) -> None:
        if self.backend == "file":
            (self.tmp / "blobs" / key).unlink()
        else:
            self.sw.client.delete_object(Bucket=self.bucket, Key=key)

    def truncate(self, key: str) -> None:
        if self.backend == "file":
            p = self.tmp / "blobs" / key
            p.write_bytes(p.read_bytes()[:-10])
        else:
            body = self.sw.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            self.sw.client.put_object(Bucket=self.bucket, Key=key, Body=body[:-10])

    def everything(self) -> tuple:
        return self.listing(), tree(self.state)


def state_tree(root: Path) -> dict:
    """A state dir as a dry run must leave it: every path with its type, size and mtime (dirs by their
    entries only), but the adstore lock files, whose content is the pid of their last holder (a load or
    switch writes it when it takes the lock, before it checks what it is to do)."""
    return {k: v for k, v in tree(root, dir_mtimes=False).items() if not k.endswith((".adstore.lock",
                                                                                      ".adstore-dataset.lock"))}


def objects(root: Path) -> dict[str, tuple[int, int]]:
    """What a file:// blob store holds: every file under ``root`` with its size and mtime, but the store's
    own ``.lock`` files, which a conditional write makes beside its object (S3 shows nothing of the kind),
    and dirs (a key's dirs stay when its object goes: a reader pin's, say)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and not p.name.endswith(".lock")}


def read_only_mount(small_disk, *dirs: str) -> Path:
    """A tmpfs holding ``dirs``, remounted read-only."""
    d = small_disk(4)
    for sub in dirs:
        (d / sub).mkdir(parents=True)
    subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
    return d


def hold_store(path: Path) -> Callable[[], None]:
    """A process holding the RocksDB store at ``path`` open (its LOCK taken), as a running job does; returns
    what stops it."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"

    def stop() -> None:
        p.stdin.close()
        p.wait(30)
    return stop


# -- snapshots copy ----------------------------------------------------------------------------------------

COPY = ["unknown-snapshot", "missing-source-blob", "short-source-blob", "read-only-target", "target-is-the-source",
        "target-lease-held", "no-target-blob-store", "bad-option"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["file", "s3"])
@pytest.mark.parametrize("kind", COPY)
def test_snapshots_copy(cli, request, tmp_path: Path, backend: str, kind: str, small_disk):
    b = Blobs(request, tmp_path, backend, server="seaweed_auth" if kind == "read-only-target" else "seaweed")
    copy = ["snapshots", "copy", "--blobstore", b.url, *REF]
    to = ["--to-job", "pv-staging", "--to-task", "Partition 3"]
    case = Case([*copy, *to], 0, b.everything, b.env)
    if kind == "unknown-snapshot":
        case.args, case.code, case.words = [*copy[:2], "deadbeef", *copy[2:], *to], 10, "deadbeef"
    elif kind == "missing-source-blob":
        b.remove(b.blob_keys()[0])
        case.code, case.words = 1, "missing"
    elif kind == "short-source-blob":
        b.truncate(b.blob_keys()[0])
        case.code, case.words = 1, "the index says"
    elif kind == "read-only-target":
        if backend == "s3":  # the identity that can only read: the source reads, the target does not take
            case.env, case.code, case.words = b.env_for(b.sw.readonly_access_key, b.sw.readonly_secret_key), 12, \
                "not write"
        else:  # a read-only mount
            ro = read_only_mount(small_disk, "target")
            case.args += ["--to-blobstore", f"file://{ro / 'target'}"]
            case.state = lambda: (b.everything(), tree(ro))
            case.code, case.words = 1, "read-only file system"
    elif kind == "target-is-the-source":
        case.args = [*copy, "--to-blobstore", b.url + "/"]
        case.code, case.words = 2, "the source store itself"
    elif kind == "target-lease-held":
        from statectl.blobstore import S3Options, open_blobstore
        from statectl.catalog.lease import Lease
        from statectl.catalog.refs import StoreRef

        s3 = None if backend == "file" else S3Options(endpoint_url=b.sw.endpoint, region="us-east-1",
                                                      access_key_id=b.sw.access_key, secret_access_key=b.sw.secret_key)
        store = open_blobstore(b.url, s3=s3)
        lease = Lease(store, StoreRef("pv-staging", "1", "Partition 3", STORE), operation="backup")
        lease.acquire()  # a backup of the target runs (this process: alive, on this host)
        case.cleanup += [lease.release, store.close]
        case.code, case.words = 11, "another backup"
    elif kind == "no-target-blob-store":
        case.args += ["--to-blobstore", f"file://{tmp_path / 'nowhere'}" if backend == "file"
                      else f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/p"]
        case.code = 10
    elif kind == "bad-option":
        case.args += ["--keep-last", "0"]
        case.code, case.words = 2, "--keep-last"
    check(cli, case)


# -- gc ------------------------------------------------------------------------------------------------------

@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["file", "s3"])
@pytest.mark.parametrize("kind", ["cannot-write", "grace-too-short", "no-blob-store"])
def test_gc(cli, request, tmp_path: Path, backend: str, kind: str, small_disk):
    b = Blobs(request, tmp_path, backend, server="seaweed_auth" if kind == "cannot-write" else "seaweed")
    case = Case(["gc", "--blobstore", b.url], 0, b.everything, b.env)
    if kind == "cannot-write":
        if backend == "s3":
            case.env, case.code, case.words = b.env_for(b.sw.readonly_access_key, b.sw.readonly_secret_key), 12, \
                "not write"
        else:
            import shutil

            ro = read_only_mount(small_disk)
            subprocess.run(["mount", "-o", "remount,rw", str(ro)], check=True)
            shutil.copytree(tmp_path / "blobs", ro / "blobs")
            subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
            case.args = ["gc", "--blobstore", f"file://{ro / 'blobs'}"]
            case.state = lambda: (objects(ro), b.everything())
            case.code, case.words = 1, "read-only file system"
    elif kind == "grace-too-short":
        case.args += ["--grace", "10s"]
        case.code, case.words = 2, "--grace"
    elif kind == "no-blob-store":
        case.args = ["gc", "--blobstore", f"file://{tmp_path / 'nowhere'}" if backend == "file"
                     else f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/p"]
        case.code = 10
    check(cli, case)


# -- restore -------------------------------------------------------------------------------------------------

RESTORE = ["unknown-snapshot", "missing-blob", "short-blob", "target-not-a-store", "target-held", "disk-too-small"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["file", "s3"])
@pytest.mark.parametrize("kind", RESTORE)
def test_restore(cli, request, tmp_path: Path, backend: str, kind: str, small_disk):
    b = Blobs(request, tmp_path, backend)
    target = tmp_path / "target"
    case = Case(["restore", "--blobstore", b.url, *REF, "--target-dir", str(target)], 0,
                lambda: (b.everything(), tree(tmp_path / "target") if target.exists() else None), b.env)
    if kind == "unknown-snapshot":
        case.args += ["--snapshot", "deadbeef"]
        case.code, case.words = 10, "deadbeef"
    elif kind == "missing-blob":  # of the smallest file: no file a restore stats up front
        b.remove(b.blob_keys()[0])
        case.code, case.words = 1, "missing"
    elif kind == "short-blob":
        b.truncate(b.blob_keys()[0])
        case.code = 1
    elif kind == "target-not-a-store":
        target.mkdir()
        (target / "notes.txt").write_text("not a store")
        case.code, case.words = 2, str(target)
    elif kind == "target-held":
        make_store(target, 10, 10, seed=5)
        case.cleanup.append(hold_store(target))
        case.code, case.words = 11, str(target)
    elif kind == "disk-too-small":
        disk = small_disk(1)
        import os

        st = os.statvfs(disk)
        (disk / "filler").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - 32 * 1024))  # 32 KiB left
        case.args[-1] = str(disk / "target")
        case.state = lambda: (b.everything(), tree(disk))
        case.code, case.words = 1, "no space left"
    check(cli, case)


# -- adstore load --from-file and adstore switch -------------------------------------------------------------

def _csv(path: Path, rows: list[str]) -> Path:
    path.write_text("id,v\n" + "".join(f"{r}\n" for r in rows))
    return path


def _versions(cli, tmp_path: Path) -> list[str]:
    """A versioned store (versions 1 and 2, 2 current); the flags that name it."""
    where = ["--store", "members", "--state-dir", str(tmp_path / "state")]
    for n in (1, 2):
        cli("adstore", "load", "--from-file", str(_csv(tmp_path / f"v{n}.csv", [f"{i},{n}" for i in range(20)])),
            "--key-field", "id", *where)
    return where


def _lock_store(store: Path) -> Callable[[], None]:
    from statectl.local.versions import StoreLock

    lock = StoreLock(store).__enter__()  # another adstore load or switch of the store runs
    return lambda: lock.__exit__(None, None, None)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["no-dataset", "row-without-key", "empty-dataset", "target-not-versioned",
                                  "store-locked"])
def test_adstore_load_from_file(cli, tmp_path: Path, kind: str):
    where = _versions(cli, tmp_path)
    store = store_dir(tmp_path / "state", "members", TASK)
    ds = _csv(tmp_path / "v3.csv", [f"{i},3" for i in range(30)])
    case = Case(["adstore", "load", "--from-file", str(ds), "--key-field", "id", *where], 0,
                lambda: state_tree(tmp_path / "state"))
    if kind == "no-dataset":
        case.args[3] = str(tmp_path / "nowhere.csv")
        case.code, case.words = 10, "nowhere.csv"
    elif kind == "row-without-key":
        _csv(ds, ["1,a", ",b"])
        case.code = 1
    elif kind == "empty-dataset":
        _csv(ds, [])
        case.code, case.words = 1, "no rows"
    elif kind == "target-not-versioned":
        make_store(store_dir(tmp_path / "state", "plain", TASK), 10, 10)
        case.args[case.args.index("members")] = "plain"
        case.code = 2
    elif kind == "store-locked":
        case.cleanup.append(_lock_store(store))
        case.code, case.words = 11, "locked"
    check(cli, case)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["no-such-version", "damaged-version", "store-locked"])
def test_adstore_switch(cli, tmp_path: Path, kind: str):
    where = _versions(cli, tmp_path)
    store = store_dir(tmp_path / "state", "members", TASK)
    case = Case(["adstore", "switch", *where], 0, lambda: state_tree(tmp_path / "state"))
    if kind == "no-such-version":
        case.args += ["--version", "7"]
        case.code = 10
    elif kind == "damaged-version":
        (store.with_name(store.name + ".versions") / "1" / "CURRENT").unlink()
        case.code, case.words = 1, "damaged"
    elif kind == "store-locked":
        case.cleanup.append(_lock_store(store))
        case.code, case.words = 11, "locked"
    check(cli, case)


# -- adstore load --topic (and --dataset-versions) -----------------------------------------------------------

@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["no-topic", "store-locked", "store-held", "dataset-loader-running"])
def test_adstore_load_from_a_topic(cli, tansu, tmp_path: Path, kind: str):
    from statectl.kafka.client import create_topic

    topic = f"parity-{uuid.uuid4().hex[:8]}"
    assert create_topic(tansu.bootstrap, topic, partitions=1)
    where = ["--kafka", tansu.bootstrap, "--topic", topic, "--store", "side", "--state-dir", str(tmp_path / "state")]
    store = store_dir(tmp_path / "state", "side", TASK)
    case = Case(["adstore", "load", *where], 0, lambda: state_tree(tmp_path / "state"))
    if kind == "no-topic":
        case.args[case.args.index(topic)] = "no-such-topic-" + topic
        case.code, case.words = 10, "no-such-topic"
    elif kind == "store-locked":
        cli("adstore", "load", *where)
        case.cleanup.append(_lock_store(store))
        case.code, case.words = 11, "locked"
    elif kind == "store-held":
        cli("adstore", "load", *where)
        case.cleanup.append(hold_store(store))
        case.code, case.words = 11, str(store)
    elif kind == "dataset-loader-running":
        from statectl.engine.adstore.dataset_chain import loader_lock

        lock = loader_lock(store).__enter__()  # a --dataset-versions --follow of the store runs
        case.cleanup.append(lambda: lock.__exit__(None, None, None))
        case.args += ["--dataset-versions"]
        case.code = 11
    check(cli, case)


# -- drain start / cancel ------------------------------------------------------------------------------------

@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["no-run-id", "no-drain-monitor", "no-coordinator-stream"])
def test_drain_start(cli, tansu, make_job, kind: str):  # noqa: F811 - make_job is a fixture
    job = make_job(run_id=None) if kind == "no-run-id" else make_job(monitor=None) \
        if kind == "no-drain-monitor" else make_job()
    case = Case(["drain", "start", *job.args], 0, job.records)
    if kind == "no-run-id":
        case.code, case.words = 10, "no run id"
    elif kind == "no-drain-monitor":
        case.code, case.words = 14, "drain monitor"
    elif kind == "no-coordinator-stream":
        case.args[case.args.index(job.name)] = "never_ran_" + uuid.uuid4().hex[:8]
        case.code, case.words = 10, "does not exist"
    check(cli, case)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["nothing-to-cancel", "already-draining", "all-stale-without-run-id",
                                  "uuid-with-bad"])
def test_drain_cancel(cli, tansu, make_job, kind: str):  # noqa: F811 - make_job is a fixture
    from statectl.formats.drain import encode_control
    from statectl.formats.drain import drain_message
    from tests.integration.test_drain_cli import RUN, batched, intermediate_topic

    case_job = make_job(run_id=None) if kind == "all-stale-without-run-id" else \
        make_job(intermediate=intermediate_topic()) if kind == "already-draining" else make_job()
    case = Case(["drain", "cancel", *case_job.args], 0, case_job.records)
    if kind == "nothing-to-cancel":
        case.code, case.words = 10, "no pending drain notification"
    elif kind == "already-draining":
        case_job.notify()
        batched(tansu.bootstrap, case_job.topic, [(0, encode_control(drain_message("Partition 0", RUN)))])
        case.code, case.words = 1, "cannot be undone"
    elif kind == "all-stale-without-run-id":
        case_job.notify(RUN)
        case_job.notify("OLD-RUN")
        case.args += ["--all-stale"]
        case.code, case.words = 10, "no run id"
    elif kind == "uuid-with-bad":
        case.args += ["--uuid", str(uuid.uuid4()), "--bad"]
        case.code, case.words = 2, "--uuid"
    check(cli, case)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["no-topic", "no-partition", "target-held", "target-not-a-store"])
def test_restore_from_a_changelog(cli, tansu, tmp_path: Path, kind: str):
    from statectl.kafka.client import create_topic

    topic = f"parity-changelog-{uuid.uuid4().hex[:8]}"
    assert create_topic(tansu.bootstrap, topic, partitions=1)
    target = tmp_path / "target"
    case = Case(["restore", "--from-changelog", topic, "--partition", "0", "--kafka", tansu.bootstrap,
                 "--target-dir", str(target)], 0, lambda: tree(tmp_path, dir_mtimes=False))
    if kind == "no-topic":
        case.args[2] = "no-such-" + topic
        case.code, case.words = 10, "no-such-"
    elif kind == "no-partition":
        case.args[4] = "3"
        case.code = 10
    elif kind == "target-held":
        make_store(target, 10, 10, seed=5)
        case.cleanup.append(hold_store(target))
        case.code, case.words = 11, str(target)
    elif kind == "target-not-a-store":
        target.mkdir()
        (target / "notes.txt").write_text("not a store")
        case.code, case.words = 2, str(target)
    check(cli, case)
