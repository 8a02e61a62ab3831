"""Where statectl keeps a standby replica, against what Samza's restore, commit and container start delete in a
state dir (tests/tools/samza_scan.py mirrors StorageManagerUtil.getTaskStoreCheckpointDirs, TransactionalStateTask-
RestoreManager, TaskStorageCommitManager.deleteOldCheckpointDirs and ContainerStorageManager.clearLoggedStores): no
default replica dir, lock file or status file is ever one of them, for any task of the job, tricky task names
included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statectl.catalog.refs import StoreRef
from statectl.engine.standby.dirs import active_path_replica
from statectl.engine.standby.replica import Replica, legacy_standby_dir, standby_dir
from statectl.errors import UsageError
from statectl.local.layout import check_standby_root, samza_would_take, standby_root
from tests.tools.samza_scan import clear_logged_stores, doomed, restore_like_samza

TASKS = ["Partition 0", "Partition 1", "Partition 10", "task", "task-a", "a.b", "a.b-c", "my.task-1", "x", "0",
         "Partition 0-"]
STORES = ["counts", "task-a", "Partition_1-store", "x-y", "0"]


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _lay_out(state: Path) -> list[Path]:
    """Every task's active store dir and a checkpoint dir of it, and every default replica of every task
    (replicas 0 and 1) with its lock and status files, on disk; return the replica paths."""
    ours = []
    for store in STORES:
        for task in TASKS:
            active = state / store / task.replace(" ", "_")
            active.mkdir(parents=True, exist_ok=True)
            active.with_name(active.name + "-1700000000000-123456").mkdir(exist_ok=True)
            for n in (0, 1):
                rep = Replica(StoreRef("job", "1", task, store), "changelog", 0, standby_dir(state, store, task, n))
                rep.replica_dir.mkdir(parents=True, exist_ok=True)
                for f in (rep.lock_path, rep.status_path):
                    f.write_text("x")
                ours += [rep.replica_dir, rep.lock_path, rep.status_path]
    return ours


def test_no_default_replica_lock_or_status_path_is_anything_samza_deletes(tmp_path: Path):
    state = tmp_path / "state"
    ours = _lay_out(state)
    gone = doomed(state, STORES, TASKS)
    assert gone, "the mirror of Samza's scan finds the tasks' own dirs"
    hit = [p for p in ours if _within(p, gone)]
    assert hit == [], hit[:5]
    # The name rule itself, for every pair of tasks: a replica of one is never taken by the restore of another.
    for task in TASKS:
        for other in TASKS:
            rep = Replica(StoreRef("job", "1", task, "counts"), "c", 0, standby_dir(state, "counts", task))
            for p in (rep.replica_dir, rep.lock_path, rep.status_path):
                assert not (p.parent == state / "counts" and samza_would_take(p.name, other.replace(" ", "_"))), p


def test_running_the_samza_scan_deletes_none_of_it_and_the_mirror_does_delete_the_old_default(tmp_path: Path):
    state = tmp_path / "state"
    ours = _lay_out(state)
    old = legacy_standby_dir(state, "counts", "Partition 0")
    old.mkdir()
    old.with_name(old.name + ".standby.json").write_text("{}")
    gone = restore_like_samza(state, STORES, TASKS)
    assert old in gone and old.with_name(old.name + ".standby.json") in gone  # why the old default moved
    assert all(p.exists() for p in ours), [p for p in ours if not p.exists()][:5]


@pytest.mark.parametrize("task", TASKS)
def test_active_path_replica_keeps_its_lock_and_status_in_the_standby_root(tmp_path: Path, task: str):
    state = tmp_path / "state"
    rep = Replica(StoreRef("job", "1", task, "counts"), "c", 0, standby_dir(state, "counts", task))
    inplace = active_path_replica(rep, state)
    assert inplace.replica_dir == (state / "counts" / task.replace(" ", "_")).absolute()
    assert inplace.lock_path == rep.lock_path and inplace.status_path == rep.status_path
    assert inplace.lock_path.parent.parents[1] == tmp_path / "state.statectl-standby"
    assert state.absolute() not in inplace.lock_path.parents


def test_a_container_start_without_checkpoints_clears_the_state_dir_but_no_default_replica(tmp_path: Path):
    state = tmp_path / "state"
    ours = _lay_out(state)
    assert all(state not in p.parents for p in ours)  # beside the state dir, never in it
    gone = clear_logged_stores(state)
    assert gone and state.is_dir() and not any(state.iterdir())  # the mirror deletes what is in the state dir
    assert all(p.exists() for p in ours), [p for p in ours if not p.exists()][:5]


def test_the_standby_root_is_refused_in_the_state_dir_around_it_or_on_another_filesystem(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir()
    assert standby_root(state) == tmp_path / "state.statectl-standby"
    assert standby_root(state / ".") == tmp_path / "state.statectl-standby"
    check_standby_root(state, standby_root(state))
    check_standby_root(state, tmp_path / "elsewhere" / "root")  # not made yet: its nearest dir's filesystem
    for bad, what in ((state, "in the state dir"), (state / ".statectl-standby", "in the state dir"),
                      (tmp_path, "holds the state dir")):
        with pytest.raises(UsageError, match=what):
            check_standby_root(state, bad)
    other = Path("/dev/shm")
    if other.is_dir() and os.stat(other).st_dev != os.stat(tmp_path).st_dev:
        with pytest.raises(UsageError, match="another filesystem"):
            check_standby_root(state, other / "statectl-test-root")


def test_the_checkpointed_position_of_a_store_in_a_v1_and_a_v2_checkpoint():
    from statectl.engine.standby.nextstart import checkpointed_position
    from statectl.formats.checkpoint import (
        KAFKA_CHANGELOG_FACTORY,
        SSP,
        CheckpointV1,
        CheckpointV2,
        KafkaChangelogMarker,
        encode_changelog_marker,
    )

    ssp = SSP("kafka", "c", 3)
    v1 = CheckpointV1({SSP("kafka", "input", 3): "17", ssp: "1700000000000-4:99", SSP("kafka", "other", 3): "x"})
    assert checkpointed_position(v1, "s", ssp) == ("1700000000000-4", ssp, "99")
    assert checkpointed_position(v1, "s", SSP("kafka", "c", 4)) is None  # another partition: none
    assert checkpointed_position(CheckpointV1({ssp: "99"}), "s", ssp) == (None, ssp, "99")  # names no id
    assert checkpointed_position(CheckpointV1({ssp: "1-2:null"}), "s", ssp) == ("1-2", ssp, None)
    marker = encode_changelog_marker(KafkaChangelogMarker(SSP("east", "c", 3), "42"))
    v2 = CheckpointV2("1-5", {}, {KAFKA_CHANGELOG_FACTORY: {"s": marker}})
    assert checkpointed_position(v2, "s", ssp) == ("1-5", SSP("east", "c", 3), "42")
    assert checkpointed_position(v2, "t", ssp) is None and checkpointed_position(None, "s", ssp) is None
