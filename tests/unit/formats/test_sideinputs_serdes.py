"""formats.serdes (Samza's built-in serdes as a side-input store applies them) and formats.sideinputs (a
side-input store as the job's config describes it)."""

from __future__ import annotations

import pytest

from statectl.errors import ConfigError
from statectl.formats.checkpoint import SSP
from statectl.formats.jobconfig import SystemStream
from statectl.formats.serdes import SerdeError, java_double_to_string, kind_of, round_trip
from statectl.formats.sideinputs import (
    broadcast_ssps,
    processor_keys,
    side_inputs,
    store_serdes,
    task_side_input_ssps,
)


@pytest.mark.parametrize("d, text", [(1.0, "1.0"), (0.1, "0.1"), (100.0, "100.0"), (1e7, "1.0E7"),
                                     (9999999.0, "9999999.0"), (0.001, "0.001"), (0.00099, "9.9E-4"),
                                     (1e10, "1.0E10"), (1.5e-7, "1.5E-7"), (-2.5, "-2.5"), (-0.0, "-0.0"),
                                     (12345678.9, "1.23456789E7"), (5e-324, "4.9E-324")])
def test_java_double_to_string(d: float, text: str):
    assert java_double_to_string(d) == text


def test_round_trips():
    assert round_trip("byte", b"\xff\x00") == b"\xff\x00"
    assert round_trip("string", b"a\xffb") == "a\ufffdb".encode()
    assert round_trip("integer", b"\x00\x00\x00\x05\x09") == b"\x00\x00\x00\x05"
    assert round_trip("long", bytes(range(10))) == bytes(range(8))
    assert round_trip("json", b' {"b": 1.50, "a": [1, 2e3, "\\u00e9\\ud83d\\ude00"], "b": 2} x') == \
        '{"b":2,"a":[1,2000.0,"é😀"]}'.encode()
    for kind, data in (("integer", b"\x01"), ("long", b"1234567"), ("json", b""), ("json", b"{bad"),
                       ("json", b"NaN")):
        with pytest.raises(SerdeError):
            round_trip(kind, data)
    assert kind_of("byte-array") == "byte"
    with pytest.raises(ValueError):
        kind_of("uuid")


def test_side_inputs_and_serdes_from_config():
    config = {"stores.s.side.inputs": " kafka.a , ids ,", "stores.s.adstore.input": "kafka.a",
              "streams.ids.samza.system": "other", "streams.ids.samza.physical.name": "ids-topic",
              "stores.s.key.serde": "str", "serializers.registry.str.class": "org.apache.samza.serializers.StringSerdeFactory",
              "stores.s.msg.serde": "j", "serializers.registry.j.class": "org.apache.samza.serializers.JsonSerdeV2Factory"}
    assert side_inputs(config, "s") == [SystemStream("kafka", "a"), SystemStream("other", "ids-topic")]
    assert store_serdes(config, "s") == ("string", "json")
    assert store_serdes({}, "s") == (None, None)
    with pytest.raises(ConfigError, match="stores.s.side.inputs=kafka.a.b"):
        side_inputs({"stores.s.side.inputs": "kafka.a.b"}, "s")
    with pytest.raises(ConfigError, match="serializers.registry.x.class=com.X"):
        store_serdes({"stores.s.msg.serde": "x", "serializers.registry.x.class": "com.X"}, "s")
    with pytest.raises(ConfigError, match="stores.s.key.serde=y"):
        store_serdes({"stores.s.key.serde": "y"}, "s")
    with pytest.raises(ConfigError, match="encoding=UTF-16"):
        store_serdes({**config, "encoding": "UTF-16"}, "s")
    assert processor_keys({"stores.s.side.inputs.processor.factory": "com.P"}, "s") == \
        ["stores.s.side.inputs.processor.factory"]


def test_task_side_input_ssps_group_by_partition_and_broadcast():
    config = {"stores.s.side.inputs": "kafka.a,kafka.b", "task.broadcast.inputs": "kafka.b#[0-1], kafka.c#0"}
    assert broadcast_ssps(config) == {SSP("kafka", "b", 0), SSP("kafka", "b", 1), SSP("kafka", "c", 0)}
    got = task_side_input_ssps(config, "s", ["Partition 0", "Partition 2"],
                               {SystemStream("kafka", "a"): 3, SystemStream("kafka", "b"): 2})
    both_b = {SSP("kafka", "b", 0), SSP("kafka", "b", 1)}
    assert got == {"Partition 0": {SSP("kafka", "a", 0)} | both_b, "Partition 2": {SSP("kafka", "a", 2)} | both_b}
    with pytest.raises(ConfigError, match="job.systemstreampartition.grouper.factory"):
        task_side_input_ssps({**config, "job.systemstreampartition.grouper.factory": "x.Y"}, "s", ["Partition 0"], {})
    with pytest.raises(ConfigError, match="'Task-A'"):
        task_side_input_ssps(config, "s", ["Task-A"], {})
