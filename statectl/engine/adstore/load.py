"""adstore load, the command's one entry point: LoadOptions is the load as asked (every flag of ``adstore
load``); :func:`load` checks which of them go together, chooses the mode from them (``topic``: --topic or
--job; ``dataset``: --topic --dataset-versions; ``files``: --from-file), makes that mode's options and
runs it (engine.adstore.topic_load, engine.adstore.dataset_load, engine.adstore.files), or with
``dry_run`` its plan.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from statectl.engine.adstore.common import SparkOptions
from statectl.engine.adstore.dataset import DatasetLoadOptions, DatasetLoadResult
from statectl.engine.adstore.files import FileLoadOptions, FileLoadPlan, FileLoadResult
from statectl.engine.adstore.topic import LoadResult, TopicLoadOptions, TopicLoadPlan
from statectl.errors import UsageError
from statectl.formats.adstore import KeyValueSpec
from statectl.kafka.client import DEFAULT_TIMEOUT_S
from statectl.progress import ProgressReporter
from statectl.ratelimit import RateLimit

TOPIC, DATASET, FILES = "topic", "dataset", "files"
AnyLoad = Union[LoadResult, TopicLoadPlan, DatasetLoadResult, FileLoadResult, FileLoadPlan]


@dataclass(frozen=True)
class LoadOptions:
    """``adstore load`` as asked: where the store is (``store``, ``state_dir``/``store_dir``, ``task``),
    the source (``topics`` on ``bootstrap``, or the ``job``'s side inputs; ``from_file`` in ``fmt``), how
    records or rows become entries, and each mode's own flags (see docs/adstore.md). None or the default:
    not given. ``validate`` refuses flags that do not go with the mode."""

    store: str | None
    state_dir: Path | None = None
    store_dir: Path | None = None
    task: str = "Partition 0"
    bootstrap: str | None = None
    topics: tuple[str, ...] | None = None
    from_file: Path | None = None
    fmt: str | None = None
    job: str | None = None
    job_id: str = "1"
    zookeeper: str | None = None
    security: Any = None  # kafka.client.KafkaSecurity: the Kafka clients' TLS/SASL
    timeout_s: float = DEFAULT_TIMEOUT_S
    broadcast: bool = False
    tasks: tuple[str, ...] = ()
    partitions: tuple[int, ...] | None = None
    partition_count: int | None = None
    key_field: str | None = None
    value_field: str | None = None
    value_fields: tuple[str, ...] = ()
    extractor: str | None = None
    key_serde: str | None = None
    value_serde: str | None = None
    follow: bool = False
    max_age_s: float | None = None
    keep_versions: int = 2
    allow_empty: bool = False
    spark: SparkOptions | None = None
    dataset_versions: bool = False
    end_marker: str | None = None
    dry_run: bool = False
    rate_limit: RateLimit | None = None  # --from-file: the bucket the rows' bytes are taken from

    @property
    def mode(self) -> str:
        """``dataset`` (--dataset-versions), ``topic`` (--topic, or the job's side inputs) or ``files``."""
        return DATASET if self.dataset_versions else TOPIC if self.from_file is None else FILES

    @property
    def runs_until_stopped(self) -> bool:
        """Whether the load reads a topic until it ends or is stopped (SIGTERM, Ctrl-C: ``stop``)."""
        return self.mode == DATASET or (self.mode == TOPIC and not self.dry_run)

    def validate(self) -> None:
        """UsageError for flags that do not go together (each mode's options then check their own)."""
        if self.topics is not None and self.from_file is not None:
            raise UsageError("adstore load needs --topic or --from-file (one of them)")
        if self.topics is None and self.from_file is None and not self.job:
            raise UsageError("adstore load needs --topic or --from-file (one of them)",
                             hint="or --job (with --kafka) to take the store's side inputs from the job's config")
        if not self.store:
            raise UsageError("adstore load needs --store")
        if self.from_file is None and self.partition_count is not None:
            raise UsageError("--partition-count is for --from-file; a topic's stores follow its partitions")
        if self.from_file is not None and self.partitions is not None:
            raise UsageError("--partitions selects a topic's partitions; --from-file splits its rows into stores "
                             "with --partition-count N")
        if self.end_marker is not None and not self.dataset_versions:
            raise UsageError("--end-marker is for --dataset-versions")
        {DATASET: self._check_dataset, TOPIC: self._check_topic, FILES: self._check_files}[self.mode]()

    def _check_dataset(self) -> None:
        if len(self.topics or ()) > 1 or self.job or self.tasks:
            raise UsageError("--dataset-versions reads one --topic (no --job, no --tasks)")
        if not self.topics or self.from_file or self.fmt or self.max_age_s is not None or self.spark:
            raise UsageError("--dataset-versions reads a --topic; --from-file, --format, --max-age and --spark do not "
                             "combine with it")

    def _check_topic(self) -> None:
        if self.fmt or self.keep_versions != 2 or self.allow_empty:
            raise UsageError("--format, --keep-versions and --allow-empty are for --from-file (--keep-versions and "
                             "--allow-empty also for --topic --dataset-versions)")
        if self.follow and self.spark:
            raise UsageError("--follow applies records one by one: it does not combine with --spark")

    def _check_files(self) -> None:
        if self.follow or self.max_age_s is not None or self.key_serde or self.value_serde or self.tasks:
            raise UsageError("--follow, --max-age, --key-serde, --value-serde and --tasks are for --topic")
        if self.broadcast:
            raise UsageError("--broadcast is for --topic: a file dataset builds one store unless --partition-count N")

    def topic_spec(self) -> KeyValueSpec:
        """The spec of a topic's records: --key-field/--value-field name fields of the record's JSON value."""
        return KeyValueSpec(self.key_field, self.value_field, self.extractor, value_columns=self.value_fields)

    def topic_options(self) -> TopicLoadOptions:
        topics = tuple(self.topics or ())
        return TopicLoadOptions(self.bootstrap or "", topics[0] if topics else "", self.store or "", self.state_dir,
                                broadcast=self.broadcast, task=self.task, store_dir=self.store_dir,
                                partitions=self.partitions, spec=self.topic_spec(), follow=self.follow,
                                max_age_s=self.max_age_s, security=self.security, timeout_s=self.timeout_s,
                                topics=topics[1:], key_serde=self.key_serde, value_serde=self.value_serde,
                                job=self.job, job_id=self.job_id, tasks=self.tasks, zookeeper=self.zookeeper)

    def dataset_options(self) -> DatasetLoadOptions:
        return DatasetLoadOptions(self.bootstrap or "", (self.topics or ("",))[0], self.store or "", self.state_dir,
                                  broadcast=self.broadcast, task=self.task, store_dir=self.store_dir,
                                  partitions=self.partitions, spec=self.topic_spec(), end_marker=self.end_marker,
                                  keep_versions=self.keep_versions, allow_empty=self.allow_empty,
                                  follow=self.follow, security=self.security, timeout_s=self.timeout_s,
                                  dry_run=self.dry_run)

    def file_options(self) -> FileLoadOptions:
        """--key-field/--value-field name a file's columns."""
        assert self.from_file is not None
        spec = KeyValueSpec(extractor=self.extractor, key_column=self.key_field, value_column=self.value_field,
                            value_columns=self.value_fields)
        return FileLoadOptions(self.from_file, self.store or "", self.state_dir, fmt=self.fmt, task=self.task,
                               store_dir=self.store_dir, partitions=self.partition_count, spec=spec,
                               keep_versions=self.keep_versions, allow_empty=self.allow_empty,
                               rate_limit=self.rate_limit)


def load(opts: LoadOptions, *, stop: threading.Event | None = None,
         progress: ProgressReporter | None = None) -> AnyLoad:
    """Run the load ``opts`` asks for, in its mode, or with ``dry_run`` its plan: a LoadResult (TopicLoadPlan)
    from a topic, a DatasetLoadResult (a dry run's too) from a topic of dataset versions, a FileLoadResult
    (FileLoadPlan) from files. ``stop`` ends a topic or dataset load after a flush. Raises UsageError for
    flags that do not go together, and what that mode's load raises (engine.adstore.topic_load.load_topic,
    engine.adstore.dataset_load.load_dataset_versions, engine.adstore.files.load_file)."""
    opts.validate()
    if opts.mode == DATASET:
        from statectl.engine.adstore.dataset_load import load_dataset_versions

        return load_dataset_versions(opts.dataset_options(), stop=stop, progress=progress)
    if opts.mode == TOPIC:
        from statectl.engine.adstore.topic_load import load_topic, plan_topic_load

        if opts.dry_run:
            return plan_topic_load(opts.topic_options(), progress=progress, spark=opts.spark)
        return load_topic(opts.topic_options(), stop=stop, progress=progress, spark=opts.spark)
    from statectl.engine.adstore.files import load_file, plan_file_load

    if opts.dry_run:
        return plan_file_load(opts.file_options(), spark=opts.spark)
    return load_file(opts.file_options(), progress=progress, spark=opts.spark)
