"""How files are cut into blobs: Samza reads a FileBlob's offset as a Java int."""

from __future__ import annotations

import pytest

from statectl.formats.java import JAVA_INT_MAX
from statectl.transfer.upload import chunk_spans

MiB = 1024 * 1024
GiB = 1024 * MiB


@pytest.mark.parametrize("size", [0, 1, 64 * MiB - 1, 64 * MiB, 64 * MiB + 1, 2 * GiB - 1, 2 * GiB, 2 * GiB + 1,
                                  5 * GiB + 12345, 100 * GiB])
@pytest.mark.parametrize("chunk", [MiB, 64 * MiB, 3 * MiB + 7, 5 * GiB])
def test_chunks_tile_the_file_and_no_offset_exceeds_a_java_int(size, chunk):
    spans = chunk_spans(size, chunk)
    assert sum(n for _, n in spans) == size
    offset = 0
    for start, n in spans:
        assert start == offset and n > 0
        assert start <= JAVA_INT_MAX
        offset += n
    # every chunk but the last has exactly the chunk size: only the tail past 2 GiB is one larger blob
    assert all(n == chunk for _, n in spans[:-1])


def test_a_file_over_2_gib_ends_in_one_blob_holding_the_rest():
    spans = chunk_spans(3 * GiB, 64 * MiB)
    # a chunk starting at 2 GiB would be past a Java int: the 32nd chunk takes the rest
    assert spans[-1] == (2 * GiB - 64 * MiB, GiB + 64 * MiB)
    assert len(spans) == 32
    spans = chunk_spans(3 * GiB, 100 * MiB)
    last_start, last_len = spans[-1]
    assert last_start <= JAVA_INT_MAX < last_start + 100 * MiB and last_start + last_len == 3 * GiB
