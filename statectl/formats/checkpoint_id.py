"""Samza's CheckpointId as text (``<currentTimeMillis>-<nanoTime % 1000000>``): the one parser of checkpoint
ids in statectl, and the error every checkpoint format raises. Kept apart from formats.checkpoint (the
checkpoint topic's keys, values and markers), which re-exports both: the catalog, the local layout and every
restore read ids without loading those formats."""

from __future__ import annotations

import re

from statectl.formats.java import java_is_blank, java_parse_long

__all__ = ["CheckpointFormatError", "is_canonical_checkpoint_id", "parse_checkpoint_id"]

# CheckpointId: "<currentTimeMillis>-<nanoTime % 1000000>", neither part padded.
_CHECKPOINT_ID = re.compile(r"([0-9]+)-([0-9]+)")
_LONG_MAX = 2 ** 63 - 1


class CheckpointFormatError(ValueError):
    """Bytes that are not a valid Samza checkpoint key, value or marker."""


def parse_checkpoint_id(value: str) -> tuple[int, int]:
    """(millis, second part) of a CheckpointId, read exactly as Samza's CheckpointId.deserialize reads it
    (the pair is its sort key). That is: not blank; split on ``-`` (Java's String.split, which drops
    trailing empty parts); the first two parts parsed by ``Long.parseLong``; anything after them ignored.

    Long.parseLong takes an optional ``+``, then digits of any script in the BMP (``Character.digit``:
    ``"\\u0661"`` is 1, a fullwidth ``"\\uFF11"`` too), within a long's range. So ``1-2-3``, ``+1-2``,
    ``007-1`` and ``\\u0661-\\u0662`` are ids (of (1, 2), (1, 2), (7, 1), (1, 2)); ``-1-2``, ``1``, ``1--2``,
    ``1 -2`` and ``99999999999999999999-1`` are not. A part can never be negative: ``-`` is the separator.
    The one parser of checkpoint ids in statectl. Raises CheckpointFormatError.
    """
    if not isinstance(value, str) or java_is_blank(value):
        raise CheckpointFormatError(f"invalid checkpoint id {value!r}: expected <millis>-<n>")
    parts = value.split("-")
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    parsed = [java_parse_long(p) for p in parts[:2]]
    if len(parsed) < 2 or None in parsed:
        raise CheckpointFormatError(f"invalid checkpoint id {value!r}: expected <millis>-<n>")
    return parsed[0], parsed[1]  # type: ignore[return-value]


def is_canonical_checkpoint_id(value: str) -> bool:
    """Whether ``value`` is a checkpoint id exactly as Samza (and statectl) create them: two unsigned,
    unpadded-or-not decimal parts and nothing else. Names of local checkpoint dirs must be canonical: a
    dir named ``<store>-1-2-old`` is somebody's, not a checkpoint to clean up."""
    return bool(_CHECKPOINT_ID.fullmatch(value)) and all(int(p) <= _LONG_MAX for p in value.split("-"))
