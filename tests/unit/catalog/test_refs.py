"""Checkpoint ids and StoreRef (statectl.catalog.refs)."""

from __future__ import annotations

import re
import time

import pytest

from statectl.catalog.refs import StoreRef, is_checkpoint_id, new_checkpoint_id, parse_checkpoint_id
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
    ("\u0661-\u0662", (1, 2)),  # Long.parseLong takes every BMP script's digits (checked against the JDK)
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
])
def test_parse_checkpoint_id_invalid(value):
    assert not is_checkpoint_id(value)
    with pytest.raises(UsageError) as exc:
        parse_checkpoint_id(value)
    assert str(exc.value) == f"invalid checkpoint id {value!r}: expected <millis>-<n>"


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


