"""The job's Samza checkpoint topic as a commit log for snapshots (FORMATS.md "Checkpoint topic").

Partition 0 of ``__samza_checkpoint_ver_1_for_<job>_<job-id>`` holds every checkpoint of every task; the
latest checkpoint of a task is the last record with its key. statectl reads and writes v2 checkpoints
(key type ``checkpoint-v2``), whose ``state-checkpoint-markers`` map BlobStoreStateBackendFactory's stores
to the blob id of their SnapshotIndex. v1 checkpoints (key type ``checkpoint``) are read, to say
clearly that a job has no v2 checkpoint and to find a changelog offset; the only ones written are the empty
first checkpoints of :meth:`KafkaCheckpointLog.write_first` (adstore seal-checkpoint).

The topic is read incrementally (kafka.compacted.CompactedTopic): each call reads on from where the
previous one stopped, as Samza's KafkaCheckpointManager does.

Two things come from the job's config (its coordinator stream's ``set-config`` messages, read once when
first needed, unless the caller hands the config in): a BATCH application's checkpoint topic carries
``-<app.run.id>`` (KafkaUtil.getCheckpointTopic through StreamManager.createUniqueNameForBatch), and the
keys statectl writes name the job's ``job.systemstreampartition.grouper.factory`` (KafkaCheckpointManager
writes JobConfig.getSystemStreamPartitionGrouperFactory into every key and refuses to read a key naming
another one).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from statectl import failpoints
from statectl.errors import (
    CorruptSnapshotError,
    SnapshotNotFoundError,
    StatectlError,
    UsageError,
    command,
)
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    GROUP_BY_PARTITION_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    KEY_TYPE_V1,
    KEY_TYPE_V2,
    CheckpointFormatError,
    CheckpointKey,
    CheckpointV1,
    CheckpointV2,
    SSP,
    checkpoint_topic,
    decode_changelog_marker,
    decode_key,
    decode_v1,
    decode_v2,
    encode_key,
    encode_v2,
    parse_checkpoint_id,
    split_changelog_offset,
)
from statectl.formats.jobconfig import batch_suffix
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, create_topic, open_producer, produce
from statectl.kafka.compacted import CompactedTopic

if TYPE_CHECKING:
    from statectl.catalog.refs import StoreRef


CHECKPOINT_PARTITION = 0

# What Samza's KafkaCheckpointManager asks for when it creates the topic.
CHECKPOINT_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "26214400"}

# JobConfig.SSP_GROUPER_FACTORY (default GroupByPartitionFactory).
GROUPER_CONFIG = "job.systemstreampartition.grouper.factory"

# A Samza job writes v2 checkpoints only with task.checkpoint.write.versions including 2, and reads them
# (restores from the snapshots they name) only with task.checkpoint.read.versions including 2 (TaskConfig).
V2_HINT = ("statectl keeps snapshots in v2 checkpoints: set task.checkpoint.write.versions=1,2 and "
           "task.checkpoint.read.versions=2,1 in the job's config, or back up without --kafka")


F = TypeVar("F", bound=Callable[..., Any])


def _one_at_a_time(method: F) -> F:
    """The method holds its log's lock: one reader and one producer serve every thread, and a commit merges
    the markers of the task's latest checkpoint, so two stores of a task committing at once (backup --all)
    would otherwise each write the other's old marker back."""
    @functools.wraps(method)
    def locked(self: "KafkaCheckpointLog", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked  # type: ignore[return-value]


class KafkaCheckpointLog:
    """Latest checkpoints of a job's tasks in its Samza checkpoint topic, and commits of new ones.

    ``config``: the job's config when the caller has it (None: read from the job's coordinator stream on
    ``bootstrap`` when first needed; no coordinator stream, or one without config, is an empty config).
    Thread-safe: its operations run one at a time. ``close()`` releases the connections; the object can be
    used again after it (it reconnects and re-reads the topic).
    """

    def __init__(self, bootstrap: str, job: str, job_id: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: KafkaSecurity | None = None, config: Mapping[str, str] | None = None):
        self.bootstrap = bootstrap
        self.job = job
        self.job_id = job_id
        self._base_topic = checkpoint_topic(job, job_id)  # validates the names before any I/O
        self.timeout_s = timeout_s
        self.security = security
        self._config = dict(config) if config is not None else None
        self._producer: Any = None
        self._topic_reader: CompactedTopic[CheckpointKey] | None = None
        self._lock = threading.RLock()

    @property
    @_one_at_a_time
    def topic(self) -> str:
        """The checkpoint topic: ``__samza_checkpoint_ver_1_for_<job>_<job-id>``, with ``-<app.run.id>`` for a
        BATCH application (reads the job's config the first time)."""
        return self._base_topic + batch_suffix(self.job_config())

    @_one_at_a_time
    def job_config(self) -> dict[str, str]:
        """The job's config: the one given, else its coordinator stream's set-config (read once; empty when
        the stream does not exist). Raises StatectlError when the brokers cannot be reached."""
        if self._config is None:
            from statectl.kafka.coordinator import CoordinatorStream

            with CoordinatorStream(self.bootstrap, self.job, self.job_id, timeout_s=self.timeout_s,
                                   security=self.security) as cs:
                self._config = cs.config() if cs.refresh() else {}
        return self._config

    @property
    def _topic(self) -> CompactedTopic[CheckpointKey]:
        # (task, key type) -> its last record; keys that are not checkpoint keys (Samza would fail on them)
        # are counted in skipped_records.
        if self._topic_reader is None:
            self._topic_reader = CompactedTopic(
                self.bootstrap, self.topic, CHECKPOINT_PARTITION, decode=decode_key,
                ident=lambda k: (k.task, k.type), timeout_s=self.timeout_s, security=self.security)
        return self._topic_reader

    @property
    @_one_at_a_time
    def skipped_records(self) -> int:
        return self._topic.skipped

    @property
    def _latest(self) -> dict:
        return self._topic.latest

    # -- the contract ------------------------------------------------------------------------------

    @_one_at_a_time
    def latest(self, ref: StoreRef) -> tuple[str, str] | None:
        """(checkpoint id, index blob id) of ``ref.store`` in the latest v2 checkpoint of ``ref.task``, or None
        when that checkpoint has no blob-store marker for the store.

        Raises SnapshotNotFoundError (exit 10) when the topic does not exist or the task has no v2 checkpoint
        (saying so when the job only has v1 checkpoints); CorruptSnapshotError when the latest v2 record of
        the task is malformed; StatectlError when the brokers cannot be reached. Reads only.
        """
        self._check_ref(ref)
        if not self._refresh():
            raise self._no_topic()
        cp = self._latest_v2(ref.task)
        if cp is None:
            raise self._no_v2(ref.task)
        marker = cp.state_checkpoint_markers.get(BLOB_STORE_FACTORY, {}).get(ref.store)
        return None if marker is None else (cp.checkpoint_id, marker)

    @_one_at_a_time
    def commit(self, ref: StoreRef, checkpoint_id: str, index_blob_id: str, *,
               input_offsets: Mapping[str, str] | None = None,
               markers: Mapping[str, Mapping[str, str]] | None = None,
               other_stores: Mapping[str, str] | None = None, exact_markers: bool = False) -> None:
        """Write a v2 checkpoint ``checkpoint_id`` for ``ref.task`` whose blob-store marker for ``ref.store`` is
        ``index_blob_id``, and for each of ``other_stores`` (store -> index blob id: the task's stores committed
        as one checkpoint, as Samza's TaskStorageCommitManager writes them) its own. The input offsets and every
        other marker (other stores, other state backends) are those of the task's latest v2 checkpoint,
        unchanged, except for ``input_offsets`` (the task's, when a job commits its progress with its state)
        and ``markers`` (state backend factory -> store -> marker, e.g. the store's Kafka changelog position),
        which replace theirs. ``exact_markers``: the markers given are all the checkpoint holds, none kept from
        the latest (a task's commit of every store it has: Samza's TaskInstance.commit writes the markers
        TaskStorageCommitManager.upload returns for the stores the task has now, so a store removed from the
        job leaves no marker pinning its last snapshot). Creates the topic (1 partition, compacted) when it is
        missing. Once this returns, the record is acknowledged by all in-sync replicas: committed.

        Raises UsageError for a malformed checkpoint id or an empty blob id; StatectlError when the task has
        only v1 checkpoints (a v2 checkpoint without the job's input offsets would make a job that reads v2
        restart its inputs), or when the write fails; CorruptSnapshotError when the latest v2 record of the
        task is malformed. Not idempotent: each call appends a record (re-committing the same values is
        harmless). A job writing checkpoints for the same task meanwhile wins or loses by record order.
        """
        self._check_ref(ref)
        snapshots = {ref.store: index_blob_id, **(other_stores or {})}
        if not all(snapshots.values()):
            raise UsageError("empty index blob id")
        given = {factory: dict(stores) for factory, stores in (markers or {}).items()}
        given.setdefault(BLOB_STORE_FACTORY, {}).update(snapshots)
        self._write(ref.task, checkpoint_id, given, input_offsets, keep_markers=not exact_markers)

    @_one_at_a_time
    def commit_offsets(self, task: str, checkpoint_id: str, input_offsets: Mapping[str, str], *,
                       exact_markers: bool = False) -> None:
        """Write a v2 checkpoint of ``task`` with ``input_offsets`` (a task without stores commits its
        progress), every marker of its latest v2 checkpoint kept (``exact_markers``: none, as :meth:`commit`).
        Errors as :meth:`commit`."""
        self._write(task, checkpoint_id, {}, input_offsets, keep_markers=not exact_markers)

    def _write(self, task: str, checkpoint_id: str, markers: Mapping[str, Mapping[str, str]],
               input_offsets: Mapping[str, str] | None, *, keep_markers: bool = True) -> None:
        """Append ``task``'s v2 checkpoint: ``markers`` over those of its latest (``keep_markers``; else alone),
        ``input_offsets`` or the latest's."""
        try:
            parse_checkpoint_id(checkpoint_id)
        except CheckpointFormatError as e:
            raise UsageError(str(e)) from None
        if not self._refresh():
            create_topic(self.bootstrap, self.topic, partitions=1, configs=CHECKPOINT_TOPIC_CONFIGS, security=self.security,
                         timeout_s=self.timeout_s)
            self._refresh()
        base = self._latest_v2(task)
        if base is None and input_offsets is None and self._latest_v1(task) is not None:
            raise StatectlError(f"task {task!r} of job {self.job}-{self.job_id} has only v1 checkpoints in "
                                f"{self.topic}: statectl will not write a v2 checkpoint without the job's input "
                                "offsets", hint=V2_HINT)
        kept = base.state_checkpoint_markers if base and keep_markers else {}
        merged = {factory: dict(stores) for factory, stores in kept.items()}
        for factory, stores in markers.items():
            merged.setdefault(factory, {}).update(stores)
        offsets = dict(input_offsets) if input_offsets is not None else (dict(base.input_offsets) if base else {})
        cp = CheckpointV2(checkpoint_id, offsets, merged)
        key = CheckpointKey(task, KEY_TYPE_V2, self.grouper_factory(task))
        produce(self._producer_client(), self.topic, CHECKPOINT_PARTITION, encode_key(key), encode_v2(cp),
                self.bootstrap, timeout_s=max(30.0, self.timeout_s))

    @_one_at_a_time
    def latest_checkpoints(self) -> tuple[dict[str, CheckpointV2], list[str]]:
        """The latest v2 checkpoint of every task (read on to the end), and a line for each one skipped as
        malformed. Raises SnapshotNotFoundError (exit 10) when the topic does not exist."""
        if not self._refresh():
            raise self._no_topic()
        found: dict[str, CheckpointV2] = {}
        problems = []
        for task in self._tasks(KEY_TYPE_V2):
            try:
                cp = self._latest_v2(task)
            except CorruptSnapshotError as e:
                problems.append(str(e))
                continue
            if cp is not None:
                found[task] = cp
        return found, problems

    @_one_at_a_time
    def task_key_types(self) -> dict[str, dict[str, bool]] | None:
        """task -> {key type of its records: whether its latest record of that type is live (a tombstone
        is not)}, read on to the end; None when the topic does not exist. Raises StatectlError when the
        brokers cannot be reached."""
        if not self._refresh():
            return None
        out: dict[str, dict[str, bool]] = {}
        for (task, key_type), rec in self._latest.items():
            out.setdefault(task, {})[key_type] = rec.value is not None
        return out

    @_one_at_a_time
    def write_first(self, tasks: list[str], checkpoint_id: str, grouper_factory: str) -> tuple[list[str], list[str]]:
        """For each of ``tasks`` that has no record in the topic at all (a tombstone counts: Samza's
        KafkaCheckpointManager fails on a record after it), a v1 and a v2 checkpoint (``checkpoint_id``) with
        no input offsets and no markers, keyed with ``grouper_factory``: what the job's next start reads as
        "a checkpoint" (whichever of task.checkpoint.read.versions it reads), with the inputs starting where
        they start without one (OffsetManager gives a checkpoint without offsets the defaults). Creates the
        topic when missing. Returns (tasks written, tasks skipped as having records).

        A job writing its own first checkpoint of a task meanwhile must stay the latest: the records of such
        a task between the check and the write are written again after these (its checkpoint wins again).
        Raises StatectlError when a write fails, or when the job's records written meanwhile do not cover
        both versions (the empty one of the other version would then be what a job reading it takes)."""
        from statectl.formats.checkpoint import encode_v1

        try:
            parse_checkpoint_id(checkpoint_id)
        except CheckpointFormatError as e:
            raise UsageError(str(e)) from None
        if not self._refresh():
            create_topic(self.bootstrap, self.topic, partitions=1, configs=CHECKPOINT_TOPIC_CONFIGS,
                         security=self.security, timeout_s=self.timeout_s)
            self._refresh()
        known = {t for t, _ in self._latest}
        written, skipped, ours = [], [], set()
        start = max((rec.offset for rec in self._latest.values()), default=-1) + 1
        producer = self._producer_client()
        values = ((KEY_TYPE_V1, encode_v1(CheckpointV1({}))), (KEY_TYPE_V2, encode_v2(CheckpointV2(checkpoint_id))))
        for task in tasks:
            if task in known:
                skipped.append(task)
                continue
            failpoints.hit("adstore-seal-checkpoint")
            for key_type, value in values:
                ours.add(produce(producer, self.topic, CHECKPOINT_PARTITION,
                                 encode_key(CheckpointKey(task, key_type, grouper_factory)), value, self.bootstrap,
                                 timeout_s=max(30.0, self.timeout_s)))
            written.append(task)
        if ours:
            self._write_back_concurrent(set(written), start, max(ours) + 1, ours)
        return written, skipped

    def _write_back_concurrent(self, tasks: set[str], start: int, stop: int, ours: set[int]) -> None:
        """Write again, in order, the records of ``tasks`` in [start, stop) that are not ``ours``: a job that
        wrote its first checkpoint between the check and the write keeps it as the latest."""
        from statectl.kafka.client import PartitionReader, open_consumer

        consumer = open_consumer(self.bootstrap, timeout_s=self.timeout_s, security=self.security)
        try:
            reader = PartitionReader(consumer, self.topic, CHECKPOINT_PARTITION, self.bootstrap)
            reader.seek(start)
            theirs = []
            for batch in reader.batches(stop):
                for rec in batch:
                    try:
                        key = decode_key(rec.key)
                    except CheckpointFormatError:
                        continue
                    if key.task in tasks and rec.offset not in ours:
                        theirs.append((key, rec.key, rec.value))
        finally:
            consumer.close()
        for _, key_bytes, value in theirs:
            produce(self._producer_client(), self.topic, CHECKPOINT_PARTITION, key_bytes, value, self.bootstrap,
                    timeout_s=max(30.0, self.timeout_s))
        types: dict[str, set[str]] = {}
        for key, _, _ in theirs:
            types.setdefault(key.task, set()).add(key.type)
        uncovered = sorted(t for t, kinds in types.items() if not {KEY_TYPE_V1, KEY_TYPE_V2} <= kinds)
        if uncovered:
            raise StatectlError(f"the job wrote checkpoints of {_names(uncovered)} in {self.topic} while statectl "
                                "wrote their first ones, not of both versions: a job reading the other version "
                                "takes statectl's empty checkpoint (inputs from their default offsets)",
                                hint="let the job commit again (every task.commit.ms) before it restarts")

    @_one_at_a_time
    def read_checkpoints(self) -> dict[str, CheckpointV1 | CheckpointV2]:
        """Task -> the checkpoint the job's start reads for it (read on to the end), as Samza's
        KafkaCheckpointManager.readCheckpoints picks it from the job's config: only key types whose version is in
        ``task.checkpoint.read.versions`` (default 1: a job that keeps that default reads no v2 checkpoint), in
        topic order, a record replacing the task's current one when its version is listed no later than the
        current one's, or when it was appended more than ``task.live.checkpoint.max.age`` after it
        (shouldOverrideCheckpoint). A task absent reads none. Without the job's config: versions 2, then 1. Read over the latest record of each key, what a
        compacted topic keeps. {} when the topic does not exist. Raises ConfigError (exit 2) for read versions
        Samza cannot parse; CorruptSnapshotError when the record picked is malformed; StatectlError when the
        brokers cannot be reached."""
        from statectl.errors import ConfigError
        from statectl.formats import jobconfig

        config = self.job_config()
        try:
            # Without the job's config (no coordinator stream, or none on it) what it reads is not known: either
            # version, the v2 first (what a job writing both reads when it reads v2 at all).
            versions = jobconfig.checkpoint_read_versions(config) if config else (2, 1)
            max_age = jobconfig.live_checkpoint_max_age_ms(config)
        except jobconfig.JobConfigError as e:
            raise ConfigError(f"the config of job {self.job}-{self.job_id}: {e}",
                              hint="the job cannot start with it either: fix the job's config") from None
        if not self._refresh():
            return {}
        picked: dict[str, Any] = {}
        # KafkaCheckpointLogKey.CHECKPOINT_KEY_VERSIONS: CheckpointKey.version.
        records = sorted((rec for rec in self._latest.values()
                          if rec.value is not None and rec.key.version in versions), key=lambda r: r.offset)
        for rec in records:
            current = picked.get(rec.key.task)
            if current is None or versions.index(rec.key.version) <= versions.index(current.key.version) \
                    or rec.timestamp_ms - current.timestamp_ms > max_age:
                picked[rec.key.task] = rec
        return {task: (self._latest_v2(task) if rec.key.type == KEY_TYPE_V2 else self._latest_v1(task))
                for task, rec in picked.items()}

    @_one_at_a_time
    def read_changelog_offset(self, task: str, store: str, ssp: SSP) -> tuple[SSP, str | None] | None:
        """(changelog SSP, offset) of ``store`` in the checkpoint the job's start reads for ``task``
        (:meth:`read_checkpoints`), as TransactionalStateTaskRestoreManager.getCheckpointedChangelogOffsets
        takes it: a v2 checkpoint's Kafka changelog marker for the store; a v1 checkpoint's entry for the
        store's changelog partition ``ssp`` (``<checkpointId>:<offset>``, its offset part). None when it names
        none. Raises as read_checkpoints, and CorruptSnapshotError for a malformed marker."""
        cp = self.read_checkpoints().get(task)
        if isinstance(cp, CheckpointV1):
            key = (ssp.system, ssp.stream, ssp.partition)
            entries = [v for s, v in cp.offsets.items() if (s.system, s.stream, s.partition) == key]
            if not entries or entries[0] is None or not entries[0].strip():
                return None
            return ssp, split_changelog_offset(entries[0])[1]
        text = cp.state_checkpoint_markers.get(KAFKA_CHANGELOG_FACTORY, {}).get(store) if cp else None
        if text is None:
            return None
        try:
            marker = decode_changelog_marker(text)
        except CheckpointFormatError as e:
            raise CorruptSnapshotError(f"checkpoint {cp.checkpoint_id} of task {task!r} in {self.topic}: "
                                       f"changelog marker of store {store!r}: {e}") from None
        return marker.ssp, marker.offset

    @_one_at_a_time
    def task_names(self) -> set[str]:
        """Every task with a checkpoint (v1 or v2) in the topic, read on to its end: names the job itself
        wrote. Empty when the topic does not exist."""
        if not self._refresh():
            return set()
        return set(self._tasks(KEY_TYPE_V2)) | set(self._tasks(KEY_TYPE_V1))

    @_one_at_a_time
    def latest_changelog_offset(self, task: str, store: str, *,
                                changelog_topic: str | None = None) -> tuple[dict, str | None] | None:
        """(changelog SSP, offset) of ``store``'s Kafka changelog in the latest checkpoint of ``task``, or None.

        The SSP is a dict ``{"system", "stream", "partition", "keyBucket"}``; the offset is that of the newest
        changelog record the checkpoint covers (None: the changelog partition was empty). Taken from the
        KafkaChangelogStateBackendFactory marker of the latest v2 checkpoint; failing that, from the latest v1
        checkpoint, whose entries do not name their store: the entry whose stream is ``changelog_topic``, or
        else the only entry whose stream contains the store's name. A v1 value ``<checkpointId>:<offset>``
        (transactional state) gives its offset part.

        Raises SnapshotNotFoundError when the topic does not exist; CorruptSnapshotError for a malformed
        latest record or marker; StatectlError when the brokers cannot be reached.
        """
        if not self._refresh():
            raise self._no_topic()
        cp = self._latest_v2(task)
        text = cp.state_checkpoint_markers.get(KAFKA_CHANGELOG_FACTORY, {}).get(store) if cp else None
        if text is not None:
            try:
                marker = decode_changelog_marker(text)
            except CheckpointFormatError as e:
                raise CorruptSnapshotError(f"checkpoint {cp.checkpoint_id} of task {task!r} in {self.topic}: "
                                           f"changelog marker of store {store!r}: {e}") from None
            return _ssp_dict(marker.ssp), marker.offset
        v1 = self._latest_v1(task)
        if v1 is None:
            return None
        if changelog_topic is not None:
            entries = [(ssp, off) for ssp, off in v1.offsets.items()
                       if changelog_topic in (ssp.stream, f"{ssp.system}.{ssp.stream}")]
        else:
            entries = [(ssp, off) for ssp, off in v1.offsets.items() if store in ssp.stream]
        if len(entries) != 1:
            return None
        ssp, value = entries[0]
        return _ssp_dict(ssp), split_changelog_offset(value)[1]

    @_one_at_a_time
    def close(self) -> None:
        """Close the connections; idempotent."""
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close()
        if self._topic_reader is not None:
            self._topic_reader.close()

    def __enter__(self) -> "KafkaCheckpointLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------------

    def _check_ref(self, ref: StoreRef) -> None:
        if (ref.job, ref.job_id) != (self.job, self.job_id):
            raise UsageError(f"{ref} is not a store of job {self.job}-{self.job_id} (checkpoint topic {self.topic})")

    def _refresh(self) -> bool:
        """Read the topic on to its end; False when it does not exist."""
        return self._topic.refresh()

    def _latest_v2(self, task: str) -> CheckpointV2 | None:
        rec = self._latest.get((task, KEY_TYPE_V2))
        if rec is None or rec.value is None:  # a null value deletes the task's checkpoint (compaction)
            return None
        try:
            return decode_v2(rec.value)
        except CheckpointFormatError as e:
            raise CorruptSnapshotError(f"latest v2 checkpoint of task {task!r} in {self.topic} (offset "
                                       f"{rec.offset}) is malformed: {e}") from None

    def _latest_v1(self, task: str) -> CheckpointV1 | None:
        rec = self._latest.get((task, KEY_TYPE_V1))
        if rec is None or rec.value is None:
            return None
        try:
            return decode_v1(rec.value)
        except CheckpointFormatError as e:
            raise CorruptSnapshotError(f"latest v1 checkpoint of task {task!r} in {self.topic} (offset "
                                       f"{rec.offset}) is malformed: {e}") from None

    @_one_at_a_time
    def grouper_factory(self, task: str = "") -> str:
        """The SSP grouper factory to name in a key of ``task``: the job's configured one, as Samza's
        KafkaCheckpointManager writes and checks it (JobConfig.getSystemStreamPartitionGrouperFactory:
        the key's value, else GroupByPartitionFactory); without a config, the one the job's own keys name
        (the task's first, else any task's); GroupByPartitionFactory when there are none."""
        config = self.job_config()
        if config:
            value = config.get(GROUPER_CONFIG)
            return GROUP_BY_PARTITION_FACTORY if value is None else value
        self._refresh()
        for key_type in (KEY_TYPE_V2, KEY_TYPE_V1):
            rec = self._latest.get((task, key_type))
            if rec is not None:
                return rec.key.grouper_factory
        for rec in self._latest.values():
            return rec.key.grouper_factory
        return GROUP_BY_PARTITION_FACTORY

    def _tasks(self, key_type: str) -> list[str]:
        return sorted(t for (t, kt), rec in self._latest.items() if kt == key_type and rec.value is not None)

    def _no_topic(self) -> SnapshotNotFoundError:
        return SnapshotNotFoundError(
            f"checkpoint topic {self.topic} of job {self.job}-{self.job_id} does not exist on {self.bootstrap}",
            hint="check --job and --job-id; the topic appears with the job's first checkpoint or statectl's "
                 "first backup with --kafka")

    def _no_v2(self, task: str) -> SnapshotNotFoundError:
        v2_tasks, v1_tasks = self._tasks(KEY_TYPE_V2), self._tasks(KEY_TYPE_V1)
        if not v2_tasks and v1_tasks:
            return SnapshotNotFoundError(
                f"job {self.job}-{self.job_id} has only v1 checkpoints in {self.topic}: no v2 checkpoint for "
                f"task {task!r}" + ("" if task in v1_tasks else f" (tasks with v1 checkpoints: {_names(v1_tasks)})"),
                hint=V2_HINT)
        if task in v1_tasks:
            return SnapshotNotFoundError(
                f"task {task!r} of job {self.job}-{self.job_id} has only v1 checkpoints in {self.topic}: "
                "no v2 checkpoint", hint=V2_HINT)
        where = f" (tasks with v2 checkpoints: {_names(v2_tasks)})" if v2_tasks else ""
        return SnapshotNotFoundError(f"no v2 checkpoint for task {task!r} in {self.topic}{where}",
                                     hint=("check --task, or run ", command("backup"),
                                           " first (with --kafka: it writes a v2 checkpoint)"))

    def _producer_client(self) -> Any:
        if self._producer is None:
            self._producer = open_producer(self.bootstrap, timeout_s=self.timeout_s, security=self.security)
        return self._producer


def _ssp_dict(ssp: Any) -> dict:
    return {"system": ssp.system, "stream": ssp.stream, "partition": ssp.partition, "keyBucket": ssp.key_bucket}


def _names(tasks: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(t) for t in tasks[:limit])
    return shown + (f" and {len(tasks) - limit} more" if len(tasks) > limit else "")


class KafkaCheckpointLogs:
    """The checkpoint topics of every job on one Kafka cluster, as one commit log: each call goes to
    the topic of the ref's job (``gc`` reconciles stores of many jobs sharing a blob store)."""

    def __init__(self, bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, security: KafkaSecurity | None = None):
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.security = security
        self._logs: dict[tuple[str, str], KafkaCheckpointLog] = {}
        self._lock = threading.Lock()

    def for_job(self, job: str, job_id: str) -> KafkaCheckpointLog:
        with self._lock:  # one log per job, whichever thread asks first
            log = self._logs.get((job, job_id))
            if log is None:
                log = self._logs[(job, job_id)] = KafkaCheckpointLog(self.bootstrap, job, job_id,
                                                                     timeout_s=self.timeout_s, security=self.security)
            return log

    def latest(self, ref: StoreRef) -> tuple[str, str] | None:
        return self.for_job(ref.job, ref.job_id).latest(ref)

    def jobs(self) -> list[tuple[str, str]]:
        """(job, job id) of every checkpoint topic on the cluster (formats.checkpoint.job_of_checkpoint_topic),
        sorted: the jobs a Samza job's own commits make known. Metadata only. Raises StatectlError when the
        brokers cannot be reached (AuthError when they refuse)."""
        from statectl.formats.checkpoint import job_of_checkpoint_topic
        from statectl.kafka.client import topic_names

        topics = topic_names(self.bootstrap, timeout_s=self.timeout_s, security=self.security)
        return sorted(j for j in map(job_of_checkpoint_topic, topics) if j is not None)

    def commit(self, ref: StoreRef, checkpoint_id: str, index_blob_id: str, *,
               input_offsets: Mapping[str, str] | None = None,
               markers: Mapping[str, Mapping[str, str]] | None = None,
               other_stores: Mapping[str, str] | None = None, exact_markers: bool = False) -> None:
        self.for_job(ref.job, ref.job_id).commit(ref, checkpoint_id, index_blob_id, input_offsets=input_offsets,
                                                 markers=markers, other_stores=other_stores,
                                                 exact_markers=exact_markers)

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()
