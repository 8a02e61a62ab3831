"""The BlobStore protocol: the only way statectl touches remote storage.

Every object is addressed by a key relative to the store's root (a dir for ``file://``, a bucket
prefix for ``s3://``). ``put`` creates data blobs under fresh keys it chooses (``blobs/xx/<uuid>``),
which serve as Samza blob ids; ``put_at`` writes small named records (checkpoint records).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator, Protocol, runtime_checkable

from statectl import defaults

BLOB_PREFIX = "blobs/"
# Every top-level prefix statectl writes under (data blobs, the catalog, leases, doctor's probes, reader
# pins, rescale records). The blob store may share its dir or bucket with other things: whatever walks a
# store to remove leftovers touches these prefixes only. A new prefix in statectl/engine must be added here (a test checks).
STATECTL_PREFIXES = (BLOB_PREFIX, "checkpoints/", "leases/", "doctor/", "pins/", "rescales/")
DEFAULT_TTL_SECONDS = defaults.TTL_SECONDS


def new_blob_key() -> str:
    """A fresh key for a data blob; never reused (a random 128-bit UUID)."""
    u = uuid.uuid4().hex
    return f"{BLOB_PREFIX}{u[:2]}/{u}"


def innermost(store: "BlobStore") -> "BlobStore":
    """The backend beneath a store's wrappers (each wrapper keeps the store it wraps in ``inner``)."""
    while getattr(store, "inner", None) is not None:
        store = store.inner  # type: ignore[attr-defined]
    return store


def key_batches(keys: Iterable[str], size: int) -> Iterator[list[str]]:
    """``keys`` in lists of at most ``size``, consumed lazily (a generator of keys is never held whole).

    Raises TypeError for a single ``str``: it is an iterable of keys too (one per character), and
    ``delete("blobs/ab/...")`` must fail loudly rather than delete one-letter keys.
    """
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"expected an iterable of keys, got the single key {keys!r}: pass [key]")
    batch: list[str] = []
    for key in keys:
        batch.append(key)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass(frozen=True)
class BlobInfo:
    """What a listing or stat says of one object.

    ``expires_at`` is the epoch second at which the object's TTL runs out, or None when it has no
    TTL (permanent); listings of backends that cannot see TTLs cheaply report None and set
    ``ttl_known`` False.
    """

    key: str
    size: int
    # When the object was written under this key (gc's grace counts from it), truncated to the store's
    # ``mtime_grain_s`` (S3 keeps whole seconds). A file:// copy with a TTL is a hard link, whose file keeps
    # its source's mtime: its age is its TTL sidecar's (statectl.blobstore.local).
    modified_at: float
    expires_at: float | None = None
    ttl_known: bool = True


@runtime_checkable
class BlobStore(Protocol):
    """Storage for blobs and small records. Implementations must be safe to call from many threads.

    Not found is always BlobNotFoundError; bad credentials AuthError; passing faults
    TransientBlobStoreError (retried by RetryingBlobStore); anything else BlobStoreError. Stores opened by
    ``open_blobstore`` also have ``root``: the real path of a ``file://`` store's dir, None for S3, and
    ``request_counts()`` (StatsBlobStore).
    """

    url: str
    # The most keys one delete request of the backend takes (S3 DeleteObjects: its API limit). ``delete``
    # takes any number, split into requests of this size; callers that delete in parallel hand out batches
    # of this size, and wrappers retry and count per batch.
    delete_batch: int
    # The grain of ``modified_at`` (S3's LastModified: whole seconds, truncated; 0 for file://). A caller
    # asking "was this written before time t?" compares ``modified_at`` with ``t - mtime_grain_s``: an
    # object written a moment after t may show a time before it.
    mtime_grain_s: float

    def put(self, src: BinaryIO, *, size: int, ttl_seconds: int | None) -> str:
        """Store exactly ``size`` bytes read from ``src`` under a new key and return that key.

        With ``ttl_seconds`` the blob expires unless ``remove_ttl`` is called first. The blob becomes
        visible whole or not at all. ``src`` is read from its current position; a retrying caller
        seeks it back.
        """

    def put_at(self, key: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
               durable: bool = True) -> str:
        """Write a small object at ``key``, atomically replacing any previous one (no TTL); return its
        etag. With ``if_none_match`` the write happens only if there is no object yet, with ``if_match``
        only if the object's etag is still that one; otherwise PreconditionFailedError. Conditional
        writes are atomic among statectl processes (S3 conditional writes; a file lock on file://).
        ``durable=False``: the object need only outlive the process that writes it (a reader's pin), so a
        store that would fsync it (file://) does not; other processes see it as they see any write."""

    def read_at(self, key: str) -> tuple[bytes, str]:
        """A small object's bytes and etag (for a later conditional ``put_at``). Raises BlobNotFoundError."""

    def get(self, key: str, dst: BinaryIO, *, start: int = 0, length: int | None = None) -> int:
        """Write the object's bytes ``[start, start+length)`` (to the end if length is None) into
        ``dst``; return the number of bytes written. Raises BlobNotFoundError. A ``dst`` that also has
        ``recv_buffer()`` (a non-empty writable memoryview of its own) and ``received(n)`` (the view's first
        ``n`` bytes are the next ones) may get the bytes read into that buffer instead of ``write``'s new
        bytes objects (S3 does: a copy less)."""

    def delete(self, keys: Iterable[str]) -> None:
        """Delete the objects named by ``keys`` (any iterable, consumed once; not a single ``str``:
        TypeError), ``delete_batch`` keys a request. Idempotent: a missing object is not an error. When it
        raises, any of the objects may be gone; calling it again with the same keys finishes the job."""

    def remove_ttl(self, key: str) -> None:
        """Make the object permanent. Idempotent. Raises BlobNotFoundError if it is gone."""

    # What the store is, whatever URL spelled it: stores with equal ``identity`` hold the same objects. A
    # ``file://`` store: ("file", the real path of its dir); an S3 store: ("s3", its endpoint, bucket and key
    # prefix, normalised: "s3://b/p/", "s3://b//p" and "s3://b/p" are one store). Compare this, never URLs.
    identity: tuple[str, ...]

    # Stores with equal ``copy_domain`` can copy each other's objects server-side (``copy(source=...)``):
    # for S3 the endpoint and credentials (any bucket of one endpoint), for ``file://`` the host's files.
    copy_domain: tuple[str, ...]

    def copy(self, key: str, *, ttl_seconds: int | None, source: "BlobStore | None" = None,
             size: int | None = None) -> str:
        """Copy the object ``key`` of ``source`` (default: this store) to a new key of this store and
        return that key, server-side: no bytes through the client (S3 CopyObject, UploadPartCopy in
        parallel parts for large objects; a file copy on ``file://``). ``source`` must have this
        store's ``copy_domain`` (UsageError otherwise); ``size`` (the object's size, if the caller knows
        it) spares a request. With ``ttl_seconds`` the copy expires unless ``remove_ttl`` comes first,
        whatever TTL the source has. The copy becomes visible whole or not at all. Raises
        BlobNotFoundError when the source object is missing; the source is never changed.
        """

    def check_writable(self, key: str) -> None:
        """Raise what a write of ``key`` would raise for want of the right to write (AuthError: credentials
        that can read but not write; BlobStoreError: a dir this user cannot write, a read-only mount;
        NotFoundError: no such bucket, or a dir ``create`` does not make), writing nothing: a dry run
        refuses what the command would. Idempotent. S3: a PUT conditional on an etag no object has, which
        the store authorizes before it answers 412 or 404; ``file://``: the first dir on the key's path
        that exists, asked with access(2)."""

    def stat(self, key: str) -> BlobInfo:
        """Size, mtime and TTL of one object. Raises BlobNotFoundError."""

    def list(self, prefix: str = "", *, start_after: str | None = None) -> Iterator[BlobInfo]:
        """Every object whose key starts with ``prefix`` (and with ``start_after``: comes after it), each
        key once, in the store's own order, which ``start_after`` resumes in: code-point order on
        ``file://`` and AWS S3 (= UTF-8 byte order); a store that lists like a directory walk (SeaweedFS)
        puts "a/b" before "a-b". Data blob keys (``blobs/<2 hex>/<32 hex>``) come sorted on all.

        A stream: the backend fetches a page at a time as the caller consumes it (an S3 list request, a
        ``file://`` directory), so memory does not grow with the number of objects; errors surface while
        iterating, not at the call. Objects written or deleted meanwhile may or may not show. A listing
        that failed part way resumes without repeats or gaps with ``start_after`` = the last key seen.
        """

    def sweep_debris(self, older_than: float, *, dry_run: bool = False) -> list[BlobInfo]:
        """Remove the leftovers of writes that never finished (the writer was killed), which ``list``
        does not show, if last changed before the epoch second ``older_than``: on ``file://`` partial
        files (``.tmp-*``) and TTL sidecars whose blob is gone, on S3 incomplete multipart uploads.
        Returns what was removed (with ``dry_run``: what would be), each named by the key it was
        written for or under. Idempotent. A write still in progress may lose its leftover only if it
        has been idle since ``older_than``: it then fails, it never completes damaged.
        """

    def close(self) -> None:
        """Release connections and threads."""
