"""The time bound of every S3 request, whatever the endpoint does (urllib3 connections under botocore).

A socket's read timeout (``timeout``, S3Options.timeout_s, 15 s by default) restarts with every byte, so a
server that answers a header line or a body byte every few seconds would hold a request for ever; on top
of it:

- a metadata request (a list page, HEAD, tagging, ``put_at``, ``read_at``, delete, copy, multipart
  create/complete/abort) must be over, response and all, within DEADLINE_FACTOR x ``timeout`` (60 s by
  default) of its start;
- a bulk transfer (``get``, ``put`` of a blob or a part) has no total bound, as a long transfer that
  keeps moving must never be cut, but it fails when fewer than MIN_PROGRESS_BYTES (64 KiB) went over
  the connection in ``timeout`` seconds (curl's --speed-limit/--speed-time), or when its response head
  takes longer than the metadata deadline. Time spent reading the upload's source or writing the
  download locally does not count.

One watchdog thread (a daemon, shared by every store of the process, idle without requests) shuts an
overdue request's connection down; the request then fails with the error its Deadline makes (the S3
store's names the endpoint), and the retry wrapper's retry_time ends the whole in about a minute.
This module owns the attempts, the watchdog, botocore's connection pools that tie each request to its
attempt (``install_deadlines``), and the upload body that counts what it sends (BoundedBody).
"""

from __future__ import annotations

import http.client
import io
import math
import os
import socket
import threading
import time
from typing import Any, BinaryIO, Callable

from statectl.errors import BlobStoreError

# The bounds of one request (see the module doc): a metadata request must be done within
# DEADLINE_FACTOR x timeout; a bulk transfer must move MIN_PROGRESS_BYTES every timeout seconds.
DEADLINE_FACTOR = 4
MIN_PROGRESS_BYTES = 64 * 1024


class Attempt:
    """The time bound of one request, checked by the watchdog (under its lock).

    ``moved`` counts the bytes received (response head and body) and read from an upload's source. A
    metadata attempt must be over by ``due``; a bulk attempt must add MIN_PROGRESS_BYTES to ``moved`` by
    ``due``, which then moves on by ``window``, and its response head must be complete by ``head_by``.
    Between ``pause()`` and ``resume()`` the caller works locally: that time does not count.
    """

    __slots__ = ("bulk", "window", "head_window", "due", "head_by", "moved", "mark", "paused_at", "conn", "sock",
                 "expired", "why")

    def __init__(self, bulk: bool, timeout_s: float):
        self.bulk = bulk
        self.head_window = DEADLINE_FACTOR * timeout_s
        self.window = timeout_s if bulk else self.head_window
        self.due = time.monotonic() + self.window
        self.head_by = math.inf
        self.moved = 0
        self.mark = 0
        self.paused_at: float | None = None
        self.conn: Any = None  # the connection the request went out on, and the socket of its response
        self.sock: Any = None
        self.expired = False
        self.why = ""

    def check(self, now: float) -> float | None:
        """None when the attempt is overdue, else when to check it next."""
        if now >= self.head_by:
            self.why = "head"
            return None
        if self.paused_at is not None:
            return now + self.window
        if now < self.due:
            return min(self.due, self.head_by)
        if self.bulk and self.moved - self.mark >= MIN_PROGRESS_BYTES:
            self.mark = self.moved
            self.due = now + self.window
            return min(self.due, self.head_by)
        self.why = "stalled" if self.bulk and self.moved else "deadline"
        return None

    def pause(self) -> None:
        self.paused_at = time.monotonic()

    def resume(self) -> None:
        if self.paused_at is not None:
            self.due += time.monotonic() - self.paused_at  # before paused_at clears: the watchdog reads both
            self.paused_at = None

    def expire(self) -> None:
        """Shut the request's socket down: a thread blocked reading or writing it returns at once."""
        self.expired = True
        sock = self.sock if self.sock is not None else getattr(self.conn, "sock", None)
        if sock is None:
            return
        try:
            # socket.socket's own shutdown, also for an SSLSocket (whose override would drop its TLS state
            # under the reading thread): the reader then sees an EOF.
            socket.socket.shutdown(sock, socket.SHUT_RDWR) if isinstance(sock, socket.socket) \
                else sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError, ValueError):
            pass  # closed already


class _Local(threading.local):
    attempt: Attempt | None = None


_local = _Local()


class Watchdog:
    """One daemon thread for the process that expires overdue attempts; it sleeps until the earliest
    check is due, and without attempts until one is added (no thread per request, nothing to join)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active: set[Attempt] = set()
        self._wake_at = math.inf
        self._pid = 0

    def add(self, att: Attempt) -> None:
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child, which has no watchdog thread
                self._pid = os.getpid()
                self._active.clear()
                threading.Thread(target=self._run, name="statectl-s3-deadlines", daemon=True).start()
            self._active.add(att)
            if att.due < self._wake_at:
                self._wake_at = att.due
                self._cond.notify()

    def remove(self, att: Attempt) -> None:
        with self._cond:
            self._active.discard(att)
            att.conn = att.sock = None

    def bind(self, conn: Any, att: Attempt | None) -> None:
        """``conn`` now carries ``att``'s request: an earlier attempt must no longer shut it down."""
        with self._cond:
            prev = conn._statectl_attempt
            if prev is not None and prev is not att:
                prev.conn = prev.sock = None
            conn._statectl_attempt = att
            if att is not None:
                att.conn, att.sock = conn, None

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                wake = math.inf
                for att in list(self._active):
                    at = att.check(now)
                    if at is None:
                        self._active.discard(att)
                        att.expire()
                    elif at < wake:
                        wake = at
                self._wake_at = wake
                self._cond.wait(None if wake == math.inf else wake - now)


_WATCHDOG = Watchdog()


class _CountingRaw(io.RawIOBase):
    """A response's socket reader that adds each read to the attempt's ``moved``."""

    def __init__(self, fp: Any, att: Attempt):
        super().__init__()
        self._fp = fp  # http.client's own buffered reader of the socket, closed with this one
        self._raw = fp.raw
        self._att = att

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int | None:
        n = self._raw.readinto(b)
        if n:
            self._att.moved += n
        return n

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self._fp.close()
            super().close()


class _Response(http.client.HTTPResponse):
    """http.client's response, counting the bytes it reads into the current attempt, and bounding a bulk
    response's head by the metadata deadline."""

    def __init__(self, sock: Any, *args: Any, **kwargs: Any):
        super().__init__(sock, *args, **kwargs)
        att = self._statectl_attempt = _local.attempt
        if att is not None:
            att.sock = sock
            self.fp = io.BufferedReader(_CountingRaw(self.fp, att))

    def begin(self) -> None:
        att = self._statectl_attempt
        if att is None or not att.bulk:
            return super().begin()
        att.head_by = time.monotonic() + att.head_window
        try:
            super().begin()
        finally:
            att.head_by = math.inf


_POOLS: tuple[type, type] | None = None


def pool_classes() -> tuple[type, type]:
    """botocore's connection pools (http, https) with connections that tie each request to its attempt."""
    global _POOLS
    if _POOLS is None:
        from botocore.awsrequest import (
            AWSHTTPConnection,
            AWSHTTPConnectionPool,
            AWSHTTPSConnection,
            AWSHTTPSConnectionPool,
        )

        class Bound:
            _statectl_attempt: Attempt | None = None
            response_class = _Response

            def request(self, *args: Any, **kwargs: Any) -> Any:
                if _local.attempt is not None or self._statectl_attempt is not None:
                    _WATCHDOG.bind(self, _local.attempt)
                return super().request(*args, **kwargs)  # type: ignore[misc]

        class HTTPConnection(Bound, AWSHTTPConnection):
            pass

        class HTTPSConnection(Bound, AWSHTTPSConnection):
            pass

        class HTTPPool(AWSHTTPConnectionPool):
            ConnectionCls = HTTPConnection

        class HTTPSPool(AWSHTTPSConnectionPool):
            ConnectionCls = HTTPSConnection

        _POOLS = (HTTPPool, HTTPSPool)
    return _POOLS


def install_deadlines(client: Any) -> bool:
    """Make the client's connections bounded (see the module doc); False if botocore's insides moved
    (a unit test fails then: the attributes are botocore's, not a public API)."""
    try:
        classes = client._endpoint.http_session._pool_classes_by_scheme  # shared with its pool managers
    except AttributeError:
        return False
    if not isinstance(classes, dict):
        return False
    classes["http"], classes["https"] = pool_classes()
    return True


class Deadline:
    """``with Deadline(timeout_s, bulk, overdue):`` around one request (or, for a download, the request and
    the reading of its body): raises ``overdue(attempt)`` when the watchdog expired it, whatever the request
    itself raised or returned (a response cut short may parse as a valid, empty one)."""

    __slots__ = ("_overdue", "att", "_prev")

    def __init__(self, timeout_s: float, bulk: bool, overdue: Callable[[Attempt], Exception]):
        self._overdue = overdue
        self.att = Attempt(bulk, timeout_s)

    def __enter__(self) -> Attempt:
        self._prev = _local.attempt
        _local.attempt = self.att
        _WATCHDOG.add(self.att)
        return self.att

    def __exit__(self, et: Any, e: Any, tb: Any) -> bool:
        _WATCHDOG.remove(self.att)
        _local.attempt = self._prev
        if self.att.expired:
            raise self._overdue(self.att) from e
        return False


class BoundedBody:
    """Exactly ``size`` bytes of a stream, for botocore: sized, rewindable, no fileno().

    A source that ends early raises instead of returning a short body: with Content-Length already
    sent, a short body would leave the server waiting until the read timeout.
    """

    def __init__(self, src: BinaryIO, size: int, what: str, att: Attempt | None = None):
        self._src = src
        self._start = src.tell()
        self._size = size
        self._pos = 0
        self._what = what
        self._att = att

    def __len__(self) -> int:
        return self._size

    def read(self, n: int = -1) -> bytes:
        left = self._size - self._pos
        if n is None or n < 0 or n > left:
            n = left
        if n == 0:
            return b""
        att = self._att
        if att is None:
            data = self._src.read(n)
        else:  # reading the (local) source is not the endpoint's time
            att.pause()
            try:
                data = self._src.read(n)
            finally:
                att.resume()
            att.moved += len(data)
        if not data:
            raise BlobStoreError(f"{self._what}: source ended {left} bytes early")
        self._pos += len(data)
        return data

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        target = {0: pos, 1: self._pos + pos, 2: self._size + pos}[whence]
        self._src.seek(self._start + target)
        self._pos = target
        return target
