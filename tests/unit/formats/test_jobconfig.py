"""formats.jobconfig: a store's changelog as Samza's StorageConfig.getChangelogStream names it, the systems a
config defines, and what the config says about a store's restore."""

from __future__ import annotations

import pytest

from statectl.errors import ConfigError
from statectl.formats import jobconfig as jc
from statectl.formats.checkpoint import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY
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


# -- restore --------------------------------------------------------------------------------

LOGGED = {"stores.s.changelog": "kafka.s-changelog"}


@pytest.mark.parametrize("extra, transactional", [
    ({}, True),
    ({"task.transactional.state.restore.enabled": "false"}, False),
    ({"task.transactional.state.restore.enabled": "TRUE"}, True),
    ({"task.transactional.state.restore.enabled": "yes"}, False),  # getBoolean: only "true" is true
    ({"job.standbytasks.replication.factor": "2"}, False),
    ({"job.standbytasks.replication.factor": "1"}, True),
    ({"task.async.commit": "true"}, False),
])
def test_transactional_restore_enabled(extra, transactional):
    assert jc.transactional_restore_enabled({**LOGGED, **extra}) is transactional


def test_a_malformed_replication_factor_is_an_error_naming_the_key():
    with pytest.raises(jc.JobConfigError, match="job.standbytasks.replication.factor"):
        jc.transactional_restore_enabled({"job.standbytasks.replication.factor": "two"})


def test_restore_factories_and_which_one_restores():
    assert jc.restore_factories(LOGGED, "s") == [KAFKA_CHANGELOG_FACTORY]
    assert jc.restore_factories({}, "s") == []
    both = {**LOGGED, "stores.restore.factories": f"{BLOB_STORE_FACTORY} , {KAFKA_CHANGELOG_FACTORY}"}
    assert jc.restore_factories(both, "s") == [BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY]
    assert jc.restore_factories({**both, "stores.s.restore.factories": " "}, "s") == []  # the store's key wins
    # The first factory with a marker for the store in the checkpoint, else the first configured.
    assert jc.restore_factory(both, "s", None) == BLOB_STORE_FACTORY
    assert jc.restore_factory(both, "s", {KAFKA_CHANGELOG_FACTORY: {"s": "m"}}) == KAFKA_CHANGELOG_FACTORY
    assert jc.restore_factory(both, "s", {KAFKA_CHANGELOG_FACTORY: {"other": "m"}}) == BLOB_STORE_FACTORY
    assert jc.restore_factory({}, "s", None) is None


def test_retention_lag_and_clean_on_start():
    assert jc.changelog_delete_retention_ms(LOGGED, "s") == 86_400_000
    assert jc.changelog_min_compaction_lag_ms(LOGGED, "s") == 4 * 3_600_000
    cfg = {"stores.default.changelog.min.compaction.lag.ms": "1000", "stores.s.changelog.delete.retention.ms": "5"}
    assert jc.changelog_min_compaction_lag_ms(cfg, "s") == 1000
    assert jc.changelog_min_compaction_lag_ms({**cfg, "stores.s.changelog.min.compaction.lag.ms": "7"}, "s") == 7
    assert jc.changelog_delete_retention_ms(cfg, "s") == 5
    assert jc.clean_on_start({"stores.s.clean.on.container.start": "True"}, "s")
    assert not jc.clean_on_start({}, "s")


# -- which checkpoint the job's start reads (TaskConfig.getCheckpointReadVersions) ---------------------------


@pytest.mark.parametrize("value,versions", [(None, (1,)), ("", (1,)), ("  ", (1,)), ("2", (2,)), ("2,1", (2, 1)),
                                            ("1 , 2", (1, 2)), ("+2,1", (2, 1))])
def test_checkpoint_read_versions_as_samza_reads_them(value, versions):
    config = {} if value is None else {jc.CHECKPOINT_READ_VERSIONS: value}
    assert jc.checkpoint_read_versions(config) == versions


@pytest.mark.parametrize("value", ["two", "2,,1", "1.0", "70000"])
def test_checkpoint_read_versions_samza_cannot_parse(value):
    with pytest.raises(jc.JobConfigError, match=jc.CHECKPOINT_READ_VERSIONS):
        jc.checkpoint_read_versions({jc.CHECKPOINT_READ_VERSIONS: value})


def test_a_v1_checkpoint_restores_a_logged_store_from_its_changelog_whatever_its_restore_factories():
    from statectl.formats.checkpoint import SSP, CheckpointV1, CheckpointV2

    config = {"stores.s.changelog": "kafka.s-changelog", "stores.s.restore.factories": BLOB_STORE_FACTORY,
              "stores.t.restore.factories": BLOB_STORE_FACTORY}
    v1 = CheckpointV1({SSP("kafka", "s-changelog", 0): "1-2:5"})
    v2 = CheckpointV2("1-2", {}, {BLOB_STORE_FACTORY: {"s": "blob"}})
    assert jc.checkpoint_restore_factory(config, "s", v1) == KAFKA_CHANGELOG_FACTORY
    assert jc.checkpoint_restore_factory(config, "t", v1) is None  # no changelog: not restored
    assert jc.checkpoint_restore_factory(config, "s", v2) == BLOB_STORE_FACTORY
    assert jc.checkpoint_restore_factory(config, "s", None) == BLOB_STORE_FACTORY


def test_a_checkpoint_manager_is_there_only_with_a_factory():
    assert not jc.has_checkpoint_manager({})
    assert not jc.has_checkpoint_manager({jc.CHECKPOINT_FACTORY: " "})
    assert jc.has_checkpoint_manager({jc.CHECKPOINT_FACTORY: "org.apache.samza.checkpoint.kafka.X"})
