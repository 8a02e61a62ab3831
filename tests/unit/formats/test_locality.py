"""Samza's locality and task-assignment messages, byte for byte, and standby task names.

Every expected key and value below is a "verified bytes" example of docs/samza/standby.md section 1: what
verbatim copies of Samza's SetContainerHostMapping, SetTaskContainerMapping and SetTaskModeMapping wrote
through CoordinatorStreamMessage (writer 10.0.0.5, user.name=samza, timestamp 1700000000123; Jackson 2.14,
2.17, 2.18).
"""

from __future__ import annotations

import pytest

from statectl.formats.coordinator import (
    SAMZA_CONTAINER_SOURCE,
    SET_CONTAINER_HOST,
    SET_TASK_CONTAINER,
    SET_TASK_MODE,
    CoordinatorFormatError,
    active_of_standby,
    decode_container_host,
    decode_key,
    decode_task_container,
    decode_task_mode,
    encode_container_host,
    encode_key,
    encode_task_container,
    encode_task_mode,
    standby_task_name,
)

WRITER = {"writer_host": "10.0.0.5", "username": "samza", "timestamp_ms": 1700000000123}


def test_namespaces_and_source_are_samzas():
    assert (SET_CONTAINER_HOST, SET_TASK_CONTAINER, SET_TASK_MODE) == (
        "set-container-host-assignment", "set-task-container-assignment", "set-task-mode-assignment")
    assert SAMZA_CONTAINER_SOURCE == "SamzaContainer"


@pytest.mark.parametrize("namespace, key, expected", [
    (SET_CONTAINER_HOST, "0", b'[1,"set-container-host-assignment","0"]'),
    (SET_CONTAINER_HOST, "0-0", b'[1,"set-container-host-assignment","0-0"]'),
    (SET_TASK_CONTAINER, "Partition 0", b'[1,"set-task-container-assignment","Partition 0"]'),
    (SET_TASK_CONTAINER, "Standby-Partition 0-0", b'[1,"set-task-container-assignment","Standby-Partition 0-0"]'),
    (SET_TASK_MODE, "Partition 0", b'[1,"set-task-mode-assignment","Partition 0"]'),
    (SET_TASK_MODE, "Standby-Partition 0-0", b'[1,"set-task-mode-assignment","Standby-Partition 0-0"]'),
])
def test_locality_keys_are_samzas_bytes(namespace, key, expected):
    assert encode_key(namespace, key) == expected
    assert decode_key(expected) == (namespace, key)


def test_locality_key_lengths_match_the_doc():
    assert [len(encode_key(SET_CONTAINER_HOST, k)) for k in ("0", "0-0")] == [39, 41]
    assert [len(encode_key(SET_TASK_CONTAINER, k)) for k in ("Partition 0", "Standby-Partition 0-0")] == [49, 59]
    assert [len(encode_key(SET_TASK_MODE, k)) for k in ("Partition 0", "Standby-Partition 0-0")] == [44, 54]


@pytest.mark.parametrize("host", ["host-a.example.com", "host-b.example.com"])
def test_container_host_value_is_samzas_bytes(host):
    # Envelope in the 8-slot HashMap order host, source, values, username, timestamp; values in the 16-slot
    # HashMap order jmx-url, host, jmx-tunneling-url, both JMX URLs empty (the container's only write).
    value = encode_container_host(host, **WRITER)
    assert value == (b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"jmx-url":"","host":"'
                     + host.encode() + b'","jmx-tunneling-url":""},"username":"samza","timestamp":1700000000123}')
    assert len(value) == 165
    assert decode_container_host(value) == host


@pytest.mark.parametrize("container_id, expected", [
    ("0", (b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"containerId":"0"},"username":"samza",'
           b'"timestamp":1700000000123}')),
    ("0-0", (b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"containerId":"0-0"},"username":"samza",'
             b'"timestamp":1700000000123}')),
])
def test_task_container_value_is_samzas_bytes(container_id, expected):
    value = encode_task_container(container_id, **WRITER)
    assert value == expected
    assert len(value) == {"0": 119, "0-0": 121}[container_id]
    assert decode_task_container(value) == container_id


@pytest.mark.parametrize("mode, expected", [
    ("Active", (b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"taskMode":"Active"},"username":"samza",'
                b'"timestamp":1700000000123}')),
    ("Standby", (b'{"host":"10.0.0.5","source":"SamzaContainer","values":{"taskMode":"Standby"},"username":"samza",'
                 b'"timestamp":1700000000123}')),
])
def test_task_mode_value_is_samzas_bytes(mode, expected):
    value = encode_task_mode(mode, **WRITER)
    assert value == expected
    assert len(value) == {"Active": 121, "Standby": 122}[mode]
    assert decode_task_mode(value) == mode


def test_values_are_escaped_as_jackson_escapes_them():
    # Not among the doc's examples: derived from the jackson rules (writeValueAsString: non-BMP kept).
    value = encode_task_container('c"\\\x01😀', **WRITER)
    assert b'"values":{"containerId":"c\\"\\\\\\u0001\xf0\x9f\x98\x80"}' in value
    assert decode_task_container(value) == 'c"\\\x01😀'


@pytest.mark.parametrize("mode", ["active", "ACTIVE", "standby", "", "Passive", None])
def test_a_task_mode_samza_cannot_read_is_refused(mode):
    with pytest.raises(CoordinatorFormatError, match="task mode"):
        encode_task_mode(mode, **WRITER)


def test_decoders_read_only_their_one_field():
    # CoordinatorStreamValueSerde.fromBytes reads values.<field> alone: other fields may be missing or odd.
    assert decode_container_host(b'{"values":{"host":"h"}}') == "h"
    assert decode_container_host(b'{"values":{"host":"","jmx-url":"service:jmx:x"},"source":"other"}') == ""
    assert decode_task_container(b'{"values":{"containerId":"1"},"timestamp":"soon","extra":[1]}') == "1"
    assert decode_task_mode(b'{"values":{"taskMode":"Standby"}}') == "Standby"


def test_tombstones_decode_to_none():
    assert decode_container_host(None) is None
    assert decode_task_container(None) is None
    assert decode_task_mode(None) is None


MALFORMED = [b"", b"{", b"\xff\xfe{", b"[]", b'"x"', b"{}", b'{"values":[]}', b'{"values":{}}', b'{"values":null}']


@pytest.mark.parametrize("value", MALFORMED + [b'{"values":{"host":3}}', b'{"values":{"host":null}}',
                                              b'{"values":{"containerId":"0"}}'])
def test_malformed_container_host_values(value):
    with pytest.raises(CoordinatorFormatError, match="set-container-host-assignment"):
        decode_container_host(value)


@pytest.mark.parametrize("value", MALFORMED + [b'{"values":{"containerId":0}}', b'{"values":{"host":"h"}}'])
def test_malformed_task_container_values(value):
    with pytest.raises(CoordinatorFormatError, match="set-task-container-assignment"):
        decode_task_container(value)


@pytest.mark.parametrize("value", MALFORMED + [
    b'{"values":{"taskMode":"active"}}',  # the javadoc's lower case: TaskMode.valueOf throws
    b'{"values":{"taskMode":"ACTIVE"}}', b'{"values":{"taskMode":""}}', b'{"values":{"taskMode":null}}',
    b'{"values":{"taskMode":1}}', b'{"values":{"mode":"Active"}}',
])
def test_malformed_task_mode_values(value):
    with pytest.raises(CoordinatorFormatError):
        decode_task_mode(value)


# -- standby task names (StandbyTaskUtil) ---------------------------------------------------------------------


@pytest.mark.parametrize("task, replica, name", [
    ("Partition 0", 0, "Standby-Partition 0-0"),
    ("Partition 0", 1, "Standby-Partition 0-1"),
    ("Partition 12", 10, "Standby-Partition 12-10"),
    ("a-b", 1, "Standby-a-b-1"),  # Samza's split("-")[1] would say "a"
    ("my-task-3", 0, "Standby-my-task-3-0"),
    ("with space - and dash-", 2, "Standby-with space - and dash--2"),
    ("Standby-x-0", 0, "Standby-Standby-x-0-0"),
    ("-", 0, "Standby---0"),
    ("Partition 0-", 1, "Standby-Partition 0--1"),  # not replica -1: numbers have no sign
])
def test_standby_names_round_trip(task, replica, name):
    assert standby_task_name(task, replica) == name
    assert active_of_standby(name) == (task, replica)


@pytest.mark.parametrize("name", [
    "Partition 0", "Standby", "Standby-", "Standby-0", "Standby--0", "Standby-Partition 0-", "Standby-Partition 0-x",
    "Standby-Partition 0-01", "Standby-Partition 0-+1", "Standby-Partition 0-١",
    "standby-Partition 0-0", "Standby Partition 0-0", "",
])
def test_names_that_are_not_standby_names(name):
    assert active_of_standby(name) is None


@pytest.mark.parametrize("replica", [-1, True, 1.0, "0", None])
def test_a_standby_replica_is_a_non_negative_int(replica):
    with pytest.raises(ValueError):
        standby_task_name("Partition 0", replica)
