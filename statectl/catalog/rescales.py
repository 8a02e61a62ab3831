"""The record of a rescale: what it read and what it made, written before its first commit, so that running
the same rescale again finishes one whose commit was cut and recognises one that is done
(statectl.engine.rescale.rerun).

One small JSON object per target store, ``rescales/<to-job>/<job-id>/<store>.json`` (components URL-quoted, as
the catalog's records are): the latest rescale into that store. It names what identifies the rescale (the
jobs, the store, the source and target task names, the partitioners or key groups), the source snapshots it
read, and per target task the snapshot it made and the task's latest snapshot before it (``before``). Its
``state`` is ``committing`` from before the first target's commit until the last one's, then ``done``. The
first write of a rescale is conditional on what it read at its start (as leases are written), so two
rescales into the same store that started together cannot both record themselves.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from statectl.blobstore.base import BlobStore
from statectl.errors import BlobNotFoundError, StatectlError

RESCALE_PREFIX = "rescales/"

COMMITTING = "committing"
DONE = "done"


@dataclass(frozen=True)
class RecordedSnapshot:
    """A source snapshot a rescale read, or a target snapshot it made (with ``before``: the task's latest
    snapshot when the rescale committed, None when it had none)."""

    task: str
    snapshot_id: str
    checkpoint_id: str = ""
    keys: int | None = None
    files: int = 0
    bytes: int = 0
    before: str | None = None


@dataclass(frozen=True)
class RescaleRecord:
    """``rescale``: what identifies the rescale (engine.rescale.rerun.identity); ``keys`` and
    ``content_hash``: what its verification found; ``created_ms``: when it was recorded."""

    rescale: dict[str, Any]
    sources: tuple[RecordedSnapshot, ...]
    targets: tuple[RecordedSnapshot, ...]
    keys: int = 0
    content_hash: str = ""
    state: str = COMMITTING
    created_ms: int = 0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "RescaleRecord":
        doc = json.loads(data)
        return cls(dict(doc["rescale"]), tuple(RecordedSnapshot(**s) for s in doc["sources"]),
                   tuple(RecordedSnapshot(**t) for t in doc["targets"]), int(doc["keys"]), str(doc["content_hash"]),
                   str(doc["state"]), int(doc["created_ms"]))


class MalformedRescaleRecord(StatectlError):
    """A rescale record that is not one (exit 1); ``etag``: its etag, for a write that replaces it."""

    def __init__(self, message: str, *, hint: str | None = None, etag: str = ""):
        super().__init__(message, hint=hint)
        self.etag = etag


def rescale_key(job: str, job_id: str, store: str) -> str:
    """The key of the record of the latest rescale into ``store`` of ``job``."""
    return RESCALE_PREFIX + "/".join(quote(p, safe="") for p in (job, job_id, store)) + ".json"


def read_rescale(blobstore: BlobStore, job: str, job_id: str, store: str) -> tuple[RescaleRecord | None, str | None]:
    """The record of the latest rescale into ``store`` of ``job`` and its etag (for ``write_rescale``), or
    (None, None). MalformedRescaleRecord (exit 1) for a record that is not one."""
    key = rescale_key(job, job_id, store)
    try:
        data, etag = blobstore.read_at(key)
    except BlobNotFoundError:
        return None, None
    try:
        return RescaleRecord.from_json(data), etag
    except (ValueError, KeyError, TypeError) as e:
        raise MalformedRescaleRecord(f"the rescale record {key} in {blobstore.url} is malformed: {e}",
                                     hint="nothing was written; --again starts the rescale afresh and replaces it",
                                     etag=etag) from None


def write_rescale(blobstore: BlobStore, record: RescaleRecord, *, etag: str | None) -> str:
    """Write the record of a rescale (into the store its ``rescale`` names: to_job, job_id, store), only if
    the record there is still the one read with ``etag`` (None: only if there is none); return the new etag.
    PreconditionFailedError otherwise."""
    r = record.rescale
    key = rescale_key(r["to_job"], r["job_id"], r["store"])
    return blobstore.put_at(key, record.to_json(), if_match=etag, if_none_match=etag is None)
