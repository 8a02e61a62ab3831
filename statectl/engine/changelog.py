"""restore --from-changelog: rebuild a store by replaying its Kafka changelog partition (the slow path that
snapshots replace).

Every record of the partition, from its start (or ``start_offset``) to its end (or below ``stop_offset``), is
applied in offset order: its key and value bytes become a RocksDB entry, a null value deletes the key.
Writes go through WriteBatches into a new store in a temporary sibling dir of the target, which is then
swapped into place exactly as a snapshot restore does (statectl.local.staged.StagedStore): the target is never
half-written, and on any error it is left as it was and the temporary dir removed. The new store carries
the ``OFFSET-v2`` file Samza writes after a flush (the offset of the last record read, for
``<system>.<topic>.<partition>``): without it Samza treats a logged store as invalid and deletes it.

With ``checkpoint_ref`` (a job), the changelog is read where the job's config puts its system
(``systems.<system>.consumer.bootstrap.servers`` and the system's consumer security, kafka.systems): a
changelog on another cluster than the job's checkpoint topic is read there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.refs import StoreRef
from statectl.errors import DiskFullError, SnapshotNotFoundError, StatectlError, UsageError
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, offsets_json, write_offset_file
from statectl.kafka.client import KafkaSecurity, LazyConsumer
from statectl.local.staged import StagedStore, check_target, note_if_linked, resolve_target
from statectl.progress import NoteRecorder, NullProgress, ProgressReporter

DEFAULT_BATCH_RECORDS = 10_000
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ChangelogRestoreOptions:
    """What to replay where.

    ``start_offset`` None: the partition's first offset. ``stop_offset``: apply only the records below this
    offset (exclusive, like a Kafka end offset: a checkpoint's changelog offset + 1); None: everything up to
    the partition's end when the replay gets there. ``checkpoint_ref``: stop where the latest Samza
    checkpoint of that store's task says its changelog was (the job's checkpoint topic on the same brokers),
    as Samza restores a transactional store; exclusive with ``stop_offset``. ``force`` allows replacing a
    non-empty target dir that is not a RocksDB store.
    """

    bootstrap: str
    topic: str
    partition: int
    target_dir: Path
    start_offset: int | None = None
    stop_offset: int | None = None
    checkpoint_ref: StoreRef | None = None
    batch_records: int = DEFAULT_BATCH_RECORDS
    batch_bytes: int = DEFAULT_BATCH_BYTES
    force: bool = False
    timeout_s: float = 5.0
    system: str = "kafka"
    security: KafkaSecurity | None = None  # TLS/SASL settings of the brokers; None: PLAINTEXT
    # As for a snapshot restore: another store's dir inside ``state_dir`` (anything but ``own_store``) is
    # never a target (local.staged.check_target).
    state_dir: Path | None = None
    own_store: Path | None = None
    blob_root: Path | None = None  # a file:// blob store's dir: never a target, not even with force

    def validate(self) -> None:
        if not self.bootstrap:
            raise UsageError("--from-changelog needs Kafka brokers", hint="pass --kafka HOST:PORT[,..]")
        if not self.topic:
            raise UsageError("no changelog topic given")
        if self.partition < 0:
            raise UsageError("--partition must be 0 or more")
        for name in ("start_offset", "stop_offset"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"--{name.replace('_', '-')} must be 0 or more")
        if self.start_offset is not None and self.stop_offset is not None and self.stop_offset < self.start_offset:
            raise UsageError("the stop offset is before the start offset")
        if self.checkpoint_ref is not None and self.stop_offset is not None:
            raise UsageError("stop at the checkpoint or at an offset, not both (--to-checkpoint, --until-offset)")
        if not self.system or "." in self.system:
            raise UsageError(f"invalid system name {self.system!r}: Samza's offset files key on system.stream.partition")
        if self.batch_records < 1 or self.batch_bytes < 1:
            raise UsageError("batch sizes must be at least 1")


@dataclass
class ChangelogRestoreResult:
    """``records`` applied (puts and deletes), their key + value ``bytes``; ``end_offset`` is the offset after
    the last record read, where a later replay of the same partition would continue."""

    records: int
    bytes: int
    duration_s: float
    target_dir: str
    topic: str
    partition: int
    end_offset: int | None


@dataclass
class ChangelogRestorePlan:
    """What ``restore_from_changelog`` will do, decided with nothing written: replay ``topic[partition]`` from
    ``first_offset`` to below ``stop_offset`` (None: to the end as the replay finds it; ``end_offset`` is the
    end now) into ``target_dir`` (``replaces_store``: over the store there). ``offsets``: the offsets in that
    range now, the most records it applies (fewer for a compacted log or keyless records).
    ``restore --from-changelog --dry-run`` prints it; ``restore_from_changelog`` executes it."""

    target_dir: str
    topic: str
    partition: int
    first_offset: int
    stop_offset: int | None
    end_offset: int
    offsets: int
    replaces_store: bool
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)


def plan_restore_from_changelog(opts: ChangelogRestoreOptions,
                                progress: ProgressReporter | None = None) -> ChangelogRestorePlan:
    """The plan of ``restore_from_changelog(opts)``, with its checks, reading the partition's offsets (and
    with ``checkpoint_ref`` the job's checkpoint topic), writing nothing. Raises what it raises before it
    writes."""
    recorder = NoteRecorder(progress)
    with _ChangelogConsumer(opts, recorder) as consumer_of:
        plan = _plan(opts, consumer_of, recorder)
    plan.notes = recorder.notes
    return plan


class _ChangelogConsumer(LazyConsumer):
    """A LazyConsumer on the brokers the changelog is on, found at the first call: with ``checkpoint_ref``,
    where the job's config puts ``opts.system`` (kafka.systems.system_brokers), else ``opts.bootstrap``."""

    def __init__(self, opts: ChangelogRestoreOptions, progress: ProgressReporter):
        super().__init__(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
        self.opts, self.progress, self._resolved = opts, progress, False

    def __call__(self) -> Any:
        if not self._resolved and self.opts.checkpoint_ref is not None:
            from statectl.catalog.kafka_log import KafkaCheckpointLog
            from statectl.kafka.systems import system_brokers

            ref, opts = self.opts.checkpoint_ref, self.opts
            with KafkaCheckpointLog(opts.bootstrap, ref.job, ref.job_id, timeout_s=opts.timeout_s,
                                    security=opts.security) as log:
                brokers = system_brokers(log.job_config(), opts.system, opts.bootstrap, opts.security)
            if brokers.elsewhere:
                self.progress.note(f"reading changelog {opts.topic} on {brokers.bootstrap}, the brokers of system "
                                   f"{opts.system} ({brokers.key} in the config of job {ref.job}-{ref.job_id})")
            self.bootstrap, self.security = brokers.bootstrap, brokers.security
        self._resolved = True
        return super().__call__()


def _plan(opts: ChangelogRestoreOptions, consumer_of: Any, progress: ProgressReporter) -> ChangelogRestorePlan:
    """The plan; ``consumer_of()`` opens the consumer, once the local checks have passed (a refused target
    is refused without asking a broker)."""
    from statectl.kafka.client import require_partition
    from statectl.kafka.tails import read_tails
    from statectl.rocks.store import is_store

    opts.validate()
    target = resolve_target(Path(opts.target_dir))
    check_target(target, opts.force, blob_root=opts.blob_root, own_store=opts.own_store, state_dir=opts.state_dir)
    note_if_linked(Path(opts.target_dir), target, progress)
    stop = opts.stop_offset
    if opts.checkpoint_ref is not None:
        stop = checkpointed_stop_offset(opts)
        progress.note(f"replaying {opts.topic}[{opts.partition}] below offset {stop}, as the latest checkpoint "
                      f"of {opts.checkpoint_ref} records")
    consumer = consumer_of()
    require_partition(consumer, opts.topic, opts.partition, consumer_of.bootstrap)
    tail = read_tails(consumer, opts.topic, [opts.partition], consumer_of.bootstrap)[opts.partition]
    first = tail.beginning if opts.start_offset is None else max(opts.start_offset, tail.beginning)
    upto = tail.end if stop is None else min(stop, tail.end)
    if stop is not None and stop > tail.end:
        progress.note(f"changelog {opts.topic}[{opts.partition}] ends at offset {tail.end} now, short of offset "
                      f"{stop}: the restore fails unless it grows that far")
    return ChangelogRestorePlan(str(target), opts.topic, opts.partition, first, stop, tail.end, max(0, upto - first),
                                is_store(target))


def restore_from_changelog(opts: ChangelogRestoreOptions,
                           progress: ProgressReporter | None = None) -> ChangelogRestoreResult:
    """Rebuild the store at ``opts.target_dir`` from changelog ``opts.topic`` partition ``opts.partition``.

    Raises UsageError for bad options or a non-empty target that is not a store (without ``force``), or a
    checkpoint that names another changelog partition; LockHeldError (exit 11) when a running process holds
    the target store; NotFoundError (10) when the topic or partition does not exist, or (``checkpoint_ref``)
    no checkpoint records the store's changelog offset; StatectlError when the brokers cannot be reached or fail, when the
    partition ends before ``stop_offset``, or when RocksDB fails; DiskFullError when the disk fills. In every
    error case the target is left exactly as it was. Not idempotent in cost, but repeatable: a second run
    over the same changelog builds the same store. What it replays is the plan
    ``plan_restore_from_changelog`` computes (made here first).
    """
    progress = progress or NullProgress()
    started = time.monotonic()

    from statectl.kafka.client import PartitionReader

    with _ChangelogConsumer(opts, progress) as consumer_of:
        plan = _plan(opts, consumer_of, progress)
        consumer = consumer_of()
        target, stop = Path(plan.target_dir), plan.stop_offset
        reader = PartitionReader(consumer, opts.topic, opts.partition, consumer_of.bootstrap)
        first = reader.seek(plan.first_offset)
        with StagedStore(target, what="restore from changelog", disk_full=lambda: _disk_full(target)) as staged:
            records, nbytes = _replay(reader, staged.path, stop, opts, progress)
            if stop is not None and reader.position is not None and reader.position < stop:
                raise StatectlError(f"changelog {opts.topic}[{opts.partition}] ends at offset {reader.position}, "
                                    f"short of offset {stop} that the replay was asked to reach; the target "
                                    "is untouched", hint="the changelog may have lost records (retention); check "
                                    "the topic, or restore from a snapshot")
            if reader.position is not None and reader.position > first:
                # Samza's restore manager deletes a logged store without a valid OFFSET-v2 as invalid.
                write_offset_file(staged.path / OFFSET_V2, offsets_json(
                    {SSP(opts.system, opts.topic, opts.partition): str(reader.position - 1)}))
            staged.commit()
    for note in staged.notes:
        progress.note(note)

    return ChangelogRestoreResult(
        records=records, bytes=nbytes, duration_s=round(time.monotonic() - started, 3), target_dir=str(target),
        topic=opts.topic, partition=opts.partition, end_offset=reader.position)


def checkpointed_stop_offset(opts: ChangelogRestoreOptions) -> int:
    """One past the changelog offset that the latest checkpoint of ``opts.checkpoint_ref`` records for its
    store (0 when the changelog was empty then), checked against ``opts.topic`` and ``opts.partition``.

    Raises SnapshotNotFoundError when no checkpoint records it, UsageError when it names another changelog
    partition or an offset that is not a number; StatectlError when the brokers cannot be reached.
    """
    from statectl.catalog.kafka_log import KafkaCheckpointLog

    ref = opts.checkpoint_ref
    assert ref is not None
    log = KafkaCheckpointLog(opts.bootstrap, ref.job, ref.job_id, timeout_s=opts.timeout_s, security=opts.security)
    try:
        found = log.latest_changelog_offset(ref.task, ref.store, changelog_topic=opts.topic)
    finally:
        log.close()
    if found is None:
        raise SnapshotNotFoundError(f"no checkpoint of {ref} in {log.topic} records a changelog offset for the "
                                    "store", hint="replay to the end without --to-checkpoint, or check "
                                    "--job/--task/--store")
    ssp, offset = found
    if (ssp["stream"], ssp["partition"]) != (opts.topic, opts.partition):
        raise UsageError(f"the latest checkpoint of {ref} records changelog {ssp['stream']} partition "
                         f"{ssp['partition']}, not {opts.topic} partition {opts.partition}",
                         hint=f"pass --from-changelog {ssp['stream']} --partition {ssp['partition']}")
    if offset is None:
        return 0
    try:
        return int(offset) + 1
    except ValueError:
        raise UsageError(f"the latest checkpoint of {ref} records changelog offset {offset!r}, which is not a "
                         "Kafka offset") from None


def _replay(reader: Any, tmp: Path, stop: int | None, opts: ChangelogRestoreOptions,
            progress: ProgressReporter) -> tuple[int, int]:
    """Apply the partition's records to a new store in ``tmp``, a WriteBatch per ``batch_records`` records
    or ``batch_bytes`` bytes; return (records, bytes)."""
    from statectl.rocks.writer import StoreWriter

    writer = StoreWriter(tmp)
    records = nbytes = keyless = 0
    pending: list[tuple[bytes, bytes | None]] = []
    pending_bytes = 0
    ok = False
    progress.start(f"replaying {opts.topic}[{opts.partition}]", 0, 0)
    try:
        for batch in reader.batches(stop):
            for rec in batch:
                if rec.key is None:  # not a store write: Samza's changelogs always carry the store key
                    keyless += 1
                    continue
                pending.append((rec.key, rec.value))
                pending_bytes += len(rec.key) + (len(rec.value) if rec.value is not None else 0)
                if len(pending) >= opts.batch_records or pending_bytes >= opts.batch_bytes:
                    writer.apply(pending)
                    records, nbytes = records + len(pending), nbytes + pending_bytes
                    progress.advance(pending_bytes)
                    pending, pending_bytes = [], 0
        if pending:
            writer.apply(pending)
            records, nbytes = records + len(pending), nbytes + pending_bytes
            progress.advance(pending_bytes)
        ok = True
    finally:
        progress.stop()
        writer.close(flush=ok)
    if keyless:
        progress.note(f"skipped {keyless} record{'s' if keyless != 1 else ''} without a key in "
                      f"{opts.topic}[{opts.partition}]")
    return records, nbytes


def _disk_full(target: Path) -> DiskFullError:
    return DiskFullError(f"no space left on device restoring from the changelog into {target}; the old store is "
                         "untouched", hint=f"free some space in {target.parent}, or restore elsewhere with --target-dir")
