"""Samza's checksum-framed offset files in a store dir (FORMATS.md "Local store directory").

Samza's FileUtil.writeWithChecksum writes them through a java.io.ObjectOutputStream: the stream magic
``AC ED 00 05``, then block-data records (``0x77 <u8 len>``, or ``0x7A <u32 BE len>`` for a full block of
1024 bytes) holding an 8-byte big-endian CRC32 of the data's UTF-8 bytes followed by the data as
``writeUTF`` pieces (u16 BE length + modified UTF-8) of at most 65535 chars each. The file goes to
``<file>.tmp`` first and is renamed into place. ``OFFSET`` holds a bare offset; ``OFFSET-v2`` and
``SIDE-INPUT-OFFSETS`` a JSON map ``system.stream.partition`` -> offset; ``CHECKPOINT-V2`` a checkpoint.

Without a valid ``OFFSET-v2``, Samza's restore manager treats a logged store as invalid and deletes it.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Mapping

from statectl.formats.checkpoint import SSP
from statectl.formats.jackson import java_hashmap_order, to_json

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
    """The bytes Samza writes for ``data``. Raises OffsetFileError for a piece Java could not write."""
    payload = bytearray(struct.pack(">Q", zlib.crc32(data.encode("utf-8"))))
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
    """The data of an offset file. Raises OffsetFileError for bad framing or a checksum mismatch."""
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
    try:
        utf8 = data.encode("utf-8")
    except UnicodeEncodeError:
        raise OffsetFileError("data holds a lone surrogate") from None
    if zlib.crc32(utf8) != crc:
        raise OffsetFileError(f"checksum mismatch (file says {crc}, data gives {zlib.crc32(utf8)})")
    return data


def offsets_json(offsets: Mapping[SSP, str]) -> str:
    """A map SSP -> offset as Samza's OFFSET-v2 / SIDE-INPUT-OFFSETS JSON (keys ``system.stream.partition``,
    in the iteration order of the HashMap Samza builds)."""
    by_key = {ssp.key(): offset for ssp, offset in offsets.items()}
    return to_json({k: by_key[k] for k in java_hashmap_order(by_key)}).decode("utf-8")


def write_offset_file(path: Path, data: str) -> None:
    """Write ``data`` as Samza does: ``<path>.tmp``, fsynced, renamed over ``path``. Raises OSError."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(encode(data))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_offset_file(path: Path) -> str:
    """The data of the offset file at ``path``. Raises OSError (FileNotFoundError) or OffsetFileError."""
    return decode(Path(path).read_bytes())
