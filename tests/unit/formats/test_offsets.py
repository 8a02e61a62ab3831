"""Samza's checksum-framed offset files (FORMATS.md), byte for byte; test_java_crosscheck.py compares them with
the JDK's own ObjectOutputStream."""

from __future__ import annotations

import struct
import zlib

import pytest

from statectl.formats.checkpoint import BLOB_STORE_FACTORY, SSP, CheckpointFormatError, CheckpointV2, encode_v2
from statectl.formats.offsets import (CHECKPOINT_V2, MAGIC, OFFSET, OFFSET_V2, SIDE_INPUT_OFFSETS, OffsetFileError,
                                      decode, encode, offsets_json, parse_offsets, parse_ssp_key, read_checkpoint_v2,
                                      read_offset, read_offset_file, read_offsets, write_checkpoint_v2, write_offset,
                                      write_offset_file, write_offsets)


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


# The iteration order of Samza's HashMap<SystemStreamPartition, String>, printed by a Java program compiled
# against Samza's own SystemStream, SystemStreamPartition and Partition classes (filled in partition order).
JAVA_ORDERS = {
    2: [1, 0],
    8: [7, 6, 3, 2, 5, 4, 1, 0],
    16: [3, 2, 5, 4, 1, 0, 11, 10, 13, 12, 7, 6, 9, 8, 15, 14],
}
JAVA_TWO_STREAMS = ["lookup.0", "geo-dims.3", "lookup.1", "geo-dims.4", "geo-dims.1", "geo-dims.2", "lookup.4",
                    "lookup.2", "lookup.3", "geo-dims.0"]


def test_offsets_json_is_samza_ssp_keys_in_hashmap_order():
    one = offsets_json({SSP("kafka", "page-views-counts-changelog", 3): "4267"})
    assert one == '{"kafka.page-views-counts-changelog.3":"4267"}'
    two = offsets_json({SSP("kafka", "pv-counts-changelog", i): str(100 + i) for i in range(2)})
    assert two == '{"kafka.pv-counts-changelog.1":"101","kafka.pv-counts-changelog.0":"100"}'  # byte-exact


@pytest.mark.parametrize("n", sorted(JAVA_ORDERS))
def test_several_entries_come_in_the_order_of_samzas_ssp_hashmap(n: int):
    import json

    text = offsets_json({SSP("kafka", "pv-counts-changelog", i): str(100 + i) for i in range(n)})
    assert list(json.loads(text).items()) == [(f"kafka.pv-counts-changelog.{p}", str(100 + p)) for p in JAVA_ORDERS[n]]
    assert text == "{" + ",".join(f'"kafka.pv-counts-changelog.{p}":"{100 + p}"' for p in JAVA_ORDERS[n]) + "}"


def test_two_streams_come_in_the_order_of_samzas_ssp_hashmap():
    import json

    offsets = {SSP("kafka", "lookup", i): str(100 + i) for i in range(5)}
    offsets.update({SSP("kafka", "geo-dims", i): str(200 + i) for i in range(5)})
    assert [k[len("kafka."):] for k in json.loads(offsets_json(offsets))] == JAVA_TWO_STREAMS


def test_the_ssp_hash_is_samzas_and_ignores_the_key_bucket():
    # SystemStreamPartition.computeHashCode runs before the constructor sets keyBucket: it never counts
    assert SSP("kafka", "t", 3).java_hash() == SSP("kafka", "t", 3, key_bucket=7).java_hash()
    from statectl.formats.jackson import java_string_hash

    stream = java_string_hash("t")
    assert stream == 116  # "t".hashCode()
    h = (31 * (31 * (31 * (31 + stream) + java_string_hash("kafka")) + 3)) & 0xFFFFFFFF
    assert SSP("kafka", "t", 3).java_hash() == h


def test_write_is_atomic_through_a_tmp_file(tmp_path):
    path = tmp_path / "OFFSET-v2"
    write_offset_file(path, '{"kafka.t.0":"9"}')
    assert read_offset_file(path) == '{"kafka.t.0":"9"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OFFSET-v2"]


# ---- typed readers and writers, one per file kind ----------------------------------------------------


def test_legacy_offset_file_holds_a_bare_offset(tmp_path):
    write_offset(tmp_path / OFFSET, "4267")
    assert (tmp_path / OFFSET).read_bytes().hex() == "aced0005770e000000004843b56e000434323637"
    assert read_offset(tmp_path / OFFSET) == "4267"


@pytest.mark.parametrize("name", [OFFSET_V2, SIDE_INPUT_OFFSETS])
def test_offset_maps_round_trip(tmp_path, name):
    offsets = {SSP("kafka", "page-views-changelog", 3): "4267", SSP("kafka", "a.b.c", 12): None,
               SSP("hdfs", "smile\U0001F600", 0): "x"}
    write_offsets(tmp_path / name, offsets)
    assert read_offsets(tmp_path / name) == offsets
    # writeValueAsString: the non-BMP character is written as it is (4 bytes in modified UTF-8's 2x3)
    assert "smile\U0001F600" in read_offset_file(tmp_path / name)


def test_checkpoint_v2_file(tmp_path):
    cp = CheckpointV2("1614147487244-33577", {"kafka.PageViews.0": "4267"}, {BLOB_STORE_FACTORY: {"s": "blob"}})
    write_checkpoint_v2(tmp_path / CHECKPOINT_V2, cp)
    assert read_offset_file(tmp_path / CHECKPOINT_V2) == encode_v2(cp).decode()
    assert read_checkpoint_v2(tmp_path / CHECKPOINT_V2) == cp
    write_offset_file(tmp_path / CHECKPOINT_V2, '{"input-offsets":{}}')
    with pytest.raises(CheckpointFormatError):
        read_checkpoint_v2(tmp_path / CHECKPOINT_V2)


def test_offset_maps_are_read_as_jackson_reads_map_of_ssp_to_string():
    assert parse_offsets('{"kafka.t.0":"5","kafka.t.1":null,"kafka.t.2":7,"kafka.t.3":true,"kafka.t.4":1.50}') == {
        SSP("kafka", "t", 0): "5", SSP("kafka", "t", 1): None, SSP("kafka", "t", 2): "7",
        SSP("kafka", "t", 3): "true", SSP("kafka", "t", 4): "1.50"}  # scalars coerced to their text
    assert parse_offsets("{}") == {}


@pytest.mark.parametrize("text, words", [
    ("", "not JSON"), ("[1]", "not a JSON object"), ('{"kafka.t.0":{"a":1}}', "not a string"),
    ('{"kafka.t.0":["1"]}', "not a string"), ('{"kafka.t.0":NaN}', "not JSON"), ('{"kafka.t":"1"}', "expected"),
    ('{"kafka.t.x":"1"}', "expected"), ('{"kafka.t.2147483648":"1"}', "expected"),
])
def test_bad_offset_maps(text, words):
    with pytest.raises(OffsetFileError) as exc:
        parse_offsets(text)
    assert words in str(exc.value)


@pytest.mark.parametrize("key, ssp", [
    ("kafka.t.0", SSP("kafka", "t", 0)),
    ("kafka.page.views.7", SSP("kafka", "page.views", 7)),  # Samza writes it; its own reader would misread it
    ("kafka.t.+3", SSP("kafka", "t", 3)),  # Integer.parseInt
    ("kafka.t.-1", SSP("kafka", "t", -1)),
    ("kafka.t.\u0663", SSP("kafka", "t", 3)),
    ("kafka..0", SSP("kafka", "", 0)),
])
def test_offset_keys(key, ssp):
    assert parse_ssp_key(key) == ssp
    assert parse_ssp_key(ssp.key()) == ssp


@pytest.mark.parametrize("key", ["kafka", "kafka.0", "kafka.t.", "kafka.t.1.5x", "kafka.t.1 "])
def test_bad_offset_keys(key):
    with pytest.raises(OffsetFileError):
        parse_ssp_key(key)


def test_lone_surrogates_are_checksummed_as_java_does():
    """String.getBytes turns an unpaired surrogate into '?': the CRC is over that, the string keeps it."""
    raw = encode("a\ud800b")
    assert raw[6:14] == struct.pack(">Q", zlib.crc32(b"a?b"))
    assert decode(raw) == "a\ud800b"
