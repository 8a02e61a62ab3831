"""The PySpark application of ``adstore load --spark``, run by spark-submit (statectl.spark.submit):
``spark-submit ... statectl/spark/job.py <out_dir>/BUILD-JOB.json``.

It reads the source (files with Spark's own readers; a topic by offset ranges, one task per partition, with
kafka-python inside the executors: no Kafka connector jar is needed), turns each row or record into an
entry with the spec's KeyValueSpec (the put path's own code), shuffles the entries to their store and file
(Kafka's partitioner for partitioned file builds; a topic's own partition), sorts each by key bytes (then
by source order: the last row or record of a key wins, a None value leaves the key out), and writes SST
files with statectl.rocks.sst in the executors: into out_dir, or through the blob store when ``staging``
names one. The driver writes ``BUILD-MANIFEST.json`` into out_dir last (tmp + rename).

A row, record or read that fails ends the job; its one-line error is printed after ERROR_MARK.

Everything the executors run lives at this module's top level, so that it pickles by reference (the
executors import statectl.spark.job) and not by value from ``__main__``.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import unquote, urlparse

from statectl.formats.adstore import (
    AdRecord,
    Digest,
    ExtractError,
    KeyValueSpec,
    jsonl_row,
    partition_of,
    partitions_of,
)
from statectl.fsutil import write_atomic
from statectl.spark.submit import (
    BUILD_MANIFEST,
    ERROR_MARK,
    SST_PREFIX,
    STAGING_PREFIX,
    BuildFile,
    BuildManifest,
    BuildSpec,
    StoreBuild,
)

_FILE_COL = "__statectl_file__"
_BLOCK_COL = "__statectl_block__"
_SAMPLES_PER_FILE = 64
_SAMPLE_PER_TASK = 200  # keys sampled per write task for its key range (the JVM path)
_SAMPLE_ROW_GROUPS = 64  # row groups read for that sample, at most
_SAMPLE_CHUNK = 256 << 10  # bytes of a JSON-lines or CSV file read per chunk of that sample
_BYTES_PER_TASK = 128 << 20  # input bytes per write task, at most (Spark's own read split size)


class BuildError(Exception):
    """A row, record or read the build cannot get past; the message names where it is."""


# -- the job's context, as the executors get it ---------------------------------------------------------


class _Job:
    """What every task needs: the spec, where files go, and how to reach Kafka and the blob store (without
    secrets: the executors take those from their environment)."""

    def __init__(self, doc: dict[str, Any]):
        self.spec = BuildSpec.from_dict(doc["spec"])
        self.spec_hash: str = doc["spec_hash"]
        self.build_id: str = doc["build_id"]
        self.out_dir = Path(doc["out_dir"])
        self.s3: dict[str, Any] | None = doc.get("s3")
        self.kafka_security: dict[str, Any] | None = doc.get("kafka_security")
        self.stores = self.spec.stores()
        self.store_index = {s: i for i, s in enumerate(self.stores)}

    def security(self) -> Any:
        if not self.kafka_security:
            return None
        from statectl.kafka.client import KafkaSecurity

        return KafkaSecurity(**self.kafka_security, sasl_password=os.environ.get("STATECTL_KAFKA_SASL_PASSWORD"),
                             ssl_password=os.environ.get("STATECTL_KAFKA_SSL_PASSWORD"))

    def blobstore(self, url: str | None = None) -> Any:
        """The staging blob store, or the one at ``url`` (a rescale's source snapshots)."""
        from statectl.blobstore import S3Options, open_blobstore

        url = url or self.spec.staging
        s3 = None
        if url.startswith("s3://"):
            s3 = S3Options(**(self.s3 or {}), access_key_id=os.environ.get("STATECTL_S3_ACCESS_KEY_ID"),
                           secret_access_key=os.environ.get("STATECTL_S3_SECRET_ACCESS_KEY"),
                           session_token=os.environ.get("STATECTL_S3_SESSION_TOKEN"))
        return open_blobstore(url, s3=s3)


# -- sources: (store index, key, source order) -> value ----------------------------------------------------


class _ReadRanges:
    """A task's offset ranges of the topic -> keyed entries; the order is (partition, offset)."""

    def __init__(self, job: _Job):
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
                                                 f"{_one_line(e)}") from None
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

    def __init__(self, job: _Job, columns: list[str]):
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
            path = _local_path(file_uri)
            if fmt == "jsonl":
                try:
                    parsed = jsonl_row(d.get("value") or "")
                except ExtractError as e:
                    raise BuildError(f"{path} {_row_at('line', block, n)}: {e}") from None
                if parsed is None:
                    continue
                d = parsed
            elif fmt == "csv":
                d = {k: (None if v == "" else v) for k, v in d.items()}
            try:
                key, value = kv.row_entry(d)
            except ExtractError as e:
                raise BuildError(f"{path} {_row_at('row', block, n)}: {e}") from None
            store = partition_of(key, parts) if parts else 0
            order = (self.file_index.get(path, len(self.file_index)), path, block, n)
            yield (store, key, order), value


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return os.path.abspath(unquote(parsed.path)) if parsed.scheme in ("", "file") else uri


def _row_at(what: str, block: int, n: int) -> str:
    # Rows are numbered from the start of the file only when the split starts there.
    return f"{what} {n}" if block == 0 else f"{what} {n} of the split at byte {block}"


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _files_rdd(spark: Any, job: _Job) -> Any:
    from pyspark.sql import functions as F

    spec = job.spec
    files = list(spec.files) or [str(spec.path)]
    df = _read(spark, spec.fmt, files)
    columns = list(df.columns)
    df = df.select(*[F.col("`" + c.replace("`", "``") + "`") for c in columns],
                   F.col("_metadata.file_path").alias(_FILE_COL), F.col("_metadata.file_block_start").alias(_BLOCK_COL))
    return df.rdd.mapPartitionsWithIndex(_FileRows(job, columns))


def _read(spark: Any, fmt: str, files: list[str]) -> Any:
    if fmt == "parquet":
        return spark.read.parquet(*files)
    if fmt == "jsonl":
        return spark.read.text(files)
    # Python's csv module (the put path): RFC 4180 quoting ("" inside quotes), newlines in quoted fields,
    # and a row with the wrong number of fields is an error, not a row padded with nulls.
    return (spark.read.option("header", True).option("mode", "FAILFAST").option("multiLine", True)
            .option("escape", '"').option("encoding", "UTF-8").csv(files))


def _topic_rdd(sc: Any, job: _Job) -> Any:
    spec = job.spec
    assert spec.ranges is not None
    ranges = [(p, *spec.ranges[p]) for p in sorted(spec.partitions) if spec.ranges[p][1] > spec.ranges[p][0]]
    return sc.parallelize(ranges, max(1, len(ranges))).mapPartitions(_ReadRanges(job))


# -- a rescale: the entries of source snapshots, re-routed by the partitioner ----------------------------


def load_partitioner(name: str | None) -> Any:
    """``module:callable`` -> the callable f(key: bytes, partitions: int) -> int; ``keygroups:G`` -> the task
    of the key's key-group prefix (statectl.formats.keygroups); None -> Kafka's default partitioner
    (toPositive(murmur2(key)) % partitions), as is ``murmur2``. BuildError when it cannot be imported."""
    if not name or name == "murmur2":
        return partition_of
    from statectl.formats.keygroups import parse_partitioner

    try:
        by_groups = parse_partitioner(name)
    except ValueError as e:
        raise BuildError(str(e)) from None
    if by_groups is not None:
        return by_groups
    import importlib

    module, _, attr = name.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise BuildError(f"partitioner {name}: {_one_line(e)}") from None
    if not callable(obj):
        raise BuildError(f"partitioner {name} is not callable")
    return obj


class _CrcWriter:
    """A file that CRC32s and counts the bytes written through it (the blob store's get writes into it)."""

    def __init__(self, fh: Any):
        import zlib

        self.fh, self.crc, self.size, self._crc32 = fh, 0, 0, zlib.crc32

    def write(self, data: Any) -> int:
        self.crc = self._crc32(data, self.crc)
        self.size += len(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def fetch_snapshot(blobs: Any, source: dict[str, Any], into: Path) -> int:
    """Download the files of one source snapshot (``source`` as BuildSpec.snapshots holds it) into ``into``,
    each checked against its index's size and CRC32 while it streams; return the bytes read. BuildError
    naming the snapshot and file when one is damaged or a blob is missing."""
    from statectl.errors import StatectlError

    total = 0
    for f in source["files"]:
        rel = str(f["path"])
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise BuildError(f"snapshot {source['snapshot']} of {source['task']}: file path {rel!r} escapes the store")
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as fh:
            w = _CrcWriter(fh)
            try:
                for blob_id, _offset in sorted(f["blobs"], key=lambda b: int(b[1])):
                    blobs.get(blob_id, w)
            except StatectlError as e:
                raise BuildError(f"snapshot {source['snapshot']} of {source['task']}: {rel}: {_one_line(e)}") from None
        if w.size != int(f["size"]) or (f.get("checksum") is not None and w.crc != int(f["checksum"])):
            raise BuildError(f"snapshot {source['snapshot']} of {source['task']} is damaged: {rel} has {w.size} bytes "
                             f"with CRC32 {w.crc}, its index says {f['size']} bytes with CRC32 {f.get('checksum')}")
        total += w.size
    return total


class _SourceStatsParam:
    """A Spark accumulator of per-source figures {source index: figures}: a retried task's figures replace
    its first attempt's (they are the same), so nothing is counted twice."""

    def zero(self, value: dict[int, Any]) -> dict[int, Any]:
        return {}

    def addInPlace(self, a: dict[int, Any], b: dict[int, Any]) -> dict[int, Any]:
        a.update(b)
        return a


class _ReadSnapshots:
    """A task's source snapshots -> ((target store, key, (source index,)), value) for every entry.

    A snapshot is read whole, as RocksDB reads it (its SST files of every level, tombstones, its WAL): the
    executor downloads its files from the blob store into a temporary dir and iterates a read-only open of
    it. Reading SST files one by one would be wrong for a store that is not fully compacted: a key can be
    in several levels, and a deletion in a newer file hides it."""

    def __init__(self, job: _Job, stats: Any):
        self.job = job
        self.stats = stats

    def __call__(self, items: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[tuple[tuple[int, bytes, tuple], bytes]]:
        import shutil

        from statectl.rocks.store import open_readonly

        spec = self.job.spec
        m = spec.partitions_out or 1
        route = load_partitioner(spec.partitioner)
        placed = _placed_check(spec)
        blobs = self.job.blobstore(spec.source_store)
        try:
            for i, source in items:
                work = Path(tempfile.mkdtemp(prefix="statectl-rescale-src-", dir=_app_dir()))
                try:
                    read = fetch_snapshot(blobs, source, work)
                    digest = Digest()
                    try:
                        db = open_readonly(work)
                    except Exception as e:
                        raise BuildError(f"snapshot {source['snapshot']} of {source['task']}: cannot open it: "
                                         f"{_one_line(e)}") from None
                    try:
                        others = [cf for cf in _rocksdict().Rdict.list_cf(str(work)) if cf != "default"]
                        if others:  # re-partitioning only the default one would drop them silently
                            raise BuildError(f"snapshot {source['snapshot']} of {source['task']} has column families "
                                             f"besides the default one ({', '.join(sorted(others))}): rescale "
                                             "re-partitions single-column-family stores only")
                        cursor = db.iter()
                        end = None
                        if source.get("groups") is not None:  # a key-group source: only its own key groups
                            from statectl.formats.keygroups import group_bound

                            first, last = source["groups"]
                            groups = route.groups
                            cursor.seek(group_bound(first, groups))
                            end = group_bound(last + 1, groups)
                        else:
                            cursor.seek_to_first()
                        check = placed if end is None else None
                        while cursor.valid():
                            key, value = cursor.key(), cursor.value()
                            if end is not None and key >= end:
                                break
                            if check is not None:
                                check(key, i, source)
                            digest.add(key, value)
                            try:
                                target = route(key, m)
                            except Exception as e:
                                raise BuildError(f"partitioner {spec.partitioner}: {_one_line(e)}") from None
                            if not isinstance(target, int) or not 0 <= target < m:
                                raise BuildError(f"partitioner {spec.partitioner or 'murmur2'} gave {target!r} for a "
                                                 f"key of {source['task']}: expected 0..{m - 1}")
                            yield (target, key, (i,)), value
                            cursor.next()
                        del cursor
                    finally:
                        db.close()
                    self.stats.add({i: {"task": source["task"], "snapshot": source["snapshot"], "keys": digest.keys,
                                        "digest": digest.as_json(), "bytes_read": read}})
                finally:
                    shutil.rmtree(work, ignore_errors=True)
        finally:
            blobs.close()


def _placed_check(spec: BuildSpec) -> Any:
    """f(key, i, source) raising BuildError when ``key`` of source ``i`` does not route to task i under
    (spec.source_partitioner, spec.partitions_in): the sources are not the layout the rescale assumes, and
    the targets would hold a mix of two partitionings. None when the spec asks for no such check."""
    n = spec.partitions_in
    if not n:
        return None
    route_in = load_partitioner(spec.source_partitioner)
    name = spec.source_partitioner or "murmur2"

    def check(key: bytes, i: int, source: dict[str, Any]) -> None:
        try:
            j = route_in(key, n)
        except Exception as e:
            raise BuildError(f"partitioner {name}: {_one_line(e)}") from None
        if j != i:
            raise BuildError(f"the sources are not a {n}-way layout by {name}: key {key[:40]!r} of {source['task']} "
                             f"(snapshot {source['snapshot']}) belongs to task {j} of {n}, not {i}; nothing was written")
    return check


def _app_dir() -> str | None:
    """The Spark application's own dir on this executor (removed with the application, also when it is
    aborted while this task runs), or None (the temp dir) outside Spark."""
    try:
        from pyspark import SparkFiles

        root = SparkFiles.getRootDirectory()
    except Exception:
        return None
    return root if root and os.path.isdir(root) else None


def _rocksdict() -> Any:
    import rocksdict

    return rocksdict


def _snapshots_rdd(sc: Any, job: _Job) -> tuple[Any, Any]:
    stats = sc.accumulator({}, _SourceStatsParam())  # pyspark calls zero and addInPlace only
    sources = list(enumerate(job.spec.snapshots))
    return sc.parallelize(sources, max(1, len(sources))).mapPartitions(_ReadSnapshots(job, stats)), stats


# -- the layout: (store, file) partitions sorted by key --------------------------------------------------


class _Sample:
    """A reservoir of a task's keys (store index, key): the files' key ranges come from them."""

    def __init__(self, size: int, seed: int):
        self.size = size
        self.seed = seed

    def __call__(self, split: int, items: Iterable[Any]) -> Iterator[tuple[int, bytes]]:
        rnd = random.Random(self.seed * 1_000_003 + split)
        kept: list[tuple[int, bytes]] = []
        for i, ((store, key, _), _v) in enumerate(items):
            if len(kept) < self.size:
                kept.append((store, key))
            else:
                j = rnd.randrange(i + 1)
                if j < self.size:
                    kept[j] = (store, key)
        return iter(kept)


class _Partitioner:
    """(store index, key, order) -> the output partition: store * files_per_store + the file whose key range
    holds the key."""

    def __init__(self, files_per_store: int, bounds: list[list[bytes]]):
        self.files_per_store = files_per_store
        self.bounds = bounds

    def __call__(self, k: tuple[int, bytes, tuple]) -> int:
        store, key = k[0], k[1]
        if self.files_per_store == 1:
            return store
        return store * self.files_per_store + bisect.bisect_right(self.bounds[store], key)


def _bounds(keyed: Any, stores: int, files_per_store: int) -> list[list[bytes]]:
    per_task = max(16, -(-_SAMPLES_PER_FILE * stores * files_per_store // max(1, keyed.getNumPartitions())))
    samples = keyed.mapPartitionsWithIndex(_Sample(per_task, 17)).collect()
    by_store: list[list[bytes]] = [[] for _ in range(stores)]
    for store, key in samples:
        by_store[store].append(key)
    bounds = []
    for keys in by_store:
        keys.sort()
        cut = sorted({keys[len(keys) * i // files_per_store] for i in range(1, files_per_store)} if keys else set())
        bounds.append(cut[: files_per_store - 1])
    return bounds


# -- writing the files ---------------------------------------------------------------------------------


class _Counts:
    def __init__(self) -> None:
        self.rows = 0
        self.duplicates = 0


def _latest(items: Iterable[tuple[tuple[int, bytes, tuple], Any]], counts: _Counts) -> Iterator[tuple[bytes, bytes]]:
    """Sorted (store, key, order) -> value items: per key the value of the last in order, None left out."""
    have, cur_key, cur_val = False, b"", None
    for (_, key, _), value in items:
        counts.rows += 1
        if have and key == cur_key:
            counts.duplicates += 1
            cur_val = value
            continue
        if have and cur_val is not None:
            yield cur_key, cur_val
        have, cur_key, cur_val = True, key, value
    if have and cur_val is not None:
        yield cur_key, cur_val


class _Peek:
    def __init__(self, it: Iterator[tuple[bytes, bytes]]):
        self.it = it
        self.head: tuple[bytes, bytes] | None = next(it, None)

    def take(self, budget: int) -> Iterator[tuple[bytes, bytes]]:
        """Entries up to about ``budget`` bytes (at least one)."""
        used = 0
        while self.head is not None and (used == 0 or used < budget):
            entry = self.head
            used += len(entry[0]) + len(entry[1])
            self.head = next(self.it, None)
            yield entry


class _WriteFiles:
    """A sorted output partition of one store -> its SST files and one task record (:func:`_write_files`)."""

    def __init__(self, job: _Job):
        self.job = job

    def __call__(self, split: int, items: Iterable[Any]) -> Iterator[dict[str, Any]]:
        job, spec = self.job, self.job.spec
        store_idx, file_no = divmod(split, spec.files_per_store)
        yield _write_files(job, job.stores[store_idx], file_no, items)


def _write_files(job: _Job, store: Any, file_no: int, items: Iterable[Any]) -> dict[str, Any]:
    """Sorted ((store, key, order), value) items of ``store`` -> SST files named ``store-<label>-<file_no>-<seq>``
    (rolled over every ``max_file_bytes``; into out_dir, or through the blob store) and the task record
    {store, rows, duplicates, files: [{store, file, bytes, rows, digest, key}]}."""
    from pyspark import TaskContext

    from statectl.rocks.sst import write_sst

    spec = job.spec
    label = "all" if store is None else str(store)
    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    counts = _Counts()
    entries = _Peek(_latest(items, counts))
    staged = spec.staging != "local"
    work = Path(tempfile.mkdtemp(prefix="statectl-sst-")) if staged else job.out_dir
    blobs = job.blobstore() if staged else None
    files = []
    try:
        seq = 0
        rows_before = 0
        while entries.head is not None:
            name = f"{SST_PREFIX}{label}-{file_no:04d}-{seq:04d}.sst"
            tmp = work / f".{name}.tmp-{attempt}"
            digest = write_sst(tmp, entries.take(spec.max_file_bytes))
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            size = tmp.stat().st_size
            key = None
            if blobs is not None:
                key = f"{STAGING_PREFIX}{job.build_id}/{name}"
                blobs.put_at(key, tmp.read_bytes())
                tmp.unlink()
            else:
                os.replace(tmp, work / name)
            rows = counts.rows - rows_before
            rows_before = counts.rows
            files.append({"store": store, "file": name, "bytes": size, "rows": rows,
                          "digest": digest.as_json(), "key": key})
            seq += 1
        if files:  # rows read after the last entry (keys left out) count for the last file
            files[-1]["rows"] += counts.rows - rows_before
    finally:
        if blobs is not None:
            blobs.close()
        if staged:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    return {"store": store, "rows": counts.rows, "duplicates": counts.duplicates, "files": files}


# -- the JVM path: files whose key and value are one plain column each ----------------------------------

# Spark types whose cast to a string gives the bytes statectl.formats.adstore.to_bytes gives their values.
_PLAIN_TYPES = {"string", "binary", "int", "bigint", "smallint", "tinyint", "boolean"}


def _plain_frame(spark: Any, job: _Job) -> Any:
    """For a files build whose key and value are one column each, the entries as a DataFrame (store, k,
    v, fi, bs, id): the same bytes as the put path, the order (file's place, split start, row id) the put
    path's row order. The dataset's files are read in one read. Parquet and CSV: columns of a plain type
    (_PLAIN_TYPES), cast in the JVM. JSON lines: Spark's text reader, the lines parsed in Arrow batches
    by :class:`_JsonRows`. None otherwise (the Python path then turns each row into an entry with
    KeyValueSpec.row_entry)."""
    from pyspark.sql import functions as F

    spec, kv = job.spec, job.spec.kv
    if spec.source != "files" or spec.fmt not in ("parquet", "csv", "jsonl") or not kv.key_column \
            or not kv.value_column:
        return None
    files = list(spec.files) or [str(spec.path)]
    df = _read(spark, spec.fmt, files)
    fi = _file_order(df, job)
    where = [fi.alias("fi"), F.col("_metadata.file_block_start").alias("bs"),
             F.monotonically_increasing_id().alias("id")]
    if spec.fmt == "jsonl":
        lines = df.select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("file"), *where)
        return lines.mapInArrow(_JsonRows(job), "store int, k binary, v binary, fi int, bs bigint, id bigint")
    types = dict(df.dtypes)
    if types.get(kv.key_column) not in _PLAIN_TYPES or types.get(kv.value_column) not in _PLAIN_TYPES:
        return None
    out = df.select(_as_binary(df, kv.key_column).alias("k"),
                    F.coalesce(_as_binary(df, kv.value_column), F.lit(bytearray())).alias("v"), *where)
    if spec.layout == "partitioned":
        out = out.mapInArrow(_WithStore(job), "store int, k binary, v binary, fi int, bs bigint, id bigint")
    else:
        out = out.select(F.lit(0).alias("store"), "*")
    return out


def _file_order(df: Any, job: _Job) -> Any:
    """A column: each row's file's place in the dataset's order of files (the put path's), from its
    ``_metadata.file_path`` (the URIs Spark lists in ``df.inputFiles()``); files not in spec.files (a
    dir's listing, when the spec names none) come after them in the order of their URIs, as in
    :class:`_FileRows`."""
    from pyspark.sql import functions as F

    files = list(job.spec.files) or [str(job.spec.path)]
    place = {os.path.abspath(str(f)): i for i, f in enumerate(files)}
    uris = sorted(set(df.inputFiles()))
    if len(uris) <= 1:  # one file: no look-up per row
        return F.lit(place.get(_local_path(uris[0]), 0) if uris else 0)
    pairs: list[Any] = []
    others = len(place)
    for u in uris:
        i = place.get(_local_path(u))
        if i is None:
            i, others = others, others + 1
        # inputFiles() says file:///a%20b where _metadata.file_path says file:/a%20b: the map has both
        for name in dict.fromkeys([u, re.sub("^file:///", "file:/", u)]):
            pairs += [F.lit(name), F.lit(i)]
    return F.coalesce(F.element_at(F.create_map(*pairs), F.col("_metadata.file_path")), F.lit(others))


def _files_per_store(sc: Any, job: _Job) -> int:
    """The write stage's tasks per store: the executors' cores (``spark.default.parallelism`` when set,
    else Spark's default: every core of local[N], the executors' cores of a cluster) and one task per
    _BYTES_PER_TASK of input, shared among the stores; at least ``files_per_store``."""
    spec = job.spec
    size = 0
    for f in list(spec.files) or [str(spec.path)]:
        try:
            size += os.path.getsize(_local_path(f))
        except OSError:
            pass
    tasks = max(int(sc.defaultParallelism), -(-size // _BYTES_PER_TASK))
    return max(spec.files_per_store, -(-tasks // len(job.stores)))


def _lay_out(spark: Any, job: _Job, plain: Any) -> tuple[Any, str]:
    """``plain`` shuffled into stores x files_per_store partitions, partition p holding a range of (store,
    k) below partition p + 1's, all rows of a key in one partition. From Parquet the ranges come from a
    sample of the key column of a few row groups read on the driver (:func:`_parquet_sample`), from JSON
    lines and CSV from a few chunks of the files (:func:`_line_sample`): no pass over the input before the
    one that shuffles it; each row's partition (its ``pid`` column, checked by the writers) is computed in
    the JVM from those bounds. Otherwise (files the driver cannot read) Spark's repartitionByRange samples
    the input itself (one more read of it). Returns (the frame, where the ranges came from:
    BuildManifest.ranges; unless that is "spark-sample", the frame has ``pid`` and the sort key ``sk`` of
    :func:`_with_sort_key`, and each partition holds one store)."""
    from pyspark.sql import functions as F

    spec = job.spec
    stores = len(job.stores)
    per_store = _files_per_store(spark.sparkContext, job)
    parts = stores * per_store
    sample = {"parquet": _parquet_sample, "jsonl": _jsonl_sample, "csv": _csv_sample}.get(spec.fmt or "")
    keys = sample(job, _SAMPLE_PER_TASK * parts) if sample else None
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
    slots = _hash_slots(parts)
    slot = F.element_at(F.array(*[F.lit(x).cast("bigint") for x in slots]), pid + 1)
    laid_out = plain.withColumn("pid", pid).repartition(parts, slot)
    return _with_sort_key(laid_out, prefixes), f"{spec.fmt}-sample"


def _with_sort_key(df: Any, prefixes: list[bytes]) -> Any:
    """``df`` (one store per partition, its ``pid``) with ``sk``: a binary that sorts as ``k`` does and
    tells keys apart in its first 8 bytes where ``k`` may not. Spark sorts by a column's first 8 bytes
    (its sort prefix) and compares whole rows only on ties, so keys that share a long beginning
    (``key-000000123456``) make it compare key pairs in full (the sort-and-write stage of 2 M shuffled such
    keys on local[2]: 7.6 s with k, 5.5 s with sk). A partition's keys
    mostly begin with the common beginning P of its sampled keys; sk is 0x01 + the rest of k for a key
    that begins with P, 0x00 + k for a key below P, 0x02 + k for one above: the same order as k (a key
    that does not begin with P sorts wholly below or wholly above the keys that do), and equal only for
    equal keys. P need not be right for every key: the order is exact for any P."""
    from pyspark.sql import functions as F

    if not any(prefixes):
        return df.withColumn("sk", F.col("k"))
    p = F.element_at(F.array(*[F.lit(bytearray(x)) for x in prefixes]), F.col("pid") + 1)
    return df.withColumn("_p", p).withColumn("sk", F.expr(
        "CASE WHEN substring(k, 1, length(_p)) = _p THEN concat(X'01', substring(k, length(_p) + 1)) "
        "WHEN k < _p THEN concat(X'00', k) ELSE concat(X'02', k) END")).drop("_p")


_ARROW_BATCH_BYTES = 8 << 20  # the Arrow batches' average size that _arrow_batches aims at
_ARROW_BYTES_CONF = "spark.sql.execution.arrow.maxBytesPerBatch"
_ARROW_ROWS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _arrow_batches(spark: Any, job: _Job) -> None:
    """Size the JVM path's Arrow batches by rows, not bytes: Spark checks a batch's size in bytes after
    every row it adds (maxBytesPerBatch, 64 MiB by default), a quarter of the JVM's time in the
    sort-and-write stage (2 M rows of 16-byte keys and 100-byte values: 5.9 -> 4.4 s of CPU). With the
    check off (Int.MaxValue), a batch holds maxRecordsPerBatch rows: about _ARROW_BATCH_BYTES of the
    dataset's average row (from the Parquet footers, or the first MiB of a JSON-lines file), 64 to
    10 000 rows. Left as they are when the user set either (``--spark-conf``), for CSV, or when the
    files cannot be read here."""
    conf = spark.sparkContext.getConf()
    if conf.contains(_ARROW_BYTES_CONF) or conf.contains(_ARROW_ROWS_CONF):
        return
    spec = job.spec
    files = [_local_path(f) for f in list(spec.files) or [str(spec.path)]]
    try:
        if spec.fmt == "parquet":
            import pyarrow.parquet as pq

            rows = size = 0
            for f in files:
                meta = pq.read_metadata(f)
                rows += meta.num_rows
                size += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
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


def _parquet_sample(job: _Job, want: int) -> list[bytes] | None:
    """About ``want`` keys (the bytes the JVM path makes of them) spread over the dataset, read on the
    driver from the key column of at most _SAMPLE_ROW_GROUPS row groups spread over its files (their
    footers and that column's chunks only). None when a file is not a local file pyarrow can read (then
    Spark samples). The sample only balances the partitions; the result does not depend on it."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    spec = job.spec
    column = spec.kv.key_column
    groups: list[tuple[Any, int, int]] = []
    try:
        for f in list(spec.files) or [str(spec.path)]:
            pf = pq.ParquetFile(_local_path(f), pre_buffer=False)
            groups += [(pf, i, pf.metadata.row_group(i).num_rows) for i in range(pf.metadata.num_row_groups)]
        if len(groups) > _SAMPLE_ROW_GROUPS:
            step = len(groups) / _SAMPLE_ROW_GROUPS
            groups = [groups[int(i * step)] for i in range(_SAMPLE_ROW_GROUPS)]
        per_group = max(1, -(-want // max(1, len(groups))))
        keys: list[bytes] = []
        for pf, i, rows in groups:
            if not rows:
                continue
            values = pf.read_row_group(i, columns=[column]).column(0)
            picked = values.take(pa.array(range(0, rows, max(1, rows // per_group)), pa.int64()))
            for v in picked.to_pylist():
                if v is not None:
                    keys.append(_sample_bytes(v))
    except Exception:  # a dir, a remote path, a file pyarrow reads otherwise than Spark: Spark samples
        return None
    return keys


def _jsonl_sample(job: _Job, want: int) -> list[bytes] | None:
    """About ``want`` keys (to_bytes of the key column, as the put path makes them) spread over a JSON-lines
    dataset (:func:`_line_sample`)."""
    from statectl.formats.adstore import to_bytes

    column = job.spec.kv.key_column

    def key(line: bytes) -> bytes | None:
        row = jsonl_row(line)
        return to_bytes(row.get(column)) if row is not None else None

    return _line_sample(job, want, lambda path: key)


def _csv_sample(job: _Job, want: int) -> list[bytes] | None:
    """About ``want`` keys (the key column's text as UTF-8, as Spark reads and casts it) spread over a CSV
    dataset (:func:`_line_sample`); each file's own header names the column. A row whose quoted field holds
    a newline is cut by the line split and passed over (its field count is wrong): the sample only
    balances the partitions."""
    import csv

    column = job.spec.kv.key_column

    def key_of(path: str) -> Any:
        with open(path, "rb") as fh:
            header = next(csv.reader([fh.readline().decode("utf-8").rstrip("\r\n")]), [])
        if column not in header:
            return None
        i, n = header.index(column), len(header)

        def key(line: bytes) -> bytes | None:
            fields = next(csv.reader([line.decode("utf-8").rstrip("\r")]), [])
            return fields[i].encode("utf-8") if len(fields) == n and fields[i] and fields != header else None

        return key

    return _line_sample(job, want, key_of)


def _line_sample(job: _Job, want: int, key_of: Any) -> list[bytes] | None:
    """About ``want`` keys spread over a dataset of lines (JSON lines, CSV), from at most
    _SAMPLE_ROW_GROUPS chunks of _SAMPLE_CHUNK bytes spread over its files, read on the driver: ``key_of(path)``
    gives the file's ``key(line) -> bytes | None`` (None: no such column in the file). A line cut by a
    chunk's edges, or one that is not a row with the key, is passed over. None when a file is not a local
    file (then Spark samples). Only balances the partitions; the result does not depend on it."""
    try:
        files = [(p, os.path.getsize(p)) for p in (_local_path(f) for f in list(job.spec.files) or [str(job.spec.path)])]
    except OSError:
        return None
    total = sum(size for _, size in files)
    if not total:
        return []
    chunks = max(1, min(_SAMPLE_ROW_GROUPS, -(-total // _SAMPLE_CHUNK)))
    per_chunk = max(1, -(-want // chunks))
    keys: list[bytes] = []
    try:
        at = [total * i // chunks for i in range(chunks)]
        base = 0
        for path, size in files:
            mine = [a - base for a in at if base <= a < base + size]
            base += size
            if not mine:
                continue
            key = key_of(path)
            if key is None:
                continue
            with open(path, "rb") as fh:
                for offset in mine:
                    fh.seek(offset)
                    lines = fh.read(_SAMPLE_CHUNK).split(b"\n")[1 if offset else 0:-1]
                    for line in lines[:: max(1, len(lines) // per_chunk)]:
                        try:
                            got = key(line)
                        except Exception:  # noqa: BLE001 - a cut or bad line: not in the sample
                            continue
                        if got is not None:
                            keys.append(got)
    except (OSError, UnicodeDecodeError):
        return None
    return keys


def _sample_bytes(v: Any) -> bytes:
    """A key value as Spark's cast to string and to binary makes it (_PLAIN_TYPES)."""
    if isinstance(v, bool):
        return b"true" if v else b"false"
    if isinstance(v, (bytes, str)):
        return v if isinstance(v, bytes) else v.encode("utf-8", "surrogatepass")
    return str(v).encode()


def _as_binary(df: Any, column: str) -> Any:
    from pyspark.sql import functions as F

    c = F.col("`" + column.replace("`", "``") + "`")
    kind = dict(df.dtypes)[column]
    return c if kind == "binary" else c.cast("string").cast("binary")


class _WithStore:
    """Arrow batches of (k, v, fi, bs, id) -> the same with the store Kafka's partitioner gives each key
    (numpy over the key column: statectl.formats.adstore.partitions_of)."""

    def __init__(self, job: _Job):
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


class _JsonRows:
    """Arrow batches of JSON lines (line, file, fi, bs, id) -> (store, k, v, fi, bs, id): the key column
    and the value column of each row, as the put path makes them.

    A batch's lines are parsed at once by pyarrow's JSON reader with both columns typed as strings (no
    Python object per row); the reader refuses anything else (a number, an object, a null, a line that
    is not a JSON object, a repeated column...), and a batch it refuses, or where a column is missing or
    null, or whose row count is not its count of non-blank lines, is made row by row with jsonl_row and
    KeyValueSpec.row_entry instead: the same entries, or the put path's error naming the line."""

    def __init__(self, job: _Job):
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
        try:
            table = pj.read_json(pa.BufferReader(text),
                                 read_options=pj.ReadOptions(use_threads=False,
                                                             block_size=min(max(1 << 20, text.size + 1), (1 << 31) - 1)),
                                 parse_options=pj.ParseOptions(explicit_schema=pa.schema([(c, pa.string()) for c in names]),
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
                raise BuildError(f"{_local_path(file_uri)} {_row_at('line', block, n)}: {e}") from None
            if parsed is None:
                kept.append(False)
                continue
            try:
                key, value = kv.row_entry(parsed)
            except ExtractError as e:
                raise BuildError(f"{_local_path(file_uri)} {_row_at('row', block, n)}: {e}") from None
            keys.append(key)
            values.append(value)
            kept.append(True)
        return pa.array(keys, pa.binary()), pa.array(values, pa.binary()), kept, where, n


class _StoreFiles:
    """A task's SST files of one store, from chunks of its entries (sorted, each key once: :meth:`add`):
    named ``store-<label>-<file_no>-<seq>`` and rolled over at ``max_file_bytes`` as :func:`_write_files`
    names and rolls them, into out_dir or through the blob store. :meth:`close` gives the task record
    {store, rows, duplicates, files}; :meth:`abort` removes what is unfinished."""

    def __init__(self, job: _Job, store: Any, file_no: int, attempt: int):
        self.job, self.store, self.file_no, self.attempt = job, store, file_no, attempt
        self.label = "all" if store is None else str(store)
        self.staged = job.spec.staging != "local"
        self.work = Path(tempfile.mkdtemp(prefix="statectl-sst-")) if self.staged else job.out_dir
        self.blobs = job.blobstore() if self.staged else None
        self.files: list[dict[str, Any]] = []
        self.rows = self.duplicates = 0
        self.sst: Any = None
        self.name = ""
        self.seq = self.used = self.file_rows = 0

    def duplicate(self) -> None:
        """A row whose key a later row of the same key replaces, not given to :meth:`add`."""
        self.rows += 1
        self.duplicates += 1
        self.file_rows += 1

    def add(self, keys: list[bytes], values: list[bytes], digests: Any, rows: int) -> None:
        """Entries (``digests``: their entry_digest, a numpy uint64 array) made of ``rows`` rows (the others
        were duplicates)."""
        import bisect
        import operator
        from itertools import accumulate

        from statectl.rocks.sst import SstWriter

        self.rows += rows
        self.duplicates += rows - len(keys)
        self.file_rows += rows - len(keys)
        n = len(keys)
        if not n:
            return
        budget = self.job.spec.max_file_bytes
        sizes = list(accumulate(map(operator.add, map(len, keys), map(len, values))))
        lo = 0
        while lo < n:
            if self.sst is None:
                self.name = f"{SST_PREFIX}{self.label}-{self.file_no:04d}-{self.seq:04d}.sst"
                self.sst = SstWriter(self.work / f".{self.name}.tmp-{self.attempt}")
                self.used = 0
            base = sizes[lo - 1] if lo else 0
            # the entry that takes the file to its budget is its last (as _Peek.take)
            j = bisect.bisect_left(sizes, budget - self.used + base, lo)
            hi = min(n, j + 1)
            self.sst.add(keys[lo:hi], values[lo:hi], int(digests[lo:hi].sum()))
            self.file_rows += hi - lo
            self.used += sizes[hi - 1] - base
            lo = hi
            if self.used >= budget:
                self._close_file()

    def _close_file(self) -> None:
        sst, self.sst = self.sst, None
        digest = sst.finish()
        tmp = sst.path
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        size = tmp.stat().st_size
        key = None
        if self.blobs is not None:
            key = f"{STAGING_PREFIX}{self.job.build_id}/{self.name}"
            self.blobs.put_at(key, tmp.read_bytes())
            tmp.unlink()
        else:
            os.replace(tmp, self.work / self.name)
        self.files.append({"store": self.store, "file": self.name, "bytes": size, "rows": self.file_rows,
                           "digest": digest.as_json(), "key": key})
        self.file_rows = 0
        self.seq += 1

    def close(self) -> dict[str, Any]:
        try:
            if self.sst is not None:
                self._close_file()
            if self.files:  # rows read after the last entry (keys replaced) count for the last file
                self.files[-1]["rows"] += self.file_rows
        finally:
            self.abort()
        return {"store": self.store, "rows": self.rows, "duplicates": self.duplicates, "files": self.files}

    def abort(self) -> None:
        """Remove the unfinished file and the staging dir; close the blob store. Idempotent."""
        if self.sst is not None:
            self.sst.abort()
            self.sst = None
        if self.blobs is not None:
            self.blobs.close()
            self.blobs = None
        if self.staged:
            import shutil

            shutil.rmtree(self.work, ignore_errors=True)


def _entry_digest_columns() -> list[Any]:
    """The two halves of each entry's entry_digest (statectl.formats.adstore), computed in the JVM over
    (k, v): hk = CRC32(k), hl = CRC32(k + k's length as 4 bytes big-endian + v) (zlib.crc32(v,
    zlib.crc32(len4, zlib.crc32(k))) is the CRC32 of the three concatenated)."""
    from pyspark.sql import functions as F

    k = F.col("k")
    len4 = F.unhex(F.lpad(F.hex(F.length(k)), 8, "0"))
    return [F.crc32(k).alias("hk"), F.crc32(F.concat(k, len4, F.col("v"))).alias("hl")]


class _WriteArrow:
    """A range of the sorted (store, k, v, hk, hl[, pid]) entries -> the SST files of each store it holds (its
    partition number orders the files of a store by key) and a task record per store, as JSON.

    Per Arrow batch and store: the last row of each key is kept by comparing each key with the next in
    Arrow (a key's last row in a batch may still be replaced by the first of the next batch: it is held
    back until then), the kept keys and values go to the SST writer as lists, and the digest is summed in
    numpy from hk and hl: no Python object per row but the key and value bytes themselves."""

    def __init__(self, job: _Job):
        self.job = job

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import bisect

        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        column = self.job.spec.kv.key_column
        outs: dict[int, _StoreFiles] = {}
        held: tuple[int, bytes, bytes, Any] | None = None  # (store, key, value, digest) of the last row seen

        def out(store: int) -> _StoreFiles:
            if store not in outs:
                outs[store] = _StoreFiles(self.job, self.job.stores[store], part, attempt)
            return outs[store]

        try:
            for b in batches:
                n = b.num_rows
                if not n:
                    continue
                stores, keys, values = b.column(0), b.column(1), b.column(2)
                if keys.null_count:
                    raise BuildError(f"column {column!r} is null in a row")
                if b.num_columns > 5 and pc.min_max(b.column(5)).as_py() != {"min": part, "max": part}:
                    raise BuildError(f"partition {part} got rows of partitions {pc.min_max(b.column(5)).as_py()}: "
                                     "Spark's hash partitioning is not what statectl expects")
                digests = (b.column(3).to_numpy().astype(np.uint64) << np.uint64(32)) | \
                    b.column(4).to_numpy().astype(np.uint64)
                first, last = stores[0].as_py(), stores[n - 1].as_py()
                if first == last:
                    runs = [(first, 0, n)]
                else:
                    s = stores.to_pylist()
                    runs, lo = [], 0
                    while lo < n:
                        hi = bisect.bisect_right(s, s[lo], lo)
                        runs.append((s[lo], lo, hi))
                        lo = hi
                for store, lo, hi in runs:
                    m = hi - lo
                    k, v, d = keys.slice(lo, m), values.slice(lo, m), digests[lo:hi]
                    if m > 1:
                        keep = pc.not_equal(k.slice(0, m - 1), k.slice(1))
                        if keep.false_count:
                            mask = pa.concat_arrays([keep, pa.array([True])])
                            k, v = k.filter(mask), v.filter(mask)
                            d = d[mask.to_numpy(zero_copy_only=False)]
                    ks, vs = k.to_pylist(), v.to_pylist()
                    if held is not None:
                        if held[0] == store and held[1] == ks[0]:
                            out(store).duplicate()
                        else:
                            out(held[0]).add([held[1]], [held[2]], held[3], 1)
                    out(store).add(ks[:-1], vs[:-1], d[:-1], m - 1)
                    held = (store, ks[-1], vs[-1], d[-1:])
            if held is not None:
                out(held[0]).add([held[1]], [held[2]], held[3], 1)
            records = [outs[s].close() for s in sorted(outs)]
        finally:
            for o in outs.values():
                o.abort()
        yield pa.RecordBatch.from_arrays([pa.array([json.dumps(r) for r in records], pa.string())], ["task"])


# -- the driver ----------------------------------------------------------------------------------------


def build(doc: dict[str, Any]) -> dict[str, Any]:
    """Run the build the job document asks for; write and return the manifest."""
    from pyspark import StorageLevel
    from pyspark.sql import SparkSession

    began = time.monotonic()
    job = _Job(doc)
    spec = job.spec
    spark = SparkSession.builder.getOrCreate()
    try:
        sc = spark.sparkContext
        sc.setLogLevel("WARN")
        plain = _plain_frame(spark, job)
        if plain is not None:
            _arrow_batches(spark, job)
            laid_out, ranges = _lay_out(spark, job, plain)
            checked = ranges != "spark-sample"
            # one store per partition when checked (_with_sort_key's sk), else the ranges may span two
            laid_out = laid_out.sortWithinPartitions(*(["sk"] if checked else ["store", "k"]), "fi", "bs", "id")
            written = (laid_out.select("store", "k", "v", *_entry_digest_columns(), *(["pid"] if checked else []))
                       .mapInArrow(_WriteArrow(job), "task string").collect())
            tasks = [json.loads(row.task) for row in written]
            return _finish(job, tasks, began, "jvm", ranges=ranges)
        stats = None
        if spec.source == "snapshots":
            keyed, stats = _snapshots_rdd(sc, job)
        else:
            keyed = _topic_rdd(sc, job) if spec.source == "topic" else _files_rdd(spark, job)
        stores, per_store = len(job.stores), spec.files_per_store
        bounds: list[list[bytes]] = []
        if per_store > 1:
            keyed = keyed.persist(StorageLevel.MEMORY_AND_DISK)  # read the source once for the sample and the build
            bounds = _bounds(keyed, stores, per_store)
        laid_out = keyed.repartitionAndSortWithinPartitions(stores * per_store, _Partitioner(per_store, bounds))
        tasks = laid_out.mapPartitionsWithIndex(_WriteFiles(job)).collect()
    except BuildError:
        raise
    except Exception as e:
        raise BuildError(summarize(e)) from None  # while the JVM still answers for its exception
    finally:
        spark.stop()
    sources = None
    if stats is not None:
        got = stats.value
        sources = [got[i] for i in sorted(got)]
        if len(sources) != len(spec.snapshots):
            raise BuildError(f"read {len(sources)} of the {len(spec.snapshots)} source snapshots")
    return _finish(job, tasks, began, sources=sources)


def _finish(job: _Job, tasks: list[dict[str, Any]], began: float, path: str = "python",
            sources: list[dict[str, Any]] | None = None, ranges: str | None = None) -> dict[str, Any]:
    """Write the manifest (submit.BuildManifest) made of the tasks' records; ``path``: how the entries were
    made, "jvm" (_plain_frame) or "python"; ``sources``: what a snapshots build read from each source;
    ``ranges``: where the JVM path's key ranges came from (BuildManifest.ranges). Returns its document."""
    spec = job.spec
    per_store = {s: StoreBuild(s, [], 0, 0, Digest()) for s in job.stores}
    files = []
    for t in tasks:
        s = per_store[t["store"]]
        s.rows += t["rows"]
        s.duplicates += t["duplicates"]
        for f in t["files"]:
            built = BuildFile.from_json(f)
            s.files.append(built.name)
            s.digest.merge(built.digest)
            files.append(built)
    for s in per_store.values():
        s.files.sort()
    offsets = {p: spec.ranges[p][1] for p in spec.partitions} if spec.source == "topic" and spec.ranges else {}
    manifest = BuildManifest(job.spec_hash, job.out_dir, list(per_store.values()), sorted(files, key=lambda f: f.name),
                             offsets, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             round(time.monotonic() - began, 3), path=path, ranges=ranges or "",
                             sources=sources or [], build_id=job.build_id)
    doc = manifest.to_dict()
    # unique: the temporary file is then .BUILD-MANIFEST.json.<pid>.tmp, a name a build dir may hold (what a
    # kill leaves there must not make the dir look like something else: engine.adstore_common._is_build_dir)
    write_atomic(job.out_dir / BUILD_MANIFEST, json.dumps(doc, indent=2) + "\n", unique=True)
    return doc


_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.$]*\.)?[A-Z]\w*(?:Error|Exception)(?:\[[\w.]+\])?: (.+)$")


_READING = re.compile(r"while reading file (\S+?)\.?(?:\s|$)")


def _java_messages(e: BaseException) -> list[str]:
    """The messages of a Py4JJavaError's Java exception and its causes, outermost first."""
    out: list[str] = []
    je = getattr(e, "java_exception", None)
    while je is not None and len(out) < 20:
        try:
            out.append(str(je.getMessage() or ""))
            je = je.getCause()
        except Exception:
            break
    return out


def summarize(e: BaseException) -> str:
    """One line for an exception that ended the build: a BuildError's own message wherever it was raised
    (an executor's traceback travels in the exception's text, or in its Java causes), else the innermost
    Java cause (with the file being read, when Spark names one), else the last exception line."""
    if isinstance(e, BuildError):
        return str(e)
    java = _java_messages(e)
    text = "\n".join([str(e), *java])
    found = re.findall(r"BuildError: (.+)", text)
    if found:
        return found[0].strip()
    inner = [m for m in java if m.strip()]
    if inner:
        line = re.sub(r"\s*SQLSTATE: \w+\s*$", "", inner[-1].strip().splitlines()[0])
        reading = next((m.group(1) for m in map(_READING.search, java) if m), None)
        if reading and reading not in line:
            line = f"{_local_path(reading)}: {line}"
        return line[:500]
    lines = [m.group(0).strip() for m in map(_EXC_LINE.match, text.splitlines()) if m]
    return (lines or [_one_line(e)])[-1][:500]


def main(argv: list[str]) -> int:
    """``job.py <job file>``: build, and exit 0; on failure print the one-line error after ERROR_MARK and exit 1."""
    if len(argv) != 1:
        print(f"{ERROR_MARK}usage: job.py <job file>", file=sys.stderr)
        return 2
    try:
        doc = json.loads(Path(argv[0]).read_text())
        build(doc)
    except KeyboardInterrupt:
        print(f"{ERROR_MARK}interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        print(f"{ERROR_MARK}{summarize(e)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    # Run as a script, this dir is sys.path[0]; the package's modules must be imported as statectl.spark.*.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    from statectl.spark.job import main as _main

    sys.exit(_main(sys.argv[1:]))
