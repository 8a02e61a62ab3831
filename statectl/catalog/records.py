"""Committed checkpoints: where a backup becomes durable, and the catalog of retained snapshots.

Every snapshot statectl takes is recorded in the blob store's catalog, one small JSON object per
checkpoint at ``checkpoints/<job>/<job-id>/<task>/<store>/<checkpoint-id>.json`` (components
URL-quoted). The catalog is what retention, ``snapshots list`` and ``gc`` read, for every job that
shares the blob store.

Where the commit happens depends on the mode:

- embedded (no Kafka): writing the catalog record in state ``committed`` *is* the commit.
- Kafka (``--kafka``): the job's Samza checkpoint topic is the source of truth. The catalog record is
  first written ``pending``, then the checkpoint goes to Kafka (the commit), then the record is
  marked ``committed``. A crash in between leaves a ``pending`` record whose blobs gc never deletes;
  the next backup, restore or gc reconciles it with the topic.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, replace
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol
from urllib.parse import quote, unquote

from statectl import defaults, failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.refs import StoreRef, is_checkpoint_id, parse_checkpoint_id
from statectl.errors import BlobNotFoundError, CorruptSnapshotError, UsageError


def now_ms() -> int:
    return int(time.time() * 1000)


def iso_utc(epoch_s: float) -> str:
    """``epoch_s`` (seconds) as ISO 8601 UTC to the second, e.g. ``2026-11-23T17:28:45Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


CHECKPOINT_PREFIX = "checkpoints/"

COMMITTED = "committed"

PENDING = "pending"

# Dropped by retention: no longer restorable. Its blobs stay until ``delete_after_ms`` (the grace
# period of the run that marked it: a restore that could not pin it may still be reading them), then
# go; its record goes last.
EXPIRED = "expired"


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint of one store: its id, the blob id of its SnapshotIndex, and its catalog state.

    ``keep_last`` is the retention the backup asked for, so that a cleanup re-run later applies the
    same policy. ``expired_ms``: when retention marked it ``expired``; ``delete_after_ms``: when its
    blobs may go at the latest (0: at once, e.g. marked by an older statectl; see catalog.retention).
    """

    checkpoint_id: str
    index_blob_id: str
    created_ms: int
    cleanup_done: bool = False
    state: str = COMMITTED
    keep_last: int = defaults.KEEP_LAST
    expired_ms: int = 0
    delete_after_ms: int = 0


class CommitLog(Protocol):
    """The job's source of truth for its latest checkpoint, when it is not the catalog itself."""

    def latest(self, ref: StoreRef) -> tuple[str, str] | None:
        """(checkpoint id, index blob id) of the store's latest committed checkpoint, or None."""

    def commit(self, ref: StoreRef, checkpoint_id: str, index_blob_id: str, *,
               input_offsets: Mapping[str, str] | None = None,
               markers: Mapping[str, Mapping[str, str]] | None = None,
               other_stores: Mapping[str, str] | None = None, exact_markers: bool = False) -> None:
        """Durably record a checkpoint; once this returns it is committed. ``input_offsets`` (the job's
        progress), ``markers`` (other state backends' positions) and ``other_stores`` (store -> index blob id:
        snapshots of other stores of the task, committed in the same checkpoint) go with it when given.
        ``exact_markers``: the checkpoint holds these stores' markers only, none kept from the task's latest."""

    def close(self) -> None: ...


def ref_prefix(ref: StoreRef) -> str:
    parts = (ref.job, ref.job_id, ref.task, ref.store)
    return CHECKPOINT_PREFIX + "/".join(quote(p, safe="") for p in parts) + "/"


class BlobCheckpointStore:
    """The catalog in the blob store, plus the commit log (the catalog itself, or Kafka)."""

    def __init__(self, blobstore: BlobStore, commit_log: CommitLog | None = None):
        self.blobstore = blobstore
        self.commit_log = commit_log

    # -- catalog -----------------------------------------------------------------------------------

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
                                    int(obj.get("created-time-millis", 0)), bool(obj.get("cleanup-done", False)),
                                    str(obj.get("state", COMMITTED)), int(obj.get("keep-last", 1)),
                                    int(obj.get("expired-time-millis", 0)), int(obj.get("delete-after-millis", 0)))
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

    def record(self, ref: StoreRef, checkpoint_id: str) -> CheckpointRecord | None:
        """The catalog record of one checkpoint of the store (pending or expired too), or None."""
        return self._read(self._key(ref, checkpoint_id))

    def records(self, ref: StoreRef) -> list[CheckpointRecord]:
        """Every catalog record of the store, pending ones included, newest first."""
        records = (self._read(self._key(ref, cid)) for cid in self._ids(ref))
        return [r for r in records if r is not None]

    def list(self, ref: StoreRef) -> list[CheckpointRecord]:
        """The committed snapshots of the store, newest first."""
        return [r for r in self.records(ref) if r.state == COMMITTED]

    def write(self, ref: StoreRef, record: CheckpointRecord) -> None:
        """Write (or overwrite) a catalog record."""
        self.blobstore.put_at(self._key(ref, record.checkpoint_id), _dump(record))

    def forget(self, ref: StoreRef, checkpoint_id: str) -> None:
        """Drop a catalog record. Idempotent."""
        self.blobstore.delete([self._key(ref, checkpoint_id)])

    def mark_cleanup_done(self, ref: StoreRef, record: CheckpointRecord) -> None:
        self.write(ref, replace(record, cleanup_done=True))

    def entries(self, job: str | None = None) -> Iterator[tuple[StoreRef, str]]:
        """(store, name) of every catalog record in this blob store, of every job or only of ``job`` (all
        its job ids), in listing order: the name is the checkpoint id (check it with is_checkpoint_id:
        a foreign ``.json`` there is yielded too). One listing, no record is read (so pending and expired
        records are included). Foreign objects elsewhere under ``checkpoints/`` are skipped."""
        prefix = CHECKPOINT_PREFIX + (quote(job, safe="") + "/" if job is not None else "")
        for info in self.blobstore.list(prefix):
            parts = info.key[len(CHECKPOINT_PREFIX):].split("/")
            if len(parts) != 5 or not parts[4].endswith(".json"):
                continue
            try:
                ref = StoreRef(*(unquote(p) for p in parts[:4]))
            except Exception:  # a foreign object under checkpoints/: not ours to judge
                continue
            yield ref, parts[4][:-5]

    def refs(self, job: str | None = None) -> Iterator[StoreRef]:
        """Every store (of every job, or of ``job``) with catalog records in this blob store."""
        seen: set[StoreRef] = set()
        for ref, _ in self.entries(job):
            if ref not in seen:
                seen.add(ref)
                yield ref

    # -- commits -----------------------------------------------------------------------------------

    def latest(self, ref: StoreRef) -> CheckpointRecord | None:
        """The store's latest committed checkpoint (from the commit log when there is one)."""
        if self.commit_log is None:  # the newest committed record: read newest first, no further
            for checkpoint_id in self._ids(ref):
                record = self.record(ref, checkpoint_id)
                if record is not None and record.state == COMMITTED:
                    return record
            return None
        found = self.commit_log.latest(ref)
        if found is None:
            return None
        checkpoint_id, index_blob_id = found
        for r in self.records(ref):
            if r.checkpoint_id == checkpoint_id and r.index_blob_id == index_blob_id:
                return r if r.state == COMMITTED else replace(r, state=COMMITTED)
        # Committed by a Samza job (or a crash before the catalog caught up): not in the catalog yet.
        return CheckpointRecord(checkpoint_id, index_blob_id, 0)

    def commit(self, ref: StoreRef, record: CheckpointRecord, *, input_offsets: Mapping[str, str] | None = None,
               markers: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """Commit a checkpoint: the catalog record, or pending record + Kafka + committed record.
        ``input_offsets`` and ``markers`` go to the commit log (UsageError without one: the catalog
        records neither)."""
        self.commit_stores([(ref, record)], input_offsets=input_offsets, markers=markers)

    def commit_stores(self, stores: Sequence[tuple[StoreRef, CheckpointRecord]], *,
                      input_offsets: Mapping[str, str] | None = None,
                      markers: Mapping[str, Mapping[str, str]] | None = None, exact_markers: bool = False) -> None:
        """Commit checkpoints of one or more stores of one task, all under one checkpoint id, as one: with a
        commit log, every pending record, then ONE checkpoint naming every store's snapshot (the task's
        ``input_offsets`` and ``markers`` with it; ``exact_markers``: ``stores`` are all the task's stores, and
        the checkpoint names no other, CommitLog.commit), then every committed record; a crash before that
        checkpoint leaves the task's latest checkpoint, of every store, as it was. Without one, each catalog
        record (a store at a time: the catalog has no commit spanning stores). UsageError for stores of
        several tasks or checkpoint ids, and for offsets or markers without a commit log."""
        (ref, record), others = stores[0], stores[1:]
        if any((r.job, r.job_id, r.task) != (ref.job, ref.job_id, ref.task)
               or rec.checkpoint_id != record.checkpoint_id for r, rec in others):
            raise UsageError("a commit of several stores takes stores of one task under one checkpoint id")
        if self.commit_log is None:
            if input_offsets is not None or markers:
                raise UsageError("input offsets and state markers are committed to a job's checkpoint topic: "
                                 "they need --kafka")
            for r, rec in stores:
                self.write(r, replace(rec, state=COMMITTED))
            return
        for r, rec in stores:
            self.write(r, replace(rec, state=PENDING))
        failpoints.hit("before-kafka-commit")
        self.commit_log.commit(ref, record.checkpoint_id, record.index_blob_id, input_offsets=input_offsets,
                               markers=markers, other_stores={r.store: rec.index_blob_id for r, rec in others},
                               exact_markers=exact_markers)
        failpoints.hit("after-kafka-commit")
        for r, rec in stores:
            self.write(r, replace(rec, state=COMMITTED))

    def reconcile(self, ref: StoreRef, *, abandon_after_s: float) -> CheckpointRecord | None:
        """Bring the catalog in line with the commit log after a crash; return the latest checkpoint.

        The latest checkpoint is recorded ``committed`` in the catalog. Pending records older than it,
        or older than ``abandon_after_s`` seconds, belong to backups that never committed: they are
        forgotten (their blobs still carry a TTL, and gc sweeps them).
        """
        latest = self.latest(ref)
        if self.commit_log is None:
            return latest
        records = self.records(ref)
        if latest is not None and not any(r.checkpoint_id == latest.checkpoint_id and r.state == COMMITTED
                                          for r in records):
            latest = replace(latest, state=COMMITTED, created_ms=latest.created_ms or int(time.time() * 1000))
            self.write(ref, latest)
        now_ms = time.time() * 1000
        for r in records:
            if r.state != PENDING or (latest is not None and r.checkpoint_id == latest.checkpoint_id):
                continue
            older = latest is not None and parse_checkpoint_id(r.checkpoint_id) < parse_checkpoint_id(latest.checkpoint_id)
            if older or now_ms - r.created_ms > abandon_after_s * 1000:
                self.forget(ref, r.checkpoint_id)
        return latest

    def close(self) -> None:
        if self.commit_log is not None:
            self.commit_log.close()


def _dump(record: CheckpointRecord) -> bytes:
    obj = {
        "checkpoint-id": record.checkpoint_id,
        "snapshot-index-blob-id": record.index_blob_id,
        "created-time-millis": record.created_ms or int(time.time() * 1000),
        "cleanup-done": record.cleanup_done,
        "state": record.state,
        "keep-last": record.keep_last,
    }
    if record.state == EXPIRED:  # only expired records carry these: every other record is as it was
        obj["expired-time-millis"] = record.expired_ms or now_ms()
        obj["delete-after-millis"] = record.delete_after_ms
    return json.dumps(obj).encode()
