"""How the job's next start restores a task's store, and so what of a promoted replica it keeps.

From the job's config (its coordinator stream) and the checkpoint that start reads for the task
(KafkaCheckpointLog.read_checkpoints): under non-transactional restore the start reuses the active dir; under
the default transactional restore it deletes the active dir and keeps only a checkpoint dir at the offset it
restores to (so promote catches the replica up exactly to that offset and renames it to
``<active dir>-<checkpointId>``); what the start would delete anyway (the blob-store backend, a replica past that
offset, clean.on.container.start) is refused with DiscardedError (exit 14). Without the job's config
(``unchecked``) nothing says the start keeps the dir: refused unless the caller says the job restores the store
non-transactionally. See docs/standby.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef
from statectl.engine.standby.replica import Replica
from statectl.errors import DiscardedError, StatectlError, UsageError, command
from statectl.formats import jobconfig
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    CheckpointFormatError,
    CheckpointV1,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    decode_changelog_marker,
    parse_checkpoint_id,
    split_changelog_offset,
)
from statectl.formats.coordinator import coordinator_topic
from statectl.kafka.client import KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import Tail


RESTORE_NON_TRANSACTIONAL = "non-transactional"


RESTORE_TRANSACTIONAL = "transactional"


RESTORE_UNCHECKED = "unchecked"


@dataclass(frozen=True)
class NextStart:
    """How the job's next start restores the task's store, from the job's config (its coordinator stream)
    and the task's latest v2 checkpoint, and so what of a promoted replica it keeps:

    - ``non-transactional`` (``task.transactional.state.restore.enabled=false``, standby tasks on, or
      ``task.async.commit``; TaskConfig.getTransactionalStateRestoreEnabled): NonTransactionalStateTaskRestoreManager
      keeps the active store dir when its offset file names exactly the changelog partition and is not
      stale, and restores the changelog after its offset.
    - ``transactional`` (the default): TransactionalStateTaskRestoreManager.getStoreActions deletes the
      active store dir and keeps at most one checkpoint dir ``<store dir>-<id>`` whose valid, fresh offset
      file names an offset between the changelog's oldest and the target (the checkpointed changelog offset
      ``checkpointed_offset`` of checkpoint ``checkpoint_id``; the newest offset once the checkpoint is older
      than 0.9 x ``min_compaction_lag_ms``).
    - ``unchecked``: the job has no coordinator stream, or no config on it; nothing known.

    ``delete_retention_ms``: a kept dir's offset file must be younger (StorageManagerUtil.isStaleStore).
    The checkpoint read is the task's latest v2 one: a job that writes checkpoints v1 and v2 (Samza's
    default) writes both with the same id and offsets."""

    mode: str
    why: str
    checkpoint_id: str | None = None
    checkpoint_millis: int | None = None
    checkpointed_offset: int | None = None
    min_compaction_lag_ms: int = jobconfig.DEFAULT_MIN_COMPACTION_LAG_MS
    delete_retention_ms: int = jobconfig.DEFAULT_DELETE_RETENTION_MS
    assumed: bool = False  # ``unchecked``, taken as non-transactional on the caller's word


def kept_by_next_start(start: NextStart, replica: Replica, assume_non_transactional: bool = False) -> NextStart:
    """``start``, once it is known that the job's next start keeps what promote makes there. An ``unchecked``
    one (no config to read) is refused with DiscardedError (exit 14): the job's default, transactional
    restore deletes the dir; unless ``assume_non_transactional``, the caller's word that the job restores the
    store non-transactionally (then ``assumed``). UsageError (exit 2) for that word when the config says
    another restore. Pure."""
    if start.mode == RESTORE_UNCHECKED:
        if assume_non_transactional:
            return replace(start, assumed=True)
        raise DiscardedError(
            f"refusing to promote the replica of store {replica.ref.store!r} of task {replica.ref.task!r}: how the "
            f"job's next start restores it is not known ({start.why}), and Samza's default, transactional "
            "restore deletes the promoted dir",
            hint="promote once the job's config is on its coordinator stream, or pass --non-transactional-restore "
                 "if the job restores the store non-transactionally (task.transactional.state.restore.enabled="
                 "false, standby tasks or async commit)")
    if assume_non_transactional and start.mode != RESTORE_NON_TRANSACTIONAL:
        raise UsageError(f"--non-transactional-restore: the job's config says {start.mode} restore"
                         + (f" ({start.why})" if start.why else ""),
                         hint="leave --non-transactional-restore out: the job's config decides")
    return start


def next_start(replica: Replica, bootstrap: str, *, security: KafkaSecurity | None = None,
               config: dict[str, str] | None = None, checkpoints: dict[str, Any] | None = None) -> NextStart:
    """How the job's next start restores ``replica``'s store (NextStart). Reads only. ``config`` (the job's,
    from its coordinator stream) and ``checkpoints`` (task -> the checkpoint the job's start reads, v1 or v2, as
    latest_checkpoints gives them: ``task.checkpoint.read.versions`` honoured): already read by a caller asking
    for many stores.

    Raises DiscardedError (exit 14) when that start deletes the store dir and every checkpoint dir of the
    task whatever promote puts there: the store is restored by the blob store backend (BlobStoreRestoreManager
    deletes them, keeping only a checkpoint dir identical to the snapshot), by a backend statectl does not
    know, or not at all (a store without a changelog is not logged: always deleted);
    ``stores.<store>.clean.on.container.start``; under transactional restore, a task without a checkpoint the
    job reads naming an offset for the store (a v2 Kafka changelog marker, a v1 ``<checkpointId>:<offset>``
    entry: Samza then restores from the changelog's oldest offset, all dirs deleted), or whose marker names
    another changelog partition than the replica's (its offset file would not be valid). The restore backend
    is the one that checkpoint selects (a v1 checkpoint: the Kafka changelog's, whatever the store's restore
    factories say). StatectlError for a config value Samza cannot parse,
    or brokers that cannot be reached."""
    ref = replica.ref
    if config is None:
        with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
            if not cs.refresh():
                return NextStart(RESTORE_UNCHECKED, f"job {ref.job}-{ref.job_id} has no coordinator stream {cs.topic}")
            config = cs.config()
    if not config:  # the stream holds the job's locality (or nothing) but no config: nothing to read it from
        return NextStart(RESTORE_UNCHECKED, f"the coordinator stream {coordinator_topic(ref.job, ref.job_id)} "
                                            "holds no config of the job")
    if checkpoints is None:
        checkpoints = latest_checkpoints(bootstrap, ref, security, config=config)
    checkpoint = checkpoints.get(ref.task)
    refused = f"refusing to promote the replica of store {ref.store!r} of task {ref.task!r}"
    try:
        _check_changelog_restore(config, ref.store, checkpoint, refused)
        why = jobconfig.restore_reason(config)
        if not jobconfig.transactional_restore_enabled(config):
            return NextStart(RESTORE_NON_TRANSACTIONAL, why)
        start = NextStart(RESTORE_TRANSACTIONAL, why,
                          min_compaction_lag_ms=jobconfig.changelog_min_compaction_lag_ms(config, ref.store),
                          delete_retention_ms=jobconfig.changelog_delete_retention_ms(config, ref.store))
    except jobconfig.JobConfigError as e:
        raise StatectlError(f"the config of job {ref.job}-{ref.job_id}: {e}",
                            hint="the job cannot start with it either: fix the job's config") from None
    return _transactional_start(start, replica, config, checkpoint, refused)


def _check_changelog_restore(config: dict[str, str], store: str, checkpoint: Any, refused: str) -> None:
    """DiscardedError (exit 14) unless the job's next start restores ``store`` from its Kafka changelog, keeping
    the dirs it finds (next_start's cases); JobConfigError for a value Samza cannot parse."""
    factory = jobconfig.checkpoint_restore_factory(config, store, checkpoint)
    if factory == BLOB_STORE_FACTORY:
        raise DiscardedError(
            f"{refused}: the job restores the store from the blob store (BlobStoreStateBackendFactory), "
            "whose restore deletes the store dir and every checkpoint dir but one identical to the snapshot",
            hint=("keep the snapshot pre-restored on this host with ", command("standby follow", "--pre-restore"),
                  ", then promote without --replica-dir and --active-dir"))
    if factory is None:
        raise DiscardedError(f"{refused}: the job's config gives the store no changelog "
                             f"(stores.{store}.changelog) nor restore factories, so its start deletes the dir",
                             hint="check --job and --store")
    if factory != KAFKA_CHANGELOG_FACTORY:
        raise DiscardedError(f"{refused}: the job restores the store with {factory}, whose start statectl "
                             "cannot tell keeps a promoted dir",
                             hint="restore the store from the Kafka changelog in the job's config")
    if jobconfig.clean_on_start(config, store):
        raise DiscardedError(f"{refused}: stores.{store}.clean.on.container.start is true, so the job's start "
                             "deletes the store dir and every checkpoint dir",
                             hint=f"unset stores.{store}.clean.on.container.start, then promote again")


def _transactional_start(start: NextStart, replica: Replica, config: dict[str, str], checkpoint: Any,
                         refused: str) -> NextStart:
    """``start`` (transactional) with the checkpoint id and changelog offset of the task's ``checkpoint`` the job's
    start restores to; DiscardedError (exit 14) when it names none, or names another changelog partition."""
    position = checkpointed_position(checkpoint, replica.ref.store, replica.ssp)
    if checkpoint is None or position is None or not (position[2] or "").strip() or position[0] is None:
        what = (f"has no checkpoint the job reads ({jobconfig.CHECKPOINT_READ_VERSIONS}: "
                f"{','.join(map(str, jobconfig.checkpoint_read_versions(config)))})" if checkpoint is None else
                "'s checkpoint the job reads names no changelog offset for the store")
        raise DiscardedError(
            f"{refused}: under transactional restore ({start.why}) the task {what}, so the job's next start deletes "
            "the store dir and every checkpoint dir and restores from the changelog",
            hint="promote after the job's first commit with a changelog offset, or set "
                 "task.transactional.state.restore.enabled=false in the job's config")
    checkpoint_id, ssp, offset = position
    if (ssp.system, ssp.stream, ssp.partition) != (replica.system, replica.changelog, replica.partition):
        raise DiscardedError(
            f"{refused}: the task's checkpoint {checkpoint_id} names changelog {ssp.key()}, the "
            f"replica follows {replica.ssp.key()}: its offset file would not be valid for the job",
            hint="follow the changelog partition the job's checkpoint names")
    millis, second = parse_checkpoint_id(checkpoint_id)  # type: ignore[arg-type]
    return replace(start, checkpoint_id=f"{millis}-{second}", checkpoint_millis=millis,
                   checkpointed_offset=int(offset))  # type: ignore[arg-type]


def checkpointed_position(checkpoint: Any, store: str, ssp: SSP) -> tuple[str | None, SSP, str | None] | None:
    """(checkpoint id, changelog SSP, offset) of ``store`` in ``checkpoint`` (the one the job's start reads), as
    TransactionalStateTaskRestoreManager takes them (getCheckpointedChangelogOffsets, getCheckpointId): a v2
    checkpoint's id and Kafka changelog marker; a v1 checkpoint's entry for the store's changelog partition
    ``ssp``, ``<checkpointId>:<offset>`` (KafkaChangelogSSPOffset; a bare offset names no id). None when it names
    no position (or a malformed marker). Pure."""
    if checkpoint is None:
        return None
    if isinstance(checkpoint, CheckpointV1):
        key = (ssp.system, ssp.stream, ssp.partition)
        values = [v for s, v in checkpoint.offsets.items() if (s.system, s.stream, s.partition) == key]
        if not values or not (values[0] or "").strip():
            return None
        checkpoint_id, offset = split_changelog_offset(values[0])
        return checkpoint_id, ssp, offset
    text = checkpoint.state_checkpoint_markers.get(KAFKA_CHANGELOG_FACTORY, {}).get(store)
    try:
        marker = decode_changelog_marker(text) if text is not None else None
    except CheckpointFormatError:
        marker = None
    return None if marker is None else (checkpoint.checkpoint_id, marker.ssp, marker.offset)


def latest_checkpoints(bootstrap: str, ref: StoreRef, security: KafkaSecurity | None = None, *,
                       config: dict[str, str] | None = None) -> dict[str, Any]:
    """Task -> the checkpoint the job's next start reads for it (CheckpointV1 or CheckpointV2) from job ``ref``'s
    checkpoint topic, by its ``task.checkpoint.read.versions`` (KafkaCheckpointLog.read_checkpoints); {} when
    there is none. ``config``: the job's, when the caller has it (else read from its coordinator stream)."""
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security, config=config)
    try:
        return log.read_checkpoints()
    finally:
        log.close()


def transactional_target(start: NextStart, tail: Tail, replica: Replica) -> int:
    """The offset a checkpoint dir must hold to be kept (TransactionalStateTaskRestoreManager.getStoreActions):
    the checkpointed offset, or the changelog's newest once the checkpoint is older than 0.9 x
    min.compaction.lag.ms. DiscardedError when the checkpointed offset is off the changelog (every dir is
    deleted then)."""
    assert start.checkpointed_offset is not None and start.checkpoint_millis is not None
    oldest, newest = tail.beginning, tail.end - 1
    offset = start.checkpointed_offset
    if tail.end <= tail.beginning or not oldest <= offset <= newest:
        raise DiscardedError(
            f"refusing to promote {replica.replica_dir}: the task's checkpointed changelog offset {offset} is not "
            f"in {replica.changelog}[{replica.partition}] (offsets {oldest} to {newest}), so the job's next start "
            "deletes every local dir of the store and restores the whole changelog",
            hint="let the job restore from the changelog; promote after its next commit")
    if time.time() * 1000 - start.checkpoint_millis > 0.9 * start.min_compaction_lag_ms:
        return newest  # Samza restores on to the newest offset then (the changelog may have been compacted)
    return offset
