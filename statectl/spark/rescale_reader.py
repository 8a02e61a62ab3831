"""The rescale's reader on the executors: the entries of source snapshots, re-routed to their target by the
partitioner (:func:`load_partitioner`). Each task downloads its source snapshots from the blob store
(:func:`fetch_snapshot`, CRC32-checked while it streams), reads each whole as RocksDB does, checks that every
key belongs to its source's task, and counts per source what it read (an accumulator)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from statectl.formats.adstore import Digest, partition_of
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


class _ReadSnapshots:
    """A task's source snapshots -> ((target store, key, (source index,)), value) for every entry.

    A snapshot is read whole, as RocksDB reads it (its SST files of every level, tombstones, its WAL): the
    executor downloads its files from the blob store into a temporary dir and iterates a read-only open of
    it. Reading SST files one by one would be wrong for a store that is not fully compacted: a key can be
    in several levels, and a deletion in a newer file hides it."""

    def __init__(self, job: BuildJob, stats: Any):
        self.job = job
        self.stats = stats

    def __call__(self, items: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[tuple[tuple[int, bytes, tuple], bytes]]:
        import shutil

        spec = self.job.spec
        route = load_partitioner(spec.partitioner)
        placed = _placed_check(spec)
        blobs = self.job.blobstore(spec.source_store)
        try:
            for i, source in items:
                work = Path(tempfile.mkdtemp(prefix="statectl-rescale-src-", dir=_app_dir()))
                try:
                    read = fetch_snapshot(blobs, source, work)
                    digest = Digest()
                    yield from self._entries(i, source, work, route, placed, digest)
                    self.stats.add({i: {"task": source["task"], "snapshot": source["snapshot"], "keys": digest.keys,
                                        "digest": digest.as_json(), "bytes_read": read}})
                finally:
                    shutil.rmtree(work, ignore_errors=True)
        finally:
            blobs.close()

    def _entries(self, i: int, source: dict[str, Any], work: Path, route: Any, placed: Any,
                 digest: Digest) -> Iterator[tuple[tuple[int, bytes, tuple], bytes]]:
        """The entries of source ``i``, downloaded into ``work``, each with its target (``route``); a
        key-group source's own key groups only, a hash-partitioned source's keys checked by ``placed``.
        ``digest`` adds every entry read."""
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
                                 f"besides the default one ({', '.join(sorted(others))}): rescale "
                                 "re-partitions single-column-family stores only")
            cursor = db.iter()
            end = _seek(cursor, source, route)
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
                    raise BuildError(f"partitioner {spec.partitioner}: {one_line(e)}") from None
                if not isinstance(target, int) or not 0 <= target < m:
                    raise BuildError(f"partitioner {spec.partitioner or 'murmur2'} gave {target!r} for a "
                                     f"key of {source['task']}: expected 0..{m - 1}")
                yield (target, key, (i,)), value
                cursor.next()
            del cursor
        finally:
            db.close()


def _seek(cursor: Any, source: dict[str, Any], route: Any) -> bytes | None:
    """Put ``cursor`` on the source's first key and return the key it ends before: a key-group source
    (``groups``) is read in its own key groups only; None (the end) for any other."""
    if source.get("groups") is None:
        cursor.seek_to_first()
        return None
    from statectl.formats.keygroups import group_bound

    first, last = source["groups"]
    groups = route.groups
    cursor.seek(group_bound(first, groups))
    return group_bound(last + 1, groups)


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
            raise BuildError(f"partitioner {name}: {one_line(e)}") from None
        if j != i:
            raise BuildError(f"the sources are not a {n}-way layout by {name}: key {key[:40]!r} of {source['task']} "
                             f"(snapshot {source['snapshot']}) belongs to task {j} of {n}, not {i}; nothing was "
                             "written")
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


def snapshots_rdd(sc: Any, job: BuildJob) -> tuple[Any, Any]:
    stats = sc.accumulator({}, _SourceStatsParam())  # pyspark calls zero and addInPlace only
    sources = list(enumerate(job.spec.snapshots))
    return sc.parallelize(sources, max(1, len(sources))).mapPartitions(_ReadSnapshots(job, stats)), stats
