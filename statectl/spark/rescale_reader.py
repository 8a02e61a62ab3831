"""The rescale's reader and router on the executors (:class:`ReadSnapshots`): the entries of source
snapshots as Arrow batches, each row with its target store by the partitioner (:func:`route_batch`: Kafka's
murmur2 vectorised over the batch's key column, statectl.formats.adstore.partitions_of). Each task downloads
its source snapshot from the blob store (:func:`fetch_snapshot`, CRC32-checked while it streams), reads it
whole as RocksDB does, checks that every key belongs to its source's task, and counts per source what it read
(an accumulator). :class:`CheckTargets` is the writers' check that every key they get is their target's."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from statectl.formats.adstore import partition_of, partitions_of
from statectl.spark.context import BuildError, BuildJob, one_line
from statectl.spark.submit import BuildSpec


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
        raise BuildError(f"partitioner {name}: {one_line(e)}") from None
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
                raise BuildError(f"snapshot {source['snapshot']} of {source['task']}: {rel}: {one_line(e)}") from None
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


_BATCH_BYTES = 4 << 20  # the reader's Arrow batches, about (keys and values)


class ReadSnapshots:
    """Arrow batches of (i, source) (source i of BuildSpec.snapshots, as JSON) -> batches of (store, k, v) for
    every entry of each source, store being the target the job's partitioner gives the key.

    A snapshot is read whole, as RocksDB reads it (its SST files of every level, tombstones, its WAL): the
    executor downloads its files from the blob store into a temporary dir and iterates a read-only open of
    it. Reading SST files one by one would be wrong for a store that is not fully compacted: a key can be
    in several levels, and a deletion in a newer file hides it. The entries come in key order, in batches of
    about _BATCH_BYTES; the keys are checked against the source's task and routed a batch at a time."""

    def __init__(self, job: BuildJob, stats: Any):
        self.job = job
        self.stats = stats

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import shutil

        spec = self.job.spec
        blobs = self.job.blobstore(spec.source_store)
        try:
            for b in batches:
                for i, text in zip(b.column(0).to_pylist(), b.column(1).to_pylist()):
                    source = json.loads(text)
                    work = Path(tempfile.mkdtemp(prefix="statectl-rescale-src-", dir=_app_dir()))
                    try:
                        read = fetch_snapshot(blobs, source, work)
                        keys = yield from self._entries(i, source, work)
                        self.stats.add({i: {"task": source["task"], "snapshot": source["snapshot"], "keys": keys,
                                            "bytes_read": read}})
                    finally:
                        shutil.rmtree(work, ignore_errors=True)
        finally:
            blobs.close()

    def _entries(self, i: int, source: dict[str, Any], work: Path) -> Iterator[Any]:
        """The batches of source ``i``, downloaded into ``work``: a key-group source's own key groups only, a
        hash-partitioned source's keys checked against its task. Returns the number of entries."""
        import itertools

        import pyarrow as pa

        from statectl.rocks.store import open_readonly

        spec = self.job.spec
        m = spec.partitions_out or 1
        try:
            db = open_readonly(work)
        except Exception as e:
            raise BuildError(f"snapshot {source['snapshot']} of {source['task']}: cannot open it: "
                             f"{one_line(e)}") from None
        try:
            others = [cf for cf in _rocksdict().Rdict.list_cf(str(work)) if cf != "default"]
            if others:  # re-partitioning only the default one would drop them silently
                raise BuildError(f"snapshot {source['snapshot']} of {source['task']} has column families "
                                 "besides the default one ({}): rescale re-partitions single-column-family "
                                 "stores only".format(", ".join(sorted(others))))
            bounds = _bounds(source, spec.partitioner)  # alive while the iterator is: it holds its bound
            items = db.items(**bounds)
            rows, n = 256, 0
            while True:
                chunk = list(itertools.islice(items, rows))
                if not chunk:
                    break
                ks, vs = zip(*chunk)
                k, v = pa.array(ks, pa.binary()), pa.array(vs, pa.binary())
                if source.get("groups") is None:
                    check_placed(spec, k, i, source)
                stores = route_batch(spec.partitioner, k, m, f"a key of {source['task']}")
                yield pa.RecordBatch.from_arrays([stores, k, v], ["store", "k", "v"])
                n += len(ks)
                rows = max(64, min(65536, _BATCH_BYTES * len(ks) // max(1, k.nbytes + v.nbytes)))
            del items, bounds
            return n
        finally:
            db.close()


def _bounds(source: dict[str, Any], partitioner: str | None) -> dict[str, Any]:
    """The items() arguments that read a key-group source (``groups``) in its own key groups only; none (every
    key) for any other."""
    if source.get("groups") is None:
        return {}
    from statectl.formats.keygroups import group_bound

    first, last = source["groups"]
    groups = load_partitioner(partitioner).groups
    opts = _rocksdict().ReadOptions()
    opts.set_iterate_upper_bound(group_bound(last + 1, groups))
    return {"from_key": group_bound(first, groups), "read_opt": opts}


def route_batch(name: str | None, keys: Any, partitions: int, what: str) -> Any:
    """The task of each key of ``keys`` (a pyarrow binary array) under partitioner ``name`` into
    ``partitions`` tasks, as a pyarrow int32 array: Kafka's (None, ``murmur2``) vectorised in numpy, any other
    called per key. BuildError naming the partitioner when it fails or gives something else than a task
    number (``what``: the key's place)."""
    import pyarrow as pa

    if not name or name == "murmur2":
        return pa.array(partitions_of(keys, partitions), pa.int32())
    route = load_partitioner(name)
    out = []
    for key in keys.to_pylist():
        try:
            target = route(key, partitions)
        except Exception as e:
            raise BuildError(f"partitioner {name}: {one_line(e)}") from None
        if not isinstance(target, int) or not 0 <= target < partitions:
            raise BuildError(f"partitioner {name} gave {target!r} for {what}: expected 0..{partitions - 1}")
        out.append(target)
    return pa.array(out, pa.int32())


def check_placed(spec: BuildSpec, keys: Any, i: int, source: dict[str, Any]) -> None:
    """BuildError when a key of ``keys`` (of source ``i``) does not route to task i under
    (spec.source_partitioner, spec.partitions_in): the sources are not the layout the rescale assumes, and
    the targets would hold a mix of two partitionings. Nothing to check without spec.partitions_in."""
    import pyarrow.compute as pc

    n = spec.partitions_in
    if not n:
        return
    name = spec.source_partitioner or "murmur2"
    tasks = route_batch(spec.source_partitioner, keys, n, f"a key of {source['task']}")
    wrong = pc.not_equal(tasks, i)
    if not pc.any(wrong).as_py():
        return
    at = pc.index(wrong, True).as_py()
    key, j = keys[at].as_py(), tasks[at].as_py()
    raise BuildError(f"the sources are not a {n}-way layout by {name}: key {key[:40]!r} of {source['task']} "
                     f"(snapshot {source['snapshot']}) belongs to task {j} of {n}, not {i}; nothing was written")


class CheckTargets:
    """The writers' check of a batch of one target's rows: every key routes to that target under the job's
    partitioner. The message names the key, the target and the task it belongs to."""

    def __init__(self, job: BuildJob):
        self.job = job

    def __call__(self, keys: Any, target: int) -> None:
        import pyarrow.compute as pc

        spec = self.job.spec
        m = spec.partitions_out or 1
        tasks = route_batch(spec.partitioner, keys, m, f"a key of target {target}")
        wrong = pc.not_equal(tasks, target)
        if not pc.any(wrong).as_py():
            return
        at = pc.index(wrong, True).as_py()
        raise BuildError(f"rescale verification failed, nothing was committed: {pc.sum(wrong).as_py()} keys of "
                         f"target {target} belong to another task (e.g. {keys[at].as_py()!r} of task "
                         f"{tasks[at].as_py()})")


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


def _rocksdict() -> Any:
    import rocksdict

    return rocksdict


def snapshots_frame(spark: Any, job: BuildJob) -> tuple[Any, Any]:
    """The entries of every source snapshot as a DataFrame (store, k, v), one source per read task, and the
    accumulator of what each read (:class:`_SourceStatsParam`)."""
    sc = spark.sparkContext
    stats = sc.accumulator({}, _SourceStatsParam())  # pyspark calls zero and addInPlace only
    sources = [(i, json.dumps(s)) for i, s in enumerate(job.spec.snapshots)]
    rows = sc.parallelize(sources, max(1, len(sources)))
    frame = spark.createDataFrame(rows, "i int, source string")
    return frame.mapInArrow(ReadSnapshots(job, stats), "store int, k binary, v binary"), stats
