"""statectl.engine.rescale and its Spark pieces without Spark: options, the task-map and snapshots files, the
partitioner, the executors' CRC-checked fetch of a source snapshot, the per-source figures, and the
verification that refuses targets that do not hold the sources' entries in the partitioner's tasks."""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from statectl.blobstore import open_blobstore
from statectl.errors import UsageError
from statectl.formats.adstore import Digest, murmur2, partition_of
from statectl.engine.rescale.build import VerificationError, file_bytes, verify_targets
from statectl.engine.rescale.options import RescaleOptions, load_snapshots_file, load_task_map
from statectl.engine.rescale.result import RescaleResult
from statectl.spark.context import BuildError
from statectl.spark.rescale_reader import fetch_snapshot, load_partitioner
from statectl.spark.submit import BuildSpec


def opts(**kw) -> RescaleOptions:
    return RescaleOptions(**{"store": "s", "job": "j", "from_tasks": 2, "to_tasks": 3, **kw})


def test_options():
    opts().validate()
    assert opts().source_tasks == ["Partition 0", "Partition 1"]
    assert opts().target_tasks == ["Partition 0", "Partition 1", "Partition 2"]
    bad = [dict(from_tasks=0), dict(to_tasks=0), dict(to_tasks=2), dict(sources=("a",)),
           dict(sources=("a", "a")), dict(snapshots={"Partition 9": "x"}), dict(partitioner="nocolon"),
           dict(keep_last=0), dict(ttl_seconds=5), dict(store="")]
    for kw in bad:
        with pytest.raises(UsageError):
            opts(**kw).validate()
    opts(to_tasks=2, to_job="other").validate()  # the same count into another job: a copy, allowed
    opts(sources=("a", "b"), targets=("x", "y", "z")).validate()


def test_task_map_and_snapshots_files(tmp_path: Path):
    f = tmp_path / "map.json"
    f.write_text(json.dumps({"from": ["a", "b"], "to": ["x"]}))
    assert load_task_map(f) == (("a", "b"), ("x",))
    f.write_text(json.dumps({"from": ["a"], "extra": 1}))
    with pytest.raises(UsageError):
        load_task_map(f)
    f.write_text(json.dumps({"Partition 0": "blobs/aa/bb"}))
    assert load_snapshots_file(f) == {"Partition 0": "blobs/aa/bb"}
    f.write_text("[1]")
    with pytest.raises(UsageError):
        load_snapshots_file(f)
    with pytest.raises(UsageError):
        load_snapshots_file(tmp_path / "missing.json")


def test_partitioner_default_is_kafkas_and_custom_ones_load():
    route = load_partitioner(None)
    assert route is partition_of
    # toPositive, not abs: a hash of Integer.MIN_VALUE-like magnitude stays in range
    for key in [b"", b"a", b"hello", b"\xff" * 7, b"user-00042"]:
        assert route(key, 7) == (murmur2(key) & 0x7FFFFFFF) % 7
    assert murmur2(b"21") == -973932308  # Kafka's UtilsTest vectors
    assert murmur2(b"foobar") == -790332482
    assert load_partitioner("statectl.formats.adstore:partition_of") is partition_of
    with pytest.raises(BuildError):
        load_partitioner("no_such_module_xyz:f")
    with pytest.raises(BuildError):
        load_partitioner("statectl.formats.adstore:no_such_function")


def test_build_spec_of_snapshots_round_trips_and_validates():
    src = ({"task": "Partition 0", "snapshot": "blobs/a", "files": [{"path": "000001.sst", "size": 3,
                                                                      "checksum": 1, "blobs": [["b", 0]]}]},)
    spec = BuildSpec("snapshots", layout="partitioned", partitions_out=3, snapshots=src, source_store="file:///x")
    spec.validate()
    again = BuildSpec.from_json(spec.to_json())
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert spec.stores() == [0, 1, 2]
    for kw in (dict(snapshots=()), dict(source_store=None), dict(partitions_out=None), dict(partitioner="x")):
        d = {**dict(layout="partitioned", partitions_out=3, snapshots=src, source_store="file:///x"), **kw}
        with pytest.raises(UsageError):
            BuildSpec("snapshots", **d).validate()


def _source(tmp_path: Path, payloads: dict[str, bytes]):
    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    files = []
    for name, data in payloads.items():
        half = len(data) // 2
        ids = [blobs.put(io.BytesIO(data[:half]), size=half, ttl_seconds=None),
               blobs.put(io.BytesIO(data[half:]), size=len(data) - half, ttl_seconds=None)]
        files.append({"path": name, "size": len(data), "checksum": zlib.crc32(data),
                      "blobs": [[ids[1], half], [ids[0], 0]]})  # out of order: fetched by offset
    return blobs, {"task": "Partition 3", "snapshot": "blobs/xx", "files": files}


def test_fetch_snapshot_checks_every_file(tmp_path: Path):
    payloads = {"000007.sst": b"x" * 1000 + b"y" * 999, "sub/MANIFEST-000001": b"manifest", "CURRENT": b""}
    blobs, source = _source(tmp_path, payloads)
    into = tmp_path / "into"
    assert fetch_snapshot(blobs, source, into) == sum(len(v) for v in payloads.values())
    for name, data in payloads.items():
        assert (into / name).read_bytes() == data
    # one flipped byte, same size: the CRC32 names the file and the snapshot
    bad = json.loads(json.dumps(source))
    bad["files"][0]["checksum"] ^= 1
    with pytest.raises(BuildError, match=r"snapshot blobs/xx of Partition 3 is damaged: 000007.sst"):
        fetch_snapshot(blobs, bad, tmp_path / "into2")
    gone = json.loads(json.dumps(source))
    blobs.delete([gone["files"][1]["blobs"][0][0]])
    with pytest.raises(BuildError, match="sub/MANIFEST-000001"):
        fetch_snapshot(blobs, gone, tmp_path / "into3")
    escape = json.loads(json.dumps(source))
    escape["files"][0]["path"] = "../evil"
    with pytest.raises(BuildError, match="escapes"):
        fetch_snapshot(blobs, escape, tmp_path / "into4")
    blobs.close()


def _store(path: Path, entries: dict[bytes, bytes]) -> Digest:
    import rocksdict

    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
    for k, v in entries.items():
        db[k] = v
    db.close()
    d = Digest()
    d.add_sorted(sorted(entries.items()))
    return d


def _manifest(source: Digest | None, targets: list[Digest]):
    return SimpleNamespace(source_digest=source, store=lambda k: SimpleNamespace(digest=targets[k]))


def _result() -> RescaleResult:
    return RescaleResult("s", "j", "j", 2, 2, 0, "murmur2", [], [])


def test_verify_adds_up_the_jobs_digests_and_counts_each_staged_stores_entries(tmp_path: Path):
    keys = {b"k%04d" % i: b"v%d" % i for i in range(300)}
    o = opts(to_tasks=2)
    parts = [{k: v for k, v in keys.items() if partition_of(k, 2) == j} for j in range(2)]
    src = Digest()
    src.add_sorted(sorted(keys.items()))
    good = [_store(tmp_path / f"good{j}", parts[j]) for j in range(2)]
    stores = [tmp_path / "good0", tmp_path / "good1"]
    r = _result()
    verify_targets(o, stores, _manifest(src, good), r)
    assert r.verified and r.keys == 300 and [t.keys for t in r.targets] == [len(parts[0]), len(parts[1])]
    assert r.content_hash == f"{src.checksum:016x}"

    # one value changed: same key count, another content hash
    changed = dict(parts[0])
    changed[next(iter(changed))] = b"other"
    d = Digest()
    d.add_sorted(sorted(changed.items()))
    with pytest.raises(VerificationError, match="content hash"):
        verify_targets(o, stores, _manifest(src, [d, good[1]]), _result())

    # a key lost by the job: its targets' digests say 299 keys
    lost = dict(parts[1])
    lost.pop(next(iter(lost)))
    d = Digest()
    d.add_sorted(sorted(lost.items()))
    _store(tmp_path / "lost1", lost)
    with pytest.raises(VerificationError, match="299 keys, the sources 300"):
        verify_targets(o, [stores[0], tmp_path / "lost1"], _manifest(src, [good[0], d]), _result())

    # a staged store that does not hold what the job wrote for it (the stores swapped)
    with pytest.raises(VerificationError, match=f"target Partition 0 holds {len(parts[1])} keys, the Spark job "
                                                f"wrote {len(parts[0])}"):
        verify_targets(o, stores[::-1], _manifest(src, good), _result())
    with pytest.raises(VerificationError, match="did not report the digest"):
        verify_targets(o, stores, _manifest(None, good), _result())


def test_route_batch_is_kafkas_partitioner_vectorised_or_the_jobs_called_per_key():
    import numpy as np

    from statectl.spark.rescale_reader import Routes, route_batch

    keys = [b"", b"a", b"hello", b"\xff" * 7, b"user-00042"] + [b"k%d" % i for i in range(500)]
    got = route_batch(None, keys, 7, "x").tolist()
    assert got == [partition_of(k, 7) for k in keys] == route_batch("murmur2", keys, 7, "x").tolist()
    per_key = route_batch("statectl.formats.adstore:partition_of", keys, 7, "x")
    assert per_key.tolist() == got
    # one hash of the batch serves every count of tasks, and the checks' second look
    routes = Routes(keys, np.array([len(k) for k in keys]))
    for n in (1, 2, 7, 8):
        assert routes.tasks(None, n, "x").tolist() == [partition_of(k, n) for k in keys]
    assert routes.again(None, 7, keys[3:9], np.arange(3, 9)).tolist() == got[3:9]
    with pytest.raises(BuildError, match=r"partitioner zlib:crc32 gave \d+ for a key of Partition 1: expected 0\.\.1"):
        route_batch("zlib:crc32", [b"a", b"b"], 2, "a key of Partition 1")


def test_the_readers_and_the_writers_refuse_a_key_outside_its_task_and_name_it():
    from statectl.spark.rescale_reader import check_placed, check_target

    keys = [b"user-%05d" % i for i in range(400)]
    mine = [k for k in keys if partition_of(k, 2) == 1]
    stray = next(k for k in keys if partition_of(k, 2) == 0)
    spec = BuildSpec("snapshots", layout="partitioned", partitions_out=3, partitions_in=2,
                     snapshots=({"task": "Partition 1"},), source_store="file:///x")
    source = {"task": "Partition 1", "snapshot": "blobs/s1"}
    check_placed(spec, mine, 1, source)
    with pytest.raises(BuildError, match=rf"not a 2-way layout by murmur2: key {stray!r} of Partition 1 \(snapshot "
                                         r"blobs/s1\) belongs to task 0 of 2, not 1"):
        check_placed(spec, mine[:9] + [stray] + mine[9:], 1, source)

    target = [k for k in keys if partition_of(k, 3) == 2]
    check_target(spec, target, 2)
    others = [k for k in keys if partition_of(k, 3) != 2][:2]
    with pytest.raises(BuildError, match=rf"verification failed.*: 2 keys of target 2 belong to another task "
                                         rf"\(e\.g\. {others[0]!r} of task {partition_of(others[0], 3)}\)"):
        check_target(spec, target[:5] + others + target[5:], 2)


def _split(tmp_path: Path, source: dict, **spec) -> tuple[dict, dict[int, dict[bytes, bytes]]]:
    """SplitSources run on ``source`` alone, outside Spark: its record and, per target, the entries of the
    file it wrote (its keys ascending, its Digest as recorded)."""
    from statectl.rocks.sst import scan_digest
    from statectl.spark.context import BuildJob
    from statectl.spark.rescale_reader import SplitSources

    out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
    out.mkdir()
    s = BuildSpec("snapshots", layout="partitioned", snapshots=(source,), source_store=f"file://{tmp_path / 'blobs'}",
                  **spec)
    job = BuildJob({"spec": s.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(out)})
    [record] = [json.loads(r) for r in SplitSources(job)([(0, json.dumps(source))])]
    got: dict[int, dict[bytes, bytes]] = {}
    for t in record["targets"]:
        got[t["store"]] = entries = {}
        for seq, f in enumerate(t["files"]):  # rolled over in key order
            assert f["file"] == f"store-{t['store']}-0000-{seq:04d}.sst"
            held = _sst_entries(out / f["file"])
            assert scan_digest(out / f"{f['file']}.db") == Digest.from_json(f["digest"])
            assert not entries or max(entries) < min(held)
            entries.update(held)
        assert t["rows"] == len(entries) and t["duplicates"] == 0
    return record, got


def _sst_entries(path: Path) -> dict[bytes, bytes]:
    """The entries of the SST file at ``path``, ingested (a copy) into a store beside it."""
    import shutil

    from statectl.rocks.sst import ingest_into_new_store
    from statectl.rocks.store import open_readonly

    copy = path.with_name(path.name + ".copy")
    shutil.copyfile(path, copy)
    ingest_into_new_store(path.with_name(path.name + ".db"), [copy])
    db = open_readonly(path.with_name(path.name + ".db"))
    try:
        return dict(db.items())
    finally:
        db.close()


def test_each_source_is_read_once_into_a_file_per_target_its_keys_checked_and_digested(tmp_path: Path):
    """A real store with a key in two levels and a tombstone, backed up as files to a file:// blob store: the
    task writes exactly its live entries, each into its murmur2 target's file, and reports the Digest of all
    it read and of each file; a key-group source gives its own key groups only; a key outside the source's
    task is refused, and nothing is left in out_dir then."""
    import rocksdict

    path = tmp_path / "src"
    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
    want = {}
    for i in range(3000):
        db[b"k%05d" % i] = want[b"k%05d" % i] = b"v1-%d" % i
    db.flush()
    for i in range(0, 3000, 7):
        del db[b"k%05d" % i]
        want.pop(b"k%05d" % i)
    for i in range(0, 3000, 5):
        db[b"k%05d" % i] = want[b"k%05d" % i] = b"v2" * (i % 50)
    db.close()
    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    files = []
    for f in sorted(p for p in path.iterdir() if p.is_file() and p.name != "LOCK"):
        data = f.read_bytes()
        files.append({"path": f.name, "size": len(data), "checksum": zlib.crc32(data),
                      "blobs": [[blobs.put(io.BytesIO(data), size=len(data), ttl_seconds=None), 0]]})
    blobs.close()
    source = {"task": "Partition 0", "snapshot": "blobs/s0", "files": files}
    record, got = _split(tmp_path, source, partitions_out=3)
    assert sorted(got) == [0, 1, 2] and all(partition_of(k, 3) == t for t, e in got.items() for k in e)
    assert {k: v for e in got.values() for k, v in e.items()} == want
    whole = Digest()
    whole.add_sorted(sorted(want.items()))
    assert Digest.from_json(record["digest"]) == whole and record["keys"] == len(want)
    assert record["bytes_read"] == sum(f["size"] for f in files) and record["task"] == "Partition 0"

    # the same store as a source of key groups 0x6b.. (b"k") only, by a key-group partitioner: none of
    # group 0x6a, all of 0x6b, none above
    record, got = _split(tmp_path, {**source, "groups": [0x6b, 0x6b]}, partitions_out=2, partitioner="keygroups:128")
    assert list(got) == [1] and got[1] == want
    record, got = _split(tmp_path, {**source, "groups": [0x6c, 0x7f]}, partitions_out=2, partitioner="keygroups:128")
    assert got == {} and record["keys"] == 0 and record["targets"] == []

    # the store as task 0 of 2 by murmur2: about half its keys are task 1's
    stray = next(k for k in sorted(want) if partition_of(k, 2) == 1)
    with pytest.raises(BuildError, match=rf"not a 2-way layout by murmur2: key {stray!r} of Partition 0"):
        _split(tmp_path, source, partitions_out=3, partitions_in=2)
    assert not list((tmp_path / "out-3").iterdir())

    # files rolled over every few KiB: each target's share of a batch is cut between files
    record, got = _split(tmp_path, source, partitions_out=3, max_file_bytes=4096)
    assert all(len(t["files"]) > 2 for t in record["targets"])
    assert {k: v for e in got.values() for k, v in e.items()} == want
    assert all(partition_of(k, 3) == t for t, e in got.items() for k in e)


def test_a_source_statectl_downloaded_is_read_without_opening_the_blob_store(tmp_path: Path):
    """A worker's first blob store client costs a third of a second of CPU: a task whose source statectl has
    downloaded (and marked ready) reads that copy and opens no blob store."""
    import rocksdict

    from statectl.spark.context import BuildJob
    from statectl.spark.rescale_reader import SplitSources

    class Counting(BuildJob):
        def __init__(self, doc: dict):
            super().__init__(doc)
            self.opened: list = []

        def blobstore(self, url=None):
            self.opened.append(url)
            return super().blobstore(url)

    ready = tmp_path / "prefetched"
    db = rocksdict.Rdict(str(ready / "0"), rocksdict.Options(raw_mode=True))
    want = {b"k%03d" % i: b"v%d" % i for i in range(100)}
    for k, v in want.items():
        db[k] = v
    db.close()
    (ready / "0.ready").touch()
    (tmp_path / "out").mkdir()
    source = {"task": "Partition 0", "snapshot": "blobs/s0", "files": [{"path": "CURRENT", "size": 1}]}
    spec = BuildSpec("snapshots", layout="partitioned", partitions_out=2, snapshots=(source,),
                     source_store=f"file://{tmp_path / 'blobs'}", prefetched=str(ready))
    job = Counting({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(tmp_path / "out")})
    [record] = [json.loads(r) for r in SplitSources(job)([(0, json.dumps(source))])]
    assert record["keys"] == len(want) and sum(t["rows"] for t in record["targets"]) == len(want)
    assert job.opened == []


COLLECTOR_SEEN: list[bool] = []


def collector_seen(key: bytes, partitions: int) -> int:
    """A partitioner that records whether the cyclic collector runs while it is called; key b"bad" has no task."""
    import gc

    COLLECTOR_SEEN.append(gc.isenabled())
    return partitions if key == b"bad" else key[-1] % partitions


def test_a_source_is_read_with_the_cyclic_collector_paused_and_resumed_after(tmp_path: Path):
    """The batches' tuples and lists hold no cycles: the collector's walks over them are skipped while a source
    is read, and it runs again once the task is done with it, whether the source was split or refused."""
    import gc

    import rocksdict

    from statectl.spark.context import BuildJob
    from statectl.spark.rescale_reader import SplitSources

    ready = tmp_path / "prefetched"
    db = rocksdict.Rdict(str(ready / "0"), rocksdict.Options(raw_mode=True))
    for i in range(100):
        db[b"k%03d" % i] = b"v"
    db.close()
    (ready / "0.ready").touch()
    (tmp_path / "out").mkdir()
    source = {"task": "Partition 0", "snapshot": "blobs/s0", "files": [{"path": "CURRENT", "size": 1}]}
    spec = BuildSpec("snapshots", layout="partitioned", partitions_out=2, snapshots=(source,),
                     source_store=f"file://{tmp_path / 'blobs'}", prefetched=str(ready),
                     partitioner=f"{__name__}:collector_seen")
    job = BuildJob({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(tmp_path / "out")})
    assert gc.isenabled()
    COLLECTOR_SEEN.clear()
    [record] = [json.loads(r) for r in SplitSources(job)([(0, json.dumps(source))])]
    assert record["keys"] == 100 and COLLECTOR_SEEN and not any(COLLECTOR_SEEN)
    assert gc.isenabled()
    db = rocksdict.Rdict(str(ready / "0"), rocksdict.Options(raw_mode=True))
    db[b"bad"] = b"v"
    db.close()
    with pytest.raises(BuildError, match="collector_seen gave 2"):
        list(SplitSources(job)([(0, json.dumps(source))]))
    assert gc.isenabled()


def test_the_targets_files_roll_over_at_a_share_of_a_target_within_16_to_256_mib():
    """A target's file of a source closes (and uploads) a few times in its task, not once at its end; a
    target holds about max(8, sources) files, however large the store."""
    def snaps(n: int, size: int) -> list[dict]:
        return [{"files": [{"size": size // 2}, {"size": size // 2}]} for _ in range(n)]

    assert file_bytes(snaps(4, 400 << 20), 2) == 125 << 20  # 800 MiB a target, 8 files of 100 MiB and a quarter
    assert file_bytes(snaps(16, 400 << 20), 2) == 250 << 20  # 16 sources: one file a source
    assert file_bytes(snaps(4, 55 << 20), 8) == 16 << 20
    assert file_bytes(snaps(4, 8 << 30), 2) == 256 << 20 and file_bytes([], 3) == 16 << 20


def test_work_dir_removes_what_killed_rescales_left_but_not_a_running_ones(tmp_path: Path):
    import fcntl
    import os

    from statectl.engine.rescale.build import WORK_LOCK, WORK_PREFIX, WorkDir

    dead = tmp_path / f"{WORK_PREFIX}dead"
    (dead / "build").mkdir(parents=True)
    (dead / WORK_LOCK).touch()
    running = tmp_path / f"{WORK_PREFIX}running"
    running.mkdir()
    fd = os.open(running / WORK_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    mine = tmp_path / f"{WORK_PREFIX}mine-not-a-rescale"  # no lock file: not provably a rescale's
    mine.mkdir()
    try:
        with WorkDir(tmp_path) as work:
            assert work.is_dir() and work.name.startswith(WORK_PREFIX)
            assert not dead.exists() and running.is_dir() and mine.is_dir()
        assert not work.exists()
    finally:
        os.close(fd)


def _targets(tmp_path: Path, m: int) -> tuple[list[Path], dict[bytes, bytes]]:
    keys = {b"k%04d" % i: b"v%d" % i for i in range(200)}
    paths = []
    for j in range(m):
        paths.append(tmp_path / "stores" / f"Partition_{j}")
        _store(paths[-1], {k: v for k, v in keys.items() if partition_of(k, m) == j})
    return paths, keys


def _upload(tmp_path: Path, spec: str = "rescale-commit=off"):
    """upload_targets of two small target stores into job "dst" with failpoints ``spec``: (the result,
    the error raised or None, the latest record of each target afterwards)."""
    from statectl import failpoints
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.catalog.refs import StoreRef
    from statectl.engine.rescale.result import SourceInfo, TargetInfo
    from statectl.engine.rescale.upload import upload_targets
    from statectl.engine.rescale.rerun import Recorder
    from statectl.errors import StatectlError
    from statectl.progress import NullProgress

    paths, _ = _targets(tmp_path, 2)
    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    catalog = BlobCheckpointStore(blobs)
    r = _result()
    r.sources = [SourceInfo(f"Partition {j}", f"blobs/00/src{j}", "1-1", 1, 1, 100) for j in range(2)]
    r.targets = [TargetInfo(f"Partition {j}", 0) for j in range(2)]
    error = None
    o = opts(to_tasks=2, to_job="dst")
    try:
        with failpoints.active(spec):
            upload_targets(o, "dst", paths, blobs, catalog, r, NullProgress(), Recorder(blobs, o, None))
    except StatectlError as e:
        error = e
    latest = [catalog.latest(StoreRef("dst", "1", f"Partition {j}", "s")) for j in range(2)]
    blobs.close()
    return r, error, latest


def test_upload_commits_every_target_or_says_which(tmp_path: Path):
    from statectl.errors import EXIT_PARTIAL

    r, error, latest = _upload(tmp_path / "ok")
    assert error is None and r.committed
    assert [x.index_blob_id for x in latest] == [t.snapshot_id for t in r.targets]
    # a failure once every target is uploaded, before the commit: nothing committed
    r, error, latest = _upload(tmp_path / "before", "rescale-before-commit=raise")
    assert error is not None and not r.committed and latest == [None, None]
    # the second target's commit fails after the first was committed: exit 3, naming the committed one
    r, error, latest = _upload(tmp_path / "partial", "rescale-commit=1*off->raise")
    assert error is not None and error.exit_code == EXIT_PARTIAL
    assert "committed 1 of 2 targets (Partition 0)" in str(error)
    assert latest[0] is not None and latest[1] is None


def test_a_cut_commit_is_recorded_and_the_same_rescale_run_again_commits_the_rest(tmp_path: Path):
    """The record written before the first commit (catalog.rescales) names the sources and each target's
    uploaded snapshot; run again, the rescale commits the target the cut commit left, from its upload, and
    then it is done. Another rescale into the same store is refused while the first one is cut."""
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.catalog.refs import StoreRef
    from statectl.catalog.rescales import COMMITTING, DONE, read_rescale
    from dataclasses import replace

    from statectl.engine.rescale.rerun import RecordedRescaleError, check_recorded, finish
    from statectl.progress import NullProgress

    r, error, latest = _upload(tmp_path, "rescale-commit=1*off->raise")
    assert error is not None and "run the same command again" in error.hint
    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    catalog = BlobCheckpointStore(blobs)
    rec, _ = read_rescale(blobs, "dst", "1", "s")
    assert rec.state == COMMITTING and [t.snapshot_id for t in rec.targets] == [t.snapshot_id for t in r.targets]
    assert [s.snapshot_id for s in rec.sources] == ["blobs/00/src0", "blobs/00/src1"]
    assert [t.before for t in rec.targets] == [None, None]
    o = opts(to_tasks=2, to_job="dst")
    with pytest.raises(RecordedRescaleError, match="cut in its commit"):  # another rescale into dst/s
        check_recorded(opts(to_tasks=3, to_job="dst"), blobs, catalog, ["blobs/00/src0", "blobs/00/src1"])
    with pytest.raises(RecordedRescaleError, match="source Partition 1 has snapshot blobs/00/other"):
        check_recorded(o, blobs, catalog, ["blobs/00/src0", "blobs/00/other"])
    found = check_recorded(o, blobs, catalog, ["blobs/00/src0", "blobs/00/src1"])
    assert found.record is not None and found.pending == [1]
    dry = _result()
    finish(replace(o, dry_run=True), found, blobs, catalog, dry, NullProgress())
    assert dry.rerun == "finished" and not dry.committed
    assert catalog.latest(StoreRef("dst", "1", "Partition 1", "s")) is None
    again = _result()
    finish(o, found, blobs, catalog, again, NullProgress())
    assert again.rerun == "finished" and again.committed
    ref = StoreRef("dst", "1", "Partition 1", "s")
    assert catalog.latest(ref).index_blob_id == r.targets[1].snapshot_id
    assert read_rescale(blobs, "dst", "1", "s")[0].state == DONE
    found = check_recorded(o, blobs, catalog, ["blobs/00/src0", "blobs/00/src1"])
    assert found.record is not None and found.pending == []
    done = _result()
    finish(o, found, blobs, catalog, done, NullProgress())
    assert done.rerun == "done" and done.targets[1].snapshot_id == r.targets[1].snapshot_id
    blobs.close()


def test_a_cut_rescale_whose_uploads_are_gone_is_refused_dry_run_too(tmp_path: Path):
    """gc reclaims uploads nothing committed: run again, the rescale cannot finish from them and says how to
    redo it; the dry run reads the same blobs and refuses the same."""
    from dataclasses import replace

    from statectl.catalog.index import read_index
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.engine.rescale.rerun import RecordedRescaleError, check_recorded, finish
    from statectl.progress import NullProgress

    r, _, _ = _upload(tmp_path, "rescale-commit=1*off->raise")
    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    catalog = BlobCheckpointStore(blobs)
    index = read_index(blobs, r.targets[1].snapshot_id)
    blobs.delete([next(b.blob_id for _, fi in index.dir_index.walk_present() for b in fi.blobs)])
    o = opts(to_tasks=2, to_job="dst")
    for dry_run in (True, False):
        found = check_recorded(o, blobs, catalog, ["blobs/00/src0", "blobs/00/src1"])
        with pytest.raises(RecordedRescaleError, match="for Partition 1 .* is no longer whole") as e:
            finish(replace(o, dry_run=dry_run), found, blobs, catalog, _result(), NullProgress())
        assert "--again and --snapshots FILE" in e.value.hint and "rescales/dst/1/s.json" in e.value.hint
    blobs.close()


def test_a_malformed_record_is_refused_unless_again_replaces_it(tmp_path: Path):
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.catalog.rescales import MalformedRescaleRecord, rescale_key
    from statectl.engine.rescale.rerun import check_recorded

    blobs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    catalog = BlobCheckpointStore(blobs)
    etag = blobs.put_at(rescale_key("j", "1", "s"), b'{"rescale": 1}')
    with pytest.raises(MalformedRescaleRecord, match="rescales/j/1/s.json .* is malformed"):
        check_recorded(opts(), blobs, catalog, ["a", "b"])
    found = check_recorded(opts(again=True), blobs, catalog, ["a", "b"])
    assert found.record is None and found.etag == etag  # the new record replaces it, conditionally
    blobs.close()
