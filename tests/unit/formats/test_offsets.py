"""Samza's checksum-framed offset files (FORMATS.md), byte for byte."""

from __future__ import annotations

import struct
import zlib

import pytest

from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import (MAGIC, OffsetFileError, decode, encode, offsets_json, read_offset_file,
                                      write_offset_file)


def test_offset_example_from_formats_md():
    assert encode("4267").hex() == "aced0005770e000000004843b56e000434323637"
    assert decode(bytes.fromhex("aced0005770e000000004843b56e000434323637")) == "4267"


def test_full_blocks_use_the_long_header_and_pieces_split_every_65535_chars():
    data = "{" + "x" * 70_000 + "}"
    raw = encode(data)
    assert raw[4] == 0x7A and raw[5:9] == struct.pack(">I", 1024)
    payload, i = b"", 4
    while i < len(raw):
        n = raw[i + 1] if raw[i] == 0x77 else struct.unpack(">I", raw[i + 1:i + 5])[0]
        i += 2 if raw[i] == 0x77 else 5
        assert n <= 1024
        payload += raw[i:i + n]
        i += n
    assert payload[:8] == struct.pack(">Q", zlib.crc32(data.encode()))
    assert struct.unpack(">H", payload[8:10])[0] == 65535
    assert struct.unpack(">H", payload[10 + 65535:12 + 65535])[0] == len(data) - 65535
    assert decode(raw) == data


@pytest.mark.parametrize("data", ["", "0", "a\x00b", "caf\u00e9 \u20ac", "smile \U0001F600", "é" * 30000])
def test_round_trip_with_modified_utf8(data: str):
    raw = encode(data)
    assert decode(raw) == data
    if "\x00" in data:
        assert b"\xc0\x80" in raw  # Java writes NUL as two bytes


def test_java_writeutf_limit_is_refused():
    with pytest.raises(OffsetFileError):
        encode("\u20ac" * 30000)  # 90 000 bytes of modified UTF-8 in one 65535-char piece


@pytest.mark.parametrize("raw, words", [
    (b"", "magic"),
    (b"\xac\xed\x00\x06" + b"\x77\x00", "magic"),
    (MAGIC + b"\x73\x00", "unexpected byte"),
    (MAGIC + b"\x77\x0e" + b"\x00" * 4, "truncated"),
    (MAGIC + b"\x77\x02\x00\x00", "too short"),
    (bytes.fromhex("aced0005770e000000004843b56f000434323637"), "checksum mismatch"),
    (bytes.fromhex("aced0005770e000000004843b56e000534323637"), "truncated string"),
    (MAGIC + b"\x77\x0b" + struct.pack(">Q", 0) + b"\x00\x01\xff", "modified UTF-8"),
])
def test_damaged_files_are_refused(raw: bytes, words: str):
    with pytest.raises(OffsetFileError) as e:
        decode(raw)
    assert words in str(e.value)


def test_offsets_json_is_samza_ssp_keys_in_hashmap_order():
    one = offsets_json({SSP("kafka", "page-views-counts-changelog", 3): "4267"})
    assert one == '{"kafka.page-views-counts-changelog.3":"4267"}'
    many = {SSP("kafka", f"t{i}", i): str(i) for i in range(20)}
    from statectl.formats.jackson import java_hashmap_order

    import json
    assert list(json.loads(offsets_json(many))) == java_hashmap_order([s.key() for s in many])


def test_write_is_atomic_through_a_tmp_file(tmp_path):
    path = tmp_path / "OFFSET-v2"
    write_offset_file(path, '{"kafka.t.0":"9"}')
    assert read_offset_file(path) == '{"kafka.t.0":"9"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OFFSET-v2"]
