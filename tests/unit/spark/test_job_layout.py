"""The layout helpers of the JVM path (statectl.spark.frames, statectl.spark.sampler), without a JVM: Spark's
hash of a bigint (the slots rows are repartitioned on), the key bytes of the Parquet sample, and the sample
itself; JSON lines made into entries per Arrow batch (:class:`JsonRows`) and their sample."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statectl.formats.adstore import KeyValueSpec, jsonl_row, partition_of
from statectl.spark.context import BuildError, BuildJob
from statectl.spark.frames import _hash_slots, _spark_hash_long
from statectl.spark.sampler import _sample_bytes, jsonl_sample, parquet_sample
from statectl.spark.sources import JsonRows
from statectl.spark.submit import BuildSpec

# hash(id) of spark.range(0, 6) as Spark 4 itself computed it (spark.range(0, 6).select(F.hash("id"))); the
# integration tests check every row's partition against the slot it was hashed on, with a real Spark.
SPARK_HASHES = {0: -1670924195, 1: -1712319331, 2: -797927272, 3: 519220707, 4: 1344313940, 5: 1607884268}


def test_the_hash_of_a_bigint_is_sparks():
    assert {x: _spark_hash_long(x) for x in SPARK_HASHES} == SPARK_HASHES


@pytest.mark.parametrize("n", [1, 2, 3, 9, 64])
def test_each_partition_gets_a_slot_that_hashes_to_it(n):
    slots = _hash_slots(n)
    assert len(slots) == n
    assert [_spark_hash_long(x) % n for x in slots] == list(range(n))


def test_sample_bytes_are_sparks_cast_to_string():
    assert [_sample_bytes(v) for v in (True, False, 0, -12, 2**40, "é", b"\x00\xff")] == \
        [b"true", b"false", b"0", b"-12", b"1099511627776", "é".encode(), b"\x00\xff"]


def _job(tmp_path: Path, files: list[Path], key: str = "id") -> BuildJob:
    spec = BuildSpec("files", KeyValueSpec(key_column=key, value_column="v"), layout="broadcast",
                     path=str(files[0].parent), fmt="parquet", files=tuple(str(f) for f in files))
    return BuildJob({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(tmp_path)})


def test_the_parquet_sample_spreads_over_row_groups_and_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = []
    for part in range(2):
        f = tmp_path / f"part-{part}.parquet"
        ids = list(range(part * 1000, part * 1000 + 1000))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": ["x"] * 1000}), f, row_group_size=250)
        files.append(f)
    keys = parquet_sample(_job(tmp_path, files), 40)
    assert keys is not None and 40 <= len(keys) <= 48
    values = sorted(int(k) for k in keys)
    assert values[0] < 250 and values[-1] >= 1750, "every row group of both files is sampled"
    # more row groups than it reads: at most _SAMPLE_ROW_GROUPS of them, spread from first to last
    many = tmp_path / "many.parquet"
    pq.write_table(pa.table({"id": list(range(10_000)), "v": ["x"] * 10_000}), many, row_group_size=100)
    keys = parquet_sample(_job(tmp_path, [many]), 64)
    assert keys is not None and len({int(k) // 100 for k in keys}) == 64 and max(int(k) for k in keys) >= 9800


def test_no_sample_when_the_driver_cannot_read_a_file(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    assert parquet_sample(_job(tmp_path, [tmp_path / "broken.parquet"]), 10) is None
    assert parquet_sample(_job(tmp_path, [tmp_path / "missing.parquet"]), 10) is None


def _jsonl_job(tmp_path: Path, files: list[Path], partitions: int | None = None) -> BuildJob:
    spec = BuildSpec("files", KeyValueSpec(key_column="k", value_column="v"),
                     layout="partitioned" if partitions else "broadcast", partitions_out=partitions,
                     path=str(files[0].parent), fmt="jsonl", files=tuple(str(f) for f in files))
    return BuildJob({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(tmp_path)})


def _line_batches(lines: list[str], size: int, file: str = "file:/d/a.jsonl") -> list:
    import pyarrow as pa

    out = []
    for lo in range(0, len(lines), size):
        chunk = lines[lo:lo + size]
        out.append(pa.RecordBatch.from_arrays(
            [pa.array(chunk, pa.large_string()), pa.array([file] * len(chunk), pa.large_string()),
             pa.array([0] * len(chunk), pa.int32()), pa.array([0] * len(chunk), pa.int64()),
             pa.array(range(lo, lo + len(chunk)), pa.int64())], ["line", "file", "fi", "bs", "id"]))
    return out


def test_json_lines_per_arrow_batch_are_the_put_paths_entries(tmp_path, monkeypatch):
    """Batches of plain string lines are parsed by pyarrow (never row by row); the others (a number key, an
    object or null value, a blank-ish line) row by row; both give the entries row_entry gives, in order."""
    import json
    import random

    rng = random.Random(4)
    plain = [json.dumps({"k": f"k{i % 37}-é", "n": [i, {"x": None}], "v": f"v{i}"}, ensure_ascii=i % 2 == 0)
             for i in range(120)]
    mixed = [json.dumps({"k": rng.choice(["a", 7, "b"]), "v": rng.choice(["x", None, {"y": 1.5}, 3])})
             for _ in range(60)] + ["   ", "\x1c"]
    job = _jsonl_job(tmp_path, [tmp_path / "a.jsonl"], partitions=3)
    slow = JsonRows._row_by_row
    calls = []
    monkeypatch.setattr(JsonRows, "_row_by_row", lambda self, *a: calls.append(1) or slow(self, *a))
    out = list(JsonRows(job)(_line_batches(plain, 40) + _line_batches(mixed, 40)))
    assert len(calls) == 2, "only the two batches of mixed lines went row by row"
    got = [(s, k, v, i) for b in out for s, k, v, i in zip(*(b.column(c).to_pylist() for c in ("store", "k", "v", "id")))]
    want = []
    for i, line in enumerate(plain + mixed):
        row = jsonl_row(line)
        if row is None:
            continue
        k, v = job.spec.kv.row_entry(row)
        want.append((partition_of(k, 3), k, v, i if i < 120 else i - 120))
    assert got == want


def test_a_bad_json_line_is_named_by_its_line_number(tmp_path):
    job = _jsonl_job(tmp_path, [tmp_path / "a.jsonl"])
    lines = ['{"k": "a", "v": "1"}'] * 25 + ['{"k": "b", "v": "2"} {"k": "c", "v": "3"}']
    with pytest.raises(BuildError, match=r"^/d/a.jsonl line 26: not JSON"):
        list(JsonRows(job)(_line_batches(lines, 10)))
    with pytest.raises(BuildError, match=r"^/d/a.jsonl row 3: no column 'v'"):
        list(JsonRows(job)(_line_batches(['{"k": "a", "v": "1"}', "", '{"k": "b"}'], 10)))


def test_the_jsonl_sample_reads_chunks_spread_over_the_files(tmp_path):
    import json

    files = []
    for f in range(3):
        files.append(tmp_path / f"p{f}.jsonl")
        files[-1].write_text("".join(json.dumps({"k": f"f{f}-{i:06d}", "v": "x" * 50}) + "\n"
                                     for i in range(20_000)))
    keys = jsonl_sample(_jsonl_job(tmp_path, files), 600)
    assert 300 <= len(keys) <= 1200
    assert {k[:2] for k in keys} == {b"f0", b"f1", b"f2"}
    assert all(len(k) == 9 for k in keys), "whole keys only: lines cut by a chunk's edges are passed over"
    assert jsonl_sample(_jsonl_job(tmp_path, [tmp_path / "missing.jsonl"]), 10) is None


def test_the_job_writes_the_manifest_submit_reads(tmp_path):
    """One definition of BUILD-MANIFEST.json (submit.BuildManifest): what the job writes reads back whole."""
    import time

    from statectl.formats.adstore import Digest
    from statectl.spark.job import _finish
    from statectl.spark.submit import BuildManifest

    spec = BuildSpec("topic", KeyValueSpec(), layout="partitioned", bootstrap="b:9092", topic="t", partitions=(0, 1),
                     ranges={0: (0, 5), 1: (2, 2)})
    job = BuildJob({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b1", "out_dir": str(tmp_path)})
    d = Digest()
    d.add(b"a", b"1")
    tasks = [{"store": 1, "rows": 0, "duplicates": 0, "files": []},
             {"store": 0, "rows": 3, "duplicates": 2, "files": [
                 {"store": 0, "file": "store-0-0000-0001.sst", "bytes": 9, "rows": 1, "digest": d.as_json(), "key": None},
                 {"store": 0, "file": "store-0-0000-0000.sst", "bytes": 8, "rows": 2, "digest": d.as_json(), "key": None}]}]
    doc = _finish(job, tasks, time.monotonic(), "jvm", ranges="parquet-sample")
    m = BuildManifest.read(tmp_path)
    assert m.to_dict() == doc
    assert doc["offsets"] == {"0": 5, "1": 2} and doc["build_id"] == "b1" and doc["path"] == "jvm"
    assert [(s.store, s.rows, s.duplicates, s.files) for s in m.stores] == \
        [(0, 3, 2, ["store-0-0000-0000.sst", "store-0-0000-0001.sst"]), (1, 0, 0, [])]
    assert m.store(0).digest.keys == 2 and [f.name for f in m.files] == m.store(0).files


class _Conf:
    """The SparkConf and RuntimeConfig calls arrow_batches makes (the real ones: every JVM-path build of
    the integration tests goes through it)."""

    def __init__(self, given: dict[str, str]):
        self.given, self.set_ = given, {}

    def contains(self, key: str) -> bool:
        return key in self.given

    def getConf(self) -> "_Conf":  # noqa: N802 (SparkContext's name)
        return self

    def set(self, key: str, value: str) -> None:
        self.set_[key] = value


class _Spark:
    def __init__(self, given: dict[str, str]):
        self.sparkContext = self.conf = _Conf(given)


def test_arrow_batches_are_sized_by_rows_from_the_datasets_average_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statectl.spark.frames import arrow_batches

    small, big = tmp_path / "small.parquet", tmp_path / "big.parquet"
    pq.write_table(pa.table({"id": list(range(5000)), "v": ["x" * 20] * 5000}), small)
    pq.write_table(pa.table({"id": list(range(200)), "v": [os.urandom(100_000) for _ in range(200)]}), big,
                   compression="none")
    got = {}
    for f in (small, big):
        spark = _Spark({})
        arrow_batches(spark, _job(tmp_path, [f]))
        got[f.name] = spark.conf.set_
    assert got["small.parquet"] == {"spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
                                    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1)}
    assert 64 <= int(got["big.parquet"]["spark.sql.execution.arrow.maxRecordsPerBatch"]) <= 90, "~8 MiB of rows"
    lines = tmp_path / "rows.jsonl"
    lines.write_text("".join(json.dumps({"k": i, "v": "y" * 4000}) + "\n" for i in range(1000)))
    spark = _Spark({})
    arrow_batches(spark, _jsonl_job(tmp_path, [lines]))
    assert 2000 <= int(spark.conf.set_["spark.sql.execution.arrow.maxRecordsPerBatch"]) <= 2100
    for user in ("spark.sql.execution.arrow.maxBytesPerBatch", "spark.sql.execution.arrow.maxRecordsPerBatch"):
        spark = _Spark({user: "1000"})
        arrow_batches(spark, _job(tmp_path, [small]))
        assert spark.conf.set_ == {}, "the user's own setting stands"


def test_the_csv_sample_reads_keys_by_each_files_header(tmp_path):
    from statectl.spark.sampler import csv_sample

    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    a.write_bytes(b"k,v\r\n" + b"".join(b"a%05d,\"x,\"\"y\"\"\"\r\n" % i for i in range(20_000)))
    b.write_bytes(b"v,k,w\n" + b"".join(b"1,b%05d,%s\n" % (i, b'"two\nlines"' if i % 10 == 0 else b"w")
                                         for i in range(20_000)))
    c.write_bytes(b"other\n" + b"z\n" * 1000)  # no key column: passed over
    spec = BuildSpec("files", KeyValueSpec(key_column="k", value_column="v"), layout="broadcast",
                     path=str(tmp_path), fmt="csv", files=(str(a), str(b), str(c)))
    job = BuildJob({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(tmp_path)})
    keys = csv_sample(job, 100)
    assert keys is not None and len(keys) >= 100
    assert all(k[:1] in (b"a", b"b") and len(k) == 6 for k in keys), "keys only, never a header or a cut row"
    assert {k[:1] for k in keys} == {b"a", b"b"} and max(keys) > b"b15000", "spread over the files"
    missing = BuildSpec("files", spec.kv, layout="broadcast", path=str(tmp_path), fmt="csv",
                        files=(str(tmp_path / "gone.csv"),))
    assert csv_sample(BuildJob({"spec": missing.to_dict(), "spec_hash": "h", "build_id": "b",
                             "out_dir": str(tmp_path)}), 10) is None, "not readable here: Spark samples"
