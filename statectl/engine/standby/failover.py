"""standby failover (and promote --container): a whole container onto its standby host, as a journaled plan of steps.

failover runs Samza's failover steps, on the standby host, in order, each an object of this module (STEP_PLAN)
recorded in one journal in the standby root (engine.standby.journal) before the next begins, so that a rerun after
a kill at any step finishes what was begun and redoes nothing:

1. find-standby-host: the host of the standby container's locality mapping (LocalityManager's
   ``set-container-host-assignment``); the journal's, once begun (step 2 deletes the mapping);
2. delete-standby-locality: tombstone the standby container's mapping (CoordinatorStreamStore.delete:
   a null value), so that the job places the standby container elsewhere (StandbyContainerManager asks any
   host for a standby with no mapping);
3. point-active-locality: the active container's mapping set to the standby host, as
   LocalityManager.writeContainerToHostMapping writes it, so that the job starts the active there;
4. stop-standby: stop the container's follower (the fence; Invariant 2: nothing is promoted while it runs);
5. promote: promote every store of every task of the container (engine.standby.container_promote, each where
   the job's next start keeps it);
6. report.

A container's promote (``locality`` False) runs only stop-standby and promote, then points the active container
at this host. Before anything is read, the failover takes every replica's PromoteLock (engine.standby.replica):
a second failover or a promote of one of them exits 11 naming the first, and signals nothing. Before step 2
writes anything, every replica is checked (container_promote.plan_container). ``--dry-run`` makes every one of
these checks, and the standby host's, and exits as the failover would.
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
from statectl.engine.standby.container_promote import Planned, StoreStep, fence_container, plan_container, promote_all
from statectl.engine.standby.journal import Journal, load_journal
from statectl.engine.standby.replica import PromoteLock, check_not_promoting, is_locked
from statectl.errors import NotFoundError, UsageError
from statectl.formats.coordinator import coordinator_topic
from statectl.formats.offsets import OFFSET_V2
from statectl.kafka.client import KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream, Locality
from statectl.progress import NullProgress, ProgressReporter


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


@dataclass
class _Run:
    """One failover as its steps read and write it: what it was asked, the job's stream and locality as read at
    the start, the journal, and what the steps found (the standby host, the checked plan, the stores promoted)."""

    sc: StandbyContainer
    bootstrap: str
    state_dir: Path
    security: KafkaSecurity | None
    host: str | None  # --host: this host's name as the job's locality names it
    dry_run: bool
    timeout_s: float
    to_checkpoint: bool
    locality: bool
    progress: ProgressReporter
    blobstore: Any
    catalog: Any
    cs: CoordinatorStream
    loc: Locality
    journal: Journal
    standby_host: str | None = None
    plan: list[Planned] = field(default_factory=list)
    stores: list[StoreStep] = field(default_factory=list)

    @property
    def me(self) -> str:
        return self.host or socket.gethostname()

    def record(self, name: str, **values: Any) -> None:
        """Journal step ``name`` as done, fsynced before the next step begins."""
        self.journal.steps[name] = {**values, "at": _now()}
        self.journal.save()
        failpoints.hit("failover-step")


class FindStandbyHost:
    """find-standby-host: where the replicas are, which must be this host. It reads only, in a dry run too;
    ``record`` journals it once every replica is checked."""

    name = "find-standby-host"

    def find(self, run: _Run) -> Step:
        sc, journal, status = run.sc, run.journal, "done" if not run.dry_run else "planned"
        if self.name in journal.steps:
            run.standby_host = journal.data["standby_host"]
            step = Step(self.name, "done-earlier", f"standby host {run.standby_host} (from the journal)")
        elif not run.locality:
            run.standby_host = run.me
            step = Step(self.name, "skipped", f"promote --container: this host, {run.me}")
        elif run.standby_host is None:
            if run.host is None:
                raise NotFoundError(
                    f"standby container {sc.standby_container} of job {sc.job}-{sc.job_id} has no locality mapping "
                    f"on {coordinator_topic(sc.job, sc.job_id)}: nothing says which host holds its replicas",
                    hint="run failover on the host that holds them, with --host <its name as the job's locality "
                         "names it>")
            run.standby_host = run.host
            step = Step(self.name, status, f"standby container {sc.standby_container} has no locality mapping: "
                                           f"taking --host {run.host}")
        else:
            step = Step(self.name, status, f"standby container {sc.standby_container} is on {run.standby_host}")
        if run.standby_host not in ({run.me} if run.host else {run.me, socket.getfqdn()}):
            raise UsageError(f"the standby container {sc.standby_container} of container {sc.container} is on host "
                             f"{run.standby_host}, not this host ({run.me}): failover runs where its replicas are",
                             hint=f"run it on {run.standby_host}, or pass --host if the job's locality names this "
                                  f"host {run.standby_host}")
        return step

    def record(self, run: _Run) -> None:
        run.journal.data["standby_host"] = run.standby_host
        if self.name not in run.journal.steps:
            run.record(self.name, host=run.standby_host)


class SetLocality:
    """delete-standby-locality (``standby``: the standby container's mapping deleted) or
    point-active-locality (the active container's mapping set to the standby host): written unless the journal
    says it was, or the stream holds it already."""

    def __init__(self, name: str, standby: bool):
        self.name, self.standby = name, standby

    def wanted(self, run: _Run) -> bool:
        return run.locality

    def _target(self, run: _Run) -> tuple[str, str | None]:
        sc = run.sc
        return (sc.standby_container, None) if self.standby else (sc.container, run.standby_host)

    def planned(self, run: _Run) -> Step:
        container, host = self._target(run)
        return Step(self.name, "planned", f"set-container-host-assignment {container}: "
                                          f"{'deleted' if host is None else '-> ' + host} "
                                          f"(was {run.loc.container_hosts.get(container) or 'none'})")

    def execute(self, run: _Run) -> Step:
        container, host = self._target(run)
        current = run.loc.container_hosts.get(container)
        what = f"set-container-host-assignment {container}: " + ("deleted" if host is None else f"-> {host}")
        if self.name in run.journal.steps:
            return Step(self.name, "done-earlier", what)
        if (current or None) == host:
            run.journal.steps[self.name] = {"offset": None, "at": _now()}
            run.journal.save()
            return Step(self.name, "skipped", what + " (the stream holds it already)")
        offset = run.cs.delete_container_host(container) if host is None else run.cs.write_container_host(container,
                                                                                                           host)
        run.record(self.name, offset=offset)
        return Step(self.name, "done", f"{what} (offset {offset})")


class StopStandby:
    """stop-standby: the container's followers on this host stopped (the fence)."""

    name = "stop-standby"

    def wanted(self, run: _Run) -> bool:
        return True

    def planned(self, run: _Run) -> Step:
        return Step(self.name, "planned", "stop the container's follower on this host")

    def execute(self, run: _Run) -> Step:
        if self.name in run.journal.steps and not any(is_locked(p.replica.lock_path) for p in run.plan
                                                      if p.done is None):
            return Step(self.name, "done-earlier", "the container's follower was stopped")
        pids = fence_container(run.sc, run.plan)
        run.record(self.name, pids=pids)
        return Step(self.name, "done", f"stopped follower pid {', '.join(map(str, pids))}" if pids
                    else "no follower was running")


class PromoteStores:
    """promote: every store of every task of the container (container_promote.promote_all, each journaled)."""

    name = "promote"

    def wanted(self, run: _Run) -> bool:
        return True

    def planned(self, run: _Run) -> Step:
        return Step(self.name, "planned", f"{len(run.sc.replicas)} store(s) of {len(run.sc.tasks)} task(s)")

    def execute(self, run: _Run) -> Step:
        run.stores = promote_all(run.plan, run.bootstrap, run.state_dir, run.journal, run.security, run.timeout_s,
                                 run.to_checkpoint, run.progress, run.blobstore, run.catalog, run.sc.standby_root)
        promoted = sum(s.status == "promoted" for s in run.stores)
        return Step(self.name, "done" if promoted else "done-earlier",
                    f"{promoted} store(s) promoted now, {len(run.stores) - promoted} earlier")


class PointActiveHere:
    """promote --container's last step: the active container's mapping set to this host, where it now runs."""

    name = "point-active-locality"

    def wanted(self, run: _Run) -> bool:
        return not run.locality

    def planned(self, run: _Run) -> Step:
        return Step(self.name, "planned", f"set-container-host-assignment {run.sc.container}: -> {run.standby_host}")

    def execute(self, run: _Run) -> Step:
        current = run.cs.locality().container_hosts.get(run.sc.container)
        if current != run.me:
            run.cs.write_container_host(run.sc.container, run.me)
        return Step(self.name, "done" if current != run.me else "skipped", f"container {run.sc.container} -> {run.me}")


class Report:
    """report: the journal says the failover finished."""

    name = "report"

    def wanted(self, run: _Run) -> bool:
        return True

    def planned(self, run: _Run) -> Step:
        return Step(self.name, "planned", "")

    def execute(self, run: _Run) -> Step:
        run.journal.data["finished"] = _now()
        run.journal.save()
        return Step(self.name, "done", f"container {run.sc.container} failed over to {run.standby_host}: "
                                       f"{len(run.stores)} store(s) of {len(run.sc.tasks)} task(s)")


FIND_STANDBY_HOST = FindStandbyHost()
# The steps after find-standby-host, in order; each runs when ``wanted`` (the locality steps in a failover, the
# last point-active-locality in a container's promote).
STEP_PLAN = (SetLocality("delete-standby-locality", standby=True), SetLocality("point-active-locality", standby=False),
             StopStandby(), PromoteStores(), PointActiveHere(), Report())
STEPS = tuple(dict.fromkeys([FIND_STANDBY_HOST.name, *(s.name for s in STEP_PLAN)]))


def _failover(sc: StandbyContainer, bootstrap: str, state_dir: Path, security: KafkaSecurity | None,
              host: str | None, dry_run: bool, timeout_s: float, to_checkpoint: bool, locality: bool,
              progress: ProgressReporter | None, blobstore: Any, catalog: Any) -> FailoverResult:
    progress = progress or NullProgress()
    began = time.monotonic()
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
        run = _Run(sc, bootstrap, state_dir, security, host, dry_run, timeout_s, to_checkpoint, locality, progress,
                   blobstore, catalog, cs, loc, journal, standby_host)
        steps = _run_steps(run)
    stores = run.stores if not dry_run else [
        StoreStep(p.replica.ref.task, p.replica.ref.store, str(p.replica.replica_dir),
                  "done-earlier" if p.done is not None else "planned", p.done.get("promoted_dir") if p.done else None,
                  p.done.get("restore_mode") if p.done else ("blob-store" if p.blob else p.start.mode if p.start
                                                             else None))
        for p in run.plan]
    return FailoverResult(sc.job, sc.job_id, sc.container, sc.standby_container, run.standby_host, dry_run, steps,
                          stores, round(time.monotonic() - began, 3), resumed, str(path),
                          list(progress.notes))


def _run_steps(run: _Run) -> list[Step]:
    """find-standby-host (reads only), every replica checked before anything is written, then each step of
    STEP_PLAN in order: planned (a dry run) or executed."""
    found = FIND_STANDBY_HOST.find(run)
    run.plan = plan_container(run.sc, run.bootstrap, run.state_dir, run.journal, run.security, run.progress)
    if run.dry_run:
        return [found] + [step.planned(run) for step in STEP_PLAN if step.wanted(run)]
    FIND_STANDBY_HOST.record(run)
    return [found] + [step.execute(run) for step in STEP_PLAN if step.wanted(run)]


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
