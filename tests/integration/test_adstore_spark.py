"""adstore load --spark against the put path, whole statectl processes: real spark-submit (local[2]), real
Tansu, real rocksdict. Both paths must give the same store, key for key, with the same offsets."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import pytest

from statectl.formats.adstore import partition_of
from statectl.kafka.client import create_topic
from tests.tools.standby_helpers import ChangelogWriter, apply_records, cli, offsets_of, read_store

pytestmark = pytest.mark.timeout(600)
SPARK = ["--spark", "--master", "local[2]"]


def _stores(root: Path, store: str) -> dict[str, dict[bytes, bytes]]:
    return {p.name: read_store(p) for p in sorted((root / store).iterdir())
            if p.name.startswith("Partition_") and not p.name.endswith((".versions", ".adstore.lock"))}


@pytest.mark.soak  # 38 s; test_spark_build's topic builds cover the Spark path from a topic in make test
def test_topic_spark_path_equals_put_path(tansu, tmp_path: Path):
    """Puts, overwrites and tombstones in 3 partitions: partitioned and broadcast builds on Spark equal
    the put path's stores and offsets files; a re-run of the Spark load over a put-built store rebuilds
    it (and says so)."""
    topic = f"ads-spark-{uuid.uuid4().hex[:6]}"
    create_topic(tansu.bootstrap, topic, partitions=3)
    rng = random.Random(11)
    expected = {}
    keys = [b"k%03d" % i for i in range(150)]
    by_field: dict[bytes, bytes] = {}
    for p in range(3):
        w = ChangelogWriter(tansu.bootstrap, topic, p)
        recs = []
        for _ in range(400):
            k = rng.choice([k for k in keys if partition_of(k, 3) == p])  # a key lives in one partition
            recs.append((k, None if rng.random() < 0.2 else json.dumps({"id": k.decode(), "n": rng.random()}).encode()))
        w.send(recs)
        expected[p] = apply_records(w.records())
        for _, k, v in w.records():  # --key-field: a tombstone carries no value to find the key in: skipped
            if v is not None:
                by_field[k] = str(json.loads(v)["n"]).encode()
        w.close()
    state = tmp_path / "state"
    base = ["adstore", "load", "--kafka", tansu.bootstrap, "--topic", topic, "--state-dir", str(state), "-o", "json"]
    cli(tmp_path, *base, "--store", "put")
    r = json.loads(cli(tmp_path, *base, "--store", "spark", *SPARK).stdout)
    assert [s["case"] for s in r["stores"]] == ["created"] * 3
    put, spark = _stores(state, "put"), _stores(state, "spark")
    assert put == spark == {f"Partition_{p}": expected[p] for p in range(3)}
    for p in range(3):
        assert offsets_of(state / "spark" / f"Partition_{p}", "SIDE-INPUT-OFFSETS") == \
            offsets_of(state / "put" / f"Partition_{p}", "SIDE-INPUT-OFFSETS")
    assert not list((state / "spark").glob(".adstore-build-*")), "the build's files outlived the load"
    # Broadcast, through the blob store, with fields: the same as the put path's broadcast store.
    fields = ["--broadcast", "--key-field", "id", "--value-field", "n"]
    cli(tmp_path, *base, "--store", "bput", *fields)
    r = json.loads(cli(tmp_path, *base, "--store", "bspark", *fields, *SPARK, "--stage-through-blobstore",
                       "--blobstore", f"file://{tmp_path / 'blobs'}").stdout)
    assert read_store(state / "bspark" / "Partition_0") == read_store(state / "bput" / "Partition_0")
    assert read_store(state / "bput" / "Partition_0") == by_field
    assert not [p for p in (tmp_path / "blobs").rglob("*") if p.is_file() and "adstore-builds" in str(p)]
    # Over a store the put path made, a Spark load rebuilds it whole.
    r = json.loads(cli(tmp_path, *base, "--store", "put", *SPARK, "--partitions", "1").stdout)
    assert r["stores"][0]["case"] == "rebuilt" and "whole store" in r["stores"][0]["reason"]
    assert read_store(state / "put" / "Partition_1") == expected[1]


@pytest.mark.parametrize("partitioned", [False, pytest.param(True, marks=pytest.mark.soak)],
                         ids=["broadcast", "partitioned"])  # partitioned: make soak (a Spark start-up each)
def test_file_spark_path_equals_put_path(tmp_path: Path, partitioned: bool):
    """Parquet, broadcast and partitioned: the Spark path's versions hold the put path's entries and seal
    the same manifest figures (keys, key range, checksum)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(5)
    n = 3000
    rows = {"id": [f"u{rng.randrange(2500):05d}" for _ in range(n)],  # duplicates: the last row wins
            "name": [f"name {i}" for i in range(n)], "score": [rng.random() for _ in range(n)],
            "vip": [rng.random() < 0.1 for _ in range(n)]}
    data = tmp_path / "members"
    data.mkdir()
    pq.write_table(pa.table({k: v[:1500] for k, v in rows.items()}), data / "part-0.parquet")
    pq.write_table(pa.table({k: v[1500:] for k, v in rows.items()}), data / "part-1.parquet")
    expected = {}
    for i in range(n):
        expected[rows["id"][i].encode()] = json.dumps(
            {"name": rows["name"][i], "score": rows["score"][i], "vip": rows["vip"][i]},
            separators=(",", ":")).encode()
    state = tmp_path / "state"
    base = ["adstore", "load", "--from-file", str(data), "--key-field", "id", "--state-dir", str(state), "-o", "json"]
    if not partitioned:
        put = json.loads(cli(tmp_path, *base, "--store", "put").stdout)
        spark = json.loads(cli(tmp_path, *base, "--store", "spark", *SPARK).stdout)
        assert spark["built_with"] == "spark" and put["built_with"] == "put"
        for field in ("keys", "first_key", "last_key", "checksum"):
            assert put["stores"][0][field] == spark["stores"][0][field], field
        assert read_store(state / "spark" / "Partition_0") == read_store(state / "put" / "Partition_0") == expected
        return
    cli(tmp_path, *base, "--store", "pput", "--partition-count", "3")
    cli(tmp_path, *base, "--store", "pspark", "--partition-count", "3", *SPARK)
    got = _stores(state, "pspark")
    assert got == _stores(state, "pput")
    for k in range(3):
        assert got[f"Partition_{k}"] == {key: v for key, v in expected.items() if partition_of(key, 3) == k}


def test_spark_without_java_exits_13(tmp_path: Path):
    """No Java on PATH and no JAVA_HOME: exit 13 with the install hint, and nothing is built."""
    (tmp_path / "d.csv").write_text("id,v\n1,a\n")
    import subprocess

    from tests.tools.standby_helpers import STATECTL, clean_env

    env = dict(clean_env(tmp_path), PATH="/usr/local/sbin:/nonexistent")
    env.pop("JAVA_HOME", None)
    p = subprocess.run([STATECTL, "adstore", "load", "--from-file", str(tmp_path / "d.csv"), "--key-field", "id",
                        "--store", "s", "--state-dir", str(tmp_path / "state"), "--spark"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 13, p.stderr
    assert "Java" in p.stderr and "Hint:" in p.stderr, p.stderr
    assert not (tmp_path / "state" / "s" / "Partition_0").exists()


@pytest.mark.parametrize("case", [0, pytest.param(1, marks=pytest.mark.soak), 2, 3],
                         ids=["parquet", "booleans", "csv", "jsonl"])
def test_plain_columns_take_the_jvm_path_and_equal_the_put_path(tmp_path: Path, case: int):
    """Key and value one plain column each (strings, ints, booleans; CSV: strings with empty fields; JSON
    lines: strings, with some numbers, objects and nulls that are made row by row; keys sharing a beginning,
    and a few sorting below or above it: the sort key of with_sort_key): the JVM path (cast or
    parse in Arrow, range-partition, sort in Spark; SST files written from Arrow batches) builds what the
    put path builds, duplicates resolved to the last row in file order, across several files. (Booleans
    partitioned in three: make soak, a Spark start-up each.)

    The Spark load runs in this process (the engine call of ``adstore load --spark``), so that the build's
    status (stages done of total, rows written) is seen reaching the load's reporter while it runs, its last
    figures those of the whole build, its line ending with the job."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statectl.engine.adstore.common import SparkOptions
    from statectl.engine.adstore.load import LoadOptions, load
    from tests.tools.progress_recorder import Recorder

    rng = random.Random(9)
    data = tmp_path / "plain"
    data.mkdir()
    for part in range(3):
        n = 2000
        pq.write_table(pa.table({
            "id": pa.array([rng.randrange(3000) for _ in range(n)], pa.int64()),
            "name": [None if rng.random() < 0.05 else f"n{part}-{i}-é" for i in range(n)],
            "ok": [rng.random() < 0.5 for _ in range(n)]}), data / f"part-{part}.parquet", row_group_size=500)
    csv = tmp_path / "rows.csv"
    csv.write_text("k,v\n" + "".join(f"{rng.randrange(500)},{'' if i % 17 == 0 else f'v{i}'}\n" for i in range(3000)))
    jsonl = tmp_path / "lines"
    jsonl.mkdir()
    for part in range(2):
        # keys that mostly share a beginning ("key-000"), and some below it (numbers, "key") and above it
        docs = [{"k": f"key-{rng.randrange(800):06d}-é" if i % 400 else rng.choice([rng.randrange(9), "key", "zz"]),
                 "v": f"v{part}-{i}" if i % 350 else rng.choice([None, {"a": [1, 2.5]}, 7])} for i in range(2500)]
        (jsonl / f"part-{part}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs) + "\n")
    state = tmp_path / "state"
    # (source, key column, value column, partition count, rows)
    source, key, value, partitions, rows = [(data, "id", "name", None, 6000), (data, "id", "ok", 3, 6000),
                                            (csv, "k", "v", 2, 3000), (jsonl, "k", "v", 2, 5000)][case]
    layout = ["--partition-count", str(partitions)] if partitions else []
    put = json.loads(cli(tmp_path, "adstore", "load", "--from-file", str(source), "--key-field", key, "--value-field",
                         value, *layout, "--state-dir", str(state), "-o", "json", "--store", "put").stdout)
    rec = Recorder()
    spark = load(LoadOptions("spark", state, from_file=source, key_field=key, value_field=value,
                             partition_count=partitions, spark=SparkOptions(master="local[2]")), progress=rec)
    assert any("from Arrow batches" in n for n in spark.notes), spark.notes
    assert [s.checksum for s in spark.stores] == [s["checksum"] for s in put["stores"]]
    assert _stores(state, "spark") == _stores(state, "put")
    shown = rec.statuses("Spark build of ")
    assert shown and shown[-1] == {}
    last = shown[-2]
    assert last["stages"] == last["stages_total"] > 0 and last["rows"] == spark.rows == put["rows"] == rows
    assert all(s["stages"] <= s["stages_total"] for s in shown[:-1])


def test_an_interrupted_ingest_is_re_run_from_the_same_build(tmp_path: Path):
    """Killed between the ingests of two stores (and once failing in the first): nothing becomes current,
    the build's files stay, and the same command re-run ingests them without running Spark again."""
    import subprocess

    from tests.tools.standby_helpers import STATECTL, clean_env

    rows = "".join(f"{i},v{i}\n" for i in range(2000))
    (tmp_path / "d.csv").write_text("k,v\n" + rows)
    state = tmp_path / "state"
    args = [STATECTL, "adstore", "load", "--from-file", str(tmp_path / "d.csv"), "--key-field", "k", "--value-field",
            "v", "--store", "s", "--state-dir", str(state), "--partition-count", "2", "-o", "json", *SPARK]
    for fp, code in (("adstore-ingest=1*off->kill", -9), ("adstore-ingest=raise", 1)):
        p = subprocess.run(args, env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS=fp), cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == code, p.stderr
        assert not (state / "s" / "Partition_0").exists() and not (state / "s" / "Partition_1").exists()
        assert len(list((state / "s").glob(".adstore-build-*/BUILD-MANIFEST.json"))) == 1
    r = json.loads(cli(tmp_path, *args[1:]).stdout)
    assert any("reusing the Spark build" in n for n in r["notes"]), r["notes"]
    assert "build_s" in r["phases"] and not list((state / "s").glob(".adstore-build-*"))
    expected = {str(i).encode(): f"v{i}".encode() for i in range(2000)}
    got = _stores(state, "s")
    assert got == {f"Partition_{k}": {key: v for key, v in expected.items() if partition_of(key, 2) == k}
                   for k in range(2)}
