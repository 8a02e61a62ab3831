"""The key-group plan (statectl.engine.rescale.keygroup_plan) on synthetic file sets; the real thing is covered by
tests/unit/rocks/test_rangedel.py and tests/integration/test_rescale_keygroups.py."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from statectl.engine.rescale.keygroup_plan import KeyGroupStoreError, check_target, partial_level, plan
from statectl.rocks.manifest import RANGE_DELETION_SENTINEL, LiveFile, Manifest

G = 16  # 1-byte prefixes
TRAILER = struct.pack("<Q", 1)


def _f(number: int, level: int, first: int, last: int, size: int = 100, epoch: int = 3) -> LiveFile:
    return LiveFile(number, level, size, bytes([first]) + b"a" + TRAILER, bytes([last]) + b"z" + TRAILER, 1, 2,
                    epoch)


def _clip(number: int, start: int, end: int) -> LiveFile:
    """A file of range deletions [start, end) as RocksDB records it (the end exclusive)."""
    return LiveFile(number, 0, 50, bytes([start]) + struct.pack("<Q", 9 << 8 | 0x0F),
                    bytes([end]) + RANGE_DELETION_SENTINEL, 9, 9, 9)


def _m(*files: LiveFile) -> Manifest:
    return Manifest(b"leveldb.BytewiseComparator", 0, 100, 50, {f.number: f for f in files})


def _crcs(*manifests: Manifest) -> list[dict[str, int]]:
    return [{f.name: 7 for f in m.files.values()} for m in manifests]


def _numbers(sfs) -> list[int]:
    return sorted(f.file.number for f in sfs)


def test_every_file_reaching_into_a_target_is_copied_and_the_rest_clipped():
    # 1 -> 2: source 0 owns 0..15; targets 0..7 and 8..15; file 3 spans the split
    src = _m(_f(1, 6, 0, 3), _f(2, 6, 4, 6), _f(3, 6, 7, 9), _f(4, 5, 6, 6), _f(5, 5, 9, 10), _f(6, 0, 12, 15))
    p = plan([src], _crcs(src), 1, 2, G)
    t0, t1 = p.targets
    assert _numbers(t0.copies) == [1, 2, 3, 4] and _numbers(t1.copies) == [3, 5, 6]
    assert t0.clips == [(b"\x08", b"\x10")] and t1.clips == [(b"\x00", b"\x08")]
    assert not p.whole and p.targets[0].bytes_copied == 400
    # a file inside its target's key groups needs no range deletion
    inner = _m(_f(1, 6, 0, 7), _f(2, 6, 8, 15))
    assert [t.clips for t in plan([inner], _crcs(inner), 1, 2, G).targets] == [[], []]


def test_copies_of_one_file_are_listed_once_and_range_deletions_left_behind():
    # 2 -> 1 of the targets of a 1 -> 2: both hold file 3 (copied under other numbers) and their clips
    shared = _f(3, 6, 7, 9)
    a = _m(_f(1, 6, 0, 3), replace(shared, number=2), _clip(4, 8, 16))
    b = _m(replace(shared, number=1), _f(2, 6, 10, 15), _clip(3, 0, 8))
    p = plan([a, b], _crcs(a, b), 2, 1, G)
    (t,) = p.targets
    assert sorted((f.source, f.file.number) for f in t.copies) == [(0, 1), (0, 2), (1, 2)]
    assert not t.clips and not p.whole
    # another CRC: not the same file, and each reaches into the other's key groups
    crcs = _crcs(a, b)
    crcs[1]["000001.sst"] = 8
    assert plan([a, b], crcs, 2, 1, G).whole == {0, 1}


def test_a_source_reaching_into_another_sources_key_groups_of_a_target_is_read_whole():
    # 2 -> 1: source 1 (owns 8..15) holds a key of key group 7 (source 0's) beside its own
    a = _m(_f(1, 6, 0, 7))
    b = _m(_f(1, 6, 8, 15), _f(2, 0, 7, 8))
    p = plan([a, b], _crcs(a, b), 2, 1, G)
    assert p.whole == {1} and p.targets[0].whole == [1] and _numbers(p.targets[0].copies) == [1]
    # 2 -> 2 the same: each target holds one source, which the range deletions clip
    p = plan([a, b], _crcs(a, b), 2, 2, G)
    assert not p.whole and p.targets[1].clips == [(b"\x00", b"\x08")]
    # a source read whole (a WAL) takes the sources reaching into it along
    c = _m(_f(1, 6, 0, 8))
    p = plan([c, None], _crcs(c, c), 2, 1, G)
    assert p.whole == {0, 1} and not p.targets[0].copies


def test_missing_epochs_are_inferred_alike_in_every_target():
    src = _m(_f(1, 6, 0, 9, epoch=0), replace(_f(2, 0, 2, 3, epoch=0), largest_seqno=9), _f(3, 0, 8, 9, epoch=0))
    t0, t1 = plan([src], _crcs(src), 1, 2, G).targets
    epochs = {f.file.number: f.file.epoch for f in t0.copies + t1.copies}
    assert epochs == {1: 1, 2: 3, 3: 2}


def test_a_key_without_a_valid_prefix_is_refused_a_range_deletions_bound_is_not():
    bad = LiveFile(1, 6, 10, b"\x20k" + TRAILER, b"\x21k" + TRAILER, 1, 1)
    with pytest.raises(KeyGroupStoreError, match="key group 32"):
        plan([_m(bad)], [{}], 1, 2, G)
    clip = _m(_f(1, 6, 0, 3), _clip(2, 4, G))  # its end is past every key group
    assert _numbers(plan([clip], _crcs(clip), 1, 2, G).targets[0].copies) == [1, 2]


def test_target_checks_and_partial_level():
    copies = [_f(1, 6, 0, 3), _f(2, 5, 5, 6)]
    assert partial_level(copies, [(b"\x04", b"\x04\xff")]) == 6
    assert partial_level(copies, [(b"\x02", b"\x02\xff")]) == 5
    assert partial_level([_f(n, lvl, 0, 9) for n, lvl in enumerate(range(1, 7), 1)], [(b"\x02", b"\x03")]) == 0
    assert check_target(copies, [], 0, 7, G) == []
    assert "overlap in level 6" in check_target([_f(1, 6, 0, 3), _f(2, 6, 3, 4)], [], 0, 7, G)[0]
    assert "no range deletion" in check_target([_f(1, 6, 2, 5)], [], 0, 3, G)[0]
    assert check_target([_f(1, 6, 2, 5), _clip(2, 4, G)], [(b"\x04", b"\x10")], 0, 3, G) == []
    assert "no range deletion" in check_target([_f(1, 6, 2, 5)], [(b"\x05", b"\x10")], 0, 3, G)[0]
    # a range deletion's end is exclusive: one ending where the next file starts does not overlap it
    assert check_target([replace(_clip(1, 0, 4), level=6), _f(2, 6, 4, 7)], [], 0, 7, G) == []
