"""Index blobs: read one (size-capped, every blob id checked to be a data blob of this store) and write
one. A snapshot is its SnapshotIndex blob; this is the only code that fetches or stores them."""

from __future__ import annotations

import io

from statectl.blobstore.base import BLOB_PREFIX, BlobStore
from statectl.errors import (
    BlobNotFoundError,
    CorruptSnapshotError,
    IndexFormatError,
    SnapshotNotFoundError,
)
from statectl.snapshot.model import SnapshotIndex, parse_index, serialize_index

MAX_INDEX_BYTES = 512 * 1024 * 1024  # an index of a million files is about 300 MiB


def read_index(blobstore: BlobStore, blob_id: str, *, what: str = "snapshot") -> SnapshotIndex:
    """Fetch and parse an index blob, and check that every blob id it names is a data blob of this store.

    Raises SnapshotNotFoundError when the blob does not exist, IndexFormatError / UnsafePathError
    when it is malformed. An index naming anything outside ``blobs/`` (a catalog record, a lease) is
    malformed: a cleanup deletes the blobs an index marks removed, so such an index could make it
    delete the catalog.
    """
    buf = io.BytesIO()
    try:
        blobstore.get(blob_id, buf, length=MAX_INDEX_BYTES + 1)
    except BlobNotFoundError:
        raise SnapshotNotFoundError(f"{what} index blob {blob_id} not found in {blobstore.url}") from None
    if buf.tell() > MAX_INDEX_BYTES:
        raise IndexFormatError(f"index blob {blob_id}: malformed index: larger than {MAX_INDEX_BYTES} bytes")
    try:
        index = parse_index(buf.getvalue())
        check_blob_ids(index)
        return index
    except CorruptSnapshotError as e:
        raise type(e)(f"index blob {blob_id}: {e}", hint=e.hint_parts) from None


def is_data_blob_id(blob_id: str) -> bool:
    """Whether ``blob_id`` has the shape of a data blob key: under ``blobs/``; no empty or hidden segment
    (``.``, ``..``, a blob store's ``.tmp-`` files); no control character; not a name a blob store keeps
    for itself (``.ttl`` sidecars, ``.lock`` files)."""
    parts = blob_id.split("/")
    return (blob_id.startswith(BLOB_PREFIX) and len(parts) >= 2 and blob_id.isprintable()
            and all(p and not p.startswith(".") for p in parts) and not parts[-1].endswith((".ttl", ".lock")))


def check_blob_ids(index: SnapshotIndex) -> None:
    """Raise IndexFormatError unless every blob id of ``index`` (present, removed, prev) is a data blob key."""
    ids = index.present_blob_ids() + index.removed_blob_ids()
    if index.prev_snapshot_index_blob_id is not None:
        ids.append(index.prev_snapshot_index_blob_id)
    for blob_id in ids:
        if not is_data_blob_id(blob_id):
            raise IndexFormatError(f"malformed index: blob id {blob_id!r} is not a data blob of this store")


def write_index(blobstore: BlobStore, index: SnapshotIndex, ttl_seconds: int | None) -> str:
    data = serialize_index(index)
    return blobstore.put(io.BytesIO(data), size=len(data), ttl_seconds=ttl_seconds)


def short_id(blob_id: str) -> str:
    """The last path component of a blob id (the UUID for statectl's own blobs)."""
    return blob_id.rsplit("/", 1)[-1]


def snapshot_owner(index: SnapshotIndex) -> str:
    """The store a snapshot was taken of, as ``job-id/task/store``."""
    m = index.snapshot_metadata
    return f"{m.job_name}-{m.job_id}/{m.task_name}/{m.store_name}"


def snapshot_blob_ids(index_blob_id: str, index: SnapshotIndex) -> set[str]:
    """Every blob a snapshot needs: its index blob and the blobs of its present files."""
    return {index_blob_id, *index.present_blob_ids()}
