"""The Spark bulk path of ``adstore load --spark`` with a real spark-submit in ``local[2]``: SST files built
from Parquet, CSV, JSON lines and a topic on Tansu, ingested with statectl.rocks.sst and compared key for key
with the store the put path's rules give (computed here in plain Python with KeyValueSpec and partition_of).

Each spark-submit starts a JVM: the file keeps to a handful of them (5), and one in-process session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from statectl.errors import EXIT_MISSING_DEPENDENCY, MissingDependencyError, StatectlError
from statectl.formats.adstore import Digest, KeyValueSpec, partition_of
from statectl.rocks.sst import ingest_into_new_store, scan_digest
from statectl.rocks.store import ROCKSDICT_CONFIG, open_readonly
from statectl.spark.probe import require_spark
from statectl.spark.submit import BUILD_MANIFEST, LOG_FILE, BuildManifest, BuildSpec, run_build

pytestmark = pytest.mark.timeout(300)

MASTER = "local[2]"


def expected_from_rows(rows, kv: KeyValueSpec, stores: int | None) -> dict[int | None, dict[bytes, bytes]]:
    """The put path's store(s): rows in order, the last row of a key wins, a None value deletes."""
    out: dict[int | None, dict[bytes, bytes | None]] = {}
    for row in rows:
        key, value = kv.row_entry(row)
        k = None if stores is None else partition_of(key, stores)
        out.setdefault(k, {})[key] = value
    return {k: {key: v for key, v in sorted(d.items()) if v is not None} for k, d in out.items()}


def store_items(path: Path) -> dict[bytes, bytes]:
    db = open_readonly(path)
    try:
        items = list(db.items())
    finally:
        db.close()
        (path / ROCKSDICT_CONFIG).unlink(missing_ok=True)
    assert [k for k, _ in items] == sorted(k for k, _ in items)
    return dict(items)


def digest_of(entries: dict[bytes, bytes]) -> Digest:
    d = Digest()
    for k, v in entries.items():
        d.add(k, v)
    return d


def ingest_and_compare(manifest: BuildManifest, expected: dict, tmp_path: Path) -> None:
    for s in manifest.stores:
        want = expected.get(s.store, {})
        target = tmp_path / f"store-{s.store}"
        ingest_into_new_store(target, manifest.paths(s.store))
        assert store_items(target) == want, f"store {s.store}"
        assert s.digest == digest_of(want), f"store {s.store}"
        assert scan_digest(target) == s.digest


# -- files ----------------------------------------------------------------------------------------------


def test_parquet_broadcast_in_several_files_and_a_rerun_skips_spark(tmp_path, monkeypatch, class_archive):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    data.mkdir()
    rows = [{"id": f"user-{i % 1500:05d}", "n": i, "score": i / 7, "name": None if i % 11 == 0 else f"n{i}",
             "tags": [f"t{i % 3}", "x"], "addr": {"city": f"c{i % 5}", "zip": i % 100}} for i in range(4000)]
    files = [data / "part-0.parquet", data / "part-1.parquet", data / "part-2.parquet"]
    for f, chunk in zip(files, (rows[:1000], rows[1000:2500], rows[2500:])):
        pq.write_table(pa.Table.from_pylist(chunk), f)
    (data / "_SUCCESS").write_text("")
    kv = KeyValueSpec(key_column="id")
    expected = expected_from_rows([r for f in files for r in pq.read_table(f).to_pylist()], kv, None)

    spec = BuildSpec("files", kv, layout="broadcast", files_per_store=3, max_file_bytes=40_000, path=str(data),
                     fmt="parquet", files=tuple(str(f) for f in files))
    out = tmp_path / "out"
    monkeypatch.setenv("XDG_CACHE_HOME", str(class_archive.cache))  # the driver maps the archive recorded there
    manifest = run_build(spec, out, master=MASTER)
    log = (out / LOG_FILE).read_text()
    (jsa,) = class_archive.cache.glob("statectl/spark/*.jsa")
    assert f"-XX:SharedArchiveFile={jsa}" in log and "[cds]" not in log, "mapped, without a warning"
    assert manifest.spark_ran
    (store,) = manifest.stores
    assert store.store is None and store.rows == 4000 and store.duplicates == 2500
    assert len(store.files) > 3, "files rolled over at max_file_bytes"
    firsts = [f.digest for f in manifest.files]
    assert all(a.last_key < b.first_key for a, b in zip(firsts, firsts[1:])), "disjoint, ascending key ranges"
    ingest_and_compare(manifest, expected, tmp_path)

    # An ingest interrupted after the build: the next run finds the complete build and skips Spark.
    again = run_build(spec, out, master=MASTER)
    assert not again.spark_ran and again.digests == manifest.digests and again.paths(None) == manifest.paths(None)
    # The next run builds again (it gets as far as the check for pyspark, here made to fail: no second JVM)
    # when a dataset file changed since...
    monkeypatch.setitem(sys.modules, "pyspark", None)
    st = files[1].stat()
    os.utime(files[1], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(MissingDependencyError):
        run_build(spec, out, master=MASTER)
    os.utime(files[1], ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not run_build(spec, out, master=MASTER).spark_ran
    # ...or when a file of the build is gone from out_dir.
    (out / store.files[0]).unlink()
    with pytest.raises(MissingDependencyError):
        run_build(spec, out, master=MASTER)


def test_plain_columns_in_small_arrow_batches_partitioned_and_rolled_over(class_archive, tmp_path):
    """The JVM path (a plain key and value column) with Arrow batches of 7 rows: a key's rows spread over
    several batches (the last row still wins), files rolled over at max_file_bytes, as many write tasks
    as spark.default.parallelism asks for; every store is the put path's, with its digest, in disjoint
    ascending files. (The build is class_archive's, which records the class archive as well.)"""
    manifest, expected = class_archive.manifest, class_archive.expected
    assert manifest.path == "jvm" and manifest.ranges == "parquet-sample"
    # spark.default.parallelism 9 over 3 stores: 3 write tasks per store (files_per_store asks for 2 only),
    # each with a range of the store's keys (from the sample of the Parquet key column).
    tasks = {(f.store, f.name.rsplit("-", 2)[1]) for f in manifest.files}
    assert sorted(tasks) == [(s, f"{p:04d}") for s in range(3) for p in range(3 * s, 3 * s + 3)]
    assert sum(s.rows for s in manifest.stores) == 3000
    assert sum(s.duplicates for s in manifest.stores) == 3000 - sum(len(e) for e in expected.values())
    for s in manifest.stores:
        digests = [f.digest for f in manifest.files if f.store == s.store]
        assert len(digests) > 2, "files rolled over at max_file_bytes"
        assert all(a.last_key < b.first_key for a, b in zip(digests, digests[1:])), "disjoint, ascending"
        assert sum(f.rows for f in manifest.files if f.store == s.store) == s.rows
    ingest_and_compare(manifest, expected, tmp_path)


def _patch_footer(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (as long) in the footer of a Parquet file: its statistics, not its rows."""
    data = path.read_bytes()
    start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    footer = data[start:]
    assert len(old) == len(new) and old in footer
    path.write_bytes(data[:start] + footer.replace(old, new))


def _sorted_rows() -> list[dict]:
    return [{"k": f"key-{i // 3:05d}", "v": None if i % 7 == 0 else f"v{i}"} for i in range(3000)]


def _two_splits(data: Path) -> dict[str, str]:
    return {"spark.sql.files.maxPartitionBytes": str(data.stat().st_size // 2 + 1),
            "spark.sql.files.openCostInBytes": "0"}


def _check_build(manifest: BuildManifest, rows: list[dict], kv: KeyValueSpec, stores: int | None, files: int,
                 tmp_path: Path) -> None:
    assert sum(s.rows for s in manifest.stores) == 3000 and sum(s.duplicates for s in manifest.stores) == 2000
    for s in manifest.stores:
        digests = [f.digest for f in manifest.files if f.store == s.store]
        assert len(digests) == files, s.store
        assert all(a.last_key < b.first_key for a, b in zip(digests, digests[1:])), "disjoint, ascending"
    tmp_path.mkdir()
    ingest_and_compare(manifest, expected_from_rows(rows, kv, stores), tmp_path)


def test_a_sorted_parquet_file_is_written_as_it_is_read(tmp_path):
    """One store from a Parquet file whose row groups' statistics say it is sorted by key: written as Spark
    reads it, in two splits, neither shuffled nor sorted (a key's 3 rows resolved to the last); the same
    file with each row group's rows reversed (the statistics the same) is met out of order by the writer,
    and written again sorted in each split. Both are the put path's store."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _sorted_rows()
    kv = KeyValueSpec(key_column="k", value_column="v")
    jumbled = [r for g in range(0, 3000, 999) for r in reversed(rows[g:g + 999])]
    for name, file_rows, attempt in (("sorted", rows, False), ("jumbled", jumbled, True)):
        data = tmp_path / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(file_rows), data, row_group_size=999)  # a key's rows in one group
        spec = BuildSpec("files", kv, path=str(data), fmt="parquet", files=(str(data),))
        manifest = run_build(spec, tmp_path / f"out-{name}", master=MASTER, conf=_two_splits(data))
        assert manifest.path == "jvm" and manifest.ranges == "parquet-sorted", name
        assert ("unsorted_attempt_s" in manifest.phases) == attempt, manifest.phases
        _check_build(manifest, file_rows, kv, None, 2, tmp_path / name)


def test_sorted_parquet_stores_without_a_shuffle_and_statistics_that_lie(tmp_path):
    """Partitioned stores from a sorted Parquet file: each split sorted by store and key, no shuffle.
    Statistics that lie (a row group claiming a range it does not hold) make the splits' files overlap:
    the build is done again with the shuffle, and is still the put path's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _sorted_rows()
    sorted_file = tmp_path / "sorted.parquet"
    pq.write_table(pa.Table.from_pylist(rows), sorted_file, row_group_size=999)
    evens = [r for r in rows if int(r["k"][4:]) % 2 == 0]
    odds = [r for r in rows if int(r["k"][4:]) % 2 == 1]
    lying = tmp_path / "lying.parquet"
    pq.write_table(pa.Table.from_pylist(evens + odds), lying, row_group_size=len(evens))
    # the first group (keys 00000..00998) claims 00000..00000, the second (00001..00999) 00001..00999
    _patch_footer(lying, b"key-00998", b"key-00000")
    kv = KeyValueSpec(key_column="k", value_column="v")
    # sorted: a file per split and store; lying: per store one range of the shuffle (2 cores, 2 stores)
    for name, data, file_rows, want_ranges, per_store in (("sorted", sorted_file, rows, "parquet-sorted", 2),
                                                          ("lying", lying, evens + odds, "parquet-sample", 1)):
        spec = BuildSpec("files", kv, layout="partitioned", partitions_out=2, path=str(data), fmt="parquet",
                         files=(str(data),))
        manifest = run_build(spec, tmp_path / f"out-{name}", master=MASTER, conf=_two_splits(data))
        assert manifest.path == "jvm" and manifest.ranges == want_ranges, name
        assert ("sorted_attempt_s" in manifest.phases) == (name == "lying"), manifest.phases
        _check_build(manifest, file_rows, kv, 2, per_store, tmp_path / name)
    assert not [p for p in (tmp_path / "out-lying").iterdir() if p.name.startswith("store-")
                and p.name not in {f.name for f in manifest.files}], "the overlapping files are removed"


def test_csv_partitioned_through_s3(tmp_path, s3_url, s3_options):
    from statectl.blobstore import open_blobstore

    data = tmp_path / "csv"
    data.mkdir()
    lines_a = ["id,city,note", "a1,Paris,", "b2,,\"said \"\"hi\"\"\"", "c3,Oslo,\"multi\nline\"", "a1,Rome,again"]
    lines_b = ["id,city,note"] + [f"k{i:03d},city{i % 7},{'' if i % 4 == 0 else f'note {i}'}" for i in range(300)]
    (data / "a.csv").write_text("\n".join(lines_a) + "\n")
    (data / "b.csv").write_text("\n".join(lines_b) + "\n")
    import csv

    rows = []
    for f in (data / "a.csv", data / "b.csv"):
        with open(f, newline="") as fh:
            r = csv.reader(fh)
            header = next(r)
            rows += [{k: (v if v != "" else None) for k, v in zip(header, vals)} for vals in r if vals]
    kv = KeyValueSpec(key_column="id")
    expected = expected_from_rows(rows, kv, 3)
    assert json.loads(expected[partition_of(b"a1", 3)][b"a1"]) == {"city": "Rome", "note": "again"}
    assert json.loads(expected[partition_of(b"b2", 3)][b"b2"]) == {"city": None, "note": 'said "hi"'}

    spec = BuildSpec("files", kv, layout="partitioned", partitions_out=3, path=str(data), fmt="csv",
                     staging=s3_url)
    out = tmp_path / "out"
    manifest = run_build(spec, out, master=MASTER, s3=s3_options)
    assert [s.store for s in manifest.stores] == [0, 1, 2]
    assert sum(s.rows for s in manifest.stores) == len(rows) and sum(s.duplicates for s in manifest.stores) == 1
    assert all(f.key and f.key.startswith("adstore-builds/") for f in manifest.files)
    ingest_and_compare(manifest, expected, tmp_path)
    store = open_blobstore(s3_url, s3=s3_options)
    try:
        assert list(store.list("adstore-builds/")) == [], "the staged files are deleted after the download"
    finally:
        store.close()


def test_jsonl_broadcast_the_last_row_of_a_key_wins(tmp_path):
    """Without the list of files: the dir's .jsonl files in name order (not the order they were written in),
    hidden and ``_`` names skipped, the last row of a key winning across the files; blank lines skipped."""
    data = tmp_path / "j"
    data.mkdir()
    docs = [{"k": f"key{i % 50}", "v": {"i": i, "s": "é"}} for i in range(200)]
    docs += [{"k": "key7", "v": None}, {"k": "gone-later", "v": 1}, {"k": "gone-later", "v": None}, {"k": 12, "v": "n"}]
    lines = [json.dumps(d) for d in docs]
    first, second = "\n".join(lines[:100]) + "\n\n  \n", "\n  \n".join(lines[100:]) + "\n"  # blank lines are skipped
    (data / "b.jsonl").write_text(second)  # written first: name order, not the files' age, decides
    (data / "a.jsonl").write_text(first)
    for skipped in ("_partial.jsonl", ".hidden.jsonl", "notes.txt"):
        (data / skipped).write_text(json.dumps({"k": "key7", "v": skipped}) + "\n")
    kv = KeyValueSpec(key_column="k", value_column="v")
    expected = expected_from_rows([json.loads(line) for line in (first + second).splitlines() if line.strip()], kv,
                                  None)
    # Rows only put: a null value column is stored as empty bytes (KeyValueSpec.row_entry).
    assert expected[None][b"key7"] == expected[None][b"gone-later"] == b"" and expected[None][b"12"] == b"n"

    spec = BuildSpec("files", kv, path=str(data), fmt="jsonl")
    manifest = run_build(spec, tmp_path / "out", master=MASTER)
    assert manifest.stores[0].rows == len(docs)
    ingest_and_compare(manifest, expected, tmp_path)


def test_jsonl_plain_columns_in_arrow_batches_partitioned_in_several_files(tmp_path):
    """JSON lines with a key column and a value column take the JVM path: one read of the files, lines
    parsed per Arrow batch by pyarrow, several write tasks per store from the driver's sample of the files.
    Batches pyarrow cannot take as strings (a number key, an object or null value, a blank-ish line, two
    objects on a line is an error) are made row by row: every store is still the put path's, key for key."""
    import random

    rng = random.Random(26)
    data = tmp_path / "j"
    data.mkdir()
    files, rows = [], []
    for part in range(3):
        lines = []
        for i in range(1500):
            k = f"k{rng.randrange(1200):05d}-é" if rng.random() < 0.9 else rng.randrange(50)
            v = f"v{part}-{i}" if rng.random() < 0.95 else rng.choice([None, {"a": [1, 2.5]}, 'q"\\u00e9'])
            if part == 1 and i < 500:  # batches that are all strings: the Arrow path proper
                k, v = f"s{rng.randrange(300):04d}", f"w{i}"
            lines.append(json.dumps({"x": i, "k": k, "v": v}, ensure_ascii=rng.random() < 0.5))
            if i % 97 == 0:
                lines.append("  ")
        files.append(data / f"part-{part}.jsonl")
        files[-1].write_text("\n".join(lines) + "\n")
        rows += [json.loads(line) for line in lines if line.strip()]
    kv = KeyValueSpec(key_column="k", value_column="v")
    spec = BuildSpec("files", kv, layout="partitioned", partitions_out=3, path=str(data), fmt="jsonl",
                     files=tuple(str(f) for f in reversed(files)))  # the put path's order: the last wins
    expected = expected_from_rows([json.loads(line) for f in reversed(files) for line in f.read_text().splitlines()
                                   if line.strip()], kv, 3)
    manifest = run_build(spec, tmp_path / "out", master=MASTER,
                         conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "50", "spark.default.parallelism": "6"})
    assert manifest.path == "jvm" and manifest.ranges == "jsonl-sample"
    tasks = {(f.store, f.name.rsplit("-", 2)[1]) for f in manifest.files}
    assert len(tasks) == 6, "two write tasks per store"
    assert sum(s.rows for s in manifest.stores) == len(rows)
    (tmp_path / "listed").mkdir()
    ingest_and_compare(manifest, expected, tmp_path / "listed")
    # (Without the list of files, the dir's files in name order: test_jsonl_broadcast_the_last_row_of_a_key_wins.)

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"k": "a", "v": "1"}\n{"k": "b", "v": "2"} {"k": "c", "v": "3"}\n')
    with pytest.raises(StatectlError, match=r"bad.jsonl line 2: not JSON"):
        run_build(BuildSpec("files", kv, path=str(bad), fmt="jsonl"), tmp_path / "out-bad", master=MASTER)


# -- a topic on Tansu -----------------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
    """(partition, key, value) in multi-record batches (Tansu then under-reports its high watermark)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=50, batch_size=1 << 20)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for p, k, v in records]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def test_topic_partitioned_with_tombstones(tmp_path, tansu):
    from statectl.kafka.client import create_topic

    topic = f"adstore-spark-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=3)
    records: list[tuple[int, bytes | None, bytes | None]] = []
    for i in range(900):
        p = i % 3
        key = b"k%03d" % (i % 120)
        value = None if i % 17 == 0 else b"v%d" % i
        records.append((p, key, value))
    records += [(0, None, b"no key: skipped"), (1, b"k001", b"last"), (2, b"k002", None)]
    produce(tansu.bootstrap, topic, records[:500])
    produce(tansu.bootstrap, topic, records[500:])

    expected: dict[int, dict[bytes, bytes | None]] = {0: {}, 1: {}, 2: {}}
    ends = {0: 0, 1: 0, 2: 0}
    for p, k, v in records:  # a replay, partition by partition
        ends[p] += 1
        if k is not None:
            expected[p][k] = v
    expected_stores = {p: {k: v for k, v in sorted(d.items()) if v is not None} for p, d in expected.items()}

    spec = BuildSpec("topic", KeyValueSpec(), layout="partitioned", bootstrap=tansu.bootstrap, topic=topic,
                     partitions=(0, 1, 2))
    manifest = run_build(spec, tmp_path / "out", master=MASTER)
    assert manifest.offsets == ends
    assert [s.store for s in manifest.stores] == [0, 1, 2]
    assert sum(s.rows for s in manifest.stores) == len(records) - 1
    ingest_and_compare(manifest, expected_stores, tmp_path)


def test_a_failing_extractor_fails_the_job_naming_the_record(tmp_path, tansu):
    from statectl.kafka.client import create_topic

    topic = f"adstore-spark-bad-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, topic, partitions=2)
    produce(tansu.bootstrap, topic, [(1, b"a", b'{"id": "a"}'), (1, b"b", b'{"id": "b"}'), (1, b"c", b"not json"),
                                     (0, b"d", b'{"id": "d"}')])
    spec = BuildSpec("topic", KeyValueSpec(key_field="id"), layout="broadcast", bootstrap=tansu.bootstrap,
                     topic=topic, partitions=(0, 1))
    out = tmp_path / "out"
    with pytest.raises(StatectlError) as err:
        run_build(spec, out, master=MASTER)
    assert str(err.value).startswith(f"the Spark build failed: topic {topic} partition 1 offset 2: "
                                     "the value is not JSON"), str(err.value)
    assert err.value.hint == f"see {out / LOG_FILE}"
    assert not (out / BUILD_MANIFEST).exists()
    assert not [p for p in out.iterdir() if p.suffix == ".sst"]


# -- no Spark here --------------------------------------------------------------------------------------


def test_missing_pyspark_is_exit_13_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark -> ImportError, find_spec -> None
    with pytest.raises(MissingDependencyError) as err:
        require_spark()
    assert err.value.exit_code == EXIT_MISSING_DEPENDENCY == 13
    assert "pyspark is not installed" in str(err.value) and "pip install 'statectl[spark]'" in err.value.hint
    (tmp_path / "d.jsonl").write_text('{"id": "a"}\n')
    spec = BuildSpec("files", KeyValueSpec(key_column="id"), path=str(tmp_path / "d.jsonl"), fmt="jsonl")
    with pytest.raises(MissingDependencyError):
        run_build(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_java_is_exit_13_with_the_jdk_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no bin/java in it
    with pytest.raises(MissingDependencyError) as err:
        require_spark()
    assert err.value.exit_code == 13 and "Java" in str(err.value) and "JDK 17" in err.value.hint


def _live_members(group: int) -> list[int]:
    """The processes of process group ``group`` that are not zombies (a member whose parent was killed is
    reparented, and a container's init may never reap it)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                out.append(int(pid))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_kills_the_spark_submit_process_group(tmp_path, sig):
    """statectl (here a Python process running run_build) gets SIGTERM while the JVM starts: the whole
    spark-submit process group goes with it. Killed outright (SIGKILL: nothing of statectl runs), spark-submit
    gets the parent-death signal and the group goes too, rather than building on with nobody to ingest."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a"}\n')
    out = tmp_path / "out"
    code = ("import sys; from pathlib import Path; from statectl.formats.adstore import KeyValueSpec;"
            "from statectl.spark.submit import BuildSpec, run_build;"
            f"run_build(BuildSpec('files', KeyValueSpec(key_column='id'), path={str(data)!r}, fmt='jsonl'),"
            f" Path({str(out)!r}), master='local[1]')")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    group = None
    deadline = time.monotonic() + 60
    while group is None and time.monotonic() < deadline and proc.poll() is None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(out / "BUILD-JOB.json").encode() in cmdline and b"java" in cmdline:
                group = os.getpgid(int(pid))
                break
        time.sleep(0.1)
    assert group is not None, "the JVM of spark-submit did not start"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0 and (sig == signal.SIGKILL or b"KeyboardInterrupt" in stderr)
    deadline = time.monotonic() + 60
    while _live_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _live_members(group), f"process group {group} outlived statectl"
    assert not (out / "BUILD-MANIFEST.json").exists()  # the job did not build on to its end


def test_the_sort_key_sorts_as_the_key_does():
    """with_sort_key's sk, in a real Spark: for any partition prefix P, keys that begin with P, keys below
    and above it, shorter than it, empty, or with 0x00/0xff bytes sort by sk exactly as by their bytes,
    and sk tells every two keys apart (so sorting by (sk, file order) keeps the last row of a key last)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from statectl.spark.frames import with_sort_key
    from statectl.spark.launch import ClassArchive

    archive = ClassArchive(require_spark(), {})  # the builds' archive, if one is there (recorded by a build)
    conf = archive.conf({}) if archive.recording is None else {}
    archive.discard()
    keys = [b"", b"\x00", b"a", b"member", b"member-", b"member-\x00", b"member-\x00\x00", b"member-0",
            b"member-00000001", b"member-00000001\x00", b"member-00000002", b"member-\xff", b"member.",
            b"membes", b"mz", b"\xff", b"\xff\xff"]
    prefixes = [b"member-0000000", b"member-", b"", b"\xff"]
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = (builder.config(*conf.popitem()) if conf else builder).getOrCreate()
    try:
        rows = [(bytearray(k), pid) for pid in range(len(prefixes)) for k in reversed(keys)]
        df = spark.createDataFrame(rows, "k binary, pid int").repartition(len(prefixes), "pid")
        p = F.element_at(F.array(*[F.lit(bytearray(x)) for x in prefixes]), F.col("pid") + 1)
        got = with_sort_key(df, p).sortWithinPartitions("sk").select("k", "sk", "pid").collect()
    finally:
        spark.stop()
    for pid, p in enumerate(prefixes):
        mine = [r for r in got if r.pid == pid]
        assert [bytes(r.k) for r in mine] == sorted(keys), p
        assert len({bytes(r.sk) for r in mine}) == len(keys), p


class Recorded(NamedTuple):
    cache: Path  # an XDG_CACHE_HOME
    manifest: BuildManifest
    expected: dict[int | None, dict[bytes, bytes]]


@pytest.fixture(scope="module")
def class_archive(tmp_path_factory) -> Recorded:
    """The driver JVM's class archive (launch.ClassArchive) as the first build on a machine records it, in a
    cache dir of its own. The build is test_plain_columns_in_small_arrow_batches_partitioned_and_rolled_over's
    (partitioned: the JVM loads the classes of the builds that shuffle as well, and records them). Where this
    machine has no archive yet (a new Java or pyspark install, as in CI; the test that asks for this runs
    first of its Spark chain), the one recorded here becomes it, so that no other build pays for a recording
    (about 30 s of CPU). Taken before the build, a claim other builds wait out."""
    import random
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from statectl.spark.launch import ClassArchive

    tmp = tmp_path_factory.mktemp("class-archive")
    machine = ClassArchive(require_spark(), {})
    rng = random.Random(21)
    data = tmp / "data"
    data.mkdir()
    files = []
    for part in range(2):
        n = 1500
        ids = sorted(rng.randrange(900) for _ in range(n))  # runs of one key, longer than a batch
        names = [None if rng.random() < 0.05 else f"n{part}-{i}" for i in range(n)]
        files.append(data / f"part-{part}.parquet")
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": names}), files[-1], row_group_size=400)
    kv = KeyValueSpec(key_column="id", value_column="name")
    spec = BuildSpec("files", kv, layout="partitioned", partitions_out=3, files_per_store=2, max_file_bytes=300,
                     path=str(data), fmt="parquet", files=tuple(str(f) for f in files))
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
            manifest = run_build(spec, tmp / "out", master=MASTER, conf={
                "spark.sql.execution.arrow.maxRecordsPerBatch": "7", "spark.default.parallelism": "9"})
        for jsa in (tmp / "cache").glob("statectl/spark/*.jsa"):
            if machine.recording is not None:
                shutil.copyfile(jsa, machine.recording)
                machine.keep()
    finally:
        machine.discard()
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    return Recorded(tmp / "cache", manifest, expected_from_rows(rows, kv, 3))


def test_the_class_archive_is_recorded_and_a_cut_one_is_dropped(class_archive, tmp_path, monkeypatch):
    """The driver JVM's class archive (launch.ClassArchive) with a real JVM: the first build records it
    (class_archive; the next maps it: test_parquet_broadcast_in_several_files_and_a_rerun_skips_spark),
    and a cut one kills the JVM with SIGBUS as it maps it: submit_job runs the job once more without it, and
    forgets it. (That second run is of a job file that is not there: the job's own error shows it ran, at the
    cost of a JVM start, not of a build; that the build then succeeds is
    tests/unit/spark/test_class_archive.py's, with a stand-in spark-submit.)"""
    from statectl.spark.launch import submit_job

    first = class_archive.manifest
    assert "-XX:ArchiveClassesAtExit=" in (first.out_dir / LOG_FILE).read_text()
    jsa, size = sorted(class_archive.cache.glob("statectl/spark/*"))
    assert (jsa.suffix, size.suffix) == (".jsa", ".size") and int(size.read_text()) == jsa.stat().st_size > 0

    # the first half, its .size saying as much: a cut archive that the size check lets through
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    mine = tmp_path / "cache" / "statectl" / "spark"
    mine.mkdir(parents=True)
    with open(jsa, "rb") as src:
        (mine / jsa.name).write_bytes(src.read(jsa.stat().st_size // 2))
    (mine / size.name).write_text(f"{jsa.stat().st_size // 2}\n")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(StatectlError) as failed:
        submit_job(require_spark(), tmp_path / "no-job.json", out / LOG_FILE, MASTER, {}, None, {})
    assert "No such file or directory" in str(failed.value) and "no-job.json" in str(failed.value), "the job ran"
    (crash,) = out.glob("hs_err_pid*.log")  # the first JVM's: the one that mapped the cut archive
    assert "SIGBUS" in crash.read_text(errors="replace")
    assert "SharedArchiveFile" not in (out / LOG_FILE).read_text(), "the second run maps none"
    assert list(mine.iterdir()) == [], "the cut archive is forgotten"
