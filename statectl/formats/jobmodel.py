"""A Samza job's model as statectl reads it: one :class:`JobModel` whatever holds it (the coordinator stream of
a cluster job, ZooKeeper for a standalone one), the :class:`JobModelSource` protocol both readers follow, and
the bytes a standalone job keeps in ZooKeeper decoded. Pure; no I/O.

The serialized JobModel is SamzaObjectMapper's JSON (JsonJobModelMixIn, JsonContainerModelMixIn,
JsonTaskModelMixIn, CamelCaseToDashesStrategy)::

    {"config": {...},
     "containers": {"<processor id>": {"processor-id": "<id>",
                                       "tasks": {"<task>": {"task-name": "<task>",
                                                            "system-stream-partitions": [{"system": .., "stream": ..,
                                                                                          "partition": 3,
                                                                                          "keyBucket": -1}],
                                                            "changelog-partition": 2,
                                                            "task-mode": "Active"}}}},
     "max-change-log-stream-partitions": 12}

ZkJobCoordinator (Samza 1.3 and later, coordination protocol 2.0) stores it through ZkMetadataStore, which
appends the CRC32 of the JSON as a big-endian long and splits the result into znodes of 1020 * 1020 bytes
(``.../<version>/0``, ``/1``, ..): :func:`join_segments` undoes that.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from statectl.formats.checkpoint import SSP, CheckpointFormatError
from statectl.formats.coordinator import active_of_standby

# ZkMetadataStore.CHECKSUM_SIZE_IN_BYTES: Longs.toByteArray(CRC32.getValue()) after the value.
CHECKSUM_SIZE = 8
ACTIVE, STANDBY = "Active", "Standby"


class JobModelFormatError(ValueError):
    """Bytes that are not a JobModel as Samza serializes it."""


@dataclass(frozen=True)
class Locality:
    """The job's locality and task assignments as the coordinator stream holds them (deleted and malformed
    entries left out). ``container_hosts``: container (processor) id -> the host name it last ran on
    (LocalityManager; actives ``"0"``.. and standbys ``"0-0"``..); ``task_containers``: task name ->
    container id; ``task_modes``: task name -> "Active" or "Standby" (TaskAssignmentManager)."""

    container_hosts: dict[str, str]
    task_containers: dict[str, str]
    task_modes: dict[str, str]


@dataclass(frozen=True)
class JobModel:
    """What statectl knows of a job, read once: ``config``, ``changelog_partitions`` (task name -> changelog
    partition; standby tasks share their active's partition), the locality (``container_hosts``,
    ``task_containers``, ``task_modes``: see :class:`Locality`), ``task_ssps`` (task name -> the SSPs the
    job model gives it; empty when the source does not say, as the coordinator stream does not) and
    ``where`` (what it was read from, for messages: "the coordinator stream of job pv-1")."""

    config: dict[str, str]
    changelog_partitions: dict[str, int]
    container_hosts: dict[str, str]
    task_containers: dict[str, str]
    task_modes: dict[str, str]
    task_ssps: dict[str, frozenset[SSP]] = field(default_factory=dict)
    where: str = "the coordinator stream"

    @property
    def locality(self) -> Locality:
        return Locality(self.container_hosts, self.task_containers, self.task_modes)

    def active_tasks(self) -> set[str]:
        """Every task the model names (a container or mode assignment, a changelog partition) but its standby
        tasks: those in mode Standby, and those with no mode named as a standby (``Standby-<task>-<n>``), whose
        store dir is their active's (StorageManagerUtil.getTaskStoreDir)."""
        named = set(self.task_containers) | set(self.task_modes) | set(self.changelog_partitions) | set(self.task_ssps)
        return {t for t in named if self.task_modes.get(t) != "Standby"
                and not (t not in self.task_modes and active_of_standby(t) is not None)}


def changelog_partitions_of(tasks: list[str], mapping: dict[str, int]) -> dict[str, int]:
    """The changelog partition each of ``tasks`` (the tasks of the job's next model) gets: its entry in the
    job's set-changelog ``mapping``, else, in task name order, one past the largest partition the mapping
    holds (Samza's JobModelCalculator: a TaskName it has never seen gets ``max + 1``; TaskName orders by
    its string, so ``Partition 10`` comes before ``Partition 2``)."""
    out = {t: mapping[t] for t in tasks if t in mapping}
    top = max(mapping.values(), default=-1)
    for task in sorted(t for t in tasks if t not in mapping):
        top += 1
        out[task] = top
    return out


class JobModelSource(Protocol):
    """Where a job's model is kept: ``read_job_model()`` reads it whole (None: this source holds nothing of
    the job); ``problems``: what was skipped as malformed while reading."""

    def read_job_model(self) -> JobModel | None: ...

    @property
    def problems(self) -> list[str]: ...


def join_segments(segments: list[bytes]) -> bytes:
    """The value ZkMetadataStore.put split into ``segments`` (in order): their concatenation less its last 8
    bytes, which must be the CRC32 of the rest as a big-endian long (ZkMetadataStore.get).
    JobModelFormatError when there is no checksum or it does not match."""
    data = b"".join(segments)
    if len(data) < CHECKSUM_SIZE:
        raise JobModelFormatError(f"{len(data)} bytes: too short for ZkMetadataStore's 8-byte checksum")
    value, stored = data[:-CHECKSUM_SIZE], int.from_bytes(data[-CHECKSUM_SIZE:], "big")
    if zlib.crc32(value) != stored:
        raise JobModelFormatError(f"its checksum does not match: CRC32 {zlib.crc32(value)} of its {len(value)} "
                                  f"bytes, {stored} stored after them")
    return value


def decode_job_model(data: bytes, *, where: str) -> JobModel:
    """A JobModel from SamzaObjectMapper's JSON (UTF-8): every container's tasks with their changelog partition,
    mode (missing or "": Active, TaskModeDeserializer) and SSPs, and the model's config. A container without
    "processor-id" is identified by the integer "container-id" of Samza before 0.13. Unknown fields are
    ignored, as Samza's mixins ignore them. JobModelFormatError for anything else Samza would not read, a task
    in two containers, or a changelog partition that is not an int >= 0. ``where``: the model's origin, for
    messages."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise JobModelFormatError(f"not JSON ({e})") from None
    containers = obj.get("containers") if isinstance(obj, dict) else None
    if not isinstance(containers, dict):
        raise JobModelFormatError("no \"containers\" object")
    config = obj.get("config") or {}
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise JobModelFormatError("\"config\" is not an object of strings")
    model = JobModel(dict(config), {}, {}, {}, {}, {}, where)
    for key, container in containers.items():
        cid = _container_id(key, container)
        for task, tm in container["tasks"].items():
            if task in model.task_containers:
                raise JobModelFormatError(f"task {task!r} is in container {model.task_containers[task]!r} and in "
                                          f"container {cid!r}")
            partition, mode, ssps = _task(task, tm)
            model.task_containers[task] = cid
            model.changelog_partitions[task] = partition
            model.task_modes[task] = mode
            model.task_ssps[task] = ssps
    return model


def _container_id(key: str, container: Any) -> str:
    """The container's id as SamzaObjectMapper's ContainerModel deserializer takes it."""
    if not isinstance(container, dict) or not isinstance(container.get("tasks"), dict):
        raise JobModelFormatError(f"container {key!r} has no \"tasks\" object")
    cid = container.get("processor-id")
    if cid is None:
        cid = container.get("container-id")
        if not isinstance(cid, int) or isinstance(cid, bool):
            raise JobModelFormatError(f"container {key!r} has neither \"processor-id\" nor \"container-id\"")
        cid = str(cid)
    if not isinstance(cid, str):
        raise JobModelFormatError(f"container {key!r}: \"processor-id\" is not a string")
    return cid


def _task(task: str, tm: Any) -> tuple[int, str, frozenset[SSP]]:
    """(changelog partition, mode, SSPs) of one TaskModel's JSON."""
    if not isinstance(tm, dict):
        raise JobModelFormatError(f"task {task!r} is not an object")
    partition = tm.get("changelog-partition")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise JobModelFormatError(f"task {task!r}: \"changelog-partition\" is {json.dumps(partition)}, not a "
                                  "partition number")
    mode = tm.get("task-mode") or ACTIVE
    if mode not in (ACTIVE, STANDBY):
        raise JobModelFormatError(f"task {task!r}: \"task-mode\" {mode!r} is neither Active nor Standby")
    raw = tm.get("system-stream-partitions", [])
    if not isinstance(raw, list):
        raise JobModelFormatError(f"task {task!r}: \"system-stream-partitions\" is not a list")
    try:
        ssps = frozenset(SSP.from_json(s) for s in raw)
    except CheckpointFormatError as e:
        raise JobModelFormatError(f"task {task!r}: {e}") from None
    return partition, mode, ssps
