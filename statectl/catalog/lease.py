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

gc holds a store's lease only for the short moment it settles that store, so a backup that finds it
held by a gc waits for it (polling with backoff, up to GC_WAIT_SECONDS) before it gives up with
LockHeldError (exit 11); a lease held by another backup fails it at once.

A malformed lease record (not a JSON object; ``expires``, ``started`` or ``acquired`` not a number of
seconds since the epoch in years 1970-9999, NaN or infinite; ``expires`` more than
MAX_LEASE_AHEAD_SECONDS ahead, which no statectl writes; ``pid`` not a process id; ``released`` not a
boolean; ``host``, ``operation``, ``store`` or ``owner`` not a string) binds nobody, like an expired
one: ``lease show`` reports it as malformed and why (in JSON: ``live`` false, and ``started`` /
``expires`` empty when they cannot be read), a backup or gc takes it over with a conditional write
(and the backup says so in a note), and ``lease break`` replaces it with a well-formed released record.
Taking it over is safe: whoever wrote it and still thinks it holds it fails its next renewal (fencing).
Nothing that reads a lease record raises on its contents.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import iso_utc
from statectl.catalog.refs import StoreRef
from statectl.errors import (
    AuthError,
    BlobNotFoundError,
    LeaseLostError,
    LockHeldError,
    NotFoundError,
    PreconditionFailedError,
    StatectlError,
    command,
)

LEASE_PREFIX = "leases/"

DEFAULT_LEASE_SECONDS = 300

# Hosts' clocks differ: gc treats a lease as live this much past its expiry, and a blob as possibly a
# live backup's this much before the lease started (S3 stamps objects with the server's clock).
CLOCK_SLACK_SECONDS = 300

# How long a backup waits for a gc that holds the store's lease (gc holds it only while it settles the store).
GC_WAIT_SECONDS = 30.0

_WAIT_FIRST_S, _WAIT_MAX_S = 0.1, 2.0  # backoff between polls of a gc-held lease

# No statectl writes an expiry further ahead than its lease period (minutes); a record that claims more is
# malformed, whatever wrote it, rather than a lease nobody could take for years.
MAX_LEASE_AHEAD_SECONDS = 86400

_MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z, the last second time.gmtime() formats everywhere

_MAX_PID = 2 ** 31 - 1

def lease_key(ref: StoreRef) -> str:
    return LEASE_PREFIX + "/".join(quote(p, safe="") for p in (ref.job, ref.job_id, ref.task, ref.store)) + ".json"

class Lease:
    """Hold with ``with Lease(...)``; ``check()`` renews and raises LeaseLostError if lost."""

    def __init__(self, blobstore: BlobStore, ref: StoreRef, *, operation: str = "backup",
                 seconds: int = DEFAULT_LEASE_SECONDS, wait_for_gc: float = 0.0):
        """``wait_for_gc``: seconds ``acquire`` keeps polling while a gc holds the lease (0: fail at once)."""
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
        self.wait_for_gc = wait_for_gc
        # What the operator should hear about how the lease was taken (waited for a gc, replaced a
        # malformed record); None when it was simply free.
        self.notice: str | None = None

    def _body(self, now: float, released: bool = False) -> bytes:
        return json.dumps({
            "owner": self.owner, "host": this_host(), "pid": os.getpid(), "operation": self.operation,
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
        """Take the lease, taking over one that is released, expired, left by a dead process on this host
        or malformed (conditionally: of two processes that try at once, one wins).

        While a gc holds it, poll with backoff for up to ``wait_for_gc`` seconds. Raises LockHeldError
        (exit 11) naming the holder when another backup holds it, or a gc still does after the wait."""
        deadline = time.monotonic() + self.wait_for_gc
        delay = _WAIT_FIRST_S
        waited = 0.0
        while True:
            try:
                outcome = self._attempt()
            except AuthError as e:
                raise self._read_only(e) from e
            if outcome is None:
                if waited:
                    self.notice = f"waited {waited:.1f}s for a gc of {self.ref} to release the store's lease"
                return
            now = time.monotonic()
            if isinstance(outcome, LockHeldError):  # lost a race to take it: see who has it now
                if now >= deadline:
                    raise outcome
                continue
            if outcome.get("operation") != "gc" or now >= deadline:
                raise self._held_error(outcome, waited)
            import random

            pause = min(delay * random.uniform(0.5, 1.0), deadline - now)
            time.sleep(pause)
            waited += pause
            delay = min(delay * 2, _WAIT_MAX_S)

    def _attempt(self) -> dict | LockHeldError | None:
        """One try: None when the lease is ours now; the record of its live holder; or LockHeldError when
        another process took it between our read and our conditional write."""
        self.started = time.time()
        try:
            self._etag = self._write()
            return None
        except PreconditionFailedError:
            pass
        try:
            data, etag = self.blobstore.read_at(self.key)
        except BlobNotFoundError:  # released and deleted between our two calls: try once more
            etag, rec = None, _Record({}, "")
        else:
            rec = _record(data)
            if _live(rec):
                return rec.fields
        try:
            self._etag = self._write(if_match=etag)
        except PreconditionFailedError:
            return LockHeldError(f"another backup of {self.ref} took the lease at the same moment",
                                 hint="run again after it has finished")
        if rec.problem:
            self.notice = f"took over the malformed lease record of {self.ref} ({rec.problem})"
        return None

    def _read_only(self, e: AuthError) -> AuthError:
        """``e`` said plainly when the credentials can read but not write (a read-only identity), else ``e``."""
        return _read_only(self.blobstore, self.key, self.operation, f"taking the lease of {self.ref}", e)

    def preflight(self) -> str | None:
        """What ``acquire`` would refuse, found with nothing written (a dry run's check): AuthError when the
        credentials cannot write the lease (BlobStore.check_writable), LockHeldError naming the holder when
        another live process that is not a gc holds it. Returns a note when a gc holds it (``acquire``
        would wait up to ``wait_for_gc`` for it), else None."""
        check_can_write(self.blobstore, self.key, self.operation, f"taking the lease of {self.ref}")
        try:
            data, _ = self.blobstore.read_at(self.key)
        except BlobNotFoundError:
            return None
        rec = _record(data)
        if not _live(rec):
            return None
        if rec.fields.get("operation") != "gc" or not self.wait_for_gc:
            raise self._held_error(rec.fields, 0.0)
        return (f"a gc of {self.ref} holds its lease now (pid {rec.fields.get('pid')} on {rec.fields.get('host')}): "
                f"the {self.operation} would wait up to {self.wait_for_gc:.0f}s for it")

    def _held_error(self, holder: dict, waited: float) -> LockHeldError:
        after = f"; waited {waited:.0f}s for it" if waited else ""
        return LockHeldError(
            f"another {holder.get('operation', 'backup')} of {self.ref} is running "
            f"(host {holder.get('host')}, pid {holder.get('pid')}, "
            f"since {_iso(holder.get('started', holder.get('acquired'))) or '?'}){after}",
            hint=(f"wait for it to finish; a lease left by a crash on another host expires at "
                  f"{_iso(holder.get('expires'))}, or break it with ", self.ref.command("lease break")))

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
    left by a dead process on this host); ``local_alive``: its holder is a running process on this host.
    A released lease has no ``expires`` (''): it binds nobody; ``released_at`` says when it was released
    (by its holder, or broken: ``broken_by`` names the host:pid that broke it)."""

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
    released_at: str = ""
    broken_by: str = ""

def _inspect(key: str, data: bytes, etag: str, slack: float = 0.0) -> tuple[LeaseInfo, str]:
    """What a lease body says, and why it is malformed ('' when it is not). Never raises on its contents."""
    rec = _record(data)
    holder = rec.fields
    pid = holder.get("pid")
    here = holder.get("host") == this_host()
    released = bool(holder.get("released"))
    # A holder's release rewrites the record (``acquired`` is then when); a break adds ``broken_at``.
    released_at = _iso(holder.get("broken_at", holder.get("acquired"))) if released else ""
    info = LeaseInfo(key=key, store=holder.get("store", ""), operation=holder.get("operation", "backup"),
                     host=holder.get("host", ""), pid=pid, started=_iso(holder.get("started", holder.get("acquired"))),
                     expires="" if released else _iso(holder.get("expires")), released=released,
                     live=_live(rec, slack),
                     local_alive=not rec.problem and here and pid is not None and not _dead_here(holder),
                     started_s=_started(holder), etag=etag, released_at=released_at,
                     broken_by=holder.get("broken_by", "") if released else "")
    return info, rec.problem

def check_can_write(blobstore: BlobStore, key: str, operation: str, doing: str) -> None:
    """Raise the AuthError ``operation`` would meet writing ``key`` (said plainly for credentials that can
    read but not write), or what else BlobStore.check_writable raises; write nothing. ``doing``: what that
    write is, for the message."""
    try:
        blobstore.check_writable(key)
    except AuthError as e:
        raise _read_only(blobstore, key, operation, doing, e) from e


def _read_only(blobstore: BlobStore, key: str, operation: str, doing: str, e: AuthError) -> AuthError:
    try:
        blobstore.read_at(key)
    except BlobNotFoundError:
        pass
    except StatectlError:
        return e  # they cannot read either: wrong or missing credentials, which ``e`` says
    return AuthError(f"the credentials can read {blobstore.url} but not write to it: a {operation} needs write "
                     f"access ({doing}: {e})",
                     hint="restore, diff and snapshots work with read-only credentials; "
                          f"run the {operation} with credentials that can write")


def _info(key: str, data: bytes, etag: str, slack: float = 0.0) -> LeaseInfo:
    return _inspect(key, data, etag, slack)[0]

def inspect_lease(blobstore: BlobStore, ref: StoreRef) -> tuple[LeaseInfo, str] | None:
    """The lease object of ``ref`` and why its record is malformed ('' when it is well-formed), or None
    when the store never had one. Read-only."""
    key = lease_key(ref)
    try:
        data, etag = blobstore.read_at(key)
    except BlobNotFoundError:
        return None
    return _inspect(key, data, etag)

def read_lease(blobstore: BlobStore, ref: StoreRef) -> LeaseInfo | None:
    """The lease object of ``ref``, or None when the store never had one. Read-only."""
    found = inspect_lease(blobstore, ref)
    return None if found is None else found[0]

def live_leases(blobstore: BlobStore, *, slack: float = CLOCK_SLACK_SECONDS) -> list[LeaseInfo]:
    """Every lease in the blob store that may still bind, counting one as live until ``slack`` seconds
    past its expiry (its holder's clock may be behind ours). Read-only. An object that is not a lease
    body, or a malformed one, binds nobody, as for ``Lease.acquire``, which takes it over."""
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
    store has no lease. Idempotent for a lease that is already released. A malformed record (see the
    module docstring) is replaced by a well-formed released one that keeps its readable fields; its
    writer's pid is not trusted, so ``force`` is never needed for it.
    """
    key = lease_key(ref)
    try:
        data, etag = blobstore.read_at(key)
    except BlobNotFoundError:
        raise NotFoundError(f"no lease of {ref} in {blobstore.url}") from None
    current, problem = _inspect(key, data, etag)
    if current.etag != expected.etag:
        raise LockHeldError(f"the lease of {ref} changed since it was read (a new holder took it)",
                            hint=("run ", ref.command("lease break"), " again to see the new holder"))
    if current.released and not problem:
        return current
    if current.local_alive and not force:
        raise LockHeldError(f"the lease of {ref} is held by a running process on this host "
                            f"(pid {current.pid}, {current.operation})",
                            hint="let it finish or stop it; --force breaks the lease anyway (that "
                                 f"{current.operation} then fails before it commits)")
    now = time.time()
    fields = _record(data).fields
    if problem:
        # Only what was readable survives, and an expiry that can be read: the result is a proper record.
        fields = dict(fields, expires=min(fields.get("expires", now), now), malformed=problem)
    body = json.dumps(dict(fields, released=True, broken_by=f"{this_host()}:{os.getpid()}",
                           broken_at=now)).encode()
    try:
        etag = blobstore.put_at(key, body, if_match=current.etag)
    except PreconditionFailedError:
        raise LockHeldError(f"the lease of {ref} changed while it was being broken (a new holder took it)",
                            hint=("run ", ref.command("lease break"), " again to see the new holder")) from None
    return _info(key, body, etag)

def _is_time(v: object) -> bool:
    # bool is an int; NaN compares false; an int too big for a float compares fine.
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= _MAX_EPOCH

def _is_pid(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= _MAX_PID

_FIELDS = {"expires": ("a time", _is_time), "started": ("a time", _is_time), "acquired": ("a time", _is_time),
           "pid": ("a process id", _is_pid), "released": ("true or false", lambda v: isinstance(v, bool)),
           "host": ("a string", lambda v: isinstance(v, str)), "operation": ("a string", lambda v: isinstance(v, str)),
           "store": ("a string", lambda v: isinstance(v, str)), "owner": ("a string", lambda v: isinstance(v, str)),
           "broken_at": ("a time", _is_time), "broken_by": ("a string", lambda v: isinstance(v, str))}

@dataclass(frozen=True)
class _Record:
    """A lease body: its fields that hold what they should (unknown fields as they are), and why it is
    malformed ('' when it is not)."""

    fields: dict = field(default_factory=dict)
    problem: str = ""

def _record(data: bytes) -> _Record:
    """Parse a lease body defensively: never raises, whatever the bytes."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return _Record({}, "not JSON")
    if not isinstance(obj, dict):
        return _Record({}, "not a JSON object")
    fields: dict = {}
    problems: list[str] = []
    for name, value in obj.items():
        kind, ok = _FIELDS.get(name, ("", None))
        if ok is None or ok(value):
            fields[name] = value
        else:
            problems.append(f"{name} is not {kind}: {_shown(value)}")
    expires = fields.get("expires")
    if expires is not None and expires > time.time() + MAX_LEASE_AHEAD_SECONDS:
        del fields["expires"]
        problems.append(f"expires is more than {MAX_LEASE_AHEAD_SECONDS // 3600}h ahead: {_iso(expires)}")
    elif "expires" not in obj and not fields.get("released"):
        problems.append("it has no expires")
    return _Record(fields, "; ".join(problems))

def _shown(value: object, limit: int = 40) -> str:
    """A short printable form of a value read from a lease body."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."

def _started(holder: dict) -> float:
    """When the holder took the lease. Bodies written before ``started`` existed only have ``acquired``,
    which every renewal moves forward: for them the start is unknown, and 0 (the epoch) is the safe answer."""
    return float(holder.get("started", 0))

def _iso(epoch: object) -> str:
    """``epoch`` as UTC ISO 8601, or '' when it is not a time (a field missing from a malformed record)."""
    if not _is_time(epoch):
        return ""
    return iso_utc(epoch)  # type: ignore[arg-type]

def _live(rec: _Record, slack: float = 0.0) -> bool:
    """Whether a lease record still binds: well-formed, not released, not expired (``slack`` seconds
    ago), and not left by a dead process on this host."""
    holder = rec.fields
    if rec.problem or holder.get("released"):
        return False
    if holder.get("expires", 0) + slack < time.time():
        return False
    if _dead_here(holder):
        return False
    return True

def _dead_here(holder: dict) -> bool:
    """True when the holder ran on this host and its process is gone (``holder`` holds checked fields)."""
    return process_gone(holder.get("host"), holder.get("pid"))


def this_host() -> str:
    """This host's name as socket.gethostname() gives it (the uname node name it reads), without loading
    the socket module on the start of every command that writes a lease or a pin."""
    return os.uname().nodename


def process_gone(host: object, pid: object) -> bool:
    """True when ``host`` is this host and no process ``pid`` runs here: whatever that process held
    (a lease, a reader pin) binds nobody any more. False when it may still run, or cannot be told."""
    if host == this_host() and _is_pid(pid):
        try:
            os.kill(pid, 0)  # type: ignore[arg-type]
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False
