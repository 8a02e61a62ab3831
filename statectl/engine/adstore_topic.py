"""adstore load from a topic (:func:`load_topic`, seed 003): partitioned, one store per task (partition k ->
``Partition k``, the seed's choice #3), or broadcast, one store holding every partition. Each record becomes an entry as
formats.adstore.KeyValueSpec says; a null value deletes. After each flush (the WAL synced) the store's
``OFFSET-v2`` and ``SIDE-INPUT-OFFSETS`` record, per partition, the offset of the newest record applied
(a partition with none yet left out), as TaskSideInputStorageManager writes them: a load resumes after
them, and a kill at any moment loses nothing and skips nothing. The load reads ``SIDE-INPUT-OFFSETS``
(its own); an ``OFFSET-v2`` an earlier Samza run left never overrides it and is rewritten.
Recovery is the seed's table, per store: no store -> create it and bootstrap; a store found but not
valid (its newest file older than ``max_age``, its offsets off the topic, its offsets file or its files
damaged) -> rebuild it in a staged dir and swap it in (local.staged); valid -> continue from its offsets.
Bootstrap reads every partition to the end it had when the load started; ``follow`` then applies new
records until ``stop`` is set. With ``spark`` the staged store is built from SST files a Spark job wrote
(engine.adstore_common).

A load only deletes or replaces a dir it can prove it made: a store dir that holds this adstore's
``SIDE-INPUT-OFFSETS`` (a damaged one counts: the recovery table rebuilds it), or an empty dir; a new store
dir appears whole, holding its offsets file from the start. Anything else there (a job's store without that
file, a dir of other files, a versioned adstore's link, a file) is refused (UsageError) and left as it is.
Locks: engine.adstore_common.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from statectl import failpoints
from statectl.engine.adstore_common import (
    BUILD_DIR_PREFIX,
    AdstoreExtractError,
    SparkOptions,
    _BuildLock,
    _check_spec,
    _remove_build,
    _remove_old_builds,
)
from statectl.errors import DiskFullError, LockHeldError, NotFoundError, StatectlError, UsageError, is_disk_full
from statectl.formats.adstore import AdRecord, ExtractError, KeyValueSpec
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import (
    OFFSET_V2,
    SIDE_INPUT_OFFSETS,
    OffsetFileError,
    read_offsets,
    write_side_input_offsets,
)
from statectl.fsutil import chown_tree, fsync_dir, make_dirs, owner_of
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, OffsetOutOfRange
from statectl.local.layout import store_dir
from statectl.local.staged import StagedStore, remove_dead_temp_dirs
from statectl.progress import NoteRecorder, NullProgress, ProgressReporter

FLUSH_RECORDS = 500_000  # sync the WAL and record the offsets at least this often...
FLUSH_SECONDS = 2.0      # ...and at least this often while records come
CREATED, RESUMED, REBUILT = "created", "resumed", "rebuilt"
CLONED = "cloned"  # a broadcast store of another task, hard-linked from the one loaded (TopicLoadOptions.tasks)
# In a topic's store: the id of the topic (KIP-516) its SIDE-INPUT-OFFSETS are offsets of.
TOPIC_ID_FILE = "STATECTL-TOPIC-ID"
HELD_HINT = ("stop the job (or process) that has the store open: adstore load never writes a store another "
             "process holds")


@dataclass(frozen=True)
class TopicLoadOptions:
    """Load ``topic`` (and the other ``topics``: one store fed by several streams, consistent per task, the
    seed's "multiple streams") into ``store`` under ``state_dir``: partitioned (store ``Partition k`` for
    each of ``partitions``, default all, holding partition k of every topic that has one) or ``broadcast``
    into ``store_dir`` (default: the store dir of ``task``), or as ``task_ssps`` says (task -> its (topic,
    partition) pairs, the job model's mapping: engine.adstore_job). ``tasks`` (broadcast, with ``state_dir``):
    every task's store dir holds the broadcast store, as Samza keeps a broadcast side input (one store per
    task, each with every partition): the first task's is loaded, the others are made from it by hard-linking
    its files (a RocksDB checkpoint: no byte written twice on one filesystem). ``max_age_s``: a store whose newest file
    is older is rebuilt. ``system``: the offsets file's system name. ``key_serde``/``value_serde``: the
    store's serdes (formats.serdes kinds; None: the bytes as they are), applied to the record's own key and
    value as Samza's identity side-inputs processor does. ``job``/``job_id``: take what flags leave unset
    from the job's config and job model on its coordinator stream, or with ``zookeeper`` a standalone job's
    model in ZooKeeper (engine.adstore_job.from_job)."""

    bootstrap: str
    topic: str
    store: str
    state_dir: Path | None = None
    broadcast: bool = False
    task: str = "Partition 0"
    store_dir: Path | None = None
    partitions: tuple[int, ...] | None = None
    spec: KeyValueSpec = KeyValueSpec()
    follow: bool = False
    max_age_s: float | None = None
    system: str = "kafka"
    security: KafkaSecurity | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    topics: tuple[str, ...] = ()
    key_serde: str | None = None
    value_serde: str | None = None
    task_ssps: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] | None = None
    job: str | None = None
    job_id: str = "1"
    tasks: tuple[str, ...] = ()
    zookeeper: str | None = None
    wiped_tasks: tuple[tuple[str, str], ...] = ()  # with the job: task -> why its start deletes the state dir

    @property
    def all_topics(self) -> tuple[str, ...]:
        """Every topic of the load, ``topic`` first, each once."""
        return tuple(dict.fromkeys(((self.topic,) if self.topic else ()) + tuple(self.topics)))

    def validate(self) -> None:
        if not self.bootstrap:
            raise UsageError("adstore load --topic needs Kafka brokers", hint="pass --kafka HOST:PORT[,..]")
        if not self.job and (not self.all_topics or not all(self.all_topics)):
            raise UsageError("adstore load --topic needs a topic name")
        if not self.store:
            raise UsageError("adstore load needs --store")
        if self.store_dir is None and self.state_dir is None:
            raise UsageError("adstore load needs --state-dir (or --store-dir with --broadcast)")
        if self.store_dir is not None and not self.broadcast:
            raise UsageError("--store-dir names one store: use it with --broadcast, or pass --state-dir")
        if self.max_age_s is not None and self.max_age_s <= 0:
            raise UsageError("--max-age must be positive")
        if not self.system or "." in self.system:
            raise UsageError(f"invalid system name {self.system!r}")
        if self.partitions is not None and any(p < 0 for p in self.partitions):
            raise UsageError("partitions must be 0 or more")
        if self.zookeeper and not self.job:
            raise UsageError("--zookeeper needs --job: it holds the model of a standalone job")
        if self.state_dir is not None:  # the names (store, task) checked before anything connects or writes
            store_dir(Path(self.state_dir), self.store, self.task)
            for task, _ in self.task_ssps or ():
                store_dir(Path(self.state_dir), self.store, task)
            for task in self.tasks:
                store_dir(Path(self.state_dir), self.store, task)
        if self.tasks and (not self.broadcast or self.state_dir is None or self.store_dir is not None):
            raise UsageError("--tasks names the task dirs a --broadcast store fills under --state-dir",
                             hint="pass --broadcast and --state-dir (not --store-dir)")
        if len(set(self.tasks)) != len(self.tasks):
            raise UsageError("--tasks names a task twice")
        if self.task_ssps is not None and (self.broadcast or self.state_dir is None):
            raise UsageError("a task -> partitions mapping fills the task dirs under --state-dir, not --broadcast")
        _check_spec(self.spec, topic=True)
        from statectl.formats.serdes import kind_of

        for flag, kind in (("--key-serde", self.key_serde), ("--value-serde", self.value_serde)):
            if kind is not None:
                try:
                    kind_of(kind)
                except ValueError as e:
                    raise UsageError(f"{flag}: {e}") from None
                if self.spec.extractor or self.spec.key_field or self.spec.value_field:
                    raise UsageError(f"{flag} applies to the record's own bytes: it does not combine with "
                                     "--extractor, --key-field or --value-field")


@dataclass
class StoreLoad:
    """What a load did to one store: ``case`` is created / resumed / rebuilt (``reason`` says why),
    ``offsets`` the newest offset applied per partition."""

    store_dir: str
    partitions: list[int]
    case: str
    reason: str | None = None
    records: int = 0
    bytes: int = 0
    offsets: dict[str, int | None] = field(default_factory=dict)
    task: str | None = None


@dataclass
class LoadResult:
    """``records`` applied (puts and deletes) and their key + value ``bytes``; per store what happened."""

    topic: str | None
    records: int = 0
    bytes: int = 0
    skipped: int = 0
    topics: list[str] = field(default_factory=list)  # every topic of a topic load, ``topic`` first
    duration_s: float = 0.0
    stores: list[StoreLoad] = field(default_factory=list)
    offsets: dict[str, int | None] = field(default_factory=dict)
    version: int | None = None
    phases: dict[str, float] = field(default_factory=dict)
    # Every partition was read to the end offsets it had when the load began (False: stopped before).
    bootstrapped: bool = False
    notes: list[str] = field(default_factory=list)


Part = tuple[str, int]  # (topic, partition): one side-input SSP of a store


@dataclass
class _Target:
    path: Path
    parts: list[Part]
    load: StoreLoad
    offsets: dict[Part, int | None] = field(default_factory=dict)
    staged: StagedStore | None = None
    db: Any = None
    pending: int = 0
    opts: TopicLoadOptions | None = None
    topic_ids: dict[str, str] = field(default_factory=dict)  # topic -> its id now (KIP-516), where reported

    @property
    def partitions(self) -> list[int]:
        return sorted({p for _, p in self.parts})

    @property
    def write_path(self) -> Path:
        return self.staged.path if self.staged is not None else self.path


def load_topic(opts: TopicLoadOptions, *, stop: threading.Event | None = None,
               progress: ProgressReporter | None = None,
               spark: SparkOptions | None = None) -> LoadResult:
    """Bootstrap (and with ``follow``, keep applying) the topic into its stores (see the module doc).

    Raises UsageError for bad options, a store whose offsets file names another topic, or a target dir
    this load cannot prove is its own (see the module doc; it is left untouched); NotFoundError (exit 10)
    when the topic or a partition does not exist; LockHeldError (exit 11) when a process holds a store or
    another adstore load or switch runs on it; AdstoreExtractError (exit 1) for a record the spec cannot
    handle (the store keeps what came before it, with its offsets; a store being rebuilt is left as it
    was); StatectlError when the brokers cannot be reached; DiskFullError (exit 1) when the disk fills (a
    store being rebuilt is left as it was; a store being created or resumed keeps what its offsets say it
    holds). ``stop`` (SIGTERM, Ctrl-C) ends the load after a flush.

    With ``spark`` every store is built whole (from the log start to the true end of its partitions) by
    a Spark job, ingested into a staged store with its offsets file, and swapped in; MissingDependencyError
    (exit 13) without pyspark or Java."""
    opts.validate()
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    from contextlib import ExitStack

    from statectl.kafka.client import open_consumer
    from statectl.local.versions import StoreLock

    if opts.job:
        from statectl.engine.adstore_job import from_job

        opts = from_job(opts, progress)
    if spark is not None and len(opts.all_topics) > 1:
        raise UsageError("--spark builds a store from one topic: load several topics without --spark")
    consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    result = LoadResult(opts.topic, topics=list(opts.all_topics))
    targets: list[_Target] = []
    locks = ExitStack()
    try:
        targets, clones = _prepare(opts, consumer)
        for t in targets + clones:
            locks.enter_context(StoreLock(t.path))
        extract = opts.spec.record_extractor() if (opts.spec.extractor or opts.spec.key_field
                                                   or opts.spec.value_field) else None
        for t in targets:
            _assess(t, opts, consumer)
            if t.load.reason:
                progress.note(f"{t.path}: {t.load.case}: {t.load.reason}")
            if t.load.case == RESUMED and _offset_v2_differs(t.path):
                progress.note(f"{t.path}: its {OFFSET_V2} (left by an earlier Samza run) differs from its "
                              f"{SIDE_INPUT_OFFSETS}: resuming from {SIDE_INPUT_OFFSETS} and rewriting both")
        if spark is not None:
            build_dir = _spark_topic(targets, opts, spark, progress, result, locks)
        else:
            _bootstrap(targets, opts, consumer, extract, stop, progress, result)
        result.bootstrapped = not stop.is_set()
        for t in targets:
            if t.staged is not None and not stop.is_set():  # an interrupted rebuild is thrown away
                _close(t, opts)
                if t.path.exists():
                    _check_not_held(t.path)
                try:
                    t.staged.commit()
                except OSError as e:
                    raise _os_error(t.path, e, "swapping in the rebuilt store") from e
                result.notes += t.staged.notes
                t.staged = None
        if spark is not None:
            _remove_build(build_dir)
        if clones and not stop.is_set():
            for c in clones:
                _clone(targets[0], c, result)
            targets += clones
        if opts.follow and not stop.is_set():
            _follow(targets, opts, extract, stop, progress, result)
    except ExtractError as e:  # loading the extractor failed
        raise UsageError(str(e)) from None
    except OSError as e:
        if is_disk_full(e):
            raise _disk_full(targets[0].path if targets else Path(opts.state_dir or opts.store_dir or ".")) from e
        raise
    finally:
        for t in targets:
            _close(t, opts, quietly=True)
            if t.staged is not None:  # not committed: its temporary dir goes, the store stays as it was
                t.staged.abort()
        consumer.close()
        locks.close()
    for t in targets:
        result.stores.append(t.load)
        t.load.offsets = {SSP(opts.system, topic, p).key(): t.offsets.get((topic, p)) for topic, p in t.parts}
        result.offsets.update(t.load.offsets)
    result.records = sum(t.load.records for t in targets)
    result.bytes = sum(t.load.bytes for t in targets)
    result.duration_s = round(time.monotonic() - began, 3)
    _warn_deleted(targets, opts, progress)
    result.notes = list(getattr(progress, "notes", [])) + result.notes
    return result


def _prepare(opts: TopicLoadOptions, consumer: Any) -> tuple[list[_Target], list[_Target]]:
    """The stores a topic load fills and (broadcast) the ones that get hard links of the first, each checked
    to be one this load may write (_check_ours), reading only. NotFoundError for a topic that is not there."""
    from statectl.kafka.client import partition_count
    from statectl.kafka.tails import topic_identity

    counts: dict[str, int] = {}
    for topic in opts.all_topics:
        n = partition_count(consumer, topic, opts.bootstrap)
        if n is None:
            raise NotFoundError(f"topic {topic} does not exist on {opts.bootstrap}",
                                hint="check the topic name and --kafka")
        counts[topic] = n
    targets = _targets(opts, counts)
    clones = [_Target(store_dir(Path(opts.state_dir), opts.store, task).absolute(), list(targets[0].parts),
                      StoreLoad(str(store_dir(Path(opts.state_dir), opts.store, task).absolute()),
                                targets[0].load.partitions, CLONED, task=task), opts=opts)
              for task in opts.tasks[1:]] if opts.broadcast else []
    topic_ids = {topic: topic_identity(consumer, topic, opts.bootstrap)[0] for topic in opts.all_topics}
    for t in targets + clones:
        t.topic_ids = {topic: i for topic, i in topic_ids.items() if i is not None}
        if _check_ours(t) and t in clones:  # a refused load leaves nothing behind, not even a lock file
            _check_clone_topics(t, opts)
    return targets, clones


@dataclass
class PlannedStoreLoad:
    """One store of a topic load's plan: ``case`` (created, resumed, rebuilt: ``reason`` says why), and per
    side-input SSP the offset its read starts at and the end it reads to (the end now)."""

    store_dir: str
    task: str | None
    partitions: list[int]
    case: str
    reason: str | None
    start: dict[str, int]
    end: dict[str, int]
    records: int


@dataclass
class TopicLoadPlan:
    """What ``load_topic`` will do, decided with nothing written: each store's case and the offsets it
    reads (``records``: the offsets in those ranges now, the most records applied); ``clones``: the
    broadcast stores that get hard links of the first; ``follow``: it then keeps applying. ``adstore load
    --topic --dry-run`` prints it."""

    topic: str | None
    topics: list[str]
    stores: list[PlannedStoreLoad]
    clones: list[str]
    records: int
    built_with: str
    follow: bool
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)


def plan_topic_load(opts: TopicLoadOptions, *, progress: ProgressReporter | None = None,
                    spark: SparkOptions | None = None) -> TopicLoadPlan:
    """The plan of ``load_topic(opts, spark=spark)``: the same checks and the same recovery table (created /
    resumed / rebuilt, and why), reading the stores and the topics, writing nothing: no lock file, no
    staged dir, no offsets. Where the load opens a store to see that it is sound, the plan opens it
    read-only (its config file rocksdict drops is removed again). Raises what ``load_topic`` raises
    before it writes (LockHeldError too: another load of a store runs; no lock is taken)."""
    from statectl.kafka.client import open_consumer
    from statectl.kafka.tails import read_tails
    from statectl.local.versions import StoreLock

    opts.validate()
    recorder = NoteRecorder(progress)
    if opts.job:
        from statectl.engine.adstore_job import from_job

        opts = from_job(opts, recorder)
    if spark is not None and len(opts.all_topics) > 1:
        raise UsageError("--spark builds a store from one topic: load several topics without --spark")
    consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    try:
        targets, clones = _prepare(opts, consumer)
        for t in targets + clones:
            StoreLock(t.path).check_free()
        for t in targets:
            _assess(t, opts, consumer, dry_run=True)
            if t.load.reason:
                recorder.note(f"{t.path}: {t.load.case}: {t.load.reason}")
        tails = {topic: read_tails(consumer, topic, sorted({p for t in targets for tp, p in t.parts if tp == topic}),
                                   opts.bootstrap) for topic in opts.all_topics}
    finally:
        consumer.close()
    stores = []
    for t in targets:
        start, end = {}, {}
        for topic, p in t.parts:
            tail, off = tails[topic][p], t.offsets.get((topic, p))
            key = SSP(opts.system, topic, p).key()
            start[key] = tail.beginning if off is None or spark is not None else max(off + 1, tail.beginning)
            end[key] = tail.end
        stores.append(PlannedStoreLoad(str(t.path), t.load.task, t.load.partitions, t.load.case, t.load.reason,
                                       start, end, sum(max(0, end[k] - start[k]) for k in start)))
    return TopicLoadPlan(opts.topic, list(opts.all_topics), stores, [str(c.path) for c in clones],
                         sum(st.records for st in stores), "put" if spark is None else "spark", opts.follow,
                         notes=recorder.notes)


def _check_clone_topics(t: _Target, opts: TopicLoadOptions) -> None:
    """UsageError unless the store a broadcast copy replaces holds only this load's topics (never another
    topic's store)."""
    try:
        found = read_offsets(t.path / SIDE_INPUT_OFFSETS)
    except (OSError, OffsetFileError):
        return  # damaged: this module's store all the same, rebuilt as the seed's recovery table says
    others = sorted({ssp.stream for ssp in found} - set(opts.all_topics))
    if others:
        raise UsageError(f"{t.path} holds topic {others[0]}, not {', '.join(opts.all_topics)}: refusing to replace "
                         "it with a broadcast copy", hint="load into another --store, or leave that task out of --tasks")


def _clone(src: _Target, dst: _Target, result: LoadResult) -> None:
    """Make ``dst``'s store (a broadcast store of another task) from ``src``'s, as loaded: a RocksDB
    checkpoint of it (its SST files hard-linked, its small metadata files copied) plus its offset and
    statectl files, built aside and swapped in (a kill leaves ``dst`` as it was). ``dst`` then holds what
    ``src`` holds, at the same offsets."""
    from statectl.rocks.store import create_checkpoint

    _close(src, src.opts)  # the checkpoint opens the store itself
    try:
        with StagedStore(dst.path, what="broadcast copy", disk_full=lambda: _disk_full(dst.path),
                         sync="dirs") as staged:
            staged.path.rmdir()  # the checkpoint makes its dir
            create_checkpoint(src.path, staged.path)
            for f in sorted(src.path.iterdir()):  # the files RocksDB does not know: offsets, statectl's records
                if f.is_file() and not (staged.path / f.name).exists() and f.name != "LOCK" \
                        and not f.name.startswith("LOG"):
                    shutil.copy2(f, staged.path / f.name)
            if dst.path.exists():
                _check_not_held(dst.path)
            staged.commit()
            result.notes += staged.notes
    except OSError as e:
        raise _os_error(dst.path, e, "making the broadcast copy") from e
    dst.offsets = dict(src.offsets)
    dst.load.offsets = dict(src.load.offsets)


def _warn_deleted(targets: list[_Target], opts: TopicLoadOptions, progress: ProgressReporter) -> None:
    """A note for each store the job's next start would delete (engine.adstore_status.predict against the
    store's side-input SSPs): stale, or offsets that are not exactly its SSPs (a partition with no record),
    or with the job, its container reads no checkpoint (``wiped_tasks``)."""
    from statectl.engine.adstore_status import CREATE, DELETE_NO_CHECKPOINT, predict

    wiped = dict(opts.wiped_tasks)
    for t in targets:
        st = predict(t.path, _ssps_of(t, opts), expected_from="store")
        if t.load.task in wiped and st.action != CREATE:
            st.action, st.reason = DELETE_NO_CHECKPOINT, wiped[t.load.task]
        if st.deleted:
            progress.note(f"{t.path}: Samza's next start would delete this store ({st.action}: {st.reason})")
    if any(t.load.task in wiped for t in targets):
        progress.note("a job that has not started keeps the stores when its tasks have a first checkpoint: "
                      "statectl adstore seal-checkpoint (see its --help)")


def _ssps_of(t: _Target, opts: TopicLoadOptions) -> set[SSP]:
    """The side-input SSPs the store holds (the task's, as Samza's offset files must name them)."""
    return {SSP(opts.system, topic, p) for topic, p in t.parts}


def _targets(opts: TopicLoadOptions, counts: dict[str, int]) -> list[_Target]:
    """The stores of the load and the (topic, partition) pairs each holds. NotFoundError for a partition
    that no topic has (a named one), or a task's partition its topic lacks."""
    def target(path: Path, parts: list[Part], task: str | None) -> _Target:
        parts = sorted(parts, key=lambda tp: (opts.all_topics.index(tp[0]), tp[1]))
        path = path.absolute()
        return _Target(path, parts, StoreLoad(str(path), sorted({p for _, p in parts}), CREATED, task=task),
                       opts=opts)

    def check(topic: str, p: int) -> None:
        n = counts[topic]
        if p >= n:
            raise NotFoundError(f"topic {topic} has {n} partition{'s' if n != 1 else ''}; there is no "
                                f"partition {p}", hint=f"pass partitions between 0 and {n - 1}")

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


def _assess(t: _Target, opts: TopicLoadOptions, consumer: Any, *, dry_run: bool = False) -> None:
    """The seed's recovery table for one store: sets ``t.load.case`` (and ``reason``), ``t.offsets``, and
    for a rebuild a StagedStore to build into.

    Only a dir this load can prove is an adstore of the topic is ever rebuilt: one holding a
    SIDE-INPUT-OFFSETS file (readable or damaged) that names no other topic. A missing or empty dir is
    created. Anything else is refused with UsageError before anything is written: a versioned adstore's
    link, a file, a dir without that file (a job's own store, a folder of files)."""
    from statectl.kafka.tails import check_in_range
    from statectl.rocks.store import is_store

    if not _check_ours(t):
        t.load.case = CREATED
        return
    _check_not_held(t.path)  # a job holds it: never rebuild a store under it
    reason = None
    offsets: dict[int, int | None] = {}
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
    loaded_from = _recorded_topic_ids(t.path)
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
    if reason is None and opts.max_age_s is not None:
        newest = _newest_mtime(t.path)
        age = time.time() - newest
        if age > opts.max_age_s:
            reason = f"it is stale: its newest file is {age:.0f}s old, more than --max-age {opts.max_age_s:g}s"
    if reason is None:
        for (topic, p), off in offsets.items():
            try:
                check_in_range(consumer, topic, p, opts.bootstrap, None if off is None else off + 1)
            except OffsetOutOfRange as e:
                reason = f"its offsets fell off the topic ({e})"
                break
    if reason is None and dry_run:  # a plan opens the store read-only: nothing of it changes
        reason = _open_problem(t.path)
    elif reason is None:
        try:
            from statectl.rocks.live import LiveStore

            LiveStore(t.path).close()
        except LockHeldError as e:
            raise LockHeldError(str(e), hint=HELD_HINT) from None
        except StatectlError as e:
            if is_disk_full(e):
                raise _disk_full(t.path) from e
            reason = f"its files are damaged ({e})"
    if reason is None:
        t.load.case = RESUMED
        t.offsets = offsets
        t.load.reason = _grown(t, opts)
        return
    t.load.case, t.load.reason = REBUILT, reason
    if dry_run:
        return
    remove_dead_temp_dirs(t.path)
    t.staged = StagedStore(t.path, what="adstore rebuild", disk_full=lambda: _disk_full(t.path), sync="dirs")
    t.staged.open()  # committed by load_topic once built, aborted by it on every other way out


def _open_problem(path: Path) -> str | None:
    """Why the store at ``path`` does not open read-only ("its files are damaged (...)"), or None."""
    from statectl.local.versions import open_problem

    problem = open_problem(path)
    return None if problem is None else f"its files are damaged ({problem})"


def _grown(t: _Target, opts: TopicLoadOptions) -> str | None:
    """Why a resumed store gets partitions its last load did not give it (a topic that gained partitions
    since: Kafka only adds them), or None. They are loaded from their start; the rest resumes."""
    from statectl.engine.adstore_status import recorded_side_inputs

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


def _offset_v2_differs(path: Path) -> bool:
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


def _check_ours(t: _Target) -> bool:
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


def _check_not_held(path: Path) -> None:
    """LockHeldError (exit 11) with adstore's hint when a process holds the store's RocksDB LOCK."""
    from statectl.rocks.store import check_not_held

    try:
        check_not_held(path)
    except LockHeldError as e:  # the hint of backup (--checkpoint-dir) does not apply to a load
        raise LockHeldError(str(e), hint=HELD_HINT) from None


def _os_error(path: Path, e: OSError, doing: str) -> StatectlError:
    if is_disk_full(e):
        return _disk_full(path)
    return StatectlError(f"{doing} at {path} failed: {e}")


def _newest_mtime(path: Path) -> float:
    newest = path.stat().st_mtime
    for p in path.iterdir():
        try:
            newest = max(newest, p.stat().st_mtime)
        except OSError:
            pass
    return newest


def _open(t: _Target, opts: TopicLoadOptions | None = None) -> None:
    """Open the store to write into: a new one is first made whole, holding its offsets file (so that a
    load killed at any moment leaves a dir this module can prove is its own), then opened. ``opts``:
    the target's own by default."""
    opts = opts if opts is not None else t.opts
    assert opts is not None
    if t.db is None:
        from statectl.rocks.live import LiveStore

        if not os.path.lexists(t.write_path / SIDE_INPUT_OFFSETS):
            _create(t, opts)
        _record_topic_id(t, t.write_path)
        try:
            t.db = LiveStore(t.write_path)
        except LockHeldError as e:
            raise LockHeldError(str(e), hint=HELD_HINT) from None
        except StatectlError as e:
            if is_disk_full(e):
                raise _disk_full(t.path) from e
            raise


def _recorded_topic_ids(path: Path) -> dict[str, str]:
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


def _record_topic_id(t: _Target, path: Path) -> None:
    """Record the id of the topic whose offsets the store keeps, before anything of it is applied: the
    next load tells a topic deleted and recreated since (same name, offsets that may well be in range)
    from the one it loaded, and rebuilds. Samza ignores the file (it reads only the offsets file). Also
    records the store's side-input SSPs (engine.adstore_status.SIDE_INPUTS_FILE, for ``adstore status``)."""
    from statectl.engine.adstore_status import record_side_inputs

    if t.opts is not None:
        try:
            record_side_inputs(path, _ssps_of(t, t.opts))
        except OSError as e:
            raise _os_error(t.path, e, "recording the side inputs") from e
    if not t.topic_ids or _recorded_topic_ids(path) == t.topic_ids:
        return
    from statectl.fsutil import SYNC_NONE, write_atomic

    try:
        write_atomic(path / TOPIC_ID_FILE, "".join(f"{i} {topic}\n" for topic, i in sorted(t.topic_ids.items())),
                     sync=SYNC_NONE)
    except OSError as e:
        raise _os_error(t.path, e, f"writing {TOPIC_ID_FILE}") from e


def _offsets_of(t: _Target, opts: TopicLoadOptions) -> dict[SSP, str]:
    """The newest offset applied per partition of the store; a partition nothing was applied from yet is
    left out, as TaskSideInputStorageManager.writeFileOffsets leaves out an SSP without a processed message
    (Samza writes no nulls; its next start deletes such a store as mismatched: ``adstore status`` says so)."""
    return {SSP(opts.system, topic, p): str(t.offsets[(topic, p)])
            for topic, p in list(t.parts) + [tp for tp in t.offsets if tp not in t.parts]
            if t.offsets.get((topic, p)) is not None}


def _create(t: _Target, opts: TopicLoadOptions) -> None:
    """Give the dir written into its offsets file before any RocksDB file: a staged dir directly; a new
    store dir is made aside (named as local.staged names its temp dirs, so a kill leaves nothing the next
    staging does not remove) and renamed into place, which replaces an empty dir, never a non-empty one."""
    import uuid

    from statectl.local.staged import TMP_INFIX

    try:
        if t.staged is not None:
            write_side_input_offsets(t.write_path, _offsets_of(t, opts))
            return
        make_dirs(t.path.parent, owner_of(t.path.parent))
        remove_dead_temp_dirs(t.path)
        tmp = t.path.parent / f".{t.path.name}{TMP_INFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            write_side_input_offsets(tmp, _offsets_of(t, opts))
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
        raise _os_error(t.path, e, "creating the store") from e


def _record(t: _Target, opts: TopicLoadOptions) -> None:
    """Sync the WAL, then write the offsets (they never claim more than is durable), then _give_away."""
    if t.db is None:
        return
    try:
        t.db.db.flush_wal(True)
    except Exception as e:
        raise _rocks_error(t, e) from e
    try:
        write_side_input_offsets(t.write_path, _offsets_of(t, opts))
        _give_away(t)
    except OSError as e:
        raise _os_error(t.path, e, f"writing {OFFSET_V2} and {SIDE_INPUT_OFFSETS}") from e
    t.pending = 0


def _give_away(t: _Target) -> None:
    """Run as root, a store written in place (created or resumed) is its parent dir's owner's, as a staged
    one is once swapped in (StagedStore): the job's user opens it."""
    if t.staged is None:
        chown_tree(t.path, owner_of(t.path.parent))


def _close(t: _Target, opts: TopicLoadOptions, *, quietly: bool = False) -> None:
    if t.db is None:
        return
    try:
        if not quietly:
            _record(t, opts)
        t.db.close()
        _give_away(t)  # closing flushes into new files
    except BaseException:
        if not quietly:
            raise
    finally:
        t.db = None


def _rocks_error(t: _Target, e: Exception) -> Exception:
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if is_disk_full(e):
        return _disk_full(t.path)
    return StatectlError(f"RocksDB write in {t.write_path} failed: {msg}")


def _apply(t: _Target, records: list[Any], extract: Any, opts: TopicLoadOptions, result: LoadResult) -> None:
    """Apply one poll's records of one partition in a WriteBatch; on an extractor or serde error, apply
    those before the bad record, record the offsets, and raise AdstoreExtractError. Without an extractor,
    the key and value go through the store's serdes (formats.serdes.round_trip), as Samza's identity
    side-inputs processor reads them (SideInputsManager.createSideInputProcessors) and its store writes them."""
    import rocksdict

    from statectl.formats.serdes import SerdeError, kind_of, round_trip

    wb = rocksdict.WriteBatch(raw_mode=True)
    n = nbytes = 0
    last = None
    failure: AdstoreExtractError | None = None
    kserde = kind_of(opts.key_serde) if opts.key_serde else None
    vserde = kind_of(opts.value_serde) if opts.value_serde else None
    for r in records:
        if extract is None:
            key, value = r.key, r.value
            if key is None:
                result.skipped += 1
                last = r.offset
                continue
            try:
                if kserde:
                    where = f"key ({kserde} serde)"
                    key = round_trip(kserde, key)
                if vserde and value is not None:
                    where = f"value ({vserde} serde)"
                    value = round_trip(vserde, value)
            except SerdeError as e:
                failure = AdstoreExtractError(
                    f"topic {r.topic} partition {r.partition} offset {r.offset}: cannot read the {where}: {e}",
                    hint="fix the record or the serde (--key-serde/--value-serde, or the job's stores.<store>."
                         "key.serde/msg.serde); the load resumes at this record")
                break
        else:
            try:
                kv = extract(AdRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
            except Exception as e:  # noqa: BLE001 - the user's extractor: any error names the record
                failure = AdstoreExtractError(
                    f"topic {r.topic} partition {r.partition} offset {r.offset}: cannot extract key and value "
                    f"({opts.spec.describe()}): {type(e).__name__ + ': ' if not isinstance(e, ExtractError) else ''}"
                    f"{e}", hint="fix the record or the extractor; the load resumes at this record")
                break
            last = r.offset
            if kv is None:
                result.skipped += 1
                continue
            key, value = kv
        last = r.offset
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
        _record(t, opts)
        raise failure


def _bootstrap(targets: list[_Target], opts: TopicLoadOptions, consumer: Any, extract: Any,
               stop: threading.Event, progress: ProgressReporter, result: LoadResult) -> None:
    """Read every partition to its end (as the load began), store by store, on one consumer."""
    from statectl.kafka.client import PartitionReader

    total = sum(len(t.parts) for t in targets)
    progress.start(f"loading {', '.join(opts.all_topics)}", 0, total)
    try:
        for t in targets:
            _open(t, opts)
            last_flush = time.monotonic()
            for topic, p in t.parts:
                if stop.is_set():
                    break
                reader = PartitionReader(consumer, topic, p, opts.bootstrap)
                off = t.offsets.get((topic, p))
                reader.seek(None if off is None else off + 1)
                for batch in reader.batches():
                    before = t.load.bytes
                    _apply(t, batch, extract, opts, result)
                    progress.advance(t.load.bytes - before)
                    now = time.monotonic()
                    if t.pending >= FLUSH_RECORDS or now - last_flush >= FLUSH_SECONDS:
                        _record(t, opts)
                        last_flush = now
                    if stop.is_set():
                        break
                progress.file_done()
            _record(t, opts)
            if t.staged is not None and stop.is_set():
                break  # an interrupted rebuild is thrown away: the old store stays as it was
            _close(t, opts)
    finally:
        progress.stop()


def _follow(targets: list[_Target], opts: TopicLoadOptions, extract: Any, stop: threading.Event,
            progress: ProgressReporter, result: LoadResult) -> None:
    """Keep applying new records of every partition until ``stop``: a reader (and consumer) per partition,
    polled in turn; each store's offsets are recorded after each flush. Brokers that stop answering are
    ridden out (the readers poll nothing meanwhile). The topic deleted and recreated (kafka.tails.TopicWatch,
    asked before each flush) stops the load with a StatectlError, recording nothing more: the stores keep
    the offsets of the old topic, which the next load finds off the new one, and rebuilds."""
    from statectl.kafka.client import OffsetOutOfRange, PartitionReader, open_consumer
    from statectl.kafka.tails import TopicWatch

    readers: list[tuple[_Target, Iterator[list[Any]], Any]] = []
    poll_ms = max(20, 300 // max(1, sum(len(t.parts) for t in targets)))
    recreated = False
    watch_consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    try:
        watches = {topic: TopicWatch(watch_consumer, topic, opts.bootstrap) for topic in opts.all_topics}
        for t in targets:
            _open(t)
            for topic, p in t.parts:
                c = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
                reader = PartitionReader(c, topic, p, opts.bootstrap, empty_poll_ms=poll_ms)
                off = t.offsets.get((topic, p))
                reader.seek(None if off is None else off + 1)
                readers.append((t, reader.batches(follow=True), c))
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
                    raise next((g for g in (_topic_recreated(w, topic, targets, progress)
                                            for topic, w in watches.items()) if g is not None),
                               StatectlError(f"adstore load --follow stopped: {e}; the stores keep the offsets "
                                             "of what they applied before",
                                             hint="run the load again: it rebuilds the stores from the topic as "
                                                  "it is now")) from None
                if batch:
                    _apply(t, batch, extract, opts, result)
                if stop.is_set():
                    break
            now = time.monotonic()
            if now - last_flush >= FLUSH_SECONDS or any(t.pending >= FLUSH_RECORDS for t in targets):
                gone = next((g for g in (_topic_recreated(w, topic, targets, progress)
                                         for topic, w in watches.items()) if g is not None), None)
                if gone is not None:
                    recreated = True
                    raise gone
                for t in targets:
                    if t.pending:
                        _record(t, opts)
                last_flush = now
    finally:
        for t in targets:
            try:
                _close(t, opts, quietly=recreated)  # records of a recreated topic are never recorded
            except StatectlError:
                pass
        for _, gen, c in readers:
            gen.close()
            c.close()
        watch_consumer.close()


def _topic_recreated(watch: Any, topic: str, targets: list[_Target],
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


def _spark_topic(targets: list[_Target], opts: TopicLoadOptions, sp: SparkOptions, progress: ProgressReporter,
                 result: LoadResult, locks: Any) -> Path:
    """Build every target whole on Spark and ingest it into a staged store with its offsets file (the
    caller swaps them in); return the build's dir (removed by the caller once every store is in place)."""
    from statectl.rocks.sst import ingest_into_new_store
    from statectl.spark.submit import BuildSpec, run_build

    parts = tuple(p for t in targets for p in t.partitions)
    spec = BuildSpec("topic", opts.spec, layout="broadcast" if opts.broadcast else "partitioned", staging=sp.staging,
                     bootstrap=opts.bootstrap, topic=opts.topic, partitions=parts)
    build_dir = targets[0].path.parent / f"{BUILD_DIR_PREFIX}{spec.spec_hash()[:16]}"
    _remove_old_builds(build_dir)
    locks.enter_context(_BuildLock(build_dir))
    began = time.monotonic()
    manifest = run_build(spec, build_dir, master=sp.master, conf=sp.conf, progress=progress, s3=sp.s3,
                         kafka_security=opts.security)
    result.phases["build_s"] = round(time.monotonic() - began, 3)
    began = time.monotonic()
    for t in targets:
        if t.staged is None:
            if t.load.case == RESUMED:
                t.load.case, t.load.reason = REBUILT, "--spark builds the whole store"
            t.staged = StagedStore(t.path, what="adstore load --spark", disk_full=lambda t=t: _disk_full(t.path),
                                   sync="dirs")
            t.staged.open()
        store = manifest.store(None if opts.broadcast else t.partitions[0])
        failpoints.hit("adstore-ingest")
        ingest_into_new_store(t.staged.path, manifest.paths(store.store))
        t.offsets = {(opts.topic, p): manifest.offsets[p] - 1 for p in t.partitions if manifest.offsets.get(p, 0) > 0}
        write_side_input_offsets(t.staged.path, _offsets_of(t, opts))
        _record_topic_id(t, t.staged.path)
        t.load.records = store.rows
    result.phases["ingest_s"] = round(time.monotonic() - began, 3)
    return build_dir


def _disk_full(path: Path) -> DiskFullError:
    return DiskFullError(f"no space left on device loading {path}; a store being rebuilt is left as it was",
                         hint=f"free some space in {path.parent}")
