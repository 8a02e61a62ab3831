"""Which stores a topic load fills and in what state it finds each: the targets of the options (partitioned,
broadcast and its copies, or the job model's task -> partitions), the proof that a dir is this adstore's
own (``check_ours``), and the recovery table (``assess``): create, resume from the recorded offsets, or
rebuild (a damaged store or offsets file, a stale store, offsets off the topic, a topic recreated since).
Reads only; a rebuild's staged dir is made here, written by engine.adstore.topic_write.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from statectl.engine.adstore.common import check_partition, partition_count
from statectl.engine.adstore.topic import (
    CLONED,
    CREATED,
    REBUILT,
    RESUMED,
    Part,
    StoreLoad,
    Target,
    TopicLoadOptions,
)
from statectl.errors import DiskFullError, LockHeldError, StatectlError, UsageError, is_disk_full
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, OffsetFileError, read_offsets
from statectl.kafka.client import OffsetOutOfRange
from statectl.local.layout import store_dir
from statectl.local.staged import StagedStore, remove_dead_temp_dirs

# In a topic's store: the id of the topic (KIP-516) its SIDE-INPUT-OFFSETS are offsets of.
TOPIC_ID_FILE = "STATECTL-TOPIC-ID"
HELD_HINT = ("stop the job (or process) that has the store open: adstore load never writes a store another "
             "process holds")


def prepare_stores(opts: TopicLoadOptions, consumer: Any) -> tuple[list[Target], list[Target]]:
    """The stores a topic load fills and (broadcast) the ones that get hard links of the first, each checked
    to be one this load may write (check_ours), reading only. NotFoundError for a topic that is not there."""
    from statectl.kafka.tails import topic_identity

    counts = {topic: partition_count(consumer, topic, opts.bootstrap) for topic in opts.all_topics}
    targets = _targets(opts, counts)
    clones = [Target(store_dir(Path(opts.state_dir), opts.store, task).absolute(), list(targets[0].parts),
                      StoreLoad(str(store_dir(Path(opts.state_dir), opts.store, task).absolute()),
                                targets[0].load.partitions, CLONED, task=task), opts=opts)
              for task in opts.tasks[1:]] if opts.broadcast else []
    topic_ids = {topic: topic_identity(consumer, topic, opts.bootstrap)[0] for topic in opts.all_topics}
    for t in targets + clones:
        t.topic_ids = {topic: i for topic, i in topic_ids.items() if i is not None}
        if check_ours(t) and t in clones:  # a refused load leaves nothing behind, not even a lock file
            _check_clone_topics(t, opts)
    return targets, clones



def _targets(opts: TopicLoadOptions, counts: dict[str, int]) -> list[Target]:
    """The stores of the load and the (topic, partition) pairs each holds. NotFoundError for a partition
    that no topic has (a named one), or a task's partition its topic lacks."""
    def target(path: Path, parts: list[Part], task: str | None) -> Target:
        parts = sorted(parts, key=lambda tp: (opts.all_topics.index(tp[0]), tp[1]))
        path = path.absolute()
        return Target(path, parts, StoreLoad(str(path), sorted({p for _, p in parts}), CREATED, task=task),
                       opts=opts)

    def check(topic: str, p: int) -> None:
        check_partition(topic, counts[topic], p)

    if opts.task_ssps is not None:
        out = []
        for task, parts in opts.task_ssps:
            for topic, p in parts:
                check(topic, p)
            out.append(target(store_dir(Path(opts.state_dir), opts.store, task), list(parts), task))
        return out
    wanted = sorted(set(opts.partitions)) if opts.partitions is not None else None
    if wanted is not None:
        for p in wanted:
            if all(p >= n for n in counts.values()):
                check(max(counts, key=lambda t: counts[t]), p)
    def parts_of(k: int | None) -> list[Part]:
        return [(topic, p) for topic in opts.all_topics for p in range(counts[topic])
                if (k is None or p == k) and (wanted is None or p in wanted)]

    if opts.broadcast:
        task = opts.tasks[0] if opts.tasks else opts.task
        path = Path(opts.store_dir) if opts.store_dir is not None else store_dir(Path(opts.state_dir), opts.store,
                                                                                  task)
        return [target(path, parts_of(None), task if opts.store_dir is None else None)]
    ks = wanted if wanted is not None else sorted({p for n in counts.values() for p in range(n)})
    return [target(store_dir(Path(opts.state_dir), opts.store, f"Partition {k}"), parts_of(k), f"Partition {k}")
            for k in ks]



def _check_clone_topics(t: Target, opts: TopicLoadOptions) -> None:
    """UsageError unless the store a broadcast copy replaces holds only this load's topics (never another
    topic's store)."""
    try:
        found = read_offsets(t.path / SIDE_INPUT_OFFSETS)
    except (OSError, OffsetFileError):
        return  # damaged: this module's store all the same, rebuilt as the recovery table says
    others = sorted({ssp.stream for ssp in found} - set(opts.all_topics))
    if others:
        raise UsageError(f"{t.path} holds topic {others[0]}, not {', '.join(opts.all_topics)}: refusing to replace "
                         "it with a broadcast copy", hint="load into another --store, or leave that task out of --tasks")



def assess(t: Target, opts: TopicLoadOptions, consumer: Any, *, dry_run: bool = False) -> None:
    """The recovery table for one store: sets ``t.load.case`` (and ``reason``), ``t.offsets``, and for a
    rebuild a StagedStore to build into.

    Only a dir this load can prove is an adstore of the topic is ever rebuilt: one holding a
    SIDE-INPUT-OFFSETS file (readable or damaged) that names no other topic. A missing or empty dir is
    created. Anything else is refused with UsageError before anything is written: a versioned adstore's
    link, a file, a dir without that file (a job's own store, a folder of files). ``dry_run`` (a plan)
    opens the store read-only and makes no staged dir."""
    if not check_ours(t):
        t.load.case = CREATED
        return
    check_not_held(t.path)  # a job holds it: never rebuild a store under it
    offsets, reason = _recorded_offsets(t, opts)
    if reason is None:
        reason = _out_of_date(t, opts, consumer, offsets)
    if reason is None:
        reason = _open_problem(t.path) if dry_run else _opens(t.path)  # a plan changes nothing of the store
    if reason is None:
        t.load.case = RESUMED
        t.offsets = offsets
        t.load.reason = _grown(t, opts)
        return
    t.load.case, t.load.reason = REBUILT, reason
    if dry_run:
        return
    remove_dead_temp_dirs(t.path)
    t.staged = StagedStore(t.path, what="adstore rebuild", disk_full=lambda: disk_full(t.path), sync="dirs")
    t.staged.open()  # committed by load_topic once built, aborted by it on every other way out


def _recorded_offsets(t: Target, opts: TopicLoadOptions) -> tuple[dict[Part, int | None], str | None]:
    """The offsets the store's SIDE-INPUT-OFFSETS records, or why the store is rebuilt instead (a damaged
    file or store, a topic recreated since, partitions this load does not put in it). UsageError for a store
    holding another topic's offsets."""
    from statectl.rocks.store import is_store

    reason = None
    offsets: dict[Part, int | None] = {}
    try:
        found = read_offsets(t.path / SIDE_INPUT_OFFSETS)
    except (OSError, OffsetFileError) as e:
        found, reason = {}, f"its {SIDE_INPUT_OFFSETS} file is damaged ({e})"
    topics = opts.all_topics
    foreign = [s.key() for s in found if s.system != opts.system or s.stream not in topics]
    if foreign:
        named = f"topic {topics[0]}" if len(topics) == 1 else f"topics {', '.join(topics)}"
        raise UsageError(f"{t.path} holds offsets of {', '.join(foreign[:3])}, not of {named}",
                         hint="load into another --store, or delete that store first")
    if reason is None and not is_store(t.path):
        reason = "its files are damaged (no CURRENT/MANIFEST)"
    loaded_from = recorded_topic_ids(t.path)
    for topic, now in t.topic_ids.items():
        was = loaded_from.get(topic)
        if reason is None and was and was != now:
            reason = (f"topic {topic} was deleted and recreated since it was loaded (topic id {was}, "
                      f"now {now}): its offsets are of the old topic")
    others = sorted((s.stream, s.partition) for s in found if (s.stream, s.partition) not in t.parts)
    if reason is None and others:  # e.g. a broadcast store loaded as partitioned: it holds their keys
        reason = (f"it holds {', '.join(f'partition {p} of {topic}' for topic, p in others[:5])} too, which this "
                  "load does not put in it")
    if reason is None:
        for ssp, value in found.items():
            try:
                offsets[(ssp.stream, ssp.partition)] = None if value is None else int(value)
            except ValueError:
                reason = f"its {SIDE_INPUT_OFFSETS} holds {value!r} for {ssp.key()}"
    return offsets, reason


def _out_of_date(t: Target, opts: TopicLoadOptions, consumer: Any, offsets: dict[Part, int | None]) -> str | None:
    """Why a store with sound offsets is rebuilt all the same (stale past ``max_age_s``, offsets off the
    topic), or None."""
    from statectl.kafka.tails import check_in_range

    if opts.max_age_s is not None:
        age = time.time() - _newest_mtime(t.path)
        if age > opts.max_age_s:
            return f"it is stale: its newest file is {age:.0f}s old, more than --max-age {opts.max_age_s:g}s"
    for (topic, p), off in offsets.items():
        try:
            check_in_range(consumer, topic, p, opts.bootstrap, None if off is None else off + 1)
        except OffsetOutOfRange as e:
            return f"its offsets fell off the topic ({e})"
    return None


def _opens(path: Path) -> str | None:
    """Why the store does not open for writing ("its files are damaged (...)"), or None. LockHeldError when
    a process holds it; DiskFullError."""
    from statectl.rocks.live import LiveStore

    try:
        LiveStore(path).close()
    except LockHeldError as e:
        raise LockHeldError(str(e), hint=HELD_HINT) from None
    except StatectlError as e:
        if is_disk_full(e):
            raise disk_full(path) from e
        return f"its files are damaged ({e})"
    return None


def _open_problem(path: Path) -> str | None:
    """Why the store at ``path`` does not open read-only ("its files are damaged (...)"), or None."""
    from statectl.local.versions import open_problem

    problem = open_problem(path)
    return None if problem is None else f"its files are damaged ({problem})"



def _grown(t: Target, opts: TopicLoadOptions) -> str | None:
    """Why a resumed store gets partitions its last load did not give it (a topic that gained partitions
    since: Kafka only adds them), or None. They are loaded from their start; the rest resumes."""
    from statectl.engine.adstore.status import recorded_side_inputs

    recorded = recorded_side_inputs(t.path)
    if recorded is None:
        return None
    had = {(ssp.stream, ssp.partition) for ssp in recorded}
    new = [(topic, p) for topic, p in t.parts if (topic, p) not in had and any(h[0] == topic for h in had)]
    if not new:
        return None
    return (f"{', '.join(f'partition {p} of {topic}' for topic, p in new[:5])} "
            f"{'is' if len(new) == 1 else 'are'} new since it was loaded (the topic gained partitions, or that "
            "load took fewer): loaded from the start, the others resumed")



def offset_v2_differs(path: Path) -> bool:
    """Whether the store holds an ``OFFSET-v2`` whose offsets are not its ``SIDE-INPUT-OFFSETS``'s (a Samza
    run before a statectl that wrote only the latter). The load never takes offsets from it: Samza writes
    both files with the same content (StorageManagerUtil.writeOffsetFile), so where they differ the
    SIDE-INPUT-OFFSETS this module wrote after that run is the one that matches the store's data; the next
    flush rewrites both."""
    try:
        v2 = read_offsets(path / OFFSET_V2)
    except FileNotFoundError:
        return False
    except (OSError, OffsetFileError):
        return True
    try:
        return v2 != read_offsets(path / SIDE_INPUT_OFFSETS)
    except (OSError, OffsetFileError):
        return True



def check_ours(t: Target) -> bool:
    """False when ``t.path`` is to be created (absent, or an empty dir); True when it holds an
    SIDE-INPUT-OFFSETS file (this module's store). UsageError for anything else."""
    from statectl.rocks.store import is_store

    if os.path.islink(t.path):
        raise UsageError(f"{t.path} is a versioned adstore (loaded from files), not a topic's store",
                         hint="load the topic into another --store")
    if not os.path.lexists(t.path):
        return False
    if not t.path.is_dir():
        raise UsageError(f"{t.path} exists and is not a directory: refusing to load a topic into it",
                         hint="load the topic into another --store (or --store-dir), or move it away first")
    if not any(t.path.iterdir()):
        return False
    if not os.path.lexists(t.path / SIDE_INPUT_OFFSETS):
        what = "a RocksDB store" if is_store(t.path) else "a dir"
        raise UsageError(f"{t.path} is {what} that adstore load did not make (it has no {SIDE_INPUT_OFFSETS}): "
                         "refusing to replace it", hint="load the topic into another --store (or --store-dir), "
                                                        "or move that dir away first")
    return True



def check_not_held(path: Path) -> None:
    """LockHeldError (exit 11) with adstore's hint when a process holds the store's RocksDB LOCK."""
    from statectl.rocks.store import check_not_held

    try:
        check_not_held(path)
    except LockHeldError as e:  # the hint of backup (--checkpoint-dir) does not apply to a load
        raise LockHeldError(str(e), hint=HELD_HINT) from None



def os_error(path: Path, e: OSError, doing: str) -> StatectlError:
    if is_disk_full(e):
        return disk_full(path)
    return StatectlError(f"{doing} at {path} failed: {e}")



def _newest_mtime(path: Path) -> float:
    newest = path.stat().st_mtime
    for p in path.iterdir():
        try:
            newest = max(newest, p.stat().st_mtime)
        except OSError:
            pass
    return newest



def recorded_topic_ids(path: Path) -> dict[str, str]:
    """topic -> the topic id a load recorded in the store (TOPIC_ID_FILE: lines ``<id> <topic>``; an older
    statectl's single line ``<id>`` is the id of whichever one topic the store holds, ``""``); empty when
    there is none (brokers that report no ids) or it is unreadable."""
    try:
        lines = (path / TOPIC_ID_FILE).read_text().split("\n")
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for line in (ln.strip() for ln in lines):
        if line:
            ident, _, topic = line.partition(" ")
            out[topic] = ident
    if "" in out:  # an older statectl's file: the store held one topic, the one offsets name
        try:
            keys = {s.stream for s in read_offsets(path / SIDE_INPUT_OFFSETS)}
        except (OSError, OffsetFileError):
            keys = set()
        ident = out.pop("")
        if len(keys) == 1:
            out[keys.pop()] = ident
    return out



def disk_full(path: Path) -> DiskFullError:
    return DiskFullError(f"no space left on device loading {path}; a store being rebuilt is left as it was",
                         hint=f"free some space in {path.parent}")



def ssps_of(t: Target, opts: TopicLoadOptions) -> set[SSP]:
    """The side-input SSPs the store holds (the task's, as Samza's offset files must name them)."""
    return {SSP(opts.system, topic, p) for topic, p in t.parts}
