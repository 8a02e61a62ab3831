"""Key groups: keys prefixed with their key group, as Flink lays out its RocksDB state (rescale --key-groups).

A store of ``G`` key groups (Flink's max parallelism) prefixes every key with its key group, big-endian,
in 1 byte when G <= 128 and 2 bytes otherwise (Flink's
CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix). Task ``i`` of ``n`` owns the
contiguous key groups KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex gives, and key group
``g`` belongs to task ``g * n // G`` (computeOperatorIndexForKeyGroup): so a store's keys sort by task.
"""

from __future__ import annotations

MAX_KEY_GROUPS = 1 << 15  # Flink's UPPER_BOUND_MAX_PARALLELISM
PARTITIONER_PREFIX = "keygroups:"


class KeyGroupError(ValueError):
    """A key without a key-group prefix that the store's key-group count allows."""


def check_key_groups(groups: int) -> None:
    if not 1 <= groups <= MAX_KEY_GROUPS:
        raise ValueError(f"the number of key groups must be 1..{MAX_KEY_GROUPS}, not {groups}")


def prefix_bytes(groups: int) -> int:
    return 1 if groups <= 128 else 2


def key_group(key: bytes, groups: int) -> int:
    """The key group ``key`` starts with; KeyGroupError when it is too short or names a group >= ``groups``."""
    n = prefix_bytes(groups)
    if len(key) < n:
        raise KeyGroupError(f"key {key[:16]!r} is shorter than the {n}-byte key-group prefix")
    g = int.from_bytes(key[:n], "big")
    if g >= groups:
        raise KeyGroupError(f"key {key[:16]!r} names key group {g}, the store has {groups}")
    return g


def task_range(task: int, tasks: int, groups: int) -> tuple[int, int]:
    """The key groups ``(first, last)`` (inclusive) of task ``task`` of ``tasks``; first > last when the
    task has none (more tasks than key groups)."""
    return (task * groups + tasks - 1) // tasks, ((task + 1) * groups - 1) // tasks


def task_of(group: int, tasks: int, groups: int) -> int:
    return group * tasks // groups


def group_bound(group: int, groups: int) -> bytes:
    """The smallest key of key group ``group`` (the prefix alone); ``groups`` itself: past every key."""
    n = prefix_bytes(groups)
    if group >= 1 << (8 * n):
        return b"\xff" * (n + 1)
    return group.to_bytes(n, "big")


class KeyGroupPartitioner:
    """f(key, partitions) -> the task of ``key``'s key group (a rescale's partitioner for ``keygroups:G``)."""

    def __init__(self, groups: int):
        check_key_groups(groups)
        self.groups = groups

    def __call__(self, key: bytes, partitions: int) -> int:
        return task_of(key_group(key, self.groups), partitions, self.groups)


def parse_partitioner(name: str) -> KeyGroupPartitioner | None:
    """``keygroups:G`` -> its partitioner; None for any other name."""
    if not name.startswith(PARTITIONER_PREFIX):
        return None
    try:
        groups = int(name[len(PARTITIONER_PREFIX):])
    except ValueError:
        raise ValueError(f"partitioner {name!r}: expected keygroups:<number of key groups>") from None
    return KeyGroupPartitioner(groups)
