"""The Parquet footers a files build reads on the driver (statectl.spark.footers), without a JVM: the Spark
schema given for the key and value columns (only where it is the one Spark's reader infers: the
integration tests read the files with it in a real Spark), and the row groups' key ranges that let a
sorted file be written without a shuffle."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.formats.adstore import KeyValueSpec
from statectl.spark.context import BuildJob
from statectl.spark.footers import read_footers
from statectl.spark.submit import BuildSpec


def _footers(tmp_path: Path, tables: list, fmt: str = "parquet", **kw):
    import pyarrow.parquet as pq

    files = []
    for i, t in enumerate(tables):
        files.append(tmp_path / f"part-{i}.parquet")
        pq.write_table(t, files[-1], **kw)
    spec = BuildSpec("files", KeyValueSpec(key_column="k", value_column="v"), path=str(tmp_path), fmt=fmt,
                     files=tuple(str(f) for f in files))
    return read_footers(BuildJob({"spec": spec.to_dict(), "spec_hash": "h", "build_id": "b",
                                  "out_dir": str(tmp_path)}))


def test_the_schema_is_the_one_spark_infers_for_plain_columns(tmp_path):
    import pyarrow as pa

    t = pa.table({"s": ["a"], "b": pa.array([b"x"]), "i8": pa.array([1], pa.int8()), "i16": pa.array([1], pa.int16()),
                  "i32": pa.array([1], pa.int32()), "i64": pa.array([1], pa.int64()), "bo": [True],
                  "dict": pa.array(["x"]).dictionary_encode(), "u32": pa.array([1], pa.uint32()),
                  "d": pa.array([1], pa.date32()), "f": [1.5], "l": [[1]], "st": [{"a": 1}], "a b`c": ["q"]})
    f = _footers(tmp_path, [t])
    assert f.spark_schema(["s", "b"]) == "`s` STRING, `b` BINARY"
    assert f.spark_schema(["i8", "i16", "i32", "i64", "bo", "dict"]) == \
        "`i8` TINYINT, `i16` SMALLINT, `i32` INT, `i64` BIGINT, `bo` BOOLEAN, `dict` STRING"
    assert f.spark_schema(["s", "s"]) == "`s` STRING"
    assert f.spark_schema(["a b`c"]) == "`a b``c` STRING"
    # Spark reads these otherwise (uint32 as bigint, dates, doubles), or they are not one plain column
    for other in ("u32", "d", "f", "l", "st", "missing", "S"):
        assert f.spark_schema(["s", other]) is None, other


def test_no_schema_when_files_disagree_or_a_name_differs_only_in_case(tmp_path):
    import pyarrow as pa

    f = _footers(tmp_path, [pa.table({"k": ["a"], "v": ["x"]}), pa.table({"k": [1], "v": ["y"]})])
    assert f.spark_schema(["k", "v"]) is None
    (tmp_path / "case").mkdir()
    f = _footers(tmp_path / "case", [pa.table({"k": ["a"], "K": ["b"], "v": ["x"]})])
    assert f.spark_schema(["k", "v"]) is None
    assert _footers(tmp_path, [pa.table({"k": ["a"]})], fmt="jsonl") is None


@pytest.mark.parametrize("keys,sorted_", [
    (["a1", "a2", "a3", "b1", "b2", "c"], True),
    (["a1", "a1", "a2", "a2", "b", "b"], True),       # a key's rows inside one row group
    (["a1", "a2", "a2", "a3", "b", "c"], False),      # a key in two row groups
    (["b", "a", "c", "d", "e", "f"], True),           # unsorted inside a group: Spark sorts it
    (["c", "d", "a", "b", "e", "f"], False),          # groups out of order
    (["é", "éa", "z", "zz", "\U0001f600", "\U0001f601"], False),  # "z" < "é" in UTF-8 bytes
    (["z", "zz", "é", "éa", "\U0001f600", "\U0001f601"], True),
])
def test_sorted_runs_are_the_row_groups_key_ranges_when_they_ascend(tmp_path, keys, sorted_):
    import pyarrow as pa

    f = _footers(tmp_path, [pa.table({"k": keys, "v": ["x"] * len(keys)})], row_group_size=2)
    runs = f.sorted_runs("k")
    if sorted_:
        groups = [keys[i:i + 2] for i in range(0, len(keys), 2)]
        assert runs == [(min(g).encode(), max(g).encode()) for g in groups]
    else:
        assert runs is None


def test_no_sorted_runs_without_statistics_or_for_numbers(tmp_path):
    import pyarrow as pa

    assert _footers(tmp_path, [pa.table({"k": ["a", "b"], "v": ["x", "y"]})], row_group_size=1,
                    write_statistics=False).sorted_runs("k") is None
    (tmp_path / "n").mkdir()
    # 9 < 10 as numbers, not as the bytes b"9" and b"10" the store keys
    assert _footers(tmp_path / "n", [pa.table({"k": [9, 10], "v": ["x", "y"]})], row_group_size=1).sorted_runs("k") is None
    two = _footers(tmp_path, [pa.table({"k": ["a"], "v": ["x"]}), pa.table({"k": ["b"], "v": ["y"]})])
    assert two.sorted_runs("k") == [(b"a", b"a"), (b"b", b"b")]
