"""The job's placement of actives and standbys: the locality promote points at this host, and standby check.

The locality is the job's ``set-container-host-assignment`` messages on its coordinator stream (LocalityManager).
Invariant 1: no task on the same host as one of its standbys, as Samza's StandbyContainerManager checks it when it
starts a container on a host (StandbyTaskUtil.getStandbyContainerConstraints).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from statectl.catalog.refs import StoreRef
from statectl.errors import UsageError
from statectl.formats.coordinator import active_of_standby
from statectl.kafka.client import KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream, Locality


def active_name(task: str, modes: dict[str, str]) -> str:
    """The active task a task name stands for: a standby's active (it shares its changelog partition,
    TaskNameGrouperProxy.generateStandbyTasks), else the task itself. The task mode decides when there is
    one; else the name's shape."""
    parsed = active_of_standby(task) if modes.get(task) in (None, "Standby") else None
    return parsed[0] if parsed is not None else task


@dataclass
class LocalityPlan:
    """What promote writes to the job's coordinator stream after the move: with ``write``, container
    ``container``'s set-container-host-assignment becomes ``host`` (from ``current``); else nothing, and
    ``why`` says why not. ``note``: the note promote's result then carries (None when it adds none)."""

    container: str | None
    host: str
    current: str | None
    write: bool
    why: str
    note: str | None = None


def update_locality(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None) -> tuple[bool, str | None]:
    """Point the container of ``ref.task`` at this host (set-container-host-assignment, as a Samza
    container writes it), so that the job places the active task where its promoted store now is; return
    whether it did, and a note when it did not. Not when the job's coordinator stream or the task's
    container assignment is not there, nor when that container runs other active tasks too: a container
    moves whole, and repointing it for one promoted task would place the others away from their
    state (promote --container or failover moves them all). What it writes is plan_locality's plan."""
    with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
        plan = _plan_locality(cs, ref)
        if plan.write:
            assert plan.container is not None
            cs.write_container_host(plan.container, plan.host)
    return plan.write, plan.note


def plan_locality(bootstrap: str, ref: StoreRef, *, security: KafkaSecurity | None = None) -> LocalityPlan:
    """What update_locality would write, reading the job's coordinator stream only."""
    with CoordinatorStream(bootstrap, ref.job, ref.job_id, security=security) as cs:
        return _plan_locality(cs, ref)


def _plan_locality(cs: CoordinatorStream, ref: StoreRef) -> LocalityPlan:
    host = socket.gethostname()
    if not cs.refresh():
        return LocalityPlan(None, host, None, False, f"job {ref.job}-{ref.job_id} has no coordinator stream")
    loc = cs.locality()
    container = loc.task_containers.get(ref.task)
    if container is None:
        return LocalityPlan(None, host, None, False, f"the coordinator stream assigns task {ref.task!r} no container")
    current = loc.container_hosts.get(container)
    others = sorted(t for t, c in loc.task_containers.items()
                    if c == container and t != ref.task and active_name(t, loc.task_modes) == t)
    if others:
        note = (f"container {container} also runs task{'s' if len(others) > 1 else ''} "
                f"{', '.join(repr(t) for t in others[:3])}{' ...' if len(others) > 3 else ''}: its "
                "locality is left as it is (a container moves whole); 'statectl standby failover "
                f"--container {container}' moves all its tasks")
        return LocalityPlan(container, host, current, False, note, note)
    return LocalityPlan(container, host, current, True, f"task {ref.task!r} runs in container {container}")


@dataclass
class Violation:
    """A task whose active and standby containers are mapped to one host (no task may share a host with its
    standby: that host's loss would take both)."""

    task: str
    standby: str
    host: str
    container: str
    standby_container: str


@dataclass
class UnmappedStandby:
    """A standby container with no host mapping (none, or an empty host: Samza's ANY_HOST). After a failover
    Samza deletes the standby's mapping and asks for any host (StandbyContainerManager), so this is a state to
    report, not an error. ``active_container``: the container of its tasks' actives (None: not known);
    ``tasks``: its standby tasks, sorted."""

    container: str
    active_container: str | None
    tasks: list[str]


@dataclass
class Proposal:
    """Where standby container ``standby_container`` can be placed keeping invariant 1 as Samza's
    StandbyContainerManager.checkStandbyConstraints checks it: ``candidate_hosts`` (sorted; empty: none) are the
    candidates that no conflicting container (its active, another standby replica of the same active) is
    mapped to. ``reason``: "unmapped"; "violation" (it shares a host with its active: a :class:`Violation`);
    "replica_on_same_host" (it shares a host with another standby replica of the same active, which Samza's
    allocator does not do, though not the seed's invariant)."""

    standby_container: str
    active_container: str | None
    reason: str
    candidate_hosts: list[str]


@dataclass
class PlacementResult:
    tasks: int
    standbys: int
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmapped: list[UnmappedStandby] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)


def check_placement(bootstrap: str, job: str, job_id: str, *, hosts: list[str] | None = None,
                    security: KafkaSecurity | None = None) -> PlacementResult:
    """The seed's first invariant: no task on the same host as one of its standbys, from the job's
    task -> container and container -> host assignments on its coordinator stream. Also lists the standby
    containers with no host mapping, and proposes for each of them and each standby container in violation
    the hosts it can be placed on (:func:`placement_hosts`), from ``hosts`` (default: every host the job's
    locality names). Reads only. Raises UsageError (exit 2) for an empty host in ``hosts``, before reading;
    NotFoundError (exit 10) when the coordinator stream does not exist."""
    if hosts is not None and any(not h.strip() for h in hosts):
        raise UsageError("--host must name a host, not an empty string")
    with CoordinatorStream(bootstrap, job, job_id, security=security) as cs:
        cs.require()
        loc = cs.locality()
        problems = list(cs.problems)
    result = PlacementResult(0, 0, notes=[f"skipped a malformed record: {p}" for p in problems])
    for name, container in sorted(loc.task_containers.items()):
        parsed = _standby_of(name, loc)
        if parsed is None:
            result.tasks += 1
            continue
        result.standbys += 1
        task = parsed[0]
        active_container = loc.task_containers.get(task)
        if active_container is None:
            result.notes.append(f"standby {name} has no active task {task!r} in the assignments")
            continue
        # An empty host is Samza's "any host": not a placement yet.
        host = loc.container_hosts.get(active_container) or None
        standby_host = loc.container_hosts.get(container) or None
        if host is None:
            result.notes.append(f"{task}: no host known for its container yet")
        elif host == standby_host:
            result.violations.append(Violation(task, name, host, active_container, container))
    _propose(result, loc, hosts)
    return result


def _propose(result: PlacementResult, loc: Locality, hosts: list[str] | None) -> None:
    """Fill ``result.unmapped`` and ``result.proposals`` (and their notes) from ``loc``."""
    candidates = sorted(set(hosts) if hosts is not None else {h for h in loc.container_hosts.values() if h})
    in_violation = {v.standby_container for v in result.violations}
    for container, tasks in sorted(standby_containers(loc).items()):
        active = active_container_of(container, loc)
        if not loc.container_hosts.get(container):
            result.unmapped.append(UnmappedStandby(container, active, tasks))
            reason = "unmapped"
        elif container in in_violation:
            reason = "violation"
        elif shared := _replicas_on_host(container, loc):
            # Not the seed's invariant (exit 0), but Samza's: it does not start two replicas of one active on a
            # host (StandbyContainerManager.checkStandbyConstraints), as one host's loss would take both.
            result.notes.append(f"standby container {container} shares host {loc.container_hosts[container]} with "
                                f"standby container{'s' if len(shared) > 1 else ''} {', '.join(shared)} of the same "
                                "active")
            reason = "replica_on_same_host"
        else:
            continue
        fit = placement_hosts(container, loc, candidates)
        result.proposals.append(Proposal(container, active, reason, fit))
        if not fit:
            why = ("the job's locality names no host (pass --host)" if not candidates else
                   f"every candidate ({', '.join(candidates)}) runs its active or another replica of it")
            result.notes.append(f"no host to propose for standby container {container}: {why}")


def _replicas_on_host(container: str, loc: Locality) -> list[str]:
    """The other standby containers of the same active mapped to ``container``'s host (sorted)."""
    host = loc.container_hosts.get(container)
    standbys = standby_containers(loc)
    return [c for c in conflicting_containers(container, loc) if c in standbys and loc.container_hosts.get(c) == host]


def _standby_of(task: str, loc: Locality) -> tuple[str, int] | None:
    """(active task, replica) when ``task`` is a standby task: Samza's record of its mode says, else its name's
    shape (formats.coordinator.active_of_standby)."""
    return active_of_standby(task) if loc.task_modes.get(task) in (None, "Standby") else None


def _active_tasks(container: str, loc: Locality) -> set[str]:
    """The active tasks of container ``container``'s tasks: its active tasks and the actives of its standby
    tasks (StandbyTaskUtil.getCorrespondingActiveTasks)."""
    out = set()
    for task, c in loc.task_containers.items():
        if c == container:
            parsed = _standby_of(task, loc)
            out.add(task if parsed is None else parsed[0])
    return out


def standby_containers(loc: Locality) -> dict[str, list[str]]:
    """Container id -> its standby tasks (sorted), for every container that holds a standby task. Pure."""
    out: dict[str, list[str]] = {}
    for task, container in sorted(loc.task_containers.items()):
        if _standby_of(task, loc) is not None:
            out.setdefault(container, []).append(task)
    return out


def active_container_of(container: str, loc: Locality) -> str | None:
    """The container that runs the active tasks of standby container ``container``'s tasks, when that is one
    container; else Samza's own rule for the ids it makes, ``<active container id>-<replica n>``
    (StandbyTaskUtil.getActiveContainerId), when that names a container of the job; else None. Pure."""
    actives = {loc.task_containers[a] for a in _active_tasks(container, loc)
               if a in loc.task_containers and _standby_of(a, loc) is None} - {container}
    if len(actives) == 1:
        return next(iter(actives))
    prefix = container.split("-")[0]
    if not actives and prefix != container and prefix in set(loc.task_containers.values()):
        return prefix
    return None


def conflicting_containers(container: str, loc: Locality) -> list[str]:
    """The containers container ``container`` may not share a host with (sorted): every other container whose
    tasks' active tasks overlap its own, so a standby's active and the other standby replicas of the same
    active (StandbyTaskUtil.getStandbyContainerConstraints, which StandbyContainerManager.checkStandbyConstraints
    enforces when it starts a container on a host). Pure."""
    mine = _active_tasks(container, loc)
    others = set(loc.task_containers.values()) - {container}
    return sorted(c for c in others if mine & _active_tasks(c, loc))


def placement_hosts(container: str, loc: Locality, candidates: list[str]) -> list[str]:
    """The hosts of ``candidates`` (sorted, each once) that container ``container`` can be placed on keeping
    invariant 1 as Samza checks it: none of its :func:`conflicting_containers` is mapped there. A conflicting
    container with no host (or Samza's empty ANY_HOST) rules out no host. Pure."""
    taken = {loc.container_hosts.get(c) for c in conflicting_containers(container, loc)}
    return sorted(set(candidates) - taken)
