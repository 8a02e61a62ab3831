"""statectl.rocks.sst on real rocksdict: SST files written, ingested into a new store, and digested."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from statectl.errors import StatectlError
from statectl.formats.adstore import Digest
from statectl.rocks.sst import SstWriter, ingest_into_new_store, scan_digest, write_sst
from statectl.rocks.store import ROCKSDICT_CONFIG, open_readonly


def _entries(n: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(seed)
    keys = sorted({rnd.randbytes(rnd.randint(1, 24)) for _ in range(n)})
    return [(k, rnd.randbytes(rnd.randint(0, 100))) for k in keys]


def _digest(entries) -> Digest:
    d = Digest()
    for k, v in entries:
        d.add(k, v)
    return d


def _items(store) -> list[tuple[bytes, bytes]]:
    db = open_readonly(store)
    try:
        return list(db.items())
    finally:
        db.close()
        (store / ROCKSDICT_CONFIG).unlink(missing_ok=True)


def test_write_sst_returns_the_digest_of_what_it_wrote(tmp_path):
    entries = _entries(2000)
    d = write_sst(tmp_path / "a.sst", iter(entries))
    assert (tmp_path / "a.sst").stat().st_size > 0
    assert d == _digest(entries)
    assert (d.keys, d.first_key, d.last_key) == (len(entries), entries[0][0], entries[-1][0])


def test_empty_input_writes_no_file(tmp_path):
    assert write_sst(tmp_path / "e.sst", []) == Digest()
    assert not (tmp_path / "e.sst").exists()


@pytest.mark.parametrize("keys", [[b"b", b"a"], [b"a", b"a"], [b"a", b"c", b"b"]])
def test_keys_out_of_order_raise_and_leave_no_file(tmp_path, keys):
    with pytest.raises(ValueError, match="strictly ascending"):
        write_sst(tmp_path / "bad.sst", [(k, b"v") for k in keys])
    assert not (tmp_path / "bad.sst").exists()


def test_non_bytes_raise(tmp_path):
    with pytest.raises(TypeError, match="bytes"):
        write_sst(tmp_path / "bad.sst", [(b"a", None)])
    assert not (tmp_path / "bad.sst").exists()


def test_sst_writer_from_columns_writes_what_write_sst_writes(tmp_path):
    """Chunks of (keys, values) lists, with and without the caller's checksum: the entries and Digest
    write_sst makes of the same entries (an SST file's bytes differ from run to run: its session id)."""
    entries = _entries(3000)
    want = write_sst(tmp_path / "a.sst", iter(entries))
    for given in (False, True):
        w = SstWriter(tmp_path / f"b{given}.sst")
        for lo in range(0, len(entries), 700):
            chunk = entries[lo:lo + 700]
            keys, values = [k for k, _ in chunk], [v for _, v in chunk]
            w.add(keys, values, _digest(chunk).checksum if given else None)
        assert w.finish() == want
        ingest_into_new_store(tmp_path / f"s{given}", [tmp_path / f"b{given}.sst"])
        assert _items(tmp_path / f"s{given}") == entries


@pytest.mark.parametrize("chunks", [[[b"b", b"a"]], [[b"a"], [b"a"]], [[b"a", b"c"], [b"b"]]])
def test_sst_writer_refuses_keys_out_of_order_and_aborts(tmp_path, chunks):
    w = SstWriter(tmp_path / "bad.sst")
    with pytest.raises(ValueError, match="strictly ascending"):
        for keys in chunks:
            w.add(keys, [b"v"] * len(keys))
    w.abort()
    assert not (tmp_path / "bad.sst").exists()
    w = SstWriter(tmp_path / "bad.sst")
    with pytest.raises(TypeError, match="bytes"):
        w.add([b"a", b"b"], [b"v", None])
    w.abort()
    assert not (tmp_path / "bad.sst").exists()


def test_ingest_many_files_and_scan(tmp_path):
    entries = _entries(5000, seed=3)
    parts = [entries[i:i + 1200] for i in range(0, len(entries), 1200)]
    files = []
    total = Digest()
    for i, part in enumerate(parts):
        f = tmp_path / f"part-{i}.sst"
        total.merge(write_sst(f, part))
        files.append(f)
    assert total == _digest(entries)
    store = tmp_path / "store"
    ingest_into_new_store(store, files)
    assert _items(store) == entries
    assert scan_digest(store) == _digest(entries)
    assert not (store / ROCKSDICT_CONFIG).exists()
    assert all(f.is_file() for f in files), "the source files stay"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no link dir left behind"


def test_ingest_rerun_after_an_interruption(tmp_path):
    entries = _entries(800, seed=5)
    f1, f2 = tmp_path / "1.sst", tmp_path / "2.sst"
    write_sst(f1, entries[:400])
    write_sst(f2, entries[400:])
    store = tmp_path / "store"
    ingest_into_new_store(store, [f1, f2])
    # The swap never happened: the staged store is thrown away, and the ingest runs again from the same files.
    shutil.rmtree(store)
    ingest_into_new_store(store, [f1, f2])
    assert _items(store) == entries
    # An empty dir (made before the interruption) is a fine target too.
    shutil.rmtree(store)
    store.mkdir()
    ingest_into_new_store(store, [f1, f2])
    assert scan_digest(store) == _digest(entries)


def test_ingest_nothing_makes_an_empty_store(tmp_path):
    ingest_into_new_store(tmp_path / "store", [])
    assert scan_digest(tmp_path / "store") == Digest()


def test_ingest_refuses_a_store_that_holds_something(tmp_path):
    f = tmp_path / "1.sst"
    write_sst(f, [(b"a", b"1")])
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "x").write_text("x")
    with pytest.raises(StatectlError, match="not an empty dir"):
        ingest_into_new_store(tmp_path / "store", [f])


def test_ingest_errors_name_the_store(tmp_path):
    with pytest.raises(StatectlError, match="no SST file"):
        ingest_into_new_store(tmp_path / "s1", [tmp_path / "missing.sst"])
    junk = tmp_path / "junk.sst"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(StatectlError, match=str(tmp_path / "s2")):
        ingest_into_new_store(tmp_path / "s2", [junk])
    assert junk.is_file()
