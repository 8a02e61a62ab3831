"""Running a dataset-versions load (:func:`load_dataset_versions`): the stores laid out and refused unless
they are versioned adstores, each resumed from its cursor, then every partition read round-robin, records
applied to the version being built until the marker, each store's version ended at the marker of all its
partitions (engine.adstore.dataset_chain).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from statectl.engine.adstore.common import AdstoreExtractError, check_partition, partition_count
from statectl.engine.adstore.dataset import (
    BATCH,
    DatasetLoadOptions,
    DatasetLoadResult,
    DatasetPart,
    DatasetStore,
    marker_value,
)
from statectl.engine.adstore.dataset_chain import (
    drop_builds,
    end_version,
    flush,
    loader_lock,
    put_entry,
    resume_store,
)
from statectl.errors import DiskFullError, UsageError, is_disk_full
from statectl.formats.adstore import AdRecord, ExtractError
from statectl.formats.checkpoint import SSP
from statectl.local.layout import store_dir
from statectl.progress import NullProgress, ProgressReporter


def load_dataset_versions(opts: DatasetLoadOptions, *, stop: threading.Event | None = None,
                          progress: ProgressReporter | None = None) -> DatasetLoadResult:
    """Read the topic's dataset versions into versioned stores (see the module doc): seal and switch to
    each version whose marker every partition of a store has seen; with ``follow`` go on until ``stop``.

    Idempotent: a load run again resumes after the last marker handled and never rebuilds a sealed
    version. Raises UsageError for bad options, a target that is not a versioned adstore (a topic's or a
    job's store dir), or a store whose cursor names another topic; NotFoundError (exit 10) for a missing
    topic or partition; LockHeldError (exit 11) while another adstore load or switch runs on a store;
    AdstoreExtractError (exit 1) for a record the spec cannot handle (the version being built is dropped;
    the current one is untouched); StatectlError when the recorded offsets fell off the topic or the
    brokers cannot be reached; DiskFullError (exit 1). Bad markers are not errors: they are refused and
    reported in the result (see the module doc). ``stop`` ends the load between batches; a version not yet
    sealed is dropped then.

    With ``opts.dry_run`` nothing is written and no lock taken (a load running meanwhile is not waited for):
    the records there now are read to the end offsets taken at start (``follow`` reads no further) and
    counted, the markers judged as the load judges them, and the result lists the versions the load would
    seal (their numbers, previous and pruned versions; ``keys`` and ``checksum`` None) and the markers it
    would refuse. It raises what the load raises (LockHeldError too: another loader of a store runs), but
    DiskFullError."""
    from statectl.kafka.client import open_consumer

    opts.validate()
    if opts.dry_run and opts.follow:
        opts = replace(opts, follow=False)
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    result = DatasetLoadResult(opts.topic, opts.marker_source(), dry_run=opts.dry_run)
    consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    stores: list[DatasetStore] = []
    with ExitStack() as stack:
        stack.callback(consumer.close)
        layout = _layout(opts, _partitions(opts, consumer))
        _lock_stores(layout, opts, stack)
        try:
            extract = opts.record_extractor()
            for path, ps in layout:
                stores.append(resume_store(path, ps, opts, consumer, progress))
            stack.callback(drop_builds, stores)
            _run(stores, opts, extract, stop, progress, result)
        except ExtractError as e:
            raise UsageError(str(e)) from None
        except Exception as e:  # RocksDB's own "IO error: No space left on device" is no OSError
            if is_disk_full(e) and not isinstance(e, DiskFullError):
                raise DiskFullError(f"no space left on device loading {opts.topic} into {layout[0][0].parent}; the "
                                    "version being built is dropped, the current one is untouched",
                                    hint=f"free some space in {layout[0][0].parent}") from e
            raise
        finally:
            for s in stores:
                for part in s.parts:
                    if part.gen is not None:
                        part.gen.close()
                    if part.consumer is not None:
                        part.consumer.close()
    return _finish(result, stores, opts, progress, began)


def _partitions(opts: DatasetLoadOptions, consumer: Any) -> list[int]:
    """The partitions the load reads (``opts.partitions``, default all); NotFoundError for a topic or a
    partition that is not there."""
    n = partition_count(consumer, opts.topic, opts.bootstrap)
    parts = sorted(set(opts.partitions)) if opts.partitions is not None else list(range(n))
    for p in parts:
        check_partition(opts.topic, n, p)
    return parts


def _lock_stores(layout: list[tuple[Path, list[int]]], opts: DatasetLoadOptions, stack: ExitStack) -> None:
    """Refuse a store dir that is not a versioned adstore (a topic's or a job's) before anything is written,
    then take every store's loader lock (a dry run only checks that it is free)."""
    from statectl.local.versions import current_version

    for path, _ in layout:
        current_version(path)
        if os.path.lexists(path) and not path.is_symlink():
            raise UsageError(f"{path} is not a versioned adstore")
    for path, _ in layout:
        if opts.dry_run:
            loader_lock(path).check_free()  # as the load would refuse, taking nothing
        else:
            stack.enter_context(loader_lock(path))


def _finish(result: DatasetLoadResult, stores: list[DatasetStore], opts: DatasetLoadOptions,
            progress: ProgressReporter, began: float) -> DatasetLoadResult:
    """The result with each store's current version, its cursor's offsets and its figures."""
    from statectl.local.versions import current_version

    for s in stores:
        s.load.version = s.dry.current if s.dry is not None else current_version(s.path)
        s.load.dataset_version = s.cursor.dataset_version
        s.load.offsets = {SSP(opts.system, opts.topic, p.partition).key(): s.cursor.offsets.get(p.partition)
                          for p in s.parts}
        result.offsets.update(s.load.offsets)
        result.stores.append(s.load)
        result.records += s.load.records
        result.bytes += s.load.bytes
        result.versions_sealed += len(s.load.sealed)
        result.refused += s.refused_lines
    current = {s.load.version for s in stores}
    result.version = current.pop() if len(current) == 1 else None
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(progress.notes) + result.notes
    return result


def _layout(opts: DatasetLoadOptions, parts: list[int]) -> list[tuple[Path, list[int]]]:
    if opts.broadcast:
        path = Path(opts.store_dir) if opts.store_dir is not None else store_dir(Path(opts.state_dir), opts.store,
                                                                                  opts.task)
        return [(path.absolute(), parts)]
    return [(store_dir(Path(opts.state_dir), opts.store, f"Partition {p}").absolute(), [p]) for p in parts]


def _run(stores: list[DatasetStore], opts: DatasetLoadOptions, extract: Any, stop: threading.Event,
         progress: ProgressReporter, result: DatasetLoadResult) -> None:
    """Round-robin over every partition of every store: apply records, stop a partition at its marker,
    seal a store once all its partitions are at a marker. Without ``follow``, ends when every partition
    is read to the end it had at start (or is at a marker the others of its store have not reached)."""
    from statectl.kafka.client import PartitionReader, open_consumer

    nparts = sum(len(s.parts) for s in stores)
    poll_ms = max(20, 300 // max(1, nparts))
    for s in stores:
        for part in s.parts:
            part.consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
            part.reader = PartitionReader(part.consumer, opts.topic, part.partition, opts.bootstrap,
                                          empty_poll_ms=poll_ms)
            part.reader.seek(part.next_offset)
            part.gen = part.reader.batches(follow=opts.follow)
    if opts.follow:
        progress.note(f"following the dataset versions of {opts.topic} (markers: {opts.marker_source()}) until stopped")
    while not stop.is_set():
        busy = False
        for s in stores:
            for part in s.parts:
                if part.marker is not None or part.exhausted:
                    continue
                if not part.buf:
                    try:
                        part.buf = list(next(part.gen))
                    except StopIteration:
                        part.exhausted = True
                        continue
                if part.buf:
                    busy = True
                    _consume(s, part, opts, extract, result)
                if stop.is_set():
                    break
            if all(p.marker is not None for p in s.parts):
                end_version(s, opts, progress)
                busy = True
            if stop.is_set():
                break
        if not result.bootstrapped and all(p.exhausted or p.marker is not None or (p.reader.caught_up and not p.buf)
                                           for s in stores for p in s.parts):
            result.bootstrapped = True  # every partition read to its end (or to a marker it waits at)
        if not opts.follow and not busy and result.bootstrapped:
            break
    for s in stores:
        s.load.pending_records = s.records
        if s.records or s.build is not None:
            waiting = [p.partition for p in s.parts if p.marker is None]
            progress.note(f"{s.path}: {s.records} records of the next dataset version are not kept: its marker "
                          f"has not reached partition{'s' if len(waiting) != 1 else ''} "
                          f"{', '.join(map(str, waiting))} yet (the next load builds it again from its start)")


def _consume(s: DatasetStore, part: DatasetPart, opts: DatasetLoadOptions, extract: Any, result: DatasetLoadResult) -> None:
    """Apply the partition's buffered records up to its marker (kept in ``part.marker``, what follows it
    stays buffered for the next version)."""
    buf, part.buf = part.buf, []
    for i, r in enumerate(buf):
        if marker_value(r, opts) is not None:
            part.marker = r
            part.buf = buf[i + 1:]
            break
        if extract is None:
            if r.key is None:
                result.skipped += 1
                continue
            kv = (r.key, r.value)
        else:
            try:
                kv = extract(AdRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
            except Exception as e:  # noqa: BLE001 - the user's extractor: any error names the record
                raise AdstoreExtractError(
                    f"topic {opts.topic} partition {r.partition} offset {r.offset}: cannot extract key and value "
                    f"({opts.spec.describe()}): {type(e).__name__ + ': ' if not isinstance(e, ExtractError) else ''}"
                    f"{e}", hint="fix the record or the extractor; the version being built was dropped, the "
                                 "current one is untouched") from None
            if kv is None:
                result.skipped += 1
                continue
        put_entry(s, kv[0], kv[1])
        if len(s.batch) >= BATCH:
            flush(s)
    flush(s)  # one WriteBatch per poll at most, as a topic load writes
