"""A fault-injecting HTTP/1.1 reverse proxy for an S3 endpoint, on loopback (tests and benchmarks).

Importable without pytest::

    with FaultProxy("http://127.0.0.1:8333", rate=0.05, seed=1) as proxy:
        client = boto3.client("s3", endpoint_url=proxy.url, ...)
        ...
        print(proxy.stats())

    python -m tests.faultproxy http://127.0.0.1:8333 --rate 0.05   # serve until Ctrl-C

Requests and responses are relayed byte for byte (head and body, Content-Length or chunked, keep-alive,
``Expect: 100-continue``) and streamed, never held whole. The Host header is not rewritten: a client
signs the proxy's host:port, which only an upstream that checks signatures (SeaweedFS with an
identities file) would refuse.

Each request draws a fault with probability ``rate``; the kind is drawn from ``kinds``:

- ``slowdown``: 503 with an S3 ``SlowDown`` XML body; the request never reaches the upstream (S3 does
  not execute a throttled request).
- ``internal``: 500 with an S3 ``InternalError`` XML body *after* the upstream executed the request, as
  S3's own 500s may: the client cannot tell whether its request took effect.
- ``reset``: the client's socket is closed with SO_LINGER 0 (a TCP RST), either before the request is
  forwarded or after the upstream answered, halfway through the response head.
- ``truncate``: the response head with its full Content-Length, then part of the body (possibly none
  of it; ``truncate_at`` fixes the fraction), then a close (FIN). A response without a body cannot be
  cut short: that request passes, and the next response with a body that has no fault of its own is
  truncated instead (at most one truncation waits like this; more are dropped).

No fault alters a byte that the client receives as complete: every fault shows as an error status, a
reset or a body shorter than its Content-Length (or an unfinished chunked body).

Decisions come from ``random.Random(seed)``, three draws per request in arrival order, so the n-th
request the proxy sees always gets the same decision (which request is the n-th depends on thread
scheduling when the client runs requests in parallel). ``set_down(True)`` resets every connection and
request until ``set_down(False)``; ``set_down(True, after=n)`` lets n more requests through first.
"""

from __future__ import annotations

import argparse
import collections
import random
import select
import socket
import struct
import sys
import threading
import time
from typing import BinaryIO, Iterable
from urllib.parse import urlparse

__all__ = ["FaultProxy", "KINDS"]

KINDS = ("slowdown", "internal", "reset", "truncate")
BUF = 64 * 1024
MAX_HEAD = 64 * 1024


class _Closed(Exception):
    """A peer closed its connection, or sent something this proxy cannot relay."""


def _read_head(rfile: BinaryIO) -> bytes | None:
    """The raw head (start line to the blank line, inclusive); None on EOF before its first byte."""
    lines: list[bytes] = []
    size = 0
    while True:
        line = rfile.readline(MAX_HEAD + 1)
        if not line:
            if not lines:
                return None
            raise _Closed("connection closed inside a message head")
        if not lines and line in (b"\r\n", b"\n"):
            continue  # RFC 9112 2.2: ignore empty lines before a request line
        lines.append(line)
        size += len(line)
        if size > MAX_HEAD:
            raise _Closed("message head too large")
        if line in (b"\r\n", b"\n"):
            return b"".join(lines)


class _Head:
    """A parsed message head; ``raw`` is what is relayed."""

    def __init__(self, raw: bytes):
        self.raw = raw
        lines = raw.decode("latin-1").split("\n")
        self.start = lines[0].rstrip("\r")
        self.headers: dict[str, str] = {}
        for line in lines[1:]:
            line = line.rstrip("\r")
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise _Closed(f"malformed header line {line!r}")
            name = name.strip().lower()
            value = value.strip()
            # Repeated headers that matter here (Connection, Transfer-Encoding) are comma lists.
            self.headers[name] = f"{self.headers[name]}, {value}" if name in self.headers else value
        self.version = ""

    def tokens(self, name: str) -> set[str]:
        return {t.strip().lower() for t in self.headers.get(name, "").split(",") if t.strip()}

    @property
    def chunked(self) -> bool:
        te = self.tokens("transfer-encoding")
        if te and te != {"chunked"}:
            raise _Closed(f"unsupported Transfer-Encoding {self.headers['transfer-encoding']!r}")
        return bool(te)

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        if value is None:
            return None
        values = {v.strip() for v in value.split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise _Closed(f"bad Content-Length {value!r}")
        return int(next(iter(values)))


class _Request(_Head):
    def __init__(self, raw: bytes):
        super().__init__(raw)
        parts = self.start.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _Closed(f"malformed request line {self.start!r}")
        self.method, self.target, self.version = parts

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.content_length)

    @property
    def expects_continue(self) -> bool:
        return "100-continue" in self.tokens("expect") and self.has_body

    @property
    def keep_alive(self) -> bool:
        conn = self.tokens("connection")
        return "keep-alive" in conn if self.version == "HTTP/1.0" else "close" not in conn


class _Response(_Head):
    def __init__(self, raw: bytes, method: str):
        super().__init__(raw)
        parts = self.start.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise _Closed(f"malformed status line {self.start!r}")
        self.version = parts[0]
        self.status = int(parts[1])
        self.method = method

    @property
    def framing(self) -> str:
        """``none``, ``length``, ``chunked`` or ``close`` (the body runs to the end of the connection)."""
        if self.method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200:
            return "none"
        if self.chunked:
            return "chunked"
        if self.content_length is not None:
            return "length" if self.content_length else "none"
        return "close"

    @property
    def keep_alive(self) -> bool:
        conn = self.tokens("connection")
        if self.framing == "close":
            return False
        return "keep-alive" in conn if self.version == "HTTP/1.0" else "close" not in conn


def _send(sock: socket.socket, data: bytes | memoryview) -> None:
    try:
        sock.sendall(data)
    except OSError as e:
        raise _Closed(f"send: {e}") from e


def _relay_length(src: BinaryIO, dst: socket.socket | None, n: int) -> None:
    """Copy exactly ``n`` bytes (``dst`` None: discard them)."""
    while n > 0:
        data = src.read1(min(n, BUF))  # type: ignore[attr-defined]
        if not data:
            raise _Closed(f"connection closed with {n} body bytes still due")
        if dst is not None:
            _send(dst, data)
        n -= len(data)


def _relay_chunked(src: BinaryIO, dst: socket.socket | None, *, stop_after: float | None = None) -> None:
    """Copy a chunked body as it is, up to and including its trailer section.

    With ``stop_after`` (a fraction), stop inside the first chunk's data instead: a truncated body.
    """
    while True:
        line = src.readline(MAX_HEAD + 1)
        if not line.endswith(b"\n"):
            raise _Closed("connection closed inside a chunked body")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _Closed(f"bad chunk size line {line!r}") from None
        if dst is not None:
            _send(dst, line)
        if size == 0:
            while True:  # trailer fields, then the blank line
                line = src.readline(MAX_HEAD + 1)
                if not line.endswith(b"\n"):
                    raise _Closed("connection closed inside a chunked trailer")
                if dst is not None:
                    _send(dst, line)
                if line in (b"\r\n", b"\n"):
                    return
        if stop_after is not None:
            _relay_length(src, dst, int(size * stop_after))
            return
        _relay_length(src, dst, size)
        crlf = src.readline(3)
        if crlf not in (b"\r\n", b"\n"):
            raise _Closed("chunk data not followed by CRLF")
        if dst is not None:
            _send(dst, crlf)


def _relay_to_close(src: BinaryIO, dst: socket.socket) -> None:
    while data := src.read1(BUF):  # type: ignore[attr-defined]
        _send(dst, data)


def _relay_body(head: _Head, framing: str, src: BinaryIO, dst: socket.socket | None) -> None:
    if framing == "length":
        _relay_length(src, dst, head.content_length or 0)
    elif framing == "chunked":
        _relay_chunked(src, dst)
    elif framing == "close":
        assert dst is not None
        _relay_to_close(src, dst)


def _reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the kernel sends a RST and drops anything unsent."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _close_gracefully(sock: socket.socket, linger: float = 2.0) -> None:
    """FIN, then read and drop what the client still sends for up to ``linger`` s, then close.

    Closing a socket with unread input makes the kernel send a RST, which can destroy the response
    the client has not read yet: a deliberate close must not turn into a reset.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + linger
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([sock], [], [], left)
            if not ready or not sock.recv(BUF):
                break
    except OSError:
        pass
    sock.close()


def _error_body(code: str, message: str, resource: str, request_id: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>").encode()


class _Upstream:
    def __init__(self, host: str, port: int, timeout: float):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = self.sock.makefile("rb")

    def stale(self) -> bool:
        """An idle keep-alive connection that is readable has been closed (or is out of step)."""
        try:
            ready, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(ready)

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()


class FaultProxy:
    """A threaded reverse proxy on 127.0.0.1 (a free port) in front of ``upstream`` (``http://host:port``).

    ``rate`` is the probability that a request gets a fault, ``kinds`` the faults drawn from (uniformly,
    or by ``weights``), ``seed`` makes the decisions repeatable. ``truncate_at`` (0..1) is the fraction
    of a body a truncation lets through, random when None; 0 cuts right after the head. Use as a
    context manager, or call ``start()`` and ``close()``.
    """

    def __init__(self, upstream: str, *, rate: float = 0.0, kinds: Iterable[str] = KINDS,
                 weights: Iterable[float] | None = None, seed: int = 0, truncate_at: float | None = None,
                 timeout: float = 120.0):
        u = urlparse(upstream)
        if u.scheme != "http" or not u.hostname or not u.port:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream = upstream
        self._up_addr = (u.hostname, u.port)
        self.timeout = timeout
        if truncate_at is not None and not 0.0 <= truncate_at < 1.0:
            raise ValueError("truncate_at must be within [0, 1)")
        self.truncate_at = truncate_at
        self._pending_truncates = 0
        self._forced: list[str] = []
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._rate = 0.0
        self._kinds: tuple[str, ...] = ()
        self._weights: tuple[float, ...] | None = None
        self.set_rate(rate)
        self.set_kinds(kinds, weights)
        self._down = False
        self._down_after: int | None = None
        self._counts = dict.fromkeys(("connections", "requests", "forwarded", *KINDS, "down", "upstream_errors",
                                      "broken"), 0)
        # (method, target, decision) of the latest requests in arrival order; truncations that moved
        # to a later response show at the request that drew them.
        self.log: collections.deque[tuple[str, str, str | None]] = collections.deque(maxlen=100_000)
        # (method, target, headers by lower-case name) of the latest requests in arrival order: what a
        # client sent, e.g. the encryption headers of each write.
        self.requests: collections.deque[tuple[str, str, dict[str, str]]] = collections.deque(maxlen=100_000)
        self._listener: socket.socket | None = None
        self._threads: set[threading.Thread] = set()
        self._socks: set[socket.socket] = set()
        self._closing = False
        self.host = "127.0.0.1"
        self.port = 0

    # -- control -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the endpoint URL clients use instead of the upstream's."""
        return f"http://{self.host}:{self.port}"

    def set_rate(self, rate: float) -> None:
        """Probability (0..1) that a request gets a fault, from the next request on (truncations still
        waiting for a response with a body are dropped)."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], not {rate}")
        with self._lock:
            self._rate = rate
            self._pending_truncates = 0

    def set_kinds(self, kinds: Iterable[str], weights: Iterable[float] | None = None) -> None:
        """The fault mix: a subset of KINDS, drawn uniformly or in proportion to ``weights``."""
        kinds = tuple(kinds)
        unknown = set(kinds) - set(KINDS)
        if not kinds or unknown:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, not {kinds}")
        w = tuple(weights) if weights is not None else None
        if w is not None and (len(w) != len(kinds) or min(w) < 0 or sum(w) <= 0):
            raise ValueError("weights must be one non-negative number per kind, not all zero")
        with self._lock:
            self._kinds, self._weights = kinds, w
            self._pending_truncates = 0

    def set_down(self, down: bool, *, after: int = 0) -> None:
        """``True``: reset every connection and request (a store that is gone); ``False``: serve again.

        With ``after=n`` the proxy goes down once n more requests have been decided (they may still
        get faults), for a store that dies in the middle of an operation.
        """
        if after < 0:
            raise ValueError("after must be 0 or more")
        with self._lock:
            if down and after:
                self._down, self._down_after = False, after
            else:
                self._down, self._down_after = down, None

    def inject_next(self, kind: str, count: int = 1) -> None:
        """Give the next ``count`` requests fault ``kind`` whatever the rate (their draws are still
        made, so the seeded sequence after them is unchanged): a fault at an exact step."""
        if kind not in KINDS or count < 0:
            raise ValueError(f"kind must be one of {KINDS} and count 0 or more")
        with self._lock:
            self._forced = [kind] * count

    @property
    def down(self) -> bool:
        with self._lock:
            return self._down

    def stats(self) -> dict[str, int]:
        """Counters: client ``connections`` accepted, ``requests`` seen, ``forwarded`` upstream, each fault
        kind injected, requests and connections refused while ``down``, ``upstream_errors`` (upstream
        unreachable), ``broken`` (connections dropped because a peer went away mid-message or sent something
        unrelayable: not an injected fault, normally 0) and ``faults`` (the sum of the four kinds)."""
        with self._lock:
            out = dict(self._counts)
        out["faults"] = sum(out[k] for k in KINDS)
        return out

    def reset_stats(self) -> None:
        """Zero the counters and clear the logs (the decisions carry on where they were)."""
        with self._lock:
            for k in self._counts:
                self._counts[k] = 0
            self.log.clear()
            self.requests.clear()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> "FaultProxy":
        if self._listener is not None:
            raise RuntimeError("FaultProxy already started")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._spawn(self._accept_loop, "faultproxy-accept")
        return self

    def close(self) -> None:
        """Stop accepting, close every connection, wait for the handler threads. Idempotent."""
        self._closing = True
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
            except OSError:
                pass
            listener.close()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout=5)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"FaultProxy({self.url} -> {self.upstream}, rate={self._rate}, kinds={self._kinds}, "
                f"down={self._down})")

    # -- internals ---------------------------------------------------------------------------------

    def _spawn(self, target, name: str, *args) -> None:
        def run() -> None:
            try:
                target(*args)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        t = threading.Thread(target=run, name=name, daemon=True)
        with self._lock:
            self._threads.add(t)
        t.start()

    def _track(self, sock: socket.socket, on: bool) -> None:
        with self._lock:
            (self._socks.add if on else self._socks.discard)(sock)

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._closing:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self._count("connections")
            if self.down:
                self._count("down")
                _reset(conn)
                continue
            self._spawn(self._serve, "faultproxy-conn", conn)

    def _decide(self, req: _Request) -> tuple[str | None, float]:
        """(fault kind, None or "down"; a number in [0, 1) that shapes the fault) for the next request."""
        with self._lock:
            self._counts["requests"] += 1
            if self._down_after is not None:
                if self._down_after == 0:
                    self._down, self._down_after = True, None
                else:
                    self._down_after -= 1
            # Always three draws, so one request's decision never shifts the next one's.
            hit, pick, shape = self._rng.random(), self._rng.random(), self._rng.random()
            if self._down:
                fault: str | None = "down"
            elif self._forced:
                fault = self._forced.pop()
            elif hit >= self._rate:
                fault = None
            elif self._weights is None:
                fault = self._kinds[min(int(pick * len(self._kinds)), len(self._kinds) - 1)]
            else:
                total, acc = sum(self._weights), 0.0
                fault = self._kinds[-1]
                for k, w in zip(self._kinds, self._weights):
                    acc += w / total
                    if pick < acc:
                        fault = k
                        break
            self.log.append((req.method, req.target, fault))
            self.requests.append((req.method, req.target, dict(req.headers)))
            return fault, shape

    def _serve(self, client: socket.socket) -> None:
        self._track(client, True)
        client.settimeout(self.timeout)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = client.makefile("rb")
        up: _Upstream | None = None
        how = "close"  # how the client connection ends: "close" (FIN), "reset", "done" (already closed)
        try:
            while not self._closing:
                raw = _read_head(rfile)
                if raw is None:
                    return
                req = _Request(raw)
                fault, shape = self._decide(req)
                if fault == "down":
                    self._count("down")
                    how = "reset"
                    return
                if fault == "reset" and shape < 0.5:
                    self._count("reset")
                    how = "reset"
                    return
                if fault == "slowdown":
                    self._count("slowdown")
                    if not self._answer_without_forwarding(req, rfile, client):
                        return
                    continue
                if up is not None and up.stale():
                    up.close()
                    self._track(up.sock, False)
                    up = None
                if up is None:
                    try:
                        up = _Upstream(*self._up_addr, timeout=self.timeout)
                    except OSError:
                        self._count("upstream_errors")
                        how = "reset"
                        return
                    self._track(up.sock, True)
                self._count("forwarded")
                keep_client, keep_up, how = self._exchange(req, rfile, client, up, fault, shape)
                if not keep_up:
                    up.close()
                    self._track(up.sock, False)
                    up = None
                if not keep_client:
                    return
        except (_Closed, OSError, ValueError):
            # Not a fault of ours: a peer went away mid-message or sent what cannot be relayed.
            self._count("broken")
            how = "reset" if how == "close" else how
        finally:
            rfile.close()
            if up is not None:
                up.close()
                self._track(up.sock, False)
            self._track(client, False)
            if how == "reset":
                _reset(client)
            elif how == "close":
                _close_gracefully(client)

    def _answer_without_forwarding(self, req: _Request, rfile: BinaryIO, client: socket.socket) -> bool:
        """Answer 503 SlowDown without forwarding the request; True when the connection stays usable.

        A client waiting for 100 Continue gets the error instead and sends no body; the connection is
        closed then, as the body's fate is ambiguous. Otherwise the body is read and dropped first.
        """
        keep = req.keep_alive and not req.expects_continue
        if keep and req.has_body:
            _relay_body(req, "chunked" if req.chunked else "length", rfile, None)
        self._send_error(req, client, 503, "SlowDown", "Please reduce your request rate.", keep)
        return keep

    def _exchange(self, req: _Request, rfile: BinaryIO, client: socket.socket, up: _Upstream, fault: str | None,
                  shape: float) -> tuple[bool, bool, str]:
        """Forward one request and relay (or spoil) its response: (keep client, keep upstream, how to end)."""
        _send(up.sock, req.raw)
        body_sent = not req.has_body
        if req.has_body and not req.expects_continue:
            _relay_body(req, "chunked" if req.chunked else "length", rfile, up.sock)
            body_sent = True
        while True:
            raw = _read_head(up.rfile)
            if raw is None:
                raise _Closed("upstream closed before answering")
            resp = _Response(raw, req.method)
            if resp.status >= 200:
                break
            if resp.status == 101:
                raise _Closed("protocol upgrades are not relayed")
            _send(client, resp.raw)  # 100 Continue and other interim responses
            if resp.status == 100 and not body_sent:
                _relay_body(req, "chunked" if req.chunked else "length", rfile, up.sock)
                body_sent = True
        if not body_sent:
            # The upstream answered without asking for the body: whether the client sends it anyway
            # is up to the client, so this connection cannot carry another request.
            req_keep = False
        else:
            req_keep = req.keep_alive
        framing = resp.framing
        keep_up = resp.keep_alive and body_sent

        if fault == "truncate" and framing == "none":
            # Nothing to cut short: the next response with a body takes the truncation. At most one
            # waits, or the truncations drawn during a run of uploads would all hit one later call.
            fault = None
            with self._lock:
                self._pending_truncates = 1
        elif fault is None and framing != "none":
            with self._lock:
                if self._pending_truncates:
                    self._pending_truncates -= 1
                    fault = "truncate"
        if fault == "internal":
            self._count("internal")
            if framing == "close":  # the upstream's answer runs to its close: drop the connection instead
                keep_up = False
            else:
                _relay_body(resp, framing, up.rfile, None)
            self._send_error(req, client, 500, "InternalError", "We encountered an internal error. Please try again.",
                             req_keep)
            return req_keep, keep_up, "close"
        if fault == "reset":
            self._count("reset")
            _send(client, resp.raw[: max(1, int(len(resp.raw) * (shape - 0.5)))])
            return False, False, "reset"
        if fault == "truncate":
            self._count("truncate")
            if self.truncate_at is not None:
                shape = self.truncate_at
            _send(client, resp.raw)
            if framing == "length":
                _relay_length(up.rfile, client, int((resp.content_length or 0) * shape))
            elif framing == "chunked":
                _relay_chunked(up.rfile, client, stop_after=shape)
            else:  # until close: stop after part of what arrives first
                data = up.rfile.read1(BUF)  # type: ignore[attr-defined]
                _send(client, data[: len(data) // 2])
            return False, False, "close"
        _send(client, resp.raw)
        _relay_body(resp, framing, up.rfile, client)
        return req_keep and resp.keep_alive, keep_up, "close"

    def _send_error(self, req: _Request, client: socket.socket, status: int, code: str, message: str,
                    keep: bool) -> None:
        """An S3 error answer (no body for HEAD), with ``Connection: close`` unless ``keep``."""
        with self._lock:
            request_id = f"faultproxy-{self._counts['requests']}"
        body = _error_body(code, message, req.target.split("?", 1)[0], request_id)
        reason = {500: "Internal Server Error", 503: "Service Unavailable"}[status]
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
                f"x-amz-request-id: {request_id}\r\nServer: faultproxy\r\n"
                + ("" if keep else "Connection: close\r\n") + "\r\n").encode()
        _send(client, head if req.method == "HEAD" else head + body)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="faultproxy", description="Fault-injecting reverse proxy for an S3 endpoint")
    p.add_argument("upstream", help="http://host:port of the S3 endpoint")
    p.add_argument("--rate", type=float, default=0.05)
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    with FaultProxy(a.upstream, rate=a.rate, kinds=a.kinds.split(","), seed=a.seed) as proxy:
        print(proxy.url, flush=True)
        try:
            while True:
                time.sleep(5)
                print(proxy.stats(), file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
