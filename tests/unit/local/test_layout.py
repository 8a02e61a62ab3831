"""The local store layout (statectl.local.layout): store dirs, checkpoint dirs beside them, info logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.local.layout import (
    checkpoint_dir,
    is_info_log,
    local_checkpoint_dirs,
    store_dir,
    task_dir_name,
    task_dirs,
    task_named_by_dir,
    task_of_dir,
    tasks_of_dir,
)

# ---- store dirs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("task, name", [
    ("Partition 0", "Partition_0"),
    ("Partition 10", "Partition_10"),
    ("Standby-Partition 0-1", "Standby-Partition_0-1"),
    ("a  b", "a__b"),
    ("Partition_3", "Partition_3"),
])
def test_task_dir_name(task, name):
    assert task_dir_name(task) == name


def test_store_dir():
    assert store_dir(Path("/var/state"), "my-store", "Partition 0") == Path("/var/state/my-store/Partition_0")
    assert store_dir("/var/state", "s", "Partition 12") == Path("/var/state/s/Partition_12")


def test_local_checkpoint_dirs(tmp_path):
    store = tmp_path / "my-store" / "Partition_1"
    store.mkdir(parents=True)
    for name in ["Partition_1-1718035261042-382917", "Partition_1-1718035300000-5", "Partition_1-notanid",
                 "Partition_1-1-2-3", "Partition_10-1718035261042-1", "Partition_0-1718035261042-2",
                 "Standby-Partition_1-0"]:
        (store.parent / name).mkdir()
    (store.parent / "Partition_1-1718035400000-7").write_text("a file, not a checkpoint dir")
    assert local_checkpoint_dirs(store) == {
        "1718035261042-382917": store.parent / "Partition_1-1718035261042-382917",
        "1718035300000-5": store.parent / "Partition_1-1718035300000-5",
    }


def test_local_checkpoint_dirs_without_parent(tmp_path):
    assert local_checkpoint_dirs(tmp_path / "no-store" / "Partition_0") == {}


def test_local_checkpoint_dirs_without_store_dir_itself(tmp_path):
    (tmp_path / "s" / "Partition_0-5-6").mkdir(parents=True)
    assert local_checkpoint_dirs(tmp_path / "s" / "Partition_0") == {"5-6": tmp_path / "s" / "Partition_0-5-6"}


@pytest.mark.parametrize("name, expected", [
    ("LOG", True), ("LOG.old.1718035261042123", True), ("LOGX", False), ("000001.log", False), ("log", False),
    ("LOG.old", False),
])
def test_is_info_log(name, expected):
    assert is_info_log(name) is expected


def test_checkpoint_dir():
    assert checkpoint_dir(Path("/state/my-store/Partition_0"), "1718035261042-382917") == Path(
        "/state/my-store/Partition_0-1718035261042-382917")


@pytest.mark.parametrize("store,task", [("../../escape", "Partition 0"), ("..", "Partition 0"), ("s", ".."),
                                        ("s", "a/b"), ("s\x00", "Partition 0"), ("", "Partition 0")])
def test_store_dir_refuses_a_name_that_is_not_one_path_segment(store, task, tmp_path):
    from statectl.errors import UsageError
    from statectl.local.layout import store_dir

    with pytest.raises(UsageError):
        store_dir(tmp_path, store, task)
    assert not any(tmp_path.iterdir())


# ---- task dir -> task ----------------------------------------------------------------------------

@pytest.mark.parametrize("dir_name, tasks, found", [
    ("count-Partition_0", ["count-Partition 0", "count-Partition 1"], ["count-Partition 0"]),
    ("count-Partition_0", ["count-Partition_0"], ["count-Partition_0"]),
    ("a_b", ["a b", "a_b", "ab"], ["a b", "a_b"]),
    ("Partition_0", ["Partition 00", "Partition 10", "Partition_00"], []),
    ("count", ["count", "count 0"], ["count"]),
    ("SystemStreamPartition_[kafka,_pv,_0]", ["SystemStreamPartition [kafka, pv, 0]"],
     ["SystemStreamPartition [kafka, pv, 0]"]),
])
def test_tasks_of_dir(dir_name, tasks, found):
    assert tasks_of_dir(dir_name, tasks) == found
    assert task_of_dir(dir_name, tasks) == (found[0] if len(found) == 1 else None)


def test_task_of_dir_never_guesses_from_the_name():
    # Samza's GroupByPartition task of Partition_3's dir is 'Partition 3', but only a known name says so.
    assert task_of_dir("Partition_3", []) is None
    assert task_named_by_dir("Partition_3") is None and task_named_by_dir("Partition 3") is None
    assert task_named_by_dir("count-3") == "count-3"
    assert task_of_dir("Partition_3", ["Partition 30"]) is None
    assert all(task_of_dir(task_dir_name(t), [t]) == t for t in ["Partition 3", "a_b c", "x"])


def test_task_dirs(tmp_path):
    from tests.tools.genstore import make_store

    state = tmp_path / "state"
    for task in ["count-Partition 0", "count-Partition 1"]:
        make_store(store_dir(state, "counts", task), 10, 16, seed=1)
    damaged = state / "counts" / "count-Partition_2"
    damaged.mkdir()
    (damaged / "MANIFEST-000005").write_bytes(b"x")
    (damaged / "000004.sst").write_bytes(b"x")
    offsets_only = state / "totals" / "Partition_0"
    offsets_only.mkdir(parents=True)
    (offsets_only / "OFFSET-v2").write_text("{}")
    # Not task dirs: checkpoint dirs, dot dirs (staged restores, statectl's standby root), empty or foreign
    # dirs, files.
    (state / "counts" / "count-Partition_0-1718035261042-382917").mkdir()
    (state / "counts" / ".count-Partition_1.statectl-restore-1-abcd").mkdir()
    (state / "counts" / ".count-Partition_1.statectl-restore-1-abcd" / "000001.sst").write_bytes(b"x")
    (state / ".statectl-standby" / "0" / "counts").mkdir(parents=True)
    (state / "counts" / "empty").mkdir()
    (state / "counts" / "notes").mkdir()
    (state / "counts" / "notes" / "README").write_text("x")
    (state / "counts" / "count-Partition_1.adstore.lock").write_text("")
    got = [(d.store, d.name, d.damaged) for d in task_dirs(state)]
    assert got == [("counts", "count-Partition_0", False), ("counts", "count-Partition_1", False),
                   ("counts", "count-Partition_2", True), ("totals", "Partition_0", True)]
    assert [d.name for d in task_dirs(state, store="totals")] == ["Partition_0"]
    assert task_dirs(state, store="nope") == []
@pytest.mark.parametrize("name,words", [
    ("a\nb", "control character"), ("tab\there", "control character"), ("esc\x1b[31m", "control character"),
    ("del\x7f", "control character"), ("c1\x85", "control character"), (" ", "blank"), ("\u3000 ", "blank"),
    ("x" * 201, "too long"), ("é" * 101, "too long"),  # 202 bytes in UTF-8
    ("a b" * 60, "too long"),  # 180 bytes, 300 once URL-quoted (each space is %20)
])
def test_check_name_refuses_control_characters_blank_and_too_long_names(name, words):
    from statectl.errors import UsageError
    from statectl.local.layout import check_name

    with pytest.raises(UsageError) as e:
        check_name("task", name)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["x" * 200, "é" * 39, "Partition 0", "ünïcödé store", "a.b-c_d"])
def test_check_name_takes_names_that_fit(name, tmp_path: Path):
    from statectl.local.layout import check_name

    check_name("store", name)
    # the longest additions statectl makes still fit a file name
    (tmp_path / f".{task_dir_name(name)}.statectl-restore-4194304-0123abcd").mkdir()
    (tmp_path / f"Standby-{task_dir_name(name)}-9-1718035261042-382917").mkdir()
