"""Where a standby container may be placed (issue 18, `standby check`): the containers it may not share a host
with, as Samza's StandbyTaskUtil.getStandbyContainerConstraints computes them from the job model (containers
whose tasks' active tasks overlap), and the candidate hosts left once their mapped hosts are taken out
(StandbyContainerManager.checkStandbyConstraints). Pure: Locality values, no broker."""

from __future__ import annotations

from statectl.engine.standby.placement import (
    active_container_of,
    conflicting_containers,
    placement_hosts,
    standby_containers,
)
from statectl.formats.coordinator import standby_task_name
from statectl.kafka.coordinator import Locality


def job(containers: dict[str, list[str]], hosts: dict[str, str], rf: int, *, modes: bool = True) -> Locality:
    """Active containers (id -> tasks) with rf - 1 standby containers each (``<id>-<n>``, Samza's ids), their
    tasks ``Standby-<task>-<n>``; ``modes``: write the task modes (else only the names say which is which)."""
    tc, tm = {}, {}
    for cid, tasks in containers.items():
        for task in tasks:
            tc[task], tm[task] = cid, "Active"
            for n in range(rf - 1):
                tc[standby_task_name(task, n)], tm[standby_task_name(task, n)] = f"{cid}-{n}", "Standby"
    return Locality(dict(hosts), tc, tm if modes else {})


TWO = {"0": ["Partition 0", "Partition 1"], "1": ["Partition 2", "Partition 3"]}
HOSTS = {"0": "h-a", "1": "h-b", "0-0": "h-c", "0-1": "h-d", "1-0": "h-a", "1-1": "h-c"}


def test_a_standby_container_conflicts_with_its_active_and_the_other_replicas_of_it():
    loc = job(TWO, HOSTS, 3)
    assert conflicting_containers("0-0", loc) == ["0", "0-1"]
    assert conflicting_containers("1-1", loc) == ["1", "1-0"]
    assert conflicting_containers("0", loc) == ["0-0", "0-1"]
    assert standby_containers(loc) == {
        "0-0": ["Standby-Partition 0-0", "Standby-Partition 1-0"], "0-1": ["Standby-Partition 0-1",
                                                                            "Standby-Partition 1-1"],
        "1-0": ["Standby-Partition 2-0", "Standby-Partition 3-0"], "1-1": ["Standby-Partition 2-1",
                                                                            "Standby-Partition 3-1"]}
    assert {c: active_container_of(c, loc) for c in standby_containers(loc)} == {
        "0-0": "0", "0-1": "0", "1-0": "1", "1-1": "1"}


def test_hosts_of_conflicting_containers_are_left_out_and_others_kept():
    loc = job(TWO, HOSTS, 3)
    everywhere = ["h-d", "h-c", "h-b", "h-a", "h-b"]
    # Not h-a (its active 0) nor h-d (replica 0-1); h-c is 1-1's and h-b is container 1's: no overlap, allowed.
    assert placement_hosts("0-0", loc, everywhere) == ["h-b", "h-c"]
    assert placement_hosts("1-0", loc, everywhere) == ["h-a", "h-d"]
    assert placement_hosts("0-0", loc, ["h-a", "h-d"]) == []
    assert placement_hosts("0-0", loc, ["h-z", "h-a"]) == ["h-z"]


def test_an_unmapped_conflicting_container_rules_out_no_host():
    hosts = {k: v for k, v in HOSTS.items() if k != "0-1"}
    hosts["0"] = ""  # Samza's ANY_HOST
    loc = job(TWO, hosts, 3)
    assert placement_hosts("0-0", loc, ["h-a", "h-d"]) == ["h-a", "h-d"]


def test_the_task_modes_decide_over_the_names():
    loc = job(TWO, HOSTS, 2, modes=False)  # no modes: the names' shape says
    assert conflicting_containers("0-0", loc) == ["0"]
    assert standby_containers(loc) == {"0-0": ["Standby-Partition 0-0", "Standby-Partition 1-0"],
                                       "1-0": ["Standby-Partition 2-0", "Standby-Partition 3-0"]}
    # An active task named like a standby is an active: its container holds no standby and conflicts with none.
    loc = Locality({"0": "h-a", "9": "h-a"}, {"Partition 0": "0", "Standby-Partition 0-0": "9"},
                   {"Partition 0": "Active", "Standby-Partition 0-0": "Active"})
    assert standby_containers(loc) == {}
    assert conflicting_containers("9", loc) == []


def test_the_active_container_from_the_tasks_else_from_samzas_ids():
    # Ids Samza did not make: the active tasks' container says.
    loc = Locality({}, {"a": "x", "Standby-a-0": "y"}, {"a": "Active", "Standby-a-0": "Standby"})
    assert active_container_of("y", loc) == "x"
    assert conflicting_containers("y", loc) == ["x"]
    # The active task not assigned: StandbyTaskUtil.getActiveContainerId's '<active>-<n>', when a container.
    loc = Locality({}, {"b": "0", "Standby-a-0": "0-0"}, {"b": "Active", "Standby-a-0": "Standby"})
    assert active_container_of("0-0", loc) == "0"
    loc = Locality({}, {"Standby-a-0": "0-0"}, {"Standby-a-0": "Standby"})
    assert active_container_of("0-0", loc) is None
    # Actives in two containers: none is the one.
    loc = Locality({}, {"a": "0", "b": "1", "Standby-a-0": "s", "Standby-b-0": "s"}, {})
    assert active_container_of("s", loc) is None
    assert conflicting_containers("s", loc) == ["0", "1"]
