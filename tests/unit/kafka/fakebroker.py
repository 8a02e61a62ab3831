"""A Kafka-protocol broker in a thread: just enough for kafka-python to bootstrap over TLS and SASL.

It answers ApiVersions, Metadata (one broker, itself, and no topics), SaslHandshake and SaslAuthenticate, and
checks PLAIN and SCRAM-SHA-256/512 credentials against ``users`` with a real SCRAM server exchange (RFC 5802/
7677). A SASL failure is answered the way Apache Kafka does (``failure="error_code"``: SaslAuthenticate with
SASL_AUTHENTICATION_FAILED) or the way Tansu 0.6 does (``failure="server_error"``: error code 0 and an RFC 5802
``e=...`` server-final message). With ``ssl_context`` the listener is TLS; a context that requires client
certificates makes it mutual TLS.

Tansu cannot be used for this (see tests/integration/test_kafka_security.py): its only storage engine in the
PyPI build keeps no SCRAM credentials, it offers no PLAIN, and its TLS flags are not wired to the listener.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import threading
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
REQUESTS = {API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse), METADATA: (MetadataRequest, MetadataResponse),
            SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
            SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse)}
ADVERTISED = {API_VERSIONS: (0, 3), METADATA: (0, 12), SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
ITERATIONS = 4096


class _Scram:
    """The server side of one SCRAM exchange."""

    def __init__(self, mechanism: str, users: dict[str, str]):
        self.hash = HASHES[mechanism]
        self.users = users
        self.user: str | None = None

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def first(self, message: bytes) -> bytes:
        """client-first -> server-first"""
        gs2, _, bare = message.partition(b",,")
        attrs = dict(a.split(b"=", 1) for a in bare.split(b","))
        self.user = attrs[b"n"].decode()
        self.client_first_bare = bare
        self.nonce = attrs[b"r"] + base64.b64encode(os.urandom(12)).replace(b"=", b"")
        self.salt = hashlib.sha256(b"salt:" + attrs[b"n"]).digest()[:16]
        self.server_first = b"r=" + self.nonce + b",s=" + base64.b64encode(self.salt) + b",i=%d" % ITERATIONS
        return self.server_first

    def final(self, message: bytes) -> tuple[bool, bytes]:
        """client-final -> (authenticated, server-final)"""
        without_proof, _, proof = message.rpartition(b",p=")
        password = self.users.get(self.user or "")
        if password is None:
            return False, b"e=unknown-user"
        salted = hashlib.pbkdf2_hmac(self.hash().name, password.encode(), self.salt, ITERATIONS)
        client_key = self._hmac(salted, b"Client Key")
        auth_message = self.client_first_bare + b"," + self.server_first + b"," + without_proof
        signature = self._hmac(self.hash(client_key).digest(), auth_message)
        expected = bytes(a ^ b for a, b in zip(client_key, signature))
        if not hmac.compare_digest(base64.b64decode(proof), expected):
            return False, b"e=invalid-proof"
        return True, b"v=" + base64.b64encode(self._hmac(self._hmac(salted, b"Server Key"), auth_message))


class FakeBroker:
    """Start with ``start()`` (or as a context manager); ``bootstrap`` is ``127.0.0.1:PORT``.

    ``sasl`` requires SASL before any request but ApiVersions and the SASL ones (as a SASL listener does);
    ``authenticated`` lists the users that logged in, ``failures`` the SASL refusals, ``errors`` the
    exceptions of the fake itself (none, unless it has a bug).
    """

    def __init__(self, *, sasl: bool = False, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                 users: dict[str, str] | None = None, failure: str = "error_code",
                 ssl_context: ssl.SSLContext | None = None):
        assert failure in ("error_code", "server_error")
        self.sasl = sasl
        self.mechanisms = mechanisms
        self.users = dict(users or {})
        self.failure = failure
        self.ssl_context = ssl_context
        self.authenticated: list[str] = []
        self.failures: list[str] = []
        self.errors: list[Exception] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="fake-kafka")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FakeBroker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._sock.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        self._sock.settimeout(0.1)  # closing the socket does not wake a blocked accept(): poll the stop flag
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="fake-kafka-conn").start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.ssl_context is not None:
                conn = self.ssl_context.wrap_socket(conn, server_side=True)
                with self._lock:
                    self._conns.append(conn)
            _Connection(self, conn).run()
        except (OSError, struct.error):  # a client that hung up, or TLS that failed
            pass
        except Exception as e:  # a bug here: the test that asserts on ``errors`` shows it
            self.errors.append(e)
        finally:
            conn.close()


class _Connection:
    def __init__(self, broker: FakeBroker, sock: Any):
        self.broker = broker
        self.sock = sock
        self.authenticated = not broker.sasl
        self.mechanism: str | None = None
        self.scram: _Scram | None = None

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def run(self) -> None:
        while True:
            (size,) = struct.unpack(">i", self._read(4))
            if not 0 < size < 1 << 20:  # e.g. a TLS ClientHello on a plaintext listener: hang up, as Kafka does
                return
            payload = self._read(size)
            api_key, version = struct.unpack(">hh", payload[:4])
            if api_key not in REQUESTS:
                return
            if not self.authenticated and api_key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return  # a SASL listener closes a connection that skips authentication
            request_class, response_class = REQUESTS[api_key]
            request = request_class.decode(payload, version=version, header=True)
            response = getattr(self, f"_api_{api_key}")(request, response_class, version)
            if response is None:
                return
            response.with_header(correlation_id=request.header.correlation_id)
            self.sock.sendall(response.encode(header=True, framed=True))

    def _api_18(self, request: Any, response: Any, version: int) -> Any:
        return response(version=version, error_code=0, throttle_time_ms=0, api_keys=[
            response.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ADVERTISED.items()])

    def _api_3(self, request: Any, response: Any, version: int) -> Any:
        broker = response.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.broker.port, rack=None)
        return response(version=version, throttle_time_ms=0, brokers=[broker], cluster_id="fake", controller_id=0,
                        topics=[])

    def _api_17(self, request: Any, response: Any, version: int) -> Any:
        if request.mechanism not in self.broker.mechanisms:
            return response(version=version, error_code=UNSUPPORTED_SASL_MECHANISM,
                            mechanisms=list(self.broker.mechanisms))
        self.mechanism = request.mechanism
        self.scram = _Scram(request.mechanism, self.broker.users) if request.mechanism in HASHES else None
        return response(version=version, error_code=0, mechanisms=[request.mechanism])

    def _refuse(self, response: Any, version: int, user: str | None, server_error: bytes) -> Any:
        self.broker.failures.append(user or "")
        if self.broker.failure == "server_error" and server_error:
            return response(version=version, error_code=0, error_message=None, auth_bytes=server_error,
                            session_lifetime_ms=0)
        return response(version=version, error_code=SASL_AUTHENTICATION_FAILED,
                        error_message=f"Authentication failed during authentication due to invalid credentials "
                                      f"with SASL mechanism {self.mechanism}", auth_bytes=b"", session_lifetime_ms=0)

    def _accept(self, response: Any, version: int, user: str, auth_bytes: bytes) -> Any:
        self.authenticated = True
        self.broker.authenticated.append(user)
        return response(version=version, error_code=0, error_message=None, auth_bytes=auth_bytes,
                        session_lifetime_ms=0)

    def _api_36(self, request: Any, response: Any, version: int) -> Any:
        data = bytes(request.auth_bytes)
        if self.mechanism == "PLAIN":
            _, user, password = data.decode().split("\0")
            if self.broker.users.get(user) != password:
                return self._refuse(response, version, user, b"")
            return self._accept(response, version, user, b"")
        if self.scram is None:
            return None
        if self.scram.user is None:
            return response(version=version, error_code=0, error_message=None, auth_bytes=self.scram.first(data),
                            session_lifetime_ms=0)
        ok, final = self.scram.final(data)
        if not ok:
            return self._refuse(response, version, self.scram.user, final)
        return self._accept(response, version, self.scram.user, final)
