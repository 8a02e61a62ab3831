"""Blob stores by URL scheme: ``file:///path`` (embedded default) and ``s3://bucket/prefix``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from statectl import defaults
from statectl.blobstore.base import (
    DEFAULT_TTL_SECONDS,
    BlobInfo,
    BlobStore,
    new_blob_key,
)
from statectl.errors import UsageError

__all__ = ["BlobInfo", "BlobStore", "DEFAULT_TTL_SECONDS", "S3Options", "SSE_MODES", "default_blobstore_url",
           "new_blob_key", "open_blobstore"]

# S3 server-side encryption as the x-amz-server-side-encryption header spells it: S3-managed keys, or KMS.
SSE_MODES = ("AES256", "aws:kms")


@dataclass(frozen=True)
class S3Options:
    """Connection settings for ``s3://`` stores; None means boto3's usual chain decides."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    profile: str | None = None
    max_connections: int = 32
    # Connect, and each read of a response; a metadata request as a whole gets 4x this, and a transfer
    # must move 64 KiB within this, but one that keeps moving is never cut (statectl/blobstore/deadlines.py).
    timeout_s: float = defaults.TIMEOUT_S
    part_size: int = 64 * 1024 * 1024  # = the default --chunk-size: each chunk goes up in one PUT
    # A server-side copy of an object larger than this goes as a multipart upload of UploadPartCopy parts
    # of copy_part_size, in parallel (S3 refuses CopyObject above 5 GiB). Each request must finish within
    # the metadata deadline (4 x timeout_s) although it moves its whole part inside the store, hence parts
    # far below that limit.
    copy_threshold: int = 1024 * 1024 * 1024
    copy_part_size: int = 256 * 1024 * 1024
    # Server-side encryption of every object written (PutObject, CreateMultipartUpload, CopyObject: a copy
    # is encrypted as its destination says); None leaves it to the bucket's default encryption. A KMS key
    # (id, ARN or alias) goes with "aws:kms" only; without one S3 uses the account's aws/s3 key.
    sse: str | None = None
    sse_kms_key_id: str | None = None


def default_blobstore_url() -> str:
    """``file://$XDG_DATA_HOME/statectl/blobs`` (XDG_DATA_HOME defaulting to ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid and must be ignored
        base = str(Path.home() / ".local" / "share")
    return "file://" + str(Path(base) / "statectl" / "blobs")


def file_root(url: str) -> Path | None:
    """The real dir of a ``file://`` blob store URL (None for another scheme), without opening (or
    creating) it. Raises UsageError for a host, a relative path, no path, or a path that resolves to ``/``."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    if _has_control_char(url) or _has_control_char(unquote(url)):
        raise UsageError(f"invalid blob store URL {url!r}: it contains a control character (NUL, newline, ...)",
                         hint="use file:///path or s3://bucket/prefix with printable characters only")
    if parsed.netloc not in ("", "localhost"):
        raise UsageError(f"invalid blob store URL {url!r}: use file:///absolute/path")
    path = unquote(parsed.path)
    if not path:
        raise UsageError(f"invalid blob store URL {url!r}: no path")
    if not path.startswith("/"):  # file:relative would write wherever the command happens to run
        raise UsageError(f"invalid blob store URL {url!r}: the path must be absolute",
                         hint="use file:///absolute/path")
    # The dir the OS resolves, not a lexical reading: "symlink/.." is the parent of the link's target,
    # and a root that is a link to "/" is "/". Every overlap check (restore's target) compares real paths.
    real = os.path.realpath(path)
    if real == "/":
        raise UsageError(f"invalid blob store URL {url!r}: the filesystem root cannot be a blob store"
                         + ("" if os.path.normpath(path) == "/" else " (the path resolves to /)"),
                         hint="use a dir of its own, e.g. file:///var/backups/statectl")
    return Path(real)


def open_blobstore(url: str, *, s3: S3Options | None = None, retries: int = defaults.RETRIES,
                   retry_time_s: float = defaults.RETRY_TIME_S,
                   create: bool | Literal["on-write"] = True) -> BlobStore:
    """Open the blob store a URL names, wrapped so that transient errors are retried ``retries`` times,
    and no new attempt starts once ``retry_time_s`` seconds have passed since the first, and so that it
    counts its requests (``request_counts()``; every attempt counts, see statectl/blobstore/stats.py).

    Raises UsageError for an unknown scheme, a malformed URL, a URL with a control character (raw or
    percent-encoded), a ``file://`` path that resolves to ``/``, and S3Options with an unknown ``sse`` or a
    ``sse_kms_key_id`` without ``sse="aws:kms"`` (a ``file://`` store ignores them). A ``file://`` root is
    resolved with realpath (symlinks and ``..`` as the OS follows them): the store's ``root`` is the real
    directory.
    Opening does not touch the network; a missing bucket or bad credentials show on first use. A
    ``file://`` dir that does not exist is made when ``create``, else it is NotFoundError (exit 10) on
    first use, as a missing bucket; ``create="on-write"``: it reads as empty and is made by the first write.
    """
    from statectl.blobstore.retry import RetryingBlobStore
    from statectl.blobstore.stats import StatsBlobStore

    if _has_control_char(url) or _has_control_char(unquote(url)):
        # A NUL cannot be in a path at all, and a newline or escape in a dir name or S3 prefix would turn
        # every later error line, log and listing into a trap: refuse them, raw or percent-encoded.
        raise UsageError(f"invalid blob store URL {url!r}: it contains a control character (NUL, newline, ...)",
                         hint="use file:///path or s3://bucket/prefix with printable characters only")
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = str(file_root(url))
        from statectl.blobstore.local import LocalBlobStore

        inner: BlobStore = LocalBlobStore(path, url, create=create)
    elif parsed.scheme == "s3":
        if (s3 or S3Options()).timeout_s < 1:
            raise UsageError("timeout must be at least 1s")
        _check_sse(s3 or S3Options())
        bucket = parsed.netloc
        if len(bucket) < 3:
            raise UsageError(f"invalid blob store URL {url!r}: expected s3://bucket[/prefix]")
        from statectl.blobstore.s3 import S3BlobStore

        inner = S3BlobStore(bucket, parsed.path.strip("/"), s3 or S3Options(), url)
    elif "://" not in url and url:
        raise UsageError(f"invalid blob store URL {url!r}", hint="use file:///path or s3://bucket/prefix")
    else:
        raise UsageError(f"unsupported blob store scheme {parsed.scheme!r} in {url!r}",
                         hint="use file:///path or s3://bucket/prefix")
    if retries < 0:
        raise UsageError("retries must be 0 or more")
    if retry_time_s < 0:
        raise UsageError("retry_time must not be negative")
    return RetryingBlobStore(StatsBlobStore(inner), attempts=retries + 1, deadline_s=retry_time_s)


def _check_sse(options: S3Options) -> None:
    """UsageError for an SSE mode S3 does not know, or a KMS key without ``sse="aws:kms"``."""
    if options.sse is not None and options.sse not in SSE_MODES:
        raise UsageError(f"unknown server-side encryption {options.sse!r}: expected AES256 or aws:kms")
    if options.sse_kms_key_id is not None and options.sse != "aws:kms":
        raise UsageError(f"a KMS key id needs server-side encryption aws:kms, not {options.sse or 'none'}")


def _has_control_char(s: str) -> bool:
    """C0 controls (NUL, tab, newline, ESC, ...), DEL and the C1 controls."""
    return any(c < " " or "\x7f" <= c <= "\x9f" for c in s)
