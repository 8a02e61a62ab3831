"""Samza's coordinator stream (FORMATS.md "Coordinator stream"): the job's metadata store topic.

Read off Samza's CoordinatorStreamUtil / KafkaSystemFactory (the topic name), CoordinatorStreamKeySerde,
CoordinatorStreamMessage and SetConfig (keys and set-config values; docs/samza/drain.md), and
SetContainerHostMapping, SetTaskContainerMapping, SetTaskModeMapping and StandbyTaskUtil (the locality and
task-assignment messages, standby task names; docs/samza/standby.md sections 1-3), and SetChangelogMapping
with ChangelogStreamManager (the task -> changelog partition mapping; docs/samza/standby.md section 4).
Pure; no I/O.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from statectl.errors import UsageError
from statectl.formats.jackson import java_hashmap_order, to_json_text
from statectl.formats.java import java_utf8
from statectl.formats.java import JAVA_INT_MAX, JAVA_INT_MIN, java_is_blank, java_parse_long

# Kafka's legal topic names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def coordinator_topic(job: str, job_id: str) -> str:
    """``__samza_coordinator_<job>_<job-id>`` with ``_`` replaced by ``-`` in both names.

    Raises UsageError when the result is not a legal Kafka topic name.
    """
    topic = f"__samza_coordinator_{job.replace('_', '-')}_{job_id.replace('_', '-')}"
    if not _TOPIC.fullmatch(topic):
        raise UsageError(f"job {job!r} (id {job_id!r}) gives coordinator topic {topic!r}, which is not a legal "
                         "Kafka topic name", hint="job names and ids may use letters, digits, '.', '_' and '-'")
    return topic


# The coordinator-stream message version (CoordinatorStreamMessage.VERSION), first in every key.
KEY_VERSION = 1
SET_CONFIG = "set-config"
RUN_ID_CONFIG = "app.run.id"
# The source JobRunner writes its set-config messages with.
JOB_RUNNER_SOURCE = "job-runner"


class CoordinatorFormatError(ValueError):
    """A coordinator-stream key or value that is not in Samza's format."""


def encode_key(namespace: str, key: str) -> bytes:
    """``[1,"<namespace>","<key>"]``, as CoordinatorStreamKeySerde writes it (JsonSerde: ``writeValueAsString``
    then ``getBytes("UTF-8")``: a character outside the BMP as its 4 UTF-8 bytes, an unpaired surrogate as
    ``?``)."""
    return java_utf8(to_json_text([KEY_VERSION, namespace, key]))


def decode_key(data: bytes | None) -> tuple[str, str]:
    """(namespace, key) of a coordinator-stream key. Like Samza's reader, only the 2nd and 3rd elements
    count (the version is not checked). Raises CoordinatorFormatError."""
    if data is None:
        raise CoordinatorFormatError("coordinator-stream record without a key")
    try:
        arr = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CoordinatorFormatError(f"coordinator-stream key is not JSON ({e})") from None
    if not isinstance(arr, list) or len(arr) < 3 or not isinstance(arr[1], str) or not isinstance(arr[2], str):
        raise CoordinatorFormatError("coordinator-stream key is not a [version, namespace, key] array")
    return arr[1], arr[2]


def encode_set_config(value: str, *, host: str, source: str = JOB_RUNNER_SOURCE, username: str,
                      timestamp_ms: int) -> bytes:
    """A set-config message value as CoordinatorStreamSystemProducer writes it: the message map copied into
    an 8-slot HashMap (host, source, values, username, timestamp), ``values`` holding ``value``."""
    fields: dict[str, Any] = {"values": {"value": value}, "host": host, "source": source, "username": username,
                              "timestamp": timestamp_ms}
    return java_utf8(to_json_text({k: fields[k] for k in java_hashmap_order(fields, 8)}))


def decode_set_config(data: bytes | None) -> str | None:
    """The config value of a set-config message (``values.value``, as CoordinatorStreamValueSerde reads
    it); None for a tombstone. Raises CoordinatorFormatError."""
    if data is None:
        return None
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CoordinatorFormatError(f"set-config value is not JSON ({e})") from None
    values = obj.get("values") if isinstance(obj, dict) else None
    value = values.get("value") if isinstance(values, dict) else None
    if not isinstance(value, str):
        raise CoordinatorFormatError("set-config value has no values.value string")
    return value


def new_run_id(now_ms: int | None = None) -> str:
    """A run id as Samza's RemoteJobPlanner makes one: ``<currentTimeMillis>-<first 8 chars of a UUID>``."""
    return f"{now_ms if now_ms is not None else int(time.time() * 1000)}-{str(uuid.uuid4())[:8]}"


# -- locality and task assignments (docs/samza/standby.md sections 1-3) --------------------------------------

# LocalityManager's namespace: container (processor) id -> the host it last ran on.
SET_CONTAINER_HOST = "set-container-host-assignment"
# TaskAssignmentManager's namespaces: task name -> container id, task name -> TaskMode.
SET_TASK_CONTAINER = "set-task-container-assignment"
SET_TASK_MODE = "set-task-mode-assignment"
# The source CoordinatorStreamValueSerde gives every one of these messages, whoever writes them (the javadocs'
# "SamzaContainer-$ContainerId" and "SamzaTaskAssignmentManager" are wrong).
SAMZA_CONTAINER_SOURCE = "SamzaContainer"
# TaskMode.toString(); read back with TaskMode.valueOf, which is case-sensitive.
TASK_MODE_ACTIVE = "Active"
TASK_MODE_STANDBY = "Standby"
TASK_MODES = (TASK_MODE_ACTIVE, TASK_MODE_STANDBY)
# StandbyTaskUtil.STANDBY_TASKNAME_PREFIX and TASKNAME_SEPARATOR.
STANDBY_TASK_PREFIX = "Standby"
_STANDBY_SEPARATOR = "-"
# String.valueOf(int) of a replica number (0 .. RF-2): no sign, no leading zeros.
_REPLICA = re.compile(r"0|[1-9][0-9]*")


def _encode_message(values: dict[str, str], *, host: str, username: str, timestamp_ms: int) -> bytes:
    """A CoordinatorStreamValueSerde value: the message map copied into an 8-slot HashMap (host, source,
    values, username, timestamp), ``values`` the message's own HashMap<String, String> (16 slots), both in
    Java's iteration order."""
    inner = {k: values[k] for k in java_hashmap_order(values)}
    fields: dict[str, Any] = {"values": inner, "host": host, "source": SAMZA_CONTAINER_SOURCE,
                              "username": username, "timestamp": timestamp_ms}
    return java_utf8(to_json_text({k: fields[k] for k in java_hashmap_order(fields, 8)}))


def _decode_message(data: bytes | None, namespace: str, field: str) -> str | None:
    """``values.<field>`` of a CoordinatorStreamValueSerde value (the rest is ignored, as Samza does); None
    for a tombstone. Raises CoordinatorFormatError."""
    if data is None:
        return None
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CoordinatorFormatError(f"{namespace} value is not JSON ({e})") from None
    values = obj.get("values") if isinstance(obj, dict) else None
    value = values.get(field) if isinstance(values, dict) else None
    if not isinstance(value, str):
        raise CoordinatorFormatError(f"{namespace} value has no values.{field} string")
    return value


def encode_container_host(host_name: str, *, writer_host: str, username: str, timestamp_ms: int) -> bytes:
    """A set-container-host-assignment value as SamzaContainer.storeContainerLocality writes it:
    ``values`` = {jmx-url: "", host: ``host_name``, jmx-tunneling-url: ""} (its only writer passes empty
    JMX URLs), source "SamzaContainer". ``host_name`` is the container's host *name*; ``writer_host`` the
    writer's IP address (the envelope's ``host``). The key is the container id (:func:`encode_key`)."""
    return _encode_message({"host": host_name, "jmx-url": "", "jmx-tunneling-url": ""}, host=writer_host,
                           username=username, timestamp_ms=timestamp_ms)


def decode_container_host(data: bytes | None) -> str | None:
    """The host of a set-container-host-assignment value (``values.host``; the JMX URLs are ignored, as
    LocalityManager.readLocality ignores them); None for a tombstone. An empty host is returned as it is
    (Samza treats a blank host as "any host"). Raises CoordinatorFormatError."""
    return _decode_message(data, SET_CONTAINER_HOST, "host")


def encode_task_container(container_id: str, *, writer_host: str, username: str, timestamp_ms: int) -> bytes:
    """A set-task-container-assignment value as TaskAssignmentManager writes it: ``values`` =
    {containerId: ``container_id``}, source "SamzaContainer". The key is the task name."""
    return _encode_message({"containerId": container_id}, host=writer_host, username=username,
                           timestamp_ms=timestamp_ms)


def decode_task_container(data: bytes | None) -> str | None:
    """The container id of a set-task-container-assignment value (``values.containerId``); None for a
    tombstone. Raises CoordinatorFormatError."""
    return _decode_message(data, SET_TASK_CONTAINER, "containerId")


def _check_mode(mode: object) -> str:
    if mode not in TASK_MODES:
        raise CoordinatorFormatError(f"task mode {mode!r} is not one of {', '.join(TASK_MODES)} "
                                     "(Samza's TaskMode.valueOf is case-sensitive)")
    return mode  # type: ignore[return-value]


def encode_task_mode(mode: str, *, writer_host: str, username: str, timestamp_ms: int) -> bytes:
    """A set-task-mode-assignment value as TaskAssignmentManager writes it: ``values`` = {taskMode:
    ``mode``}, source "SamzaContainer". ``mode`` is "Active" or "Standby" exactly (TaskMode.toString());
    anything else (e.g. the javadoc's "active", which Samza's reader would throw on) raises
    CoordinatorFormatError. The key is the task name."""
    return _encode_message({"taskMode": _check_mode(mode)}, host=writer_host, username=username,
                           timestamp_ms=timestamp_ms)


def decode_task_mode(data: bytes | None) -> str | None:
    """The mode of a set-task-mode-assignment value (``values.taskMode``: "Active" or "Standby"); None for
    a tombstone. A missing or other mode raises CoordinatorFormatError, where Samza's
    ``TaskMode.valueOf`` would throw."""
    mode = _decode_message(data, SET_TASK_MODE, "taskMode")
    return None if mode is None else _check_mode(mode)


def standby_task_name(task: str, replica: int) -> str:
    """``Standby-<task>-<replica>``: the name of replica ``replica`` (0 .. RF-2) of active task ``task``
    (StandbyTaskUtil.getStandbyTaskName). Raises ValueError for a replica that is not an int >= 0."""
    if isinstance(replica, bool) or not isinstance(replica, int) or replica < 0:
        raise ValueError(f"standby replica number {replica!r} is not an integer >= 0")
    return f"{STANDBY_TASK_PREFIX}{_STANDBY_SEPARATOR}{task}{_STANDBY_SEPARATOR}{replica}"


def active_of_standby(name: str) -> tuple[str, int] | None:
    """(active task name, replica number) of a standby task name ``Standby-<task>-<replica>``, or None when
    ``name`` does not have that shape (an empty task, a replica that is not a plain non-negative number).

    The replica is split off from the right, so an active task name containing ``-`` comes back whole:
    ``"Standby-a-b-1"`` -> ``("a-b", 1)``, ``"Standby-Partition 0-0"`` -> ``("Partition 0", 0)``. Samza's
    own ``StandbyTaskUtil.getActiveTaskName`` takes ``split("-")[1]`` and would answer ``"a"`` there; it
    agrees only for task names without ``-`` (such as GroupByPartition's ``Partition N``). The shape alone
    does not make a task a standby (an active task may be named like one): the task-mode assignment says.
    """
    prefix = STANDBY_TASK_PREFIX + _STANDBY_SEPARATOR
    if not name.startswith(prefix):
        return None
    task, sep, replica = name[len(prefix):].rpartition(_STANDBY_SEPARATOR)
    if not sep or not task or not _REPLICA.fullmatch(replica):
        return None
    return task, int(replica)


# -- the changelog partition mapping (docs/samza/standby.md section 4, "Records") -------------------------------

# SetChangelogMapping.TYPE: task name -> its changelog partition, ``values.Partition`` (capital P) = "<n>".
SET_CHANGELOG = "set-changelog"
_CHANGELOG_FIELD = "Partition"


def encode_changelog_partition(partition: int, *, writer_host: str, username: str, timestamp_ms: int) -> bytes:
    """A set-changelog value as ChangelogStreamManager.writePartitionMapping writes it through
    CoordinatorStreamValueSerde (``new SetChangelogMapping(SOURCE, "", Integer.valueOf(value))``):
    ``values`` = {Partition: ``String.valueOf(partition)``}, source "SamzaContainer". The key is the task
    name (:func:`encode_key`); a task's deletion is a tombstone. Raises ValueError for a partition that is
    not an int in 0 .. Integer.MAX_VALUE."""
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= JAVA_INT_MAX:
        raise ValueError(f"changelog partition {partition!r} is not an integer in 0 .. {JAVA_INT_MAX}")
    return _encode_message({_CHANGELOG_FIELD: str(partition)}, host=writer_host, username=username,
                           timestamp_ms=timestamp_ms)


def decode_changelog_partition(data: bytes | None) -> int | None:
    """The changelog partition of a set-changelog value, as ChangelogStreamManager.readPartitionMapping
    reads it: ``values.Partition`` through ``Integer.parseInt`` (so ``"+7"`` and ``"007"`` are 7). None for a
    tombstone and for a blank value, which Samza skips (``StringUtils.isNotBlank``). A missing field, a
    non-string, or text Integer.parseInt throws on raises CoordinatorFormatError; so does a negative number,
    which Samza would read but which names no partition."""
    text = _decode_message(data, SET_CHANGELOG, _CHANGELOG_FIELD)
    if text is None or java_is_blank(text):
        return None
    partition = java_parse_long(text, minimum=JAVA_INT_MIN, maximum=JAVA_INT_MAX)
    if partition is None:
        raise CoordinatorFormatError(f"{SET_CHANGELOG} value's values.{_CHANGELOG_FIELD} {text!r} is not an int")
    if partition < 0:
        raise CoordinatorFormatError(f"{SET_CHANGELOG} value names partition {partition}, which is negative")
    return partition
