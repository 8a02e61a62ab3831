"""Why Kafka clients with TLS or SASL settings cannot connect: ``diagnose`` repeats the handshakes by hand.

kafka-python (3.x) keeps retrying a bootstrap whose TLS handshake or SASL authentication fails (a wrong
password included: the failure stays inside its connection) until ``bootstrap_timeout_ms``, and then reports
only "Unable to bootstrap". So when that happens with TLS or SASL configured, statectl.kafka.client asks
:func:`diagnose` to repeat the handshakes once with the first broker that accepts a TCP connection, to tell
a security failure (AuthError, with the broker's reason) from brokers that are simply not there. With TLS,
that broker's TLS handshake is also checked once before each client opens: kafka-python does not bound a
handshake that gets no answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from statectl.errors import AuthError
from statectl.kafka.client import (
    CLIENT_ID,
    DEFAULT_TIMEOUT_S,
    bootstrap_servers,
    kafka_errors,
    kafka_message,
    ssl_reason,
)
from statectl.kafka.settings import SASL_HINT

if TYPE_CHECKING:
    from statectl.kafka.client import KafkaSecurity

DEFAULT_PORT = 9092  # kafka-python's, for a bootstrap server given without one


def _host_port(server: str) -> tuple[str, int]:
    if server.startswith("["):  # [IPv6]:PORT
        host, _, rest = server[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif server.count(":") == 1:
        host, port = server.split(":")
    else:  # a name without a port, or a bare IPv6 address
        host, port = server, ""
    return host, int(port) if port.isdigit() else DEFAULT_PORT


def diagnose(bootstrap: str, security: KafkaSecurity | None, timeout_s: float = DEFAULT_TIMEOUT_S, *,
             tls_only: bool = False) -> AuthError | None:
    """The AuthError that explains why clients with ``security`` cannot connect, or None when security is not
    the cause. Run after a bootstrap that failed (and with ``tls_only`` before each client opens, see _open).

    Connects to the first broker of ``bootstrap`` that accepts a TCP connection within ``timeout_s``, repeats
    the TLS handshake (with the same context as the clients) and, unless ``tls_only``, the SASL handshake and
    authentication (or, with TLS alone, one request: TLS 1.3 reports a missing client certificate only at the
    first read), and closes. None when no broker accepts a connection (they are unreachable: not for this
    function to say), when all passes, or when there is nothing to check (``security`` None or PLAINTEXT).
    Never raises for network errors; ConfigError/AuthError of :meth:`KafkaSecurity.ssl_context` pass through.
    """
    import socket
    import ssl

    if security is None or not (security.tls or security.sasl) or (tls_only and not security.tls):
        return None
    for server in bootstrap_servers(bootstrap):
        host, port = _host_port(server)
        try:
            sock: Any = socket.create_connection((host, port), timeout=timeout_s)
        except OSError:
            continue
        try:
            if security.tls:
                context = security.ssl_context()
                try:
                    sock = context.wrap_socket(sock, server_hostname=host.rstrip("."))
                except TimeoutError:
                    return _tls_failed(bootstrap, server, f"no TLS answer within {timeout_s:g}s",
                                       "is that a TLS listener? check kafka_security_protocol and the port")
                except ssl.SSLCertVerificationError as e:
                    hint = ("connect by a name the certificate holds, or set kafka_ssl_check_hostname = false"
                            if "mismatch" in ssl_reason(e).lower() else
                            "check kafka_ssl_cafile: it must hold the CA that signed the brokers' certificates")
                    return _tls_failed(bootstrap, server, ssl_reason(e), hint)
                except (ssl.SSLError, OSError) as e:
                    return _tls_failed(bootstrap, server, ssl_reason(e),
                                       "is that a TLS listener? check kafka_security_protocol, the port and, with "
                                       "a client certificate, kafka_ssl_certfile")
                if tls_only:
                    return None
            call = _caller(sock, timeout_s)
            try:
                reason = _sasl_probe(call, security, timeout_s) if security.sasl else _answers(call)
            except ssl.SSLError as e:  # e.g. a TLS 1.3 alert after the handshake: no client certificate
                return _tls_failed(bootstrap, server, ssl_reason(e),
                                   "if the brokers require a client certificate, check kafka_ssl_certfile and "
                                   "kafka_ssl_keyfile")
            if reason is not None:
                return AuthError(f"Kafka brokers {bootstrap}: {reason}", hint=SASL_HINT)
            return None
        finally:
            sock.close()
    return None


def _tls_failed(bootstrap: str, server: str, reason: str, hint: str) -> AuthError:
    return AuthError(f"Kafka brokers {bootstrap}: the TLS handshake with {server} failed: {reason}", hint=hint)


def _caller(sock: Any, timeout_s: float) -> Callable[[Any], Any]:
    """``call(request) -> response`` over a connected socket, one request at a time (kafka-python's
    sans-I/O protocol). Raises ConnectionError when the broker closes the connection, OSError/timeouts as
    the socket does, KafkaError for an answer that does not decode."""
    from kafka.protocol.parser import KafkaProtocol

    protocol = KafkaProtocol(client_id=CLIENT_ID)
    sock.settimeout(timeout_s)

    def call(request: Any) -> Any:
        protocol.send_request(request)
        sock.sendall(protocol.send_bytes())
        while True:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            responses = protocol.receive_bytes(data)
            if responses:
                return responses[0][1]

    return call


def _answers(call: Callable[[Any], Any]) -> None:
    """Ask for the API versions, so that an error the TLS layer keeps until the first read (TLS 1.3 reports
    a missing client certificate only then) raises ssl.SSLError here. Anything else: no diagnosis (None)."""
    import ssl

    from kafka.protocol.metadata import ApiVersionsRequest

    try:
        call(ApiVersionsRequest(version=0))
    except ssl.SSLError:
        raise
    except (TimeoutError, OSError, kafka_errors().KafkaError):
        pass
    return None


def _sasl_probe(call: Callable[[Any], Any], security: KafkaSecurity, timeout_s: float) -> str | None:
    """One SASL handshake and authentication: why it fails, or None if it passes. ssl.SSLError passes
    through."""
    import ssl

    try:
        from kafka.net.sasl import get_sasl_mechanism
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    except ImportError:  # another kafka-python layout: no diagnosis rather than a wrong one
        return None
    errors = kafka_errors()
    mechanism, user = security.sasl_mechanism, security.sasl_username
    stage = f"at the SASL handshake for {mechanism}"
    try:
        handshake = call(SaslHandshakeRequest(version=1, mechanism=mechanism))
        if handshake.error_code:
            error = errors.for_code(handshake.error_code)
            if error is getattr(errors, "UnsupportedSaslMechanismError", None):
                offered = ", ".join(handshake.mechanisms or []) or "none"
                return f"the brokers do not offer SASL mechanism {mechanism} (they offer: {offered})"
            return f"the SASL handshake for {mechanism} failed: {error.__name__}"
        stage = f"during SASL {mechanism} authentication as {user}"
        client = get_sasl_mechanism(mechanism)(**security.client_kwargs())
        last = b""
        while not client.is_done():
            response = call(SaslAuthenticateRequest(version=1, auth_bytes=client.auth_bytes()))
            if response.error_code:
                message = response.error_message or errors.for_code(response.error_code).__name__
                return f"SASL {mechanism} authentication as {user} failed: {message}"
            last = bytes(response.auth_bytes or b"")
            try:
                client.receive(last)
            except Exception:  # the mechanism could not make sense of the broker's answer: a refusal
                return f"SASL {mechanism} authentication as {user} failed{_server_said(last)}"
        if not client.is_authenticated():
            return f"SASL {mechanism} authentication as {user} failed{_server_said(last)}"
        return None
    except ssl.SSLError:
        raise
    except TimeoutError:
        return f"no answer {stage} within {timeout_s:g}s (is that a SASL listener?)"
    except OSError:  # ConnectionError included
        return f"the broker closed the connection {stage} (does its listener offer SASL {mechanism}?)"
    except errors.KafkaError as e:
        return f"unexpected answer {stage}: {kafka_message(e)}"


def _server_said(auth_bytes: bytes) -> str:
    """`` (the broker said: unknown-user)`` for an RFC 5802 server error (``e=...``), else ``""``."""
    text = auth_bytes.decode("utf-8", "replace")
    for attribute in text.split(","):
        if attribute.startswith("e=") and attribute[2:].isprintable():
            return f" (the broker said: {attribute[2:][:200]})"
    return ""
