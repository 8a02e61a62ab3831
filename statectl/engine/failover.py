"""Whole containers of a Samza job's standby: follow every store of every task of a container in
one process, promote them all, and fail a container over onto its standby host.

A Samza standby container holds the standbys of every task of its active container, and failover moves
the container, never one task of it (StandbyTaskUtil: the standby container of active
container ``c`` is ``c-<n>``, its tasks ``Standby-<task>-<n>``). The container's tasks come from the job's
coordinator stream (``set-task-container-assignment``, ``set-task-mode-assignment``), its stores from the
job's config (every ``stores.<s>.changelog``), each replica's changelog partition from ``set-changelog``
(engine.standby.resolve_changelog, on the job model read once).

failover runs Samza's failover steps, on the standby host, in order, each recorded in a journal in the
standby root (``<standby root>/failover/``; one an older statectl left in ``<state>/.statectl-standby/failover/``
is taken over) before the next begins, so that a rerun after a
kill at any step finishes what was begun and redoes nothing:

1. find-standby-host: the host of the standby container's locality mapping (LocalityManager's
   ``set-container-host-assignment``); the journal's, once begun (step 2 deletes the mapping);
2. delete-standby-locality: tombstone the standby container's mapping (CoordinatorStreamStore.delete:
   a null value), so that the job places the standby container elsewhere (StandbyContainerManager asks any
   host for a standby with no mapping);
3. point-active-locality: the active container's mapping set to the standby host, as
   LocalityManager.writeContainerToHostMapping writes it, so that the job starts the active there;
4. stop-standby: stop the container's follower (the fence; Invariant 2: nothing is promoted while it runs);
5. promote: promote every store of every task of the container (engine.standby.promote, where the job's
   next start keeps it);
6. report.

Before anything is read, the failover takes every replica's PromoteLock (engine.standby): a second
failover or a promote of one of them exits 11 naming the first, and signals nothing. Before step 2 writes
anything, every replica is checked: it exists on this host (or a journal says it was promoted), its
follower made it and can be stopped from here, its changelog is the topic its follower followed (not
deleted and recreated since: exit 1), the dir it goes to may be replaced and no process holds the active
state (LockHeldError, exit 11), and the job's next start keeps what promote makes (DiscardedError, exit
14). ``--dry-run`` makes every one of these checks, and the standby host's, and exits as the failover would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.catalog.refs import StoreRef
from statectl.engine.standby import (
    RESTORE_TRANSACTIONAL,
    FollowResult,
    FollowStatus,
    NextStart,
    PromoteLock,
    PromoteResult,
    Replica,
    Seeder,
    _check_own_files,
    _fence,
    _follower_to_fence,
    _locked,
    _active_name,
    check_active_dir,
    check_active_path,
    check_changelog_identity,
    check_not_promoting,
    check_placement_dirs,
    check_replica_dir,
    follow,
    kept_by_next_start,
    latest_checkpoints,
    lock_holder,
    locate_replica,
    made_by_follower,
    next_start,
    promote,
    resolve_changelog,
    standby_dir,
)
from statectl.engine.follower import FollowerSettings
from statectl.errors import DiscardedError, LockHeldError, NotFoundError, StatectlError, UsageError
from statectl.formats.coordinator import active_of_standby, coordinator_topic
from statectl.formats.jobconfig import store_changelog_key
from statectl.formats.offsets import OFFSET_V2, OffsetFileError, read_offsets
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream, JobModel
from statectl.local.layout import checkpoint_dir, old_standby_root, standby_root, store_dir
from statectl.progress import NullProgress, ProgressReporter

FAILOVER_DIR = "failover"  # in the standby root: the journals of container promotes and failovers
STEPS = ("find-standby-host", "delete-standby-locality", "point-active-locality", "stop-standby", "promote",
         "report")


# -- the container ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StandbyContainer:
    """The standby of active container ``container`` of job ``job``-``job_id``: standby container
    ``standby_container`` (``<container>-<replica>``), the active ``tasks`` it stands by for (sorted), the
    ``stores`` followed (those with a changelog), and one replica per task and store (task-major)."""

    job: str
    job_id: str
    container: str
    replica: int
    standby_container: str
    tasks: tuple[str, ...]
    stores: tuple[str, ...]
    replicas: tuple[Replica, ...]
    notes: tuple[str, ...] = ()
    config: dict[str, str] = field(default_factory=dict)  # the job's config, as its coordinator stream held it
    standby_root: Path | None = None  # the standby root its replicas are in (None: the default, beside the state dir)


def container_of(model: JobModel, container: str, replica: int = 0) -> tuple[str, int, tuple[str, ...]]:
    """(active container id, replica number, its active tasks sorted) for ``container``: an active container
    of the job model, or a standby container (one whose tasks are standbys: their actives' container, the
    replica number their names carry). Raises NotFoundError (exit 10) when the model assigns the container
    no task, and StatectlError (exit 1) for a standby container whose tasks stand by for tasks of several
    containers, or of several replica numbers."""
    modes = model.task_modes
    assigned = sorted(t for t, c in model.task_containers.items() if c == container)
    if not assigned:
        known = sorted(set(model.task_containers.values()))
        raise NotFoundError(f"the job model assigns no task to container {container!r}"
                            + (f" (its containers: {', '.join(known[:10])}{' ...' if len(known) > 10 else ''})"
                               if known else " (it assigns no task at all)"),
                            hint="pass one of the job's container ids (an active one, such as 0)")
    actives = [t for t in assigned if _active_name(t, modes) == t]
    if actives:
        return container, replica, tuple(actives)
    parsed = [p for p in (active_of_standby(t) for t in assigned) if p is not None]
    active_tasks = sorted({p[0] for p in parsed})
    numbers = sorted({p[1] for p in parsed})
    homes = sorted({model.task_containers[t] for t in active_tasks if t in model.task_containers})
    if len(numbers) != 1 or len(homes) != 1:
        raise StatectlError(f"standby container {container!r} holds standbys of "
                            + (f"containers {', '.join(homes)}" if len(homes) != 1 else
                               f"replicas {', '.join(map(str, numbers))}")
                            + ": not one container's standby",
                            hint="pass the active container id and --replica")
    return homes[0], numbers[0], tuple(active_tasks)


def changelogged_stores(config: dict[str, str]) -> list[str]:
    """The stores of a job config that have a changelog (``stores.<s>.changelog`` set), sorted."""
    prefix, suffix = "stores.", ".changelog"
    return sorted(k[len(prefix):-len(suffix)] for k, v in config.items()
                  if k.startswith(prefix) and k.endswith(suffix) and len(k) > len(prefix) + len(suffix)
                  and "." not in k[len(prefix):-len(suffix)] and v.strip())


def blob_restored_stores(config: dict[str, str]) -> list[str]:
    """The stores of a job config (``stores.<s>.factory``) its start restores from the blob store
    (jobconfig.restore_factory, before any checkpoint), sorted."""
    from statectl.formats import jobconfig
    from statectl.formats.checkpoint import BLOB_STORE_FACTORY

    prefix, suffix = "stores.", ".factory"
    names = {k[len(prefix):-len(suffix)] for k in config if k.startswith(prefix) and k.endswith(suffix)}
    out = []
    for name in sorted(n for n in names if n and "." not in n):
        try:
            if jobconfig.restore_factory(config, name, None) == BLOB_STORE_FACTORY:
                out.append(name)
        except jobconfig.JobConfigError:
            continue  # next_start names the bad key when the store is promoted
    return out


FOLLOWED, PRE_RESTORED, ALL = "changelog", "pre-restore", "all"


def resolve_container(bootstrap: str, job: str, job_id: str, container: str, *, replica: int = 0,
                      stores: list[str] | None = None, state_dir: Path, security: KafkaSecurity | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S, mode: str = FOLLOWED,
                      zookeeper: str | None = None, root: Path | None = None) -> StandbyContainer:
    """The standby of ``container`` from the job's model (read once: its coordinator stream, or with
    ``zookeeper`` a standalone job's model in ZooKeeper, engine.jobmodel.read_job_model): its tasks, its stores
    (``stores``: only these), and one replica per task and store. ``mode`` FOLLOWED: the stores with a
    changelog, each replica's dir in the standby root of ``state_dir`` (``root``, default beside it) and its
    changelog partition (on its system's brokers: resolve_changelog);
    PRE_RESTORED: the stores the job restores from the blob store, each as its pre-restore's handle
    (engine.prerestore.prerestore_replica); ALL (promote, failover): the first, plus the second's for stores
    with no changelog. Reads only. Raises NotFoundError (exit 10) for no coordinator stream, no such
    container, no store to follow (or one of ``stores`` not among them), and resolve_changelog's errors for
    a task whose changelog partition the stream does not map."""
    from statectl.engine.jobmodel import read_job_model

    model, problems = read_job_model(bootstrap, job, job_id, zookeeper=zookeeper, security=security,
                                     timeout_s=timeout_s, required=True)
    assert model is not None  # required: NotFoundError instead
    active, number, tasks = container_of(model, container, replica)
    logged = changelogged_stores(model.config) if mode != PRE_RESTORED else []
    blob = blob_restored_stores(model.config) if mode != FOLLOWED else []
    have = sorted(set(logged) | set(blob))
    if stores:
        missing = [s for s in stores if s not in have]
        if missing:
            what = (f"no changelog for store {missing[0]!r} ({store_changelog_key(missing[0])})"
                    if mode == FOLLOWED else f"no store {missing[0]!r} restored from the blob store")
            raise NotFoundError(f"the config of job {job}-{job_id} names {what}",
                                hint=f"its stores to follow so: {', '.join(have) or 'none'}")
        have = [s for s in have if s in stores]
    if not have:
        what = ("no store with a changelog (stores.<store>.changelog)" if mode == FOLLOWED else
                "no store restored from the blob store" if mode == PRE_RESTORED else
                "no store with a changelog or restored from the blob store")
        raise NotFoundError(f"the config of job {job}-{job_id} names {what}: container {container!r} has nothing "
                            "to follow")
    replicas, notes = [], []
    counted: set[str] = set()  # each changelog's partition count checked once, not once per task
    for task in tasks:
        for store in have:
            ref = StoreRef(job, job_id, task, store)
            if store not in logged:
                from statectl.engine.prerestore import prerestore_replica

                replicas.append(prerestore_replica(state_dir, ref, root, model.config))
                continue
            where = resolve_changelog(bootstrap, ref, security=security, timeout_s=timeout_s, model=model,
                                      problems=problems, counted=counted, zookeeper=zookeeper)
            notes += [n for n in where.notes if n not in notes]
            replicas.append(where.replica(ref, standby_dir(state_dir, store, task, number, root).absolute()))
    return StandbyContainer(job, job_id, active, number, f"{active}-{number}", tasks, tuple(have),
                            tuple(replicas), tuple(notes), dict(model.config), root)


# -- follow ----------------------------------------------------------------------------------------------


@dataclass
class ContainerFollowResult:
    container: str
    standby_container: str
    replicas: list[FollowResult]
    duration_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def records_applied(self) -> int:
        return sum(r.records_applied for r in self.replicas)


def follow_container(sc: StandbyContainer, bootstrap: str, *, security: KafkaSecurity | None = None,
                     seed_of: Callable[[Replica], Seeder | None] | None = None, stop: threading.Event | None = None,
                     on_status: Callable[[FollowStatus], None] | None = None,
                     progress: ProgressReporter | None = None, settings: FollowerSettings | None = None,
                     state_dir: Path | None = None,
                     legacy_dirs: dict[Path, tuple[Path, Path | None]] | None = None, active_path: bool = False,
                     to_checkpoint: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S, pre_restore: bool = False,
                     blobstore: Any = None, catalog: Any = None) -> ContainerFollowResult:
    """Follow every replica of ``sc`` in this process (one thread each, engine.standby.follow) until
    ``stop`` is set; each replica keeps its own lock, status file (naming the container) and offsets, so a
    kill -9 resumes each where it was. ``seed_of(replica)``: its snapshot seeder; ``legacy_dirs``: replica
    dir -> the old-layout dir it is moved from and where that one's lock and status files are (None: beside
    it). The replicas are in ``sc.standby_root``. Every replica is checked before any is touched (its dir, the
    standby root, its lock: UsageError exit 2, DiscardedError exit 14 for ``active_path`` where a container
    starting on this host clears the state dir, LockHeldError exit 11); one failing stops them all and its error
    is raised once all have stopped. ``pre_restore``: keep each store's latest snapshot pre-restored instead
    (engine.prerestore.follow_pre_restored, with ``blobstore`` and ``catalog``; ``state_dir`` required)."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    if pre_restore:
        from statectl.engine.prerestore import check_here, follow_pre_restored, prerestore_replica

        assert state_dir is not None
        anchors = {r.replica_dir: prerestore_replica(state_dir, r.ref, sc.standby_root, sc.config)
                   for r in sc.replicas}
    for rep in sc.replicas:  # before any thread writes: refuse the whole container, not half of it
        if pre_restore:
            rep = anchors[rep.replica_dir]
            check_here(rep, bootstrap, security=security)
        else:
            check_replica_dir(rep, state_dir, active_path=active_path)
            if state_dir is not None:
                check_placement_dirs(rep, state_dir, standby_root(state_dir, sc.standby_root))
            _check_own_files(rep)
        if _locked(rep.lock_path):
            pid, host = lock_holder(rep)
            raise LockHeldError(f"replica {rep.replica_dir} is held by another follower (pid {pid} on {host})",
                                hint="stop that follower first")
        if active_path:
            check_active_path(rep, bootstrap, security=security)
    errors: list[BaseException] = []
    results: dict[int, FollowResult] = {}
    guard = threading.Lock()

    def run(i: int, rep: Replica) -> None:
        try:
            if pre_restore:
                r = follow_pre_restored(rep.ref, state_dir, bootstrap, blobstore, catalog, security=security,
                                        stop=stop, on_status=on_status, progress=progress, settings=settings,
                                        root=sc.standby_root)
                with guard:
                    results[i] = r
                return
            legacy, legacy_files = (legacy_dirs or {}).get(rep.replica_dir, (None, None))
            r = follow(rep, bootstrap, security=security, seed=seed_of(rep) if seed_of else None, stop=stop,
                       on_status=on_status, progress=progress, settings=settings, state_dir=state_dir,
                       timeout_s=timeout_s, legacy_dir=legacy, legacy_files=legacy_files,
                       active_path=active_path, to_checkpoint=to_checkpoint, container=sc.container,
                       root=standby_root(state_dir, sc.standby_root) if state_dir is not None else None)
            with guard:
                results[i] = r
        except BaseException as e:  # noqa: BLE001 - re-raised below, once every follower stopped
            with guard:
                errors.append(e)
            stop.set()

    threads = [threading.Thread(target=run, args=(i, rep), name=f"follow-{rep.ref.task}-{rep.ref.store}",
                                daemon=True) for i, rep in enumerate(sc.replicas)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if errors:
        raise errors[0]
    return ContainerFollowResult(sc.container, sc.standby_container, [results[i] for i in sorted(results)],
                                 round(time.monotonic() - began, 3), list(getattr(progress, "notes", [])))


# -- the journal -----------------------------------------------------------------------------------------


def journal_path(state_dir: Path, job: str, job_id: str, container: str, root: Path | None = None) -> Path:
    """Where the promote/failover journal of ``container`` lives, in the standby root (``root``, default beside
    the state dir; a digest names it: the names may hold any character)."""
    digest = hashlib.sha256(json.dumps([job, job_id, container]).encode()).hexdigest()[:20]
    return standby_root(state_dir, root) / FAILOVER_DIR / f"{digest}.json"


def _load_journal(state_dir: Path, sc: StandbyContainer) -> tuple[Path, Journal | None]:
    """The container's journal path and journal: the standby root's, else one an older statectl left in
    ``<state>/.statectl-standby/failover/`` (taken over: moved to the standby root when next saved)."""
    path = journal_path(state_dir, sc.job, sc.job_id, sc.container, sc.standby_root)
    journal = Journal.load(path)
    if journal is None:
        old = journal_path(state_dir, sc.job, sc.job_id, sc.container, old_standby_root(state_dir))
        journal = Journal.load(old)
        if journal is not None:
            journal.path, journal.old_path = path, old
    return path, journal


class Journal:
    """A container failover's record of the steps done, rewritten atomically after each (fsynced)."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data
        self.old_path: Path | None = None  # where an older statectl kept it: removed once saved here

    @classmethod
    def load(cls, path: Path) -> Journal | None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise StatectlError(f"failover journal {path} cannot be read: {e}",
                                hint="move it away to start the failover afresh") from None
        if not isinstance(data, dict) or not isinstance(data.get("steps"), dict):
            raise StatectlError(f"failover journal {path} is malformed",
                                hint="move it away to start the failover afresh")
        return cls(path, data)

    @property
    def steps(self) -> dict[str, Any]:
        return self.data["steps"]

    @property
    def promoted(self) -> dict[str, Any]:
        return self.steps.setdefault("promote", {})

    @property
    def finished(self) -> bool:
        return bool(self.data.get("finished"))

    def save(self) -> None:
        from statectl.fsutil import write_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=True))
        if self.old_path is not None:
            self.old_path.unlink(missing_ok=True)
            self.old_path = None


def _key(rep: Replica) -> str:
    return json.dumps([rep.ref.task, rep.ref.store])


# -- promote ---------------------------------------------------------------------------------------------


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


def _plan(sc: StandbyContainer, bootstrap: str, state_dir: Path, journal: Journal | None,
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
    """One replica of :func:`_plan`."""
    done = journal.promoted.get(_key(rep)) if journal is not None else None
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
                            hint=f"follow it here first: statectl standby follow --container {sc.container}")
    if not made_by_follower(rep):
        raise UsageError(f"refusing to promote {rep.replica_dir}: statectl's follower did not make it")
    _follower_to_fence(rep)  # LockHeldError for one this host cannot stop: before anything is written
    check_identity(rep)
    in_place = rep.files_dir is not None and os.path.realpath(rep.replica_dir) == os.path.realpath(active)
    if not in_place:
        check_active_dir(rep, active, state_dir)  # LockHeldError (exit 11) when the active state is held
    start = kept_by_next_start(next_start(rep, bootstrap, security=security, config=sc.config,
                                          checkpoints=checkpoints), rep)
    if start.mode == RESTORE_TRANSACTIONAL and start.checkpoint_id is None:  # pragma: no cover - next_start refuses
        raise StatectlError(f"no checkpoint id for {rep.replica_dir}")
    return Planned(rep, active, start)


def _promote_all(plan: list[Planned], bootstrap: str, state_dir: Path, journal: Journal,
                 security: KafkaSecurity | None, timeout_s: float, to_checkpoint: bool,
                 progress: ProgressReporter, blobstore: Any = None, catalog: Any = None,
                 root: Path | None = None) -> list[StoreStep]:
    """Promote every planned replica not promoted yet, in parallel (each its own catch-up and rename),
    recording each in the journal as it lands. Raise the first failure once all have ended."""
    steps: dict[int, StoreStep] = {}
    guard = threading.Lock()
    errors: list[BaseException] = []

    def one(i: int, p: Planned) -> None:
        rep = p.replica
        if p.done is not None:
            if journal.promoted.get(_key(rep)) != p.done:  # a promote found landed: record it
                with guard:
                    journal.promoted[_key(rep)] = p.done
                    journal.save()
            steps[i] = StoreStep(rep.ref.task, rep.ref.store, str(rep.replica_dir), "done-earlier",
                                 p.done.get("promoted_dir"), p.done.get("restore_mode"))
            return
        target = p.active_dir if not p.blob else None
        if p.start is not None and p.start.mode == RESTORE_TRANSACTIONAL and p.start.checkpoint_id:
            target = checkpoint_dir(p.active_dir, p.start.checkpoint_id)
        with guard:  # the intent first: a kill after the promote's rename leaves the store found there
            journal.promoted[_key(rep)] = {"status": "promoting", "target": str(target) if target else None,
                                           "restore_mode": "blob-store" if p.blob else
                                           (p.start.mode if p.start else None)}
            journal.save()
        try:
            if p.blob:
                from statectl.engine.prerestore import promote_pre_restored

                if blobstore is None or catalog is None:
                    raise UsageError(f"store {rep.ref.store!r} is restored from the blob store: its pre-restore is "
                                     "promoted, which needs the blob store", hint="pass --blobstore")
                r = promote_pre_restored(rep.ref, state_dir, bootstrap, blobstore, catalog, security=security,
                                         timeout_s=timeout_s, progress=progress, restart_follower=False,
                                         check_locality=False,  # checked before this failover pointed it here
                                         promote_lock=False,  # the failover holds it
                                         root=root)
            else:
                r = promote(rep, p.active_dir, bootstrap, security=security, timeout_s=timeout_s,
                            to_checkpoint=to_checkpoint, progress=progress, state_dir=state_dir,
                            restart_follower=False, start=p.start, promote_lock=False)  # the failover holds it
        except BaseException as e:  # noqa: BLE001 - re-raised once every promote ended
            with guard:
                errors.append(e)
                steps[i] = StoreStep(rep.ref.task, rep.ref.store, str(rep.replica_dir), "failed", error=str(e))
            return
        with guard:
            journal.promoted[_key(rep)] = {"status": "promoted", "promoted_dir": r.promoted_dir,
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
    promoted (engine.prerestore). DiscardedError (exit 14) when none is kept here; UsageError (exit 2) when
    this host runs the task's active (its store's LOCK held; or the job's locality placing it here, unless
    ``pointed``: this failover pointed it here)."""
    from statectl.engine.prerestore import check_here, locate_pre_restore, pre_restore_status

    anchor = locate_pre_restore(state_dir, rep.ref, sc.standby_root)
    if pre_restore_status(state_dir, rep.ref, sc.standby_root) is None:
        if done is not None:  # killed after the promote ended, before its record: the status file went last
            return Planned(anchor, active, None, dict(done, status="promoted"), blob=True)
        raise DiscardedError(
            f"refusing to fail over container {sc.container}: the job restores store {rep.ref.store!r} of task "
            f"{rep.ref.task!r} from the blob store, and no pre-restored checkpoint dir is kept on this host",
            hint=f"keep its snapshots pre-restored here: statectl standby follow --container {sc.container} "
                 "--pre-restore")
    check_here(anchor, None if pointed else bootstrap, security=security)
    _follower_to_fence(anchor)
    return Planned(anchor, active, None, done, blob=True)


def _landed(rep: Replica, target: Path) -> bool:
    """Whether ``target`` holds a store promoted from ``rep``: its OFFSET-v2 names exactly the replica's
    changelog partition (what promote writes)."""
    try:
        offsets = read_offsets(target / OFFSET_V2)
    except (OSError, OffsetFileError):
        return False
    return set(offsets) == {rep.ssp}


def _fence_container(sc: StandbyContainer, plan: list[Planned]) -> list[int]:
    """Stop the followers of the container's replicas on this host (SIGTERM, wait; engine.standby._fence);
    the pids stopped. A container follower holds them all: the first fence stops it."""
    stopped = []
    for p in plan:
        if p.done is None and _locked(p.replica.lock_path):
            pid, _ = lock_holder(p.replica)
            if _fence(p.replica) and pid is not None:
                stopped.append(pid)
    return stopped


# -- failover --------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One step of a failover: ``status`` "done" (this run), "done-earlier" (a run this one finishes did
    it), "planned" (--dry-run), "skipped" (nothing to do) and what it did or would do."""

    step: str
    status: str
    detail: str


@dataclass
class FailoverResult:
    job: str
    job_id: str
    container: str
    standby_container: str
    standby_host: str | None
    dry_run: bool
    steps: list[Step]
    stores: list[StoreStep]
    duration_s: float
    resumed: bool = False
    journal: str | None = None
    notes: list[str] = field(default_factory=list)


def failover(sc: StandbyContainer, bootstrap: str, state_dir: Path, *, security: KafkaSecurity | None = None,
             host: str | None = None, dry_run: bool = False, timeout_s: float = 60.0, to_checkpoint: bool = False,
             locality: bool = True, progress: ProgressReporter | None = None, blobstore: Any = None,
             catalog: Any = None) -> FailoverResult:
    """Fail container ``sc.container`` over onto this host, its standby host: the module doc's steps, in
    order, each journaled; a rerun finishes an interrupted one. ``host``: this host's name as the job's
    locality names it (default: socket.gethostname()). ``dry_run``: check everything, change nothing, and
    report each step as planned. ``locality`` False (promote --container): only stop-standby, promote, and
    then point the active container at this host, the standby's mapping left as it is. ``blobstore`` and
    ``catalog``: for stores the job restores from the blob store, whose pre-restores (follow --pre-restore)
    are promoted (engine.prerestore.promote_pre_restored) instead of changelog replicas.

    Raises NotFoundError (exit 10) when the standby container has no locality mapping and no journal
    names its host, or a replica is missing here; UsageError (exit 2) when the standby host is not this
    host; LockHeldError (exit 11) when a process holds a task's active state (before anything is
    written), or another promote or failover of one of its replicas runs, or a follower this host cannot stop
    holds one (before anything is written); StatectlError (exit 1) when a changelog was deleted and recreated
    since a replica's follower recorded its topic id (before anything is written); DiscardedError (exit 14)
    when the job's next start would delete what promote makes (before anything is written); promote's errors
    for a store that fails (the stores promoted stay promoted, the journal says which: rerun to finish).
    ``dry_run`` raises what the failover raises before it writes, with the same exit codes."""
    if dry_run:
        for rep in sc.replicas:
            check_not_promoting(rep)
        return _failover(sc, bootstrap, state_dir, security, host, True, timeout_s, to_checkpoint, locality,
                         progress, blobstore, catalog)
    with contextlib.ExitStack() as held:  # in one order: of two failovers of a container, the first to start wins
        for rep in sorted(sc.replicas, key=lambda r: str(r.promote_lock_path)):
            held.enter_context(PromoteLock(rep))
        return _failover(sc, bootstrap, state_dir, security, host, False, timeout_s, to_checkpoint, locality,
                         progress, blobstore, catalog)


def _failover(sc: StandbyContainer, bootstrap: str, state_dir: Path, security: KafkaSecurity | None,
              host: str | None, dry_run: bool, timeout_s: float, to_checkpoint: bool, locality: bool,
              progress: ProgressReporter | None, blobstore: Any, catalog: Any) -> FailoverResult:
    progress = progress or NullProgress()
    began = time.monotonic()
    me = host or socket.gethostname()
    path, journal = _load_journal(state_dir, sc)
    with CoordinatorStream(bootstrap, sc.job, sc.job_id, security=security) as cs:
        cs.require()
        loc = cs.locality()
        standby_host = loc.container_hosts.get(sc.standby_container) or None
        if journal is not None and journal.finished:
            if (locality and standby_host is None and loc.container_hosts.get(sc.container) == journal.data.get(
                    "standby_host")) or not any((r.replica_dir / OFFSET_V2).exists() for r in sc.replicas):
                return _finished_earlier(sc, journal, dry_run, began)
            journal = None  # a finished failover, and a standby placed again since: a new one
        resumed = journal is not None
        if journal is None:
            journal = Journal(path, {"job": sc.job, "job_id": sc.job_id, "container": sc.container,
                                     "standby_container": sc.standby_container, "locality": locality,
                                     "started": _now(), "finished": None, "steps": {}})
        steps: list[Step] = []
        # 1. find the standby host
        if "find-standby-host" in journal.steps:
            standby_host = journal.data["standby_host"]
            steps.append(Step("find-standby-host", "done-earlier", f"standby host {standby_host} (from the journal)"))
        elif not locality:
            standby_host = me
            steps.append(Step("find-standby-host", "skipped", f"promote --container: this host, {me}"))
        elif standby_host is None:
            if host is None:
                raise NotFoundError(
                    f"standby container {sc.standby_container} of job {sc.job}-{sc.job_id} has no locality mapping "
                    f"on {coordinator_topic(sc.job, sc.job_id)}: nothing says which host holds its replicas",
                    hint="run failover on the host that holds them, with --host <its name as the job's locality "
                         "names it>")
            standby_host = host
            steps.append(Step("find-standby-host", "done" if not dry_run else "planned",
                              f"standby container {sc.standby_container} has no locality mapping: taking --host "
                              f"{host}"))
        else:
            steps.append(Step("find-standby-host", "done" if not dry_run else "planned",
                              f"standby container {sc.standby_container} is on {standby_host}"))
        if standby_host not in ({me} if host else {me, socket.getfqdn()}):
            raise UsageError(f"the standby container {sc.standby_container} of container {sc.container} is on host "
                             f"{standby_host}, not this host ({me}): failover runs where its replicas are",
                             hint=f"run it on {standby_host}, or pass --host if the job's locality names this host "
                                  f"{standby_host}")
        plan = _plan(sc, bootstrap, state_dir, journal, security, progress)
        if dry_run:
            steps += _planned_steps(sc, loc.container_hosts, standby_host, locality)
            stores = [StoreStep(p.replica.ref.task, p.replica.ref.store, str(p.replica.replica_dir),
                                "done-earlier" if p.done is not None else "planned",
                                p.done.get("promoted_dir") if p.done else None,
                                p.done.get("restore_mode") if p.done else
                                ("blob-store" if p.blob else p.start.mode if p.start else None))
                      for p in plan]
            return FailoverResult(sc.job, sc.job_id, sc.container, sc.standby_container, standby_host, True, steps,
                                  stores, round(time.monotonic() - began, 3), resumed, str(path),
                                  list(getattr(progress, "notes", [])))
        journal.data["standby_host"] = standby_host
        if "find-standby-host" not in journal.steps:
            journal.steps["find-standby-host"] = {"host": standby_host, "at": _now()}
            journal.save()
            failpoints.hit("failover-step")
        # 2. delete the standby container's locality mapping; 3. point the active container at the standby host
        if locality:
            steps.append(_locality_step(journal, "delete-standby-locality", cs, sc.standby_container, None,
                                        loc.container_hosts.get(sc.standby_container)))
            steps.append(_locality_step(journal, "point-active-locality", cs, sc.container, standby_host,
                                        loc.container_hosts.get(sc.container)))
        # 4. stop the standby (the fence)
        if "stop-standby" in journal.steps and not any(_locked(p.replica.lock_path) for p in plan if p.done is None):
            steps.append(Step("stop-standby", "done-earlier", "the container's follower was stopped"))
        else:
            pids = _fence_container(sc, plan)
            journal.steps["stop-standby"] = {"pids": pids, "at": _now()}
            journal.save()
            steps.append(Step("stop-standby", "done", f"stopped follower pid {', '.join(map(str, pids))}" if pids
                              else "no follower was running"))
            failpoints.hit("failover-step")
        # 5. promote every store
        stores = _promote_all(plan, bootstrap, state_dir, journal, security, timeout_s, to_checkpoint, progress,
                              blobstore, catalog, sc.standby_root)
        promoted = sum(s.status == "promoted" for s in stores)
        steps.append(Step("promote", "done" if promoted else "done-earlier",
                          f"{promoted} store(s) promoted now, {len(stores) - promoted} earlier"))
        if not locality:  # promote --container: the container now runs here
            current = cs.locality().container_hosts.get(sc.container)
            if current != me:
                cs.write_container_host(sc.container, me)
            steps.append(Step("point-active-locality", "done" if current != me else "skipped",
                              f"container {sc.container} -> {me}"))
    # 6. report
    journal.data["finished"] = _now()
    journal.save()
    steps.append(Step("report", "done", f"container {sc.container} failed over to {standby_host}: "
                                        f"{len(stores)} store(s) of {len(sc.tasks)} task(s)"))
    return FailoverResult(sc.job, sc.job_id, sc.container, sc.standby_container, standby_host, False, steps, stores,
                          round(time.monotonic() - began, 3), resumed, str(path), list(getattr(progress, "notes", [])))


def _locality_step(journal: Journal, name: str, cs: CoordinatorStream, container: str, host: str | None,
                   current: str | None) -> Step:
    """Write container ``container``'s mapping (``host`` None: delete it) unless the journal says it was
    written, or the stream holds it already."""
    what = f"set-container-host-assignment {container}: " + ("deleted" if host is None else f"-> {host}")
    if name in journal.steps:
        return Step(name, "done-earlier", what)
    if (current or None) == host:
        journal.steps[name] = {"offset": None, "at": _now()}
        journal.save()
        return Step(name, "skipped", what + " (the stream holds it already)")
    if host is None:
        offset = cs.delete_container_host(container)
    else:
        offset = cs.write_container_host(container, host)
    journal.steps[name] = {"offset": offset, "at": _now()}
    journal.save()
    failpoints.hit("failover-step")
    return Step(name, "done", f"{what} (offset {offset})")


def _planned_steps(sc: StandbyContainer, hosts: dict[str, str], standby_host: str | None,
                   locality: bool) -> list[Step]:
    out = []
    if locality:
        out.append(Step("delete-standby-locality", "planned",
                        f"set-container-host-assignment {sc.standby_container}: deleted (was "
                        f"{hosts.get(sc.standby_container) or 'none'})"))
        out.append(Step("point-active-locality", "planned",
                        f"set-container-host-assignment {sc.container}: -> {standby_host} (was "
                        f"{hosts.get(sc.container) or 'none'})"))
    out.append(Step("stop-standby", "planned", "stop the container's follower on this host"))
    out.append(Step("promote", "planned", f"{len(sc.replicas)} store(s) of {len(sc.tasks)} task(s)"))
    if not locality:
        out.append(Step("point-active-locality", "planned", f"set-container-host-assignment {sc.container}: -> "
                                                            f"{standby_host}"))
    out.append(Step("report", "planned", ""))
    return out


def _finished_earlier(sc: StandbyContainer, journal: Journal, dry_run: bool, began: float) -> FailoverResult:
    host = journal.data.get("standby_host")
    steps = [Step(name, "done-earlier", f"finished {journal.data['finished']}") for name in STEPS
             if name in journal.steps or name == "report"]
    stores = [StoreStep(*json.loads(k), replica_dir="", status="done-earlier", promoted_dir=v.get("promoted_dir"),
                        restore_mode=v.get("restore_mode")) for k, v in sorted(journal.promoted.items())]
    return FailoverResult(sc.job, sc.job_id, sc.container, sc.standby_container, host, dry_run, steps, stores,
                          round(time.monotonic() - began, 3), True, str(journal.path),
                          [f"container {sc.container} was failed over to {host} already ({journal.data['finished']})"])


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

