"""The snapshot model (Samza's SnapshotIndex and friends), its JSON serde, and DirDiff."""

from statectl.snapshot.model import (
    DirIndex,
    FileBlob,
    FileIndex,
    FileMetadata,
    SnapshotIndex,
    SnapshotMetadata,
    parse_index,
    serialize_index,
)

__all__ = [
    "DirIndex",
    "FileBlob",
    "FileIndex",
    "FileMetadata",
    "SnapshotIndex",
    "SnapshotMetadata",
    "parse_index",
    "serialize_index",
]
