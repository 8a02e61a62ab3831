"""The JVM path of a files build whose key and value are one column each: the entries as a DataFrame
(:func:`plain_frame`), laid out into stores x files partitions of key ranges in the JVM (:func:`lay_out`,
from the driver's sample: statectl.spark.sampler), its Arrow batches sized by rows (:func:`arrow_batches`).
statectl.spark.writer writes the sorted partitions."""

from __future__ import annotations

import bisect
import os
import re
from typing import Any

from statectl.formats.adstore import partition_of
from statectl.spark.context import BuildJob, local_path
from statectl.spark.sampler import SAMPLE_PER_TASK, csv_sample, jsonl_sample, parquet_sample
from statectl.spark.sources import JsonRows, WithStore, read_dataset


_ONE_TASK_ROWS = 250_000  # a sorted Parquet file of as few rows is written as it is read, in one task
_BYTES_PER_TASK = 128 << 20  # input bytes per write task, at most (Spark's own read split size)


# Spark types whose cast to a string gives the bytes statectl.formats.adstore.to_bytes gives their values.
_PLAIN_TYPES = {"string", "binary", "int", "bigint", "smallint", "tinyint", "boolean"}


def plain_frame(spark: Any, job: BuildJob, footers: Any = None) -> Any:
    """For a files build whose key and value are one column each, the entries as a DataFrame (store, k,
    v, fi, bs, id): the same bytes as the put path, the order (file's place, split start, row id) the put
    path's row order. The dataset's files are read in one read. Parquet and CSV: columns of a plain type
    (_PLAIN_TYPES), cast in the JVM. JSON lines: Spark's text reader, the lines parsed in Arrow batches
    by :class:`JsonRows`. None otherwise (the Python path then turns each row into an entry with
    KeyValueSpec.row_entry). ``footers`` (statectl.spark.footers): the Parquet files' own, giving the key and
    value columns' schema when they can (Spark's reader then runs no job to infer it)."""
    from pyspark.sql import functions as F

    spec, kv = job.spec, job.spec.kv
    if spec.source != "files" or spec.fmt not in ("parquet", "csv", "jsonl") or not kv.key_column \
            or not kv.value_column:
        return None
    files = list(spec.files) or [str(spec.path)]
    schema = footers.spark_schema([kv.key_column, kv.value_column]) if footers is not None else None
    df = read_dataset(spark, spec.fmt, files, schema)
    fi = _file_order(df, job)
    where = [fi.alias("fi"), F.col("_metadata.file_block_start").alias("bs"),
             F.monotonically_increasing_id().alias("id")]
    if spec.fmt == "jsonl":
        lines = df.select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("file"), *where)
        return lines.mapInArrow(JsonRows(job), "store int, k binary, v binary, fi int, bs bigint, id bigint")
    types = dict(df.dtypes)
    if types.get(kv.key_column) not in _PLAIN_TYPES or types.get(kv.value_column) not in _PLAIN_TYPES:
        return None
    out = df.select(_as_binary(df, kv.key_column).alias("k"),
                    F.coalesce(_as_binary(df, kv.value_column), F.lit(bytearray())).alias("v"), *where)
    if spec.layout == "partitioned":
        out = out.mapInArrow(WithStore(job), "store int, k binary, v binary, fi int, bs bigint, id bigint")
    else:
        out = out.select(F.lit(0).alias("store"), "*")
    return out


def _file_order(df: Any, job: BuildJob) -> Any:
    """A column: each row's file's place in the dataset's order of files (the put path's), from its
    ``_metadata.file_path`` (the URIs Spark lists in ``df.inputFiles()``); files not in spec.files (a
    dir's listing, when the spec names none) come after them in the order of their URIs, as in
    :class:`_FileRows`."""
    from pyspark.sql import functions as F

    files = list(job.spec.files) or [str(job.spec.path)]
    place = {os.path.abspath(str(f)): i for i, f in enumerate(files)}
    uris = sorted(set(df.inputFiles()))
    if len(uris) <= 1:  # one file: no look-up per row
        return F.lit(place.get(local_path(uris[0]), 0) if uris else 0)
    pairs: list[Any] = []
    others = len(place)
    for u in uris:
        i = place.get(local_path(u))
        if i is None:
            i, others = others, others + 1
        # inputFiles() says file:///a%20b where _metadata.file_path says file:/a%20b: the map has both
        for name in dict.fromkeys([u, re.sub("^file:///", "file:/", u)]):
            pairs += [F.lit(name), F.lit(i)]
    return F.coalesce(F.element_at(F.create_map(*pairs), F.col("_metadata.file_path")), F.lit(others))


def _files_per_store(sc: Any, job: BuildJob) -> int:
    """The write stage's tasks per store: the executors' cores (``spark.default.parallelism`` when set,
    else Spark's default: every core of local[N], the executors' cores of a cluster) and one task per
    _BYTES_PER_TASK of input, shared among the stores; at least ``files_per_store``."""
    spec = job.spec
    size = 0
    for f in list(spec.files) or [str(spec.path)]:
        try:
            size += os.path.getsize(local_path(f))
        except OSError:
            pass
    tasks = max(int(sc.defaultParallelism), -(-size // _BYTES_PER_TASK))
    return max(spec.files_per_store, -(-tasks // len(job.stores)))


def lay_out(spark: Any, job: BuildJob, plain: Any, footers: Any = None, presorted: bool = False) -> tuple[Any, str]:
    """``plain`` shuffled into stores x files_per_store partitions, partition p holding a range of (store,
    k) below partition p + 1's, all rows of a key in one partition. From Parquet the ranges come from a
    sample of the key column of a few row groups read on the driver (:func:`parquet_sample`), from JSON
    lines and CSV from a few chunks of the files (:func:`_line_sample`): no pass over the input before the
    one that shuffles it; each row's partition (its ``pid`` column, checked by the writers) is computed in
    the JVM from those bounds. Otherwise (files the driver cannot read) Spark's repartitionByRange samples
    the input itself (one more read of it). Returns (the frame, where the ranges came from:
    BuildManifest.ranges; unless that is "spark-sample", the frame has ``pid`` and the sort key ``sk`` of
    :func:`with_sort_key`, and each partition holds one store).

    With ``presorted``, a Parquet file (one: Spark's reader packs the splits of several files into
    partitions by size, not by key) whose row groups' statistics say it is sorted by key
    (Footers.sorted_runs) is not shuffled: each partition is a split Spark's reader makes, holding the rows
    of whole, consecutive row groups, so that the partitions' key ranges are disjoint (the caller checks the
    files it writes: statistics can be wrong). That takes a row group per core (a row group is one task's),
    or few rows (_ONE_TASK_ROWS: one task sorts them sooner than two shuffle them). Returns (it with ``sk``,
    "parquet-sorted") then."""
    from pyspark.sql import functions as F

    spec = job.spec
    as_read = _as_read(spark, job, plain, footers) if presorted else None
    if as_read is not None:
        return as_read, "parquet-sorted"
    stores = len(job.stores)
    per_store = _files_per_store(spark.sparkContext, job)
    parts = stores * per_store
    if spec.fmt == "parquet":
        keys = parquet_sample(job, SAMPLE_PER_TASK * parts, footers)
    else:
        sample = {"jsonl": jsonl_sample, "csv": csv_sample}.get(spec.fmt or "")
        keys = sample(job, SAMPLE_PER_TASK * parts) if sample else None
    if keys is None:
        return plain.repartitionByRange(parts, "store", "k"), "spark-sample"
    parts_of = partition_of if spec.layout == "partitioned" else None
    by_store: list[list[bytes]] = [[] for _ in range(stores)]
    for key in keys:
        by_store[parts_of(key, stores) if parts_of else 0].append(key)
    k = F.col("k")
    within = F.lit(0)
    prefixes: list[bytes] = []  # per partition: the bytes its sampled keys all begin with
    for s_idx, sample in enumerate(by_store):
        sample.sort()
        cuts = sorted({sample[len(sample) * i // per_store] for i in range(1, per_store)} if sample else set())
        if cuts:
            above = sum(((k >= F.lit(bytearray(c))).cast("int") for c in cuts), F.lit(0))
            within = F.when(F.col("store") == s_idx, above).otherwise(within)
        edges = [0, *(bisect.bisect_left(sample, c) for c in cuts), len(sample)]
        ranges = [os.path.commonprefix([sample[lo], sample[hi - 1]]) if hi > lo else b""
                  for lo, hi in zip(edges, edges[1:])]
        prefixes += ranges + [b""] * (per_store - len(ranges))
    pid = (F.col("store") * F.lit(per_store) + within).cast("int")
    laid_out = to_partitions(plain.withColumn("pid", pid), parts)
    if not any(prefixes):
        return laid_out.withColumn("sk", k), f"{spec.fmt}-sample"
    p = F.element_at(F.array(*[F.lit(bytearray(x)) for x in prefixes]), F.col("pid") + 1)
    return with_sort_key(laid_out, p), f"{spec.fmt}-sample"


def to_partitions(df: Any, parts: int) -> Any:
    """``df`` shuffled into ``parts`` partitions, each row into the one its ``pid`` column names (Spark's hash
    partitioning of a bigint that lands there: :func:`_hash_slots`)."""
    from pyspark.sql import functions as F

    slot = F.element_at(F.array(*[F.lit(x).cast("bigint") for x in _hash_slots(parts)]), F.col("pid") + 1)
    return df.repartition(parts, slot)


def _as_read(spark: Any, job: BuildJob, plain: Any, footers: Any) -> Any:
    """``plain`` with its sort key, laid out as Spark reads it, when :func:`lay_out` may (see there); else
    None."""
    from pyspark.sql import functions as F

    if footers is None or len(footers.files) != 1 or job.spec.files_per_store != 1:
        return None
    runs = footers.sorted_runs(job.spec.kv.key_column)
    if not runs or (len(runs) < spark.sparkContext.defaultParallelism
                    and footers.rows_and_bytes()[0] > _ONE_TASK_ROWS):
        return None
    return with_sort_key(plain, F.lit(bytearray(os.path.commonprefix([runs[0][0], runs[-1][1]]))))


def with_sort_key(df: Any, p: Any) -> Any:
    """``df`` with ``sk``: a binary that sorts as ``k`` does and tells keys apart in its first 8 bytes where
    ``k`` may not. Spark sorts by a column's first 8 bytes (its sort prefix) and compares whole rows only on
    ties, so keys that share a long beginning (``key-000000123456``) make it compare key pairs in full (the
    sort-and-write stage of 2 M shuffled such keys on local[2]: 7.6 s with k, 5.5 s with sk). ``p`` (a
    column: a row's partition's) is the bytes the keys mostly begin with, P; sk is 0x01 + the rest of k for
    a key that begins with P, 0x00 + k for a key below P, 0x02 + k for one above: the same order as k (a
    key that does not begin with P sorts wholly below or wholly above the keys that do), and equal only for
    equal keys. P need not be right for every key: the order is exact for any P."""
    from pyspark.sql import functions as F

    return df.withColumn("_p", p).withColumn("sk", F.expr(
        "CASE WHEN substring(k, 1, length(_p)) = _p THEN concat(X'01', substring(k, length(_p) + 1)) "
        "WHEN k < _p THEN concat(X'00', k) ELSE concat(X'02', k) END")).drop("_p")


_ARROW_BATCH_BYTES = 8 << 20  # the Arrow batches' average size that arrow_batches aims at
_ARROW_BYTES_CONF = "spark.sql.execution.arrow.maxBytesPerBatch"
_ARROW_ROWS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


def arrow_batches(spark: Any, job: BuildJob, footers: Any = None) -> None:
    """Size the JVM path's Arrow batches by rows, not bytes: Spark checks a batch's size in bytes after
    every row it adds (maxBytesPerBatch, 64 MiB by default), a quarter of the JVM's time in the
    sort-and-write stage (2 M rows of 16-byte keys and 100-byte values: 5.9 -> 4.4 s of CPU). With the
    check off (Int.MaxValue), a batch holds maxRecordsPerBatch rows: about _ARROW_BATCH_BYTES of the
    dataset's average row (from the Parquet footers, or the first MiB of a JSON-lines file), 64 to
    10 000 rows. Left as they are when the user set either (``--spark-conf``), for CSV, or when the
    files cannot be read here (``footers``: the Parquet files', read here when None)."""
    conf = spark.sparkContext.getConf()
    if conf.contains(_ARROW_BYTES_CONF) or conf.contains(_ARROW_ROWS_CONF):
        return
    spec = job.spec
    files = [local_path(f) for f in list(spec.files) or [str(spec.path)]]
    try:
        if spec.fmt == "parquet":
            from statectl.spark.footers import read_footers

            footers = footers or read_footers(job)
            if footers is None:
                return
            rows, size = footers.rows_and_bytes()
        elif spec.fmt == "jsonl":
            with open(files[0], "rb") as fh:
                head = fh.read(1 << 20)
            rows, size = head.count(b"\n"), len(head)
        else:
            return
    except (OSError, ValueError, ImportError):
        return
    if not rows:
        return
    per_batch = max(64, min(10_000, _ARROW_BATCH_BYTES * rows // max(1, size)))
    spark.conf.set(_ARROW_ROWS_CONF, str(per_batch))
    spark.conf.set(_ARROW_BYTES_CONF, str(2**31 - 1))


def _hash_slots(n: int) -> list[int]:
    """For each partition p < n, a bigint that Spark's hash partitioning into n partitions sends to p
    (HashPartitioning: pmod(Murmur3Hash(x), n), which for one bigint is Murmur3_x86_32.hashLong(x, 42)):
    then ``repartition(n, slot)`` puts each row where its pid says. The writers check every row's pid."""
    slots: dict[int, int] = {}
    x = 0
    while len(slots) < n:
        slots.setdefault(_spark_hash_long(x) % n, x)
        x += 1
    return [slots[p] for p in range(n)]


def _spark_hash_long(x: int) -> int:
    """Spark's Murmur3_x86_32.hashLong(x, 42), a signed 32-bit int."""
    m32 = 0xFFFFFFFF

    def rotl(v: int, r: int) -> int:
        return ((v << r) | (v >> (32 - r))) & m32

    def mix(h1: int, k1: int) -> int:
        k1 = rotl((k1 * 0xCC9E2D51) & m32, 15) * 0x1B873593 & m32
        return (rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & m32

    h = mix(mix(42, x & m32), (x >> 32) & m32) ^ 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m32
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def _as_binary(df: Any, column: str) -> Any:
    from pyspark.sql import functions as F

    c = F.col("`" + column.replace("`", "``") + "`")
    kind = dict(df.dtypes)[column]
    return c if kind == "binary" else c.cast("string").cast("binary")
