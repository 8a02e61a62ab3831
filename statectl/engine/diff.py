"""diff: a local store dir against a snapshot, or one snapshot against another."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.catalog.resolve import resolve_snapshot
from statectl.errors import NotFoundError, UsageError
from statectl.local.layout import not_in_checkpoint
from statectl.snapshot.diff import LocalFile, diff_indexes, diff_local


@dataclass(frozen=True)
class DiffOptions:
    """``snapshot`` None means the latest. With ``against``, two snapshots are compared (what
    ``snapshot`` adds and removes relative to ``against``); else the local ``store_dir`` is compared
    with ``snapshot`` (what a backup now would add and remove)."""

    ref: StoreRef
    store_dir: Path
    snapshot: str | None = None
    against: str | None = None


@dataclass
class DiffEntry:
    path: str
    size: int


@dataclass
class ChangedEntry:
    """A path in both ``added`` and ``removed``: a file rewritten (RocksDB's CURRENT, an OPTIONS file), with
    its new and old size."""

    path: str
    size: int
    old_size: int


@dataclass
class DiffResult:
    """What a backup now would upload (``added``, every file it uploads) and drop (``removed``); ``changed``
    holds the paths in both, each once; ``bytes_added`` and ``bytes_removed`` count all of ``added`` and
    ``removed``."""

    new: str
    old: str
    added: list[DiffEntry] = field(default_factory=list)
    retained: list[DiffEntry] = field(default_factory=list)
    removed: list[DiffEntry] = field(default_factory=list)
    bytes_added: int = 0
    bytes_removed: int = 0
    blobstore: str = ""  # the blob store of the snapshot(s) (printed with its secrets masked)
    changed: list[ChangedEntry] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.added and not self.removed


def diff(opts: DiffOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore) -> DiffResult:
    """Compare; never changes anything. Raises SnapshotNotFoundError, NotFoundError (no store dir).

    Takes no reader pin (catalog.pins), so it works with read-only credentials and writes nothing: it
    reads only index blobs, each whole in one request while the snapshot is resolved, never a data blob
    that retention could delete half way through."""
    if opts.against is not None:
        if opts.snapshot is None:
            raise UsageError("--against needs --snapshot")
        new = resolve_snapshot(blobstore, checkpoints, opts.ref, opts.snapshot)
        old = resolve_snapshot(blobstore, checkpoints, opts.ref, opts.against)
        d = diff_indexes(new.index.dir_index, old.index.dir_index)
        label_new, label_old = new.index_blob_id, old.index_blob_id
    else:
        snap = resolve_snapshot(blobstore, checkpoints, opts.ref, opts.snapshot)
        if not opts.store_dir.is_dir():
            raise NotFoundError(f"store dir {opts.store_dir} does not exist")
        d = diff_local(opts.store_dir, snap.index.dir_index, ignore=not_in_checkpoint(opts.store_dir))
        label_new, label_old = str(opts.store_dir), snap.index_blob_id
    out = DiffResult(label_new, label_old, blobstore=blobstore.url)
    for path, f in d.added():
        out.added.append(DiffEntry(path, f.size))
    for path, f in d.retained():
        out.retained.append(DiffEntry(path, f.size))
    for path, f in d.removed():
        out.removed.append(DiffEntry(path, f.size))
    out.bytes_added = sum(e.size for e in out.added)
    out.bytes_removed = sum(e.size for e in out.removed)
    old_sizes = {e.path: e.size for e in out.removed}
    out.changed = [ChangedEntry(e.path, e.size, old_sizes[e.path]) for e in out.added if e.path in old_sizes]
    return out


__all__ = ["ChangedEntry", "DiffEntry", "DiffOptions", "DiffResult", "LocalFile", "diff"]
