"""standby promote of one replica: fence its follower, catch it up, and put it where the job's next start keeps it.

One promote at a time per replica (replica.PromoteLock, taken before anything else: a second promote or failover
exits 11 naming the first, and never signals it). A replica whose changelog was deleted and recreated since its
follower recorded the topic id is refused (check_changelog_identity). Then: fence the follower (engine.standby.fence),
catch up to the changelog's end (or to the active's last checkpointed changelog offset; under transactional restore
exactly to the offset the job restores to: engine.standby.nextstart), flush, write the offset files, and swap the
replica into the active store dir with one atomic rename (local.staged); the old active dir is kept aside until the
swap is done. The active dir replaced must not exist, be empty, or be a RocksDB store (check_active_dir), never
another store's dir in the state dir nor a versioned adstore; the status file goes only after the swap. Its time is
the tail's catch-up plus a rename, whatever the state size. A promote that fails after fencing the follower starts
it again. plan_promote makes the same checks and decisions, writing nothing (``--dry-run``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.engine.standby.dirs import check_same_filesystem
from statectl.engine.standby.fence import FENCE_TIMEOUT_S, fence, follower_to_fence, restart_fenced
from statectl.engine.standby.follow import check_replica_in_range
from statectl.engine.standby.nextstart import (
    NextStart,
    RESTORE_NON_TRANSACTIONAL,
    RESTORE_TRANSACTIONAL,
    kept_by_next_start,
    next_start,
    transactional_target,
)
from statectl.engine.standby.placement import LocalityPlan, plan_locality
from statectl.engine.standby.replica import (
    FollowStatus,
    PROMOTER,
    PromoteLock,
    Replica,
    ReplicaLock,
    STATUS_SUFFIX,
    applied_offset,
    apply_records,
    check_not_promoting,
    disk_full_error,
    made_by_follower,
    open_replica,
    read_status,
    record_offset,
)
from statectl.errors import DiscardedError, Hint, LockHeldError, NotFoundError, StatectlError, UsageError
from statectl.formats.offsets import OFFSET, OFFSET_V2, write_offset
from statectl.fsutil import chown_tree, fsync_dirs, make_dirs, owner_of
from statectl.kafka.client import (
    DEFAULT_TIMEOUT_S,
    KafkaSecurity,
    LazyConsumer,
    OffsetOutOfRange,
    PartitionReader,
    require_partition,
)
from statectl.kafka.tails import Tail, read_tails, topic_identity
from statectl.local.layout import checkpoint_dir, store_dir
from statectl.local.staged import discard_old, swap_into_place
from statectl.progress import NullProgress, ProgressReporter


@dataclass
class PromoteResult:
    promoted_dir: str
    caught_up_offset: int | None
    records_applied: int
    duration_s: float
    replaced_active: bool = False
    locality_updated: bool = False
    notes: list[str] = field(default_factory=list)
    # How the job's next start restores the store (NextStart.mode): "non-transactional" (promoted into the
    # active dir), "transactional" (promoted into <active dir>-<checkpoint_id>), "unchecked" (no
    # coordinator stream: into the active dir, not known to be kept).
    restore_mode: str = "unchecked"
    checkpoint_id: str | None = None


@dataclass
class PromotePlan:
    """What ``promote`` will do, decided with nothing written: fence the follower ``fence_pid`` (None: none
    runs), catch ``replica_dir`` up from ``applied_offset`` to ``catch_up_to`` (under transactional restore
    exactly that offset; otherwise the changelog's end as the plan read it, or the checkpointed offset with
    --to-checkpoint: a promote run later catches up to the end as it then is), put it at ``promoted_dir``
    (``replaces_active``: over an existing active dir; ``in_place``: nothing moved), then ``locality``.
    Field names as PromoteResult's where they meet; ``standby promote --dry-run`` prints it, ``promote``
    executes it."""

    replica_dir: str
    promoted_dir: str
    active_dir: str
    restore_mode: str
    checkpoint_id: str | None
    applied_offset: int | None
    catch_up_to: int | None
    fence_pid: int | None
    replaces_active: bool
    in_place: bool
    locality: LocalityPlan | None = None
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)
    start: NextStart | None = field(default=None, repr=False, metadata={"internal": True})


def promote(replica: Replica, active_dir: Path, bootstrap: str, *, security: KafkaSecurity | None = None,
            timeout_s: float = 60.0, to_checkpoint: bool = False,
            on_locality: Callable[[], tuple[bool, str | None]] | None = None, progress: ProgressReporter | None = None,
            kafka_timeout_s: float = DEFAULT_TIMEOUT_S, state_dir: Path | None = None,
            restart_follower: bool = True, start: NextStart | None = None,
            assume_non_transactional: bool = False, promote_lock: bool = True) -> PromoteResult:
    """Fence the follower, catch the replica up, and put it where the job's next start keeps it (see the
    module doc). ``on_locality`` (after the move) updates the job's locality and returns whether it did, and
    a note (or None). ``state_dir``: the job's state dir, whose other stores are never replaced.
    ``restart_follower``: start a follower this promote fenced again when it fails, from its recorded
    settings, the error saying whether it came back (False for a container's promote, which leaves the
    fenced container follower stopped: Invariant 2). ``start``: next_start's answer when the caller has it
    already (a container's promote checks every store first). ``promote_lock`` False: the caller holds the
    replica's PromoteLock (a failover holds its container's).

    Where it goes depends on how the job's next start restores the store (next_start, from the job's
    config on its coordinator stream; ``result.restore_mode`` says which): non-transactional restore, or no config
    to read (``unchecked``: only with ``assume_non_transactional``, the caller's word that the job restores the
    store non-transactionally, with a note): caught up to the changelog's end (``to_checkpoint``: to the active's
    last checkpointed changelog offset) and swapped into ``active_dir``. Transactional restore: caught up exactly to
    the offset getStoreActions restores to (the task's checkpointed changelog offset; the newest when the checkpoint
    is older than 0.9 x min.compaction.lag.ms) and renamed to ``<active_dir>-<checkpoint id>`` of the task's latest
    checkpoint, with the offset files Samza reads there (``OFFSET-v2``, ``OFFSET``); ``active_dir`` is left as it is
    (the start deletes it). That dir must not exist or be empty (else UsageError, exit 2).

    Raises LockHeldError (exit 11) naming the holder, before anything else, when another promote or failover
    of the replica runs (PromoteLock), or a follower this host cannot stop holds it. StatectlError (exit 1),
    nothing changed, when the changelog was deleted and recreated since the follower recorded its topic id
    (check_changelog_identity). DiscardedError (exit 14) without the job's config unless
    ``assume_non_transactional``; UsageError (exit 2) for ``assume_non_transactional`` when the config says
    another restore.

    The replica must be one statectl's follower made (made_by_follower), and the active dir it replaces
    must not exist, be empty, or be a RocksDB store (not another store's dir in
    ``state_dir``, nor a versioned adstore), and the replica must be on its filesystem (one atomic rename:
    check_same_filesystem); else UsageError (exit 2), before anything is done. A replica that is ``active_dir``
    itself (``--layout active-path``: from active_path_replica) is caught up where it
    is, nothing moved (under transactional restore it is renamed like any other). Raises
    DiscardedError (exit 14), nothing changed, when the job's next start would delete what promote makes
    (next_start's cases; under transactional restore also a checkpointed offset off the changelog, or a
    replica already past the target offset: it cannot be rolled back, a follower run with
    ``to_checkpoint`` never passes it); a follower fenced meanwhile is started again.
    NotFoundError (exit 10) when there is no replica; LockHeldError (exit 11) when a process holds the
    active store; StatectlError (exit 1) when it cannot catch up within ``timeout_s`` (the replica keeps
    what it applied, with its offset files, and a follower that was running is started again where it ran),
    or when the follower cannot be fenced; DiskFullError (exit 1) when the disk fills (the active dir is
    untouched)."""
    progress = progress or NullProgress()
    began = time.monotonic()
    with (PromoteLock(replica) if promote_lock else contextlib.nullcontext()), \
            _changelog_consumer(replica, bootstrap, security, kafka_timeout_s) as consumer_of:
        plan = _plan_promote(replica, active_dir, bootstrap, consumer_of, security=security,
                             to_checkpoint=to_checkpoint, state_dir=state_dir, start=start,
                             assume_non_transactional=assume_non_transactional)
        return _execute_promote(plan, replica, bootstrap, consumer_of(), security=security,
                                to_checkpoint=to_checkpoint, timeout_s=timeout_s, on_locality=on_locality,
                                restart_follower=restart_follower, began=began)


def _changelog_consumer(replica: Replica, bootstrap: str, security: KafkaSecurity | None,
                        timeout_s: float) -> LazyConsumer:
    """A LazyConsumer on the brokers of the replica's changelog (Replica.changelog_kafka)."""
    where, how = replica.changelog_kafka(bootstrap, security)
    return LazyConsumer(where, timeout_s=timeout_s, security=how)


def plan_promote(replica: Replica, active_dir: Path, bootstrap: str, *, security: KafkaSecurity | None = None,
                 to_checkpoint: bool = False, kafka_timeout_s: float = DEFAULT_TIMEOUT_S,
                 state_dir: Path | None = None, locality: bool = True,
                 assume_non_transactional: bool = False) -> PromotePlan:
    """The plan of ``promote(replica, active_dir, bootstrap, ...)`` with the same checks, reading the replica,
    the changelog's tail and the job's coordinator stream and checkpoint topic, writing nothing: no follower
    is fenced, nothing is applied, moved or written to Kafka. ``locality``: also plan update_locality (what
    the CLI's promote runs after the move). Raises what ``promote`` raises before it fences the follower,
    with the same exit codes (a promote that runs: LockHeldError)."""
    check_not_promoting(replica)
    with _changelog_consumer(replica, bootstrap, security, kafka_timeout_s) as consumer_of:
        plan = _plan_promote(replica, active_dir, bootstrap, consumer_of, security=security,
                             to_checkpoint=to_checkpoint, state_dir=state_dir, start=None,
                             assume_non_transactional=assume_non_transactional)
    if locality:
        plan.locality = plan_locality(bootstrap, replica.ref, security=security)
    return plan


def _plan_promote(replica: Replica, active_dir: Path, bootstrap: str, consumer_of: Callable[[], Any], *,
                  security: KafkaSecurity | None, to_checkpoint: bool, state_dir: Path | None,
                  start: NextStart | None, assume_non_transactional: bool) -> PromotePlan:
    if not (replica.replica_dir / OFFSET_V2).exists():
        raise NotFoundError(f"no replica at {replica.replica_dir} (no {OFFSET_V2})",
                            hint=("start one with ", replica.ref.command("standby follow")))
    if not made_by_follower(replica):  # a promote moves the replica dir away: only one a follower made
        raise UsageError(f"refusing to promote {replica.replica_dir}: statectl's follower did not make it (no "
                         f"{replica.replica_dir.name}{STATUS_SUFFIX} beside it naming it)",
                         hint=("promote a replica that ", replica.ref.command("standby follow"),
                               " keeps (leave --replica-dir out)"))
    fence_pid = follower_to_fence(replica)
    cl_bootstrap = replica.changelog_kafka(bootstrap, security)[0]
    check_changelog_identity(replica, consumer_of(), cl_bootstrap)
    if start is None:
        start = next_start(replica, bootstrap, security=security)
    start = kept_by_next_start(start, replica, assume_non_transactional)
    transactional = start.mode == RESTORE_TRANSACTIONAL
    # A replica kept in the active's store dir (--layout active-path) is promoted where it is: no move. Its
    # store's LOCK is checked when the catch-up opens it, once its own follower is fenced.
    in_place = replica.files_dir is not None and (
        os.path.realpath(replica.replica_dir) == os.path.realpath(Path(active_dir).absolute()))
    active_dir = Path(os.path.realpath(active_dir)) if in_place else check_active_dir(replica, active_dir, state_dir)
    target_dir = active_dir
    if transactional:
        assert start.checkpoint_id is not None
        target_dir = checkpoint_dir(active_dir, start.checkpoint_id)
        _check_checkpoint_dir(replica, target_dir)
        in_place = False  # the start deletes the active dir, a replica in it too: it moves
    if not in_place:
        check_same_filesystem(replica, target_dir)
    consumer = consumer_of()
    if transactional:
        target = transactional_target(start, _tail(consumer, replica, cl_bootstrap), replica)
        _check_not_ahead(replica, target, start)  # before the follower is fenced: nothing changes
    else:
        target = _catch_up_target(replica, bootstrap, security, consumer, to_checkpoint)
    return PromotePlan(
        replica_dir=str(replica.replica_dir), promoted_dir=str(target_dir), active_dir=str(active_dir),
        restore_mode=start.mode, checkpoint_id=start.checkpoint_id if transactional else None,
        applied_offset=applied_offset(replica), catch_up_to=target, fence_pid=fence_pid,
        replaces_active=not in_place and not transactional and os.path.lexists(target_dir), in_place=in_place,
        notes=[_restore_note(start, replica, active_dir, target_dir, target)], start=start)


def _execute_promote(plan: PromotePlan, replica: Replica, bootstrap: str, consumer: Any, *,
                     security: KafkaSecurity | None, to_checkpoint: bool, timeout_s: float,
                     on_locality: Callable[[], tuple[bool, str | None]] | None, restart_follower: bool,
                     began: float) -> PromoteResult:
    """Carry out ``plan`` (see promote): fence the follower, then under the replica's lock catch it up
    (_catch_up_as_planned) and move it in (_swap_in); a follower fenced is started again when it fails."""
    start = plan.start
    assert start is not None
    transactional = plan.restore_mode == RESTORE_TRANSACTIONAL
    active_dir, target_dir = Path(plan.active_dir), Path(plan.promoted_dir)
    result = PromoteResult(str(target_dir), None, 0, 0.0, restore_mode=start.mode,
                           checkpoint_id=start.checkpoint_id if transactional else None)
    try:
        before = read_status(replica)
        was_following = fence(replica)
        try:
            with ReplicaLock(replica, wait_s=FENCE_TIMEOUT_S, role=PROMOTER):
                result.caught_up_offset = _catch_up_as_planned(plan, replica, bootstrap, consumer, security,
                                                               to_checkpoint, began + timeout_s, result)
                _swap_in(plan, replica, result)
            replica.lock_path.unlink(missing_ok=True)
            replica.log_path.unlink(missing_ok=True)
        except _NotPromoted as e:
            said = str(e)
            if restart_follower and was_following:  # once the lock is released: the follower takes it again
                said += "; " + restart_fenced(replica, before, bootstrap)
            raise e.exit_as(said, hint=e.hint_parts) from None
    except Exception as e:
        full = disk_full_error(replica, e, "promoting")
        if full is None or full is e:
            raise
        raise full from e
    result.notes.append(_restore_note(start, replica, active_dir, target_dir, result.caught_up_offset))
    if on_locality is not None:
        result.locality_updated, note = on_locality()
        if note:
            result.notes.append(note)
    result.duration_s = round(time.monotonic() - began, 3)
    return result


def _catch_up_as_planned(plan: PromotePlan, replica: Replica, bootstrap: str, consumer: Any,
                         security: KafkaSecurity | None, to_checkpoint: bool, deadline: float,
                         result: PromoteResult) -> int | None:
    """With the follower fenced: check the replica is still what the plan checked, and catch it up by
    ``deadline``: under transactional restore exactly to the plan's offset (with the ``OFFSET`` file Samza reads
    there), else to the end (or checkpoint) as it is now. The offset reached; _NotPromoted when it cannot be."""
    cl_bootstrap = replica.changelog_kafka(bootstrap, security)[0]
    _still_promotable(replica, consumer, cl_bootstrap)
    if plan.restore_mode != RESTORE_TRANSACTIONAL:
        return _catch_up(replica, consumer, cl_bootstrap,
                         lambda: _catch_up_target(replica, bootstrap, security, consumer, to_checkpoint),
                         deadline, result)
    assert plan.start is not None
    target = plan.catch_up_to
    try:
        _check_not_ahead(replica, target, plan.start)  # the follower may have applied more meanwhile
    except DiscardedError as e:
        raise _NotPromoted(str(e), hint=e.hint_parts, exit_as=DiscardedError) from None
    position = _catch_up(replica, consumer, cl_bootstrap, lambda: target, deadline, result)
    if position != target:  # nothing below the target left to read: never claim more
        raise _NotPromoted(f"cannot promote {replica.replica_dir}: the changelog ends at offset "
                           f"{position}, short of the offset {target} the job restores to",
                           hint="promote again once the changelog holds it")
    write_offset(replica.replica_dir / OFFSET, str(position))  # StorageManagerUtil.writeOffsetFile
    return position


def _swap_in(plan: PromotePlan, replica: Replica, result: PromoteResult) -> None:
    """Move the caught-up replica to the plan's dir in one rename (local.staged.swap_into_place; nothing moved for
    one in place), owned as what it replaces; its status file goes only after."""
    in_place, target_dir = plan.in_place, Path(plan.promoted_dir)
    # Run as root, the job's user must own what it starts on: the store replaced's owner, or
    # the state dir's (local.staged.StagedStore's rule).
    owner = owner_of(target_dir if not in_place and os.path.lexists(target_dir) else target_dir.parent)
    chown_tree(replica.replica_dir, owner)
    fsync_dirs(replica.replica_dir)
    if not in_place:  # the store's dir need not exist: the replica is not in it
        make_dirs(target_dir.parent, owner)
    old = None if in_place else swap_into_place(replica.replica_dir, target_dir)
    if in_place:
        result.notes.append(f"{Path(plan.active_dir)} held the replica already (--layout active-path): nothing moved")
    # Only now: until the swap the status file is what proves the replica dir statectl's own.
    replica.status_path.unlink(missing_ok=True)
    result.replaced_active = old is not None and plan.restore_mode != RESTORE_TRANSACTIONAL
    note = discard_old(old)
    if note:
        result.notes.append(note)


def _restore_note(start: NextStart, replica: Replica, active_dir: Path, target_dir: Path,
                  offset: int | None) -> str:
    if start.mode == RESTORE_TRANSACTIONAL:
        hours = start.delete_retention_ms / 3_600_000
        return (f"transactional restore ({start.why}): the job's next start deletes {active_dir} and restores it "
                f"from {target_dir} (checkpoint {start.checkpoint_id}, changelog offset {offset}); it must start "
                f"within {hours:g}h (stores.{replica.ref.store}.changelog.delete.retention.ms), or it takes the "
                "dir for stale and deletes it")
    if start.mode == RESTORE_NON_TRANSACTIONAL:
        return f"non-transactional restore ({start.why}): the job's next start reuses {target_dir}"
    if start.assumed:
        return (f"could not check how the job's next start restores the store ({start.why}): {target_dir} is kept "
                "if, as --non-transactional-restore says, the job restores it non-transactionally")
    return (f"could not check how the job's next start restores the store ({start.why}): it keeps {target_dir} only "
            "under non-transactional restore from the Kafka changelog (task.transactional.state.restore.enabled="
            "false, standby tasks or async commit); the default transactional restore deletes it")


def _still_promotable(replica: Replica, consumer: Any, bootstrap: str) -> None:
    """Raise _NotPromoted unless the replica, as its fenced follower left it, is what the plan checked: its
    offset file there (a follower fenced mid re-seed has none), its changelog the topic it followed."""
    if not (replica.replica_dir / OFFSET_V2).exists():
        raise _NotPromoted(f"cannot promote {replica.replica_dir}: its follower was re-seeding it (no {OFFSET_V2}); "
                           "the active dir is untouched", hint="let the follower seed it, then promote")
    try:
        check_changelog_identity(replica, consumer, bootstrap)
    except StatectlError as e:
        raise _NotPromoted(str(e), hint=e.hint_parts) from None


def _tail(consumer: Any, replica: Replica, bootstrap: str) -> Tail:
    require_partition(consumer, replica.changelog, replica.partition, bootstrap)
    return read_tails(consumer, replica.changelog, [replica.partition], bootstrap)[replica.partition]


def _check_not_ahead(replica: Replica, target: int | None, start: NextStart) -> None:
    """DiscardedError (exit 14) when the replica holds changelog records past ``target``: a store cannot be
    rolled back, and a checkpoint dir past the target is deleted at the job's start (getStoreActions)."""
    applied = applied_offset(replica)
    if applied is not None and target is not None and applied > target:
        raise DiscardedError(
            f"refusing to promote {replica.replica_dir}: it holds changelog offset {applied}, past the offset "
            f"{target} the job's next start restores to (checkpoint {start.checkpoint_id}, transactional restore): "
            "the start would delete it, and a store cannot be rolled back",
            hint=("follow with ", replica.ref.command("standby follow", "--to-checkpoint"), " (it applies only up "
                  "to the task's latest checkpoint), or promote once the job has checkpointed past it"))


def _check_checkpoint_dir(replica: Replica, target: Path) -> None:
    """UsageError (exit 2) unless the checkpoint dir promote makes under transactional restore does not
    exist or is an empty dir: a dir there is the job's own (Samza's commit made it), never replaced."""
    if not os.path.lexists(target):
        return
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        return
    raise UsageError(f"refusing to promote {replica.replica_dir} into {target}: it exists (the job's own checkpoint "
                     "dir: its next start restores from it already)",
                     hint="leave it to the job, or move it away and promote again")


def check_active_dir(replica: Replica, active_dir: Path, state_dir: Path | None = None) -> Path:
    """The real dir promote swaps the replica into (symlinks followed, as restore does); raise UsageError
    (exit 2) unless it does not exist, is empty or is a RocksDB store (local.staged.check_target, with the
    task's own store dir in ``state_dir`` the only store there it may replace), and for a versioned adstore
    (``S -> S.versions/<n>``) or the replica itself; LockHeldError (exit 11) for a store a process holds.
    Reads only."""
    from statectl.local.staged import check_target, resolve_target

    hint = "promote into the task's store dir (leave --active-dir out), or into an empty or new --active-dir"
    own = store_dir(state_dir, replica.ref.store, replica.ref.task) if state_dir is not None else None
    try:
        target = resolve_target(Path(active_dir).absolute(), verb="promote")
        if target == Path(os.path.realpath(replica.replica_dir)):
            raise UsageError(f"refusing to promote {replica.replica_dir} into itself")
        check_target(target, False, own_store=own, state_dir=state_dir, verb="promote")
    except LockHeldError as e:  # check_target's hint is restore's
        raise LockHeldError(str(e), hint="stop the job (container) that holds it, then promote again") from None
    except UsageError as e:  # check_target's hints are restore's (its --target-dir, --force)
        raise UsageError(str(e), hint=hint) from None
    return target


class _NotPromoted(StatectlError):
    """The replica could not be caught up, or may not be promoted: nothing was swapped (promote restarts
    the follower, then raises ``exit_as``)."""

    def __init__(self, message: str, *, hint: Hint | None = None, exit_as: type[StatectlError] = StatectlError):
        super().__init__(message, hint=hint)
        self.exit_as = exit_as


def _catch_up(replica: Replica, consumer: Any, bootstrap: str, target_of: Callable[[], int | None],
              deadline: float, result: PromoteResult) -> int | None:
    """Apply the changelog to the replica up to the offset ``target_of()`` names, by ``deadline``; record the
    offset reached either way (the target itself once every record up to it was read, compacted gaps
    included). Return it; raise _NotPromoted when out of range or out of time."""
    offset = applied_offset(replica)
    try:
        check_replica_in_range(consumer, replica, bootstrap, offset)
    except OffsetOutOfRange as e:
        raise _NotPromoted(f"cannot promote {replica.replica_dir}: {e}; the active dir is untouched",
                           hint=("let ", replica.ref.command("standby follow"), " re-seed the replica, then promote")
                           ) from None
    target = target_of()
    db = open_replica(replica)
    position = offset
    try:
        reader = PartitionReader(consumer, replica.changelog, replica.partition, bootstrap)
        reader.seek(None if offset is None else offset + 1)
        if target is not None and (position is None or position < target):
            for batch in reader.batches(stop=target + 1):
                apply_records(db, batch)
                result.records_applied += len(batch)
                position = batch[-1].offset
                if time.monotonic() > deadline:
                    raise _NotPromoted(
                        f"promote of {replica.replica_dir} timed out at changelog offset {position} of {target}: the "
                        "replica keeps what it applied; the active dir is untouched",
                        hint="promote again with a longer --timeout, or let the follower catch up")
            if reader.position is not None and reader.position > target:
                position = target  # read through the target: what is missing below it was compacted away
    finally:
        record_offset(replica, db, position)  # what it holds, whatever happened
        db.close()
    return position


def _catch_up_target(replica: Replica, bootstrap: str, security: KafkaSecurity | None, consumer: Any,
                     to_checkpoint: bool) -> int | None:
    """The newest offset to apply: the changelog's (true) end - 1, or with ``to_checkpoint`` the active's
    last checkpointed changelog offset."""
    if to_checkpoint:
        log = KafkaCheckpointLog(bootstrap, replica.ref.job, replica.ref.job_id, security=security)
        try:
            found = log.read_changelog_offset(replica.ref.task, replica.ref.store, replica.ssp)
        finally:
            log.close()
        if found is None:
            raise NotFoundError(f"task {replica.ref.task!r} has no checkpointed changelog offset for store "
                                f"{replica.ref.store!r}", hint="promote to the changelog's end (without --to-checkpoint)")
        return None if found[1] is None else int(found[1])
    where = replica.changelog_kafka(bootstrap, security)[0]
    tail = read_tails(consumer, replica.changelog, [replica.partition], where)[replica.partition]
    return tail.end - 1 if tail.end > tail.beginning else None


def check_changelog_identity(replica: Replica, consumer: Any, bootstrap: str, status: FollowStatus | None = None,
                             *, topic_ids: dict[str, str | None] | None = None) -> None:
    """Raise StatectlError (exit 1) when the changelog's topic id is not the one the replica's follower
    recorded (its status file): the changelog was deleted and recreated since, and the replica's offset names
    a record of the old topic, whatever the new one holds there. Nothing is known (and nothing raised) when
    the follower recorded no id or the brokers report none (kafka.tails.topic_identity). ``topic_ids``: a
    cache of ids by topic, for a caller checking many replicas. Reads only."""
    status = status if status is not None else read_status(replica)
    if status is None or not status.topic_id or status.changelog != replica.changelog:
        return
    if topic_ids is not None and replica.changelog in topic_ids:
        now = topic_ids[replica.changelog]
    else:
        now = topic_identity(consumer, replica.changelog, bootstrap)[0]
        if topic_ids is not None:
            topic_ids[replica.changelog] = now
    if now is None or now == status.topic_id:
        return
    raise StatectlError(f"refusing to promote {replica.replica_dir}: changelog {replica.changelog} was deleted and "
                        f"recreated since the replica was followed (topic id {status.topic_id}, now {now}): its "
                        "records and offset are the old topic's",
                        hint=("run ", replica.ref.command("standby follow"), " (it re-seeds the replica from the new "
                              "changelog), then promote"))
