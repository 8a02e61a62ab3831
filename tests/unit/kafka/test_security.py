"""KafkaSecurity (TLS and SASL for the Kafka clients) and how the clients report security failures.

The clients run against tests/unit/kafka/fakebroker.py, an in-process Kafka-protocol broker with real TLS
(certificates from conftest.py) and real PLAIN/SCRAM checks: Tansu cannot authenticate anyone (see
tests/integration/test_kafka_security.py). Failures cost the bootstrap timeout (1 s here) before they are
diagnosed; nothing here asserts on time.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from statectl import redact
from statectl.config import resolve
from statectl.errors import AuthError, ConfigError, StatectlError
from statectl.kafka.client import (
    KafkaSecurity,
    create_topic,
    open_admin,
    open_consumer,
    open_producer,
    partition_count,
)
from statectl.kafka.diagnose import diagnose
from tests.unit.kafka.conftest import KEY_PASSWORD, Pki
from tests.unit.kafka.fakebroker import FakeBroker

# A hang bound (kafka-python has had handshakes without a timeout), not a speed assertion.
pytestmark = pytest.mark.timeout(120)

USERS = {"alice": "Alice-pw-0123", "bob": "Bob-pw-4567"}
WRONG = "Wrong-pw-8901"
TIMEOUT = 1.0
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shown(e: pytest.ExceptionInfo) -> str:
    """Everything a user sees of an error: the message and the hint."""
    return f"{e.value}\n{e.value.hint or ''}"


def _no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, text


# -- the settings -> kafka-python arguments ----------------------------------------------------------------


def test_client_kwargs_per_protocol(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert KafkaSecurity().client_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert KafkaSecurity("SSL").client_kwargs() == {"security_protocol": "SSL", "ssl_check_hostname": True}
    assert KafkaSecurity("SSL", ssl_cafile=str(ca), ssl_check_hostname=False).client_kwargs() == {
        "security_protocol": "SSL", "ssl_check_hostname": False, "ssl_cafile": str(ca)}
    assert KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", "Alice-pw-0123").client_kwargs() == {
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
        "sasl_plain_password": "Alice-pw-0123"}


def test_client_kwargs_sasl_ssl_with_a_client_certificate(tmp_path: Path):
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    for path in files.values():
        path.write_text("x")
    security = KafkaSecurity("sasl_ssl", "scram-sha-512", "bob", "Bob-pw-4567", ssl_cafile=str(files["ca"]),
                             ssl_certfile=str(files["cert"]), ssl_keyfile=str(files["key"]), ssl_password="K3y-pass")
    assert (security.protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")  # normalised
    assert security.tls and security.sasl
    assert security.client_kwargs() == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
        "sasl_plain_password": "Bob-pw-4567", "ssl_check_hostname": True, "ssl_cafile": str(files["ca"]),
        "ssl_certfile": str(files["cert"]), "ssl_keyfile": str(files["key"]), "ssl_password": "K3y-pass"}


def test_repr_masks_the_passwords(tmp_path: Path):
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    security = KafkaSecurity("SASL_SSL", "PLAIN", "alice", "Alice-pw-0123", ssl_certfile=str(cert),
                             ssl_password="K3y-pass-repr")
    for text in (repr(security), str(security), f"{security!r}", repr([security])):
        _no_secret(text, "Alice-pw-0123", "K3y-pass-repr")
        assert "sasl_password='****'" in text and "ssl_password='****'" in text and "alice" in text
    assert "sasl_password=None" in repr(KafkaSecurity())


def test_construction_registers_the_passwords_for_masking():
    KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "Carol-only-in-a-library-message")
    assert redact.redact("broker said: bad password Carol-only-in-a-library-message") == \
        "broker said: bad password ****"


def test_from_settings(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "STATECTL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
           "STATECTL_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "STATECTL_KAFKA_SASL_USERNAME": "alice",
           "STATECTL_KAFKA_SASL_PASSWORD": "Alice-pw-0123", "STATECTL_KAFKA_SSL_CAFILE": str(ca),
           "STATECTL_KAFKA_SSL_CHECK_HOSTNAME": "false"}
    assert KafkaSecurity.from_settings(resolve({}, env=env)) == KafkaSecurity(
        "SASL_SSL", "SCRAM-SHA-256", "alice", "Alice-pw-0123", ssl_cafile=str(ca), ssl_check_hostname=False)
    assert KafkaSecurity.from_settings(resolve({}, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})) is None


@pytest.mark.parametrize("kwargs, message", [
    (dict(protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u"),
     "kafka_security_protocol is SASL_SSL, which needs kafka_sasl_password: it is not set"),
    (dict(protocol="SASL_PLAINTEXT"),
     "kafka_security_protocol is SASL_PLAINTEXT, which needs kafka_sasl_mechanism and kafka_sasl_username and "
     "kafka_sasl_password: they are not set"),
    (dict(protocol="SSL", sasl_password="Secret-pw-1"),
     "kafka_sasl_password is set, but kafka_security_protocol is SSL: SASL settings need SASL_PLAINTEXT or SASL_SSL"),
    (dict(sasl_mechanism="PLAIN"),
     "kafka_sasl_mechanism is set, but kafka_security_protocol is PLAINTEXT: SASL settings need SASL_PLAINTEXT or "
     "SASL_SSL"),
    (dict(protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", sasl_username="u", sasl_password="Secret-pw-1"),
     "Kafka security sasl_mechanism 'GSSAPI': expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    (dict(protocol="TLS"), "Kafka security protocol 'TLS': expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    (dict(protocol="SSL", ssl_password="Secret-pw-1"),
     "kafka_ssl_password is set, but there is no kafka_ssl_certfile: the key and its password belong to a client "
     "certificate"),
    (dict(protocol="SSL", ssl_cafile="/nonexistent/ca.pem"), "kafka_ssl_cafile: /nonexistent/ca.pem does not exist"),
    (dict(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="Secret pw"),
     "Kafka security sasl_password: invalid value: it contains whitespace; the value is not shown"),
])
def test_invalid_security_is_a_config_error(kwargs, message):
    with pytest.raises(ConfigError) as e:
        KafkaSecurity(**kwargs)
    assert str(e.value) == message
    assert e.value.exit_code == 2
    _no_secret(_shown(e), "Secret-pw-1", "Secret pw")


# -- loading the TLS files ---------------------------------------------------------------------------------


def test_ssl_context_loads_the_files(pki: Pki):
    ctx = KafkaSecurity("SSL", ssl_cafile=str(pki.ca), ssl_certfile=str(pki.client), ssl_keyfile=str(pki.client_key),
                        ssl_password=KEY_PASSWORD).ssl_context()
    assert ctx.check_hostname and ctx.minimum_version.name == "TLSv1_2"
    assert not KafkaSecurity("SSL", ssl_cafile=str(pki.ca), ssl_check_hostname=False).ssl_context().check_hostname


def test_ssl_context_errors(pki: Pki, tmp_path: Path):
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=rf"^kafka_ssl_cafile {not_pem}: no CA certificate could be loaded"):
        KafkaSecurity("SSL", ssl_cafile=str(not_pem)).ssl_context()
    # An encrypted key and no password: an error, never OpenSSL's prompt on the terminal.
    with pytest.raises(ConfigError) as e:
        KafkaSecurity("SSL", ssl_certfile=str(pki.client), ssl_keyfile=str(pki.client_key)).ssl_context()
    assert str(e.value) == f"the private key in {pki.client_key} is encrypted, and no kafka_ssl_password is set"
    with pytest.raises(AuthError) as e:
        KafkaSecurity("SSL", ssl_certfile=str(pki.client), ssl_keyfile=str(pki.client_key),
                      ssl_password="Wrong-key-pass").ssl_context()
    assert e.value.exit_code == 12
    assert str(e.value).startswith(f"kafka_ssl_password does not decrypt the private key in {pki.client_key}")
    _no_secret(_shown(e), "Wrong-key-pass", KEY_PASSWORD)
    with pytest.raises(ConfigError, match="cannot load the client certificate and its key"):  # not this key's cert
        KafkaSecurity("SSL", ssl_certfile=str(pki.server), ssl_keyfile=str(pki.client_key),
                      ssl_password=KEY_PASSWORD).ssl_context()


def test_a_bad_tls_file_fails_before_any_connection(tmp_path: Path):
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("x")
    bootstrap = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(ConfigError, match="kafka_ssl_cafile"):
        open_consumer(bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity("SSL", ssl_cafile=str(not_pem)))


# -- SASL against the fake broker --------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_sasl_right_password_works(mechanism):
    with FakeBroker(sasl=True, users=USERS) as broker:
        security = KafkaSecurity("SASL_PLAINTEXT", mechanism, "alice", USERS["alice"])
        for opener in (open_consumer, open_producer, open_admin):
            opener(broker.bootstrap, timeout_s=TIMEOUT, security=security).close()
        assert broker.authenticated and set(broker.authenticated) == {"alice"}
        assert broker.failures == [] and broker.errors == []


@pytest.mark.parametrize("failure", ["error_code", "server_error"])
@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_sasl_wrong_password_is_an_auth_error(mechanism, failure):
    """``error_code``: Apache Kafka's way; ``server_error``: Tansu's (RFC 5802 ``e=``, error code 0)."""
    with FakeBroker(sasl=True, users=USERS, failure=failure) as broker:
        with pytest.raises(AuthError) as e:
            open_consumer(broker.bootstrap, timeout_s=TIMEOUT,
                          security=KafkaSecurity("SASL_PLAINTEXT", mechanism, "alice", WRONG))
        assert e.value.exit_code == 12
        assert str(e.value).startswith(f"Kafka brokers {broker.bootstrap}: SASL {mechanism} authentication as alice "
                                       f"failed")
        if failure == "server_error" and mechanism != "PLAIN":
            assert str(e.value).endswith("(the broker said: invalid-proof)")
        assert "kafka_sasl_password" in e.value.hint and "\n" not in str(e.value)
        _no_secret(_shown(e), WRONG, USERS["alice"])
        assert broker.authenticated == [] and broker.errors == []


def test_unknown_sasl_user_is_an_auth_error():
    with FakeBroker(sasl=True, users=USERS, failure="server_error") as broker:
        with pytest.raises(AuthError, match=r"authentication as mallory failed \(the broker said: unknown-user\)$"):
            open_producer(broker.bootstrap, timeout_s=TIMEOUT,
                          security=KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "mallory", WRONG))


def test_a_mechanism_the_brokers_do_not_offer_is_an_auth_error():
    with FakeBroker(sasl=True, users=USERS, mechanisms=("PLAIN", "SCRAM-SHA-256")) as broker:
        with pytest.raises(AuthError) as e:
            open_admin(broker.bootstrap, timeout_s=TIMEOUT,
                       security=KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", USERS["alice"]))
    assert str(e.value) == (f"Kafka brokers {broker.bootstrap}: the brokers do not offer SASL mechanism SCRAM-SHA-512 "
                            f"(they offer: PLAIN, SCRAM-SHA-256)")


def test_unreachable_brokers_with_security_are_still_unreachable():
    bootstrap = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(StatectlError) as e:
        open_consumer(bootstrap, timeout_s=TIMEOUT,
                      security=KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", USERS["alice"]))
    assert type(e.value) is StatectlError and e.value.exit_code == 1
    assert str(e.value).startswith(f"cannot reach Kafka brokers {bootstrap}: ")
    assert diagnose(bootstrap, KafkaSecurity("SSL"), TIMEOUT) is None
    assert diagnose(bootstrap, None, TIMEOUT) is None


def test_diagnose_tries_the_next_broker_when_one_is_down():
    with FakeBroker(sasl=True, users=USERS) as broker:
        bootstrap = f"127.0.0.1:{_closed_port()},{broker.bootstrap}"
        problem = diagnose(bootstrap, KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "bob", WRONG), TIMEOUT)
        assert isinstance(problem, AuthError) and str(problem).startswith(f"Kafka brokers {bootstrap}: SASL PLAIN")
        assert diagnose(bootstrap, KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "bob", USERS["bob"]), TIMEOUT) is None


# -- TLS against the fake broker ---------------------------------------------------------------------------


def test_tls_with_the_right_ca_works(pki: Pki):
    with FakeBroker(ssl_context=pki.server_context()) as broker:
        security = KafkaSecurity("SSL", ssl_cafile=str(pki.ca))
        for opener in (open_consumer, open_producer, open_admin):
            opener(broker.bootstrap, timeout_s=TIMEOUT, security=security).close()
        assert broker.errors == []


def test_tls_with_another_ca_is_an_auth_error(pki: Pki):
    with FakeBroker(ssl_context=pki.server_context()) as broker:
        with pytest.raises(AuthError) as e:
            open_consumer(broker.bootstrap, timeout_s=TIMEOUT,
                          security=KafkaSecurity("SSL", ssl_cafile=str(pki.other_ca)))
    assert e.value.exit_code == 12
    assert str(e.value).startswith(f"Kafka brokers {broker.bootstrap}: the TLS handshake with {broker.bootstrap} "
                                   f"failed: ")
    assert "kafka_ssl_cafile" in e.value.hint


def test_tls_hostname_mismatch(pki: Pki):
    with FakeBroker(ssl_context=pki.server_context(misnamed=True)) as broker:
        with pytest.raises(AuthError) as e:
            open_consumer(broker.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity("SSL", ssl_cafile=str(pki.ca)))
        assert "mismatch" in str(e.value) and "kafka_ssl_check_hostname" in e.value.hint
        # The certificate is still verified against the CA; only the name is not checked.
        open_consumer(broker.bootstrap, timeout_s=TIMEOUT,
                      security=KafkaSecurity("SSL", ssl_cafile=str(pki.ca), ssl_check_hostname=False)).close()


def test_tls_to_a_plaintext_listener_is_an_auth_error(pki: Pki):
    with FakeBroker() as broker:
        with pytest.raises(AuthError) as e:
            open_consumer(broker.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity("SSL", ssl_cafile=str(pki.ca)))
    assert f"the TLS handshake with {broker.bootstrap} failed" in str(e.value)
    assert "TLS listener" in e.value.hint


def test_mutual_tls(pki: Pki):
    with FakeBroker(ssl_context=pki.server_context(require_client_cert=True)) as broker:
        with pytest.raises(AuthError) as e:
            open_consumer(broker.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity("SSL", ssl_cafile=str(pki.ca)))
        assert "the TLS handshake" in str(e.value) and "kafka_ssl_certfile" in e.value.hint
        open_consumer(broker.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity(
            "SSL", ssl_cafile=str(pki.ca), ssl_certfile=str(pki.client), ssl_keyfile=str(pki.client_key),
            ssl_password=KEY_PASSWORD)).close()
        assert broker.errors == []


def test_sasl_over_tls(pki: Pki):
    with FakeBroker(ssl_context=pki.server_context(), sasl=True, users=USERS) as broker:
        open_consumer(broker.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity(
            "SASL_SSL", "SCRAM-SHA-512", "bob", USERS["bob"], ssl_cafile=str(pki.ca))).close()
        assert broker.authenticated and set(broker.authenticated) == {"bob"}
        with pytest.raises(AuthError, match="SASL SCRAM-SHA-512 authentication as bob failed"):
            open_consumer(broker.bootstrap, timeout_s=TIMEOUT, security=KafkaSecurity(
                "SASL_SSL", "SCRAM-SHA-512", "bob", WRONG, ssl_cafile=str(pki.ca)))


# -- refusals after the connection: ACLs -------------------------------------------------------------------


class _Refusing:
    """A consumer whose brokers' ACLs refuse everything."""

    def topics(self):
        import kafka.errors

        raise kafka.errors.TopicAuthorizationFailedError("not allowed")


def test_an_acl_refusal_is_an_auth_error():
    with pytest.raises(AuthError) as e:
        partition_count(_Refusing(), "t", "b:9092")
    assert e.value.exit_code == 12 and str(e.value).startswith("kafka b:9092: not authorized: ")
    assert "ACLs" in e.value.hint


def test_create_topic_passes_the_security_on(monkeypatch):
    seen = {}

    class Admin:
        def create_topics(self, topics):
            import kafka.errors

            raise kafka.errors.ClusterAuthorizationFailedError("no")

        def close(self):
            seen["closed"] = True

    def fake_open_admin(bootstrap, *, timeout_s, security):
        seen["security"] = security
        return Admin()

    monkeypatch.setattr("statectl.kafka.client.open_admin", fake_open_admin)
    security = KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", USERS["alice"])
    with pytest.raises(AuthError, match="not authorized"):
        create_topic("b:9092", "t", security=security)
    assert seen == {"security": security, "closed": True}


def test_every_kafka_failure_names_the_sasl_user_of_the_client_that_failed():
    """kafka_failure (the one conversion of kafka-python's errors): an ACL refusal or a rejected login on a
    client statectl opened with SASL names its user; other failures say what was being done, or that the
    brokers cannot be reached."""
    from kafka import errors as ke

    from statectl.errors import AuthError
    from statectl.kafka.client import STATECTL_SECURITY, kafka_failure

    class Client:  # what _open returns, as far as kafka_failure looks: the security it was opened with
        pass

    client = Client()
    setattr(client, STATECTL_SECURITY, KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", "Alice-pw-0123"))
    acl = kafka_failure("b:9092", ke.TopicAuthorizationFailedError(), "writing to t", client=client)
    assert isinstance(acl, AuthError) and "of alice" in acl.hint
    login = kafka_failure("b:9092", ke.SaslAuthenticationFailedError("bad"), "reading t[0]", client=client)
    assert isinstance(login, AuthError) and "as alice" in str(login)
    other = kafka_failure("b:9092", ke.KafkaError("boom"), "reading t[0] at offset 5", client=client)
    assert not isinstance(other, AuthError) and str(other) == "kafka b:9092: reading t[0] at offset 5 failed: KafkaError: boom"
    far = kafka_failure("b:9092", ke.KafkaTimeoutError("late"), "listing offsets of t", reach=True)
    assert "cannot reach Kafka brokers b:9092: listing offsets of t" in str(far)
    assert "Alice-pw-0123" not in str(acl) + str(login) + acl.hint + login.hint
