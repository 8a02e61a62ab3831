"""JobModel.active_tasks: the task names a job model on the coordinator stream gives (standbys left out).
Against real Tansu in tests/integration/test_backup_task_names.py."""

from __future__ import annotations

from statectl.formats.coordinator import standby_task_name
from statectl.kafka.coordinator import JobModel


def model(*, changelog=(), containers=(), modes=None) -> JobModel:
    return JobModel(config={}, changelog_partitions={t: 0 for t in changelog}, container_hosts={},
                    task_containers={t: "0" for t in containers}, task_modes=dict(modes or {}))


def test_every_source_of_task_names_counts():
    m = model(changelog=["count-Partition 0"], containers=["count-Partition 1"],
              modes={"count-Partition 2": "Active"})
    assert m.active_tasks() == {"count-Partition 0", "count-Partition 1", "count-Partition 2"}


def test_standby_tasks_are_left_out():
    sb = standby_task_name("count-Partition 0", 0)
    # ClusterBasedJobCoordinator maps a standby to its active's changelog partition, with mode Standby.
    assert model(changelog=["count-Partition 0", sb], modes={"count-Partition 0": "Active", sb: "Standby"}
                 ).active_tasks() == {"count-Partition 0"}
    # Without a mode, a standby's name says it; with mode Active, a task so named is an active task.
    assert model(changelog=["count-Partition 0", sb]).active_tasks() == {"count-Partition 0"}
    assert model(changelog=[sb], modes={sb: "Active"}).active_tasks() == {sb}
    assert model(containers=["Standby-x"]).active_tasks() == {"Standby-x"}
