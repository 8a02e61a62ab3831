"""formats.adstore: Kafka's murmur2 partitioner (against Kafka's own test vectors), values to bytes, field
paths, the key/value spec of records (own bytes, JSON fields, tombstones, extractors) and of file rows, the
entry digest, and the version manifest."""

from __future__ import annotations

import json
import random

import pytest

from statectl.formats.adstore import (
    AdRecord,
    Digest,
    ExtractError,
    KeyValueSpec,
    VersionManifest,
    entry_digest,
    entry_digests,
    fast_crc32,
    field_path,
    murmur2,
    partition_of,
    partitions_of,
    to_bytes,
)

EXTRACTORS = "tests.tools.adstore_extractors"


def rec(key: bytes | None, value: bytes | None, *, partition: int = 0, offset: int = 7) -> AdRecord:
    return AdRecord("cdc", partition, offset, 1_700_000_000_000, key, value)


# -- murmur2 and the partitioner -----------------------------------------------------------------------

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize("text,expected", sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka(text: str, expected: int):
    assert murmur2(text.encode()) == expected


def test_murmur2_is_a_signed_32_bit_int_for_every_tail_length():
    rng = random.Random(3)
    for n in range(40):
        h = murmur2(rng.randbytes(n))
        assert -(1 << 31) <= h < (1 << 31)


def test_partition_of_is_kafkas_to_positive_modulo():
    for text, h in KAFKA_VECTORS.items():
        for n in (1, 3, 7, 12):
            assert partition_of(text.encode(), n) == (h & 0x7FFFFFFF) % n
    # toPositive, not abs: a negative hash keeps its low 31 bits
    assert partition_of(b"21", 1 << 31) == -973932308 & 0x7FFFFFFF
    assert partition_of(b"anything", 1) == 0


def test_partitions_of_an_arrow_column_is_partition_of_each_key():
    import pyarrow as pa

    rng = random.Random(26)
    keys = [t.encode() for t in KAFKA_VECTORS] + [rng.randbytes(n) for n in range(40) for _ in range(30)]
    keys += [b"", b"\xff" * 7, "é".encode()]
    for n in (1, 3, 7, 12, 1 << 31):
        want = [partition_of(k, n) for k in keys]
        for kind in (pa.binary(), pa.large_binary()):
            column = pa.array(keys, kind)
            assert partitions_of(column, n).tolist() == want, (n, kind)
            assert partitions_of(column.slice(11, 200), n).tolist() == want[11:211], (n, kind)
    for size in range(23):  # a column of keys of one length: hashed a block column at a time
        same = [rng.randbytes(size) for _ in range(50)]
        column = pa.array([b"x" * (size + 1)] + same, pa.binary()).slice(1)
        assert partitions_of(column, 1 << 31).tolist() == [partition_of(k, 1 << 31) for k in same], size
    texts = [f"key-{i}-é" for i in range(300)]
    for kind in (pa.string(), pa.large_string()):
        assert partitions_of(pa.array(texts, kind), 5).tolist() == [partition_of(t.encode(), 5) for t in texts]
    assert partitions_of(pa.array([], pa.binary()), 3).tolist() == []
    with pytest.raises(ValueError):
        partitions_of(pa.array([b"a", None]), 3)


def test_partition_of_spreads_keys_over_every_partition():
    counts = [0] * 4
    for i in range(4000):
        counts[partition_of(b"key-%d" % i, 4)] += 1
    assert all(700 < c < 1300 for c in counts), counts


# -- values to bytes and field paths ---------------------------------------------------------------


def test_to_bytes():
    import datetime as dt
    import decimal

    assert to_bytes(None) is None
    assert to_bytes(b"\x00\xff") == b"\x00\xff"
    assert to_bytes(bytearray(b"ab")) == b"ab"
    assert to_bytes(memoryview(b"mv")) == b"mv"
    assert to_bytes("héllo") == "héllo".encode()
    assert to_bytes("") == b""
    assert to_bytes(42) == b"42"
    assert to_bytes(1.5) == b"1.5"
    assert to_bytes(True) == b"true"
    assert to_bytes({"b": [1, None], "a": "é"}) == '{"b":[1,null],"a":"é"}'.encode()
    assert to_bytes([dt.date(2024, 2, 29), dt.datetime(2024, 1, 2, 3, 4, 5), decimal.Decimal("1.10")]) == \
        b'["2024-02-29","2024-01-02T03:04:05","1.10"]'
    with pytest.raises(TypeError):
        to_bytes({"x": object()})


def test_field_path():
    doc = {"a": {"b": [10, {"c": "deep"}], "n": None}, "top": 1}
    assert field_path(doc, "top") == 1
    assert field_path(doc, "a.b.0") == 10
    assert field_path(doc, "a.b.-1.c") == "deep"
    assert field_path(doc, "a.n") is None
    assert field_path(doc, "a") == {"b": [10, {"c": "deep"}], "n": None}
    for missing in ("nope", "a.x", "a.b.2", "a.b.-3", "top.x", "a.b.c"):
        with pytest.raises(ExtractError, match=repr(missing)):
            field_path(doc, missing)


# -- records -------------------------------------------------------------------------------------------


def test_own_bytes_by_default():
    extract = KeyValueSpec().record_extractor()
    assert extract(rec(b"k", b"v")) == (b"k", b"v")
    assert extract(rec(b"k", None)) == (b"k", None)  # a tombstone deletes
    assert extract(rec(b"k", b"")) == (b"k", b"")    # an empty value is a put
    assert extract(rec(None, b"v")) is None          # no key: skipped


def test_key_and_value_fields():
    extract = KeyValueSpec(key_field="id", value_field="profile.name").record_extractor()
    value = json.dumps({"id": 12, "profile": {"name": "Ada"}}).encode()
    assert extract(rec(b"ignored", value)) == (b"12", b"Ada")
    obj = json.dumps({"id": "x", "profile": {"name": {"first": "A"}}}).encode()
    assert extract(rec(None, obj)) == (b"x", b'{"first":"A"}')
    # a tombstone carries no value to find the key in: nothing to delete by
    assert extract(rec(b"12", None)) is None
    with pytest.raises(ExtractError, match="not JSON"):
        extract(rec(b"k", b"{not json"))
    with pytest.raises(ExtractError, match="'id'"):
        extract(rec(b"k", b'{"profile": {"name": "n"}}'))
    with pytest.raises(ExtractError, match="null"):
        extract(rec(b"k", b'{"id": null, "profile": {"name": "n"}}'))


def test_value_field_only_keeps_the_record_key():
    extract = KeyValueSpec(value_field="v").record_extractor()
    assert extract(rec(b"k", b'{"v": [1, 2]}')) == (b"k", b"[1,2]")
    assert extract(rec(b"k", None)) == (b"k", None)  # the key is the record's: a tombstone deletes it
    assert extract(rec(None, b'{"v": 1}')) is None
    assert extract(rec(b"k", b'{"v": null}')) == (b"k", None)  # a null field deletes too


def test_key_field_only_keeps_the_whole_value():
    extract = KeyValueSpec(key_field="id").record_extractor()
    raw = b'{"id": "a", "x": 1}'
    assert extract(rec(None, raw)) == (b"a", raw)  # the value as it was written, not re-encoded


def test_extractor_function():
    extract = KeyValueSpec(extractor=f"{EXTRACTORS}:upper").record_extractor()
    assert extract(rec(b"k", b"abc")) == (b"k", b"ABC")
    assert extract(rec(b"k", None)) == (b"k", None)
    assert extract(rec(None, b"abc")) is None
    extract = KeyValueSpec(extractor=f"{EXTRACTORS}:with_offset").record_extractor()
    assert extract(rec(b"k", b"v", partition=2, offset=9)) == (b"2:9", b'{"topic":"cdc","key":"k"}')


def test_extractor_class_with_get_key_and_get_value():
    extract = KeyValueSpec(extractor=f"{EXTRACTORS}:ById").record_extractor()
    assert extract(rec(b"k", b'{"id": 5, "name": "five"}')) == (b"5", b"five")
    assert extract(rec(b"k", b'{"id": "s", "name": null}')) == (b"s", None)  # a null value deletes
    assert extract(rec(b"k", b'{"id": null, "name": "x"}')) is None         # a null key skips
    with pytest.raises(KeyError):
        extract(rec(b"k", b'{"name": "x"}'))  # the caller names the record


def test_extractor_class_instances_are_called():
    extract = KeyValueSpec(extractor=f"{EXTRACTORS}:CallableClass").record_extractor()
    assert extract(rec(b"k", b"v")) == (b"c-k", b"v")


def test_extractor_returning_something_else_is_an_extract_error():
    extract = KeyValueSpec(extractor=f"{EXTRACTORS}:pair_of_three").record_extractor()
    with pytest.raises(ExtractError, match="tuple, not a"):
        extract(rec(b"k", b"v"))


def test_extractor_errors_when_loading():
    def err(spec: str) -> str:
        with pytest.raises(ExtractError) as e:
            KeyValueSpec(extractor=spec).record_extractor()
        return str(e.value)

    for spec in ("no_colon", f"{EXTRACTORS}:", ":upper"):
        assert "is not module:callable" in err(spec)
    msg = err("tests.tools.no_such_module_here:f")
    assert "cannot import tests.tools.no_such_module_here" in msg and "ModuleNotFoundError" in msg
    assert f"{EXTRACTORS} has no missing" in err(f"{EXTRACTORS}:missing")
    assert "NOT_CALLABLE is not callable" in err(f"{EXTRACTORS}:NOT_CALLABLE")
    msg = err(f"{EXTRACTORS}:Broken")
    assert "Broken() failed" in msg and "no config" in msg


def test_describe():
    assert KeyValueSpec().describe() == "the record key, the record value"
    assert KeyValueSpec(key_field="a.b").describe() == "key field a.b, the record value"
    assert KeyValueSpec(extractor="m:f", key_field="x").describe() == "extractor m:f"


# -- file rows -------------------------------------------------------------------------------------


def test_row_entry_value_column():
    spec = KeyValueSpec(key_column="id", value_column="name")
    assert spec.row_entry({"id": "7", "name": "seven", "x": 1}) == (b"7", b"seven")
    assert spec.row_entry({"id": 7, "name": None}) == (b"7", b"")  # a null value: empty bytes, never a delete
    assert spec.row_entry({"id": 7, "name": {"a": 1}}) == (b"7", b'{"a":1}')
    with pytest.raises(ExtractError, match="no column 'name'"):
        spec.row_entry({"id": 7})


def test_row_entry_value_columns_in_the_order_given():
    spec = KeyValueSpec(key_column="id", value_columns=("b", "a", "missing"))
    assert spec.row_entry({"id": "k", "a": 1, "b": "x"}) == (b"k", b'{"b":"x","a":1,"missing":null}')


def test_row_entry_default_value_is_every_other_column_in_dataset_order():
    spec = KeyValueSpec(key_column="id")
    assert spec.row_entry({"z": 1, "id": "k", "a": None}) == (b"k", b'{"z":1,"a":null}')
    assert spec.row_entry({"id": "k"}) == (b"k", b"{}")


def test_row_entry_key_errors():
    spec = KeyValueSpec(key_column="id", value_column="v")
    with pytest.raises(ExtractError, match="no column 'id'") as e:
        spec.row_entry({"v": 1, "w": 2})
    assert "columns: v, w" in str(e.value)
    with pytest.raises(ExtractError, match="'id' is null"):
        spec.row_entry({"id": None, "v": 1})
    with pytest.raises(ExtractError, match="no key column"):
        KeyValueSpec().row_entry({"id": 1})


def test_spec_is_picklable():
    import pickle

    spec = KeyValueSpec(key_column="id", value_columns=("a", "b"))
    assert pickle.loads(pickle.dumps(spec)) == spec


# -- digest and manifest ---------------------------------------------------------------------------


def _entries(seed: int, n: int) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    return {rng.randbytes(rng.randrange(0, 12)): rng.randbytes(rng.randrange(0, 30)) for _ in range(n)}


def test_digest_add_add_sorted_and_merge_agree():
    entries = _entries(1, 500)
    one = Digest()
    for k, v in entries.items():  # any order
        one.add(k, v)
    sorted_ = Digest()
    sorted_.add_sorted(sorted(entries.items()))
    # split into chunks, each digested sorted, merged in some order
    items = sorted(entries.items())
    parts = [items[i:i + 77] for i in range(0, len(items), 77)]
    merged = Digest()
    for part in reversed(parts):
        d = Digest()
        d.add_sorted(part)
        merged.merge(d)
    # add_sorted twice on one digest (continuing)
    twice = Digest()
    twice.add_sorted(items[:250])
    twice.add_sorted(items[250:])
    assert one == sorted_ == merged == twice
    assert one.keys == len(entries)
    assert one.first_key == min(entries) and one.last_key == max(entries)
    assert one.checksum == sum(entry_digest(k, v) for k, v in entries.items()) % (1 << 64)


def test_the_batch_digests_are_entry_digest_of_each_entry_on_edge_cases():
    """entry_digests and add_sorted_columns (ISA-L's CRC32, the key's length folded in numpy) give exactly
    entry_digest (zlib's CRC32 per entry): empty keys and values, keys whose length needs 1 to 3 bytes, long
    values, CRC32 seeds of every bit."""
    import zlib

    import numpy as np

    rng = random.Random(5)
    keys = [b"", b"", b"k", rng.randbytes(255), rng.randbytes(256), rng.randbytes(70_000), b"\xff" * 17, b"\0"]
    values = [b"", b"v", b"", rng.randbytes(3), rng.randbytes(1 << 20), b"", rng.randbytes(100), b"\0" * 4097]
    want = [entry_digest(k, v) for k, v in zip(keys, values)]
    got = entry_digests(keys, values)
    assert got.dtype == np.uint64 and got.tolist() == want
    assert entry_digests(keys, values, np.array([len(k) for k in keys])).tolist() == want
    assert entry_digests([], []).tolist() == []
    d = Digest()
    d.add_sorted_columns(keys[2:4], values[2:4])
    assert d.checksum == sum(want[2:4]) % (1 << 64)
    crc = fast_crc32()
    for data in (b"", b"a", rng.randbytes(100), rng.randbytes(100_000)):
        for seed in (0, 1, 0x80000000, 0xFFFFFFFF):
            assert crc(data, seed) == zlib.crc32(data, seed)


def test_digest_tells_contents_apart():
    base = Digest()
    base.add_sorted([(b"a", b"1"), (b"b", b"2")])
    for other in ([(b"a", b"1"), (b"b", b"3")], [(b"a", b"1")], [(b"a1", b""), (b"b", b"2")],
                  [(b"a", b"12"), (b"b", b"")], [(b"", b"a1"), (b"b", b"2")]):
        d = Digest()
        d.add_sorted(other)
        assert d.checksum != base.checksum, other


def test_digest_empty_and_merge_of_empty():
    d = Digest()
    d.add_sorted([])
    d.merge(Digest())
    assert d == Digest() and d.as_json() == {"keys": 0, "first_key": None, "last_key": None,
                                             "checksum": "0000000000000000"}
    assert Digest.from_json(d.as_json()) == d


def test_digest_json_round_trip():
    d = Digest()
    d.add_sorted(sorted(_entries(2, 50).items()))
    assert Digest.from_json(json.loads(json.dumps(d.as_json()))) == d
    with pytest.raises(ValueError, match="malformed digest"):
        Digest.from_json({"keys": 1})


def test_version_manifest_round_trip():
    d = Digest()
    d.add_sorted([(b"\x00k", b"v"), (b"\xffz", b"w")])
    m = VersionManifest(3, "/data/members.parquet", 2, d, "2026-01-02T03:04:05Z", "put", {"format": "parquet"})
    text = m.to_json()
    obj = json.loads(text)
    assert obj["version"] == 3 and obj["rows"] == 2 and obj["keys"] == 2
    assert obj["first_key"] == "006b" and obj["last_key"] == "ff7a" and obj["checksum"] == f"{d.checksum:016x}"
    assert VersionManifest.from_json(text) == m
    plain = VersionManifest(1, "s", 0, Digest(), "t")
    assert "extra" not in json.loads(plain.to_json())
    assert VersionManifest.from_json(plain.to_json()) == plain
    for bad in ("", "[]", '{"version": 1}', text.replace('"rows": 2', '"rows": "x"')):
        with pytest.raises(ValueError, match="malformed ADSTORE-MANIFEST.json"):
            VersionManifest.from_json(bad)
