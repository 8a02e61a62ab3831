"""Samza's drain formats, byte for byte: the bytes below are what Samza's own classes wrote (Jackson 2.14,
2.17, 2.18; docs/samza/drain.md)."""

from __future__ import annotations

import pytest

from statectl.formats.coordinator import (
    CoordinatorFormatError,
    decode_key,
    decode_set_config,
    encode_key,
    encode_set_config,
    new_run_id,
)
from statectl.formats.drain import (
    DRAIN,
    WATERMARK_INFINITY,
    DrainFormatError,
    DrainNotification,
    aggregate_partition,
    decode_control,
    decode_notification,
    drain_message,
    encode_control,
    encode_notification,
    end_of_stream_message,
    message_type,
    watermark_message,
)

UUID = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
RUN = "1700000000000-1a2b3c4d"


def test_drain_notification_key_and_value_are_samzas_bytes():
    n = DrainNotification(UUID, RUN)
    assert encode_key("samza-drain-v1", n.uuid) == b'[1,"samza-drain-v1","3f2504e0-4f89-41d3-9a0c-0305e82c3301"]'
    assert encode_notification(n) == (
        b'{"drainMode":"DEFAULT","runId":"1700000000000-1a2b3c4d","uuid":"3f2504e0-4f89-41d3-9a0c-0305e82c3301"}')
    assert decode_notification(encode_notification(n)) == n


def test_a_new_notification_has_a_random_uuid_and_needs_a_run_id():
    a, b = DrainNotification.create(RUN), DrainNotification.create(RUN)
    assert a.uuid != b.uuid and a.run_id == RUN and a.drain_mode == "DEFAULT"
    with pytest.raises(DrainFormatError):
        DrainNotification.create("")


def test_decode_notification_reads_like_samza():
    # Extra fields ignored, the mode upper-cased (DrainMode.valueOf(toUpperCase)).
    n = decode_notification(b'{"uuid":"%s","runId":"r","drainMode":"default","extra":1}' % UUID.encode())
    assert n == DrainNotification(UUID, "r", "DEFAULT")


@pytest.mark.parametrize("value", [
    None, b"", b"not json", b"[]", b'{"runId":"r","drainMode":"DEFAULT"}',
    b'{"uuid":"not-a-uuid","runId":"r","drainMode":"DEFAULT"}',
    b'{"uuid":"%s","runId":7,"drainMode":"DEFAULT"}' % UUID.encode(),
    b'{"uuid":"%s","runId":null,"drainMode":"DEFAULT"}' % UUID.encode(),
    b'{"uuid":"%s","runId":"r","drainMode":"DEFAULT","x":NaN}' % UUID.encode(),
    b"null", b'"text"', b"   ", b"\xff\xfe\x00garbage", b'{"uuid":123,"runId":"r","drainMode":"DEFAULT"}',
    b'{"uuid":"%s","runId":"r","drainMode":"NOW"}' % UUID.encode(),
])
def test_malformed_notifications_are_format_errors(value):
    with pytest.raises(DrainFormatError):
        decode_notification(value)


def test_set_config_value_is_samzas_bytes():
    assert encode_key("set-config", "app.run.id") == b'[1,"set-config","app.run.id"]'
    value = encode_set_config(RUN, host="10.0.0.5", username="samza", timestamp_ms=1700000000123)
    assert value == (b'{"host":"10.0.0.5","source":"job-runner","values":{"value":"1700000000000-1a2b3c4d"},'
                     b'"username":"samza","timestamp":1700000000123}')
    assert decode_set_config(value) == RUN
    assert decode_set_config(None) is None


@pytest.mark.parametrize("key", [None, b"x", b"{}", b"[1]", b'[1,2,"k"]'])
def test_malformed_coordinator_keys(key):
    with pytest.raises(CoordinatorFormatError):
        decode_key(key)


def test_coordinator_key_version_is_not_checked():
    assert decode_key(b'[2,"set-config","job.name"]') == ("set-config", "job.name")


@pytest.mark.parametrize("value", [b"{", b"[]", b'{"values":{}}', b'{"values":{"value":3}}'])
def test_malformed_set_config_values(value):
    with pytest.raises(CoordinatorFormatError):
        decode_set_config(value)


def test_run_id_has_samzas_shape():
    run = new_run_id(1700000000000)
    millis, suffix = run.split("-")
    assert millis == "1700000000000" and len(suffix) == 8


@pytest.mark.parametrize("message, expected", [
    (drain_message("Partition 0", RUN), b'\x03{"taskName":"Partition 0","version":1,"runId":"1700000000000-1a2b3c4d"}'),
    (drain_message(None, RUN), b'\x03{"taskName":null,"version":1,"runId":"1700000000000-1a2b3c4d"}'),
    (end_of_stream_message("Partition 0"), b'\x02{"taskName":"Partition 0","version":1}'),
    (end_of_stream_message(None), b'\x02{"taskName":null,"version":1}'),
    (watermark_message("Partition 0", 1700000000000),
     b'\x01{"timestamp":1700000000000,"taskName":"Partition 0","version":1}'),
    (watermark_message(None, 1700000000000), b'\x01{"timestamp":1700000000000,"taskName":null,"version":1}'),
])
def test_control_messages_are_samzas_bytes(message, expected):
    assert encode_control(message) == expected
    assert decode_control(expected) == message


def test_control_messages_read_the_creators_dashed_aliases():
    m = decode_control(b'\x03{"task-name":"Partition 1","run-id":"r"}')
    assert (m.type, m.task_name, m.run_id) == (DRAIN, "Partition 1", "r")
    assert watermark_message(None, WATERMARK_INFINITY).timestamp == 2 ** 63 - 1


@pytest.mark.parametrize("data", [
    None, b"", b"\x07{}", b"\x00payload", b"\x03not json", b'\x03{"taskName":null,"version":1}',
    b'\x03{"taskName":null,"version":1,"runId":"r","extra":true}', b'\x01{"taskName":null}',
    b'\x02{"taskName":5}',
])
def test_malformed_control_messages_are_format_errors(data):
    with pytest.raises(DrainFormatError):
        decode_control(data)


def test_message_type_of_a_user_message():
    assert message_type(b"\x00{}") == 0


@pytest.mark.parametrize("topic, partitions, expected", [
    ("test-stream", 4, 1), ("test-stream", 8, 5), ("myjob-1-partition_by-p1", 4, 2), ("myjob-1-partition_by-p1", 8, 6),
    ("anything", 1, 0),
])
def test_aggregate_partition_is_samzas(topic, partitions, expected):
    # Java: abs(String.hashCode() % n) % n; the expected values were computed by Java.
    assert aggregate_partition(topic, partitions) == expected


@pytest.mark.parametrize("task, raw", [
    ("Partition \U0001F600", "Partition \U0001F600".encode("utf-8")),  # non-BMP: its 4 UTF-8 bytes
    ("Partition \ud83d\ude00", "Partition \U0001F600".encode("utf-8")),  # the same char as a surrogate pair
    ("Partition \ud83d", b"Partition ?"),  # a lone surrogate: String.getBytes(UTF_8) writes '?'
    ("Partition \ude00x", b"Partition ?x"),
])
def test_control_messages_are_written_by_jsonserdev2(task: str, raw: bytes):
    """IntermediateMessageSerde's JsonSerdeV2: writeValueAsString then getBytes("UTF-8"), never Jackson's
    \\uD83D\\uDE00 escapes."""
    from statectl.formats.drain import drain_message, encode_control, end_of_stream_message

    assert encode_control(end_of_stream_message(task)) == b'\x02{"taskName":"' + raw + b'","version":1}'
    data = encode_control(drain_message(task, "run-1"))
    assert data == b'\x03{"taskName":"' + raw + b'","version":1,"runId":"run-1"}'
    assert b"\\u" not in data


@pytest.mark.parametrize("key, raw", [
    ("task \U0001F600", "task \U0001F600".encode("utf-8")),
    ("task \ud83d", b"task ?"),
])
def test_coordinator_keys_from_odd_input_are_written_as_jsonserde_does(key: str, raw: bytes):
    from statectl.formats.coordinator import encode_key

    assert encode_key("set-changelog", key) == b'[1,"set-changelog","' + raw + b'"]'


# UUID.fromString(s).toString() on OpenJDK 17 (a tiny Java program read these lines; None: it threw).
JAVA_UUIDS = [
    ('1-2-3-4-5', '00000001-0002-0003-0004-000000000005'),
    ('0B7E5F2C-1234-4ABC-8DEF-0123456789AB', '0b7e5f2c-1234-4abc-8def-0123456789ab'),
    ('+1-2-3-4-5', '00000001-0002-0003-0004-000000000005'),
    ('1-+2-3-4-5', '00000001-0002-0003-0004-000000000005'),
    ('123456789-2-3-4-5', '23456789-0002-0003-0004-000000000005'),
    ('1-12345-3-4-5', '00000001-2345-0003-0004-000000000005'),
    ('1-2-3-4-1234567890123', '00000001-0002-0003-0004-234567890123'),
    ('1-2-3-4', None),
    ('1-2-3-4-5-6', None),
    ('-1-2-3-4', None),
    ('1--3-4-5', None),
    ('１-2-3-4-5', '00000001-0002-0003-0004-000000000005'),
    ('Ａ-2-3-4-5', '0000000a-0002-0003-0004-000000000005'),
    ('ｆ-2-3-4-5', '0000000f-0002-0003-0004-000000000005'),
    ('ｇ-2-3-4-5', None),
    (' 1-2-3-4-5', None),
    ('1_0-2-3-4-5', None),
    ('00000000000000000000000000000-1-1', None),
    ('0000000000000000000000000000000000000', None),
    ('ffffffffffffffffffff-1-1-1-1', None),
    ('0000000000000000ff-1-1-1-1', '000000ff-0001-0001-0001-000000000001'),
    ('1-2-3-4-ffffffffffffffff', None),
    ('1-2-3-4-7fffffffffffffff', '00000001-0002-0003-0004-ffffffffffff'),
    ('1-2-3-4-', None),
    ('g-2-3-4-5', None),
    ('٣-2-3-4-5', '00000003-0002-0003-0004-000000000005'),
    ('+-2-3-4-5', None),
    ('++1-2-3-4-5', None),
    ('3f2504e0-4f89-41d3-9a0c-0305e82c3301', '3f2504e0-4f89-41d3-9a0c-0305e82c3301'),
    ('3F2504E0-4F89-41D3-9A0C-0305E82C3301', '3f2504e0-4f89-41d3-9a0c-0305e82c3301'),
    ('3f2504e0-4f89-41d3-9a0c-0305e82c330', '3f2504e0-4f89-41d3-9a0c-00305e82c330'),
    ('3f2504e0-4f89-41d3-9a0c-0305e82c33011', None),
    ('1-2-3-4-5😀', None),
]


@pytest.mark.parametrize("text,expected", JAVA_UUIDS)
def test_uuids_are_canonicalised_as_java_does(text, expected):
    from statectl.formats.drain import java_uuid

    assert java_uuid(text) == expected


def _value(uuid: str, run: bytes = b"r", mode: bytes = b"DEFAULT") -> bytes:
    return b'{"uuid":"' + uuid.encode() + b'","runId":"' + run + b'","drainMode":"' + mode + b'"}'


# What DrainNotificationObjectMapper's deserializer (Jackson 2.17 readTree + textValue, run on these
# bytes) accepted beyond the plain form: trailing content (FAIL_ON_TRAILING_TOKENS is off), a UTF-8 BOM,
# an empty runId (only null is checked), a 10 MB runId, a mode in any case, an upper-case or short-group
# uuid (canonicalised).
@pytest.mark.parametrize("value,uuid,run_len", [
    (_value(UUID) + b" trailing garbage", UUID, 1),
    (_value(UUID) + b"{", UUID, 1),
    (b"\xef\xbb\xbf" + _value(UUID, mode=b"default"), UUID, 1),
    (_value(UUID, run=b""), UUID, 0),
    (_value(UUID.upper()), UUID, 1),
    (_value("1-2-3-4-5"), "00000001-0002-0003-0004-000000000005", 1),
    (_value(UUID, run=b"r" * (10 << 20)), UUID, 10 << 20),
])
def test_notifications_samza_reads(value, uuid, run_len):
    n = decode_notification(value)
    assert n.uuid == uuid and len(n.run_id) == run_len and n.drain_mode == "DEFAULT"
