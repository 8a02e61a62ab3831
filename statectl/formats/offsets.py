"""Samza's checksum-framed offset files in a store dir (FORMATS.md "Local store directory").

Samza's FileUtil.writeWithChecksum writes them through a java.io.ObjectOutputStream: the stream magic
``AC ED 00 05``, then block-data records (``0x77 <u8 len>``, or ``0x7A <u32 BE len>`` for a full block of
1024 bytes; only the last block is shorter) holding ``writeLong`` of the CRC32 of ``data.getBytes()``
(UTF-8, an unpaired surrogate as ``?``) followed by the data as ``writeUTF`` pieces (u16 BE length +
modified UTF-8): 65535 UTF-16 chars at a time while at least 65536 are left, then the rest (so a
surrogate pair may be split between pieces, as Scala's ``splitAt`` splits it). The file goes to
``<file>.tmp`` first and is renamed into place. FileUtil.readWithChecksum reads the pieces back until the
stream ends and discards the data when the CRC does not match.

The files (StorageManagerUtil): ``OFFSET`` holds a bare offset (:func:`read_offset`); ``OFFSET-v2`` and
``SIDE-INPUT-OFFSETS`` a JSON map ``system.stream.partition`` -> offset as ``writeValueAsString`` writes it
(:func:`read_offsets`); ``CHECKPOINT-V2`` a v2 checkpoint as CheckpointV2Serde writes it
(:func:`read_checkpoint_v2`). Without a valid ``OFFSET-v2``, Samza's restore manager treats a logged store
as invalid and deletes it.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any, Mapping

from statectl.formats.checkpoint import SSP, CheckpointFormatError, CheckpointV2, decode_v2, encode_v2
from statectl.formats.jackson import java_hashmap_order, to_json_text
from statectl.formats.java import JAVA_INT_MAX, JAVA_INT_MIN, java_parse_long, java_utf8

OFFSET = "OFFSET"
OFFSET_V2 = "OFFSET-v2"
SIDE_INPUT_OFFSETS = "SIDE-INPUT-OFFSETS"
CHECKPOINT_V2 = "CHECKPOINT-V2"

MAGIC = b"\xac\xed\x00\x05"
_BLOCK = 1024
_PIECE = 65535


class OffsetFileError(ValueError):
    """Bytes that are not a valid Samza offset file (bad framing, or a checksum that does not match)."""


def _units(s: str) -> list[int]:
    raw = s.encode("utf-16-be", "surrogatepass")
    return [(raw[i] << 8) | raw[i + 1] for i in range(0, len(raw), 2)]


def _modified_utf8(units: list[int]) -> bytes:
    """Java's modified UTF-8 of UTF-16 code units: NUL as C0 80, each surrogate as 3 bytes."""
    out = bytearray()
    for u in units:
        if 0x0001 <= u <= 0x007F:
            out.append(u)
        elif u <= 0x07FF:
            out += bytes((0xC0 | (u >> 6), 0x80 | (u & 0x3F)))
        else:
            out += bytes((0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)))
    return bytes(out)


def _from_modified_utf8(data: bytes) -> list[int]:
    units, i = [], 0
    while i < len(data):
        b = data[i]
        if b < 0x80:
            units.append(b)
            i += 1
        elif b & 0xE0 == 0xC0 and i + 1 < len(data) and data[i + 1] & 0xC0 == 0x80:
            units.append(((b & 0x1F) << 6) | (data[i + 1] & 0x3F))
            i += 2
        elif b & 0xF0 == 0xE0 and i + 2 < len(data) and data[i + 1] & 0xC0 == 0x80 and data[i + 2] & 0xC0 == 0x80:
            units.append(((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F))
            i += 3
        else:
            raise OffsetFileError(f"malformed modified UTF-8 at byte {i}")
    return units


def encode(data: str) -> bytes:
    """The bytes Samza writes for ``data``, byte for byte. Raises OffsetFileError for a piece Java could
    not write either (writeUTF's limit of 65535 bytes: e.g. 65535 chars of ``€``)."""
    payload = bytearray(struct.pack(">Q", zlib.crc32(java_utf8(data))))
    units = _units(data)
    for i in range(0, max(len(units), 1), _PIECE):
        piece = _modified_utf8(units[i:i + _PIECE])
        if len(piece) > 0xFFFF:
            raise OffsetFileError("an offset file piece longer than 65535 bytes (Java's writeUTF limit)")
        payload += struct.pack(">H", len(piece)) + piece
    out = bytearray(MAGIC)
    for i in range(0, len(payload), _BLOCK):
        block = payload[i:i + _BLOCK]
        out += (bytes((0x77, len(block))) if len(block) <= 0xFF else b"\x7a" + struct.pack(">I", len(block)))
        out += block
    return bytes(out)


def decode(raw: bytes) -> str:
    """The data of an offset file, as readWithChecksum returns it (a surrogate pair split between two
    pieces is joined again). Raises OffsetFileError for bad framing or a checksum mismatch (where Samza
    returns null, i.e. no offsets)."""
    if raw[:4] != MAGIC:
        raise OffsetFileError("not a Java object stream (bad magic)")
    payload, i = bytearray(), 4
    while i < len(raw):
        kind = raw[i]
        if kind == 0x77 and i + 2 <= len(raw):
            n, i = raw[i + 1], i + 2
        elif kind == 0x7A and i + 5 <= len(raw):
            n, i = struct.unpack(">I", raw[i + 1:i + 5])[0], i + 5
        else:
            raise OffsetFileError(f"unexpected byte {kind:#04x} at {i}: only block data is expected")
        if i + n > len(raw):
            raise OffsetFileError("truncated block data")
        payload += raw[i:i + n]
        i += n
    if len(payload) < 10:
        raise OffsetFileError("too short for a checksum and data")
    (crc,) = struct.unpack(">Q", payload[:8])
    units: list[int] = []
    j = 8
    while j < len(payload):
        if j + 2 > len(payload):
            raise OffsetFileError("truncated string length")
        (n,) = struct.unpack(">H", payload[j:j + 2])
        if j + 2 + n > len(payload):
            raise OffsetFileError("truncated string")
        units += _from_modified_utf8(bytes(payload[j + 2:j + 2 + n]))
        j += 2 + n
    data = b"".join(u.to_bytes(2, "big") for u in units).decode("utf-16-be", "surrogatepass")
    actual = zlib.crc32(java_utf8(data))
    if actual != crc:
        raise OffsetFileError(f"checksum mismatch (file says {crc}, data gives {actual})")
    return data


def offsets_json(offsets: Mapping[SSP, str | None]) -> str:
    """A map SSP -> offset as Samza's OFFSET-v2 / SIDE-INPUT-OFFSETS JSON: ``writeValueAsString`` of the
    ``HashMap<SystemStreamPartition, String>`` Samza builds (filled in ``offsets``' order), keys written
    ``system.stream.partition`` (SystemStreamPartitionKeySerializer: no key bucket), in that map's iteration
    order: by the SSP's own hashCode (SSP.java_hash), not by the hash of the key string."""
    order = java_hashmap_order(list(offsets), hash_of=SSP.java_hash)
    return to_json_text({ssp.key(): offsets[ssp] for ssp in order})


def parse_ssp_key(key: str) -> SSP:
    """The SSP of an offset-file key, as SystemStreamPartitionKeySerializer wrote it: the system up to the
    first ``.``, the partition (``Integer.parseInt``) after the last, the stream in between.

    Samza's own key deserializer takes the second ``.``-separated part as the stream and the third as the
    partition; that is the same for every stream name without a dot, and misreads (or fails on) the others,
    which Samza writes all the same. Raises OffsetFileError.
    """
    system, dot, rest = key.partition(".")
    stream, dot2, partition = rest.rpartition(".")
    number = java_parse_long(partition, minimum=JAVA_INT_MIN, maximum=JAVA_INT_MAX) if dot and dot2 else None
    if number is None:
        raise OffsetFileError(f"invalid offsets key {key!r}: expected system.stream.partition")
    return SSP(system, stream, number)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_offsets(text: str) -> dict[SSP, str | None]:
    """The map of an OFFSET-v2 / SIDE-INPUT-OFFSETS file, read as Samza's ObjectMapper reads a
    ``Map<SystemStreamPartition, String>``: keys by :func:`parse_ssp_key`; an offset may be null; a
    number or boolean is taken as its text (Jackson's coercion to String). Raises OffsetFileError for
    anything else."""
    try:
        obj = json.loads(text, parse_int=str, parse_float=str, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise OffsetFileError(f"offsets are not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise OffsetFileError("offsets are not a JSON object")
    out: dict[SSP, str | None] = {}
    for key, value in obj.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif value is not None and not isinstance(value, str):
            raise OffsetFileError(f"offset of {key!r} is not a string: {value!r}")
        out[parse_ssp_key(key)] = value
    return out


def write_offset_file(path: Path, data: str) -> None:
    """Write ``data`` as Samza does: ``<path>.tmp``, fsynced, renamed over ``path``. Raises OSError."""
    from statectl.fsutil import SYNC_FILE, write_atomic

    write_atomic(path, encode(data), sync=SYNC_FILE)


def read_offset_file(path: Path) -> str:
    """The data of the offset file at ``path``. Raises OSError (FileNotFoundError) or OffsetFileError."""
    return decode(Path(path).read_bytes())


def read_offset(path: Path) -> str:
    """The bare offset in a legacy ``OFFSET`` file (the first SSP's offset, written as it is).
    Raises OSError or OffsetFileError."""
    return read_offset_file(path)


def write_offset(path: Path, offset: str) -> None:
    """Write a legacy ``OFFSET`` file holding ``offset``. Raises OSError or OffsetFileError."""
    write_offset_file(path, offset)


def read_offsets(path: Path) -> dict[SSP, str | None]:
    """The SSP -> offset map of an ``OFFSET-v2`` or ``SIDE-INPUT-OFFSETS`` file (:func:`parse_offsets`).
    Raises OSError or OffsetFileError."""
    return parse_offsets(read_offset_file(path))


def write_offsets(path: Path, offsets: Mapping[SSP, str | None]) -> None:
    """Write an ``OFFSET-v2`` or ``SIDE-INPUT-OFFSETS`` file (:func:`offsets_json`). Raises OSError or
    OffsetFileError."""
    write_offset_file(path, offsets_json(offsets))


def write_side_input_offsets(store_dir: Path, offsets: Mapping[SSP, str]) -> None:
    """Write a side-input store's offsets as StorageManagerUtil.writeOffsetFile(storeDir, offsets, true) does:
    ``OFFSET-v2`` first, then ``SIDE-INPUT-OFFSETS``, the same JSON in both (each through its ``.tmp`` and
    renamed). Samza reads ``OFFSET-v2`` first and judges staleness by its mtime, so the two must never
    disagree. A None offset is refused (ValueError): Samza's maps hold only SSPs with a processed message
    (TaskSideInputHandler.lastProcessedOffsets), so a caller leaves such SSPs out. Raises OSError or
    OffsetFileError; when writing the second file fails, the first is already in place (as in Samza)."""
    if any(v is None for v in offsets.values()):
        raise ValueError("side-input offsets hold no nulls: leave SSPs without a record out")
    data = offsets_json(offsets)
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        write_offset_file(Path(store_dir) / name, data)


def read_checkpoint_v2(path: Path) -> CheckpointV2:
    """The checkpoint in a ``CHECKPOINT-V2`` file (CheckpointV2Serde over the data's UTF-8).
    Raises OSError, OffsetFileError, or CheckpointFormatError for data that is not a v2 checkpoint."""
    return decode_v2(java_utf8(read_offset_file(path)))


def write_checkpoint_v2(path: Path, checkpoint: CheckpointV2) -> None:
    """Write a ``CHECKPOINT-V2`` file as StorageManagerUtil.writeCheckpointV2File does: the serde's
    bytes as a string. Raises OSError, OffsetFileError, or CheckpointFormatError (an invalid id)."""
    write_offset_file(path, encode_v2(checkpoint).decode("utf-8"))


__all__ = ["CHECKPOINT_V2", "MAGIC", "OFFSET", "OFFSET_V2", "SIDE_INPUT_OFFSETS", "CheckpointFormatError",
           "OffsetFileError", "decode", "encode", "offsets_json", "parse_offsets", "parse_ssp_key",
           "read_checkpoint_v2", "read_offset", "read_offset_file", "read_offsets", "write_checkpoint_v2",
           "write_offset", "write_offset_file", "write_offsets", "write_side_input_offsets"]
