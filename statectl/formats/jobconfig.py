"""A Samza job's config rules that name its streams: a store's changelog and the systems it may name.

Read off Samza's StorageConfig.getChangelogStream / getChangelogSystem, StreamUtil.getSystemStreamFromNames,
SystemConfig.getSystemFactory, StreamManager.createUniqueNameForBatch and ApplicationConfig (app.mode,
app.run.id). The config is a plain ``dict`` (for a job: its set-config messages). Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from statectl.errors import ConfigError
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


def _batch_suffix(config: dict[str, str]) -> str:
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
    return SystemStream(ss.system, ss.stream + _batch_suffix(config))


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

