"""Adjunct (read-only) stores: what a record or a row becomes in the store, Kafka's partitioner,
and the sealed version's manifest. Pure Python: the put path and the Spark executors run the same code, so
both build the same store, key for key.

Key and value of a topic record (:class:`KeyValueSpec`): the record's own bytes by default; ``key_field`` /
``value_field``: a dotted path into the record's value parsed as JSON; ``extractor``: ``module:callable``,
the seed's KeyValueExtractor. The callable gets an :class:`AdRecord` and returns ``(key, value)`` (a None
value deletes the key) or None to skip the record; a class is instantiated once (with no arguments) and
then called, or, when it has ``get_key`` and ``get_value`` (the seed's interface), asked for both.

A row of a file dataset (a dict, column -> value): the key is ``key_column``; the value is ``value_column``
(a null stored as empty bytes: a file row never deletes), or else a JSON object of ``value_columns``
(default: every column but the key, in the dataset's order).

Bytes from values (:func:`to_bytes`): bytes as they are, a str as UTF-8, None as None, anything else as
compact JSON (``ensure_ascii=False``; dates and times as ISO 8601, decimals as strings).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import importlib
import json
import operator
import struct
import zlib
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Callable, Iterable, Sequence

MANIFEST = "ADSTORE-MANIFEST.json"  # in a sealed version's dir
MASK64 = (1 << 64) - 1


class ExtractError(ValueError):
    """A record or row the key/value spec cannot turn into an entry (the caller names where it was)."""


# -- Kafka's default partitioner -------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (a signed 32-bit int), as the Java client's default partitioner uses it."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record: ``toPositive(murmur2(key)) % n``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def partitions_of(keys: Any, partitions: int) -> Any:
    """:func:`partition_of` of every key of a pyarrow binary or string array (no nulls), as a numpy int32
    array, computed column-wise in numpy (one pass per 4-byte block of the longest key) instead of a
    Python call per key. ValueError for an array with nulls."""
    import numpy as np

    return (positive_murmur2s(keys) % np.uint32(partitions)).astype(np.int32)


def positive_murmur2s(keys: Any) -> Any:
    """``toPositive(murmur2(key))`` of every key of a pyarrow binary or string array (no nulls), as a numpy
    uint32 array: what :func:`partitions_of` takes modulo the partitions (one hash serves several counts of
    partitions). ValueError for an array with nulls."""
    import numpy as np
    import pyarrow as pa

    if keys.null_count:
        raise ValueError("a null key")
    n = len(keys)
    if not n:
        return np.zeros(0, np.uint32)
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.large_binary() if pa.types.is_large_string(keys.type) else pa.binary())
    large = pa.types.is_large_binary(keys.type)
    _, offs_buf, data_buf = keys.buffers()
    offs = np.frombuffer(offs_buf, np.int64 if large else np.int32)[keys.offset:keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return packed_murmur2s(offs, data)


def packed_murmur2s(offsets: Any, data: Any) -> Any:
    """:func:`positive_murmur2s` of keys packed as numpy arrays: key j is ``data[offsets[j]:offsets[j + 1]]``
    (``offsets``: int64, one more than the keys; ``data``: uint8)."""
    import numpy as np

    if len(offsets) < 2:
        return np.zeros(0, np.uint32)
    start, length = offsets[:-1], np.diff(offsets)
    if length.min() == length.max():
        return _fixed_murmur2s(data[int(offsets[0]):int(offsets[-1])], len(length), int(length[0]))
    m = np.uint32(0x5BD1E995)
    h = np.uint32(0x9747B28C) ^ length.astype(np.uint32)
    blocks = length // 4
    for j in range(int(blocks.max())):
        idx = np.nonzero(blocks > j)[0]
        at = start[idx] + 4 * j
        k = (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << np.uint32(8))
             | (data[at + 2].astype(np.uint32) << np.uint32(16)) | (data[at + 3].astype(np.uint32) << np.uint32(24)))
        k *= m
        k ^= k >> np.uint32(24)
        k *= m
        h[idx] = (h[idx] * m) ^ k
    rest = length % 4
    tail = start + blocks * 4
    for r, shift in ((3, 16), (2, 8)):
        idx = np.nonzero(rest >= r)[0]
        h[idx] ^= data[tail[idx] + r - 1].astype(np.uint32) << np.uint32(shift)
    idx = np.nonzero(rest >= 1)[0]
    h[idx] = (h[idx] ^ data[tail[idx]].astype(np.uint32)) * m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h & np.uint32(0x7FFFFFFF)


def _fixed_murmur2s(data: Any, n: int, size: int) -> Any:
    """:func:`packed_murmur2s` of ``n`` keys of ``size`` bytes each, packed end to end in ``data``: a row of a
    2-D view per key and a column per 4-byte block, with no gather of the keys' bytes (7x cheaper)."""
    import numpy as np

    m = np.uint32(0x5BD1E995)
    h = np.full(n, np.uint32(0x9747B28C) ^ np.uint32(size), np.uint32)
    rows = data.reshape(n, size)
    blocks = size // 4
    words = np.ascontiguousarray(rows[:, :4 * blocks]).view("<u4")
    for j in range(blocks):
        k = words[:, j] * m
        k ^= k >> np.uint32(24)
        k *= m
        h *= m
        h ^= k
    tail = rows[:, 4 * blocks:].astype(np.uint32)
    for r, shift in ((3, 16), (2, 8)):
        if size % 4 >= r:
            h ^= tail[:, r - 1] << np.uint32(shift)
    if size % 4:
        h ^= tail[:, 0]
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h & np.uint32(0x7FFFFFFF)


# -- values to bytes -------------------------------------------------------------------------------


def _json_default(v: Any) -> Any:
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "backslashreplace")
    if hasattr(v, "asDict"):  # a pyspark Row nested in a value
        return v.asDict(recursive=True)
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def to_json(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False, default=_json_default).encode()


def to_bytes(v: Any) -> bytes | None:
    """The bytes a value is stored as (see the module doc)."""
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    return to_json(v)


def field_path(obj: Any, path: str) -> Any:
    """``obj["a"]["b"]`` for ``"a.b"`` (a list index where the node is a list); ExtractError when absent."""
    node = obj
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            raise ExtractError(f"no field {path!r} in the value")
    return node


def text_key_note(column: str, value: Any) -> str | None:
    """The note a file load gives when its key column holds numbers or booleans (``value``: one row's key):
    :func:`to_bytes` stores them as their JSON text (``b"42"``), not as Samza's integer or long serde writes
    a key (4 or 8 bytes, big-endian), so a job reading the store with such a key serde finds none of them."""
    if isinstance(value, bool):
        return f"key column {column!r} holds booleans: keys are stored as the text true or false"
    if isinstance(value, (int, float, decimal.Decimal)):
        return (f"key column {column!r} holds numbers: keys are stored as their decimal text (42 as the 2 bytes "
                "'42'), not as Samza's integer or long serde writes them; a job reading the store with such a key "
                "serde finds none of them")
    return None


# -- topic records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdRecord:
    """A topic record as an extractor sees it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


Extract = Callable[[AdRecord], "tuple[bytes, bytes | None] | None"]


@dataclass(frozen=True)
class KeyValueSpec:
    """How records (``key_field``, ``value_field``, ``extractor``) and rows (``key_column``, ``value_column``,
    ``value_columns``) become entries. Picklable: the Spark job gets it as it is."""

    key_field: str | None = None
    value_field: str | None = None
    extractor: str | None = None
    key_column: str | None = None
    value_column: str | None = None
    value_columns: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.extractor:
            return f"extractor {self.extractor}"
        parts = [f"key field {self.key_field}" if self.key_field else "the record key",
                 f"value field {self.value_field}" if self.value_field else "the record value"]
        return ", ".join(parts)

    def record_extractor(self) -> Extract:
        """The function from an AdRecord to ``(key, value)`` (value None: delete) or None (skip: a record
        without a key). Raises ExtractError from the function for a record it cannot handle; ImportError /
        ExtractError here when ``extractor`` cannot be loaded."""
        if self.extractor:
            return load_extractor(self.extractor)
        key_field, value_field = self.key_field, self.value_field
        if key_field is None and value_field is None:
            return _own_bytes

        def extract(r: AdRecord) -> tuple[bytes, bytes | None] | None:
            if r.value is None:  # a tombstone: delete its key, which it carries only as the record key
                if key_field is None:
                    return None if r.key is None else (r.key, None)
                return None  # the key lives in a value that is gone: nothing to delete by
            try:
                doc = json.loads(r.value)
            except ValueError as e:
                raise ExtractError(f"the value is not JSON ({e})") from None
            if key_field is None:
                key = r.key
            else:
                key = to_bytes(field_path(doc, key_field))
            if key is None:
                return None if key_field is None else _raise(f"field {key_field!r} is null")
            value = doc if value_field is None else field_path(doc, value_field)
            return key, (r.value if value_field is None else to_bytes(value))

        return extract

    def row_entry(self, row: dict[str, Any]) -> tuple[bytes, bytes]:
        """``(key, value)`` of a file row; ExtractError when the key column is missing or null."""
        if self.key_column is None:
            raise ExtractError("no key column given")
        if self.key_column not in row:
            raise ExtractError(f"no column {self.key_column!r} (columns: {', '.join(row) or 'none'})")
        key = to_bytes(row[self.key_column])
        if key is None:
            raise ExtractError(f"column {self.key_column!r} is null")
        if self.value_column is not None:
            if self.value_column not in row:
                raise ExtractError(f"no column {self.value_column!r} (columns: {', '.join(row)})")
            return key, to_bytes(row[self.value_column]) or b""
        names = self.value_columns or [c for c in row if c != self.key_column]
        return key, to_json({c: row.get(c) for c in names})


def jsonl_row(line: bytes | str) -> dict[str, Any] | None:
    """A JSON-lines dataset's row from one line: the object it holds, None for a blank line. Raises
    ExtractError for a line that is not JSON or not an object (the caller says where it is). The put path
    and the Spark job both read lines with this, so they see the same rows."""
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except ValueError as e:
        raise ExtractError(f"not JSON ({e})") from None
    if not isinstance(row, dict):
        raise ExtractError(f"a JSON {type(row).__name__}, not an object")
    return row


def _raise(msg: str) -> Any:
    raise ExtractError(msg)


def _own_bytes(r: AdRecord) -> tuple[bytes, bytes | None] | None:
    return None if r.key is None else (r.key, r.value)


def load_extractor(spec: str) -> Extract:
    """The seed's KeyValueExtractor from ``module:callable`` (see the module doc). Raises ExtractError
    naming what is wrong: no colon, a module that does not import, no such attribute, not callable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ExtractError(f"--extractor {spec!r} is not module:callable")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise ExtractError(f"--extractor {spec}: cannot import {module_name}: {type(e).__name__}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ExtractError(f"--extractor {spec}: {module_name} has no {attr}")
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as e:
            raise ExtractError(f"--extractor {spec}: {attr}() failed: {type(e).__name__}: {e}") from None
    if hasattr(obj, "get_key") and hasattr(obj, "get_value"):
        inst = obj

        def both(r: AdRecord) -> tuple[bytes, bytes | None] | None:
            key = to_bytes(inst.get_key(r))
            return None if key is None else (key, to_bytes(inst.get_value(r)))

        return both
    if not callable(obj):
        raise ExtractError(f"--extractor {spec}: {attr} is not callable")
    fn = obj

    def call(r: AdRecord) -> tuple[bytes, bytes | None] | None:
        out = fn(r)
        if out is None:
            return None
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ExtractError(f"returned {type(out).__name__}, not a (key, value) pair or None")
        key = to_bytes(out[0])
        return None if key is None else (key, to_bytes(out[1]))

    return call


# -- the digest of a store's content ---------------------------------------------------------------


_LEN4 = struct.Struct(">I").pack  # a key's length as entry_digest hashes it


def entry_digest(key: bytes, value: bytes) -> int:
    """A 64-bit digest of one entry; a store's checksum is their sum mod 2**64, so that it does not
    depend on the order entries are seen in nor on how they are split into files."""
    kc = zlib.crc32(key)
    return ((kc << 32) | zlib.crc32(value, zlib.crc32(len(key).to_bytes(4, "big"), kc))) & MASK64


def entry_digests(keys: Sequence[bytes], values: Sequence[bytes], key_lengths: Any = None) -> Any:
    """:func:`entry_digest` of each entry of the columns ``keys`` and ``values``, as a numpy uint64 array (the
    loops over the entries in C: map over :func:`fast_crc32`, the key's length bytes folded into the CRC in
    numpy); its sum (numpy's wraps mod 2**64) adds to a checksum. ``key_lengths``: the keys' lengths, a numpy
    array, when the caller has them."""
    import numpy as np

    crc = fast_crc32()
    kcs = uint32s(map(crc, keys)).astype(np.uint64)
    c = kcs ^ np.uint64(0xFFFFFFFF)  # zlib.crc32(len4, kc), a byte at a time over the batch
    lengths = (uint32s(map(len, keys)) if key_lengths is None else key_lengths).astype(np.uint64)
    table = _crc_table()
    for shift in (24, 16, 8, 0):
        c = table[(c ^ (lengths >> np.uint64(shift))) & np.uint64(0xFF)] ^ (c >> np.uint64(8))
    c ^= np.uint64(0xFFFFFFFF)
    lows = uint32s(map(crc, values, c.tolist()))
    return (kcs << np.uint64(32)) | lows


def uint32s(values: Iterable[int]) -> Any:
    """``values`` (ints below 2**32: CRCs, lengths) as a numpy array of C unsigned ints, packed by array.array:
    numpy.fromiter converts each item through its dtype machinery (a column of CRC32s, the calls included, takes
    about a tenth more CPU through it)."""
    import array

    import numpy as np

    return np.frombuffer(array.array("I", values), np.uintc)


@functools.cache
def fast_crc32() -> Callable[..., int]:
    """zlib.crc32's function (the same values, the same arguments) at its fastest here: ISA-L's (carry-less
    multiply, a dependency: 2-3x zlib 1.2's on a 100-byte value), or zlib's on a platform without its wheels."""
    try:
        from isal.isal_zlib import crc32
    except ImportError:  # pragma: no cover - the same values, slower
        return zlib.crc32
    return crc32


@functools.cache
def _crc_table() -> Any:
    """zlib's CRC-32 table (reflected 0xEDB88320), as numpy uint64."""
    import numpy as np

    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table.append(c)
    return np.array(table, np.uint64)


@dataclass
class Digest:
    """Entries seen so far: their count, key range and checksum (see :func:`entry_digest`)."""

    keys: int = 0
    first_key: bytes | None = None
    last_key: bytes | None = None
    checksum: int = 0

    def add(self, key: bytes, value: bytes) -> None:
        self.keys += 1
        if self.first_key is None or key < self.first_key:
            self.first_key = key
        if self.last_key is None or key > self.last_key:
            self.last_key = key
        self.checksum = (self.checksum + entry_digest(key, value)) & MASK64

    def add_sorted(self, entries: Iterable[tuple[bytes, bytes]]) -> None:
        """Entries in ascending key order (a store's iteration): cheaper than :meth:`add`."""
        total, n, last = self.checksum, 0, None
        crc = zlib.crc32
        for key, value in entries:
            kc = crc(key)
            total += ((kc << 32) | crc(value, crc(len(key).to_bytes(4, "big"), kc)))
            if n == 0 and (self.first_key is None or key < self.first_key):
                self.first_key = key
            last = key
            n += 1
        if last is not None and (self.last_key is None or last > self.last_key):
            self.last_key = last
        self.keys += n
        self.checksum = total & MASK64

    def add_sorted_columns(self, keys: Sequence[bytes], values: Sequence[bytes]) -> None:
        """Entries as a list of keys (ascending) and a list of their values: :meth:`add_sorted` with the loop
        over the entries in C (map over :func:`fast_crc32`), the same checksum."""
        if not keys:
            return
        crc = fast_crc32()
        kcs = list(map(crc, keys))
        lows = map(crc, values, map(crc, map(_LEN4, map(len, keys)), kcs))
        total = sum(map(operator.or_, map(operator.lshift, kcs, repeat(32)), lows))
        self.checksum = (self.checksum + total) & MASK64
        if self.first_key is None or keys[0] < self.first_key:
            self.first_key = keys[0]
        if self.last_key is None or keys[-1] > self.last_key:
            self.last_key = keys[-1]
        self.keys += len(keys)

    def merge(self, other: "Digest") -> None:
        self.keys += other.keys
        self.checksum = (self.checksum + other.checksum) & MASK64
        if other.first_key is not None and (self.first_key is None or other.first_key < self.first_key):
            self.first_key = other.first_key
        if other.last_key is not None and (self.last_key is None or other.last_key > self.last_key):
            self.last_key = other.last_key

    def as_json(self) -> dict[str, Any]:
        return {"keys": self.keys, "first_key": None if self.first_key is None else self.first_key.hex(),
                "last_key": None if self.last_key is None else self.last_key.hex(),
                "checksum": f"{self.checksum:016x}"}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Digest":
        try:
            return cls(int(obj["keys"]), None if obj["first_key"] is None else bytes.fromhex(obj["first_key"]),
                       None if obj["last_key"] is None else bytes.fromhex(obj["last_key"]), int(obj["checksum"], 16))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed digest: {e}") from None


@dataclass
class VersionManifest:
    """What seals a version: where it came from, the rows read, and the digest of the store it holds."""

    version: int
    source: str
    rows: int
    digest: Digest
    created: str
    built_with: str = "put"  # "put" or "spark"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "source": self.source, "rows": self.rows,
                           **self.digest.as_json(), "created": self.created, "built_with": self.built_with,
                           **({"extra": self.extra} if self.extra else {})}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "VersionManifest":
        try:
            obj = json.loads(text)
            return cls(int(obj["version"]), str(obj["source"]), int(obj["rows"]), Digest.from_json(obj),
                       str(obj["created"]), str(obj.get("built_with", "put")), dict(obj.get("extra") or {}))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed {MANIFEST}: {e}") from None
