"""The build's sources on the executors: each row of a dataset or record of a topic becomes an entry
((store index, key, source order), value) with the spec's KeyValueSpec (the put path's own code). The Python
path: :func:`files_rdd` (rows of Spark's readers, :class:`_FileRows`) and :func:`topic_rdd` (offset ranges read
with kafka-python in the executors, one task per partition: no Kafka connector jar is needed). The JVM
path's Arrow batches: :class:`WithStore` (the store of each key) and :class:`JsonRows` (JSON lines parsed per
batch)."""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator

from statectl.formats.adstore import AdRecord, ExtractError, KeyValueSpec, jsonl_row, partition_of, partitions_of
from statectl.spark.context import BuildError, BuildJob, local_path, one_line, row_at


_FILE_COL = "__statectl_file__"
_BLOCK_COL = "__statectl_block__"


class _ReadRanges:
    """A task's offset ranges of the topic -> keyed entries; the order is (partition, offset)."""

    def __init__(self, job: BuildJob):
        self.job = job

    def __call__(self, ranges: Iterable[tuple[int, int, int]]) -> Iterator[tuple[tuple[int, bytes, tuple], Any]]:
        from statectl.errors import StatectlError
        from statectl.kafka.client import PartitionReader, open_consumer

        spec, job = self.job.spec, self.job
        topic, bootstrap = spec.topic, spec.bootstrap
        assert topic and bootstrap
        try:
            extract = spec.kv.record_extractor()
        except (ExtractError, ImportError) as e:
            raise BuildError(f"{spec.kv.describe()}: {e}") from None
        partitioned = spec.layout == "partitioned"
        for p, start, end in ranges:
            store = job.store_index[p] if partitioned else 0
            try:
                consumer = open_consumer(bootstrap, security=job.security())
            except StatectlError as e:
                raise BuildError(f"topic {topic} partition {p}: {e}") from None
            try:
                reader = PartitionReader(consumer, topic, p, bootstrap)
                try:
                    reader.seek(start)
                    for batch in reader.batches(stop=end):
                        for r in batch:
                            record = AdRecord(topic, p, r.offset, r.timestamp, r.key, r.value)
                            try:
                                kv = extract(record)
                            except Exception as e:
                                raise BuildError(f"topic {topic} partition {p} offset {r.offset}: "
                                                 f"{one_line(e)}") from None
                            if kv is not None:
                                yield (store, kv[0], (p, r.offset)), kv[1]
                except StatectlError as e:
                    raise BuildError(f"topic {topic} partition {p}: {e}") from None
                if reader.position is None or reader.position < end:
                    raise BuildError(f"topic {topic} partition {p}: the read stopped at offset {reader.position}, "
                                     f"short of {end}")
            finally:
                consumer.close()


class _FileRows:
    """A task's rows of the dataset -> keyed entries; the order is (file's place in the dataset, the split's
    start, the row's place in the split): the put path's order of rows."""

    def __init__(self, job: BuildJob, columns: list[str]):
        self.job = job
        self.columns = columns
        files = job.spec.files or (job.spec.path,)
        self.file_index = {os.path.abspath(str(f)): i for i, f in enumerate(files)}

    def __call__(self, split: int, rows: Iterable[Any]) -> Iterator[tuple[tuple[int, bytes, tuple], Any]]:
        spec = self.job.spec
        kv: KeyValueSpec = spec.kv
        fmt = spec.fmt
        parts = spec.partitions_out if spec.layout == "partitioned" else None
        where: tuple[str, int] | None = None
        n = 0
        for row in rows:
            d = row.asDict(recursive=True)
            file_uri, block = d.pop(_FILE_COL), d.pop(_BLOCK_COL)
            if (file_uri, block) != where:
                where, n = (file_uri, block), 0
            n += 1
            path = local_path(file_uri)
            if fmt == "jsonl":
                try:
                    parsed = jsonl_row(d.get("value") or "")
                except ExtractError as e:
                    raise BuildError(f"{path} {row_at('line', block, n)}: {e}") from None
                if parsed is None:
                    continue
                d = parsed
            elif fmt == "csv":
                d = {k: (None if v == "" else v) for k, v in d.items()}
            try:
                key, value = kv.row_entry(d)
            except ExtractError as e:
                raise BuildError(f"{path} {row_at('row', block, n)}: {e}") from None
            store = partition_of(key, parts) if parts else 0
            order = (self.file_index.get(path, len(self.file_index)), path, block, n)
            yield (store, key, order), value


def files_rdd(spark: Any, job: BuildJob) -> Any:
    from pyspark.sql import functions as F

    spec = job.spec
    files = list(spec.files) or [str(spec.path)]
    df = read_dataset(spark, spec.fmt, files)
    columns = list(df.columns)
    df = df.select(*[F.col("`" + c.replace("`", "``") + "`") for c in columns],
                   F.col("_metadata.file_path").alias(_FILE_COL), F.col("_metadata.file_block_start").alias(_BLOCK_COL))
    return df.rdd.mapPartitionsWithIndex(_FileRows(job, columns))


def read_dataset(spark: Any, fmt: str, files: list[str], schema: str | None = None) -> Any:
    """The dataset's DataFrame; ``schema``: a Parquet dataset's columns as Spark would infer them (DDL), so
    that the reader runs no job to infer them (statectl.spark.footers)."""
    if fmt == "parquet":
        return (spark.read.schema(schema) if schema else spark.read).parquet(*files)
    if fmt == "jsonl":
        return spark.read.text(files)
    # Python's csv module (the put path): RFC 4180 quoting ("" inside quotes), newlines in quoted fields,
    # and a row with the wrong number of fields is an error, not a row padded with nulls.
    return (spark.read.option("header", True).option("mode", "FAILFAST").option("multiLine", True)
            .option("escape", '"').option("encoding", "UTF-8").csv(files))


def topic_rdd(sc: Any, job: BuildJob) -> Any:
    spec = job.spec
    assert spec.ranges is not None
    ranges = [(p, *spec.ranges[p]) for p in sorted(spec.partitions) if spec.ranges[p][1] > spec.ranges[p][0]]
    return sc.parallelize(ranges, max(1, len(ranges))).mapPartitions(_ReadRanges(job))


class WithStore:
    """Arrow batches of (k, v, fi, bs, id) -> the same with the store Kafka's partitioner gives each key
    (numpy over the key column: statectl.formats.adstore.partitions_of)."""

    def __init__(self, job: BuildJob):
        self.job = job

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        n = self.job.spec.partitions_out or 1
        column = self.job.spec.kv.key_column
        for b in batches:
            if b.column(0).null_count:
                raise BuildError(f"column {column!r} is null in a row")
            stores = pa.array(partitions_of(b.column(0), n), pa.int32())
            yield pa.RecordBatch.from_arrays([stores, *b.columns], ["store", *b.schema.names])


class JsonRows:
    """Arrow batches of JSON lines (line, file, fi, bs, id) -> (store, k, v, fi, bs, id): the key column
    and the value column of each row, as the put path makes them.

    A batch's lines are parsed at once by pyarrow's JSON reader with both columns typed as strings (no
    Python object per row); the reader refuses anything else (a number, an object, a null, a line that
    is not a JSON object, a repeated column...), and a batch it refuses, or where a column is missing or
    null, or whose row count is not its count of non-blank lines, is made row by row with jsonl_row and
    KeyValueSpec.row_entry instead: the same entries, or the put path's error naming the line."""

    def __init__(self, job: BuildJob):
        self.job = job

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        spec = self.job.spec
        parts = spec.partitions_out if spec.layout == "partitioned" else None
        where: tuple[Any, int] | None = None  # (file, block) of the last line seen and its line number there
        n = 0
        for b in batches:
            rows = b.num_rows
            if not rows:
                continue
            lines, files, blocks = b.column(0), b.column(1), b.column(3)
            blank = pc.equal(pc.utf8_length(pc.ascii_trim_whitespace(lines)), 0)
            keep = pc.invert(blank)
            got = self._parse(lines.filter(keep))
            if got is not None:
                keys, values = got
                others = b.filter(keep)
                fi, bs, ids = others.column(2), others.column(3), others.column(4)
                last = (files[rows - 1].as_py(), blocks[rows - 1].as_py())
                same = pc.and_(pc.equal(files, last[0]), pc.equal(blocks, last[1])).to_numpy(zero_copy_only=False)
                tail = rows if same.all() else int(rows - 1 - np.flatnonzero(~same)[-1])
                n = n + tail if tail == rows and where == last else tail
                where = last
            else:
                keys, values, kept, where, n = self._row_by_row(b, where, n)
                others = b.filter(pa.array(kept, pa.bool_()))
                fi, bs, ids = others.column(2), others.column(3), others.column(4)
            if parts:
                stores = pa.array(partitions_of(keys, parts), pa.int32())
            else:
                stores = pa.array(np.zeros(len(keys), np.int32))
            yield pa.RecordBatch.from_arrays([stores, keys, values, fi, bs, ids], ["store", "k", "v", "fi", "bs", "id"])

    def _parse(self, lines: Any) -> tuple[Any, Any] | None:
        """(keys, values) as binary arrays of the non-blank ``lines``, or None when pyarrow cannot give
        exactly what jsonl_row and row_entry give."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        kv = self.job.spec.kv
        if not len(lines):
            return pa.array([], pa.binary()), pa.array([], pa.binary())
        text = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()),
                                                       lines.cast(pa.string())), "\n")[0].as_buffer()
        names = list(dict.fromkeys([kv.key_column, kv.value_column]))
        block = min(max(1 << 20, text.size + 1), (1 << 31) - 1)
        schema = pa.schema([(c, pa.string()) for c in names])
        try:
            table = pj.read_json(pa.BufferReader(text),
                                 read_options=pj.ReadOptions(use_threads=False, block_size=block),
                                 parse_options=pj.ParseOptions(explicit_schema=schema,
                                                               unexpected_field_behavior="ignore"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowCapacityError):
            return None
        if table.num_rows != len(lines):
            return None
        keys, values = table.column(kv.key_column).combine_chunks(), table.column(kv.value_column).combine_chunks()
        if keys.null_count or values.null_count:
            return None
        return keys.cast(pa.binary()), values.cast(pa.binary())

    def _row_by_row(self, b: Any, where: tuple[Any, int] | None, n: int) -> tuple[Any, Any, list[bool], Any, int]:
        """A batch made as :class:`_FileRows` makes rows: (keys, values, which lines gave an entry, where,
        n); BuildError naming the line the put path names."""
        import pyarrow as pa

        kv = self.job.spec.kv
        keys: list[bytes] = []
        values: list[bytes] = []
        kept: list[bool] = []
        for line, file_uri, block in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), b.column(3).to_pylist()):
            if (file_uri, block) != where:
                where, n = (file_uri, block), 0
            n += 1
            try:
                parsed = jsonl_row(line or "")
            except ExtractError as e:
                raise BuildError(f"{local_path(file_uri)} {row_at('line', block, n)}: {e}") from None
            if parsed is None:
                kept.append(False)
                continue
            try:
                key, value = kv.row_entry(parsed)
            except ExtractError as e:
                raise BuildError(f"{local_path(file_uri)} {row_at('row', block, n)}: {e}") from None
            keys.append(key)
            values.append(value)
            kept.append(True)
        return pa.array(keys, pa.binary()), pa.array(values, pa.binary()), kept, where, n
