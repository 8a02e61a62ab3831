"""Samza's built-in serdes, as a side-input store sees them: what bytes a record's key or value becomes in
the store. Pure; no I/O.

A side-input store without a processor factory is filled by SideInputsManager's identity processor:
``keySerde.fromBytes(record key)`` and ``msgSerde.fromBytes(record value)``, then the store writes them back
with the same serdes (``toBytes``). So the stored bytes are the round trip of the record's bytes through
the store's serde (:func:`round_trip`), and a record the serde cannot read fails the job's side-input task:
here a :class:`SerdeError` naming what is wrong.

The serdes (samza-api org.apache.samza.serializers): StringSerde (``new String(bytes, UTF-8)`` then
``getBytes(UTF-8)``: a malformed sequence becomes U+FFFD), IntegerSerde / LongSerde / DoubleSerde
(``ByteBuffer.wrap(bytes).getInt()``/``getLong()``/``getDouble()``: the first 4 or 8 bytes, fewer fail with
BufferUnderflowException), ByteSerde / ByteBufferSerde (the bytes as they are), JsonSerde (Scala) and
JsonSerdeV2 (Jackson ``readValue`` into maps, lists, strings, numbers, then ``writeValueAsString`` and
UTF-8; a float is a Double written by ``Double.toString``).
"""

from __future__ import annotations

import json
from typing import Any

from statectl.formats.jackson import to_json_text
from statectl.formats.java import java_double_to_string, java_utf8  # noqa: F401 - re-exported

# serde kind -> the factory classes that make it (SerializerConfig.getPredefinedSerdeFactoryName's names)
FACTORIES = {
    "string": ("org.apache.samza.serializers.StringSerdeFactory",),
    "json": ("org.apache.samza.serializers.JsonSerdeFactory", "org.apache.samza.serializers.JsonSerdeV2Factory"),
    "integer": ("org.apache.samza.serializers.IntegerSerdeFactory",),
    "long": ("org.apache.samza.serializers.LongSerdeFactory",),
    "double": ("org.apache.samza.serializers.DoubleSerdeFactory",),
    "byte": ("org.apache.samza.serializers.ByteSerdeFactory",),
    "bytebuffer": ("org.apache.samza.serializers.ByteBufferSerdeFactory",),
}
KIND_OF_FACTORY = {cls: kind for kind, classes in FACTORIES.items() for cls in classes}
# what --key-serde / --value-serde accept ("byte-array" and "bytes" name ByteSerde too)
KIND_ALIASES = {"byte-array": "byte", "bytes": "byte"}
KINDS = tuple(FACTORIES)


class SerdeError(ValueError):
    """Bytes the serde cannot read (the job's side-input task would fail on them); the caller names where."""


def kind_of(name: str) -> str:
    """The serde kind for a flag's value (``string``, ``json``, ``integer``, ``long``, ``double``,
    ``byte``/``byte-array``/``bytes``, ``bytebuffer``); ValueError for another."""
    kind = KIND_ALIASES.get(name, name)
    if kind not in FACTORIES:
        raise ValueError(f"unknown serde {name!r}: expected one of {', '.join(KINDS)} (or byte-array)")
    return kind


def round_trip(kind: str, data: bytes) -> bytes:
    """``serde.toBytes(serde.fromBytes(data))`` for the serde ``kind``. Raises SerdeError where Samza's
    serde throws."""
    if kind in ("byte", "bytebuffer"):
        return data
    if kind == "string":
        return java_utf8(data.decode("utf-8", "replace"))
    if kind in ("integer", "long", "double"):
        n = 4 if kind == "integer" else 8
        if len(data) < n:
            raise SerdeError(f"{len(data)} byte{'s' if len(data) != 1 else ''} cannot be read as {kind} "
                             f"({kind.capitalize()}Serde reads {n})")
        return data[:n]
    if kind == "json":
        return java_utf8(to_json_text(_jackson_read(data), doubles=True))
    raise ValueError(f"unknown serde kind {kind!r}")


def _no_constant(name: str) -> Any:
    raise SerdeError(f"{name} is not JSON")


def _jackson_read(data: bytes) -> Any:
    """``ObjectMapper.readValue(new String(data, UTF-8))``: the first JSON value (Jackson does not fail on
    trailing content by default); floats kept as floats (Double), integers as ints."""
    text = data.decode("utf-8", "replace")
    i = len(text) - len(text.lstrip(" \t\r\n"))
    if i == len(text):
        raise SerdeError("no JSON content")
    try:
        value, _ = json.JSONDecoder(parse_constant=_no_constant, strict=True).raw_decode(text, i)
    except (ValueError, RecursionError) as e:
        raise SerdeError(f"not JSON: {str(e).splitlines()[0]}") from None
    return value


