"""Reader pins: a restore (or ``snapshots verify --download``) tells retention and gc which snapshot it
is reading, so that they do not delete its blobs under it.

Retention deletes what it no longer keeps: the blobs of the files a new snapshot removed and every
blob of the snapshots it expires (``keep_last``), once the grace period the snapshot was marked with is
over (catalog.retention). A reader of such a snapshot, slower than that, would see its blobs vanish
half way. A reader that can write therefore leaves a small pin record
``pins/<job>/<job-id>/<task>/<store>/<uuid>.json`` (components URL-quoted; the store is the one the
snapshot was taken of)::

    {"index_blob_id": ..., "checkpoint_id": ..., "store": ..., "operation": "restore",
     "host": ..., "pid": ..., "started": <epoch s>, "expires_at": <epoch s>}

The protocol, for a snapshot S:

1. Reader: resolve S (read the catalog and S's index blob).
2. Reader: write its pin naming S's index blob.
3. Reader: check that S is still retained: its catalog record is still ``committed``, or S is still
   the store's latest checkpoint. If it is not, retention may have decided on S before seeing the
   pin: the reader drops S and resolves again (the latest), or fails with SnapshotNotFoundError
   (exit 10) for a snapshot named by id. Only then does it read S's data blobs (``resolve``), or, with
   ``read`` (a restore), it reads them while 2 and 3 run and makes nothing of them lasting until 3 kept
   S: a blob gone by then fails the read, which is then S dropped, never a store built from part of it.
4. Reader: renew the pin in the background (every third of its period, after checking that its record
   is still the one it wrote, so a pin gc removed is never silently re-created) while it reads; delete
   it at the end.

Retention (catalog.retention.execute, run by a backup or gc holding the store's lease) first marks the
snapshots it drops ``expired`` in the catalog, *then* lists the live pins of the store, and deletes no
blob a pinned snapshot references; a pinned snapshot's record stays (``expired``) until a later
retention, with no live pin left, finishes it. gc reads the pins after the catalog and keeps every
blob a live pin's snapshot references. Both sides write first and read second, so one of them sees
the other: if the reader's check (3) saw S retained, the marking came after it, hence after the pin
was written, and the listing that follows the marking finds the pin (and nothing of S was deleted
before: retention marks before it deletes); if the marking came first, the check sees it and the reader
lets S go. A commit that makes S no longer the latest is likewise
followed by its cleanup's marking and listing.

A pin binds until ``expires_at`` plus CLOCK_SLACK_SECONDS (the writer's clock may be behind), and not
at all once its process is gone on this host. gc deletes pins that no longer bind (and malformed ones
older than its grace period). A reader that stalls past its own expiry loses the pin; it goes on, and
its downloads' size and CRC checks still catch a blob that vanished.

A pin record is written without an fsync (``put_at(durable=False)``): it binds only while its reader
runs, and the crash that could lose it (its host's) ends the reader with it.

A reader that cannot write (read-only credentials, a read-only mount) goes on without a pin and says so
in a note: its snapshot is then protected by the grace period (the ``grace`` setting, 6h by default):
a backup that expires it meanwhile keeps its blobs that long. A read slower than that fails, and a
restore leaves its target as it was. A snapshot no catalog record names (a full index blob id of a forgotten snapshot) cannot be
checked in step 3: its pin protects it from the retention and gc runs that list pins after it was
written.

``diff``, ``snapshots list`` and ``show`` take no pin: they read index blobs only, each in one request
at resolve time; nothing they use can vanish half way.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, TypeVar
from urllib.parse import quote, unquote

from statectl.blobstore.base import BlobStore
from statectl.catalog import lease
from statectl.catalog.records import COMMITTED, EXPIRED, PENDING, BlobCheckpointStore, iso_utc
from statectl.catalog.refs import StoreRef
from statectl.catalog.resolve import ResolvedSnapshot, expired_error, resolve_snapshot
from statectl.errors import (
    AuthError,
    BlobNotFoundError,
    PreconditionFailedError,
    SnapshotNotFoundError,
    StatectlError,
)
from statectl.progress import NullProgress, ProgressReporter

PIN_PREFIX = "pins/"

DEFAULT_PIN_SECONDS = 300

# No statectl writes an expiry further ahead than its pin period; a record claiming more is malformed.
MAX_PIN_AHEAD_SECONDS = 86400

# How often a reader resolves the latest snapshot again when each one it pinned was expired at once.
RESOLVE_ATTEMPTS = 5

T = TypeVar("T")


def pins_prefix(ref: StoreRef) -> str:
    """The prefix of the pins of ``ref``'s snapshots (with a trailing slash)."""
    return PIN_PREFIX + "/".join(quote(p, safe="") for p in (ref.job, ref.job_id, ref.task, ref.store)) + "/"


@dataclass(frozen=True)
class PinInfo:
    """One pin record as read back. ``live``: it binds (well-formed, not expired past the clock slack,
    its process not gone on this host); ``problem``: why it is malformed ('' when it is not)."""

    key: str
    store: str
    index_blob_id: str
    checkpoint_id: str
    operation: str
    host: str
    pid: int | None
    expires_at: float
    modified_at: float
    live: bool
    problem: str = ""

    def describe(self) -> str:
        return (f"a {self.operation or 'reader'} on host {self.host or '?'} (pid {self.pid}, pin until "
                f"{_iso(self.expires_at)})")


def read_pins(blobstore: BlobStore, ref: StoreRef | None = None, *, slack: float | None = None) -> list[PinInfo]:
    """Every pin record of ``ref``'s snapshots (of every store when None), live or not. Read-only; never
    raises on a record's contents. ``slack``: seconds past its expiry a pin still binds (default
    CLOCK_SLACK_SECONDS)."""
    slack = lease.CLOCK_SLACK_SECONDS if slack is None else slack
    prefix = PIN_PREFIX if ref is None else pins_prefix(ref)
    out = []
    for item in blobstore.list(prefix):
        if not item.key.endswith(".json"):
            continue
        try:
            data, _ = blobstore.read_at(item.key)
        except BlobNotFoundError:
            continue  # released since the listing
        out.append(_parse(item.key, data, item.modified_at, slack))
    return out


def live_pins(blobstore: BlobStore, ref: StoreRef | None = None, *, slack: float | None = None) -> list[PinInfo]:
    """The pins that bind now (see read_pins). Read-only."""
    return [p for p in read_pins(blobstore, ref, slack=slack) if p.live]


def pinned_index_ids(pins: list[PinInfo]) -> set[str]:
    """The index blob ids the live ones of ``pins`` name."""
    return {p.index_blob_id for p in pins if p.live and p.index_blob_id}


def stale_pins(pins: list[PinInfo], *, older_than: float) -> list[PinInfo]:
    """The pins gc may delete: well-formed ones that no longer bind, and malformed ones whose object was
    last written before the epoch second ``older_than`` (a writer may be half way through a new one)."""
    return [p for p in pins if not p.live and (not p.problem or p.modified_at < older_than)]


def _parse(key: str, data: bytes, modified_at: float, slack: float) -> PinInfo:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        return PinInfo(key, "", "", "", "", "", None, 0.0, modified_at, False, "not a JSON object")
    problems = []

    def text(name: str) -> str:
        v = obj.get(name, "")
        if not isinstance(v, str):
            problems.append(f"{name} is not a string")
            return ""
        return v

    index_blob_id, store, checkpoint_id = text("index_blob_id"), text("store"), text("checkpoint_id")
    operation, host = text("operation"), text("host")
    pid = obj.get("pid")
    if pid is not None and not lease._is_pid(pid):
        problems.append("pid is not a process id")
        pid = None
    expires = obj.get("expires_at")
    if not lease._is_time(expires):
        problems.append("expires_at is not a time")
        expires = 0.0
    elif expires > time.time() + MAX_PIN_AHEAD_SECONDS:
        problems.append(f"expires_at is more than {MAX_PIN_AHEAD_SECONDS // 3600}h ahead")
    if not index_blob_id:
        problems.append("it names no index blob")
    problem = "; ".join(problems)
    live = not problem and expires + slack >= time.time() and not lease.process_gone(host, pid)
    return PinInfo(key, store, index_blob_id, checkpoint_id, operation, host, pid, float(expires), modified_at,
                   live, problem)


def _iso(epoch: float) -> str:
    return iso_utc(epoch) if lease._is_time(epoch) else "?"


class ReaderPin:
    """A reader's pin (see the module doc). ``resolve`` finds the snapshot and pins it; use as a context
    manager so that the pin is deleted (and its renewal stopped) whatever happens::

        with ReaderPin(blobstore, catalog, ref, operation="restore", progress=progress) as pin:
            snap = pin.resolve(snapshot)
            ...  # read snap's blobs

    Nothing is written before ``resolve``. ``held``: a pin record is in the blob store now. A pin that
    could not be written (``AuthError``, a read-only file system, any blob store failure) leaves the
    reader unpinned, with a note through ``progress``; it never fails the reader.
    """

    def __init__(self, blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef, *,
                 operation: str = "restore", seconds: int = DEFAULT_PIN_SECONDS,
                 progress: ProgressReporter | None = None):
        self.blobstore = blobstore
        self.checkpoints = checkpoints
        self.ref = ref
        self.operation = operation
        self.seconds = seconds
        self.progress = progress or NullProgress()
        self.pin_id = uuid.uuid4().hex
        self.key: str | None = None
        self.started = time.time()
        self.unpinned_reason: str | None = None  # why no pin could be written, when it could not
        self.lost: str | None = None  # why the pin stopped binding before the reader was done
        self._etag: str | None = None
        self._expires = 0.0
        self._body_fields: dict = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._releasing: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self._etag is not None and self.lost is None

    # -- resolving ---------------------------------------------------------------------------------

    def resolve(self, snapshot: str | None, *, allow_other_store: bool = False) -> ResolvedSnapshot:
        """resolve_snapshot, then pin the snapshot and check that it is still retained (module doc).

        Raises what resolve_snapshot raises; SnapshotNotFoundError (exit 10) when the snapshot named
        by ``snapshot`` was expired by retention just as it was pinned; StatectlError (exit 1) when the
        latest snapshot changed under every one of RESOLVE_ATTEMPTS tries."""
        for _ in range(RESOLVE_ATTEMPTS):
            snap = resolve_snapshot(self.blobstore, self.checkpoints, self.ref, snapshot,
                                    allow_other_store=allow_other_store)
            if self._pinned(snap, snapshot):
                return snap
        raise self._replaced()

    def read(self, snapshot: str | None, use: Callable[[ResolvedSnapshot, Callable[[], None]], T], *,
             allow_other_store: bool = False) -> T:
        """``use(snap, confirm)`` on the snapshot ``resolve`` finds, begun while the pin is written and checked
        on a thread: the reads overlap those requests. ``use`` calls ``confirm()`` before it makes anything
        of what it read lasting (a restore: before its swap); it raises when the check did not keep the
        snapshot, and ``use`` must then leave nothing behind. What was read before the check is good once it
        confirms: retention deletes no blob of a snapshot it still keeps, and it sees the pin from then on.
        A read that failed (a blob gone) while the check did not keep the snapshot is that, not damage: a
        named snapshot raises as in ``resolve``, the latest is resolved again. Raises as ``resolve``."""
        for _ in range(RESOLVE_ATTEMPTS):
            snap = resolve_snapshot(self.blobstore, self.checkpoints, self.ref, snapshot,
                                    allow_other_store=allow_other_store)
            check = _PinCheck(lambda snap=snap: self._pinned(snap, snapshot))
            try:
                return use(snap, check.confirm)
            except StatectlError:
                if check.kept():  # waits for the check; raises for a named snapshot it did not keep
                    raise
        raise self._replaced()

    def _pinned(self, snap: ResolvedSnapshot, snapshot: str | None) -> bool:
        """Pin ``snap`` and check that retention still keeps it: True to read it (also when no pin could be
        written), False when it was the latest and is kept no more (resolve again). Raises
        SnapshotNotFoundError for a snapshot named by ``snapshot`` that is kept no more."""
        owner = _owner(snap, self.ref)
        if not self._pin(owner, snap) or self._still_retained(owner, snap, latest=snapshot is None) is not False:
            return True
        if snapshot is not None:
            raise self._expired(owner, snap, snapshot)
        return False

    def _replaced(self) -> StatectlError:
        return StatectlError(f"the latest snapshot of {self.ref} was replaced and expired {RESOLVE_ATTEMPTS} times "
                             f"while this {self.operation} tried to pin it",
                             hint="backups with --keep-last 1 are committing faster than it can start; run it "
                                  "again, or name a snapshot with --snapshot")

    def _expired(self, owner: StoreRef, snap: ResolvedSnapshot, snapshot: str) -> SnapshotNotFoundError:
        """The error for ``snap`` (named ``snapshot``) that retention no longer keeps: expired_error's when
        it was expired before this reader started, else that it was expired just as it started."""
        for r in self.checkpoints.records(owner):
            if r.index_blob_id == snap.index_blob_id and r.state == EXPIRED and r.expired_ms < self.started * 1000:
                return expired_error(self.blobstore.url, owner, r)
        return SnapshotNotFoundError(
            f"snapshot {snapshot!r} of {self.ref} was expired by retention just as this {self.operation} started",
            hint=(owner.command("snapshots list"), " shows the snapshots there are"))

    def _still_retained(self, owner: StoreRef, snap: ResolvedSnapshot, *, latest: bool) -> bool | None:
        """Whether retention still keeps the snapshot now that it is pinned: True; False (expired or
        forgotten, or no longer the latest when that was all that kept it); None when no catalog record
        names it (nothing can be checked)."""
        if self.checkpoints.commit_log is None and snap.record is not None:
            # The catalog is its own commit log: the snapshot's own record says whether retention keeps it.
            r = self.checkpoints.record(owner, snap.record.checkpoint_id)
            return r is not None and r.index_blob_id == snap.index_blob_id and r.state == COMMITTED
        if latest and self._latest_is(self.ref, snap):
            return True
        for r in self.checkpoints.records(owner):
            if r.index_blob_id == snap.index_blob_id:
                # A commit log's latest checkpoint is committed while the catalog's record of it may still be
                # pending (a crash between the two): retention keeps it.
                if r.state == PENDING and not latest:
                    return self._latest_is(owner, snap)
                return r.state == COMMITTED
        return False if snap.record is not None else None

    def _latest_is(self, ref: StoreRef, snap: ResolvedSnapshot) -> bool:
        """Whether ``snap`` is the latest committed snapshot of ``ref`` (the commit log's, when there is one)."""
        try:
            now = self.checkpoints.latest(ref)
        except SnapshotNotFoundError:
            return False
        return now is not None and now.index_blob_id == snap.index_blob_id

    # -- the pin record ----------------------------------------------------------------------------

    def _body(self, now: float) -> bytes:
        return json.dumps(dict(self._body_fields, started=self.started, expires_at=now + self.seconds,
                               pin=self.pin_id)).encode()

    def _pin(self, owner: StoreRef, snap: ResolvedSnapshot) -> bool:
        """Write (or re-point) the pin at ``snap``; False, with a note, when the blob store refuses."""
        if self.unpinned_reason is not None:
            return False
        key = pins_prefix(owner) + self.pin_id + ".json"
        checkpoint_id = snap.index.snapshot_metadata.checkpoint_id
        with self._lock:
            if self._stop.is_set():  # released while a check was on its way: no pin outlives its reader
                return False
            if self.key is not None and self.key != key:
                self._delete_locked()  # re-resolved to another store's snapshot: one pin at a time
            self._body_fields = {"index_blob_id": snap.index_blob_id, "checkpoint_id": checkpoint_id,
                                 "store": str(owner), "operation": self.operation,
                                 "host": lease.this_host(), "pid": os.getpid()}
            now = time.time()
            try:
                if self._etag is not None:
                    self._check_unchanged()
                self._etag = self.blobstore.put_at(key, self._body(now), durable=False)
            except StatectlError as e:
                self._etag = None
                self.unpinned_reason = str(e)
                why = "the credentials cannot write to it" if isinstance(e, AuthError) else f"the write failed: {e}"
                then = ("fails and leaves its target as it was" if self.operation == "restore"
                        else "reports them missing")
                self.progress.note(
                    f"no reader pin on snapshot {snap.index_blob_id} in {self.blobstore.url} ({why}): nothing "
                    f"stops a backup's retention or gc from deleting its blobs during this {self.operation}, "
                    f"which then {then}")
                return False
            self.key = key
            self._expires = now + self.seconds
        if self._thread is None:
            self._thread = threading.Thread(target=self._renew_loop, name="statectl-pin", daemon=True)
            self._thread.start()
        return True

    def renew(self) -> None:
        """Extend the pin. Once it has expired, or the record changed or is gone (gc deleted it as
        stale), the pin is lost: ``lost`` says why and it is not written again."""
        with self._lock:
            if self._etag is None or self.lost is not None or self.key is None:
                return
            now = time.time()
            if now > self._expires:
                self.lost = "it expired before it could be renewed"
                return
            try:
                self._check_unchanged()
            except (PreconditionFailedError, BlobNotFoundError):
                self.lost = "its record was removed or replaced (gc took it for a dead reader's)"
                return
            self._etag = self.blobstore.put_at(self.key, self._body(now), durable=False)
            self._expires = now + self.seconds

    def _check_unchanged(self) -> None:
        """Raise BlobNotFoundError / PreconditionFailedError unless our pin record is as we last wrote it.

        Read, compare, then write plainly rather than a conditional write: on ``file://`` each key written
        conditionally keeps a lock file, one per reader for ever. gc deletes a pin only once it is past its
        expiry and the clock slack, and a reader never renews past its own expiry, so nothing can come
        between the read and the write but clock skew beyond the slack."""
        assert self.key is not None
        _, etag = self.blobstore.read_at(self.key)
        if etag != self._etag:
            raise PreconditionFailedError(f"the pin {self.key} was replaced")

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                self.renew()
            except StatectlError:
                continue  # a passing blob store failure: the next round retries, before the expiry
            if self.lost is not None:
                self.progress.note(f"the reader pin of this {self.operation} lapsed ({self.lost}); its "
                                   "downloads' checks still catch a blob deleted meanwhile")
                return

    def _delete_locked(self) -> None:
        if self.key is not None and self._etag is not None:
            try:
                self.blobstore.delete([self.key])
            except StatectlError:
                pass  # it expires on its own; gc removes it then
        self.key, self._etag = None, None

    def release(self) -> None:
        """Stop renewing and delete the pin. Idempotent; best effort (an undeleted pin expires)."""
        self._stop.set()
        for thread in (self._thread, self._releasing):
            if thread is not None and thread is not threading.current_thread():
                thread.join()
        with self._lock:
            self._delete_locked()

    def release_soon(self) -> None:
        """Begin ``release`` on a thread (the reader has read all it needs, and goes on with local work); the
        context manager's exit waits for it."""
        if self._releasing is None:
            self._releasing = threading.Thread(target=self.release, name="statectl-pin-release", daemon=True)
            self._releasing.start()

    def __enter__(self) -> "ReaderPin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Dropped(StatectlError):
    """The check of a pin did not keep its snapshot (ReaderPin.read resolves the latest again)."""


class _PinCheck:
    """ReaderPin._pinned run on its own thread, beside the reads it protects."""

    def __init__(self, pinned: Callable[[], bool]):
        self._kept: bool | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(pinned,), name="statectl-pin-check", daemon=True)
        self._thread.start()

    def _run(self, pinned: Callable[[], bool]) -> None:
        try:
            self._kept = pinned()
        except BaseException as e:  # noqa: BLE001 - raised in the reader's thread by kept()
            self._error = e

    def kept(self) -> bool:
        """Wait for the check: True when the snapshot is kept; raises what the check raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return bool(self._kept)

    def confirm(self) -> None:
        if not self.kept():
            raise _Dropped("the snapshot was expired by retention just as it was pinned")


def _owner(snap: ResolvedSnapshot, fallback: StoreRef) -> StoreRef:
    """The store a snapshot was taken of (its retention is the one to tell), per its own metadata."""
    m = snap.index.snapshot_metadata
    try:
        return StoreRef(m.job_name, m.job_id, m.task_name, m.store_name)
    except StatectlError:  # metadata no StoreRef accepts: its store has no catalog statectl could clean
        return fallback


def ref_of_pin_key(key: str) -> StoreRef | None:
    """The store a pin key belongs to, or None for a key that is not a pin's."""
    parts = key[len(PIN_PREFIX):].split("/") if key.startswith(PIN_PREFIX) else []
    if len(parts) != 5 or not parts[4].endswith(".json"):
        return None
    try:
        return StoreRef(*(unquote(p) for p in parts[:4]))
    except StatectlError:
        return None
