"""statectl.formats.jobconfig: Samza's restore-related config rules (TaskConfig, JobConfig, StorageConfig,
ContainerStorageManagerUtil.getBackendFactoryStoreNames)."""

from __future__ import annotations

import pytest

from statectl.formats import jobconfig as jc
from statectl.formats.checkpoint import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY

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
