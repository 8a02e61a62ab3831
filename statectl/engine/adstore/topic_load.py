"""Running a topic load (:func:`load_topic`) and its plan (:func:`plan_topic_load`): the options completed
from the job, the stores prepared, locked and assessed (engine.adstore.topic_stores), filled by the put
path or a Spark build (engine.adstore.topic_write), rebuilt stores swapped in, broadcast copies made, then
``--follow``; the notes of stores Samza's next start would delete. Locks: engine.adstore.common.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.engine.adstore.builds import BUILD_DIR_PREFIX, BuildLock, remove_build, remove_old_builds
from statectl.engine.adstore.common import SparkOptions
from statectl.engine.adstore.topic import (
    REBUILT,
    RESUMED,
    LoadResult,
    PlannedStoreLoad,
    Target,
    TopicLoadOptions,
    TopicLoadPlan,
)
from statectl.engine.adstore.topic_stores import (
    assess,
    check_not_held,
    disk_full,
    offset_v2_differs,
    os_error,
    prepare_stores,
    ssps_of,
)
from statectl.engine.adstore.topic_write import (
    bootstrap,
    clone_store,
    close_store,
    follow,
    offsets_of,
    record_topic_id,
)
from statectl.errors import UsageError, is_disk_full
from statectl.formats.adstore import ExtractError
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_side_input_offsets
from statectl.local.staged import StagedStore
from statectl.progress import NoteRecorder, NullProgress, ProgressReporter


def load_topic(opts: TopicLoadOptions, *, stop: threading.Event | None = None,
               progress: ProgressReporter | None = None,
               spark: SparkOptions | None = None) -> LoadResult:
    """Bootstrap (and with ``follow``, keep applying) the topic into its stores (see engine.adstore.topic).

    Raises UsageError for bad options, a store whose offsets file names another topic, or a target dir
    this load cannot prove is its own (it is left untouched); NotFoundError (exit 10) when the topic or a
    partition does not exist; LockHeldError (exit 11) when a process holds a store or another adstore load
    or switch runs on it; AdstoreExtractError (exit 1) for a record the spec cannot handle (the store keeps
    what came before it, with its offsets; a store being rebuilt is left as it was); StatectlError when the
    brokers cannot be reached; DiskFullError (exit 1) when the disk fills (a store being rebuilt is left as
    it was; a store being created or resumed keeps what its offsets say it holds). ``stop`` (SIGTERM,
    Ctrl-C) ends the load after a flush.

    With ``spark`` every store is built whole (from the log start to the true end of its partitions) by
    a Spark job, ingested into a staged store with its offsets file, and swapped in; MissingDependencyError
    (exit 13) without pyspark or Java."""
    from statectl.kafka.client import open_consumer

    opts.validate()
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    opts = _resolved(opts, spark, progress)
    consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    result = LoadResult(opts.topic, topics=list(opts.all_topics))
    targets: list[Target] = []
    locks = ExitStack()
    try:
        clones, extract = _open_targets(opts, consumer, targets, locks, progress)
        if spark is not None:
            build_dir = _spark_topic(targets, opts, spark, progress, result, locks)
        else:
            bootstrap(targets, opts, consumer, extract, stop, progress, result)
        result.bootstrapped = not stop.is_set()
        if not stop.is_set():  # an interrupted rebuild is thrown away
            _swap_in(targets, opts, result)
        if spark is not None:
            remove_build(build_dir)
        if clones and not stop.is_set():
            for c in clones:
                clone_store(targets[0], c, result)
            targets += clones
        if opts.follow and not stop.is_set():
            follow(targets, opts, extract, stop, progress, result)
    except ExtractError as e:  # loading the extractor failed
        raise UsageError(str(e)) from None
    except OSError as e:
        if is_disk_full(e):
            raise disk_full(targets[0].path if targets else Path(opts.state_dir or opts.store_dir or ".")) from e
        raise
    finally:
        for t in targets:
            close_store(t, opts, quietly=True)
            if t.staged is not None:  # not committed: its temporary dir goes, the store stays as it was
                t.staged.abort()
        consumer.close()
        locks.close()
    return _finish(result, targets, opts, progress, began)


def _resolved(opts: TopicLoadOptions, spark: SparkOptions | None, progress: ProgressReporter) -> TopicLoadOptions:
    """``opts`` completed from the job (``job`` set: engine.adstore.job.from_job); UsageError for several
    topics on Spark."""
    if opts.job:
        from statectl.engine.adstore.job import from_job

        opts = from_job(opts, progress)
    if spark is not None and len(opts.all_topics) > 1:
        raise UsageError("--spark builds a store from one topic: load several topics without --spark")
    return opts


def _open_targets(opts: TopicLoadOptions, consumer: Any, targets: list[Target], locks: ExitStack,
                  progress: ProgressReporter) -> tuple[list[Target], Any]:
    """Fill ``targets`` with the stores of the load, lock them and their broadcast copies, and assess each
    (engine.adstore.topic_stores.assess); return (the copies, the record extractor)."""
    from statectl.local.versions import StoreLock

    found, clones = prepare_stores(opts, consumer)
    targets += found
    for t in targets + clones:
        locks.enter_context(StoreLock(t.path))
    extract = opts.record_extractor()
    for t in targets:
        assess(t, opts, consumer)
        if t.load.reason:
            progress.note(f"{t.path}: {t.load.case}: {t.load.reason}")
        if t.load.case == RESUMED and offset_v2_differs(t.path):
            progress.note(f"{t.path}: its {OFFSET_V2} (left by an earlier Samza run) differs from its "
                          f"{SIDE_INPUT_OFFSETS}: resuming from {SIDE_INPUT_OFFSETS} and rewriting both")
    return clones, extract


def _swap_in(targets: list[Target], opts: TopicLoadOptions, result: LoadResult) -> None:
    """Swap each rebuilt store in for the old one (never under a process that holds it)."""
    for t in targets:
        if t.staged is not None:
            close_store(t, opts)
            if t.path.exists():
                check_not_held(t.path)
            try:
                t.staged.commit()
            except OSError as e:
                raise os_error(t.path, e, "swapping in the rebuilt store") from e
            result.notes += t.staged.notes
            t.staged = None


def _finish(result: LoadResult, targets: list[Target], opts: TopicLoadOptions, progress: ProgressReporter,
            began: float) -> LoadResult:
    """The result with every store's figures and offsets, after the notes of stores Samza would delete."""
    for t in targets:
        result.stores.append(t.load)
        t.load.offsets = {SSP(opts.system, topic, p).key(): t.offsets.get((topic, p)) for topic, p in t.parts}
        result.offsets.update(t.load.offsets)
    result.records = sum(t.load.records for t in targets)
    result.bytes = sum(t.load.bytes for t in targets)
    result.duration_s = round(time.monotonic() - began, 3)
    warn_deleted(targets, opts, progress)
    result.notes = list(progress.notes) + result.notes
    return result


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
    opts = _resolved(opts, spark, recorder)
    consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    try:
        targets, clones = prepare_stores(opts, consumer)
        for t in targets + clones:
            StoreLock(t.path).check_free()
        for t in targets:
            assess(t, opts, consumer, dry_run=True)
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



def warn_deleted(targets: list[Target], opts: TopicLoadOptions, progress: ProgressReporter) -> None:
    """A note for each store the job's next start would delete (engine.adstore.status.predict against the
    store's side-input SSPs): stale, or offsets that are not exactly its SSPs (a partition with no record),
    or with the job, its container reads no checkpoint (``wiped_tasks``)."""
    from statectl.engine.adstore.status import CREATE, DELETE_NO_CHECKPOINT, predict

    wiped = dict(opts.wiped_tasks)
    for t in targets:
        st = predict(t.path, ssps_of(t, opts), expected_from="store")
        if t.load.task in wiped and st.action != CREATE:
            st.action, st.reason = DELETE_NO_CHECKPOINT, wiped[t.load.task]
        if st.deleted:
            progress.note(f"{t.path}: Samza's next start would delete this store ({st.action}: {st.reason})")
    if any(t.load.task in wiped for t in targets):
        progress.note("a job that has not started keeps the stores when its tasks have a first checkpoint: "
                      "statectl adstore seal-checkpoint (see its --help)")



def _spark_topic(targets: list[Target], opts: TopicLoadOptions, sp: SparkOptions, progress: ProgressReporter,
                 result: LoadResult, locks: Any) -> Path:
    """Build every target whole on Spark and ingest it into a staged store with its offsets file (the
    caller swaps them in); return the build's dir (removed by the caller once every store is in place)."""
    from statectl.rocks.sst import ingest_into_new_store
    from statectl.spark.submit import BuildSpec, run_build

    parts = tuple(p for t in targets for p in t.partitions)
    spec = BuildSpec("topic", opts.spec, layout="broadcast" if opts.broadcast else "partitioned", staging=sp.staging,
                     bootstrap=opts.bootstrap, topic=opts.topic, partitions=parts)
    build_dir = targets[0].path.parent / f"{BUILD_DIR_PREFIX}{spec.spec_hash()[:16]}"
    remove_old_builds(build_dir)
    locks.enter_context(BuildLock(build_dir))
    began = time.monotonic()
    manifest = run_build(spec, build_dir, master=sp.master, conf=sp.conf, progress=progress, s3=sp.s3,
                         kafka_security=opts.security)
    result.phases["build_s"] = round(time.monotonic() - began, 3)
    began = time.monotonic()
    for t in targets:
        if t.staged is None:
            if t.load.case == RESUMED:
                t.load.case, t.load.reason = REBUILT, "--spark builds the whole store"
            t.staged = StagedStore(t.path, what="adstore load --spark", disk_full=lambda t=t: disk_full(t.path),
                                   sync="dirs")
            t.staged.open()
        store = manifest.store(None if opts.broadcast else t.partitions[0])
        failpoints.hit("adstore-ingest")
        ingest_into_new_store(t.staged.path, manifest.paths(store.store))
        t.offsets = {(opts.topic, p): manifest.offsets[p] - 1 for p in t.partitions if manifest.offsets.get(p, 0) > 0}
        write_side_input_offsets(t.staged.path, offsets_of(t, opts))
        record_topic_id(t, t.staged.path)
        t.load.records = store.rows
    result.phases["ingest_s"] = round(time.monotonic() - began, 3)
    return build_dir
