"""statectl.rocks.manifest against real RocksDB stores (rocksdict): the files read from a MANIFEST are the
store's live files, and a MANIFEST written for renumbered copies of them opens as the same store."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from statectl.rocks.manifest import (
    BLOCK_SIZE,
    LiveFile,
    ManifestError,
    _log,
    _records,
    external_file,
    manifest_bytes,
    read_manifest,
    read_store_manifest,
    write_store_files,
)


def _store(path: Path, rounds: int = 3) -> dict[bytes, bytes]:
    """A store with files on several levels (a compacted base, then overwrites and deletes flushed to L0)."""
    import rocksdict

    rng = random.Random(7)
    opts = rocksdict.Options(raw_mode=True)
    opts.set_target_file_size_base(32 * 1024)
    db = rocksdict.Rdict(str(path), opts)
    try:
        for i in range(6000):
            db[b"k%06d" % i] = rng.randbytes(40)
        db.flush()
        db.compact_range(None, None)
        for r in range(rounds):
            for i in range(r, 6000, 13):
                db[b"k%06d" % i] = rng.randbytes(20)
            for i in range(r, 6000, 17):
                del db[b"k%06d" % i]
            db.flush()
        content = dict(db.items())
        live = {(f["name"].strip("/"), f["level"], f["start_key"], f["end_key"], f["size"]) for f in db.live_files()}
    finally:
        db.close()
    return content, live


def _read(path: Path) -> dict[bytes, bytes]:
    import rocksdict

    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


def test_read_gives_the_live_files(tmp_path):
    content, live = _store(tmp_path / "s")
    m = read_store_manifest(tmp_path / "s")
    assert {(f.name, f.level, f.smallest_key, f.largest_key, f.size) for f in m.files.values()} == live
    assert len({f.level for f in m.files.values()}) >= 2 and len(m.files) >= 4
    assert m.comparator == b"leveldb.BytewiseComparator"
    assert m.last_sequence >= max(f.largest_seqno for f in m.files.values())


def test_written_manifest_opens_renumbered_copies_as_the_same_store(tmp_path):
    content, _ = _store(tmp_path / "s")
    m = read_store_manifest(tmp_path / "s")
    out = tmp_path / "t"
    out.mkdir()
    files = []
    for k, f in enumerate(m.live_files, start=100):
        shutil.copy(tmp_path / "s" / f.name, out / f"{k:06d}.sst")
        files.append(LiveFile(k, f.level, f.size, f.smallest, f.largest, f.smallest_seqno, f.largest_seqno,
                              f.epoch, f.custom))
    n = 100 + len(files)
    write_store_files(out, manifest_bytes(files, next_file_number=n + 1, last_sequence=m.last_sequence), n)
    assert _read(out) == content
    again = read_store_manifest(out)
    assert sorted((f.number, f.level, f.smallest, f.largest) for f in again.files.values()) == \
        sorted((f.number, f.level, f.smallest, f.largest) for f in files)


def test_external_sst_listed_at_the_bottom_level(tmp_path):
    from statectl.rocks.sst import write_sst

    out = tmp_path / "t"
    out.mkdir()
    entries = [(b"a%03d" % i, b"v%d" % i) for i in range(50)]
    write_sst(out / "000007.sst", entries)
    f = external_file(7, 6, (out / "000007.sst").stat().st_size, entries[0][0], entries[-1][0])
    write_store_files(out, manifest_bytes([f], next_file_number=9, last_sequence=0), 8)
    assert _read(out) == dict(entries)


def test_log_fragments_across_blocks_round_trip():
    rng = random.Random(1)
    records = [rng.randbytes(n) for n in (10, BLOCK_SIZE - 20, 3 * BLOCK_SIZE + 5, 0, 7)]
    assert _records(_log(records)) == records


def test_damage_is_a_manifest_error(tmp_path):
    _store(tmp_path / "s", rounds=1)
    name = (tmp_path / "s" / "CURRENT").read_text().strip()
    data = bytearray((tmp_path / "s" / name).read_bytes())
    data[20] ^= 0xFF
    with pytest.raises(ManifestError):
        read_manifest(bytes(data) + b"\0" * 64)
    with pytest.raises(ManifestError):
        read_manifest(b"")
    # a torn tail (a crash while RocksDB appended) ends the log there, as RocksDB's recovery does
    good = (tmp_path / "s" / name).read_bytes()
    assert read_manifest(good + b"\x01\x02\x03").files == read_manifest(good).files
