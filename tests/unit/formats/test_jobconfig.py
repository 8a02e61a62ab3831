"""A store's changelog as Samza's StorageConfig.getChangelogStream names it, and the systems a config defines."""

from __future__ import annotations

import pytest

from statectl.errors import ConfigError
from statectl.formats.jobconfig import (
    SystemStream,
    changelog_stream,
    qualify_stream,
    require_system,
    split_system_stream,
    system_factory,
)

KAFKA = "org.apache.samza.system.kafka.KafkaSystemFactory"


@pytest.mark.parametrize("name, system, stream", [
    ("kafka.counts", "kafka", "counts"),
    ("kafka.my.dotted.topic", "kafka", "my.dotted.topic"),  # split at the FIRST dot
    ("my.topic", "my", "topic"),
    ("kafka.", "kafka", ""),
    (".topic", "", "topic"),
])
def test_split_at_the_first_dot(name, system, stream):
    assert split_system_stream(name) == SystemStream(system, stream)
    assert str(SystemStream(system, stream)) == name


def test_a_name_without_a_dot_does_not_split():
    with pytest.raises(ValueError, match="no '.'"):
        split_system_stream("counts")


@pytest.mark.parametrize("config, expected", [
    ({"stores.s.changelog": "kafka2.cl"}, SystemStream("kafka2", "cl")),
    ({"stores.s.changelog": "kafka2.cl", "job.changelog.system": "x"}, SystemStream("kafka2", "cl")),
    ({"stores.s.changelog": "cl", "job.changelog.system": "cs", "job.default.system": "ds"}, SystemStream("cs", "cl")),
    ({"stores.s.changelog": "cl", "job.default.system": "ds"}, SystemStream("ds", "cl")),
    ({"stores.s.changelog": "cl", "job.changelog.system": "", "job.default.system": "ds"}, SystemStream("", "cl")),
    # A bare topic with a dot is <system>.<topic> to Samza, whatever job.changelog.system says.
    ({"stores.s.changelog": "my.topic", "job.changelog.system": "kafka"}, SystemStream("my", "topic")),
    ({"stores.s.changelog": "  kafka.cl \t"}, SystemStream("kafka", "cl")),  # trimToNull
    ({"stores.s.changelog": "kafka.cl", "app.mode": "batch", "app.run.id": "r1"}, SystemStream("kafka", "cl-r1")),
    ({"stores.s.changelog": "cl", "job.default.system": "k", "app.mode": "BATCH", "app.run.id": "7"},
     SystemStream("k", "cl-7")),
    ({"stores.s.changelog": "kafka.cl", "app.mode": "STREAM", "app.run.id": "r1"}, SystemStream("kafka", "cl")),
    ({"stores.s.changelog": "kafka.cl", "app.mode": "BATCH"}, SystemStream("kafka", "cl")),
])
def test_changelog_stream_follows_storage_config(config, expected):
    assert changelog_stream(config, "s") == expected


@pytest.mark.parametrize("config", [{}, {"stores.s.changelog": ""}, {"stores.s.changelog": " \n"},
                                    {"stores.other.changelog": "kafka.cl"}])
def test_no_changelog(config):
    assert changelog_stream(config, "s") is None


def test_a_bare_changelog_with_no_system_is_a_config_error():
    with pytest.raises(ConfigError, match="job.changelog.system") as e:
        changelog_stream({"stores.s.changelog": "cl"}, "s")
    assert e.value.exit_code == 2 and "stores.s.changelog=cl" in str(e.value)
    with pytest.raises(ConfigError):
        qualify_stream("cl", {}, where="--changelog cl")
    assert qualify_stream("cl", {"job.default.system": "k"}, where="x") == SystemStream("k", "cl")


def test_systems_are_the_ones_with_a_factory():
    config = {"systems.kafka.samza.factory": KAFKA, "systems.blank.samza.factory": " ", "systems.other.x": "y"}
    assert system_factory(config, "kafka") == KAFKA
    assert system_factory(config, "blank") is None and system_factory(config, "other") is None
    require_system(config, "kafka", where="w")
    for system in ("blank", "other", "kafka2", ""):
        with pytest.raises(ConfigError, match=f"names system '{system}'") as e:
            require_system(config, system, where="stores.s.changelog=x")
        assert e.value.exit_code == 2 and "systems defined: kafka)" in str(e.value)
