"""crc32_combine / combine_all against zlib.crc32 of the concatenation: ISA-L's combination and the Python one
(gf2_crc32_combine, where isal is missing) alike."""

from __future__ import annotations

import random
import zlib

import pytest

from statectl.snapshot import crc as crc_module
from statectl.snapshot.crc import combine_all, gf2_crc32_combine, zero_shift_operator
from statectl.snapshot.diff import CRC_BUFFER, file_crc32

PAIRS = [
    (b"", b""),
    (b"", b"abc"),
    (b"abc", b""),
    (b"a", b"b"),
    (b"MANIFEST-", b"000014\n"),
    (b"\x00" * 7, b"\xff" * 13),
    (b"x" * 1000, b"y" * 4096),
    (b"\xff" * 65536, b"\x00" * 65537),
]


@pytest.fixture(params=["isal", "python"])
def crc32_combine(request):
    return crc_module.crc32_combine if request.param == "isal" else gf2_crc32_combine


@pytest.mark.parametrize("a, b", PAIRS, ids=[f"{len(a)}+{len(b)}" for a, b in PAIRS])
def test_crc32_combine_pairs(crc32_combine, a, b):
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_crc32_combine_known_value(crc32_combine):
    # zlib.crc32(b"123456789") is the CRC-32 check value.
    assert crc32_combine(zlib.crc32(b"1234"), zlib.crc32(b"56789"), 5) == 0xCBF43926


def test_crc32_combine_with_empty_second_piece_returns_first(crc32_combine):
    assert crc32_combine(0xDEADBEEF, 0, 0) == 0xDEADBEEF
    assert crc32_combine(0xDEADBEEF, 0, -1) == 0xDEADBEEF


def test_crc32_combine_long_zero_run(crc32_combine):
    # Exercise many rounds of the squaring loop (len2 has high bits set).
    a, b = b"head", b"\x00" * (10 * 1024 * 1024 + 7)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.parametrize("seed", range(20))
def test_crc32_combine_random_pairs(crc32_combine, seed):
    rng = random.Random(seed)
    a = rng.randbytes(rng.randrange(0, 5000))
    b = rng.randbytes(rng.choice([0, 1, 2, 3, rng.randrange(4, 70000)]))
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.parametrize("seed", range(20))
def test_combine_all_random_pieces(seed):
    rng = random.Random(1000 + seed)
    pieces = [rng.randbytes(rng.choice([0, 0, 1, rng.randrange(2, 40000)])) for _ in range(rng.randrange(1, 12))]
    got = combine_all([(zlib.crc32(p), len(p)) for p in pieces])
    assert got == zlib.crc32(b"".join(pieces))
    assert 0 <= got <= 0xFFFFFFFF


@pytest.mark.parametrize("pieces", [
    [],
    [b""],
    [b"", b"", b""],
    [b"", b"abc"],
    [b"abc", b""],
    [b"a", b"", b"b", b"", b"c"],
    [b"only one piece"],
], ids=repr)
def test_combine_all_with_empty_pieces(pieces):
    assert combine_all([(zlib.crc32(p), len(p)) for p in pieces]) == zlib.crc32(b"".join(pieces))


def test_combine_all_of_fixed_size_chunks_like_a_chunked_upload():
    rng = random.Random(7)
    data = rng.randbytes(3 * 65536 + 123)
    chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    assert len(chunks) == 4
    assert combine_all([(zlib.crc32(c), len(c)) for c in chunks]) == zlib.crc32(data)


def test_combining_pieces_of_many_lengths_builds_no_operator_in_python():
    """A restore combines one CRC per file (and per range): with ISA-L nothing is computed in Python, and
    without it a file of one piece (its CRC combined onto 0) needs no GF(2) operator either."""
    assert crc_module.isal_crc32_combine is not None  # isal is a dependency on every supported platform
    rng = random.Random(11)
    pieces = [rng.randbytes(rng.randrange(1, 3000)) for _ in range(40)]
    misses = zero_shift_operator.cache_info().misses
    assert combine_all([(zlib.crc32(p), len(p)) for p in pieces]) == zlib.crc32(b"".join(pieces))
    assert all(gf2_crc32_combine(0, zlib.crc32(p), len(p)) == zlib.crc32(p) for p in pieces)
    assert zero_shift_operator.cache_info().misses == misses


@pytest.mark.parametrize("size", [0, 1, CRC_BUFFER - 1, CRC_BUFFER, CRC_BUFFER + 1, 2 * CRC_BUFFER + 17])
def test_file_crc32(tmp_path, size):
    data = random.Random(size).randbytes(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    assert file_crc32(path) == zlib.crc32(data)
