"""Settings -> the adapters an operation needs: the blob store, the catalog (with the job's Kafka checkpoint
topic as its commit log when Kafka is configured), and a progress reporter.

The CLI builds one Session per command run (statectl.cli.common.Env); a Python program that embeds
statectl builds one the same way, and its settings resolve exactly as the CLI's do: keyword arguments
(like flags) > STATECTL_* environment > the profile in statectl.toml > defaults. The engine takes the
adapters as arguments::

    from statectl.engine.backup import BackupOptions, backup
    from statectl.session import open_session

    with open_session(blobstore="s3://backups/samza", job="page-views", store="counts",
                      state_dir="/var/samza/state") as session:
        s = session.settings
        result = backup(BackupOptions(ref=session.ref(), store_dir=session.store_dir(),
                                      parallelism=s.parallelism, chunk_size=s.chunk_size,
                                      ttl_seconds=s.ttl, keep_last=s.keep_last,
                                      rate_limit=session.rate_limit),
                        session.blobstore, session.catalog, session.progress)
        print(result.snapshot_id)

Adapters are opened on first use (a Session that only resolves settings touches no network) and closed
by ``close()`` or the end of the ``with`` block. A Session is not meant to be shared between threads
while it opens them; the adapters themselves are thread-safe as the engine needs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional

from statectl import config
from statectl.errors import UsageError
from statectl.progress import NullProgress, ProgressReporter

if TYPE_CHECKING:
    from statectl.blobstore.base import BlobStore
    from statectl.catalog.kafka_log import KafkaCheckpointLogs
    from statectl.catalog.records import BlobCheckpointStore
    from statectl.catalog.refs import StoreRef
    from statectl.kafka.client import KafkaSecurity
    from statectl.ratelimit import RateLimit


def resolve_settings(overrides: Mapping[str, Any], *, config_file: str | None = None, profile: str | None = None,
                     env: Mapping[str, str] | None = None) -> config.Settings:
    """Settings as the CLI resolves them: ``overrides`` (setting name -> value, None = not given) > STATECTL_*
    in ``env`` (default: os.environ) > the profile of the config file > defaults.

    Paths may be given as Path. Raises UsageError for a name that is not a setting (a typo must not be
    ignored), ConfigError (exit 2) for a bad config file or environment value, UsageError for a bad value.
    """
    unknown = sorted(set(overrides) - set(config.KEYS))
    if unknown:
        raise UsageError(f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}",
                         hint="settings: " + ", ".join(sorted(config.KEYS)))
    flags = {name: os.fspath(v) if isinstance(v, os.PathLike) else v for name, v in overrides.items()}
    return config.resolve(flags, config=config_file, profile=profile, env=env)


class Session:
    """The adapters of one run over resolved settings: ``blobstore``, ``catalog`` (and its ``commit_log``),
    ``progress``; plus the store the settings name (``ref()``, ``store_dir()``).

    Registers the settings' secrets (and URL passwords) with statectl.redact, so that they are masked in
    anything statectl prints or logs through its RedactingFilter.
    """

    def __init__(self, settings: config.Settings, *, progress: ProgressReporter | None = None,
                 create_blobstore: bool = False):
        from statectl import redact

        self.settings = settings
        self.create_blobstore = create_blobstore
        self.progress: ProgressReporter = progress if progress is not None else NullProgress()
        redact.add_secrets(value.value for name, value in settings.items() if config.KEYS[name].secret)
        for name in ("s3_endpoint", "blobstore", "kafka"):
            redact.add_url(getattr(settings, name))
        self._blobstore: BlobStore | None = None
        self._commit_log: KafkaCheckpointLogs | None = None
        self._catalog: BlobCheckpointStore | None = None
        self._rate_limit: RateLimit | None = None

    @classmethod
    def from_env(cls, *, config_file: str | None = None, profile: str | None = None,
                 env: Mapping[str, str] | None = None, progress: ProgressReporter | None = None,
                 create_blobstore: bool = False, **settings: Any) -> "Session":
        """A Session over settings resolved like the CLI's: ``settings`` (keyword arguments named like the
        settings: ``blobstore=``, ``job=``, ``state_dir=``; None = not given) > STATECTL_* environment >
        the profile (``profile``, else STATECTL_PROFILE, else ``default``) of the config file
        (``config_file``, else STATECTL_CONFIG, ./statectl.toml, $XDG_CONFIG_HOME/statectl/config.toml)
        > defaults. Raises as resolve_settings. ``create_blobstore``: as the CLI's --create."""
        return cls(resolve_settings(settings, config_file=config_file, profile=profile, env=env), progress=progress,
                   create_blobstore=create_blobstore)

    # -- adapters ----------------------------------------------------------------------------------

    @property
    def blobstore(self) -> BlobStore:
        """The blob store the settings name, with retries (opened on first use; touches no network).

        A ``file://`` dir that does not exist is NotFoundError (exit 10) on first use (after the command's
        usage checks, as a missing bucket), unless it is the embedded default
        (made on first use) or the Session was made with ``create_blobstore`` (the CLI's --create): a
        mistyped URL must not start a new blob store where nobody looks."""
        if self._blobstore is None:
            from statectl.blobstore import default_blobstore_url, file_root, open_blobstore

            s = self.settings
            # The embedded default under any spelling of its dir (file_root: the real path, as identity says).
            create = (self.create_blobstore or s.source("blobstore") == "default"
                      or file_root(s.blobstore) == file_root(default_blobstore_url()))
            self._blobstore = open_blobstore(s.blobstore, retries=s.retries, retry_time_s=s.retry_time,
                                             s3=self.s3_options, create=create)
        return self._blobstore

    @property
    def s3_options(self) -> Any:
        """The S3Options the settings name (endpoint, region, credentials, connections, timeout, encryption)."""
        from statectl.blobstore import S3Options

        s = self.settings
        return S3Options(endpoint_url=s.s3_endpoint, region=s.s3_region, access_key_id=s.s3_access_key_id,
                         secret_access_key=s.s3_secret_access_key, session_token=s.s3_session_token,
                         profile=s.s3_profile, max_connections=max(32, 2 * s.parallelism), timeout_s=s.timeout,
                         sse=s.sse, sse_kms_key_id=s.sse_kms_key_id)

    @property
    def rate_limit(self) -> Optional[RateLimit]:
        """The token bucket of the ``limit_rate`` setting (None: no limit), one per Session: every transfer of
        the command run takes from it, however many stores, tasks and threads it moves bytes for."""
        if self._rate_limit is None and self.settings.limit_rate is not None:
            from statectl.ratelimit import RateLimit

            self._rate_limit = RateLimit(self.settings.limit_rate)
        return self._rate_limit

    @property
    def kafka_security(self) -> Optional[KafkaSecurity]:
        """TLS/SASL for the Kafka clients of this session, from the kafka_* settings; None for PLAINTEXT.
        Raises ConfigError (exit 2) for settings that cannot work together."""
        from statectl.kafka.client import KafkaSecurity

        return KafkaSecurity.from_settings(self.settings)

    @property
    def commit_log(self) -> Optional[KafkaCheckpointLogs]:
        """The jobs' Samza checkpoint topics when Kafka is configured (``kafka`` setting), else None: the
        catalog in the blob store is then its own commit log."""
        if self._commit_log is None and self.settings.kafka:
            from statectl.catalog.kafka_log import KafkaCheckpointLogs

            self._commit_log = KafkaCheckpointLogs(self.settings.kafka, security=self.kafka_security)
        return self._commit_log

    @property
    def catalog(self) -> BlobCheckpointStore:
        """The checkpoint catalog in the blob store, recording to ``commit_log`` when there is one."""
        if self._catalog is None:
            from statectl.catalog.records import BlobCheckpointStore

            self._catalog = BlobCheckpointStore(self.blobstore, self.commit_log)
        return self._catalog

    # -- the store the settings name ---------------------------------------------------------------

    def ref(self, *, need_store: bool = True) -> StoreRef:
        """job/job_id/task/store as a StoreRef. UsageError without a job, or without a store when
        ``need_store``; without one (backup --all) the store is the placeholder ``*``, which the engine
        replaces with each store it finds."""
        from statectl.catalog.refs import StoreRef

        s = self.settings
        if not s.job:
            raise UsageError("no job given", hint="pass --job NAME (or set STATECTL_JOB, or job in statectl.toml)")
        if need_store and not s.store:
            raise UsageError("no store given", hint="pass --store NAME (or set STATECTL_STORE)")
        return StoreRef(s.job, s.job_id, s.task, s.store or "*")

    def store_dir(self, explicit: Path | str | None = None) -> Path:
        """``explicit`` (--store-dir) if given, else ``<state_dir>/<store>/<task, spaces -> _>``. UsageError
        when neither a store dir nor a state dir and store are set."""
        from statectl.local.layout import store_dir

        if explicit is not None:
            return Path(explicit)
        s = self.settings
        if not s.state_dir:
            raise UsageError("no store dir given",
                             hint="pass --store-dir DIR, or --state-dir DIR with --store and --task")
        if not s.store:
            raise UsageError("no store given", hint="pass --store NAME")
        return store_dir(Path(s.state_dir), s.store, s.task)

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the adapters opened so far (the commit log's Kafka clients, the blob store). Idempotent."""
        catalog, commit_log, blobstore = self._catalog, self._commit_log, self._blobstore
        self._catalog = self._commit_log = self._blobstore = None
        try:
            if catalog is not None:
                catalog.close()  # closes its commit log too
            elif commit_log is not None:
                commit_log.close()
        finally:
            if blobstore is not None:
                blobstore.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_session(**kwargs: Any) -> Session:
    """``Session.from_env(**kwargs)``: settings resolved as the CLI resolves them, adapters opened on use."""
    return Session.from_env(**kwargs)
