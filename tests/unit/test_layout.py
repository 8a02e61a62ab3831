"""Local store layout, checkpoint ids, StoreRef, and hoisting global options in the CLI."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from statectl.cli.main import hoist_global_options
from statectl.catalog.refs import StoreRef, is_checkpoint_id, new_checkpoint_id, parse_checkpoint_id
from statectl.local.layout import checkpoint_dir, is_info_log, local_checkpoint_dirs, store_dir, task_dir_name
from statectl.errors import UsageError

# ---- checkpoint ids ------------------------------------------------------------------------------


def test_new_checkpoint_id_format():
    before = time.time_ns() // 1_000_000
    cid = new_checkpoint_id()
    after = time.time_ns() // 1_000_000
    m = re.fullmatch(r"([1-9][0-9]*)-(0|[1-9][0-9]*)", cid)  # decimal, not zero-padded
    assert m, cid
    assert before <= int(m.group(1)) <= after
    assert 0 <= int(m.group(2)) < 1_000_000
    assert is_checkpoint_id(cid)
    assert parse_checkpoint_id(cid) == (int(m.group(1)), int(m.group(2)))


def test_new_checkpoint_ids_do_not_go_back_in_millis():
    ids = [new_checkpoint_id() for _ in range(50)]
    millis = [parse_checkpoint_id(i)[0] for i in ids]
    assert millis == sorted(millis)


@pytest.mark.parametrize("value, expected", [
    ("1718035261042-382917", (1718035261042, 382917)),
    ("1718035261042-0", (1718035261042, 0)),
    ("0-0", (0, 0)),
    ("1-000123", (1, 123)),
])
def test_parse_checkpoint_id(value, expected):
    assert parse_checkpoint_id(value) == expected
    assert is_checkpoint_id(value)


def test_checkpoint_ids_order_numerically_by_millis_then_second_part():
    ids = ["1718035261042-100", "999-5", "1718035261042-99", "1000-0", "1718035261043-0", "1718035261042-1000000"]
    assert sorted(ids, key=parse_checkpoint_id) == [
        "999-5", "1000-0", "1718035261042-99", "1718035261042-100", "1718035261042-1000000", "1718035261043-0"]


@pytest.mark.parametrize("value", [
    "", "abc", "123", "123-", "-123", "1.5-2", " 1-2", "1-2 ", "1-2\n", "1_2", "1--2", "99999999999999999999-1",
    "\u0661-\u0662",  # Arabic-Indic digits are digits to str.isdigit, not to Samza
])
def test_parse_checkpoint_id_invalid(value):
    assert not is_checkpoint_id(value)
    with pytest.raises(UsageError) as exc:
        parse_checkpoint_id(value)
    assert str(exc.value) == f"invalid checkpoint id {value!r}: expected <millis>-<n>"


def test_checkpoint_dir():
    assert checkpoint_dir(Path("/state/my-store/Partition_0"), "1718035261042-382917") == Path(
        "/state/my-store/Partition_0-1718035261042-382917")


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


# ---- StoreRef ------------------------------------------------------------------------------------

def test_store_ref():
    ref = StoreRef("page-view-counter", "1", "Partition 0", "page-view-counts")
    assert str(ref) == "page-view-counter-1/Partition 0/page-view-counts"
    assert ref == StoreRef("page-view-counter", "1", "Partition 0", "page-view-counts")
    with pytest.raises(AttributeError):
        ref.store = "other"  # frozen


@pytest.mark.parametrize("field, message", [
    ("job", "--job is required"),
    ("job_id", "--job-id is required"),
    ("task", "--task is required"),
    ("store", "--store is required"),
])
def test_store_ref_requires_every_part(field, message):
    parts = dict(job="j", job_id="1", task="Partition 0", store="s")
    parts[field] = ""
    with pytest.raises(UsageError) as exc:
        StoreRef(**parts)
    assert str(exc.value) == message


@pytest.mark.parametrize("field", ["job", "job_id", "task", "store"])
@pytest.mark.parametrize("value", ["a/b", "/abs", "x\x00y", "..", "."])
def test_store_ref_rejects_names_that_leave_their_dir(field, value):
    parts = dict(job="j", job_id="1", task="Partition 0", store="s")
    parts[field] = value
    with pytest.raises(UsageError) as exc:
        StoreRef(**parts)
    assert str(exc.value) == (f"invalid {field.replace('_', ' ')} {value!r}: "
                              "'/', NUL, '.' and '..' are not allowed")


@pytest.mark.parametrize("value", ["...", ".hidden", "a..b", "Partition 0", "store-with-dashes_and_underscores"])
def test_store_ref_accepts_ordinary_names(value):
    assert StoreRef(value, value, value, value).store == value


# ---- hoisting global options ---------------------------------------------------------------------

HOIST = [
    ("no-args", [], []),
    ("already-in-front", ["-o", "json", "backup"], ["-o", "json", "backup"]),
    ("short-output-after-command", ["backup", "--store", "x", "-o", "json"], ["-o", "json", "backup", "--store", "x"]),
    ("long-output-equals", ["backup", "--output=json", "--store", "x"], ["--output=json", "backup", "--store", "x"]),
    ("long-output-separate", ["backup", "--output", "json"], ["--output", "json", "backup"]),
    ("quiet", ["backup", "--store", "x", "-q"], ["-q", "backup", "--store", "x"]),
    ("flags", ["restore", "--verbose", "-v", "--quiet", "--debug"], ["--verbose", "-v", "--quiet", "--debug", "restore"]),
    ("config-and-profile", ["backup", "--config", "/etc/s.toml", "--profile=staging", "--store", "x"],
     ["--config", "/etc/s.toml", "--profile=staging", "backup", "--store", "x"]),
    ("order-of-globals-kept", ["backup", "-q", "--store", "x", "-o", "json", "--debug"],
     ["-q", "-o", "json", "--debug", "backup", "--store", "x"]),
    ("nested-command", ["snapshots", "show", "abc", "-o", "json"], ["-o", "json", "snapshots", "show", "abc"]),
    ("double-dash-stops", ["restore", "--", "-o", "json"], ["restore", "--", "-o", "json"]),
    ("double-dash-after-global", ["restore", "-q", "--", "-q", "--output=json"],
     ["-q", "restore", "--", "-q", "--output=json"]),
    ("value-missing-at-end", ["backup", "-o"], ["backup", "-o"]),
    ("value-attached-to-other-option", ["backup", "--store=-q"], ["backup", "--store=-q"]),
    ("not-a-global", ["backup", "--output-dir", "x", "--quietly"], ["backup", "--output-dir", "x", "--quietly"]),
]


@pytest.mark.parametrize("args, expected", [pytest.param(a, e, id=i) for i, a, e in HOIST])
def test_hoist_global_options(args, expected):
    original = list(args)
    assert hoist_global_options(args) == expected
    assert args == original  # the input list is not changed
