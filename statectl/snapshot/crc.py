"""CRC32 helpers: combining the CRCs of consecutive pieces, so chunks can be checksummed in parallel.

ISA-L (isal) computes both the CRC32 and the combination in C. Without it, zlib's CRC32 and a combination in
Python (gf2_crc32_combine): a GF(2) operator per piece length, milliseconds each, which a restore of many
files of different sizes would pay once per file."""

from __future__ import annotations

from functools import lru_cache

try:  # ISA-L's CRC32 (carry-less multiply): ~15x zlib 1.2's, the largest CPU cost of a restore after the network
    from isal.isal_zlib import crc32
    from isal.isal_zlib import crc32_combine as isal_crc32_combine
except ImportError:  # pragma: no cover - a platform without isal wheels: the same values, slower
    from zlib import crc32

    isal_crc32_combine = None

__all__ = ["crc32", "crc32_combine", "combine_all", "gf2_crc32_combine", "zero_shift_operator"]

_POLY = 0xEDB88320


def _gf2_times(mat: list[int] | tuple[int, ...], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, mat[n]) for n in range(32)]


@lru_cache(maxsize=256)
def zero_shift_operator(len2: int) -> tuple[int, ...]:
    """The GF(2) matrix that appends ``len2`` zero bytes to a CRC (cached: a restore combines pieces
    of the same few sizes over and over)."""
    odd = [_POLY] + [1 << (n - 1) for n in range(1, 32)]  # the operator for one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four zero bits
    result = [1 << n for n in range(32)]  # identity
    while True:
        even = _gf2_square(odd)
        if len2 & 1:
            result = [_gf2_times(even, v) for v in result]
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            result = [_gf2_times(odd, v) for v in result]
        len2 >>= 1
        if not len2:
            break
    return tuple(result)


def gf2_crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """crc32_combine in Python (zlib's algorithm), for where ISA-L is not installed."""
    if len2 <= 0:
        return crc1
    if crc1 == 0:  # the shift is linear: a zero CRC (an empty first piece's) stays zero, no operator needed
        return crc2
    return _gf2_times(zero_shift_operator(len2), crc1) ^ crc2


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32 of A+B given crc32(A), crc32(B) and len(B) (zlib's crc32_combine)."""
    if len2 <= 0:
        return crc1
    if isal_crc32_combine is not None:
        return isal_crc32_combine(crc1, crc2, len2)
    return gf2_crc32_combine(crc1, crc2, len2)


def combine_all(pieces: list[tuple[int, int]]) -> int:
    """CRC32 of consecutive pieces given as (crc, length), in order."""
    crc = 0
    for piece_crc, length in pieces:
        crc = crc32_combine(crc, piece_crc, length)
    return crc
