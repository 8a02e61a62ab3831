"""What the loads of read-only (adjunct) stores share: the error of a record or row that makes no entry,
the Spark options of the bulk path, the check of a key/value spec against its source, and
TopicSourceOptions, the fields and checks of a load that reads a topic (engine.adstore.topic and
engine.adstore.dataset both extend it).

One load per store at a time, from a topic or from files, and ``switch_version`` too: each holds the
store's local.versions.StoreLock (``<store>.adstore.lock`` beside it; LockHeldError, exit 11, naming the
holder) for its whole run; the version chain is written only under it. With SparkOptions a load builds
its stores from SST files a Spark job wrote (statectl.spark) into a build dir (engine.adstore.builds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.errors import NotFoundError, StatectlError, UsageError
from statectl.formats.adstore import KeyValueSpec
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.local.layout import store_dir


class AdstoreExtractError(StatectlError):
    """A record or row the key/value spec cannot turn into an entry; the message names where it is.
    What came before it is applied and recorded; it and what follows are not."""


@dataclass(frozen=True)
class SparkOptions:
    """The bulk path: spark-submit to ``master`` with ``conf``. ``staging``: "local" (the executors write
    the SST files beside the stores: local mode, or a filesystem every executor shares) or the URL of a
    blob store they travel through (``s3`` its S3Options). The build's files stay in a dir beside the
    stores until every store is swapped in: a load interrupted during the ingest re-runs from them."""

    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    staging: str = "local"
    s3: Any = None


def check_spec(spec: KeyValueSpec, *, topic: bool) -> None:
    """UsageError for a key/value spec that does not fit its source: a topic's record or a file's row."""
    if topic:
        if spec.key_column or spec.value_column or spec.value_columns:
            raise UsageError("a file's columns (--value-fields) are for --from-file; a topic takes --key-field, "
                             "--value-field or --extractor")
        if spec.extractor and (spec.key_field or spec.value_field):
            raise UsageError("--extractor replaces --key-field/--value-field: pass one or the other")
    else:
        if spec.key_field or spec.value_field or spec.extractor:
            raise UsageError("--extractor is for --topic; a file row's key and value are --key-field, "
                             "--value-field or --value-fields")
        if not spec.key_column:
            raise UsageError("--from-file needs --key-field (the key column)")
        if spec.value_column and spec.value_columns:
            raise UsageError("--value-field and --value-fields exclude each other")


@dataclass(frozen=True)
class TopicSourceOptions:
    """A load of ``topic`` on ``bootstrap`` (``system``: the name offsets and manifests give it) into
    ``store`` under ``state_dir``: partitioned (store ``Partition k`` for each of ``partitions``, default
    all) or ``broadcast`` into ``store_dir`` (default: the store dir of ``task``), each record an entry as
    ``spec`` says; ``follow``: after the bootstrap, keep applying new records until stopped. The fields and
    checks a topic load and a dataset-versions load share; each extends them."""

    bootstrap: str
    topic: str
    store: str
    state_dir: Path | None = None
    broadcast: bool = False
    task: str = "Partition 0"
    store_dir: Path | None = None
    partitions: tuple[int, ...] | None = None
    spec: KeyValueSpec = KeyValueSpec()
    follow: bool = False
    system: str = "kafka"
    security: KafkaSecurity | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    def names_topic(self) -> bool:
        """Whether the options name the topic(s) to read."""
        return bool(self.topic)

    def task_names(self) -> tuple[str, ...]:
        """The tasks whose store dirs under ``state_dir`` the load may fill (their names checked first)."""
        return (self.task,)

    def validate(self) -> None:
        """UsageError, before anything connects or writes, for options no load of a topic takes."""
        if not self.bootstrap:
            raise UsageError("adstore load --topic needs Kafka brokers", hint="pass --kafka HOST:PORT[,..]")
        if not self.names_topic():
            raise UsageError("adstore load --topic needs a topic name")
        if not self.store:
            raise UsageError("adstore load needs --store")
        if self.store_dir is None and self.state_dir is None:
            raise UsageError("adstore load needs --state-dir (or --store-dir with --broadcast)")
        if self.store_dir is not None and not self.broadcast:
            raise UsageError("--store-dir names one store: use it with --broadcast, or pass --state-dir")
        if not self.system or "." in self.system:
            raise UsageError(f"invalid system name {self.system!r}")
        if self.partitions is not None and any(p < 0 for p in self.partitions):
            raise UsageError("partitions must be 0 or more")
        if self.state_dir is not None:
            for task in self.task_names():
                store_dir(Path(self.state_dir), self.store, task)
        check_spec(self.spec, topic=True)

    @property
    def transforms(self) -> bool:
        """Whether an extractor or fields make the entries (not the record's own key and value)."""
        return bool(self.spec.extractor or self.spec.key_field or self.spec.value_field)

    def record_extractor(self) -> Any:
        """The spec's record -> (key, value) callable, or None for the record's own key and value.
        Raises formats.adstore.ExtractError when the extractor does not load."""
        return self.spec.record_extractor() if self.transforms else None


def partition_count(consumer: Any, topic: str, bootstrap: str) -> int:
    """The partitions of ``topic``; NotFoundError (exit 10) when it does not exist."""
    from statectl.kafka.client import partition_count as count

    n = count(consumer, topic, bootstrap)
    if n is None:
        raise NotFoundError(f"topic {topic} does not exist on {bootstrap}", hint="check the topic name and --kafka")
    return n


def check_partition(topic: str, count: int, partition: int) -> None:
    """NotFoundError (exit 10) for a partition ``topic`` (with ``count`` partitions) does not have."""
    if partition >= count:
        raise NotFoundError(f"topic {topic} has {count} partition{'s' if count != 1 else ''}; there is no "
                            f"partition {partition}", hint=f"pass partitions between 0 and {count - 1}")
