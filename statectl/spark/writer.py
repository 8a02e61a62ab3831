"""The SST writing on the executors: a sorted partition of one store's entries (the last of a key wins, a
None value leaves it out) becomes SST files named ``store-<label>-<file_no>-<seq>`` and rolled over at
``max_file_bytes``, into out_dir or through the blob store, with one task record {store, rows, duplicates,
files}. The Python path: :class:`WriteFiles` over entries; the JVM path: :class:`WriteArrow` over Arrow
batches, with no Python object per row but the key and value bytes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from statectl.spark.context import BuildError, BuildJob
from statectl.spark.submit import SST_PREFIX, STAGING_PREFIX


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


class WriteFiles:
    """A sorted output partition of one store -> its SST files and one task record (:func:`_write_files`)."""

    def __init__(self, job: BuildJob, written: Any = None):
        self.job, self.written = job, written  # written: the accumulator of rows written (the build's status)

    def __call__(self, split: int, items: Iterable[Any]) -> Iterator[dict[str, Any]]:
        job, spec = self.job, self.job.spec
        store_idx, file_no = divmod(split, spec.files_per_store)
        record = _write_files(job, job.stores[store_idx], file_no, items)
        if self.written is not None:
            self.written.add(record["rows"])
        yield record


def _write_files(job: BuildJob, store: Any, file_no: int, items: Iterable[Any]) -> dict[str, Any]:
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


class StoreFiles:
    """A task's SST files of one store, from chunks of its entries (sorted, each key once: :meth:`add`):
    named ``store-<label>-<file_no>-<seq>`` and rolled over at ``max_file_bytes`` as :func:`_write_files`
    names and rolls them, into out_dir or through the blob store. :meth:`close` gives the task record
    {store, rows, duplicates, files}; :meth:`abort` removes what is unfinished."""

    def __init__(self, job: BuildJob, store: Any, file_no: int, attempt: int):
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

    def add(self, keys: Sequence[bytes], values: Sequence[bytes], digests: Any, rows: int,
            size: int | None = None) -> None:
        """Entries (``keys`` and ``values``: lists, or sequences that slice, as rescale_reader.Picked;
        ``digests``: their entry_digest, a numpy uint64 array; ``size``: their keys' and values' bytes, when the
        caller has them) made of ``rows`` rows (the others were duplicates)."""
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
        if size is None:
            size = sum(map(len, keys)) + sum(map(len, values))
        if self.sst is not None and self.used + size < budget:  # all into the open file, which stays open
            self.sst.add(keys, values, int(digests.sum()))
            self.file_rows += n
            self.used += size
            return
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
        # not fsynced: a rescale's build dir is its own (statectl.engine.rescale.build.WorkDir), never used by
        # another run; one cut short by a crash is removed and built again, and what it uploaded carries a TTL
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


class Warm:
    """Arrow batches passed through by a Python worker that first imports what :class:`WriteArrow` imports
    (statectl.spark.job starts the workers with it while the driver plans)."""

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import numpy  # noqa: F401
        import pyarrow.compute  # noqa: F401

        from statectl.rocks.sst import rocksdict_module

        rocksdict_module()  # imported by SstWriter when the first file opens
        yield from batches


def entry_digest_columns() -> list[Any]:
    """The two halves of each entry's entry_digest (statectl.formats.adstore), computed in the JVM over
    (k, v): hk = CRC32(k), hl = CRC32(k + k's length as 4 bytes big-endian + v) (zlib.crc32(v,
    zlib.crc32(len4, zlib.crc32(k))) is the CRC32 of the three concatenated)."""
    from pyspark.sql import functions as F

    k = F.col("k")
    len4 = F.unhex(F.lpad(F.hex(F.length(k)), 8, "0"))
    return [F.crc32(k).alias("hk"), F.crc32(F.concat(k, len4, F.col("v"))).alias("hl")]


OUT_OF_ORDER = "rows out of key order"  # WriteArrow's error for rows given as_read that are not sorted


class WriteArrow:
    """A range of the sorted (store, k, v, hk, hl[, pid]) entries -> the SST files of each store it holds (its
    partition number orders the files of a store by key) and a task record per store, as JSON. ``as_read``:
    the rows come as the dataset holds them, not sorted by Spark: rows out of key order (the SST writer
    refuses a key not above the one before it) end the task with a BuildError saying OUT_OF_ORDER.

    Per Arrow batch and store: the last row of each key is kept by comparing each key with the next in
    Arrow (a key's last row in a batch may still be replaced by the first of the next batch: it is held
    back until then), the kept keys and values go to the SST writer as lists, and the digest is summed in
    numpy from hk and hl: no Python object per row but the key and value bytes themselves."""

    def __init__(self, job: BuildJob, written: Any = None, as_read: bool = False):
        self.job, self.written = job, written  # written: the accumulator of rows written (the build's status)
        self.as_read = as_read

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        try:
            yield from self._write(batches)
        except ValueError as e:  # the SST writer's: a key not above the one before it
            if not self.as_read:
                raise
            raise BuildError(f"{OUT_OF_ORDER}: {e}") from None

    def _write(self, batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        outs: dict[int, StoreFiles] = {}
        held: tuple[int, bytes, bytes, Any] | None = None  # (store, key, value, digest) of the last row seen

        def out(store: int) -> StoreFiles:
            if store not in outs:
                outs[store] = StoreFiles(self.job, self.job.stores[store], part, attempt)
            return outs[store]

        try:
            for b in batches:
                if not b.num_rows:
                    continue
                digests = self._digests(b, part)
                for store, lo, hi in _store_runs(b.column(0), b.num_rows):
                    ks, vs, d = _last_of_each_key(b.column(1).slice(lo, hi - lo), b.column(2).slice(lo, hi - lo),
                                                  digests[lo:hi])
                    if held is not None:
                        if held[0] == store and held[1] == ks[0]:
                            out(store).duplicate()
                        else:
                            out(held[0]).add([held[1]], [held[2]], held[3], 1)
                    out(store).add(ks[:-1], vs[:-1], d[:-1], hi - lo - 1)
                    held = (store, ks[-1], vs[-1], d[-1:])
            if held is not None:
                out(held[0]).add([held[1]], [held[2]], held[3], 1)
            records = [outs[s].close() for s in sorted(outs)]
            if self.written is not None:
                self.written.add(sum(r["rows"] for r in records))
        finally:
            for o in outs.values():
                o.abort()
        yield pa.RecordBatch.from_arrays([pa.array([json.dumps(r) for r in records], pa.string())], ["task"])

    def _digests(self, b: Any, part: int) -> Any:
        """The entry digests of batch ``b`` (numpy uint64, from hk and hl); BuildError for a null key or a row
        of another partition (its pid)."""
        import numpy as np
        import pyarrow.compute as pc

        if b.column(1).null_count:
            raise BuildError(f"column {self.job.spec.kv.key_column!r} is null in a row")
        if b.num_columns > 5 and pc.min_max(b.column(5)).as_py() != {"min": part, "max": part}:
            raise BuildError(f"partition {part} got rows of partitions {pc.min_max(b.column(5)).as_py()}: "
                             "Spark's hash partitioning is not what statectl expects")
        return (b.column(3).to_numpy().astype(np.uint64) << np.uint64(32)) | b.column(4).to_numpy().astype(np.uint64)


def _store_runs(stores: Any, n: int) -> list[tuple[int, int, int]]:
    """(store, first row, end row) of each run of one store in a batch's sorted store column."""
    import bisect

    first, last = stores[0].as_py(), stores[n - 1].as_py()
    if first == last:
        return [(first, 0, n)]
    s = stores.to_pylist()
    runs, lo = [], 0
    while lo < n:
        hi = bisect.bisect_right(s, s[lo], lo)
        runs.append((s[lo], lo, hi))
        lo = hi
    return runs


def _last_of_each_key(k: Any, v: Any, d: Any) -> tuple[list[bytes], list[bytes], Any]:
    """Keys, values (lists) and digests of a run of sorted rows, the last row of each key kept."""
    import pyarrow as pa
    import pyarrow.compute as pc

    m = len(k)
    if m > 1:
        keep = pc.not_equal(k.slice(0, m - 1), k.slice(1))
        if keep.false_count:
            mask = pa.concat_arrays([keep, pa.array([True])])
            k, v = k.filter(mask), v.filter(mask)
            d = d[mask.to_numpy(zero_copy_only=False)]
    return k.to_pylist(), v.to_pylist(), d
