"""JSON as Samza's Jackson ObjectMapper writes it, and java.util.HashMap iteration order.

Jackson writes compact JSON (no spaces), control characters escaped as ``\\uXXXX`` with upper-case hex
(``\\b \\t \\n \\f \\r`` in short form), ``"`` and ``\\`` escaped, ``/`` and the rest of the BMP left as
they are. Samza uses two of its generators, and they differ in one respect:

- ``writeValueAsBytes`` (UTF8JsonGenerator): the SnapshotIndex, checkpoint keys and values. It writes
  every UTF-16 surrogate as an escape, so a character outside the BMP becomes a pair
  ``\\uD83D\\uDE00`` and an unpaired surrogate ``\\uD800``: :func:`to_json`.
- ``writeValueAsString`` (WriterBasedJsonGenerator): the Kafka changelog marker and the offset files'
  JSON. Non-BMP characters stay as they are: :func:`to_json_text`.

Objects keep the order they are given in here; where Samza serialises a ``java.util.HashMap``,
:func:`java_hashmap_order` gives the order it iterates in. Pure functions, shared by every Samza format
statectl writes. (Checked byte for byte against jackson-core's generators.)
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, Mapping, TypeVar

from statectl.formats.java import java_double_to_string

K = TypeVar("K")

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_SURROGATE_OR_ASTRAL = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")


def _escape_utf16(m: re.Match[str]) -> str:
    cp = ord(m.group())
    if cp > 0xFFFF:
        cp -= 0x10000
        return f"\\u{0xD800 | (cp >> 10):04X}\\u{0xDC00 | (cp & 0x3FF):04X}"
    return f"\\u{cp:04X}"


def json_string(s: str, *, escape_surrogates: bool = False) -> str:
    """One JSON string literal, escaped as Jackson escapes it: as json.dumps escapes (``"``, ``\\``, the
    short forms, other control characters as ``\\u00XX``, nothing else with ensure_ascii off), with the
    hex digits in upper case. With ``escape_surrogates`` (UTF8JsonGenerator), each UTF-16 surrogate is
    escaped too: a non-BMP character as its escaped surrogate pair, an unpaired surrogate alone."""
    out = json.dumps(s, ensure_ascii=False)
    if out.isascii():
        if "\\u" not in out:
            return out
    elif escape_surrogates:
        out = _SURROGATE_OR_ASTRAL.sub(_escape_utf16, out)
    if "\\u" not in out:
        return out
    # Walk escape pairs left to right, so that an escaped backslash before a literal "u001f" is not taken
    # for the start of an escape.
    return _ESCAPE.sub(lambda m: "\\" + ("u" + m.group(1)[1:].upper() if m.group(1)[0] == "u" else m.group(1)), out)


def _json_value(v: Any, esc: bool, doubles: bool = False) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float) and doubles:
        return java_double_to_string(v)  # Jackson writes a double as Double.toString does
    if isinstance(v, str):
        return json_string(v, escape_surrogates=esc)
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{json_string(k, escape_surrogates=esc)}:{_json_value(x, esc, doubles)}"
                              for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_json_value(x, esc, doubles) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as Jackson JSON")


def to_json(obj: Any) -> bytes:
    """``obj`` (dicts in their order, lists, str, int, bool, None) as Jackson's ``writeValueAsBytes``
    writes it: UTF-8, every surrogate escaped. Never fails on a string (an unpaired surrogate is escaped,
    as Jackson does); raises TypeError for any other kind of value."""
    return _json_value(obj, True).encode("utf-8")


def to_json_text(obj: Any, *, doubles: bool = False) -> str:
    """``obj`` as Jackson's ``writeValueAsString`` writes it: the same, but non-BMP characters and unpaired
    surrogates are left in the string as they are. ``doubles``: floats too, as Double.toString writes them
    (where a format holds none, a float is refused). Raises TypeError for a value of another kind."""
    return _json_value(obj, False, doubles)


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (over UTF-16 code units) as an unsigned 32-bit value."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Iterable[K], initial_capacity: int | None = None,
                       hash_of: Callable[[K], int] | None = None) -> list[K]:
    """The order in which a ``java.util.HashMap`` filled with ``keys`` (in this insertion order) iterates:
    by bucket ``(h ^ h >>> 16) & (capacity - 1)`` at its final capacity, then insertion order.

    ``initial_capacity`` is the constructor argument (None: the no-argument constructor, 16). The table
    grows by doubling while size > 0.75 * capacity; resizing keeps the relative order within a bucket.
    ``hash_of``: the keys' ``hashCode()`` (any int; taken as 32 bits); default String.hashCode.
    """
    keys = list(keys)
    hash_of = hash_of or java_string_hash  # type: ignore[assignment]
    if initial_capacity is None:
        cap = 16
    else:
        cap = 1
        while cap < initial_capacity:
            cap *= 2
    while len(keys) > int(cap * 0.75):
        cap *= 2

    def bucket(k: K) -> int:
        h = hash_of(k) & 0xFFFFFFFF  # type: ignore[misc]
        return (h ^ (h >> 16)) & (cap - 1)

    return [keys[i] for _, i in sorted((bucket(k), i) for i, k in enumerate(keys))]
