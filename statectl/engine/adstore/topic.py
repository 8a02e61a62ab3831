"""adstore load from a topic: the options, the results and plans, and the stores a load fills (Target).
Partitioned, one store per task (partition k -> ``Partition k``), or broadcast, one store holding every
partition. Each record becomes an entry as formats.adstore.KeyValueSpec says; a null value deletes. After
each flush (the WAL synced) the store's ``OFFSET-v2`` and ``SIDE-INPUT-OFFSETS`` record, per partition, the
offset of the newest record applied (a partition with none yet left out), as TaskSideInputStorageManager
writes them: a load resumes after them, and a kill at any moment loses nothing and skips nothing. The load
reads ``SIDE-INPUT-OFFSETS`` (its own); an ``OFFSET-v2`` an earlier Samza run left never overrides it and
is rewritten.

Recovery, per store (engine.adstore.topic_stores): no store -> create it and bootstrap; a store found but
not valid (its newest file older than ``max_age``, its offsets off the topic, its offsets file or its files
damaged) -> rebuild it in a staged dir and swap it in (local.staged); valid -> continue from its offsets.
Bootstrap reads every partition to the end it had when the load started; ``follow`` then applies new
records until ``stop`` is set (engine.adstore.topic_write). With ``spark`` the staged store is built from
SST files a Spark job wrote (engine.adstore.builds). engine.adstore.topic_load runs the load and its plan.

A load only deletes or replaces a dir it can prove it made: a store dir that holds this adstore's
``SIDE-INPUT-OFFSETS`` (a damaged one counts: the recovery table rebuilds it), or an empty dir; a new store
dir appears whole, holding its offsets file from the start. Anything else there (a job's store without that
file, a dir of other files, a versioned adstore's link, a file) is refused (UsageError) and left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.engine.adstore.common import TopicSourceOptions
from statectl.errors import UsageError
from statectl.local.staged import StagedStore

CREATED, RESUMED, REBUILT = "created", "resumed", "rebuilt"
CLONED = "cloned"  # a broadcast store of another task, hard-linked from the one loaded (TopicLoadOptions.tasks)


@dataclass(frozen=True)
class TopicLoadOptions(TopicSourceOptions):
    """Load ``topic`` (and the other ``topics``: one store fed by several streams, consistent per task) as
    TopicSourceOptions says, partition k of every topic that has one in store ``Partition k``, or as
    ``task_ssps`` says (task -> its (topic, partition) pairs, the job model's mapping: engine.adstore.job).
    ``tasks`` (broadcast, with ``state_dir``): every task's store dir holds the broadcast store, as Samza keeps
    a broadcast side input (one store per task, each with every partition): the first task's is loaded, the
    others are made from it by hard-linking its files (a RocksDB checkpoint: no byte written twice on one
    filesystem). ``max_age_s``: a store whose newest file is older is rebuilt. ``key_serde``/``value_serde``:
    the store's serdes (formats.serdes kinds; None: the bytes as they are), applied to the record's own key
    and value as Samza's identity side-inputs processor does. ``job``/``job_id``: take what flags leave unset
    from the job's config and job model on its coordinator stream, or with ``zookeeper`` a standalone job's
    model in ZooKeeper (engine.adstore.job.from_job)."""

    max_age_s: float | None = None
    topics: tuple[str, ...] = ()
    key_serde: str | None = None
    value_serde: str | None = None
    task_ssps: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] | None = None
    job: str | None = None
    job_id: str = "1"
    tasks: tuple[str, ...] = ()
    zookeeper: str | None = None
    wiped_tasks: tuple[tuple[str, str], ...] = ()  # with the job: task -> why its start deletes the state dir

    @property
    def all_topics(self) -> tuple[str, ...]:
        """Every topic of the load, ``topic`` first, each once."""
        return tuple(dict.fromkeys(((self.topic,) if self.topic else ()) + tuple(self.topics)))

    def names_topic(self) -> bool:
        return bool(self.job) or (bool(self.all_topics) and all(self.all_topics))

    def task_names(self) -> tuple[str, ...]:
        return (self.task, *(task for task, _ in self.task_ssps or ()), *self.tasks)

    def validate(self) -> None:
        super().validate()
        if self.max_age_s is not None and self.max_age_s <= 0:
            raise UsageError("--max-age must be positive")
        if self.zookeeper and not self.job:
            raise UsageError("--zookeeper needs --job: it holds the model of a standalone job")
        if self.tasks and (not self.broadcast or self.state_dir is None or self.store_dir is not None):
            raise UsageError("--tasks names the task dirs a --broadcast store fills under --state-dir",
                             hint="pass --broadcast and --state-dir (not --store-dir)")
        if len(set(self.tasks)) != len(self.tasks):
            raise UsageError("--tasks names a task twice")
        if self.task_ssps is not None and (self.broadcast or self.state_dir is None):
            raise UsageError("a task -> partitions mapping fills the task dirs under --state-dir, not --broadcast")
        from statectl.formats.serdes import kind_of

        for flag, kind in (("--key-serde", self.key_serde), ("--value-serde", self.value_serde)):
            if kind is not None:
                try:
                    kind_of(kind)
                except ValueError as e:
                    raise UsageError(f"{flag}: {e}") from None
                if self.transforms:
                    raise UsageError(f"{flag} applies to the record's own bytes: it does not combine with "
                                     "--extractor, --key-field or --value-field")


@dataclass
class StoreLoad:
    """What a load did to one store: ``case`` is created / resumed / rebuilt (``reason`` says why),
    ``offsets`` the newest offset applied per partition."""

    store_dir: str
    partitions: list[int]
    case: str
    reason: str | None = None
    records: int = 0
    bytes: int = 0
    offsets: dict[str, int | None] = field(default_factory=dict)
    task: str | None = None


@dataclass
class LoadResult:
    """``records`` applied (puts and deletes) and their key + value ``bytes``; per store what happened."""

    topic: str | None
    records: int = 0
    bytes: int = 0
    skipped: int = 0
    topics: list[str] = field(default_factory=list)  # every topic of a topic load, ``topic`` first
    duration_s: float = 0.0
    stores: list[StoreLoad] = field(default_factory=list)
    offsets: dict[str, int | None] = field(default_factory=dict)
    version: int | None = None
    phases: dict[str, float] = field(default_factory=dict)
    # Every partition was read to the end offsets it had when the load began (False: stopped before).
    bootstrapped: bool = False
    notes: list[str] = field(default_factory=list)


Part = tuple[str, int]  # (topic, partition): one side-input SSP of a store


@dataclass
class Target:
    """One store a topic load fills: its dir, the side-input SSPs it holds, what the load does to it, the
    newest offset applied per SSP, the staged dir of a rebuild, the open store and the records applied
    since the offsets were last recorded (``pending``)."""

    path: Path
    parts: list[Part]
    load: StoreLoad
    offsets: dict[Part, int | None] = field(default_factory=dict)
    staged: StagedStore | None = None
    db: Any = None
    pending: int = 0
    opts: TopicLoadOptions | None = None
    topic_ids: dict[str, str] = field(default_factory=dict)  # topic -> its id now (KIP-516), where reported

    @property
    def partitions(self) -> list[int]:
        return sorted({p for _, p in self.parts})

    @property
    def write_path(self) -> Path:
        return self.staged.path if self.staged is not None else self.path


@dataclass
class PlannedStoreLoad:
    """One store of a topic load's plan: ``case`` (created, resumed, rebuilt: ``reason`` says why), and per
    side-input SSP the offset its read starts at and the end it reads to (the end now)."""

    store_dir: str
    task: str | None
    partitions: list[int]
    case: str
    reason: str | None
    start: dict[str, int]
    end: dict[str, int]
    records: int


@dataclass
class TopicLoadPlan:
    """What ``load_topic`` will do, decided with nothing written: each store's case and the offsets it
    reads (``records``: the offsets in those ranges now, the most records applied); ``clones``: the
    broadcast stores that get hard links of the first; ``follow``: it then keeps applying. ``adstore load
    --topic --dry-run`` prints it."""

    topic: str | None
    topics: list[str]
    stores: list[PlannedStoreLoad]
    clones: list[str]
    records: int
    built_with: str
    follow: bool
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)
