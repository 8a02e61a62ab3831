"""Where a task's store is logged: the changelog's Samza system, topic and partition, from the job's model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.refs import StoreRef
from statectl.engine.standby.placement import active_name
from statectl.engine.standby.replica import Replica
from statectl.errors import ConfigError, NotFoundError, StatectlError, UsageError
from statectl.formats.coordinator import coordinator_topic
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, open_consumer
from statectl.kafka.coordinator import JobModel


@dataclass(frozen=True)
class ChangelogPartition:
    """Where a task's store is logged: changelog ``topic`` on Samza system ``system``, partition
    ``partition``; ``notes``: the guesses made to get there (warnings for the operator). ``bootstrap`` and
    ``security``: the brokers of that system and how to reach them when the job's config puts it on another
    cluster (kafka.systems.system_brokers), else None (the brokers the job's coordinator stream is on)."""

    system: str
    topic: str
    partition: int
    notes: tuple[str, ...] = ()
    bootstrap: str | None = None
    security: KafkaSecurity | None = field(default=None, repr=False)

    def replica(self, ref: StoreRef, replica_dir: Path, **kwargs: Any) -> Replica:
        """The Replica of ``ref`` at ``replica_dir`` that follows this changelog partition, on its brokers."""
        return Replica(ref, self.topic, self.partition, replica_dir, system=self.system,
                       changelog_bootstrap=self.bootstrap, changelog_security=self.security, **kwargs)


# The system a changelog is taken to be on when nothing says otherwise: KafkaSystemFactory's usual name.
GUESSED_SYSTEM = "kafka"


def resolve_changelog(bootstrap: str, ref: StoreRef, *, changelog: str | None = None, partition: int | None = None,
                      security: KafkaSecurity | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                      model: JobModel | None = None, problems: list[str] | None = None,
                      counted: set[str] | None = None, zookeeper: str | None = None,
                      stream: tuple[JobModel | None, list[str]] | None = None) -> ChangelogPartition:
    """The changelog system, topic (_changelog_stream) and partition (``partition``, an override: else
    _task_partition) of ``ref``'s store, as the
    job's model says (read whole, once: engine.jobmodel.read_job_model, from the coordinator stream, or with
    ``zookeeper`` a standalone job's model in ZooKeeper with the stream's config). Reads only. Brokers: the
    changelog's system's (kafka.systems.system_brokers) when the config puts it on another cluster than
    ``bootstrap``, in the result's ``bootstrap`` and ``security`` (with a note); the partition count is checked there.

    Raises UsageError (exit 2, before any broker is asked) for a negative ``partition`` or an empty
    ``changelog``, and without a partition for a task that does not say one with no coordinator stream;
    ConfigError (exit 2) for a changelog on a system the job's config does not define (no
    ``systems.<system>.samza.factory``), a bare one the config gives no system, or consumer security settings
    of its system statectl cannot use; NotFoundError (exit 10) when there is no coordinator stream and no
    ``changelog``, the config names no changelog for the store, the mapping has no partition for the task, or
    the changelog topic has fewer partitions than the mapping names; StatectlError (exit 1) when the task's
    partition is mapped to another task as well (naming both); read_job_model's errors.
    ``model`` (with the stream's ``problems``): the job model already read (CoordinatorStream.job_model), for
    a caller resolving many stores at once; the stream is then not read again. ``counted``: the topics whose
    partition count was checked against that same model's mapping already (by this caller: the check is
    then not repeated, each costing a metadata round trip); the topic checked here is added to it. ``stream``:
    the coordinator stream as the caller read it already (read_job_model's ``stream``), not read again."""
    from statectl.formats.jobconfig import require_system
    from statectl.kafka.systems import system_brokers

    if partition is not None and partition < 0:
        raise UsageError(f"--partition must be 0 or more, not {partition}")
    if changelog is not None and not changelog.strip():
        raise UsageError("--changelog is empty", hint="pass the changelog topic, as <system>.<topic> or <topic>")
    notes: list[str] = []
    if model is None:
        from statectl.engine.jobmodel import read_job_model

        model, problems = read_job_model(bootstrap, ref.job, ref.job_id, zookeeper=zookeeper, security=security,
                                         timeout_s=timeout_s, stream=stream)
    config = model.config if model is not None else {}
    ss, where = _changelog_stream(bootstrap, ref, changelog, model, notes)
    if config:  # a coordinator stream with no config at all (locality only) says nothing about systems
        require_system(config, ss.system, where=where)
    # The changelog's system may be on another cluster than the job's coordinator and checkpoint topics.
    brokers = system_brokers(config, ss.system, bootstrap, security)
    if brokers.elsewhere:
        notes.append(f"changelog {ss.stream} is on system {ss.system!r}'s brokers {brokers.bootstrap} "
                     f"({brokers.key})")
    if partition is None:
        partition = _task_partition(ref, model, problems or [], notes)
        if model is not None and (counted is None or ss.stream not in counted):
            _check_partition_count(brokers.bootstrap if brokers.elsewhere else bootstrap, ss.stream, model,
                                   security=brokers.security if brokers.elsewhere else security, timeout_s=timeout_s)
            if counted is not None:
                counted.add(ss.stream)
    return ChangelogPartition(ss.system, ss.stream, partition, tuple(notes),
                              brokers.bootstrap if brokers.elsewhere else None,
                              brokers.security if brokers.elsewhere else None)


def _changelog_stream(bootstrap: str, ref: StoreRef, changelog: str | None, model: JobModel | None,
                      notes: list[str]) -> tuple[Any, str]:
    """(SystemStream, where it was named) of ``ref``'s store: ``changelog`` if given, else ``stores.<store>.changelog``
    of the job's config, either qualified as Samza's StorageConfig.getChangelogStream does (``<system>.<topic>``
    split at the first dot; a bare topic is on ``job.changelog.system``, else ``job.default.system``). A bare
    ``changelog`` whose config names neither (or with no coordinator stream) is taken to be on system "kafka",
    with a note. Errors as resolve_changelog's."""
    from statectl.formats.jobconfig import (
        SystemStream,
        changelog_stream,
        changelog_system,
        qualify_stream,
        store_changelog_key,
    )

    job = f"{ref.job}-{ref.job_id}"
    config = model.config if model is not None else {}
    if changelog is None:
        if model is None:
            raise NotFoundError(f"coordinator stream {coordinator_topic(ref.job, ref.job_id)} of job {job} does not "
                                f"exist on {bootstrap}: nothing says the changelog of store {ref.store!r}",
                                hint="check --job and --job-id, or pass --changelog and --partition")
        key = store_changelog_key(ref.store)
        try:
            ss = changelog_stream(config, ref.store)
        except ConfigError as e:
            raise ConfigError(f"the config of job {job}: {e}", hint=e.hint_parts) from None
        if ss is None:
            raise NotFoundError(f"the config of job {job} names no changelog for store {ref.store!r} ({key})"
                                + ("" if config else f" (it has no config on coordinator stream "
                                                     f"{coordinator_topic(ref.job, ref.job_id)})"),
                                hint="pass --changelog")
        where = f"the config of job {job}: {key}={config[key]}"
    else:
        changelog = changelog.strip()
        where = f"--changelog {changelog}"
        if "." in changelog or changelog_system(config) is not None:
            ss = qualify_stream(changelog, config, where=where)
        else:
            ss = SystemStream(GUESSED_SYSTEM, changelog)
            notes.append(f"taking changelog {changelog!r} to be on system {GUESSED_SYSTEM!r} ("
                         + ("no coordinator stream" if model is None else f"no config of job {job} on its coordinator "
                            "stream" if not config else f"the config of job {job} defines neither "
                            "job.changelog.system nor job.default.system")
                         + f"); pass --changelog <system>.{changelog} if the job names it otherwise")
    if not ss.stream:
        raise UsageError(f"{where} names no topic", hint="pass the changelog topic, as <system>.<topic> or <topic>")
    return ss, where


def _task_partition(ref: StoreRef, model: JobModel | None, problems: list[str], notes: list[str]) -> int:
    """The task's changelog partition in the job model (the stream's ``set-changelog`` mapping,
    ChangelogStreamManager; a TaskModel's changelog-partition in ZooKeeper): JobModelCalculator gives partitions
    out in lexicographic task-name order, so ``Partition 10`` of 12 tasks is on partition 2. Only without a
    model is it guessed from a task named ``Partition N``, with a note. Errors as resolve_changelog's."""
    if model is not None:
        return _mapped_partition(model, ref.task, problems)
    job = f"{ref.job}-{ref.job_id}"
    partition = _partition_from_name(ref.task)
    if partition is None:
        raise UsageError(f"task {ref.task!r} does not say its changelog partition and job {job} has no "
                         "coordinator stream to map it", hint="pass --partition")
    notes.append(f"job {job} has no coordinator stream: guessing changelog partition {partition} from the task "
                 f"name {ref.task!r}; Samza gives partitions out in task-name order (with 11 or more tasks "
                 "'Partition 10' is not on partition 10), so pass --partition unless the job has always "
                 "had fewer than 11 tasks")
    return partition


def _partition_from_name(task: str) -> int | None:
    """N of a GroupByPartition task named ``Partition N`` (Partition.toString of ``new Partition(N)``)."""
    name = task.split(" ")
    if len(name) == 2 and name[0] == "Partition" and name[1].isascii() and name[1].isdigit():
        return int(name[1])
    return None


def _mapped_partition(model: JobModel, task: str, problems: list[str]) -> int:
    """The task's partition in the job model's mapping; NotFoundError (exit 10) when it has none;
    StatectlError (exit 1) when another task (not one of its standbys) has it too."""
    from statectl.formats.coordinator import SET_CHANGELOG

    mapping, modes = model.changelog_partitions, model.task_modes
    partition = mapping.get(task)
    if partition is None:
        bad = [p for p in problems if f"{SET_CHANGELOG} {task!r}" in p]
        # A model that lists its tasks' SSPs (ZooKeeper's) has every task it knows: no set-changelog to miss.
        why = (f"no {SET_CHANGELOG} message for it{': ' + bad[-1] if bad else ''}" if not model.task_ssps else
               f"no such task in its {len(mapping)} task(s)")
        raise NotFoundError(f"{model.where} maps task {task!r} to no changelog partition ({why})",
                            hint="pass --partition with the task's changelog partition")
    me = active_name(task, modes)
    others = sorted({active_name(t, modes) for t, p in mapping.items() if p == partition} - {me})
    if others:
        raise StatectlError(f"{model.where} maps changelog partition {partition} to both task "
                            f"{me!r} and task {others[0]!r}" + (f" (and {len(others) - 1} more)" if len(others) > 1
                                                                else "") + ": whose data it holds is unknown",
                            hint="pass --partition if you know the task's changelog partition")
    return partition


def _check_partition_count(bootstrap: str, topic: str, model: JobModel, *,
                           security: KafkaSecurity | None, timeout_s: float) -> None:
    """NotFoundError (exit 10) when ``topic`` exists with fewer partitions than the mapping names (Samza's
    KafkaSystemAdmin.validateStream refuses such a changelog: the mapping is not this topic's). A missing
    topic is left to the caller (follow says so)."""
    from statectl.kafka.client import partition_count

    consumer = open_consumer(bootstrap, timeout_s=timeout_s, security=security)
    try:
        n = partition_count(consumer, topic, bootstrap)
    finally:
        consumer.close()
    task, highest = max(model.changelog_partitions.items(), key=lambda kv: (kv[1], kv[0]))
    if n is not None and n <= highest:
        raise NotFoundError(f"changelog topic {topic} has {n} partition{'s' if n != 1 else ''}, but {model.where} "
                            f"maps task {task!r} to partition {highest}: the mapping is not "
                            "this topic's", hint="check --changelog and the job's stores.<store>.changelog, or pass "
                                                 "--partition")
