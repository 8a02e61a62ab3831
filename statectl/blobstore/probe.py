"""The blob store's probe for ``statectl doctor``: use the store the way backup, the catalog and leases do.

``probe`` lists, writes, reads back and deletes a small record under ``doctor/`` (on S3 a create-only
write of it again must lose: leases rely on conditional writes); writes a blob with a TTL the way backup
does (under ``blobs/``, where gc reclaims it should the doctor die), reads it back, sees its expiry in
``stat``, clears it with ``remove_ttl`` and deletes it. Every probe it writes is removed again; a probe
blob left by a crash carries a TTL (gc reclaims it), and a probe record left under ``doctor/`` is removed
by the next probe once an hour old.
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
import uuid
from typing import Callable, Union
from urllib.parse import urlparse

from statectl.blobstore.base import BlobStore
from statectl.errors import (
    AuthError,
    BlobNotFoundError,
    BlobStoreError,
    DiskFullError,
    NotFoundError,
    PreconditionFailedError,
    StatectlError,
    TransientBlobStoreError,
    UsageError,
)
from statectl.probe import FAIL, OK, UNEXPECTED_HINT, Check

BLOB_STORE = "blob store"
NAMES = (BLOB_STORE,)

DOCTOR_PREFIX = "doctor/"
PROBE_TTL_SECONDS = 3600
# A probe record older than this was left by a doctor run that died; the next run removes it.
STALE_PROBE_SECONDS = 3600
# How far the expiry a store reports may stray from the one written (rounding to whole seconds, slow requests).
TTL_SLACK_SECONDS = 120

BlobStoreSource = Union[BlobStore, Callable[[], BlobStore]]


def probe(blobstore: BlobStoreSource, *, url: str, s3_endpoint: str | None = None,
          ttl_seconds: int = PROBE_TTL_SECONDS, timeout_s: float = 5.0) -> list[Check]:
    """The ``blob store`` check (see the module doc), as a one-item list.

    ``blobstore`` is the store, or a function that opens it (a store that cannot be opened is then a failed
    check); the caller closes it. ``url`` and ``s3_endpoint`` label the check; with an endpoint, a store
    that stops answering is told apart from one that cannot be reached by a TCP connection to it within
    ``timeout_s`` (at most 5 s). Raises UsageError only (from opening the store: a bad URL is not a
    finding); every other outcome is the check's. Leaves nothing behind but what the module doc says.
    """
    return [_check(blobstore, url, s3_endpoint, ttl_seconds, timeout_s)]


def _check(blobstore: BlobStoreSource, url: str, s3_endpoint: str | None, ttl: int, timeout_s: float) -> Check:
    parsed = urlparse(url)
    is_s3 = parsed.scheme == "s3"
    run = _Run(url + (f" at {s3_endpoint}" if is_s3 and s3_endpoint else ""), ttl)
    steps = [run.record_round_trip, *([run.create_only] if is_s3 else []), run.ttl_blob, run.delete_probes]
    discard = True
    try:
        run.open(blobstore)
        for step in steps:
            failed = step()
            if failed is not None:
                return failed
    except UsageError:
        raise
    except Exception as e:  # every other outcome is a finding, never a crash of the doctor
        if _transient(e):
            discard = False  # a store that does not answer would make each clean-up wait as long again
        return _failure(e, run.where, s3_endpoint, timeout_s, parsed.netloc if is_s3 else None, run.step,
                        run.answered)
    finally:
        if run.store is not None and discard:
            _discard(run.store, run.blob, run.record)
    detail = f"{run.where}: " + ("credentials accepted, " if is_s3 else "") + "writable, TTL works"
    if run.stale:
        detail += f" (removed {run.stale} stale probe{'s' if run.stale != 1 else ''} under {DOCTOR_PREFIX})"
    return Check(BLOB_STORE, OK, detail)


class _Run:
    """One probe of a store, step by step. Each step returns the failed check, or None to go on; ``step``
    says what it is doing (a failure's message names it), ``blob`` and ``record`` what it wrote and has
    not deleted yet, ``answered`` whether the store accepted a request (the credentials are good)."""

    def __init__(self, where: str, ttl: int):
        self.where = where
        self.ttl = ttl
        self.payload = json.dumps({"probe": "statectl doctor", "host": socket.gethostname(), "pid": os.getpid(),
                                   "created": int(time.time())}).encode()
        self.record = f"{DOCTOR_PREFIX}{uuid.uuid4().hex}"
        self.blob: str | None = None
        self.store: BlobStore | None = None
        self.answered = False
        self.step = "opening it"
        self.stale = 0

    def _fail(self, detail: str, hint: str | None = None) -> Check:
        return Check(BLOB_STORE, FAIL, f"{self.where}: {detail}", hint)

    def open(self, blobstore: BlobStoreSource) -> None:
        """Open the store, list the probes and remove those a dead doctor run left."""
        store = self.store = blobstore() if callable(blobstore) else blobstore
        self.step = f"listing {DOCTOR_PREFIX}"
        probes = list(store.list(DOCTOR_PREFIX))
        self.answered = True
        self.stale = _remove_stale_probes(store, probes)

    def record_round_trip(self) -> Check | None:
        assert self.store is not None
        self.step = f"writing the record {self.record}"
        self.store.put_at(self.record, self.payload)
        self.step = f"reading the record {self.record} back"
        data, _ = self.store.read_at(self.record)
        if data != self.payload:
            return self._fail(f"the record {self.record} read back differs from what was written "
                              f"({len(data)} bytes instead of {len(self.payload)})")
        return None

    def create_only(self) -> Check | None:
        """S3 only: file:// makes conditional writes atomic with a lock file of its own; S3-compatible stores
        may ignore the condition, and then two backups of one store could both take its lease."""
        assert self.store is not None
        self.step = "writing the record again, create-only"
        try:
            self.store.put_at(self.record, self.payload + b" ", if_none_match=True)
        except PreconditionFailedError:
            return None
        return self._fail("conditional writes are ignored: a create-only write replaced an existing object",
                          hint="backup's leases need conditional writes (S3 If-None-Match / If-Match); use a "
                               "store that supports them")

    def ttl_blob(self) -> Check | None:
        """Write a blob with a TTL as backup does, read it and its expiry back, and clear the TTL."""
        store, ttl = self.store, self.ttl
        assert store is not None
        self.step = "writing a blob with a TTL"
        before = time.time()
        blob = self.blob = store.put(io.BytesIO(self.payload), size=len(self.payload), ttl_seconds=ttl)
        after = time.time()
        self.step = f"reading the blob {blob} back"
        buf = io.BytesIO()
        store.get(blob, buf)
        if buf.getvalue() != self.payload:
            return self._fail(f"the blob {blob} read back differs from what was written "
                              f"({len(buf.getvalue())} bytes instead of {len(self.payload)})")
        self.step = f"reading the TTL of {blob}"
        info = store.stat(blob)
        if info.expires_at is None:
            return self._fail("TTL tagging does not work: a blob written with a TTL shows no expiry",
                              hint="the store must keep object tags set on upload (S3 x-amz-tagging); without "
                                   "them blobs of a backup that never commits are never reclaimed")
        if not before + ttl - TTL_SLACK_SECONDS <= info.expires_at <= after + ttl + TTL_SLACK_SECONDS:
            return self._fail(f"TTL tagging is off: a blob written with a {ttl}s TTL expires at "
                              f"{info.expires_at:.0f}, not about {before + ttl:.0f}")
        self.step = f"removing the TTL of {blob}"
        store.remove_ttl(blob)
        self.step = f"reading the TTL of {blob} after remove_ttl"
        if store.stat(blob).expires_at is not None:
            return self._fail(f"remove_ttl did not clear the TTL of {blob}",
                              hint="the credentials need permission to delete object tags (s3:DeleteObjectTagging)")
        return None

    def delete_probes(self) -> Check | None:
        """Delete the blob and the record, and see them gone."""
        store, blob, record = self.store, self.blob, self.record
        assert store is not None and blob is not None
        self.step = f"deleting the blob {blob}"
        store.delete([blob])
        self.step = f"checking that {blob} is gone"
        if _exists(lambda: store.stat(blob)):
            return self._fail(f"the blob {blob} is still there after delete")
        self.blob = None
        self.step = f"deleting the record {record}"
        store.delete([record])
        self.step = f"checking that {record} is gone"
        if _exists(lambda: store.read_at(record)):
            return self._fail(f"the record {record} is still there after delete")
        self.record = ""
        return None


def _remove_stale_probes(store: BlobStore, probes: list) -> int:
    horizon = time.time() - STALE_PROBE_SECONDS
    stale = [p.key for p in probes if p.modified_at < horizon]
    if stale:
        store.delete(stale)
    return len(stale)


def _exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except BlobNotFoundError:
        return False
    return True


def _discard(store: BlobStore, blob: str | None, record: str) -> None:
    """Best-effort removal of the probes after a failed check: the failure already says what is wrong."""
    try:
        store.delete([key for key in (blob, record) if key])
    except Exception:
        pass  # the blob has a TTL for gc; the record is removed by a later probe


def _failure(e: Exception, where: str, s3_endpoint: str | None, timeout_s: float, bucket: str | None, step: str,
             answered: bool) -> Check:
    hint = getattr(e, "hint", None)
    if isinstance(e, AuthError):
        if "no credentials" in str(e):
            return Check(BLOB_STORE, FAIL, f"{where}: no credentials found: {e}", hint)
        if not answered:
            return Check(BLOB_STORE, FAIL, f"{where}: credentials rejected: {e}",
                         hint or "check the access key and secret (profile, AWS_* env or ~/.aws)")
        return Check(BLOB_STORE, FAIL, f"{where}: access denied {step}: {e}",
                     "the credentials work but lack a permission statectl needs: s3:ListBucket, s3:GetObject, "
                     "s3:PutObject, s3:DeleteObject and the object tagging actions")
    if isinstance(e, NotFoundError) and not isinstance(e, BlobNotFoundError) and bucket:
        at = f" at {s3_endpoint}" if s3_endpoint else ""
        return Check(BLOB_STORE, FAIL, f"bucket {bucket} does not exist{at}",
                     hint="create it, or check --blobstore and --s3-endpoint")
    if isinstance(e, BlobNotFoundError):
        return Check(BLOB_STORE, FAIL, f"{where}: {step}: the object just written is not there ({e})", hint)
    if isinstance(e, DiskFullError):
        return Check(BLOB_STORE, FAIL, f"{where}: no space left {step}: {e}", hint)
    if _transient(e):
        if s3_endpoint:
            unreachable = _unreachable(s3_endpoint, min(timeout_s, 5.0))
            if unreachable:
                return Check(BLOB_STORE, FAIL, f"cannot reach endpoint {s3_endpoint}: {unreachable}",
                             hint="check --s3-endpoint (or s3_endpoint in the profile) and that the store is up")
        return Check(BLOB_STORE, FAIL, f"{where}: {step} failed: {e}",
                     hint or "the store answers but keeps failing; STATECTL_RETRIES sets how often statectl retries")
    if isinstance(e, StatectlError):
        what = "cannot be opened" if step == "opening it" else f"{step} failed"
        return Check(BLOB_STORE, FAIL, f"{where} {what}: {e}", hint)
    return Check(BLOB_STORE, FAIL, f"{where}: {step} failed: unexpected {type(e).__name__}: {e}", UNEXPECTED_HINT)


def _transient(e: Exception) -> bool:
    """A failure that retrying gave up on (the store down, unreachable or not answering)."""
    return isinstance(e, TransientBlobStoreError) or (isinstance(e, BlobStoreError)
                                                      and isinstance(e.__cause__, TransientBlobStoreError))


def _unreachable(endpoint: str, timeout_s: float) -> str | None:
    """Why a TCP connection to the endpoint's host and port fails, or None when it connects."""
    parsed = urlparse(endpoint)
    host = parsed.hostname
    if not host:
        return "it names no host"
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return "it has an invalid port"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except TimeoutError:  # socket.timeout
        return f"no answer from {host}:{port} within {timeout_s:g}s"
    except OSError as e:
        return f"{host}:{port}: {e.strerror or e}"
