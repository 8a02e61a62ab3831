"""Samza's drain formats (docs/samza/drain.md quotes the Samza sources they were read off).

- The drain notification, a coordinator-stream message in namespace ``samza-drain-v1``
  (``DrainUtils``, ``DrainNotificationObjectMapper``): key ``[1,"samza-drain-v1","<uuid>"]``, value the
  raw JSON ``{"drainMode":"DEFAULT","runId":..,"uuid":..}`` (no ``values`` wrapper; the fields in
  java.util.HashMap order). The job's coordinator tombstones it after a clean shutdown.
- Control messages on intermediate streams (``IntermediateMessageSerde``): one type byte (0 user message,
  1 watermark, 2 end of stream, 3 drain), then JSON as JsonSerdeV2 writes it (``writeValueAsString``,
  then UTF-8 with an unpaired surrogate as ``?``), e.g.
  ``\\x03{"taskName":"Partition 0","version":1,"runId":".."}``; ``taskName`` null when an aggregating
  task re-broadcasts. Samza's reader fails on unknown fields: nothing else is ever written.
- The aggregate partition (``ControlMessageSender``): every upstream task sends its control messages
  to partition ``abs(String.hashCode(physical topic)) % partitions``.

Pure; no I/O.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

from statectl.formats.jackson import java_hashmap_order, java_string_hash, to_json, to_json_text
from statectl.formats.java import java_parse_long, java_utf8

DRAIN_NAMESPACE = "samza-drain-v1"
DRAIN_MODES = ("DEFAULT",)

USER_MESSAGE = 0
WATERMARK = 1
END_OF_STREAM = 2
DRAIN = 3
_TYPES = {USER_MESSAGE: "user message", WATERMARK: "watermark", END_OF_STREAM: "end of stream", DRAIN: "drain"}

# A watermark of Long.MAX_VALUE: what SystemConsumers injects on drain to fire every window.
WATERMARK_INFINITY = 2 ** 63 - 1


class DrainFormatError(ValueError):
    """A drain notification or an intermediate-stream message that is not in Samza's format."""


@dataclass(frozen=True)
class DrainNotification:
    """A request that the job run ``run_id`` drain. ``uuid`` is also its coordinator-stream key."""

    uuid: str
    run_id: str
    drain_mode: str = "DEFAULT"

    @classmethod
    def create(cls, run_id: str) -> DrainNotification:
        """A new notification for ``run_id`` with a random UUID (``DrainNotification.create``)."""
        if not run_id:
            raise DrainFormatError("a drain notification needs a run id")
        return cls(str(uuidlib.uuid4()), run_id)


def encode_notification(n: DrainNotification) -> bytes:
    """The value bytes, as DrainNotificationObjectMapper writes them (a HashMap: drainMode, runId, uuid)."""
    fields = {"uuid": n.uuid, "runId": n.run_id, "drainMode": n.drain_mode}
    return to_json({k: fields[k] for k in java_hashmap_order(fields)})


def decode_notification(data: bytes | None) -> DrainNotification:
    """Parse a notification value as Samza's deserializer does (DrainNotificationObjectMapper's
    DrainNotificationDeserializer: ``readTree``, then ``node.get(name).textValue()`` for uuid, runId and
    drainMode): the first JSON value of the bytes is read (Jackson leaves trailing content alone, but
    rejects NaN/Infinity); it must be an object whose three fields are JSON strings (a missing field, a
    null, a number... is a NullPointerException there); ``uuid`` is parsed by ``UUID.fromString`` (see
    :func:`java_uuid`) and kept in its canonical form; ``runId`` may be empty (only null is refused);
    ``drainMode`` upper-cased must name a DrainMode. Other fields are ignored. Raises DrainFormatError
    saying why, for anything DrainMonitor would throw on."""
    obj = _jackson_tree(data, "drain notification")
    if not isinstance(obj, dict):
        raise DrainFormatError("drain notification: not a JSON object")
    values = []
    for name in ("uuid", "runId", "drainMode"):
        v = obj.get(name)
        if not isinstance(v, str):
            what = "missing" if name not in obj else f"not a string ({_json_type(v)})"
            raise DrainFormatError(f"drain notification: {name!r} {what}")
        values.append(v)
    uuid, run_id, mode = values
    canonical = java_uuid(uuid)
    if canonical is None:
        raise DrainFormatError(f"drain notification: uuid {_clip(uuid)!r} is not a UUID (UUID.fromString)")
    mode = mode.upper()
    if mode not in DRAIN_MODES:
        raise DrainFormatError(f"drain notification: unknown drainMode {_clip(mode)!r}")
    return DrainNotification(canonical, run_id, mode)


def java_uuid(text: str) -> str | None:
    """``UUID.fromString(text).toString()`` as OpenJDK 11..21 compute it, or None where it throws: five
    dash-separated groups of hex digits (at most 36 UTF-16 units in all), each group read by
    ``Long.parseLong(.., 16)`` (an optional '+', any Unicode decimal digit or fullwidth Latin letter that
    ``Character.digit`` takes, no overflow of a signed long) and masked to its width (8-4-4-4-12 hex
    digits), so short groups are zero-padded and long ones keep their low digits; written back in lower
    case. Checked against java.util.UUID of JDK 17 (tests/unit/formats/test_drain.py). JDK 8 parsed
    differently (Long.decode, no masking): statectl follows the JDKs Samza supports today."""
    if len(text.encode("utf-16-le")) // 2 > 36:
        return None
    groups = text.split("-")
    if len(groups) != 5:
        return None
    widths = (8, 4, 4, 4, 12)
    out = []
    for group, width in zip(groups, widths):
        value = java_parse_long(group, radix=16)
        if value is None:
            return None
        out.append(f"{value & ((1 << (4 * width)) - 1):0{width}x}")
    return "-".join(out)


def _jackson_tree(data: bytes | None, what: str) -> Any:
    """The first JSON value of ``data`` as Jackson's ``readTree`` reads it (trailing content ignored;
    NaN/Infinity refused; a UTF-8 BOM skipped). Raises DrainFormatError."""
    if data is None:
        raise DrainFormatError(f"{what}: no value")
    try:
        text = data.decode("utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DrainFormatError(f"{what}: not UTF-8 ({e.reason} at byte {e.start})") from None

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    stripped = text.lstrip(" \t\r\n")
    if not stripped:
        raise DrainFormatError(f"{what}: empty (no JSON value)")
    try:
        obj, _end = json.JSONDecoder(parse_constant=refuse).raw_decode(stripped)
    except (ValueError, RecursionError) as e:
        raise DrainFormatError(f"{what}: not JSON ({_clip(str(e), 120)})") from None
    if obj is None:
        raise DrainFormatError(f"{what}: JSON null")
    return obj


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return "array" if isinstance(v, list) else "object"


def _clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (a 10 MB value stays one line)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


@dataclass(frozen=True)
class ControlMessage:
    """A control message on an intermediate stream. ``task_name`` None: sent by a source or re-broadcast
    by the aggregating task. ``run_id`` for drain, ``timestamp`` for a watermark."""

    type: int
    task_name: str | None
    run_id: str | None = None
    timestamp: int | None = None
    version: int = 1

    @property
    def kind(self) -> str:
        return _TYPES[self.type]


def drain_message(task_name: str | None, run_id: str) -> ControlMessage:
    return ControlMessage(DRAIN, task_name, run_id=run_id)


def watermark_message(task_name: str | None, timestamp: int) -> ControlMessage:
    return ControlMessage(WATERMARK, task_name, timestamp=timestamp)


def end_of_stream_message(task_name: str | None) -> ControlMessage:
    return ControlMessage(END_OF_STREAM, task_name)


def encode_control(m: ControlMessage) -> bytes:
    """The bytes IntermediateMessageSerde writes: the type byte, then the JSON (superclass fields first;
    a watermark's timestamp, a creator property, before them) as JsonSerdeV2 writes it."""
    if m.type == DRAIN:
        if not m.run_id:
            raise DrainFormatError("a drain message needs a run id")
        obj: dict[str, Any] = {"taskName": m.task_name, "version": m.version, "runId": m.run_id}
    elif m.type == WATERMARK:
        if m.timestamp is None:
            raise DrainFormatError("a watermark message needs a timestamp")
        obj = {"timestamp": m.timestamp, "taskName": m.task_name, "version": m.version}
    elif m.type == END_OF_STREAM:
        obj = {"taskName": m.task_name, "version": m.version}
    else:
        raise DrainFormatError(f"not a control message type: {m.type}")
    # JsonSerdeV2 (IntermediateMessageSerde's): writeValueAsString, then getBytes("UTF-8"): a character
    # outside the BMP stays its 4 UTF-8 bytes (not Jackson's \uD83D\uDE00), an unpaired surrogate is '?'.
    return bytes([m.type]) + java_utf8(to_json_text(obj))


def encode_user_message(payload: bytes) -> bytes:
    """A user message on an intermediate stream: type byte 0, then the value serde's bytes."""
    return bytes([USER_MESSAGE]) + payload


def message_type(data: bytes | None) -> int:
    """The type byte of an intermediate-stream message. Raises DrainFormatError for an empty or unknown one."""
    if not data:
        raise DrainFormatError("empty intermediate-stream message (no type byte)")
    if data[0] not in _TYPES:
        raise DrainFormatError(f"unknown intermediate-stream message type {data[0]}")
    return data[0]


def decode_control(data: bytes | None) -> ControlMessage:
    """Parse a control message as Samza's JsonSerdeV2 does: the camelCase names or the creator's dashed
    aliases (``task-name``, ``run-id``), no unknown field. Raises DrainFormatError (a user message too)."""
    t = message_type(data)
    if t == USER_MESSAGE:
        raise DrainFormatError("a user message, not a control message")
    assert data is not None
    obj = _json_object(data[1:], f"{_TYPES[t]} message")
    allowed = {"taskName", "task-name", "version"} | ({"runId", "run-id"} if t == DRAIN else set()) \
        | ({"timestamp"} if t == WATERMARK else set())
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise DrainFormatError(f"{_TYPES[t]} message: unknown field {unknown[0]!r}")
    task = obj.get("taskName", obj.get("task-name"))
    if task is not None and not isinstance(task, str):
        raise DrainFormatError(f"{_TYPES[t]} message: taskName is not a string")
    version = obj.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise DrainFormatError(f"{_TYPES[t]} message: version is not an integer")
    if t == DRAIN:
        run_id = obj.get("runId", obj.get("run-id"))
        if not isinstance(run_id, str):
            raise DrainFormatError("drain message: runId missing or not a string")
        return ControlMessage(t, task, run_id=run_id, version=version)
    if t == WATERMARK:
        ts = obj.get("timestamp")
        if not isinstance(ts, int) or isinstance(ts, bool):
            raise DrainFormatError("watermark message: timestamp missing or not an integer")
        return ControlMessage(t, task, timestamp=ts, version=version)
    return ControlMessage(t, task, version=version)


def aggregate_partition(topic: str, partitions: int) -> int:
    """The partition every upstream task sends its control messages for ``topic`` to:
    ``abs(topic.hashCode()) % partitions`` (ControlMessageSender, then KafkaSystemProducer's abs)."""
    if partitions < 1:
        raise ValueError("a topic has at least one partition")
    h = java_string_hash(topic)
    signed = h - (1 << 32) if h >= 1 << 31 else h
    # Java's % keeps the dividend's sign; the producer's abs() then folds it: |hash| % partitions.
    return abs(signed) % partitions


def _json_object(data: bytes | None, what: str) -> dict[str, Any]:
    if data is None:
        raise DrainFormatError(f"{what}: no value")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise DrainFormatError(f"{what}: not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise DrainFormatError(f"{what}: not a JSON object")
    return obj
