"""statectl rescale of hash-partitioned stores, whole statectl processes: real spark-submit (local[2]), real
rocksdict, a file:// blob store. Each target must equal, key for key, a fresh partitioning of the sources'
keys with Kafka's murmur2 partitioner; a kill before the commit and a damaged source commit nothing and
leave the sources as they were.

Each rescale starts a JVM: the file keeps to four of them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from statectl.formats.adstore import Digest, partition_of
from tests.tools.standby_helpers import STATECTL, clean_env, cli, cli_here, read_store

pytestmark = pytest.mark.timeout(600)
STORE = "counts"
SPARK = ["--master", "local[2]"]


def _make_sources(tmp: Path, blobs: str, job: str, n: int, seed: int, *extra: str) -> dict[bytes, bytes]:
    """N stores of ``job`` partitioned by murmur2 % N, each with several SST files, overwrites and deletions
    (a key in two levels, a tombstone hiding one), backed up; return what they hold together."""
    import rocksdict

    rng = random.Random(seed)
    keys = [b"user-%05d" % i for i in range(3000)] + [rng.randbytes(rng.randrange(1, 40)) for _ in range(500)]
    expected: dict[bytes, bytes] = {}
    for p in range(n):
        path = tmp / "state" / STORE / f"Partition_{p}"
        path.parent.mkdir(parents=True, exist_ok=True)
        mine = [k for k in keys if partition_of(k, n) == p]
        db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
        for k in mine:
            v = b"v1-" + k
            db[k] = v
            expected[k] = v
        db.flush()
        for k in mine[::7]:
            del db[k]
            expected.pop(k)
        for k in mine[::5]:
            v = rng.randbytes(rng.randrange(0, 200))
            db[k] = v
            expected[k] = v
        db.flush()
        for k in mine[::11]:  # in the memtable / WAL only when the backup checkpoints
            v = b"v3"
            db[k] = v
            expected[k] = v
        db.close()
        cli_here(tmp, "backup", "--create", "--blobstore", blobs, "--job", job, "--store", STORE, "--task",
                 f"Partition {p}", "--state-dir", str(tmp / "state"), *extra)
    return expected


def _latest(tmp: Path, blobs: str, job: str, task: str) -> list[str]:
    p = cli_here(tmp, "snapshots", "list", "--blobstore", blobs, "--job", job, "--store", STORE, "--task", task,
                 "-o", "json", code=None)
    if p.returncode == 10:
        return []
    assert p.returncode == 0, p.stderr
    return [s["snapshot_id"] for s in json.loads(p.stdout)]


def _restored(tmp: Path, blobs: str, job: str, task: str) -> dict[bytes, bytes]:
    target = tmp / "restored" / job / task.replace(" ", "_")
    cli_here(tmp, "restore", "--blobstore", blobs, "--job", job, "--store", STORE, "--task", task, "--target-dir",
             str(target))
    return read_store(target)


def _compacts(store: Path, want: dict[bytes, bytes], sources: int) -> None:
    """The restored target holds a file of each of its ``sources`` (their key ranges overlap: in L0 but the
    first), opens, compacts into files that no longer overlap, and holds ``want`` still."""
    import rocksdict

    db = rocksdict.Rdict(str(store), rocksdict.Options(raw_mode=True))
    try:
        files = db.live_files()
        assert len(files) == sources and sum(f["level"] == 0 for f in files) >= sources - 1, files
        db.compact_range(None, None)
        assert {f["level"] for f in db.live_files()} == ({6} if want else set()), db.live_files()
        assert all(db[k] == v for k, v in want.items())
    finally:
        db.close()
    assert read_store(store) == want


def _nothing_committed(tmp: Path, blobs: str, job: str, m: int) -> None:
    for j in range(m):
        assert _latest(tmp, blobs, job, f"Partition {j}") == [], f"a snapshot of {job} Partition {j} was committed"


def _sources_intact(tmp: Path, blobs: str, job: str, before: dict[str, list[str]]) -> None:
    for task, ids in before.items():
        assert _latest(tmp, blobs, job, task) == ids
        cli_here(tmp, "snapshots", "verify", ids[0], "--download", "--blobstore", blobs, "--job", job, "--store",
                 STORE, "--task", task)


def _uncommitted_blobs_carry_a_ttl(url: str, committed: list[str]) -> int:
    """Every data blob but those of the ``committed`` snapshots carries a TTL (gc reclaims it once it runs
    out); return how many there are."""
    from statectl.blobstore import open_blobstore
    from statectl.catalog.index import is_data_blob_id, read_index, snapshot_blob_ids

    store = open_blobstore(url)
    try:
        kept = set()
        for sid in committed:
            kept |= snapshot_blob_ids(sid, read_index(store, sid))
        others = [b.key for b in store.list("blobs/") if is_data_blob_id(b.key) and b.key not in kept]
        permanent = [k for k in others if store.stat(k).expires_at is None]
        assert not permanent, f"uncommitted blobs without a TTL: {permanent[:3]}"
        return len(others)
    finally:
        store.close()


def _check_targets(tmp: Path, blobs: str, job: str, m: int, expected: dict[bytes, bytes], result: dict) -> None:
    assert result["tasks_out"] == m and result["keys"] == len(expected)
    digest = Digest()
    digest.add_sorted(sorted(expected.items()))  # the executors' sums are statectl's Digest of the entries
    assert result["content_hash"] == f"{digest.checksum:016x}"
    assert result["verified"] and result["committed"] and result["changelog_position"] is None
    for j in range(m):
        want = {k: v for k, v in expected.items() if partition_of(k, m) == j}
        assert result["targets"][j]["keys"] == len(want)
        got = _restored(tmp, blobs, job, f"Partition {j}")
        assert got == want, f"target Partition {j} differs from a fresh partitioning"
        _compacts(tmp / "restored" / job / f"Partition_{j}", want, len({partition_of(k, result["tasks_in"])
                                                                          for k in want}))
        snap = json.loads(cli_here(tmp, "snapshots", "show", result["targets"][j]["snapshot_id"], "--blobstore",
                                   blobs, "--job", job, "--store", STORE, "--task", f"Partition {j}", "-o",
                                   "json").stdout)
        assert snap["prev-snapshot-index-blob-id"] is None
    assert result["bytes_read"] > 0 and result["bytes_written"] > 0


def test_rescale_2_to_3_killed_then_done(tmp_path: Path, tansu):
    """With the jobs' Kafka checkpoint topics. Killed after uploading every target, before the commit:
    nothing committed, the sources intact. Then the same rescale runs to the end: 3 targets, each exactly
    its keys, each committed to the target job's checkpoint topic; a target task whose checkpoint named a
    changelog position of the store now names none (partition = the task's)."""
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.catalog.refs import StoreRef, new_checkpoint_id
    from statectl.formats.checkpoint import (
        BLOB_STORE_FACTORY,
        KAFKA_CHANGELOG_FACTORY,
        SSP,
        KafkaChangelogMarker,
        decode_changelog_marker,
        encode_changelog_marker,
    )

    blobs = f"file://{tmp_path / 'blobs'}"
    src, dst = f"src-{tmp_path.name[-6:]}", f"dst-{os.getpid()}-{tmp_path.name[-6:]}"
    expected = _make_sources(tmp_path, blobs, src, 2, 1, "--kafka", tansu.bootstrap)
    before = {f"Partition {p}": _latest(tmp_path, blobs, src, f"Partition {p}") for p in range(2)}
    old = KafkaChangelogMarker(SSP("kafka", f"{dst}-counts-changelog", 0), "4267")
    with KafkaCheckpointLog(tansu.bootstrap, dst, "1") as log:  # the old job's checkpoint of Partition 1
        log.commit(StoreRef(dst, "1", "Partition 1", "other"), new_checkpoint_id(), "blobs/00/other",
                   markers={KAFKA_CHANGELOG_FACTORY: {STORE: encode_changelog_marker(old)}})
    args = ["rescale", "--blobstore", blobs, "--kafka", tansu.bootstrap, "--job", src, "--to-job", dst, "--store",
            STORE, "--from", "2", "--to", "3", "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    env = dict(clean_env(tmp_path), STATECTL_FAILPOINTS="rescale-before-commit=kill")
    p = subprocess.run([STATECTL, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == -9, (p.returncode, p.stderr)
    _nothing_committed(tmp_path, blobs, dst, 3)
    _sources_intact(tmp_path, blobs, src, before)
    with KafkaCheckpointLog(tansu.bootstrap, dst, "1") as log:
        latest, _ = log.latest_checkpoints()
    assert set(latest) == {"Partition 1"} and STORE not in latest["Partition 1"].state_checkpoint_markers.get(
        BLOB_STORE_FACTORY, {})
    assert _uncommitted_blobs_carry_a_ttl(blobs, [ids[0] for ids in before.values()]) > 0

    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert r["tasks_in"] == 2 and sum(s["keys"] for s in r["sources"]) == len(expected)
    _check_targets(tmp_path, blobs, dst, 3, expected, r)
    _sources_intact(tmp_path, blobs, src, before)
    with KafkaCheckpointLog(tansu.bootstrap, dst, "1") as log:
        latest, _ = log.latest_checkpoints()
    for j in range(3):
        markers = latest[f"Partition {j}"].state_checkpoint_markers
        assert markers[BLOB_STORE_FACTORY][STORE] == r["targets"][j]["snapshot_id"]
        changelog = markers.get(KAFKA_CHANGELOG_FACTORY, {}).get(STORE)
        if j == 1:
            m = decode_changelog_marker(changelog)
            assert m.offset is None and m.ssp.partition == 1 and m.ssp.stream == old.ssp.stream
        else:
            assert changelog is None


def test_rescale_4_to_2_then_damaged_source(tmp_path: Path):
    """4 -> 2 within the job: the targets become the latest snapshots of Partition 0 and 1, whose old
    snapshots stay restorable (a roll-back), and Partition 2 and 3 keep theirs. Then the old snapshots,
    named with --snapshots, one with a flipped byte: exit 1 naming it, nothing committed."""
    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "job4", 4, 2)
    stored = sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in (tmp_path / "blobs").rglob("*"))
    dry = json.loads(cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "job4", "--store", STORE, "--from",
                         "4", "--to", "2", "--dry-run", "-o", "json").stdout)
    assert dry["dry_run"] and not dry["committed"] and len(dry["sources"]) == 4
    assert sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in (tmp_path / "blobs").rglob("*")) == stored
    before = {f"Partition {p}": _latest(tmp_path, blobs, "job4", f"Partition {p}") for p in range(4)}
    r = json.loads(cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "job4", "--store", STORE, "--from", "4",
                       "--to", "2", "--work-dir", str(tmp_path), *SPARK, "-o", "json", timeout=300).stdout)
    _check_targets(tmp_path, blobs, "job4", 2, expected, r)
    # The rescale read the sources its dry run planned, into the targets it named.
    assert [(x["task"], x["snapshot_id"], x["checkpoint_id"], x["files"], x["bytes"]) for x in r["sources"]] == \
        [(x["task"], x["snapshot_id"], x["checkpoint_id"], x["files"], x["bytes"]) for x in dry["sources"]]
    assert [t["task"] for t in r["targets"]] == [t["task"] for t in dry["targets"]]
    for p in range(4):
        task = f"Partition {p}"
        now = _latest(tmp_path, blobs, "job4", task)
        assert now == ([r["targets"][p]["snapshot_id"]] if p < 2 else []) + before[task], task
        cli_here(tmp_path, "snapshots", "verify", before[task][0], "--download", "--blobstore", blobs, "--job",
                 "job4", "--store", STORE, "--task", task)
    assert not list(tmp_path.glob("statectl-rescale-*")), "the work dir outlived the rescale"
    # Partition 2 and 3 are what the recorded scale-in left behind, not state: a rescale --from 2 may go on
    dry = json.loads(cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "job4", "--store", STORE, "--from", "2",
                         "--to", "3", "--to-job", "job3", "--dry-run", "-o", "json").stdout)
    assert [s["snapshot_id"] for s in dry["sources"]] == [t["snapshot_id"] for t in r["targets"]]

    named = tmp_path / "snapshots.json"
    named.write_text(json.dumps({task: ids[0] for task, ids in before.items()}))
    index = json.loads(cli_here(tmp_path, "snapshots", "show", before["Partition 1"][0], "--blobstore", blobs,
                                "--job", "job4", "--store", STORE, "--task", "Partition 1", "-o", "json").stdout)
    sst = next(f for f in index["dir-index"]["files-present"] if f["file-name"].endswith(".sst"))
    blob_id = sst["blobs"][0]["blob-id"]
    name = blob_id.rsplit("/", 1)[-1]
    blob = next(p for p in (tmp_path / "blobs").rglob("*") if p.is_file() and p.name == name)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    os.chmod(blob, 0o644)
    blob.write_bytes(bytes(data))
    p = cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "job4", "--to-job", "job2b", "--store", STORE,
            "--from", "4", "--to", "2", "--snapshots", str(named), "--work-dir", str(tmp_path), *SPARK, code=1,
            timeout=300)
    assert "damaged" in p.stderr and "Partition 1" in p.stderr, p.stderr
    _nothing_committed(tmp_path, blobs, "job2b", 2)
    import tempfile

    # the executors' copies of the sources went with the aborted application (tasks killed mid-read too)
    assert not list(Path(tempfile.gettempdir()).glob("statectl-rescale-src-*"))
    for p in range(4):
        task = f"Partition {p}"
        new = [r["targets"][p]["snapshot_id"]] if p < 2 else []
        assert _latest(tmp_path, blobs, "job4", task) == new + before[task]


def test_rescale_usage_and_not_found(tmp_path: Path):
    """No Spark: bad counts are usage errors (2); a source task without a snapshot is not found (10), with
    -o json one error document; nothing is run."""
    blobs = f"file://{tmp_path / 'blobs'}"
    base = ["rescale", "--blobstore", blobs, "--job", "nojob", "--store", STORE]
    cli(tmp_path, *base, "--from", "0", "--to", "2", code=2)
    cli(tmp_path, *base, "--from", "2", "--to", "2", code=2)
    cli(tmp_path, *base, "--from", "2", "--to", "3", "--partitioner", "not-a-callable", code=2)
    p = cli(tmp_path, "-o", "json", *base, "--from", "2", "--to", "3", code=10)
    doc = json.loads(p.stdout)
    assert doc["exit_code"] == 10 and doc["error"] == f"blob store {blobs} does not exist"  # not made either
    (tmp_path / "blobs").mkdir()
    work = tmp_path / "work"  # the Spark job started for the plan is killed with it, and its work dir removed
    p = cli(tmp_path, "-o", "json", *base, "--from", "2", "--to", "3", "--work-dir", str(work), code=10)
    doc = json.loads(p.stdout)
    assert doc["exit_code"] == 10 and doc["error"].startswith("unknown job 'nojob'")
    assert not list(work.glob("statectl-rescale-*")) and not _processes_naming(str(work))
    (tmp_path / "map.json").write_text(json.dumps({"from": ["a"]}))
    p = cli(tmp_path, *base, "--from", "2", "--to", "3", "--task-map", str(tmp_path / "map.json"), code=2)
    assert "task map" in p.stderr


def _processes_naming(text: str) -> list[str]:
    """The command lines of the processes that name ``text`` in theirs."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            out.append(cmdline)
    return out


def test_the_spark_job_starts_before_the_blob_store_opens_and_goes_with_a_refused_plan(tmp_path: Path):
    """The hash path's spark-submit runs, in the rescale's work dir, by the time the blob store is opened; the
    plan then refuses (no snapshot: exit 10), and the job's processes and the work dir are gone with it."""
    import time

    from statectl.blobstore import open_blobstore
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.engine.rescale.execute import rescale
    from statectl.engine.rescale.options import RescaleOptions
    from statectl.errors import SnapshotNotFoundError

    (tmp_path / "blobs").mkdir()
    store = open_blobstore(f"file://{tmp_path / 'blobs'}")
    work = tmp_path / "work"
    seen: list[list[str]] = []

    def opened() -> object:
        seen.append([str(p) for p in work.glob("statectl-rescale-*/build/spark-submit.log")])
        while seen[0] and not _processes_naming(str(work)):  # between setpriv's, env's and bash's execs
            time.sleep(0.01)
        return store

    try:
        with pytest.raises(SnapshotNotFoundError):
            rescale(RescaleOptions(STORE, "none", from_tasks=2, to_tasks=3, master="local[2]", work_dir=work), opened,
                    lambda: BlobCheckpointStore(store))
    finally:
        store.close()
    assert seen[0], seen  # the job's log: spark-submit ran, naming the job file in the work dir
    assert not _processes_naming(str(work)) and not list(work.glob("statectl-rescale-*"))


def test_rescale_with_a_partitioner_of_the_job_shows_the_spark_builds_stages_and_rows(tmp_path: Path, monkeypatch):
    """--partitioner module:callable, importable in the executors and in statectl (PYTHONPATH): 2 -> 2 into
    another job, every key where that function sends it; the sources' keys were placed by murmur2
    (--from-partitioner), which their layout check follows.

    Run in this process (the engine call of ``rescale``), so that its reporter is seen to get the Spark
    driver's status: stages done of total and the rows written, the last figures those of the whole build
    (every key of the sources). The blob store opens only once the driver, started ahead, waits for its job
    file: its Python workers start meanwhile, in a job the status leaves out, and the stage's tasks take
    them."""
    import time
    import zlib

    from statectl.blobstore import open_blobstore
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.cli.common import to_jsonable
    from statectl.engine.rescale.execute import rescale
    from statectl.engine.rescale.options import RescaleOptions
    from statectl.spark.status import WAITING_MARK
    from tests.tools.progress_recorder import Recorder

    (tmp_path / "jobparts").mkdir()
    (tmp_path / "jobparts" / "route.py").write_text(
        "import zlib\n\ndef by_crc(key, n):\n    return zlib.crc32(key) % n\n")
    monkeypatch.syspath_prepend(str(tmp_path / "jobparts"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "jobparts"))
    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "murmur", 2, 3)
    rec = Recorder()
    store = open_blobstore(blobs)
    work = tmp_path / "work"

    def when_waiting() -> object:
        while not any(WAITING_MARK in log.read_text(errors="replace")
                      for log in work.glob("statectl-rescale-*/build/spark-submit.log")):
            time.sleep(0.05)
        return store

    try:
        result = rescale(RescaleOptions(STORE, "murmur", to_job="crc", from_tasks=2, to_tasks=2, master="local[2]",
                                        work_dir=work, partitioner="route:by_crc", from_partitioner="murmur2"),
                         when_waiting, BlobCheckpointStore(store), rec)
    finally:
        store.close()
    assert result.committed and result.phases["spark_job_wait_s"] > 0
    r = to_jsonable(result)
    assert r["partitioner"] == "route:by_crc" and r["keys"] == len(expected)
    for j in range(2):
        want = {k: v for k, v in expected.items() if zlib.crc32(k) % 2 == j}
        assert r["targets"][j]["keys"] == len(want)
        assert _restored(tmp_path, blobs, "crc", f"Partition {j}") == want
    shown = rec.statuses("Spark build of ")
    assert shown and shown[-1] == {}
    last = shown[-2]
    assert last["stages"] == last["stages_total"] == 1 and last["rows"] == len(expected)
