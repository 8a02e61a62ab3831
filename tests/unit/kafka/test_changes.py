"""kafka.changes: a fetch's records decoded into Change tuples are exactly what kafka-python's own decoding
returns (offset, timestamp, key, value), with the same positions and the same refusals, over record batches
kafka-python's builders make (v2 plain and compressed, headers, nulls, compaction gaps, log-append time,
control batches, v1); the follower's consumer decodes so against Tansu in tests/integration/test_kafka_follow.py."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.structs import TopicPartition

from statectl.kafka.changes import Change, _records_class

TP = TopicPartition("changelog", 0)
ATTRIBUTES, CRC, LAST_OFFSET_DELTA = 21, 17, 23  # byte offsets in a v2 batch header
GZIP = 1


def v2(records: list[tuple[int, int, bytes | None, bytes | None, list]], *, base: int = 0,
       compression: int = 0) -> bytes:
    """A v2 batch of (offset delta, timestamp, key, value, headers) at base offset ``base``."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for delta, ts, key, value, headers in records:
        b.append(delta, timestamp=ts, key=key, value=value, headers=headers)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base)
    return bytes(data)


def with_attributes(batch: bytes, bits: int, last_offset_delta: int | None = None) -> bytes:
    """``batch`` with attribute ``bits`` set (and another last offset delta: records compacted away at its
    end), its CRC made again."""
    data = bytearray(batch)
    attrs = struct.unpack_from(">h", data, ATTRIBUTES)[0]
    struct.pack_into(">h", data, ATTRIBUTES, attrs | bits)
    if last_offset_delta is not None:
        struct.pack_into(">i", data, LAST_OFFSET_DELTA, last_offset_delta)
    struct.pack_into(">I", data, CRC, crc32c(bytes(data[ATTRIBUTES:])))
    return bytes(data)


def take(cls: type, data: bytes, fetch_offset: int = 0, check_crcs: bool = True) -> tuple[list, int]:
    part = cls(fetch_offset, TP, MemoryRecords(data), check_crcs=check_crcs)
    got = part.take()
    return got, part.next_fetch_offset


def both(data: bytes, fetch_offset: int = 0) -> list[Change]:
    """The records as Change tuples, after checking them and the next fetch offset against kafka-python's."""
    theirs, their_next = take(Fetcher.PartitionRecords, data, fetch_offset)
    ours, our_next = take(_records_class(), data, fetch_offset)
    assert all(type(c) is Change for c in ours)
    assert ours == [(r.offset, r.timestamp, r.key, r.value) for r in theirs]
    assert our_next == their_next
    return ours


T0 = 1_795_768_600_000


def test_plain_batches_nulls_headers_and_long_fields_decode_as_kafka_python_does():
    rows = [(i, T0 + i * 37, b"k%d" % i, b"v" * (i * 9)) for i in range(300)]  # values past 63 and 8 191 bytes
    rows += [(300, T0 - 5, None, b"no key"), (301, T0 + 10 ** 7, b"tombstone", None), (302, T0, b"", b"")]
    batch = v2([(o, ts, k, v, []) for o, ts, k, v in rows], base=1000)
    headers = v2([(0, T0, b"h", b"x", [("a", b"1"), ("", None), ("\u00e9", b"")]), (1, T0, b"h2", None, [])],
                 base=1303)
    got = both(batch + headers)
    assert [c.offset for c in got] == list(range(1000, 1305))
    assert got[301] == Change(1301, T0 + 10 ** 7, b"tombstone", None)
    assert got[303] == Change(1303, T0, b"h", b"x")


def test_compressed_gaps_and_a_fetch_offset_inside_a_batch():
    compacted = [(0, T0, b"a", b"1", []), (4, T0 + 1, b"b", b"2", []), (9000, T0 + 2, b"c", None, [])]
    data = v2(compacted, base=50, compression=GZIP) + v2([(0, T0, b"d", b"4", [])], base=9051)
    assert [c.offset for c in both(data)] == [50, 54, 9050, 9051]
    assert [c.offset for c in both(data, fetch_offset=54)] == [54, 9050, 9051]
    # The last records of a batch compacted away: the next fetch starts after the batch's last offset.
    ended = with_attributes(v2([(0, T0, b"a", b"1", []), (4, T0, b"b", b"2", [])], base=60), 0, last_offset_delta=9)
    assert [c.offset for c in both(ended)] == [60, 64]
    assert take(_records_class(), ended)[1] == 70


def test_log_append_time_gives_every_record_the_batch_time():
    batch = with_attributes(v2([(0, T0, b"a", b"1", []), (1, T0 + 500, b"b", b"2", [])]), 0x08)
    assert {c.timestamp for c in both(batch)} == {T0 + 500}


def test_control_batches_are_skipped_and_the_next_fetch_goes_past_them():
    control = with_attributes(v2([(0, T0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])], base=7), 0x20)
    data = v2([(i, T0, b"k", b"v", []) for i in range(7)]) + control
    assert [c.offset for c in both(data)] == list(range(7))
    assert take(_records_class(), data)[1] == 8


def test_v1_message_sets_decode_through_kafka_python():
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(5):
        b.append(i, timestamp=T0 + i, key=b"k%d" % i, value=None if i == 3 else b"v")
    assert both(bytes(b.build()))[3] == Change(3, T0 + 3, b"k3", None)


def test_a_bad_crc_or_record_length_is_refused_as_kafka_python_refuses_it():
    batch = bytearray(v2([(i, T0, b"k", b"value", []) for i in range(3)]))
    batch[-3] ^= 0xff  # a byte of the last value: the CRC no longer matches
    for cls in (Fetcher.PartitionRecords, _records_class()):
        with pytest.raises(CorruptRecordError, match="crc"):
            take(cls, bytes(batch))
    # The same bytes with a CRC that matches them, but a record length one short: the structure is refused.
    short = bytearray(v2([(0, T0, b"k", b"value", [])]))
    short[61] -= 2  # the first record's length varint (zigzag: 2 per unit)
    short = bytearray(with_attributes(bytes(short), 0))
    for cls in (Fetcher.PartitionRecords, _records_class()):
        with pytest.raises(CorruptRecordError):
            take(cls, bytes(short))
    assert take(_records_class(), bytes(batch), check_crcs=False)[0][-1].key == b"k"  # unchecked when asked
