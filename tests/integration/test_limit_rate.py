"""--limit-rate against real SeaweedFS and file:// (and Tansu for a standby seed): a limited backup, restore,
copy through this host, adstore file load and standby seed each take at least their bytes / the rate, with
every transfer thread taking from one bucket (eight threads at the rate each would be eight times as fast);
a server-side copy is not limited and says so; the config key; Ctrl-C ends a limited transfer at once;
bad rates are usage errors (exit 2) that write nothing.

Only lower bounds are asserted: the bucket starts empty, so N bytes cannot pass before N / rate seconds
have gone by (the bucket is made after the clock starts), however loaded the machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.backup import BackupOptions, backup
from statectl.engine.copy import CopyOptions, copy_snapshot
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import SnapshotNotFoundError
from statectl.local.layout import store_dir
from statectl.ratelimit import RateLimit
from tests.tools.genstore import fingerprint, make_store
from tests.tools.standby_helpers import STATECTL, Follower, clean_env, wait_until
from tests.tools.standby_helpers import cli as run_cli

REF = StoreRef("page-views", "1", "Partition 0", "counts")
KiB, MiB = 1024, 1024 * 1024
RATE = 2 * MiB


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    """A store of ~4 MiB of random values in ~1 MiB SSTs: several files, uploaded by several threads."""
    d = store_dir(tmp_path / "state", REF.store, REF.task)
    make_store(d, 4000, 1024, seed=11, sst_mb=1)
    return d


class CountingLimit(RateLimit):
    """The real bucket, counting what is taken from it: every transfer thread must take from this one."""

    def __init__(self, rate: int):
        super().__init__(rate)
        self.taken = 0
        self._count_lock = threading.Lock()

    def take(self, n: int, cancel: threading.Event | None = None) -> None:
        with self._count_lock:
            self.taken += n
        super().take(n, cancel)


def _snapshots(bs, ref: StoreRef = REF) -> list:
    try:
        return BlobCheckpointStore(bs).list(ref)
    except SnapshotNotFoundError:
        return []


@pytest.mark.timeout(120)
def test_a_limited_backup_and_restore_take_at_least_their_bytes_over_the_rate(blobstore, sdir: Path, tmp_path: Path):
    cps = BlobCheckpointStore(blobstore)
    rate = 2 * MiB  # about 2 s each way: the ~4 MiB take 0.1 s unlimited
    started = time.monotonic()
    bucket = CountingLimit(rate)
    r = backup(BackupOptions(REF, sdir, parallelism=8, chunk_size=MiB, rate_limit=bucket), blobstore, cps)
    took = time.monotonic() - started
    assert r.bytes_uploaded > 3 * MiB and r.files_uploaded > 3
    assert took >= r.bytes_uploaded / rate, (took, r.bytes_uploaded)
    assert bucket.taken >= r.bytes_uploaded  # one bucket for every thread (re-sent bytes count again)

    target = tmp_path / "restored"
    started = time.monotonic()
    bucket = CountingLimit(rate)
    rr = restore(RestoreOptions(REF, tmp_path / "nothing-here", target_dir=target, parallelism=8,
                                rate_limit=bucket), blobstore, cps)
    took = time.monotonic() - started
    assert rr.bytes_downloaded == r.bytes_total
    assert took >= rr.bytes_downloaded / rate, (took, rr.bytes_downloaded)
    assert bucket.taken >= rr.bytes_downloaded
    assert fingerprint(target) == fingerprint(sdir)


@pytest.mark.timeout(120)
def test_a_copy_streamed_through_this_host_is_limited(sdir: Path, tmp_path: Path, seaweed, s3_options):
    src = open_blobstore(f"file://{tmp_path / 'blobs'}", create=True)
    dst = open_blobstore(f"s3://{seaweed.make_bucket()}/p", s3=s3_options)
    backup(BackupOptions(REF, sdir, chunk_size=MiB), src, BlobCheckpointStore(src))
    target = StoreRef("page-views-staging", "1", "Partition 0", "counts")
    started = time.monotonic()
    bucket = CountingLimit(RATE)
    r = copy_snapshot(CopyOptions(REF, target, parallelism=8, rate_limit=bucket), src,
                      BlobCheckpointStore(src), dst, BlobCheckpointStore(dst))
    took = time.monotonic() - started
    assert not r.server_side and r.bytes_copied > 3 * MiB
    assert took >= r.bytes_copied / RATE, (took, r.bytes_copied)
    assert bucket.taken >= r.bytes_copied  # each byte once, on its way in
    restore(RestoreOptions(target, tmp_path / "none", target_dir=tmp_path / "copied"), dst, BlobCheckpointStore(dst))
    assert fingerprint(tmp_path / "copied") == fingerprint(sdir)


def test_a_server_side_copy_says_the_limit_does_not_apply(sdir: Path, tmp_path: Path, seaweed, s3_options):
    src = open_blobstore(f"s3://{seaweed.make_bucket()}/p", s3=s3_options)
    dst = open_blobstore(f"s3://{seaweed.make_bucket()}/p", s3=s3_options)
    backup(BackupOptions(REF, sdir, chunk_size=MiB), src, BlobCheckpointStore(src))
    target = StoreRef("page-views-staging", "1", "Partition 0", "counts")
    bucket = CountingLimit(RATE)
    r = copy_snapshot(CopyOptions(REF, target, rate_limit=bucket), src, BlobCheckpointStore(src), dst,
                      BlobCheckpointStore(dst))
    assert r.server_side and bucket.taken == 0
    assert any("--limit-rate 2MiB/s does not apply" in n and "server-side" in n for n in r.notes), r.notes


@pytest.mark.timeout(120)
def test_the_profile_key_limits_a_cli_backup(sdir: Path, tmp_path: Path):
    (tmp_path / "statectl.toml").write_text('[default]\nlimit_rate = "2MiB/s"\nchunk_size = "1MiB"\n')
    blobs = f"file://{tmp_path / 'blobs'}"
    shown = json.loads(run_cli(tmp_path, "-o", "json", "config", "show").stdout)
    row = next(r for r in shown["settings"] if r["key"] == "limit_rate")
    assert row["value"] == RATE and row["source"].startswith("profile default")
    started = time.monotonic()
    out = run_cli(tmp_path, "-o", "json", "backup", "--blobstore", blobs, "--create", "--job", REF.job,
              "--store", REF.store, "--store-dir", str(sdir))
    took = time.monotonic() - started
    r = json.loads(out.stdout)
    assert r["bytes_uploaded"] > 3 * MiB
    assert took >= r["bytes_uploaded"] / RATE, (took, r["bytes_uploaded"])


def _sigint_a_worker_thread(pid: int) -> None:
    """SIGINT to one of the process's other threads (tgkill): what the kernel does with a kill() of the
    process when its main thread already has a signal pending. Python runs the handler on the main thread
    only when it next executes bytecode, so a main thread blocked without a timeout never sees it."""
    import ctypes

    others = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert others, "the backup runs no other thread"
    sys_tgkill = 234  # x86-64; the tests run on Linux x86-64 (SERVICES.md)
    assert ctypes.CDLL(None, use_errno=True).syscall(sys_tgkill, pid, others[-1], signal.SIGINT) == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("to", ["process", "worker-thread"])
def test_ctrl_c_ends_a_limited_backup_at_once(sdir: Path, tmp_path: Path, to: str):
    """At 1 KiB/s each thread's first read waits ~17 minutes for its bytes: Ctrl-C must not wait with it,
    whichever thread the kernel hands it to."""
    root = tmp_path / "blobs"
    p = subprocess.Popen([STATECTL, "backup", "--blobstore", f"file://{root}", "--create", "--job", REF.job,
                          "--store", REF.store, "--store-dir", str(sdir), "--limit-rate", "1KiB/s"],
                         env=clean_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        # The first put began (a blob's TTL sidecar is written before its bytes).
        wait_until(lambda: any(f.is_file() for f in (root / "blobs").rglob("*")), why="no upload started")
        if to == "process":
            p.send_signal(signal.SIGINT)
        else:
            _sigint_a_worker_thread(p.pid)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, (out, err)
    assert "Interrupted" in err
    assert _snapshots(open_blobstore(f"file://{root}")) == []


@pytest.mark.timeout(120)
def test_a_limited_adstore_file_load(tmp_path: Path):
    ds = tmp_path / "members.jsonl"
    with open(ds, "w", encoding="utf-8") as f:
        for i in range(4000):
            f.write(json.dumps({"id": f"id-{i:06d}", "payload": os.urandom(100).hex()}) + "\n")
    rate = 256 * KiB
    started = time.monotonic()
    out = run_cli(tmp_path, "-o", "json", "adstore", "load", "--from-file", str(ds), "--key-field", "id",
                  "--store", "members", "--state-dir", str(tmp_path / "state"), "--limit-rate", "256KiB/s")
    took = time.monotonic() - started
    r = json.loads(out.stdout)
    assert r["rows"] == 4000 and r["bytes"] > 800 * KiB
    assert took >= r["bytes"] / rate, (took, r["bytes"])


@pytest.mark.timeout(300)
def test_a_standby_seed_is_limited(tansu, tmp_path: Path):
    """The follower's first restore (its seed from the snapshot the job's checkpoint names) takes from the
    follow command's bucket."""
    import random

    from statectl.catalog.index import read_index
    from tests.integration.test_standby import STORE, World, backup_with_changelog_position
    from tests.tools.standby_helpers import ChangelogWriter, random_records

    tag = uuid.uuid4().hex[:10]
    topic = tansu.create_topic(f"limit-changelog-{tag}", partitions=1)
    writer = ChangelogWriter(tansu.bootstrap, topic)
    (tmp_path / "state").mkdir(exist_ok=True)
    w = World(tansu.bootstrap, tmp_path, f"limit-job-{tag}", topic, writer)
    try:
        writer.send(random_records(random.Random(3), 50))
        job_store = tmp_path / "job-host" / STORE / "Partition_0"
        make_store(job_store, 2000, 1024, seed=5, sst_mb=1)
        snapshot = backup_with_changelog_position(w, job_store, 49)
        rate = 512 * KiB  # about 4 s for the ~2 MiB seed
        started = time.monotonic()
        f = Follower(tmp_path, [*w.where(), "--blobstore", f"file://{tmp_path / 'blobs'}",
                                "--limit-rate", "512KiB/s"])
        try:
            wait_until(lambda: any(s.get("seeded_from") == snapshot for s in f.status_lines()),
                       timeout=240, why="the follower did not seed from the snapshot")
            took = time.monotonic() - started
            assert f.terminate() == 0, f.describe()
        finally:
            f.kill()
    finally:
        writer.close()
    index = read_index(open_blobstore(f"file://{tmp_path / 'blobs'}"), snapshot)
    seeded = sum(fi.size for _, fi in index.dir_index.walk_present())  # nothing local to reuse: all downloaded
    assert seeded > MiB
    assert took >= seeded / rate, (took, seeded)


@pytest.mark.parametrize("value", ["0", "-20MiB/s", "fast", "50"])
@pytest.mark.parametrize("command", ["backup", "restore", "copy", "adstore"])
def test_a_bad_rate_is_a_usage_error_that_writes_nothing(cli, command, value, sdir: Path, tmp_path: Path):
    blobs = f"file://{tmp_path / 'blobs'}"
    if command != "backup":  # something to restore and copy
        cli("backup", "--blobstore", blobs, "--create", "--job", REF.job, "--store", REF.store, "--store-dir", str(sdir))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = {
        "backup": ["backup", "--blobstore", blobs, "--create", "--job", REF.job, "--store", REF.store,
                   "--store-dir", str(sdir)],
        "restore": ["restore", "--blobstore", blobs, "--job", REF.job, "--store", REF.store, "--store-dir",
                    str(sdir), "--target-dir", str(tmp_path / "target")],
        "copy": ["snapshots", "copy", "--blobstore", blobs, "--job", REF.job, "--store", REF.store,
                 "--to-job", "staging"],
        "adstore": ["adstore", "load", "--from-file", str(tmp_path / "none.jsonl"), "--key-field", "id",
                    "--store", "members", "--state-dir", str(tmp_path / "state")],
    }[command]
    r = cli(*args, "--limit-rate", value, code=2)
    assert r.stderr.startswith(f"Error: --limit-rate: invalid value '{value}' (")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_bad_rate_from_the_environment_or_a_profile_is_exit_2(cli, sdir: Path, tmp_path: Path):
    args = ["backup", "--blobstore", f"file://{tmp_path / 'blobs'}", "--create", "--job", REF.job, "--store",
            REF.store, "--store-dir", str(sdir)]
    r = cli(*args, code=2, env={"STATECTL_LIMIT_RATE": "0"})
    assert r.stderr.startswith("Error: env STATECTL_LIMIT_RATE: invalid value '0' (")
    (tmp_path / "statectl.toml").write_text('[default]\nlimit_rate = "-1"\n')
    r = cli(*args, code=2)
    assert "[default] key 'limit_rate': invalid value '-1'" in r.stderr
    assert not (tmp_path / "blobs").exists()


def test_limit_rate_with_a_topic_load_is_a_usage_error(cli, tmp_path: Path):
    r = cli("adstore", "load", "--topic", "members", "--kafka", "127.0.0.1:1", "--store", "members",
            "--state-dir", str(tmp_path / "state"), "--limit-rate", "1MiB/s", code=2)
    assert "--limit-rate limits the reading of --from-file datasets, not of topics" in r.stderr
