"""Promoting every store of a container: each replica checked before anything is written, then all promoted in parallel.

Before anything is written, every replica is checked (plan_container): it exists on this host (or the journal
says it was promoted), its follower made it and can be stopped from here, its changelog is the topic its
follower followed, the dir it goes to may be replaced and no process holds the active state, and the job's next
start keeps what promote makes. A store the job restores from the blob store goes over on its pre-restore
(engine.standby.prerestore_promote). promote_all records each store in the journal as it lands.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.engine.standby.container import StandbyContainer
from statectl.engine.standby.dirs import locate_replica
from statectl.engine.standby.fence import fence, follower_to_fence
from statectl.engine.standby.journal import Journal, journal_key
from statectl.engine.standby.nextstart import (
    NextStart,
    RESTORE_TRANSACTIONAL,
    kept_by_next_start,
    latest_checkpoints,
    next_start,
)
from statectl.engine.standby.promote import PromoteResult, check_active_dir, check_changelog_identity, promote
from statectl.engine.standby.replica import Replica, is_locked, lock_holder, made_by_follower
from statectl.errors import DiscardedError, NotFoundError, StatectlError, UsageError, command
from statectl.formats.offsets import OFFSET_V2, OffsetFileError, read_offsets
from statectl.kafka.client import KafkaSecurity
from statectl.local.layout import checkpoint_dir, store_dir
from statectl.progress import ProgressReporter

# What a container's follower takes none of: it follows every task and store of the container.
_ONE_TASK = ("task", "store")


@dataclass
class StoreStep:
    """One replica of a container's promote: ``status`` "promoted", "done-earlier" (a run before this one
    promoted it), "planned" (--dry-run) or "failed"; its PromoteResult when promoted now."""

    task: str
    store: str
    replica_dir: str
    status: str
    promoted_dir: str | None = None
    restore_mode: str | None = None
    result: PromoteResult | None = None
    error: str | None = None


@dataclass
class Planned:
    """A replica checked before a container promote: where it is, the dir it goes to, the next start."""

    replica: Replica
    active_dir: Path
    start: NextStart | None
    done: dict[str, Any] | None = None  # the journal's record when an earlier run promoted it
    blob: bool = False  # the job restores the store from the blob store: its pre-restore is promoted


def plan_container(sc: StandbyContainer, bootstrap: str, state_dir: Path, journal: Journal | None,
          security: KafkaSecurity | None, progress: ProgressReporter) -> list[Planned]:
    """Check every replica before anything is changed (see the module doc): raise as promote would, for
    the first one that cannot be promoted."""
    from statectl.kafka.client import LazyConsumer

    checkpoints = (latest_checkpoints(bootstrap, sc.replicas[0].ref, security, config=sc.config or None)
                   if sc.replicas else {})
    with contextlib.ExitStack() as stack:
        consumers: dict[str, LazyConsumer] = {}  # one per cluster the changelogs are on
        topic_ids: dict[str, dict[str, str | None]] = {}

        def check_identity(rep: Replica) -> None:
            where, how = rep.changelog_kafka(bootstrap, security)
            if where not in consumers:
                consumers[where] = stack.enter_context(LazyConsumer(where, security=how))
            check_changelog_identity(rep, consumers[where](), where, topic_ids=topic_ids.setdefault(where, {}))

        return [_plan_one(sc, rep, bootstrap, state_dir, journal, security, progress, checkpoints, check_identity)
                for rep in sc.replicas]


def _plan_one(sc: StandbyContainer, rep: Replica, bootstrap: str, state_dir: Path, journal: Journal | None,
              security: KafkaSecurity | None, progress: ProgressReporter, checkpoints: dict[str, Any],
              check_identity: Callable[[Replica], None]) -> Planned:
    """One replica of :func:`plan_container`."""
    done = journal.promoted.get(journal_key(rep)) if journal is not None else None
    active = store_dir(state_dir, rep.ref.store, rep.ref.task).absolute()
    if done is not None and done.get("status") != "promoting":
        return Planned(rep, active, None, done)
    if _restores_from_blob_store(sc, rep, checkpoints):
        pointed = journal is not None and "point-active-locality" in journal.steps
        return _plan_pre_restored(sc, rep, active, done, bootstrap, state_dir, security, pointed)
    rep, found = locate_replica(rep, state_dir, sc.replica)
    if found:
        progress.note(found)
    if done is not None and not (rep.replica_dir / OFFSET_V2).exists() and _landed(rep, Path(done["target"])):
        # killed between the promote's rename and its journal record: the store is where it was going
        done = dict(done, status="promoted", promoted_dir=done["target"])
        return Planned(rep, active, None, done)
    if not (rep.replica_dir / OFFSET_V2).exists():
        raise NotFoundError(f"no replica of task {rep.ref.task!r} store {rep.ref.store!r} of container "
                            f"{sc.container} on this host (no {rep.replica_dir / OFFSET_V2})",
                            hint=("follow it here first: ", command("standby follow", "--container", sc.container,
                                                                     without=_ONE_TASK)))
    if not made_by_follower(rep):
        raise UsageError(f"refusing to promote {rep.replica_dir}: statectl's follower did not make it")
    follower_to_fence(rep)  # LockHeldError for one this host cannot stop: before anything is written
    check_identity(rep)
    in_place = rep.files_dir is not None and os.path.realpath(rep.replica_dir) == os.path.realpath(active)
    if not in_place:
        check_active_dir(rep, active, state_dir)  # LockHeldError (exit 11) when the active state is held
    start = kept_by_next_start(next_start(rep, bootstrap, security=security, config=sc.config,
                                          checkpoints=checkpoints), rep)
    if start.mode == RESTORE_TRANSACTIONAL and start.checkpoint_id is None:  # pragma: no cover - next_start refuses
        raise StatectlError(f"no checkpoint id for {rep.replica_dir}")
    return Planned(rep, active, start)


def promote_all(plan: list[Planned], bootstrap: str, state_dir: Path, journal: Journal,
                security: KafkaSecurity | None, timeout_s: float, to_checkpoint: bool,
                progress: ProgressReporter, blobstore: Any = None, catalog: Any = None,
                root: Path | None = None) -> list[StoreStep]:
    """Promote every planned replica not promoted yet, in parallel (each its own catch-up and rename),
    recording each in the journal as it lands (the intent first: a kill after the promote's rename leaves the
    store found there). Raise the first failure once all have ended."""
    steps: dict[int, StoreStep] = {}
    guard = threading.Lock()
    errors: list[BaseException] = []

    def one(i: int, p: Planned) -> None:
        rep = p.replica
        key = journal_key(rep)
        if p.done is not None:
            if journal.promoted.get(key) != p.done:  # a promote found landed: record it
                with guard:
                    journal.promoted[key] = p.done
                    journal.save()
            steps[i] = StoreStep(rep.ref.task, rep.ref.store, str(rep.replica_dir), "done-earlier",
                                 p.done.get("promoted_dir"), p.done.get("restore_mode"))
            return
        with guard:
            journal.promoted[key] = _intent(p)
            journal.save()
        try:
            r = _promote_planned(p, bootstrap, state_dir, security, timeout_s, to_checkpoint, progress, blobstore,
                                 catalog, root)
        except BaseException as e:  # noqa: BLE001 - re-raised once every promote ended
            with guard:
                errors.append(e)
                steps[i] = StoreStep(rep.ref.task, rep.ref.store, str(rep.replica_dir), "failed", error=str(e))
            return
        with guard:
            journal.promoted[key] = {"status": "promoted", "promoted_dir": r.promoted_dir,
                                     "restore_mode": r.restore_mode, "offset": r.caught_up_offset,
                                     "checkpoint_id": r.checkpoint_id}
            journal.save()
            steps[i] = StoreStep(rep.ref.task, rep.ref.store, str(rep.replica_dir), "promoted", r.promoted_dir,
                                 r.restore_mode, r)
        failpoints.hit("failover-promoted")

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(plan)))) as pool:
        list(pool.map(lambda ip: one(*ip), enumerate(plan)))
    if errors:
        raise errors[0]
    return [steps[i] for i in range(len(plan))]


def _intent(p: Planned) -> dict[str, Any]:
    """The journal's record of a promote about to run: where the store goes, and how the job restores it."""
    target = p.active_dir if not p.blob else None
    if p.start is not None and p.start.mode == RESTORE_TRANSACTIONAL and p.start.checkpoint_id:
        target = checkpoint_dir(p.active_dir, p.start.checkpoint_id)
    return {"status": "promoting", "target": str(target) if target else None,
            "restore_mode": "blob-store" if p.blob else (p.start.mode if p.start else None)}


def _promote_planned(p: Planned, bootstrap: str, state_dir: Path, security: KafkaSecurity | None, timeout_s: float,
                     to_checkpoint: bool, progress: ProgressReporter, blobstore: Any, catalog: Any,
                     root: Path | None) -> PromoteResult:
    """Promote one planned replica, under the promote locks the failover holds: its pre-restore
    (prerestore_promote) for a store the job restores from the blob store, else the changelog replica."""
    rep = p.replica
    if not p.blob:
        return promote(rep, p.active_dir, bootstrap, security=security, timeout_s=timeout_s,
                       to_checkpoint=to_checkpoint, progress=progress, state_dir=state_dir,
                       restart_follower=False, start=p.start, promote_lock=False)  # the failover holds it
    from statectl.engine.standby.prerestore_promote import promote_pre_restored

    if blobstore is None or catalog is None:
        raise UsageError(f"store {rep.ref.store!r} is restored from the blob store: its pre-restore is "
                         "promoted, which needs the blob store", hint="pass --blobstore")
    return promote_pre_restored(rep.ref, state_dir, bootstrap, blobstore, catalog, security=security,
                                timeout_s=timeout_s, progress=progress, restart_follower=False,
                                check_locality=False,  # checked before this failover pointed it here
                                promote_lock=False,  # the failover holds it
                                root=root)


def _restores_from_blob_store(sc: StandbyContainer, rep: Replica, checkpoints: dict[str, Any]) -> bool:
    """Whether the job's next start restores ``rep``'s store from the blob store
    (jobconfig.checkpoint_restore_factory over the job's config and the checkpoint that start reads for the task,
    as next_start reads them)."""
    from statectl.formats import jobconfig
    from statectl.formats.checkpoint import BLOB_STORE_FACTORY

    try:
        return jobconfig.checkpoint_restore_factory(sc.config, rep.ref.store, checkpoints.get(rep.ref.task)) \
            == BLOB_STORE_FACTORY
    except jobconfig.JobConfigError as e:
        raise StatectlError(f"the config of job {sc.job}-{sc.job_id}: {e}",
                            hint="the job cannot start with it either: fix the job's config") from None


def _plan_pre_restored(sc: StandbyContainer, rep: Replica, active: Path, done: dict[str, Any] | None,
                       bootstrap: str, state_dir: Path, security: KafkaSecurity | None, pointed: bool) -> Planned:
    """A store the job restores from the blob store: its pre-restore (follow --pre-restore) is what is
    promoted (prerestore_promote). DiscardedError (exit 14) when none is kept here; UsageError (exit 2) when
    this host runs the task's active (its store's LOCK held; or the job's locality placing it here, unless
    ``pointed``: this failover pointed it here)."""
    from statectl.engine.standby.prerestore import check_here, locate_pre_restore, pre_restore_status

    anchor = locate_pre_restore(state_dir, rep.ref, sc.standby_root)
    if pre_restore_status(state_dir, rep.ref, sc.standby_root) is None:
        if done is not None:  # killed after the promote ended, before its record: the status file went last
            return Planned(anchor, active, None, dict(done, status="promoted"), blob=True)
        raise DiscardedError(
            f"refusing to fail over container {sc.container}: the job restores store {rep.ref.store!r} of task "
            f"{rep.ref.task!r} from the blob store, and no pre-restored checkpoint dir is kept on this host",
            hint=("keep its snapshots pre-restored here: ",
                  command("standby follow", "--container", sc.container, "--pre-restore", without=_ONE_TASK)))
    check_here(anchor, None if pointed else bootstrap, security=security)
    follower_to_fence(anchor)
    return Planned(anchor, active, None, done, blob=True)


def _landed(rep: Replica, target: Path) -> bool:
    """Whether ``target`` holds a store promoted from ``rep``: its OFFSET-v2 names exactly the replica's
    changelog partition (what promote writes)."""
    try:
        offsets = read_offsets(target / OFFSET_V2)
    except (OSError, OffsetFileError):
        return False
    return set(offsets) == {rep.ssp}


def fence_container(sc: StandbyContainer, plan: list[Planned]) -> list[int]:
    """Stop the followers of the container's replicas on this host (SIGTERM, wait; fence.fence);
    the pids stopped. A container follower holds them all: the first fence stops it."""
    stopped = []
    for p in plan:
        if p.done is None and is_locked(p.replica.lock_path):
            pid, _ = lock_holder(p.replica)
            if fence(p.replica) and pid is not None:
                stopped.append(pid)
    return stopped
