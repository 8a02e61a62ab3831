"""Samza's coordinator stream (FORMATS.md "Coordinator stream"): the job's metadata store topic.

Read off Samza's CoordinatorStreamUtil / KafkaSystemFactory (the topic name), CoordinatorStreamKeySerde,
CoordinatorStreamMessage and SetConfig (keys and set-config values; docs/samza/drain.md). Pure; no I/O.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from statectl.errors import UsageError
from statectl.formats.jackson import java_hashmap_order, to_json_text

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
    """``[1,"<namespace>","<key>"]``, as CoordinatorStreamKeySerde writes it (JsonSerde: compact, UTF-8)."""
    return to_json_text([KEY_VERSION, namespace, key]).encode("utf-8")


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
    return to_json_text({k: fields[k] for k in java_hashmap_order(fields, 8)}).encode("utf-8")


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
