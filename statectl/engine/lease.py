"""A lease per store, so that two backups of the same task/store never run at once.

The lease is a small object ``leases/<job>/<job-id>/<task>/<store>.json`` in the blob store, taken and
renewed with conditional writes (S3 If-None-Match / If-Match; a file lock on ``file://``), so exactly
one process holds it. A holder that crashed is recognised by its expiry, or at once when it ran on
this host and its pid is gone. The backup renews the lease in the background and once more right
before its commit: a backup that lost its lease (it stalled past the expiry and another took over)
fails before committing, so it can never commit over the other (fencing).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from urllib.parse import quote

from statectl.blobstore.base import BlobStore
from statectl.engine.layout import StoreRef
from statectl.errors import BlobNotFoundError, LockHeldError, PreconditionFailedError, StatectlError

LEASE_PREFIX = "leases/"
DEFAULT_LEASE_SECONDS = 300


def lease_key(ref: StoreRef) -> str:
    return LEASE_PREFIX + "/".join(quote(p, safe="") for p in (ref.job, ref.job_id, ref.task, ref.store)) + ".json"


class LeaseLostError(StatectlError):
    """Another process took over this store's lease; this operation must not commit."""


class Lease:
    """Hold with ``with Lease(...)``; ``check()`` renews and raises LeaseLostError if lost."""

    def __init__(self, blobstore: BlobStore, ref: StoreRef, *, operation: str = "backup",
                 seconds: int = DEFAULT_LEASE_SECONDS):
        self.blobstore = blobstore
        self.ref = ref
        self.key = lease_key(ref)
        self.operation = operation
        self.seconds = seconds
        self.owner = uuid.uuid4().hex
        self._etag: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost: Exception | None = None

    def _body(self, released: bool = False) -> bytes:
        now = time.time()
        return json.dumps({
            "owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(), "operation": self.operation,
            "store": str(self.ref), "acquired": now, "expires": now + self.seconds, "released": released,
        }).encode()

    def acquire(self) -> None:
        """Take the lease or raise LockHeldError (exit 11) naming the holder."""
        try:
            self._etag = self.blobstore.put_at(self.key, self._body(), if_none_match=True)
            return
        except PreconditionFailedError:
            pass
        try:
            data, etag = self.blobstore.read_at(self.key)
        except BlobNotFoundError:  # released and deleted between our two calls: try once more
            self._etag = self._take(None)
            return
        holder = _parse(data)
        if _live(holder):
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(holder.get("acquired", 0)))
            until = time.strftime("%H:%M:%SZ", time.gmtime(holder.get("expires", 0)))
            raise LockHeldError(
                f"another {holder.get('operation', 'backup')} of {self.ref} is running "
                f"(host {holder.get('host')}, pid {holder.get('pid')}, since {since})",
                hint=f"wait for it to finish; a lease left by a crash on another host expires at {until}")
        self._etag = self._take(etag)

    def _take(self, etag: str | None) -> str:
        try:
            if etag is None:
                return self.blobstore.put_at(self.key, self._body(), if_none_match=True)
            return self.blobstore.put_at(self.key, self._body(), if_match=etag)
        except PreconditionFailedError:
            raise LockHeldError(f"another backup of {self.ref} took the lease at the same moment",
                                hint="run again after it has finished") from None

    def renew(self) -> None:
        """Extend the lease; LeaseLostError if someone else holds it now."""
        with self._lock:
            if self._lost is not None:
                raise LeaseLostError(f"lost the lease on {self.ref}: {self._lost}")
            try:
                self._etag = self.blobstore.put_at(self.key, self._body(), if_match=self._etag)
            except PreconditionFailedError as e:
                self._lost = e
                raise LeaseLostError(f"lost the lease on {self.ref}: another process took it over",
                                     hint="this backup stalled past its lease; nothing was committed") from None

    check = renew

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                self.renew()
            except LeaseLostError:
                return
            except StatectlError:
                continue  # a passing blob store failure: the next round or the commit check retries

    def release(self) -> None:
        """Give the lease up (idempotent). Best effort: an expired lease frees itself anyway."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._etag is None or self._lost is not None:
                return
            try:
                self.blobstore.put_at(self.key, self._body(released=True), if_match=self._etag)
            except (PreconditionFailedError, StatectlError):
                pass
            self._etag = None

    def __enter__(self) -> "Lease":
        self.acquire()
        self._thread = threading.Thread(target=self._renew_loop, name="statectl-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _parse(data: bytes) -> dict:
    try:
        obj = json.loads(data)
        return obj if isinstance(obj, dict) else {}
    except ValueError:
        return {}


def _live(holder: dict) -> bool:
    """Whether a lease record still binds: not released, not expired, and not left by a dead
    process on this host."""
    if not holder or holder.get("released"):
        return False
    if float(holder.get("expires", 0)) < time.time():
        return False
    if holder.get("host") == socket.gethostname():
        pid = holder.get("pid")
        if isinstance(pid, int) and pid > 0:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
    return True
