"""The snapshot model (Samza's SnapshotIndex and friends), its JSON serde, and DirDiff."""

from statectl.snapshot.model import (
    DirIndex,
    FileBlob,
    FileIndex,
    FileMetadata,
    SnapshotIndex,
    SnapshotMetadata,
    check_writable,
    parse_index,
    samza_problems,
    serialize_index,
)

__all__ = [
    "DirIndex",
    "FileBlob",
    "FileIndex",
    "FileMetadata",
    "SnapshotIndex",
    "SnapshotMetadata",
    "check_writable",
    "parse_index",
    "samza_problems",
    "serialize_index",
]
