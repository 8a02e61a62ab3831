"""Samza's checkpoint topic, byte for byte (FORMATS.md "Checkpoint topic").

Read off Samza's sources: KafkaCheckpointLogKeySerde (keys), CheckpointV1Serde (v1 values),
CheckpointV2Serde with JsonCheckpointV2Mixin and SamzaObjectMapper (v2 values),
KafkaStateCheckpointMarker with its mixin (the Kafka changelog marker), CheckpointId, and
KafkaCheckpointManagerFactory (the topic name).

Samza writes JSON with Jackson (formats.jackson): compact (no spaces), UTF-8, control characters escaped
as ``\\uXXXX`` with upper-case hex (``\\b \\t \\n \\f \\r`` in short form), ``/`` and the rest of the
BMP left as they are; keys and values (``writeValueAsBytes``) escape non-BMP characters as surrogate
pairs, the changelog marker (``writeValueAsString``) does not.
Objects built from a fixed set of keys follow Jackson's order: an ImmutableMap's insertion order (keys),
creator properties first (v2 values, markers), or a ``java.util.HashMap``'s iteration order, which
:func:`java_hashmap_order` reproduces (v1 values, a marker's changelog-ssp). Maps that Samza fills from
its own runtime maps (input offsets, state markers) keep the order they are given in here: readers must
not depend on it. Decoders accept any key order and ignore unknown fields.

Everything here is pure; malformed input raises :class:`CheckpointFormatError` (a ValueError).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import UsageError
# Checkpoint ids and the format error have a module of their own (the catalog and every restore read ids
# without the checkpoint formats); they are this module's names too.
from statectl.formats.checkpoint_id import CheckpointFormatError, is_canonical_checkpoint_id  # noqa: F401
from statectl.formats.checkpoint_id import parse_checkpoint_id
from statectl.formats.jackson import java_hashmap_order, java_string_hash, to_json, to_json_text  # noqa: F401

GROUP_BY_PARTITION_FACTORY = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
BLOB_STORE_FACTORY = "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory"
KAFKA_CHANGELOG_FACTORY = "org.apache.samza.storage.KafkaChangelogStateBackendFactory"

KEY_TYPE_V1 = "checkpoint"
KEY_TYPE_V2 = "checkpoint-v2"
CHECKPOINT_V2_VERSION = 2
CHANGELOG_MARKER_VERSION = 1

# A v1 changelog entry of a transactional-state job: CheckpointedChangelogOffset "<checkpointId>:<offset>".
_CHECKPOINTED_CHANGELOG_OFFSET = re.compile(r"([0-9]+-[0-9]+):(.*)", re.DOTALL)
# Kafka's legal topic names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


# -- topic ---------------------------------------------------------------------------------------


CHECKPOINT_TOPIC_PREFIX = "__samza_checkpoint_ver_1_for_"


def checkpoint_topic(job: str, job_id: str) -> str:
    """``__samza_checkpoint_ver_1_for_<job>_<job-id>`` with ``_`` replaced by ``-`` in both names.

    Raises UsageError when the result is not a legal Kafka topic name.
    """
    topic = f"{CHECKPOINT_TOPIC_PREFIX}{job.replace('_', '-')}_{job_id.replace('_', '-')}"
    if not _TOPIC.fullmatch(topic):
        raise UsageError(f"job {job!r} (id {job_id!r}) gives checkpoint topic {topic!r}, which is not a legal "
                         "Kafka topic name", hint="job names and ids may use letters, digits, '.', '_' and '-'")
    return topic


def job_of_checkpoint_topic(topic: str) -> tuple[str, str] | None:
    """(job, job id) a checkpoint topic belongs to, split at its last ``_`` (a job name's ``_`` reads as the
    ``-`` the topic spells it with, which names the same topic); None for a topic that is not one."""
    if not topic.startswith(CHECKPOINT_TOPIC_PREFIX):
        return None
    job, sep, job_id = topic[len(CHECKPOINT_TOPIC_PREFIX):].rpartition("_")
    return (job, job_id) if sep and job and job_id else None


# -- checkpoint ids --------------------------------------------------------------------------------


# -- JSON as Jackson writes it -------------------------------------------------------------------

def jackson_json(obj: Any) -> bytes:
    """``obj`` as Jackson's ObjectMapper ``writeValueAsBytes`` writes it (formats.jackson.to_json).

    Raises CheckpointFormatError for a value JSON cannot hold (not a str, int, bool, None, dict or list).
    """
    try:
        return to_json(obj)
    except TypeError as e:
        raise CheckpointFormatError(str(e)) from None


def _load_json(data: bytes | str, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, TypeError) as e:  # UnicodeDecodeError is a ValueError
        raise CheckpointFormatError(f"{what} is not valid JSON: {e}") from None


# -- keys ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointKey:
    """A record key of the checkpoint topic (KafkaCheckpointLogKey)."""

    task: str
    type: str = KEY_TYPE_V2
    grouper_factory: str = GROUP_BY_PARTITION_FACTORY

    @property
    def version(self) -> int | None:
        """1 or 2 for the checkpoint types Samza writes, None for a type it does not know."""
        return {KEY_TYPE_V1: 1, KEY_TYPE_V2: 2}.get(self.type)


def encode_key(key: CheckpointKey) -> bytes:
    """``{"systemstreampartition-grouper-factory":..,"taskName":..,"type":..}`` in that order."""
    return jackson_json({
        "systemstreampartition-grouper-factory": key.grouper_factory,
        "taskName": key.task,
        "type": key.type,
    })


def decode_key(data: bytes | None) -> CheckpointKey:
    """Parse a record key; every field must be a string. Raises CheckpointFormatError."""
    if data is None:
        raise CheckpointFormatError("checkpoint record without a key")
    obj = _load_json(data, "checkpoint key")
    if not isinstance(obj, dict):
        raise CheckpointFormatError("checkpoint key is not a JSON object")
    fields = {}
    for name in ("systemstreampartition-grouper-factory", "taskName", "type"):
        value = obj.get(name)
        if not isinstance(value, str):
            raise CheckpointFormatError(f"checkpoint key has no string {name!r}")
        fields[name] = value
    return CheckpointKey(task=fields["taskName"], type=fields["type"],
                         grouper_factory=fields["systemstreampartition-grouper-factory"])


# -- system stream partitions ----------------------------------------------------------------------


@dataclass(frozen=True)
class SSP:
    """A Samza SystemStreamPartition; ``key_bucket`` -1 means none (Samza's default)."""

    system: str
    stream: str
    partition: int
    key_bucket: int = -1

    def key(self) -> str:
        """The map-key form of v2 input offsets: ``system.stream.partition``."""
        return f"{self.system}.{self.stream}.{self.partition}"

    def java_hash(self) -> int:
        """``SystemStreamPartition.hashCode()`` (32 bits): SystemStream's ``31 * (31 + stream) + system``, then
        ``31 * h + partition`` and ``31 * h + 0``. The key bucket never counts: the constructors compute the
        hash before they set it, while the field still holds 0 (SystemStreamPartition.computeHashCode)."""
        h = (31 * (31 + java_string_hash(self.stream)) + java_string_hash(self.system)) & 0xFFFFFFFF
        h = (31 * h + self.partition) & 0xFFFFFFFF
        return (31 * h) & 0xFFFFFFFF

    def java_string(self) -> str:
        """``SystemStreamPartition.toString()``, the map key of v1 values: ``SystemStreamPartition [s, st, p]``."""
        return f"SystemStreamPartition [{self.system}, {self.stream}, {self.partition}]"

    def to_json(self) -> dict[str, Any]:
        """SamzaObjectMapper's SSP object (a HashMap: system, partition, stream, keyBucket)."""
        values = {"system": self.system, "stream": self.stream, "partition": self.partition,
                  "keyBucket": self.key_bucket}
        return {k: values[k] for k in java_hashmap_order(values)}

    @classmethod
    def from_json(cls, obj: Any) -> "SSP":
        """Parse SamzaObjectMapper's SSP object (``keyBucket`` optional). Raises CheckpointFormatError."""
        if not isinstance(obj, dict):
            raise CheckpointFormatError("system stream partition is not a JSON object")
        system, stream, partition = obj.get("system"), obj.get("stream"), obj.get("partition")
        bucket = obj.get("keyBucket", -1)
        if not isinstance(system, str) or not isinstance(stream, str):
            raise CheckpointFormatError(f"system stream partition without system/stream: {obj!r}")
        if not _is_int(partition) or not _is_int(bucket):
            raise CheckpointFormatError(f"system stream partition with a non-integer partition: {obj!r}")
        return cls(system, stream, int(partition), int(bucket))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_ssp_key(value: str) -> SSP:
    """Parse an input-offsets key: ``system.stream.partition``, or ``system.stream.partition.keyBucket`` as
    later Samza versions write it. The stream may itself contain dots. Raises CheckpointFormatError."""
    parts = value.split(".")
    try:
        if len(parts) == 4 and _int_text(parts[2]) and _int_text(parts[3]):
            return SSP(parts[0], parts[1], int(parts[2]), int(parts[3]))
        if len(parts) >= 3 and parts[0] and _int_text(parts[-1]):
            return SSP(parts[0], ".".join(parts[1:-1]), int(parts[-1]))
    except ValueError:
        pass
    raise CheckpointFormatError(f"invalid system stream partition {value!r}: expected system.stream.partition")


def _int_text(s: str) -> bool:
    return bool(re.fullmatch(r"-?[0-9]+", s))


# -- v2 values -------------------------------------------------------------------------------------


@dataclass
class CheckpointV2:
    """A v2 checkpoint: its id, the input offsets (keys ``system.stream.partition``, kept as written) and
    ``state_checkpoint_markers``: state backend factory class name -> store -> marker."""

    checkpoint_id: str
    input_offsets: dict[str, Any] = field(default_factory=dict)
    state_checkpoint_markers: dict[str, dict[str, str]] = field(default_factory=dict)


def encode_v2(cp: CheckpointV2) -> bytes:
    """``{"checkpoint-id":..,"input-offsets":{..},"state-checkpoint-markers":{..},"version":2}``.

    Jackson puts the mixin's creator properties first, then the ``version`` getter. Raises
    CheckpointFormatError for an invalid checkpoint id.
    """
    parse_checkpoint_id(cp.checkpoint_id)
    return jackson_json({
        "checkpoint-id": cp.checkpoint_id,
        "input-offsets": cp.input_offsets,
        "state-checkpoint-markers": cp.state_checkpoint_markers,
        "version": CHECKPOINT_V2_VERSION,
    })


def decode_v2(data: bytes | None) -> CheckpointV2:
    """Parse a v2 value; ``version`` and unknown fields are ignored, missing maps read as empty.

    Raises CheckpointFormatError for anything else that Samza could not read either.
    """
    if data is None:
        raise CheckpointFormatError("v2 checkpoint record without a value")
    obj = _load_json(data, "v2 checkpoint")
    if not isinstance(obj, dict):
        raise CheckpointFormatError("v2 checkpoint is not a JSON object")
    cid = obj.get("checkpoint-id")
    parse_checkpoint_id(cid)
    offsets = obj.get("input-offsets")
    markers = obj.get("state-checkpoint-markers")
    offsets = {} if offsets is None else offsets
    markers = {} if markers is None else markers
    if not isinstance(offsets, dict) or not all(v is None or isinstance(v, str) for v in offsets.values()):
        raise CheckpointFormatError("v2 checkpoint 'input-offsets' is not a map of offset strings")
    if not isinstance(markers, dict):
        raise CheckpointFormatError("v2 checkpoint 'state-checkpoint-markers' is not a map")
    for factory, stores in markers.items():
        if not isinstance(stores, dict) or not all(isinstance(v, str) for v in stores.values()):
            raise CheckpointFormatError(f"v2 checkpoint markers of {factory} are not a map of strings")
    return CheckpointV2(cid, dict(offsets), {f: dict(s) for f, s in markers.items()})


# -- the Kafka changelog marker --------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaChangelogMarker:
    """A store's marker under KafkaChangelogStateBackendFactory: its changelog partition and the offset of
    the newest record the checkpoint covers (None: the changelog partition was empty)."""

    ssp: SSP
    offset: str | None


def encode_changelog_marker(marker: KafkaChangelogMarker) -> str:
    """``{"version":1,"changelog-ssp":{"system":..,"partition":N,"stream":..,"keyBucket":-1},"changelog-offset":..}``
    — a string (``writeValueAsString``: non-BMP characters unescaped), stored as a JSON string inside the
    v2 value."""
    return to_json_text({
        "version": CHANGELOG_MARKER_VERSION,
        "changelog-ssp": marker.ssp.to_json(),
        "changelog-offset": marker.offset,
    })


def decode_changelog_marker(text: str) -> KafkaChangelogMarker:
    """Parse a Kafka changelog marker string; ``version`` is ignored. Raises CheckpointFormatError."""
    obj = _load_json(text, "Kafka changelog marker")
    if not isinstance(obj, dict) or "changelog-ssp" not in obj:
        raise CheckpointFormatError(f"not a Kafka changelog marker: {text!r}")
    offset = obj.get("changelog-offset")
    if offset is not None and not isinstance(offset, str):
        raise CheckpointFormatError(f"Kafka changelog marker with a non-string offset: {text!r}")
    return KafkaChangelogMarker(SSP.from_json(obj["changelog-ssp"]), offset)


# -- v1 values -------------------------------------------------------------------------------------


@dataclass
class CheckpointV1:
    """A v1 checkpoint: offsets of every SSP of the task, inputs and (since transactional state) store
    changelogs alike, which the format cannot tell apart."""

    offsets: dict[SSP, str | None] = field(default_factory=dict)


def encode_v1(cp: CheckpointV1) -> bytes:
    """CheckpointV1Serde: a HashMap(size) from ``SSP.toString()`` to a HashMap(4) of system, stream,
    partition (a string) and offset, in HashMap iteration order."""
    outer: dict[str, dict[str, Any]] = {}
    for ssp, offset in cp.offsets.items():
        inner = {"system": ssp.system, "stream": ssp.stream, "partition": str(ssp.partition), "offset": offset}
        outer[ssp.java_string()] = {k: inner[k] for k in java_hashmap_order(inner, 4)}
    return jackson_json({k: outer[k] for k in java_hashmap_order(outer, len(outer))})


def decode_v1(data: bytes | None) -> CheckpointV1:
    """Parse a v1 value (map keys are ignored, as Samza does; ``offset`` may be null). Raises
    CheckpointFormatError."""
    if data is None:
        raise CheckpointFormatError("v1 checkpoint record without a value")
    obj = _load_json(data, "v1 checkpoint")
    if not isinstance(obj, dict):
        raise CheckpointFormatError("v1 checkpoint is not a JSON object")
    offsets: dict[SSP, str | None] = {}
    for name, info in obj.items():
        if not isinstance(info, dict):
            raise CheckpointFormatError(f"v1 checkpoint entry {name!r} is not an object")
        system, stream, partition, offset = (info.get(k) for k in ("system", "stream", "partition", "offset"))
        if not isinstance(system, str) or not isinstance(stream, str) or not isinstance(partition, str) \
                or not _int_text(partition) or not (offset is None or isinstance(offset, str)):
            raise CheckpointFormatError(f"v1 checkpoint entry {name!r} is malformed: {info!r}")
        offsets[SSP(system, stream, int(partition))] = offset
    return CheckpointV1(offsets)


def split_changelog_offset(value: str | None) -> tuple[str | None, str | None]:
    """(checkpoint id, offset) of a v1 changelog entry: ``<checkpointId>:<offset>`` (CheckpointedChangelogOffset,
    the literal ``null`` meaning no offset) for transactional-state jobs, a bare offset before that."""
    if value is None:
        return None, None
    m = _CHECKPOINTED_CHANGELOG_OFFSET.fullmatch(value)
    if not m:
        return None, value
    offset = m.group(2)
    return m.group(1), (None if offset == "null" else offset)
