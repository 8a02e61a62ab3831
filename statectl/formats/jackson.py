"""JSON as Samza's Jackson ObjectMapper writes it, and java.util.HashMap iteration order.

Jackson writes compact JSON (no spaces), UTF-8, control characters escaped as ``\\uXXXX`` with upper-case
hex (``\\b \\t \\n \\f \\r`` in short form), ``/`` and non-ASCII left as they are. Objects keep the order
they are given in here; where Samza serialises a ``java.util.HashMap``, :func:`java_hashmap_order`
gives the order it iterates in. Pure functions, shared by every Samza format statectl writes.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def json_string(s: str) -> str:
    """One JSON string literal, escaped as Jackson escapes it: as json.dumps escapes (``"``, ``\\``, the
    short forms, other control characters as ``\\u00XX``, nothing else with ensure_ascii off), with the
    hex digits in upper case."""
    out = json.dumps(s, ensure_ascii=False)
    if "\\u" not in out:
        return out
    # Walk escape pairs left to right, so that an escaped backslash before a literal "u001f" is not taken
    # for the start of an escape.
    return _ESCAPE.sub(lambda m: "\\" + ("u" + m.group(1)[1:].upper() if m.group(1)[0] == "u" else m.group(1)), out)


def _json_value(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json_string(v)
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{json_string(k)}:{_json_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_json_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as Jackson JSON")


def to_json(obj: Any) -> bytes:
    """``obj`` (dicts in their order, lists, str, int, bool, None) as Jackson's ObjectMapper writes it.

    Raises ValueError (UnicodeEncodeError) for a string Java could not encode (a lone surrogate).
    """
    return _json_value(obj).encode("utf-8")


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (over UTF-16 code units) as an unsigned 32-bit value."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Iterable[str], initial_capacity: int | None = None) -> list[str]:
    """The order in which a ``java.util.HashMap<String, ?>`` filled with ``keys`` (in this insertion order)
    iterates: by bucket ``(h ^ h >>> 16) & (capacity - 1)`` at its final capacity, then insertion order.

    ``initial_capacity`` is the constructor argument (None: the no-argument constructor, 16). The table
    grows by doubling while size > 0.75 * capacity; resizing keeps the relative order within a bucket.
    """
    keys = list(keys)
    if initial_capacity is None:
        cap = 16
    else:
        cap = 1
        while cap < initial_capacity:
            cap *= 2
    while len(keys) > int(cap * 0.75):
        cap *= 2

    def bucket(k: str) -> int:
        h = java_string_hash(k)
        return (h ^ (h >> 16)) & (cap - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]
