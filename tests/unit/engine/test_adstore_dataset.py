"""engine.adstore.dataset: what a marker is and what version it names, the cursor file, and the options."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import pytest

from statectl.engine.adstore.dataset import (
    END_MARKER_HEADER,
    Cursor,
    DatasetLoadOptions,
    marker_value,
    parse_dataset_version,
)
from statectl.errors import UsageError

Rec = namedtuple("Rec", "key value headers")


@pytest.mark.parametrize("value, want", [(b"1", 1), (b" 42\n", 42), (b"20261125", 20261125),
                                         (b"9223372036854775807", 9223372036854775807)])
def test_dataset_versions_that_parse(value, want):
    assert parse_dataset_version(value) == want


@pytest.mark.parametrize("value", [b"", b"0", b"-1", b"+3", b"1.5", b"two", b"\xff\x00", b"1 2", "\u0661".encode(),
                                   b"9223372036854775808", b"x" * 10_000_000])
def test_garbage_is_no_dataset_version(value):
    assert parse_dataset_version(value) is None


def test_marker_by_header_or_by_key():
    by_header = DatasetLoadOptions("b:1", "t", "s", Path("/x"))
    by_key = DatasetLoadOptions("b:1", "t", "s", Path("/x"), end_marker="__END__")
    marker = Rec(None, b"", [(END_MARKER_HEADER, b"3")])
    assert marker_value(marker, by_header) == b"3"
    assert marker_value(Rec(b"k", b"v", [("other", b"3")]), by_header) is None
    assert marker_value(Rec(b"k", b"v", []), by_header) is None
    assert marker_value(Rec(None, b"", [(END_MARKER_HEADER, None)]), by_header) == b""  # a garbage marker
    assert marker_value(marker, by_key) is None  # the header does not count when markers are keyed
    assert marker_value(Rec(b"__END__", b"7", []), by_key) == b"7"
    assert marker_value(Rec(b"__END__", None, []), by_key) == b""
    assert marker_value(Rec(b"__END_", b"7", []), by_key) is None


def test_cursor_round_trip_and_damage():
    c = Cursor("t", "kafka", {0: 12, 3: 40}, 7, 2, [0, 3])
    assert Cursor.from_json(c.to_json()) == c
    assert Cursor.from_json(Cursor("t", "kafka").to_json()) == Cursor("t", "kafka")
    for bad in ("", "[]", '{"topic": "t"}', '{"topic": "t", "system": "kafka", "offsets": {"a": 1}}'):
        with pytest.raises(ValueError):
            Cursor.from_json(bad)


@pytest.mark.parametrize("kw, msg", [({"keep_versions": 0}, "--keep-versions"), ({"end_marker": ""}, "--end-marker"),
                                     ({"store_dir": Path("/y")}, "--store-dir"),
                                     ({"spec_file": True}, "--key-field")])
def test_options_are_checked(kw, msg):
    from statectl.formats.adstore import KeyValueSpec

    if kw.pop("spec_file", False):
        kw["spec"] = KeyValueSpec(key_column="id")
    with pytest.raises(UsageError, match=msg):
        DatasetLoadOptions("b:1", "t", "s", Path("/x"), **kw).validate()
