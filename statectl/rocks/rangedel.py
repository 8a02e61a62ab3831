"""SST files that hold only range deletions, at sequence numbers above a given one: what clips a store made
of whole files copied from other stores to the keys it owns (rescale's key-group path), as Flink clips a
RocksDB instance restored from other tasks' files with deleteRange
(RocksDBIncrementalCheckpointUtils.clipDBWithKeyGroupRange).

RocksDB writes them itself (rocksdict's SstFileWriter has no delete_range): a scratch store whose MANIFEST
(statectl.rocks.manifest) starts at the sequence number asked for takes one DeleteRange per range, each
flushed into an SST file of its own, and each file comes back with its LiveFile as RocksDB recorded it
(smallest: the range's start at the deletion's sequence number; largest: its end as RocksDB's range
deletion sentinel, so that the end stays exclusive).
"""

from __future__ import annotations

from pathlib import Path

from statectl.errors import StatectlError
from statectl.rocks.manifest import LiveFile, manifest_bytes, read_store_manifest, write_store_files


def write_range_deletions(scratch: Path, ranges: list[tuple[bytes, bytes]],
                          above: int) -> list[tuple[Path, LiveFile]]:
    """One SST file per range ``[start, end)`` (start < end), in the order given, each deleting its range at
    a sequence number above ``above`` and above the ranges' before it; return each file's path (in
    ``scratch``, a dir this creates, which must not exist) and its LiveFile. StatectlError naming the dir
    when RocksDB fails or does not record the files as asked."""
    import rocksdict

    scratch = Path(scratch)
    scratch.mkdir(parents=True)
    if not ranges:
        return []
    write_store_files(scratch, manifest_bytes([], next_file_number=3, last_sequence=above), 2)
    options = rocksdict.Options(raw_mode=True)
    options.set_disable_auto_compactions(True)  # a file per range, none merged
    try:
        db = rocksdict.Rdict(str(scratch), options)
        try:
            for start, end in ranges:
                db.delete_range(start, end)
                db.flush()
        finally:
            db.close()
        files = sorted(read_store_manifest(scratch).live_files, key=lambda f: f.smallest_seqno)
    except Exception as e:
        raise StatectlError(f"cannot write range deletions in {scratch}: {e}") from e
    got = [(f.smallest_key, f.largest_key, f.end_exclusive, f.level) for f in files]
    if got != [(start, end, True, 0) for start, end in ranges] or files[0].smallest_seqno <= above:
        raise StatectlError(f"RocksDB recorded the range deletions in {scratch} otherwise than written: {got}")
    return [(scratch / f.name, f) for f in files]
