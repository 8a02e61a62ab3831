"""A Samza job's config rules, read the way Samza reads them (the config as the coordinator stream's
``set-config`` messages hold it: a flat map of strings). Pure; no I/O; they never fail on a key that is
missing.

Streams (which changelog, which system): StorageConfig.getChangelogStream / getChangelogSystem,
StreamUtil.getSystemStreamFromNames, SystemConfig.getSystemFactory, StreamManager.createUniqueNameForBatch
and ApplicationConfig (app.mode, app.run.id).

Restore (what a job's next start does with a store's dirs): Config.getBoolean (only ``true``, any case, is
true), getInt/getLong (a malformed number fails the job's start: JobConfigError here), getList (split on
commas, a blank value is the default); TaskConfig.getTransactionalStateRestoreEnabled,
JobConfig.getStandbyTasksEnabled, StorageConfig.getStoreRestoreFactories / getChangeLogDeleteRetentionInMs /
getChangelogMinCompactionLagMs / cleanLoggedStoreDirsOnStart; ContainerStorageManagerUtil
.getBackendFactoryStoreNames (which restore factory restores a store).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from statectl.errors import ConfigError
from statectl.formats.checkpoint import KAFKA_CHANGELOG_FACTORY
from statectl.formats.java import java_is_blank

CHANGELOG_SYSTEM = "job.changelog.system"
DEFAULT_SYSTEM = "job.default.system"
APP_MODE = "app.mode"
APP_RUN_ID = "app.run.id"


def store_changelog_key(store: str) -> str:
    return f"stores.{store}.changelog"


def system_factory_key(system: str) -> str:
    return f"systems.{system}.samza.factory"


@dataclass(frozen=True)
class SystemStream:
    """A Samza SystemStream: ``system`` and ``stream`` (for a Kafka system, the topic)."""

    system: str
    stream: str

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}"


def split_system_stream(name: str) -> SystemStream:
    """``<system>.<stream>`` split at its FIRST dot (StreamUtil.getSystemStreamFromNames): ``kafka.a.b`` is
    stream ``a.b`` of system ``kafka``. Raises ValueError for a name without a dot."""
    system, dot, stream = name.partition(".")
    if not dot:
        raise ValueError(f"no '.' in stream name {name!r}: stream names have the form 'system.stream'")
    return SystemStream(system, stream)


def _trim(value: str | None) -> str | None:
    """commons-lang3 ``StringUtils.trimToNull``: String.trim() strips chars <= U+0020 at both ends."""
    if value is None:
        return None
    start, end = 0, len(value)
    while start < end and value[start] <= " ":
        start += 1
    while end > start and value[end - 1] <= " ":
        end -= 1
    return value[start:end] or None


def changelog_system(config: dict[str, str]) -> str | None:
    """The system a bare changelog stream is on: ``job.changelog.system``, else ``job.default.system``, else
    None (StorageConfig.getChangelogSystem: ``get(CHANGELOG_SYSTEM, get(JOB_DEFAULT_SYSTEM))``, so a key
    that is present wins even when empty)."""
    if CHANGELOG_SYSTEM in config:
        return config[CHANGELOG_SYSTEM]
    return config.get(DEFAULT_SYSTEM)


def qualify_stream(value: str, config: dict[str, str], *, where: str) -> SystemStream:
    """``value`` as StorageConfig.getChangelogStream qualifies it: a value with a dot is ``<system>.<stream>``
    (split at the first dot, so a bare topic cannot contain one); a bare stream is on
    :func:`changelog_system`. ``where`` names the value's origin in messages. Raises ConfigError (exit 2)
    when a bare stream has no system to be on, as Samza throws "changelog system is not defined"."""
    if "." in value:
        return split_system_stream(value)
    system = changelog_system(config)
    if system is None:
        raise ConfigError(f"{where} is the bare stream {value!r} and the config defines neither "
                          f"{CHANGELOG_SYSTEM} nor {DEFAULT_SYSTEM}: Samza cannot tell its system",
                          hint=f"name it as <system>.{value}")
    return SystemStream(system, value)


def batch_suffix(config: Mapping[str, str]) -> str:
    """``-<app.run.id>`` for a BATCH application with a run id (StreamManager.createUniqueNameForBatch), else ""."""
    mode = config.get(APP_MODE, "STREAM")
    run_id = config.get(APP_RUN_ID)
    return f"-{run_id}" if mode.upper() == "BATCH" and run_id is not None else ""


def changelog_stream(config: dict[str, str], store: str) -> SystemStream | None:
    """The changelog of ``store`` as StorageConfig.getChangelogStream gives it: ``stores.<store>.changelog``
    trimmed (None when absent or blank: the store has no changelog), qualified by :func:`qualify_stream`,
    with ``-<app.run.id>`` appended for a BATCH application. Raises ConfigError (exit 2) as qualify_stream
    does."""
    key = store_changelog_key(store)
    value = _trim(config.get(key))
    if value is None:
        return None
    ss = qualify_stream(value, config, where=f"{key}={value}")
    return SystemStream(ss.system, ss.stream + batch_suffix(config))


def system_factory(config: dict[str, str], system: str) -> str | None:
    """``systems.<system>.samza.factory``, None when absent or blank (SystemConfig.getSystemFactory)."""
    value = config.get(system_factory_key(system))
    return None if java_is_blank(value) else value


def require_system(config: dict[str, str], system: str, *, where: str) -> None:
    """Raise ConfigError (exit 2) unless the config defines ``system`` (a ``systems.<system>.samza.factory``):
    Samza finds no SystemAdmin for any other system (ChangelogStreamManager.createChangelogStreams)."""
    if system_factory(config, system) is None:
        known = sorted(name for name in (k[len("systems."):-len(".samza.factory")] for k in config
                                         if k.startswith("systems.") and k.endswith(".samza.factory"))
                       if system_factory(config, name) is not None)
        raise ConfigError(f"{where} names system {system!r}, which the job's config does not define (no "
                          f"{system_factory_key(system)}; systems defined: {', '.join(known) or 'none'})",
                          hint="name the changelog on one of the job's systems, as <system>.<topic>")


# -- restore: what the next start keeps ------------------------------------------------------------

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


def restore_factories(config: Config, store: str) -> list[str]:
    """StorageConfig.getStoreRestoreFactories: ``stores.<store>.restore.factories`` when the key is there
    (even blank: then none); else ``stores.restore.factories``; else, for a store with a changelog, the
    Kafka changelog backend; else none."""
    key = f"stores.{store}.restore.factories"
    if key in config:
        return get_list(config, key) or []
    factories = get_list(config, JOB_RESTORE_FACTORIES) or []
    if not factories and _trim(config.get(store_changelog_key(store))) is not None:
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


# -- checkpoints: which one the job's start reads --------------------------------------------------

CHECKPOINT_READ_VERSIONS = "task.checkpoint.read.versions"
DEFAULT_CHECKPOINT_READ_VERSIONS = (1,)  # TaskConfig.DEFAULT_CHECKPOINT_READ_VERSIONS
LIVE_CHECKPOINT_MAX_AGE = "task.live.checkpoint.max.age"
DEFAULT_LIVE_CHECKPOINT_MAX_AGE_MS = 600_000  # TaskConfig.DEFAULT_LIVE_CHECKPOINT_MAX_AGE_MS: 10 minutes
CHECKPOINT_FACTORY = "task.checkpoint.factory"


def checkpoint_read_versions(config: Config) -> tuple[int, ...]:
    """TaskConfig.getCheckpointReadVersions: ``task.checkpoint.read.versions`` (getList: a blank value is the
    default, [1]) as shorts, first first. JobConfigError for a value Short.valueOf cannot read."""
    values = get_list(config, CHECKPOINT_READ_VERSIONS)
    if values is None:
        return DEFAULT_CHECKPOINT_READ_VERSIONS
    out = []
    for v in values:
        if not re.fullmatch(r"[+-]?[0-9]+", v) or not -32768 <= int(v) <= 32767:
            raise JobConfigError(f"{CHECKPOINT_READ_VERSIONS}={config[CHECKPOINT_READ_VERSIONS]!r}: {v!r} is not a "
                                 "checkpoint version")
        out.append(int(v))
    return tuple(out)


def live_checkpoint_max_age_ms(config: Config) -> int:
    """TaskConfig.getLiveCheckpointMaxAgeMillis: ``task.live.checkpoint.max.age`` (default 10 minutes)."""
    return get_int(config, LIVE_CHECKPOINT_MAX_AGE, DEFAULT_LIVE_CHECKPOINT_MAX_AGE_MS)


def has_checkpoint_manager(config: Config) -> bool:
    """TaskConfig.getCheckpointManager: a job reads checkpoints only with ``task.checkpoint.factory`` set (not
    blank); without one every container start reads none (ContainerStorageManager then clears the state dir)."""
    return not java_is_blank(config.get(CHECKPOINT_FACTORY))


def checkpoint_restore_factory(config: Config, store: str, checkpoint: object | None) -> str | None:
    """The state backend factory that restores ``store`` when the job's start reads ``checkpoint`` (a
    formats.checkpoint CheckpointV1 or CheckpointV2, or None), as ContainerStorageManagerUtil
    .getBackendFactoryStoreNames picks it: for a v1 checkpoint the Kafka changelog backend when the store has a
    changelog (whatever its restore factories say), else none; otherwise :func:`restore_factory` over the v2
    checkpoint's markers."""
    from statectl.formats.checkpoint import CheckpointV1

    if isinstance(checkpoint, CheckpointV1):
        return KAFKA_CHANGELOG_FACTORY if _trim(config.get(store_changelog_key(store))) is not None else None
    return restore_factory(config, store, getattr(checkpoint, "state_checkpoint_markers", None))
