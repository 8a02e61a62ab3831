"""Decoding only what a replica applies: a consumer whose fetched records are :class:`Change` tuples (offset,
timestamp, key, value), decoded straight from each record batch, instead of kafka-python's ConsumerRecord.

kafka-python decodes every record through several layers of objects (a DefaultRecord, its headers and
sizes, a 13-field ConsumerRecord, a deserializer call per key and value): for a changelog of small records
that is most of a replay's time. :func:`decode_changes` installs a decoder of its own on one consumer's
fetcher that reads the v2 record format (Kafka's DefaultRecordBatch) into Change tuples, checking what
kafka-python checks: each batch's CRC (``check_crcs``), every record's length, no bytes left over; control
batches skipped; a batch that does not add up is refused whole (kafka-python returns its records before
the fault first). Everything else stays kafka-python's: the fetches, positions and errors, the records of
message formats v0/v1 (read through its record objects), and consumers this decoder does not serve
(READ_COMMITTED, deserializers). A kafka-python whose fetcher or record batch does not have the shape read
here is left as it is (its own decoding).
"""

from __future__ import annotations

import collections
from typing import Any, Iterator

# The fields of ConsumerRecord a replica reads, in a namedtuple of its own: made as a tuple, read by name.
Change = collections.namedtuple("Change", "offset timestamp key value")

_make = tuple.__new__
_LOG_APPEND_TIME = 0x08  # the batch attribute: every record's timestamp is the batch's max timestamp


def decode_changes(consumer: Any) -> bool:
    """Make ``consumer`` (a KafkaConsumer without deserializers) return Change tuples from its polls; True
    when it does, False when this kafka-python's internals are not those read here (it then decodes as
    it always did)."""
    fetcher = getattr(consumer, "_fetcher", None)
    records_class = _records_class()
    if fetcher is None or records_class is None or not isinstance(getattr(fetcher, "config", None), dict):
        return False
    if fetcher.config.get("key_deserializer") or fetcher.config.get("value_deserializer"):
        return False
    fetcher.PartitionRecords = records_class
    return True


_CLASS: list[Any] = []


def _records_class() -> Any:
    """The fetcher's PartitionRecords with the decoder below (made once), or None when kafka-python's
    internals differ from what it reads."""
    if _CLASS:
        return _CLASS[0]
    try:
        from kafka.consumer.fetcher import Fetcher, IsolationLevel
        from kafka.record.default_records import DefaultRecordBatch
    except ImportError:
        return None
    base = getattr(Fetcher, "PartitionRecords", None)
    needed = ("_buffer", "_pos", "_header_data")
    if base is None or not all(n in getattr(DefaultRecordBatch, "__slots__", ()) for n in needed) or not hasattr(
            base, "_unpack_records"):
        return None

    class ChangeRecords(base):  # type: ignore[misc, valid-type]
        def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any,
                            value_deserializer: Any) -> Iterator[Any]:
            if (key_deserializer is not None or value_deserializer is not None
                    or self.isolation_level != IsolationLevel.READ_UNCOMMITTED):
                yield from super()._unpack_records(tp, records, key_deserializer, value_deserializer)
                return
            yield from _unpack(self, records)

    _CLASS.append(ChangeRecords)
    return ChangeRecords


def _unpack(part: Any, records: Any) -> Iterator[Change]:
    """PartitionRecords._unpack_records for READ_UNCOMMITTED without deserializers, yielding Change tuples:
    the same checks, positions and errors."""
    import kafka.errors as errors

    batch = records.next_batch()
    last = None
    while batch is not None:
        last = batch
        if part.check_crcs and not batch.validate_crc():
            raise errors.CorruptRecordError(f"Record batch for partition {part.topic_partition} at offset "
                                            f"{batch.base_offset} failed crc check")
        if batch.magic != 2:
            yield from _legacy(part, batch)
        else:
            part.leader_epoch = batch.leader_epoch
            if batch.is_control_batch:
                part.next_fetch_offset = batch.next_offset
            else:
                changes = decode_batch(batch)
                part.records_read += len(changes)
                part.bytes_read += batch.size_in_bytes
                for change in changes:
                    part.next_fetch_offset = change[0] + 1
                    yield change
        batch = records.next_batch()
    # Message format v2 keeps a batch's last offset even when compaction removed its last record: the next
    # fetch starts after it (as kafka-python's own decoding does).
    if last is not None and last.magic == 2:
        part.next_fetch_offset = last.next_offset
    part.drain()


def _legacy(part: Any, batch: Any) -> Iterator[Change]:
    """The records of a message-format v0/v1 batch, checked as kafka-python checks them."""
    import kafka.errors as errors

    for record in batch:
        if part.check_crcs and not record.validate_crc():
            raise errors.CorruptRecordError(f"Record for partition {part.topic_partition} at offset "
                                            f"{record.offset} failed crc check")
        part.records_read += 1
        part.bytes_read += record.size_in_bytes
        part.next_fetch_offset = record.offset + 1
        yield _make(Change, (record.offset, record.timestamp, record.key, record.value))


def decode_batch(batch: Any) -> list[Change]:
    """The records of a v2 record batch (kafka.record.default_records.DefaultRecordBatch, decompressed here)
    as Change tuples; CorruptRecordError (as kafka-python raises) when a record's fields do not add up to its
    length or bytes are left over. Headers are read and dropped."""
    import kafka.errors as errors

    iter(batch)  # decompresses the records, if they are
    try:
        out, pos = _decode(bytes(batch._buffer), batch._pos, batch._header_data)
    except (ValueError, IndexError) as e:
        raise errors.CorruptRecordError(f"Found invalid record structure: {e!r}") from None
    if pos != len(batch._buffer):
        raise errors.CorruptRecordError(f"{len(batch._buffer) - pos} unconsumed bytes after all records consumed")
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, the position after it)."""
    b = buf[pos]
    if b & 0x80 and not buf[pos + 1] & 0x80:  # two bytes: a delta within a batch of up to 8 191 records or ms
        b = (b & 0x7f) | (buf[pos + 1] << 7)
        return (b >> 1) ^ -(b & 1), pos + 2
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7f) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 64:
            raise ValueError("Out of int64 range")


def _decode(buf: bytes, pos: int, header: tuple[Any, ...]) -> tuple[list[Change], int]:
    """The records of a v2 batch from ``pos`` in ``buf`` (its header fields ``header``, as DefaultRecordBatch's
    HEADER_STRUCT unpacks them); (the changes, the position after the last). A varint of one byte, the usual
    case of every field but the deltas, is read inline; the fields are kafka-python's _read_msg's."""
    base_offset, attributes, first_ts, max_ts, count = header[0], header[5], header[7], header[8], header[12]
    log_append = bool(attributes & _LOG_APPEND_TIME)
    varint = _varint
    out: list[Change] = []
    append = out.append
    for _ in range(count):
        b = buf[pos]
        length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint(buf, pos)
        start = pos
        pos = pos + 1 if buf[pos] < 0x80 else varint(buf, pos)[1]  # the record's attributes: unused
        b = buf[pos]
        ts_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint(buf, pos)
        b = buf[pos]
        offset_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint(buf, pos)
        b = buf[pos]
        key_len, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint(buf, pos)
        key = buf[pos:pos + key_len] if key_len >= 0 else None
        pos += max(key_len, 0)
        b = buf[pos]
        value_len, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint(buf, pos)
        value = buf[pos:pos + value_len] if value_len >= 0 else None
        pos += max(value_len, 0)
        pos = pos + 1 if buf[pos] == 0 else _skip_headers(buf, pos)
        if pos - start != length:
            raise ValueError(f"Invalid record size: expected to read {length} bytes in record payload, but "
                             f"instead read {pos - start}")
        append(_make(Change, (base_offset + offset_delta, max_ts if log_append else first_ts + ts_delta, key, value)))
    return out, pos


def _skip_headers(buf: bytes, pos: int) -> int:
    """The position after a record's headers (their count at ``pos``), each read as kafka-python reads it."""
    count, pos = _varint(buf, pos)
    if count < 0:
        raise ValueError(f"Found invalid number of record headers {count}")
    for _ in range(count):
        key_len, pos = _varint(buf, pos)
        if key_len < 0:
            raise ValueError(f"Invalid negative header key size {key_len}")
        buf[pos:pos + key_len].decode("utf-8")
        pos += key_len
        value_len, pos = _varint(buf, pos)
        if value_len > 0:
            pos += value_len
    return pos
