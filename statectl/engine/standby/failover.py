"""Whole containers of a Samza job's standby: follow every store of every task of a container in
one process, promote them all, and fail a container over onto its standby host.

A Samza standby container holds the standbys of every task of its active container, and failover moves
the container, never one task of it (StandbyTaskUtil: the standby container of active
container ``c`` is ``c-<n>``, its tasks ``Standby-<task>-<n>``). The container's tasks come from the job's
coordinator stream (``set-task-container-assignment``, ``set-task-mode-assignment``), its stores from the
job's config (every ``stores.<s>.changelog``), each replica's changelog partition from ``set-changelog``
(changelog.resolve_changelog, on the job model read once).

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
import json
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.engine.standby.container import StandbyContainer
from statectl.engine.standby.container_promote import StoreStep, fence_container, plan_container, promote_all
from statectl.engine.standby.journal import Journal, load_journal
from statectl.engine.standby.replica import PromoteLock, check_not_promoting, is_locked
from statectl.errors import NotFoundError, UsageError
from statectl.formats.coordinator import coordinator_topic
from statectl.formats.offsets import OFFSET_V2
from statectl.kafka.client import KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream
from statectl.progress import NullProgress, ProgressReporter


STEPS = ("find-standby-host", "delete-standby-locality", "point-active-locality", "stop-standby", "promote",
         "report")


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
    are promoted (prerestore_promote.promote_pre_restored) instead of changelog replicas.

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
    path, journal = load_journal(state_dir, sc)
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
        plan = plan_container(sc, bootstrap, state_dir, journal, security, progress)
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
        if "stop-standby" in journal.steps and not any(is_locked(p.replica.lock_path) for p in plan if p.done is None):
            steps.append(Step("stop-standby", "done-earlier", "the container's follower was stopped"))
        else:
            pids = fence_container(sc, plan)
            journal.steps["stop-standby"] = {"pids": pids, "at": _now()}
            journal.save()
            steps.append(Step("stop-standby", "done", f"stopped follower pid {', '.join(map(str, pids))}" if pids
                              else "no follower was running"))
            failpoints.hit("failover-step")
        # 5. promote every store
        stores = promote_all(plan, bootstrap, state_dir, journal, security, timeout_s, to_checkpoint, progress,
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
