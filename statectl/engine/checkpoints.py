"""Where committed checkpoints are recorded: the commit point of a backup.

Without Kafka, statectl records each checkpoint of a store as a small JSON object in the blob store,
``checkpoints/<job>/<job-id>/<task>/<store>/<checkpoint-id>.json`` (components URL-quoted). Writing that
record *is* the commit; everything before it is garbage-collectable, everything after it idempotent.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import quote

from statectl.blobstore.base import BlobStore
from statectl.engine.layout import StoreRef, is_checkpoint_id, parse_checkpoint_id
from statectl.errors import BlobNotFoundError, CorruptSnapshotError

CHECKPOINT_PREFIX = "checkpoints/"


@dataclass(frozen=True)
class CheckpointRecord:
    """One committed checkpoint of one store: its id and the blob id of its SnapshotIndex."""

    checkpoint_id: str
    index_blob_id: str
    created_ms: int
    cleanup_done: bool = False


class CheckpointStore(Protocol):
    """Records of committed checkpoints, per StoreRef."""

    def list(self, ref: StoreRef) -> list[CheckpointRecord]:
        """Every recorded checkpoint of the store, newest first."""

    def latest(self, ref: StoreRef) -> CheckpointRecord | None:
        """The newest recorded checkpoint, or None when the store has never been backed up."""

    def write(self, ref: StoreRef, record: CheckpointRecord) -> None:
        """Record a checkpoint durably; once this returns, the checkpoint is committed."""

    def mark_cleanup_done(self, ref: StoreRef, record: CheckpointRecord) -> None:
        """Note that the post-commit cleanup of ``record`` has completed (an optimisation only)."""

    def forget(self, ref: StoreRef, checkpoint_id: str) -> None:
        """Drop the record of an old checkpoint. Idempotent."""


def ref_prefix(ref: StoreRef) -> str:
    parts = (ref.job, ref.job_id, ref.task, ref.store)
    return CHECKPOINT_PREFIX + "/".join(quote(p, safe="") for p in parts) + "/"


class BlobCheckpointStore:
    """CheckpointStore kept in the blob store itself (the embedded default when no Kafka is given)."""

    def __init__(self, blobstore: BlobStore):
        self.blobstore = blobstore

    def _key(self, ref: StoreRef, checkpoint_id: str) -> str:
        return f"{ref_prefix(ref)}{checkpoint_id}.json"

    def _read(self, key: str) -> CheckpointRecord | None:
        buf = io.BytesIO()
        try:
            self.blobstore.get(key, buf)
        except BlobNotFoundError:
            return None
        try:
            obj = json.loads(buf.getvalue())
            return CheckpointRecord(str(obj["checkpoint-id"]), str(obj["snapshot-index-blob-id"]),
                                    int(obj.get("created-time-millis", 0)), bool(obj.get("cleanup-done", False)))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptSnapshotError(f"malformed checkpoint record {key} in {self.blobstore.url}: {e}") from None

    def _ids(self, ref: StoreRef) -> list[str]:
        prefix = ref_prefix(ref)
        ids = []
        for info in self.blobstore.list(prefix):
            name = info.key[len(prefix):]
            if name.endswith(".json") and "/" not in name and is_checkpoint_id(name[:-5]):
                ids.append(name[:-5])
        return sorted(ids, key=parse_checkpoint_id, reverse=True)

    def list(self, ref: StoreRef) -> list[CheckpointRecord]:
        records = (self._read(self._key(ref, cid)) for cid in self._ids(ref))
        return [r for r in records if r is not None]

    def latest(self, ref: StoreRef) -> CheckpointRecord | None:
        for cid in self._ids(ref):
            record = self._read(self._key(ref, cid))
            if record is not None:
                return record
        return None

    def write(self, ref: StoreRef, record: CheckpointRecord) -> None:
        self.blobstore.put_at(self._key(ref, record.checkpoint_id), _dump(record))

    def mark_cleanup_done(self, ref: StoreRef, record: CheckpointRecord) -> None:
        self.write(ref, replace(record, cleanup_done=True))

    def forget(self, ref: StoreRef, checkpoint_id: str) -> None:
        self.blobstore.delete(self._key(ref, checkpoint_id))


def _dump(record: CheckpointRecord) -> bytes:
    return json.dumps({
        "checkpoint-id": record.checkpoint_id,
        "snapshot-index-blob-id": record.index_blob_id,
        "created-time-millis": record.created_ms or int(time.time() * 1000),
        "cleanup-done": record.cleanup_done,
    }).encode()
