"""Writing a topic load's stores: a new store made whole with its offsets file before any RocksDB file, each
poll's records applied in a WriteBatch (by the extractor, or the record's own bytes through the store's
serdes), the WAL synced and the offsets recorded after each flush, the bootstrap to the end offsets taken
at start, ``--follow`` until stopped, and a broadcast store's copies for the other tasks.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from statectl import failpoints
from statectl.engine.adstore.common import AdstoreExtractError
from statectl.engine.adstore.topic import LoadResult, Target, TopicLoadOptions
from statectl.engine.adstore.topic_stores import (
    HELD_HINT,
    TOPIC_ID_FILE,
    check_not_held,
    disk_full,
    os_error,
    recorded_topic_ids,
    ssps_of,
)
from statectl.errors import LockHeldError, StatectlError, UsageError, is_disk_full
from statectl.formats.adstore import AdRecord, ExtractError
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_side_input_offsets
from statectl.fsutil import chown_tree, fsync_dir, make_dirs, owner_of
from statectl.kafka.client import OffsetOutOfRange
from statectl.local.staged import StagedStore, remove_dead_temp_dirs
from statectl.progress import ProgressReporter

FLUSH_RECORDS = 500_000  # sync the WAL and record the offsets at least this often...
FLUSH_SECONDS = 2.0      # ...and at least this often while records come


def open_store(t: Target, opts: TopicLoadOptions | None = None) -> None:
    """Open the store to write into: a new one is first made whole, holding its offsets file (so that a
    load killed at any moment leaves a dir this module can prove is its own), then opened. ``opts``:
    the target's own by default."""
    opts = opts if opts is not None else t.opts
    assert opts is not None
    if t.db is None:
        from statectl.rocks.live import LiveStore

        if not os.path.lexists(t.write_path / SIDE_INPUT_OFFSETS):
            _create(t, opts)
        record_topic_id(t, t.write_path)
        try:
            t.db = LiveStore(t.write_path)
        except LockHeldError as e:
            raise LockHeldError(str(e), hint=HELD_HINT) from None
        except StatectlError as e:
            if is_disk_full(e):
                raise disk_full(t.path) from e
            raise



def _create(t: Target, opts: TopicLoadOptions) -> None:
    """Give the dir written into its offsets file before any RocksDB file: a staged dir directly; a new
    store dir is made aside (named as local.staged names its temp dirs, so a kill leaves nothing the next
    staging does not remove) and renamed into place, which replaces an empty dir, never a non-empty one."""
    import uuid

    from statectl.local.staged import TMP_INFIX

    try:
        if t.staged is not None:
            write_side_input_offsets(t.write_path, offsets_of(t, opts))
            return
        make_dirs(t.path.parent, owner_of(t.path.parent))
        remove_dead_temp_dirs(t.path)
        tmp = t.path.parent / f".{t.path.name}{TMP_INFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            write_side_input_offsets(tmp, offsets_of(t, opts))
            os.rename(tmp, t.path)
        except BaseException:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(t.path.parent)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise UsageError(f"{t.path} was filled by another process while this load started: refusing to "
                             "replace it", hint="load again") from None
        raise os_error(t.path, e, "creating the store") from e



def record_offsets(t: Target, opts: TopicLoadOptions) -> None:
    """Sync the WAL, then write the offsets (they never claim more than is durable), then _give_away."""
    if t.db is None:
        return
    try:
        t.db.db.flush_wal(True)
    except Exception as e:
        raise _rocks_error(t, e) from e
    try:
        write_side_input_offsets(t.write_path, offsets_of(t, opts))
        _give_away(t)
    except OSError as e:
        raise os_error(t.path, e, f"writing {OFFSET_V2} and {SIDE_INPUT_OFFSETS}") from e
    t.pending = 0



def _give_away(t: Target) -> None:
    """Run as root, a store written in place (created or resumed) is its parent dir's owner's, as a staged
    one is once swapped in (StagedStore): the job's user opens it."""
    if t.staged is None:
        chown_tree(t.path, owner_of(t.path.parent))



def close_store(t: Target, opts: TopicLoadOptions, *, quietly: bool = False) -> None:
    if t.db is None:
        return
    try:
        if not quietly:
            record_offsets(t, opts)
        t.db.close()
        _give_away(t)  # closing flushes into new files
    except BaseException:
        if not quietly:
            raise
    finally:
        t.db = None



def _rocks_error(t: Target, e: Exception) -> Exception:
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if is_disk_full(e):
        return disk_full(t.path)
    return StatectlError(f"RocksDB write in {t.write_path} failed: {msg}")



def offsets_of(t: Target, opts: TopicLoadOptions) -> dict[SSP, str]:
    """The newest offset applied per partition of the store; a partition nothing was applied from yet is
    left out, as TaskSideInputStorageManager.writeFileOffsets leaves out an SSP without a processed message
    (Samza writes no nulls; its next start deletes such a store as mismatched: ``adstore status`` says so)."""
    return {SSP(opts.system, topic, p): str(t.offsets[(topic, p)])
            for topic, p in list(t.parts) + [tp for tp in t.offsets if tp not in t.parts]
            if t.offsets.get((topic, p)) is not None}



def record_topic_id(t: Target, path: Path) -> None:
    """Record the id of the topic whose offsets the store keeps, before anything of it is applied: the
    next load tells a topic deleted and recreated since (same name, offsets that may well be in range)
    from the one it loaded, and rebuilds. Samza ignores the file (it reads only the offsets file). Also
    records the store's side-input SSPs (engine.adstore.status.SIDE_INPUTS_FILE, for ``adstore status``)."""
    from statectl.engine.adstore.status import record_side_inputs

    if t.opts is not None:
        try:
            record_side_inputs(path, ssps_of(t, t.opts))
        except OSError as e:
            raise os_error(t.path, e, "recording the side inputs") from e
    if not t.topic_ids or recorded_topic_ids(path) == t.topic_ids:
        return
    from statectl.fsutil import SYNC_NONE, write_atomic

    try:
        write_atomic(path / TOPIC_ID_FILE, "".join(f"{i} {topic}\n" for topic, i in sorted(t.topic_ids.items())),
                     sync=SYNC_NONE)
    except OSError as e:
        raise os_error(t.path, e, f"writing {TOPIC_ID_FILE}") from e



def clone_store(src: Target, dst: Target, result: LoadResult) -> None:
    """Make ``dst``'s store (a broadcast store of another task) from ``src``'s, as loaded: a RocksDB
    checkpoint of it (its SST files hard-linked, its small metadata files copied) plus its offset and
    statectl files, built aside and swapped in (a kill leaves ``dst`` as it was). ``dst`` then holds what
    ``src`` holds, at the same offsets."""
    from statectl.rocks.store import create_checkpoint

    close_store(src, src.opts)  # the checkpoint opens the store itself
    try:
        with StagedStore(dst.path, what="broadcast copy", disk_full=lambda: disk_full(dst.path),
                         sync="dirs") as staged:
            staged.path.rmdir()  # the checkpoint makes its dir
            create_checkpoint(src.path, staged.path)
            for f in sorted(src.path.iterdir()):  # the files RocksDB does not know: offsets, statectl's records
                if f.is_file() and not (staged.path / f.name).exists() and f.name != "LOCK" \
                        and not f.name.startswith("LOG"):
                    shutil.copy2(f, staged.path / f.name)
            if dst.path.exists():
                check_not_held(dst.path)
            staged.commit()
            result.notes += staged.notes
    except OSError as e:
        raise os_error(dst.path, e, "making the broadcast copy") from e
    dst.offsets = dict(src.offsets)
    dst.load.offsets = dict(src.load.offsets)



def apply(t: Target, records: list[Any], extract: Any, opts: TopicLoadOptions, result: LoadResult) -> None:
    """Apply one poll's records of one partition in a WriteBatch; on an extractor or serde error, apply
    those before the bad record, record the offsets, and raise AdstoreExtractError. Without an extractor,
    the key and value go through the store's serdes (formats.serdes.round_trip), as Samza's identity
    side-inputs processor reads them (SideInputsManager.createSideInputProcessors) and its store writes them."""
    import rocksdict

    wb = rocksdict.WriteBatch(raw_mode=True)
    n = nbytes = 0
    last = None
    failure: AdstoreExtractError | None = None
    entry = _entry_of(extract, opts)
    for r in records:
        try:
            kv = entry(r)
        except AdstoreExtractError as e:
            failure = e
            break
        last = r.offset
        if kv is None:
            result.skipped += 1
            continue
        key, value = kv
        if value is None:
            wb.delete(key)
            nbytes += len(key)
        else:
            wb.put(key, value)
            nbytes += len(key) + len(value)
        n += 1
    try:
        failpoints.hit("adstore-apply")
        t.db.db.write(wb)
    except Exception as e:
        raise _rocks_error(t, e) from e
    if last is not None:
        t.offsets[(records[0].topic, records[0].partition)] = last
    t.pending += n
    t.load.records += n
    t.load.bytes += nbytes
    if failure is not None:
        record_offsets(t, opts)
        raise failure


Entry = Optional[tuple[bytes, Optional[bytes]]]


def _entry_of(extract: Any, opts: TopicLoadOptions) -> Callable[[Any], Entry]:
    """record -> its entry (key, value; a None value deletes), or None to skip it: by ``extract``, else the
    record's own key and value through the store's serdes (a record without a key is skipped). The callable
    raises AdstoreExtractError naming the record it cannot handle."""
    if extract is not None:
        def extracted(r: Any) -> Entry:
            try:
                return extract(AdRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
            except Exception as e:  # noqa: BLE001 - the user's extractor: any error names the record
                raise AdstoreExtractError(
                    f"topic {r.topic} partition {r.partition} offset {r.offset}: cannot extract key and value "
                    f"({opts.spec.describe()}): {type(e).__name__ + ': ' if not isinstance(e, ExtractError) else ''}"
                    f"{e}", hint="fix the record or the extractor; the load resumes at this record") from None

        return extracted
    from statectl.formats.serdes import SerdeError, kind_of, round_trip

    kserde = kind_of(opts.key_serde) if opts.key_serde else None
    vserde = kind_of(opts.value_serde) if opts.value_serde else None

    def own(r: Any) -> Entry:
        key, value = r.key, r.value
        if key is None:
            return None
        where = ""
        try:
            if kserde:
                where = f"key ({kserde} serde)"
                key = round_trip(kserde, key)
            if vserde and value is not None:
                where = f"value ({vserde} serde)"
                value = round_trip(vserde, value)
        except SerdeError as e:
            raise AdstoreExtractError(
                f"topic {r.topic} partition {r.partition} offset {r.offset}: cannot read the {where}: {e}",
                hint="fix the record or the serde (--key-serde/--value-serde, or the job's stores.<store>."
                     "key.serde/msg.serde); the load resumes at this record") from None
        return key, value

    return own


def bootstrap(targets: list[Target], opts: TopicLoadOptions, consumer: Any, extract: Any,
               stop: threading.Event, progress: ProgressReporter, result: LoadResult) -> None:
    """Read every partition to its end (as the load began), store by store, on one consumer."""
    from statectl.kafka.client import PartitionReader

    total = sum(len(t.parts) for t in targets)
    progress.start(f"loading {', '.join(opts.all_topics)}", 0, total)
    try:
        for t in targets:
            open_store(t, opts)
            last_flush = time.monotonic()
            for topic, p in t.parts:
                if stop.is_set():
                    break
                reader = PartitionReader(consumer, topic, p, opts.bootstrap)
                off = t.offsets.get((topic, p))
                reader.seek(None if off is None else off + 1)
                for batch in reader.batches():
                    before = t.load.bytes
                    apply(t, batch, extract, opts, result)
                    progress.advance(t.load.bytes - before)
                    now = time.monotonic()
                    if t.pending >= FLUSH_RECORDS or now - last_flush >= FLUSH_SECONDS:
                        record_offsets(t, opts)
                        last_flush = now
                    if stop.is_set():
                        break
                progress.file_done()
            record_offsets(t, opts)
            if t.staged is not None and stop.is_set():
                break  # an interrupted rebuild is thrown away: the old store stays as it was
            close_store(t, opts)
    finally:
        progress.stop()



def follow(targets: list[Target], opts: TopicLoadOptions, extract: Any, stop: threading.Event,
           progress: ProgressReporter, result: LoadResult) -> None:
    """Keep applying new records of every partition until ``stop``: a reader (and consumer) per partition,
    polled in turn; each store's offsets are recorded after each flush. Brokers that stop answering are
    ridden out (the readers poll nothing meanwhile). The topic deleted and recreated (kafka.tails.TopicWatch,
    asked before each flush) stops the load with a StatectlError, recording nothing more: the stores keep
    the offsets of the old topic, which the next load finds off the new one, and rebuilds."""
    from statectl.kafka.client import open_consumer
    from statectl.kafka.tails import TopicWatch

    readers: list[tuple[Target, Iterator[list[Any]], Any]] = []
    recreated = False
    watch_consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    try:
        watches = {topic: TopicWatch(watch_consumer, topic, opts.bootstrap) for topic in opts.all_topics}
        _open_readers(targets, opts, readers)
        progress.note(f"following {', '.join(opts.all_topics)}: caught up; applying new records until stopped")
        last_flush = time.monotonic()
        while not stop.is_set():
            for t, gen, _ in readers:
                try:
                    batch = next(gen)
                except OffsetOutOfRange as e:
                    # A reader may meet the recreated topic before the watch is asked (its position past the
                    # new log's end): ask it now, so the error says what happened, as at a flush.
                    recreated = True
                    raise _recreated(watches, targets, progress) or StatectlError(
                        f"adstore load --follow stopped: {e}; the stores keep the offsets of what they applied "
                        "before", hint="run the load again: it rebuilds the stores from the topic as it is now") \
                        from None
                if batch:
                    apply(t, batch, extract, opts, result)
                if stop.is_set():
                    break
            now = time.monotonic()
            if now - last_flush >= FLUSH_SECONDS or any(t.pending >= FLUSH_RECORDS for t in targets):
                gone = _recreated(watches, targets, progress)
                if gone is not None:
                    recreated = True
                    raise gone
                for t in targets:
                    if t.pending:
                        record_offsets(t, opts)
                last_flush = now
    finally:
        for t in targets:
            try:
                close_store(t, opts, quietly=recreated)  # records of a recreated topic are never recorded
            except StatectlError:
                pass
        for _, gen, c in readers:
            gen.close()
            c.close()
        watch_consumer.close()


def _open_readers(targets: list[Target], opts: TopicLoadOptions,
                  readers: list[tuple[Target, Iterator[list[Any]], Any]]) -> None:
    """Open every store and a following reader (on a consumer of its own) per partition, each from the
    offset after the newest applied; added to ``readers`` as they open (the caller closes them)."""
    from statectl.kafka.client import PartitionReader, open_consumer

    poll_ms = max(20, 300 // max(1, sum(len(t.parts) for t in targets)))
    for t in targets:
        open_store(t)
        for topic, p in t.parts:
            c = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
            reader = PartitionReader(c, topic, p, opts.bootstrap, empty_poll_ms=poll_ms)
            off = t.offsets.get((topic, p))
            reader.seek(None if off is None else off + 1)
            readers.append((t, reader.batches(follow=True), c))


def _recreated(watches: dict[str, Any], targets: list[Target], progress: ProgressReporter) -> StatectlError | None:
    """The error to stop on for the first topic deleted and recreated under the follower, or None."""
    return next((g for g in (_topic_recreated(w, topic, targets, progress) for topic, w in watches.items())
                 if g is not None), None)


def _topic_recreated(watch: Any, topic: str, targets: list[Target],
                     progress: ProgressReporter) -> StatectlError | None:
    """The error (exit 1) to stop on when the topic was deleted and recreated (or its log no longer holds
    the next offsets) under the follower; None otherwise. A broker that does not answer is a note, once."""
    from statectl.kafka.client import OffsetOutOfRange

    was = watch.outage
    try:
        watch.check({p: None if t.offsets.get((tp, p)) is None else t.offsets[(tp, p)] + 1
                     for t in targets for tp, p in t.parts if tp == topic})
    except OffsetOutOfRange as e:
        return StatectlError(f"adstore load --follow of {topic} stopped: {e}; the stores keep the offsets of "
                             "what they applied before", hint="run the load again: it rebuilds the stores from the "
                                                              "topic as it is now")
    if watch.outage is not None and watch.outage != was:
        progress.note(f"following {topic}: {watch.outage}; following on")
    return None
