"""The samples the build's key ranges come from. The Python path: a reservoir of each task's keys
(:func:`file_bounds`) gives the files' key ranges, :class:`FilePartitioner` sends each entry to its file.
The JVM path: a few row groups (Parquet) or chunks (JSON lines, CSV) of the dataset read on the driver
(:func:`parquet_sample`, :func:`jsonl_sample`, :func:`csv_sample`), before the one pass that shuffles it. A
sample only balances the partitions; the files built do not depend on it."""

from __future__ import annotations

import bisect
import os
import random
from typing import Any, Iterable, Iterator

from statectl.formats.adstore import jsonl_row
from statectl.spark.context import BuildJob, local_path


_SAMPLES_PER_FILE = 64
SAMPLE_PER_TASK = 200  # keys sampled per write task for its key range (the JVM path)
_SAMPLE_ROW_GROUPS = 64  # row groups read for that sample, at most
_SAMPLE_KEEP = 4096  # keys kept of each row group read, at even steps (the sample picks from them)
_SAMPLE_CHUNK = 256 << 10  # bytes of a JSON-lines or CSV file read per chunk of that sample


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


class FilePartitioner:
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


def file_bounds(keyed: Any, stores: int, files_per_store: int) -> list[list[bytes]]:
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


def parquet_sample(job: BuildJob, want: int, footers: Any = None) -> list[bytes] | None:
    """About ``want`` keys (the bytes the JVM path makes of them) spread over the dataset, from the key
    column of at most _SAMPLE_ROW_GROUPS row groups spread over its files, read on the driver
    (statectl.spark.footers.Footers.key_sample: their footers and that column's chunks only; ``footers``:
    those of the dataset, read here when None). None when a file is not a local file pyarrow can read (then
    Spark samples). The sample only balances the partitions; the result does not depend on it."""
    try:
        import pyarrow as pa

        from statectl.spark.footers import read_footers
    except ImportError:
        return None
    footers = footers or read_footers(job)
    picked = footers.key_sample(job.spec.kv.key_column, _SAMPLE_ROW_GROUPS, _SAMPLE_KEEP) if footers else None
    if picked is None:
        return None
    per_group = max(1, -(-want // max(1, len(picked))))
    keys: list[bytes] = []
    for values in picked:
        n = len(values)
        for v in values.take(pa.array(range(0, n, max(1, n // per_group)), pa.int64())).to_pylist():
            if v is not None:
                keys.append(_sample_bytes(v))
    return keys


def prefetch_parquet_sample(job: BuildJob, footers: Any) -> None:
    """Read what :func:`parquet_sample` picks from (Footers.key_sample), before it is asked for."""
    footers.key_sample(job.spec.kv.key_column, _SAMPLE_ROW_GROUPS, _SAMPLE_KEEP)


def jsonl_sample(job: BuildJob, want: int) -> list[bytes] | None:
    """About ``want`` keys (to_bytes of the key column, as the put path makes them) spread over a JSON-lines
    dataset (:func:`_line_sample`)."""
    from statectl.formats.adstore import to_bytes

    column = job.spec.kv.key_column

    def key(line: bytes) -> bytes | None:
        row = jsonl_row(line)
        return to_bytes(row.get(column)) if row is not None else None

    return _line_sample(job, want, lambda path: key)


def csv_sample(job: BuildJob, want: int) -> list[bytes] | None:
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


def _line_sample(job: BuildJob, want: int, key_of: Any) -> list[bytes] | None:
    """About ``want`` keys spread over a dataset of lines (JSON lines, CSV), from at most
    _SAMPLE_ROW_GROUPS chunks of _SAMPLE_CHUNK bytes spread over its files, read on the driver: ``key_of(path)``
    gives the file's ``key(line) -> bytes | None`` (None: no such column in the file). A line cut by a
    chunk's edges, or one that is not a row with the key, is passed over. None when a file is not a local
    file (then Spark samples). Only balances the partitions; the result does not depend on it."""
    try:
        files = [(p, os.path.getsize(p)) for p in (local_path(f) for f in list(job.spec.files) or [str(job.spec.path)])]
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
