"""Whole containers of a Samza job's standby: which tasks and stores a container's standby holds, and following them all.

A Samza standby container holds the standbys of every task of its active container, and failover moves the
container, never one task of it (StandbyTaskUtil: the standby container of active container ``c`` is ``c-<n>``,
its tasks ``Standby-<task>-<n>``). The container's tasks come from the job's coordinator stream
(``set-task-container-assignment``, ``set-task-mode-assignment``), its stores from the job's config (every
``stores.<s>.changelog``), each replica's changelog partition from ``set-changelog``
(engine.standby.changelog.resolve_changelog, on the job model read once). follow_container follows every replica
of a container in one process, one thread each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.refs import StoreRef
from statectl.engine.standby.changelog import resolve_changelog
from statectl.engine.standby.dirs import check_active_path, check_own_files, check_placement_dirs, check_replica_dir
from statectl.engine.standby.follow import FollowResult, Seeder, follow
from statectl.engine.standby.follower import FollowerSettings
from statectl.engine.standby.placement import active_name
from statectl.engine.standby.replica import FollowStatus, Replica, is_locked, lock_holder, standby_dir
from statectl.errors import LockHeldError, NotFoundError, StatectlError
from statectl.formats.coordinator import active_of_standby
from statectl.formats.jobconfig import store_changelog_key
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.kafka.coordinator import JobModel
from statectl.local.layout import standby_root
from statectl.progress import NullProgress, ProgressReporter


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
    actives = [t for t in assigned if active_name(t, modes) == t]
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


MODE_CHANGELOG, MODE_PRE_RESTORE, MODE_ALL = "changelog", "pre-restore", "all"


def resolve_container(bootstrap: str, job: str, job_id: str, container: str, *, replica: int = 0,
                      stores: list[str] | None = None, state_dir: Path, security: KafkaSecurity | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S, mode: str = MODE_CHANGELOG,
                      zookeeper: str | None = None, root: Path | None = None) -> StandbyContainer:
    """The standby of ``container`` from the job's model (read once: its coordinator stream, or with
    ``zookeeper`` a standalone job's model in ZooKeeper, engine.jobmodel.read_job_model): its tasks, its stores
    (``stores``: only these), and one replica per task and store. ``mode`` MODE_CHANGELOG: the stores with a
    changelog, each replica's dir in the standby root of ``state_dir`` (``root``, default beside it) and its
    changelog partition (on its system's brokers: resolve_changelog);
    MODE_PRE_RESTORE: the stores the job restores from the blob store, each as its pre-restore's handle
    (prerestore.prerestore_replica); MODE_ALL (promote, failover): the first, plus the second's for stores
    with no changelog. Reads only. Raises NotFoundError (exit 10) for no coordinator stream, no such
    container, no store to follow (or one of ``stores`` not among them), and resolve_changelog's errors for
    a task whose changelog partition the stream does not map."""
    from statectl.engine.jobmodel import read_job_model

    model, problems = read_job_model(bootstrap, job, job_id, zookeeper=zookeeper, security=security,
                                     timeout_s=timeout_s, required=True)
    assert model is not None  # required: NotFoundError instead
    active, number, tasks = container_of(model, container, replica)
    logged = changelogged_stores(model.config) if mode != MODE_PRE_RESTORE else []
    blob = blob_restored_stores(model.config) if mode != MODE_CHANGELOG else []
    have = sorted(set(logged) | set(blob))
    if stores:
        missing = [s for s in stores if s not in have]
        if missing:
            what = (f"no changelog for store {missing[0]!r} ({store_changelog_key(missing[0])})"
                    if mode == MODE_CHANGELOG else f"no store {missing[0]!r} restored from the blob store")
            raise NotFoundError(f"the config of job {job}-{job_id} names {what}",
                                hint=f"its stores to follow so: {', '.join(have) or 'none'}")
        have = [s for s in have if s in stores]
    if not have:
        what = ("no store with a changelog (stores.<store>.changelog)" if mode == MODE_CHANGELOG else
                "no store restored from the blob store" if mode == MODE_PRE_RESTORE else
                "no store with a changelog or restored from the blob store")
        raise NotFoundError(f"the config of job {job}-{job_id} names {what}: container {container!r} has nothing "
                            "to follow")
    replicas, notes = [], []
    counted: set[str] = set()  # each changelog's partition count checked once, not once per task
    for task in tasks:
        for store in have:
            ref = StoreRef(job, job_id, task, store)
            if store not in logged:
                from statectl.engine.standby.prerestore import prerestore_replica

                replicas.append(prerestore_replica(state_dir, ref, root, model.config))
                continue
            where = resolve_changelog(bootstrap, ref, security=security, timeout_s=timeout_s, model=model,
                                      problems=problems, counted=counted, zookeeper=zookeeper)
            notes += [n for n in where.notes if n not in notes]
            replicas.append(where.replica(ref, standby_dir(state_dir, store, task, number, root).absolute()))
    return StandbyContainer(job, job_id, active, number, f"{active}-{number}", tasks, tuple(have),
                            tuple(replicas), tuple(notes), dict(model.config), root)


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
    (prerestore_follow.follow_pre_restored, with ``blobstore`` and ``catalog``; ``state_dir`` required)."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    _check_container(sc, bootstrap, security, state_dir, active_path, pre_restore)
    root = standby_root(state_dir, sc.standby_root) if state_dir is not None else None

    def one(rep: Replica) -> FollowResult:
        if pre_restore:
            from statectl.engine.standby.prerestore_follow import follow_pre_restored

            assert state_dir is not None
            return follow_pre_restored(rep.ref, state_dir, bootstrap, blobstore, catalog, security=security,
                                       stop=stop, on_status=on_status, progress=progress, settings=settings,
                                       root=sc.standby_root)
        legacy, legacy_files = (legacy_dirs or {}).get(rep.replica_dir, (None, None))
        return follow(rep, bootstrap, security=security, seed=seed_of(rep) if seed_of else None, stop=stop,
                      on_status=on_status, progress=progress, settings=settings, state_dir=state_dir,
                      timeout_s=timeout_s, legacy_dir=legacy, legacy_files=legacy_files, active_path=active_path,
                      to_checkpoint=to_checkpoint, container=sc.container, root=root)

    results = _in_threads(sc.replicas, one, stop)
    return ContainerFollowResult(sc.container, sc.standby_container, results, round(time.monotonic() - began, 3),
                                 list(progress.notes))


def _check_container(sc: StandbyContainer, bootstrap: str, security: KafkaSecurity | None, state_dir: Path | None,
                     active_path: bool, pre_restore: bool) -> None:
    """follow_container's checks of every replica, before any thread writes: refuse the whole container, not
    half of it."""
    if pre_restore:
        from statectl.engine.standby.prerestore import check_here, prerestore_replica

        assert state_dir is not None
        anchors = {r.replica_dir: prerestore_replica(state_dir, r.ref, sc.standby_root, sc.config)
                   for r in sc.replicas}
    for rep in sc.replicas:
        if pre_restore:
            rep = anchors[rep.replica_dir]
            check_here(rep, bootstrap, security=security)
        else:
            check_replica_dir(rep, state_dir, active_path=active_path)
            if state_dir is not None:
                check_placement_dirs(rep, state_dir, standby_root(state_dir, sc.standby_root))
            check_own_files(rep)
        if is_locked(rep.lock_path):
            pid, host = lock_holder(rep)
            raise LockHeldError(f"replica {rep.replica_dir} is held by another follower (pid {pid} on {host})",
                                hint="stop that follower first")
        if active_path:
            check_active_path(rep, bootstrap, security=security)


def _in_threads(replicas: tuple[Replica, ...], one: Callable[[Replica], FollowResult],
                stop: threading.Event) -> list[FollowResult]:
    """``one(replica)`` for every replica, one thread each; the first to fail sets ``stop`` (the others then end),
    and its error is raised once all have ended. The results, in ``replicas``' order."""
    errors: list[BaseException] = []
    results: dict[int, FollowResult] = {}
    guard = threading.Lock()

    def run(i: int, rep: Replica) -> None:
        try:
            r = one(rep)
            with guard:
                results[i] = r
        except BaseException as e:  # noqa: BLE001 - re-raised below, once every follower stopped
            with guard:
                errors.append(e)
            stop.set()

    threads = [threading.Thread(target=run, args=(i, rep), name=f"follow-{rep.ref.task}-{rep.ref.store}",
                                daemon=True) for i, rep in enumerate(replicas)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if errors:
        raise errors[0]
    return [results[i] for i in sorted(results)]
