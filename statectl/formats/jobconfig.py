"""What a Samza job's config says about the restore of a store, read the way Samza reads it (its config as
the coordinator stream's ``set-config`` messages hold it: a flat map of strings).

Mirrored from org.apache.samza.config: Config.getBoolean (only ``true``, any case, is true), getInt/getLong
(a malformed number fails the job's start: JobConfigError here), getList (split on commas, a blank value is
the default); TaskConfig.getTransactionalStateRestoreEnabled, JobConfig.getStandbyTasksEnabled,
StorageConfig.getStoreRestoreFactories / getChangeLogDeleteRetentionInMs / getChangelogMinCompactionLagMs /
cleanLoggedStoreDirsOnStart; ContainerStorageManagerUtil.getBackendFactoryStoreNames (which restore factory
restores a store). Pure functions; they never fail on a key that is missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from statectl.formats.checkpoint import KAFKA_CHANGELOG_FACTORY

STANDBY_REPLICATION_FACTOR = "job.standbytasks.replication.factor"
ASYNC_COMMIT = "task.async.commit"
TRANSACTIONAL_RESTORE = "task.transactional.state.restore.enabled"
JOB_RESTORE_FACTORIES = "stores.restore.factories"
DEFAULT_DELETE_RETENTION_MS = 24 * 3600 * 1000  # StorageConfig.DEFAULT_CHANGELOG_DELETE_RETENTION_MS: 1 day
DEFAULT_MIN_COMPACTION_LAG_MS = 4 * 3600 * 1000  # StorageConfig.DEFAULT_CHANGELOG_MIN_COMPACTION_LAG_MS: 4 hours

class JobConfigError(ValueError):
    """A value Samza cannot parse (its job would fail to start on it); the message names the key."""


Config = Mapping[str, str]


def get_bool(config: Config, key: str, default: bool) -> bool:
    """Config.getBoolean: a present key is true only when its value is ``true`` (any case)."""
    return config[key].lower() == "true" if key in config else default


def get_int(config: Config, key: str, default: int) -> int:
    """Config.getInt / getLong (Integer.parseInt: an optional sign, then decimal digits)."""
    if key not in config:
        return default
    value = config[key]
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise JobConfigError(f"{key}={value!r} is not a number")
    return int(value)


def get_list(config: Config, key: str) -> list[str] | None:
    """Config.getList: None when the key is missing or its value blank, else the value split on commas
    (``\\s*,\\s*``)."""
    if key not in config or not config[key].strip():
        return None
    return re.split(r"\s*,\s*", config[key])


def standby_tasks_enabled(config: Config) -> bool:
    """JobConfig.getStandbyTasksEnabled: ``job.standbytasks.replication.factor`` > 1 (default 1)."""
    return get_int(config, STANDBY_REPLICATION_FACTOR, 1) > 1


def transactional_restore_enabled(config: Config) -> bool:
    """TaskConfig.getTransactionalStateRestoreEnabled: off with standby tasks or ``task.async.commit``, else
    ``task.transactional.state.restore.enabled`` (default true)."""
    return (not standby_tasks_enabled(config) and not get_bool(config, ASYNC_COMMIT, False)
            and get_bool(config, TRANSACTIONAL_RESTORE, True))


def restore_reason(config: Config) -> str:
    """Which keys decide transactional_restore_enabled, as ``key=value`` (or its default) for messages."""
    if standby_tasks_enabled(config):
        return f"{STANDBY_REPLICATION_FACTOR}={config[STANDBY_REPLICATION_FACTOR]}"
    if get_bool(config, ASYNC_COMMIT, False):
        return f"{ASYNC_COMMIT}={config[ASYNC_COMMIT]}"
    if TRANSACTIONAL_RESTORE in config:
        return f"{TRANSACTIONAL_RESTORE}={config[TRANSACTIONAL_RESTORE]}"
    return f"{TRANSACTIONAL_RESTORE} not set (default true)"


def changelog_stream(config: Config, store: str) -> str | None:
    """``stores.<store>.changelog`` (trimmed), None when missing or blank (StorageConfig.getChangelogStream,
    without its system resolution)."""
    value = config.get(f"stores.{store}.changelog", "").strip()
    return value or None


def restore_factories(config: Config, store: str) -> list[str]:
    """StorageConfig.getStoreRestoreFactories: ``stores.<store>.restore.factories`` when the key is there
    (even blank: then none); else ``stores.restore.factories``; else, for a store with a changelog, the
    Kafka changelog backend; else none."""
    key = f"stores.{store}.restore.factories"
    if key in config:
        return get_list(config, key) or []
    factories = get_list(config, JOB_RESTORE_FACTORIES) or []
    if not factories and changelog_stream(config, store) is not None:
        factories = [KAFKA_CHANGELOG_FACTORY]
    return factories


def restore_factory(config: Config, store: str, markers: Mapping[str, Mapping[str, str]] | None) -> str | None:
    """The state backend factory that restores ``store`` at the job's next start
    (ContainerStorageManagerUtil.getBackendFactoryStoreNames, v2 or no checkpoint): the first of its
    restore factories whose marker for the store is in the checkpoint's ``markers``, else the first one;
    None when it has none (the store is not restored)."""
    factories = restore_factories(config, store)
    for factory in factories:
        if store in (markers or {}).get(factory, {}):
            return factory
    return factories[0] if factories else None


def clean_on_start(config: Config, store: str) -> bool:
    """StorageConfig.cleanLoggedStoreDirsOnStart: ``stores.<store>.clean.on.container.start``."""
    return get_bool(config, f"stores.{store}.clean.on.container.start", False)


def changelog_delete_retention_ms(config: Config, store: str) -> int:
    """StorageConfig.getChangeLogDeleteRetentionInMs: a logged store dir whose offset file is older is stale."""
    return get_int(config, f"stores.{store}.changelog.delete.retention.ms", DEFAULT_DELETE_RETENTION_MS)


def changelog_min_compaction_lag_ms(config: Config, store: str) -> int:
    """StorageConfig.getChangelogMinCompactionLagMs: ``stores.<store>.changelog.min.compaction.lag.ms``,
    else ``stores.default.changelog.min.compaction.lag.ms``, else 4 hours."""
    default = get_int(config, "stores.default.changelog.min.compaction.lag.ms", DEFAULT_MIN_COMPACTION_LAG_MS)
    return get_int(config, f"stores.{store}.changelog.min.compaction.lag.ms", default)
