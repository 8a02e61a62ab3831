"""statectl.spark.job's layout helpers of the JVM path, without a JVM: Spark's hash of a bigint (the
slots rows are repartitioned on), the key bytes of the Parquet sample, and the sample itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.formats.adstore import KeyValueSpec
from statectl.spark.job import _hash_slots, _Job, _parquet_sample, _sample_bytes, _spark_hash_long
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


def _job(tmp_path: Path, files: list[Path], key: str = "id") -> _Job:
    spec = BuildSpec("files", KeyValueSpec(key_column=key, value_column="v"), layout="broadcast",
                     path=str(files[0].parent), fmt="parquet", files=tuple(str(f) for f in files))
    return _Job({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b", "out_dir": str(tmp_path)})


def test_the_parquet_sample_spreads_over_row_groups_and_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = []
    for part in range(2):
        f = tmp_path / f"part-{part}.parquet"
        ids = list(range(part * 1000, part * 1000 + 1000))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": ["x"] * 1000}), f, row_group_size=250)
        files.append(f)
    keys = _parquet_sample(_job(tmp_path, files), 40)
    assert keys is not None and 40 <= len(keys) <= 48
    values = sorted(int(k) for k in keys)
    assert values[0] < 250 and values[-1] >= 1750, "every row group of both files is sampled"
    # more row groups than it reads: at most _SAMPLE_ROW_GROUPS of them, spread from first to last
    many = tmp_path / "many.parquet"
    pq.write_table(pa.table({"id": list(range(10_000)), "v": ["x"] * 10_000}), many, row_group_size=100)
    keys = _parquet_sample(_job(tmp_path, [many]), 64)
    assert keys is not None and len({int(k) // 100 for k in keys}) == 64 and max(int(k) for k in keys) >= 9800


def test_no_sample_when_the_driver_cannot_read_a_file(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    assert _parquet_sample(_job(tmp_path, [tmp_path / "broken.parquet"]), 10) is None
    assert _parquet_sample(_job(tmp_path, [tmp_path / "missing.parquet"]), 10) is None
