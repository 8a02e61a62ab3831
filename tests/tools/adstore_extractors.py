"""Key/value extractors for the adstore tests (``--extractor tests.tools.adstore_extractors:NAME``): the
seed's KeyValueExtractor as a function, as a class with get_key/get_value, and one that fails on one value."""

from __future__ import annotations

import json

from statectl.formats.adstore import AdRecord

BAD_VALUE = b"poison"


def upper(r: AdRecord):
    """Key: the record key; value: the value upper-cased; a record without a key is skipped."""
    if r.key is None:
        return None
    return r.key, None if r.value is None else r.value.upper()


def with_offset(r: AdRecord):
    """Key: "<partition>:<offset>" (a str); value: a dict (stored as compact JSON)."""
    return f"{r.partition}:{r.offset}", {"topic": r.topic, "key": None if r.key is None else r.key.decode()}


def pair_of_three(r: AdRecord):
    return (r.key, r.value, b"extra")


def fails_on_poison(r: AdRecord):
    """The record's own key and value, but a record whose value is BAD_VALUE raises."""
    if r.value == BAD_VALUE:
        raise RuntimeError("cannot handle this value")
    return r.key, r.value


class ById:
    """The seed's interface: get_key / get_value of a JSON value {"id": ..., "name": ...}."""

    def __init__(self) -> None:
        self.calls = 0

    def get_key(self, r: AdRecord):
        self.calls += 1
        return json.loads(r.value)["id"]

    def get_value(self, r: AdRecord):
        return json.loads(r.value)["name"]


class CallableClass:
    """A class whose instances are called like the function form."""

    def __call__(self, r: AdRecord):
        return b"c-" + r.key, r.value


class Broken:
    def __init__(self) -> None:
        raise RuntimeError("no config")


NOT_CALLABLE = 42


def slow(r: AdRecord):
    """The record's own key and value, 2 ms a record: a load long enough to stop in the middle."""
    import time

    time.sleep(0.002)
    return None if r.key is None else (r.key, r.value)
