"""CRC32 helpers: combining the CRCs of consecutive pieces, so chunks can be checksummed in parallel."""

from __future__ import annotations

from functools import lru_cache

try:  # ISA-L's CRC32 (carry-less multiply): ~15x zlib 1.2's, the largest CPU cost of a restore after the network
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - a platform without isal wheels: the same values, slower
    from zlib import crc32

__all__ = ["crc32", "crc32_combine", "combine_all"]

_POLY = 0xEDB88320


def _gf2_times(mat: list[int], vec: int) -> int:
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
def _shift_operator(len2: int) -> tuple[int, ...]:
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


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32 of A+B given crc32(A), crc32(B) and len(B) (zlib's crc32_combine)."""
    if len2 <= 0:
        return crc1
    return _gf2_times(list(_shift_operator(len2)), crc1) ^ crc2


def combine_all(pieces: list[tuple[int, int]]) -> int:
    """CRC32 of consecutive pieces given as (crc, length), in order."""
    crc = 0
    for piece_crc, length in pieces:
        crc = crc32_combine(crc, piece_crc, length)
    return crc
