"""The layout checks of a rescale (statectl.engine.rescale.layout) on synthetic MANIFEST file sets; the real
thing is covered by tests/integration/test_rescale_rerun.py."""

from __future__ import annotations

import struct

import pytest

from statectl.engine.rescale.layout import LayoutError, check_hash_layout, check_key_group_layout
from statectl.formats.adstore import partition_of
from statectl.rocks.manifest import LiveFile, Manifest

VALUE, RANGE_DELETION = 0x01, 0x0F


def _ikey(key: bytes, kind: int = VALUE) -> bytes:
    return key + struct.pack("<Q", (7 << 8) | kind)


def _m(*bounds: tuple[bytes, bytes]) -> Manifest:
    files = {n: LiveFile(n, 6, 100, lo, hi, 1, 2) for n, (lo, hi) in enumerate(bounds, start=1)}
    return Manifest(b"leveldb.BytewiseComparator", 0, 100, 50, files)


def _keys_of(task: int, n: int, count: int) -> list[bytes]:
    return sorted(k for k in (b"key-%05d" % i for i in range(400)) if partition_of(k, n) == task)[:count]


def test_hash_layout_takes_every_file_bound_and_skips_range_deletions():
    tasks = ["Partition 0", "Partition 1"]
    own = [_keys_of(p, 2, 4) for p in range(2)]
    good = [_m((_ikey(own[p][0]), _ikey(own[p][1])), (_ikey(own[p][2]), _ikey(own[p][3]))) for p in range(2)]
    check_hash_layout(good, tasks, None)
    check_hash_layout(good, tasks, "murmur2")
    # a range deletion's bound is any key the deletion chose: not evidence of where keys live
    stray = own[1][0]
    with_deletion = [_m((_ikey(own[0][0]), _ikey(stray, RANGE_DELETION))), good[1]]
    check_hash_layout(with_deletion, tasks, None)
    with pytest.raises(LayoutError, match=r"not a 2-way layout by murmur2: key b'key-\d+' of Partition 0 \(in "
                                          r"000002.sst\) belongs to Partition 1"):
        check_hash_layout([_m((_ikey(own[0][0]), _ikey(own[0][1])), (_ikey(own[0][2]), _ikey(stray))), good[1]],
                          tasks, None)
    # the 3-way layout's first two tasks read as a 2-way one: some bound lands elsewhere
    three = [_m(*[(_ikey(k), _ikey(k)) for k in _keys_of(p, 3, 8)]) for p in range(2)]
    with pytest.raises(LayoutError):
        check_hash_layout(three, tasks, None)


def test_key_group_layout_refuses_files_wholly_outside_their_source_only():
    g = 16  # 4 tasks own 0..3, 4..7, 8..11, 12..15

    def f(first: int, last: int) -> tuple[bytes, bytes]:
        return _ikey(bytes([first]) + b"a"), _ikey(bytes([last]) + b"z")

    tasks = [f"Partition {p}" for p in range(4)]
    good = [_m(f(4 * p, 4 * p + 1), f(4 * p + 2, 4 * p + 3)) for p in range(4)]
    check_key_group_layout(good, tasks, g)
    # reaching past its groups (Flink clips what a store holds beyond them): allowed
    check_key_group_layout(good[:1] + [_m(f(3, 4), f(5, 7))] + good[2:], tasks, g)
    with pytest.raises(LayoutError, match=r"000002.sst of Partition 2 holds key groups 4..5, and Partition 2, task "
                                          r"2 of 4, owns key groups 8..11"):
        check_key_group_layout(good[:2] + [_m(f(8, 9), f(4, 5))] + good[3:], tasks, g)
    # an 8-way layout read as a 4-way one: its second task's files are the first's second half
    eight = [_m(f(2 * p, 2 * p + 1)) for p in range(4)]
    with pytest.raises(LayoutError, match="Partition 1 holds key groups 2..3"):
        check_key_group_layout(eight, tasks, g)
    # a file without a valid prefix is left to keygroup_plan.plan, which names it
    check_key_group_layout([_m(f(0, 1), (_ikey(b"\xff"), _ikey(b"\xff")))] + good[1:], tasks, g)
