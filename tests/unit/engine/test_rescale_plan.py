"""The key-group plan (statectl.engine.rescale.keygroup_plan) on synthetic file sets; the real thing is covered by
tests/integration/test_rescale_keygroups.py."""

from __future__ import annotations

import struct

import pytest

from statectl.engine.rescale.keygroup_plan import KeyGroupStoreError, check_target, partial_level, plan
from statectl.rocks.manifest import LiveFile, Manifest

G = 16  # 1-byte prefixes


def _f(number: int, level: int, first: int, last: int, size: int = 100) -> LiveFile:
    trailer = struct.pack("<Q", 1)
    return LiveFile(number, level, size, bytes([first]) + b"a" + trailer, bytes([last]) + b"z" + trailer, 1, 2)


def _m(*files: LiveFile) -> Manifest:
    return Manifest(b"leveldb.BytewiseComparator", 0, 100, 50, {f.number: f for f in files})


def test_inner_files_are_copied_boundary_files_read_and_their_key_groups_closed():
    # 1 -> 2: source 0 owns 0..15; targets 0..7 and 8..15
    src = _m(_f(1, 6, 0, 3), _f(2, 6, 4, 6), _f(3, 6, 7, 9),  # 3 spans the split
             _f(4, 5, 6, 6),  # inside target 0, before the boundary file's range: copied
             _f(5, 5, 9, 10),  # inside target 1, its range overlaps the boundary file's: read
             _f(6, 0, 12, 15))
    p = plan([src], 1, 2, G)
    t0, t1 = p.targets
    assert sorted(f.file.number for f in t0.copies) == [1, 2, 4] and [f.file.number for f in t0.reads] == [3]
    assert sorted(f.file.number for f in t1.copies) == [6] and sorted(f.file.number for f in t1.reads) == [3, 5]
    assert sorted(f.file.number for f in p.reads[0]) == [3, 5]
    assert p.bytes_copied == 400 and p.bytes_read({0: 600}) == 200


def test_neighbours_sharing_a_key_group_but_no_key_stay_copies():
    # compaction output: files cut inside key groups, disjoint key ranges
    trailer = struct.pack("<Q", 1)

    def cut(number: int, lo: bytes, hi: bytes) -> LiveFile:
        return LiveFile(number, 6, 100, lo + trailer, hi + trailer, 1, 2)

    src = _m(cut(1, b"\x00a", b"\x07m"), cut(2, b"\x07n", b"\x09c"), cut(3, b"\x09d", b"\x0fz"))
    p = plan([src], 1, 2, G)  # split at key group 8: file 2 is the boundary
    assert [f.file.number for f in p.targets[0].copies] == [1] and [f.file.number for f in p.targets[1].copies] == [3]
    assert [f.file.number for f in p.reads[0]] == [2]


def test_closure_follows_chains_and_whole_sources():
    src = _m(_f(1, 6, 6, 9), _f(2, 5, 5, 6), _f(3, 4, 4, 5), _f(4, 6, 0, 3))
    p = plan([src, None], 2, 4, G)  # source 0 owns 0..7: targets 0 (0..3) and 1 (4..7)
    t0, t1, t2, t3 = p.targets
    assert [f.file.number for f in t0.copies] == [4] and not t0.reads
    assert not t1.copies and sorted(f.file.number for f in t1.reads) == [1, 2, 3]
    assert t2.whole == [1] and t3.whole == [1] and p.whole == {1}


def test_a_key_without_a_valid_prefix_is_refused():
    bad = LiveFile(1, 6, 10, b"\x20k" + struct.pack("<Q", 1), b"\x21k" + struct.pack("<Q", 1), 1, 1)
    with pytest.raises(KeyGroupStoreError, match="key group 32"):
        plan([_m(bad)], 1, 2, G)


def test_partial_level_and_target_checks():
    copies = [_f(1, 6, 0, 3), _f(2, 5, 5, 6)]
    assert partial_level(copies, [(b"\x04", b"\x04\xff")]) == 6
    assert partial_level(copies, [(b"\x02", b"\x02\xff")]) == 5
    assert partial_level([_f(n, lvl, 0, 9) for n, lvl in enumerate(range(1, 7), 1)], [(b"\x02", b"\x03")]) == 0
    assert check_target(copies, 0, 7, G) == []
    assert "overlap in level 6" in check_target([_f(1, 6, 0, 3), _f(2, 6, 3, 4)], 0, 7, G)[0]
    assert "owns 0..3" in check_target([_f(1, 6, 2, 5)], 0, 3, G)[0]
