"""The rescale's work on the executors (:class:`SplitSources`): each task takes source snapshots, reads each
once and writes its keys straight into one SST file per target it routes keys to, no shuffle. A source's keys
come in key order, so the subset routed to any one target is in key order too: each target's file of a source
is written as it is read, unsorted. Each task downloads its source snapshot from the blob store
(:func:`fetch_snapshot`, CRC32-checked while it streams), or takes the copy statectl downloaded the same way for
a local master's executors (:func:`prefetched`), reads it whole as RocksDB does, checks that every key
belongs to its source's task (:func:`check_placed`), routes the keys with the partitioner a batch at a time
(:func:`route_batch`: Kafka's murmur2 vectorised in numpy over the batch's keys packed into one buffer,
statectl.formats.adstore.packed_murmur2s, one hash of the batch for the check and the route: :class:`Routes`),
checks every key given to a target's file against that target (:func:`check_target`), and reports per source
the Digest of every entry it read and per target file the Digest of what it holds: the driver checks that they
add up."""


from __future__ import annotations

import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from statectl.formats.adstore import Digest, entry_digests, packed_murmur2s, partition_of, uint32s
from statectl.spark.context import BuildError, BuildJob, one_line
from statectl.spark.submit import BuildSpec
from statectl.spark.writer import StoreFiles


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


PREFETCH_WAIT_S = 300.0  # past this, an executor fetches its source itself: statectl has not


def prefetched(into: str | None, i: int) -> Path | None:
    """Source ``i``'s dir as statectl downloaded it into ``into`` (BuildSpec.prefetched) for this job, once it is
    there whole and checked; None when there is none (no such dir here: another machine's executor), or when
    statectl could not download it (the executor fetches it itself, and says what is wrong with it)."""
    if not into or not os.path.isdir(into):
        return None
    ready, failed = Path(into) / f"{i}.ready", Path(into) / f"{i}.failed"
    deadline = time.monotonic() + PREFETCH_WAIT_S
    while time.monotonic() < deadline:
        if ready.exists():
            return Path(into) / str(i)
        if failed.exists():
            return None
        time.sleep(0.02)
    return None


class WarmSplit:
    """A task's items passed through by a Python worker that first imports what :class:`SplitSources` imports
    (statectl.spark.job starts the workers with it while statectl writes the job file)."""

    def __call__(self, items: Iterable[Any]) -> Iterator[Any]:
        import numpy  # noqa: F401

        _rocksdict()
        yield from items


# the reader's batches, about (keys and values): at 1 MiB a batch's objects reuse the memory of the one before; at
# 4 MiB Python's allocator gives a batch's arenas back to the OS and faults new ones in for the next (four times the
# page faults, a tenth more CPU in a worker's first task)
_BATCH_BYTES = 1 << 20
_READAHEAD = 2 << 20  # the reader's readahead: its files are read start to end


class SplitSources:
    """A task's (i, source) pairs (source i of BuildSpec.snapshots, as JSON) -> one JSON record per source:
    {"source": i, "task", "snapshot", "keys", "bytes_read", "digest": the Digest of every entry read,
    "targets": [{"store", "rows", "duplicates": 0, "files": [...]}, ...], "began": the task's start (epoch
    seconds), "fetch_s" and "split_s": the download's and the read-and-write's time}, its files written as the Python
    path's writer names them, ``store-<target>-<i>-<seq>.sst`` (statectl.spark.writer), into out_dir or
    through the blob store.

    A snapshot is read whole, as RocksDB reads it (its SST files of every level, tombstones, its WAL): the
    executor downloads its files from the blob store into a temporary dir and iterates a read-only open of
    it. Reading SST files one by one would be wrong for a store that is not fully compacted: a key can be in
    several levels, and a deletion in a newer file hides it. ``written``: the accumulator of rows written
    (the build's status)."""

    def __init__(self, job: BuildJob, written: Any = None):
        self.job, self.written = job, written

    def __call__(self, sources: Iterable[tuple[int, str]]) -> Iterator[str]:
        import shutil

        spec = self.job.spec
        blobs = None  # opened for the first source not prefetched: a worker's first client costs 0.3 s of CPU
        try:
            for i, text in sources:
                began = time.time()
                source = json.loads(text)
                ready = prefetched(spec.prefetched, i)
                if ready is None and blobs is None:
                    blobs = self.job.blobstore(spec.source_store)
                work = ready or Path(tempfile.mkdtemp(prefix="statectl-rescale-src-", dir=_app_dir()))
                try:
                    read = sum(int(f["size"]) for f in source["files"]) if ready else fetch_snapshot(blobs, source, work)
                    fetched = time.time()
                    record = self._split(i, source, work)
                finally:
                    if not ready:
                        shutil.rmtree(work, ignore_errors=True)
                if self.written is not None:
                    self.written.add(record["keys"])
                yield json.dumps({**record, "source": i, "task": source["task"], "snapshot": source["snapshot"],
                                  "bytes_read": read, "began": began, "fetch_s": round(fetched - began, 3),
                                  "split_s": round(time.time() - fetched, 3)})
        finally:
            if blobs is not None:
                blobs.close()

    def _split(self, i: int, source: dict[str, Any], work: Path) -> dict[str, Any]:
        """Source ``i``, downloaded into ``work``, into its targets' files: a key-group source's own key groups
        only, a hash-partitioned source's keys checked against its task. Returns its record's figures."""
        from statectl.rocks.store import open_readonly

        spec = self.job.spec
        try:
            db = open_readonly(work)
        except Exception as e:
            raise BuildError(f"snapshot {source['snapshot']} of {source['task']}: cannot open it: "
                             f"{one_line(e)}") from None
        outs: dict[int, Any] = {}
        digest = Digest()
        collecting = gc.isenabled()
        gc.disable()  # the batches' tuples and lists hold no cycles: walking them cost a tenth of the task's CPU
        try:
            others = [cf for cf in _rocksdict().Rdict.list_cf(str(work)) if cf != "default"]
            if others:  # re-partitioning only the default one would drop them silently
                raise BuildError(f"snapshot {source['snapshot']} of {source['task']} has column families "
                                 "besides the default one ({}): rescale re-partitions single-column-family "
                                 "stores only".format(", ".join(sorted(others))))
            bounds = _bounds(source, spec.partitioner)  # alive while the iterator is: it holds its bound
            attempt = _attempt()
            for ks, vs, sizes in _batches(db, bounds):
                d = entry_digests(ks, vs, sizes[0])
                digest.merge(Digest(len(ks), ks[0], ks[-1], int(d.sum())))
                for t, tk, tv, td, size in self._route(i, source, ks, vs, d, sizes):
                    if t not in outs:
                        outs[t] = StoreFiles(self.job, self.job.stores[t], i, attempt)
                    outs[t].add(tk, tv, td, len(tk), size)
            del bounds
            targets = [outs[t].close() for t in sorted(outs)]
        finally:
            for o in outs.values():
                o.abort()
            db.close()
            if collecting:
                gc.enable()
        return {"keys": digest.keys, "digest": digest.as_json(), "targets": targets}

    def _route(self, i: int, source: dict[str, Any], ks: list[bytes], vs: list[bytes], d: Any,
               sizes: Any) -> Iterator[tuple[int, list[bytes], list[bytes], Any, int]]:
        """A batch of source ``i``'s entries (``d``: their entry digests; ``sizes``: the lengths of their keys and
        of their values) as (target, keys, values, digests, bytes) per target, in key order, each target's keys
        checked against it."""
        import numpy as np

        spec = self.job.spec
        m = spec.partitions_out or 1
        routes = Routes(ks, sizes[0])
        if source.get("groups") is None:
            check_placed(spec, routes, i, source)
        stores = routes.tasks(spec.partitioner, m, f"a key of {source['task']}")
        lo, hi = int(stores.min()), int(stores.max())
        if lo == hi:  # every key to one target (e.g. 2n -> n tasks by murmur2)
            check_target(spec, ks, lo, routes.again(spec.partitioner, m, ks))
            yield lo, ks, vs, d, int(sizes.sum())
            return
        order = np.argsort(stores, kind="stable")
        cuts = np.searchsorted(stores[order], np.arange(lo, hi + 2))
        for t in range(lo, hi + 1):
            idx = order[cuts[t - lo]:cuts[t - lo + 1]]
            if not len(idx):
                continue
            pick = idx.tolist()
            tk = Picked(ks, pick)
            check_target(spec, tk, t, routes.again(spec.partitioner, m, tk, idx))
            yield t, tk, Picked(vs, pick), d[idx], int(sizes[:, idx].sum())


def _batches(db: Any, bounds: dict[str, Any]) -> Iterator[tuple[list[bytes], list[bytes], Any]]:
    """(keys, values, their lengths: a numpy int64 array of two rows, the keys' and the values') of about
    _BATCH_BYTES each of the items of the read-only store ``db`` (within ``bounds``: items()'s arguments). One
    iterator's (key, value) tuples, taken a chunk at a time and split by two maps, cost about 0.6x two iterators
    in step; it reads ahead and leaves the block cache alone (each block is read once)."""
    import itertools
    from operator import itemgetter

    import numpy as np

    opts = bounds.get("read_opt") or _rocksdict().ReadOptions()
    opts.fill_cache(False)
    opts.set_readahead_size(_READAHEAD)
    items = db.items(**{**bounds, "read_opt": opts})
    key, value = itemgetter(0), itemgetter(1)
    rows = 1024
    while True:
        chunk = list(itertools.islice(items, rows))
        if not chunk:
            return
        ks, vs = list(map(key, chunk)), list(map(value, chunk))
        n = len(ks)
        sizes = np.empty((2, n), np.int64)
        sizes[0] = uint32s(map(len, ks))
        sizes[1] = uint32s(map(len, vs))
        yield ks, vs, sizes
        size = int(sizes.sum())
        rows = max(64, min(65536, _BATCH_BYTES * len(ks) // max(1, size)))


class Picked:
    """The items of ``seq`` at the indices ``at`` (a list), in that order, as a sequence (len, iteration, an item,
    a slice), without copying them out: a target's share of a batch goes to its SST writer straight from the
    batch's lists (each key and value is touched once, by the writer)."""

    __slots__ = ("seq", "at")

    def __init__(self, seq: list[Any], at: list[int]):
        self.seq, self.at = seq, at

    def __len__(self) -> int:
        return len(self.at)

    def __iter__(self) -> Iterator[Any]:
        return map(self.seq.__getitem__, self.at)

    def __getitem__(self, i: Any) -> Any:
        return Picked(self.seq, self.at[i]) if isinstance(i, slice) else self.seq[self.at[i]]


def murmur2s(keys: Any, lengths: Any = None) -> Any:
    """``toPositive(murmur2(key))`` of each of ``keys`` (a sequence of bytes), as a numpy uint32 array, from one
    join of the keys and their offsets; ``lengths``: theirs, a numpy array, when the caller has them."""
    import numpy as np

    n = len(keys)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(map(len, keys), np.int64, n) if lengths is None else lengths, out=offsets[1:])
    return packed_murmur2s(offsets, np.frombuffer(b"".join(keys), np.uint8))


def _attempt() -> int:
    """This task's attempt number (0 outside Spark): its unfinished files are named by it."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return 0
    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


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


class Routes:
    """The tasks of one batch's keys (a list of bytes; ``lengths``: theirs, a numpy array, when the caller has
    them) under the partitioners asked. Kafka's (None, ``murmur2``) hashes the batch once (:func:`murmur2s`): the
    sources' check, the routing and the targets' check take that hash modulo their counts of tasks."""

    def __init__(self, keys: Any, lengths: Any = None):
        self.keys, self._lengths, self._hashes = keys, lengths, None

    def tasks(self, name: str | None, partitions: int, what: str) -> Any:
        """:func:`route_batch` of the batch, as a numpy int32 array."""
        if name and name != "murmur2":
            return route_batch(name, self.keys, partitions, what)
        import numpy as np

        if self._hashes is None:
            self._hashes = murmur2s(self.keys, self._lengths)
        return (self._hashes % np.uint32(partitions)).astype(np.int32)

    def again(self, name: str | None, partitions: int, keys: Any, idx: Any = None) -> Any:
        """The tasks of ``keys``, the batch's keys at ``idx`` (all: None), computed anew for a check: from the
        batch's hash for Kafka's partitioner, by calling any other on each key."""
        if name and name != "murmur2":
            return _call_per_key(name, keys, partitions, "a key")
        tasks = self.tasks(name, partitions, "a key")
        return tasks if idx is None else tasks[idx]


def route_batch(name: str | None, keys: Any, partitions: int, what: str) -> Any:
    """The task of each key of ``keys`` (a sequence of bytes) under partitioner ``name`` into ``partitions``
    tasks, as a numpy int32 array: Kafka's (None, ``murmur2``) vectorised in numpy, any other called per key.
    BuildError naming the partitioner when it fails or gives something else than a task number (``what``: the
    key's place)."""
    if not name or name == "murmur2":
        import numpy as np

        return (murmur2s(keys) % np.uint32(partitions)).astype(np.int32)
    return _call_per_key(name, keys, partitions, what)


def _call_per_key(name: str, keys: Any, partitions: int, what: str) -> Any:
    """Partitioner ``name`` called on each of ``keys`` (route_batch)."""
    import numpy as np

    route = load_partitioner(name)
    out = []
    for key in keys:
        try:
            target = route(key, partitions)
        except Exception as e:
            raise BuildError(f"partitioner {name}: {one_line(e)}") from None
        if not isinstance(target, int) or not 0 <= target < partitions:
            raise BuildError(f"partitioner {name} gave {target!r} for {what}: expected 0..{partitions - 1}")
        out.append(target)
    return np.array(out, np.int32)


def check_placed(spec: BuildSpec, keys: Any, i: int, source: dict[str, Any]) -> None:
    """BuildError when a key of ``keys`` (of source ``i``; a list of bytes, or its Routes) does not route
    to task i under (spec.source_partitioner, spec.partitions_in): the sources are not the layout the rescale
    assumes, and the targets would hold a mix of two partitionings. Nothing to check without
    spec.partitions_in."""
    import numpy as np

    n = spec.partitions_in
    if not n:
        return
    routes = keys if isinstance(keys, Routes) else Routes(keys)
    name = spec.source_partitioner or "murmur2"
    tasks = routes.tasks(spec.source_partitioner, n, f"a key of {source['task']}")
    wrong = tasks != i
    if not wrong.any():
        return
    at = int(np.argmax(wrong))
    key, j = routes.keys[at], int(tasks[at])
    raise BuildError(f"the sources are not a {n}-way layout by {name}: key {key[:40]!r} of {source['task']} "
                     f"(snapshot {source['snapshot']}) belongs to task {j} of {n}, not {i}; nothing was written")


def check_target(spec: BuildSpec, keys: Any, target: int, tasks: Any = None) -> None:
    """BuildError when a key of ``keys`` (a sequence of bytes), given to target
    ``target``'s file, does not route there under the job's partitioner (``tasks``: the keys' tasks as
    Routes.again computed them; None: routed here). The message names the key and the task it belongs to."""
    import numpy as np

    if tasks is None:
        tasks = route_batch(spec.partitioner, keys, spec.partitions_out or 1, f"a key of target {target}")
    wrong = tasks != target
    if not wrong.any():
        return
    at = int(np.argmax(wrong))
    key = keys[at]
    raise BuildError(f"rescale verification failed, nothing was committed: {int(wrong.sum())} keys of "
                     f"target {target} belong to another task (e.g. {key!r} of task {int(tasks[at])})")


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
