"""Blob stores by URL scheme: ``file:///path`` (embedded default) and ``s3://bucket/prefix``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from statectl.blobstore.base import DEFAULT_TTL_SECONDS, BlobInfo, BlobStore, new_blob_key
from statectl.errors import UsageError

__all__ = ["BlobInfo", "BlobStore", "DEFAULT_TTL_SECONDS", "S3Options", "default_blobstore_url", "new_blob_key",
           "open_blobstore"]


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
    timeout_s: float = 15.0  # connect, and each read of a response: not the whole of a long transfer
    part_size: int = 64 * 1024 * 1024  # = the default --chunk-size: each chunk goes up in one PUT


def default_blobstore_url() -> str:
    """``file://$XDG_DATA_HOME/statectl/blobs`` (XDG_DATA_HOME defaulting to ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid and must be ignored
        base = str(Path.home() / ".local" / "share")
    return "file://" + str(Path(base) / "statectl" / "blobs")


def open_blobstore(url: str, *, s3: S3Options | None = None, retries: int = 8,
                   retry_time_s: float = 60.0) -> BlobStore:
    """Open the blob store a URL names, wrapped so that transient errors are retried ``retries`` times,
    and no new attempt starts once ``retry_time_s`` seconds have passed since the first.

    Raises UsageError for an unknown scheme or a malformed URL. Opening does not touch the network;
    a missing bucket or bad credentials show on first use.
    """
    from statectl.blobstore.retry import RetryingBlobStore

    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"invalid blob store URL {url!r}: use file:///absolute/path")
        path = unquote(parsed.path)
        if not path:
            raise UsageError(f"invalid blob store URL {url!r}: no path")
        if not path.startswith("/"):  # file:relative would write wherever the command happens to run
            raise UsageError(f"invalid blob store URL {url!r}: the path must be absolute",
                             hint="use file:///absolute/path")
        path = "/" + os.path.normpath(path).lstrip("/")
        if path == "/":
            raise UsageError(f"invalid blob store URL {url!r}: the filesystem root cannot be a blob store",
                             hint="use a dir of its own, e.g. file:///var/backups/statectl")
        from statectl.blobstore.local import LocalBlobStore

        inner: BlobStore = LocalBlobStore(path, url)
    elif parsed.scheme == "s3":
        if (s3 or S3Options()).timeout_s < 1:
            raise UsageError("timeout must be at least 1s")
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
    return RetryingBlobStore(inner, attempts=retries + 1, deadline_s=retry_time_s)
