"""What a Python stream job is: its stages, their streams and stores, and the Samza config it publishes.

A job (one coordinator stream, one checkpoint topic, one run id per deployment) is a chain of stages.
Each stage runs as its own OS process (a container) and has one task per input partition (Samza's
GroupByPartition: task ``<stage>-Partition <n>`` reads partition n of each of the stage's inputs). A
stage reads source topics or one intermediate stream, and writes intermediate streams (re-keyed: the
partition is Kafka's default partitioner over the key) and output topics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from statectl.formats.checkpoint import BLOB_STORE_FACTORY
from statectl.formats.coordinator import RUN_ID_CONFIG
from statectl.pipeline.control import WATERMARK_IDLE_TIMEOUT, WATERMARK_QUORUM

SYSTEM = "kafka"
BLOB_STORE_FACTORY_CONFIG = BLOB_STORE_FACTORY


@dataclass(frozen=True)
class StageSpec:
    """One stage. ``task``: called with a TaskContext for each of its tasks, returns the task object
    (see pipeline.task). ``inputs``: the topics it reads (sources, or intermediate streams of the job);
    ``intermediate_outputs`` / ``outputs``: the intermediate streams and plain topics it writes;
    ``stores``: the names of its RocksDB stores (each with a changelog topic)."""

    name: str
    task: Callable[[Any], Any]
    inputs: tuple[str, ...]
    intermediate_outputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """A job: its name and id, its stages in order, the partition count of each intermediate stream
    (``intermediate``: topic -> partitions), and its timings.

    ``bounded``: the source topics read as bounded inputs (Samza's ``streams.<id>.samza.bounded``, set by
    ``InputDescriptor.isBounded()``): each partition is read up to its end offset as of the start of the
    run, then ends (end of stream); a job whose sources are all bounded ends by itself (Samza's BATCH
    app mode). ``drain_callback_timeout_s``: ``task.callback.drain.timeout.ms`` (None: Samza's default
    -1, no timeout), the time a task may spend on its drain callback (see pipeline.container)."""

    name: str
    stages: tuple[StageSpec, ...]
    intermediate: dict[str, int] = field(default_factory=dict)
    job_id: str = "1"
    commit_interval_s: float = 5.0
    window_interval_s: float = 1.0
    drain_poll_interval_s: float = 1.0
    bounded: tuple[str, ...] = ()
    drain_callback_timeout_s: float | None = None

    def stage(self, name: str) -> StageSpec:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"job {self.name} has no stage {name!r} (stages: {', '.join(s.name for s in self.stages)})")

    def is_intermediate(self, topic: str) -> bool:
        return topic in self.intermediate

    @property
    def sources(self) -> tuple[str, ...]:
        """The topics the job reads that are not its own intermediate streams, in stage order."""
        return tuple(dict.fromkeys(t for s in self.stages for t in s.inputs if not self.is_intermediate(t)))

    def is_bounded(self, topic: str) -> bool:
        return topic in self.bounded

    def producers(self, topic: str, partitions: dict[str, int]) -> int:
        """Producer tasks of intermediate stream ``topic``: the tasks of the stages writing it (Samza's
        producerTaskCounts), given every input topic's partition count."""
        return sum(stage_partitions(s, partitions) for s in self.stages if topic in s.intermediate_outputs)

    def changelog_topic(self, store: str) -> str:
        return f"{self.name}-{self.job_id}-{store}-changelog".replace("_", "-")

    def config(self, run_id: str) -> dict[str, str]:
        """The job's config as Samza's JobRunner would publish it to the coordinator stream."""
        cfg = {
            "job.name": self.name,
            "job.id": self.job_id,
            RUN_ID_CONFIG: run_id,
            "job.default.system": SYSTEM,
            "job.drain-monitor.enabled": "true",
            "job.drain-monitor.poll.interval.ms": str(round(self.drain_poll_interval_s * 1000)),
            "task.commit.ms": str(round(self.commit_interval_s * 1000)),
            "task.window.ms": str(round(self.window_interval_s * 1000)),
            "task.checkpoint.system": SYSTEM,
            "task.checkpoint.read.versions": "2,1",
            "task.checkpoint.write.versions": "2",
            "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
        }
        if self.drain_callback_timeout_s is not None:
            cfg[DRAIN_CALLBACK_TIMEOUT] = str(round(self.drain_callback_timeout_s * 1000))
        inputs = sorted({t for s in self.stages for t in s.inputs})
        cfg["task.inputs"] = ",".join(f"{SYSTEM}.{t}" for t in inputs)
        # JobPlanner: BATCH when every input stream is bounded, else STREAM.
        sources = self.sources
        cfg[APP_MODE] = "BATCH" if sources and all(self.is_bounded(t) for t in sources) else "STREAM"
        for topic in sorted(self.bounded):
            cfg[f"streams.{topic}.samza.system"] = SYSTEM
            cfg[f"streams.{topic}.samza.physical.name"] = topic
            cfg[bounded_key(topic)] = "true"
        for topic, partitions in sorted(self.intermediate.items()):
            cfg[f"streams.{topic}.samza.system"] = SYSTEM
            cfg[f"streams.{topic}.samza.physical.name"] = topic
            cfg[f"streams.{topic}.samza.intermediate"] = "true"
            cfg[f"streams.{topic}.partitions"] = str(partitions)
        for stage in self.stages:
            for store in stage.stores:
                cfg[f"stores.{store}.factory"] = "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory"
                cfg[f"stores.{store}.changelog"] = f"{SYSTEM}.{self.changelog_topic(store)}"
                cfg[f"stores.{store}.backup.factories"] = BLOB_STORE_FACTORY_CONFIG
        return cfg


# The config keys a deployment may set (``run --config KEY=VALUE``): containers read them back from the
# coordinator stream, as Samza containers read their config.
TIMINGS = {"task.commit.ms": "commit_interval_s", "task.window.ms": "window_interval_s",
           "job.drain-monitor.poll.interval.ms": "drain_poll_interval_s"}


DRAIN_CALLBACK_TIMEOUT = "task.callback.drain.timeout.ms"  # TaskConfig.DRAIN_CALLBACK_TIMEOUT_MS, default -1
APP_MODE = "app.mode"  # ApplicationConfig.APP_MODE
_BOUNDED_PREFIX, _BOUNDED_SUFFIX = "streams.", ".samza.bounded"  # StreamConfig.IS_BOUNDED_FOR_STREAM_ID


def bounded_key(topic: str) -> str:
    return f"{_BOUNDED_PREFIX}{topic}{_BOUNDED_SUFFIX}"


def bounded_topic(key: str) -> str | None:
    """The stream of a ``streams.<stream>.samza.bounded`` key, or None for another key."""
    if key.startswith(_BOUNDED_PREFIX) and key.endswith(_BOUNDED_SUFFIX):
        topic = key[len(_BOUNDED_PREFIX):-len(_BOUNDED_SUFFIX)]
        return topic or None
    return None


def settable(key: str) -> bool:
    """Whether a deployment may set ``key`` (``run --config KEY=VALUE``)."""
    return (key in TIMINGS or key in (DRAIN_CALLBACK_TIMEOUT, WATERMARK_IDLE_TIMEOUT, WATERMARK_QUORUM)
            or bounded_topic(key) is not None)


SETTABLE_HELP = (f"{', '.join(sorted(TIMINGS))}, {DRAIN_CALLBACK_TIMEOUT}, {WATERMARK_IDLE_TIMEOUT}, "
                 f"{WATERMARK_QUORUM}, streams.<source>.samza.bounded")


def with_config(job: JobSpec, config: dict[str, str]) -> JobSpec:
    """``job`` with the timings ``config`` sets (milliseconds, as Samza's keys), its drain callback timeout
    (``task.callback.drain.timeout.ms``; 0 or less: none, as Samza's default -1) and its bounded sources
    (``streams.<source>.samza.bounded``: true or false). Raises ValueError naming the key for a timing
    that is not a positive number of milliseconds, a timeout that is not an integer, a boolean that is not
    true/false, or a bounded stream that is not a source of the job."""
    changes: dict = {}
    for key, attr in TIMINGS.items():
        if key in config:
            ms = _int(key, config[key])
            if ms <= 0:
                raise ValueError(f"{key} must be a positive number of milliseconds, not {config[key]!r}")
            changes[attr] = ms / 1000
    if DRAIN_CALLBACK_TIMEOUT in config:
        ms = _int(DRAIN_CALLBACK_TIMEOUT, config[DRAIN_CALLBACK_TIMEOUT])
        changes["drain_callback_timeout_s"] = ms / 1000 if ms > 0 else None
    bounded = list(job.bounded)
    for key, value in config.items():
        topic = bounded_topic(key)
        if topic is None:
            continue
        if value.strip().lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, not {value!r}")
        if topic not in job.sources:
            raise ValueError(f"{key}: {topic!r} is not a source of job {job.name} "
                             f"(sources: {', '.join(job.sources) or 'none'})")
        if value.strip().lower() == "true" and topic not in bounded:
            bounded.append(topic)
        elif value.strip().lower() == "false" and topic in bounded:
            bounded.remove(topic)
    if tuple(bounded) != job.bounded:
        changes["bounded"] = tuple(bounded)
    return replace(job, **changes)


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{key} must be an integer number of milliseconds, not {value!r}") from None


def stage_partitions(stage: StageSpec, partitions: dict[str, int]) -> int:
    """The number of tasks of ``stage``: the largest partition count of its inputs."""
    return max((partitions[t] for t in stage.inputs), default=0)


def task_name(stage: str, partition: int) -> str:
    return f"{stage}-Partition {partition}"
