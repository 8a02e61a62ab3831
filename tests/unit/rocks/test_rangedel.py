"""statectl.rocks.rangedel against real RocksDB (rocksdict): a store made of another store's files, copied
unread, and range deletions above them reads, and compacts to, exactly the keys outside the deleted ranges."""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from statectl.errors import StatectlError
from statectl.rocks.manifest import manifest_bytes, read_store_manifest, write_store_files
from statectl.rocks.rangedel import write_range_deletions


def _source(path: Path) -> dict[bytes, bytes]:
    """A store of 16 key groups (1-byte prefixes): a compacted base, then overwrites and deletions in L0."""
    import rocksdict

    rng = random.Random(5)
    opts = rocksdict.Options(raw_mode=True)
    opts.set_target_file_size_base(16 * 1024)
    db = rocksdict.Rdict(str(path), opts)
    try:
        for g in range(16):
            for i in range(300):
                db[bytes([g]) + b"k%04d" % i] = rng.randbytes(30)
        db.flush()
        db.compact_range(None, None)
        for r in range(3):
            for g in (3, 4, 11, 12):
                for i in range(r, 300, 7):
                    db[bytes([g]) + b"k%04d" % i] = b"new-%d" % r
                for i in range(r, 300, 11):
                    del db[bytes([g]) + b"k%04d" % i]
            db.flush()
        return dict(db.items())
    finally:
        db.close()


def _clipped(src: Path, out: Path, ranges: list[tuple[bytes, bytes]], above: int) -> None:
    """``out``: every live file of ``src`` renumbered, and range deletions of ``ranges`` above ``above``."""
    m = read_store_manifest(src)
    out.mkdir()
    listed = []
    for n, f in enumerate(m.live_files, start=1):
        shutil.copyfile(src / f.name, out / f"{n:06d}.sst")
        listed.append(replace(f, number=n))
    epoch = max(f.epoch for f in listed)
    for path, f in write_range_deletions(out.parent / "scratch", ranges, above):
        n, epoch = len(listed) + 1, epoch + 1
        path.rename(out / f"{n:06d}.sst")
        listed.append(replace(f, number=n, epoch=epoch))
    top = max(f.largest_seqno for f in listed)
    write_store_files(out, manifest_bytes(listed, next_file_number=len(listed) + 2, last_sequence=top),
                      len(listed) + 1)


def test_range_deletions_clip_copied_files_to_a_key_range(tmp_path: Path):
    import rocksdict

    want = {k: v for k, v in _source(tmp_path / "src").items() if b"\x04" <= k < b"\x0c"}
    above = read_store_manifest(tmp_path / "src").last_sequence
    _clipped(tmp_path / "src", tmp_path / "t", [(b"\x00", b"\x04"), (b"\x0c", b"\x10")], above)
    db = rocksdict.Rdict(str(tmp_path / "t"), rocksdict.Options(raw_mode=True))
    try:
        assert dict(db.items()) == want
        assert db.get(b"\x03k0007") is None and db.get(b"\x03k0010") is None and db.get(b"\x0ck0002") is None
        db.compact_range(None, None)
        assert dict(db.items()) == want
        assert all(b"\x04" <= f["start_key"] and f["end_key"] < b"\x0c" for f in db.live_files())
    finally:
        db.close()


def test_the_deletions_must_lie_above_the_files_sequence_numbers(tmp_path: Path):
    """Reads take the newest file's range deletion over every older file's keys, but compaction compares
    sequence numbers: a deletion below the copied files' hides their keys until the first compaction brings
    them back. The reason for ``above``."""
    import rocksdict

    src = _source(tmp_path / "src")
    _clipped(tmp_path / "src", tmp_path / "t", [(b"\x00", b"\x04")], 0)
    db = rocksdict.Rdict(str(tmp_path / "t"), rocksdict.Options(raw_mode=True))
    try:
        assert db.get(b"\x03k0007") is None
        db.compact_range(None, None)
        assert {k: v for k, v in db.items() if k < b"\x04"} == {k: v for k, v in src.items() if k < b"\x04"}
    finally:
        db.close()


def test_files_as_rocksdb_records_them(tmp_path: Path):
    files = write_range_deletions(tmp_path / "s", [(b"\x00", b"\x04"), (b"\x0c", b"\x10")], 41)
    assert [(f.smallest_key, f.largest_key, f.end_exclusive, f.level) for _, f in files] == \
        [(b"\x00", b"\x04", True, 0), (b"\x0c", b"\x10", True, 0)]
    assert [f.smallest_seqno for _, f in files] == [42, 43] and all(p.is_file() for p, _ in files)
    assert files[0][1].meets(b"\x03", b"\x05") and not files[0][1].meets(b"\x04", b"\x05")
    assert write_range_deletions(tmp_path / "empty", [], 1) == []
    with pytest.raises(StatectlError, match="range deletions"):
        write_range_deletions(tmp_path / "bad", [(b"\x05", b"\x01")], 1)
