"""Samza's set-changelog messages (task -> changelog partition), byte for byte.

The expected values are what CoordinatorStreamValueSerde.toBytes writes for SetChangelogMapping
(``new SetChangelogMapping("SamzaContainer", "", Integer.valueOf(value))``, then ``getMessageMap()``: the
8-slot HashMap copy of host, source, values, username, timestamp): checked with a Java harness that builds the
message map as CoordinatorStreamMessage and SetChangelogMapping do (writer 10.0.0.5, user.name=samza,
timestamp 1700000000123) and writes it with Jackson 2.17.2's ObjectMapper, as JsonSerde does.
"""

from __future__ import annotations

import pytest

from statectl.formats.coordinator import (
    SET_CHANGELOG,
    CoordinatorFormatError,
    decode_changelog_partition,
    decode_key,
    encode_changelog_partition,
    encode_key,
)

WRITER = {"writer_host": "10.0.0.5", "username": "samza", "timestamp_ms": 1700000000123}


def test_namespace_is_samzas():
    assert SET_CHANGELOG == "set-changelog"  # SetChangelogMapping.TYPE


@pytest.mark.parametrize("task, expected", [
    ("Partition 0", b'[1,"set-changelog","Partition 0"]'),
    ("Partition 10", b'[1,"set-changelog","Partition 10"]'),
    ("Standby-Partition 10-0", b'[1,"set-changelog","Standby-Partition 10-0"]'),
])
def test_keys_are_samzas_bytes(task, expected):
    assert encode_key(SET_CHANGELOG, task) == expected
    assert decode_key(expected) == (SET_CHANGELOG, task)


@pytest.mark.parametrize("partition, expected", [
    (0, b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"Partition":"0"},"username":"samza",'
        b'"timestamp":1700000000123}'),
    (2, b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"Partition":"2"},"username":"samza",'
        b'"timestamp":1700000000123}'),
    (11, b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"Partition":"11"},"username":"samza",'
         b'"timestamp":1700000000123}'),
    (2147483647, b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"Partition":"2147483647"},'
                 b'"username":"samza","timestamp":1700000000123}'),
])
def test_values_are_samzas_bytes(partition, expected):
    value = encode_changelog_partition(partition, **WRITER)
    assert value == expected
    assert len(value) == 116 + len(str(partition))
    assert decode_changelog_partition(value) == partition


@pytest.mark.parametrize("partition", [-1, 2 ** 31, True, 1.0, "2", None])
def test_an_encoded_partition_is_a_non_negative_java_int(partition):
    with pytest.raises(ValueError):
        encode_changelog_partition(partition, **WRITER)


@pytest.mark.parametrize("text, partition", [
    ("7", 7), ("+7", 7), ("007", 7), ("-0", 0),  # Integer.parseInt
    ("\u0661\u0662", 12),  # Character.digit takes any Unicode decimal digit, as parseInt does
    ("2147483647", 2147483647),
])
def test_decoding_reads_the_partition_as_integer_parse_int_does(text, partition):
    assert decode_changelog_partition(b'{"values":{"Partition":"%s"}}' % text.encode()) == partition


@pytest.mark.parametrize("value", [None, b'{"values":{"Partition":""}}', b'{"values":{"Partition":" \\t"}}'])
def test_a_tombstone_or_blank_partition_is_no_mapping(value):
    # readPartitionMapping skips a blank value (StringUtils.isNotBlank); a tombstone deletes.
    assert decode_changelog_partition(value) is None


@pytest.mark.parametrize("value", [
    b"", b"{", b"[]", b"{}", b'{"values":{}}', b'{"values":{"partition":"1"}}', b'{"values":{"Partition":1}}',
    b'{"values":{"Partition":null}}', b'{"values":{"Partition":"1.0"}}', b'{"values":{"Partition":" 1"}}',
    b'{"values":{"Partition":"2147483648"}}', b'{"values":{"Partition":"-1"}}', b'{"values":{"Partition":"x"}}',
])
def test_malformed_values(value):
    with pytest.raises(CoordinatorFormatError, match="set-changelog"):
        decode_changelog_partition(value)
