"""A lease per store, so that two backups of the same task/store never run at once.

The lease is a small object ``leases/<job>/<job-id>/<task>/<store>.json`` in the blob store, taken and
renewed with conditional writes (S3 If-None-Match / If-Match; a file lock on ``file://``), so exactly
one process holds it. A holder that crashed is recognised by its expiry, or at once when it ran on
this host and its pid is gone. The backup renews the lease in the background and once more right
before its commit: a backup that lost its lease (another took over, or it stalled past its own expiry,
after which gc no longer protects its uploads) fails before committing, so it can never commit over
the other, nor commit blobs gc may have swept (fencing).

The body records ``started`` (when the holder took the lease; never changed by renewals): gc keeps
every blob modified after the start of a live backup's lease, since that backup may still commit it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from urllib.parse import quote

from statectl.blobstore.base import BlobStore
from statectl.engine.layout import StoreRef
from statectl.errors import BlobNotFoundError, LockHeldError, NotFoundError, PreconditionFailedError, StatectlError

LEASE_PREFIX = "leases/"
DEFAULT_LEASE_SECONDS = 300
# Hosts' clocks differ: gc treats a lease as live this much past its expiry, and a blob as possibly a
# live backup's this much before the lease started (S3 stamps objects with the server's clock).
CLOCK_SLACK_SECONDS = 300


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
        self.started = time.time()
        self._expires = 0.0

    def _body(self, now: float, released: bool = False) -> bytes:
        return json.dumps({
            "owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(), "operation": self.operation,
            "store": str(self.ref), "started": self.started, "acquired": now, "expires": now + self.seconds,
            "released": released,
        }).encode()

    def _write(self, *, if_match: str | None = None, released: bool = False) -> str:
        """Write the lease body conditionally; on success the lease runs until ``seconds`` from now."""
        now = time.time()
        etag = self.blobstore.put_at(self.key, self._body(now, released), if_match=if_match,
                                     if_none_match=if_match is None)
        self._expires = now + self.seconds
        return etag

    def acquire(self) -> None:
        """Take the lease or raise LockHeldError (exit 11) naming the holder."""
        self.started = time.time()
        try:
            self._etag = self._write()
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
            raise LockHeldError(
                f"another {holder.get('operation', 'backup')} of {self.ref} is running "
                f"(host {holder.get('host')}, pid {holder.get('pid')}, "
                f"since {_iso(_number(holder.get('started', holder.get('acquired'))))})",
                hint=f"wait for it to finish; a lease left by a crash on another host expires at "
                     f"{_iso(_number(holder.get('expires')))}, or break it with 'statectl lease break'")
        self._etag = self._take(etag)

    def _take(self, etag: str | None) -> str:
        try:
            return self._write(if_match=etag)
        except PreconditionFailedError:
            raise LockHeldError(f"another backup of {self.ref} took the lease at the same moment",
                                hint="run again after it has finished") from None

    def renew(self) -> None:
        """Extend the lease; LeaseLostError if someone else holds it now."""
        with self._lock:
            if self._lost is None and self._etag is not None and time.time() > self._expires:
                # Nobody may have taken it over, but gc stopped protecting our uploads at the expiry.
                self._lost = LeaseLostError("it expired before it could be renewed")
            if self._lost is not None:
                raise LeaseLostError(f"lost the lease on {self.ref}: {self._lost}",
                                     hint="this backup stalled past its lease; nothing was committed")
            try:
                self._etag = self._write(if_match=self._etag)
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
                self._write(if_match=self._etag, released=True)
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


@dataclass(frozen=True)
class LeaseInfo:
    """What a lease object says of its holder. ``live``: it still binds (not released, not expired, not
    left by a dead process on this host); ``local_alive``: its holder is a running process on this host."""

    key: str
    store: str
    operation: str
    host: str
    pid: int | None
    started: str
    expires: str
    released: bool
    live: bool
    local_alive: bool
    started_s: float
    etag: str


def _info(key: str, data: bytes, etag: str, slack: float = 0.0) -> LeaseInfo:
    holder = _parse(data)
    pid = holder.get("pid")
    pid = pid if isinstance(pid, int) else None
    here = holder.get("host") == socket.gethostname()
    started = _started(holder)
    return LeaseInfo(key=key, store=str(holder.get("store", "")), operation=str(holder.get("operation", "backup")),
                     host=str(holder.get("host", "")), pid=pid,
                     started=_iso(_number(holder.get("started", holder.get("acquired")))),
                     expires=_iso(_number(holder.get("expires"))), released=bool(holder.get("released")),
                     live=_live(holder, slack), local_alive=here and not _dead_here(holder) and pid is not None,
                     started_s=started, etag=etag)


def read_lease(blobstore: BlobStore, ref: StoreRef) -> LeaseInfo | None:
    """The lease object of ``ref``, or None when the store never had one. Read-only."""
    key = lease_key(ref)
    try:
        data, etag = blobstore.read_at(key)
    except BlobNotFoundError:
        return None
    return _info(key, data, etag)


def live_leases(blobstore: BlobStore, *, slack: float = CLOCK_SLACK_SECONDS) -> list[LeaseInfo]:
    """Every lease in the blob store that may still bind, counting one as live until ``slack`` seconds
    past its expiry (its holder's clock may be behind ours). Read-only. An object that is not a lease
    body binds nobody, as for ``Lease.acquire``, which takes it over."""
    out = []
    for item in blobstore.list(LEASE_PREFIX):
        if not item.key.endswith(".json"):
            continue
        try:
            data, etag = blobstore.read_at(item.key)
        except BlobNotFoundError:
            continue  # deleted since the listing: no longer held
        info = _info(item.key, data, etag, slack)
        if info.live:
            out.append(info)
    return out


def break_lease(blobstore: BlobStore, ref: StoreRef, *, expected: LeaseInfo, force: bool = False) -> LeaseInfo:
    """Mark the store's lease released, provided it is still the one ``expected`` describes (the holder
    that was shown to the operator). Its holder, if it still runs, then fails before committing
    (fencing); nothing in the blob store but the lease object changes.

    Raises LockHeldError (exit 11) when the holder is a running process on this host and ``force`` is
    not set, or when the lease changed since ``expected`` was read; NotFoundError (exit 10) when the
    store has no lease. Idempotent for a lease that is already released.
    """
    key = lease_key(ref)
    try:
        data, etag = blobstore.read_at(key)
    except BlobNotFoundError:
        raise NotFoundError(f"no lease of {ref} in {blobstore.url}") from None
    current = _info(key, data, etag)
    if current.etag != expected.etag:
        raise LockHeldError(f"the lease of {ref} changed since it was read (a new holder took it)",
                            hint="run 'statectl lease break' again to see the new holder")
    if current.released:
        return current
    if current.local_alive and not force:
        raise LockHeldError(f"the lease of {ref} is held by a running process on this host "
                            f"(pid {current.pid}, {current.operation})",
                            hint="let it finish or stop it; --force breaks the lease anyway (that "
                                 f"{current.operation} then fails before it commits)")
    body = json.dumps(dict(_parse(data), released=True, broken_by=f"{socket.gethostname()}:{os.getpid()}",
                           broken_at=time.time())).encode()
    try:
        etag = blobstore.put_at(key, body, if_match=current.etag)
    except PreconditionFailedError:
        raise LockHeldError(f"the lease of {ref} changed while it was being broken (a new holder took it)",
                            hint="run 'statectl lease break' again to see the new holder") from None
    return _info(key, body, etag)


def _parse(data: bytes) -> dict:
    try:
        obj = json.loads(data)
        return obj if isinstance(obj, dict) else {}
    except ValueError:
        return {}


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _started(holder: dict) -> float:
    """When the holder took the lease. Bodies written before ``started`` existed only have ``acquired``,
    which every renewal moves forward: for them the start is unknown, and 0 (the epoch) is the safe answer."""
    return _number(holder.get("started", 0))


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _live(holder: dict, slack: float = 0.0) -> bool:
    """Whether a lease record still binds: not released, not expired (``slack`` seconds ago), and not
    left by a dead process on this host."""
    if not holder or holder.get("released"):
        return False
    if _number(holder.get("expires", 0)) + slack < time.time():
        return False
    if _dead_here(holder):
        return False
    return True


def _dead_here(holder: dict) -> bool:
    """True when the holder ran on this host and its process is gone."""
    if holder.get("host") == socket.gethostname():
        pid = holder.get("pid")
        if isinstance(pid, int) and pid > 0:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
    return False
