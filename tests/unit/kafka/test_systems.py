"""kafka.systems: where a job's Kafka system is, from its config (KafkaConsumerConfig's rules); the reading
itself is covered against two Tansu brokers (test_adstore_samza, test_changelog_restore)."""

from __future__ import annotations

import pytest

from statectl.errors import ConfigError
from statectl.kafka.client import KafkaSecurity
from statectl.kafka.systems import consumer_security, system_bootstrap_key, system_brokers

OURS = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="pw-ours")


@pytest.mark.parametrize("config, key", [
    ({}, None),
    ({"systems.s.bootstrap.servers": "c:1"}, "systems.s.bootstrap.servers"),
    ({"systems.s.producer.bootstrap.servers": "b:1", "systems.s.bootstrap.servers": "c:1"},
     "systems.s.producer.bootstrap.servers"),
    ({"systems.s.consumer.bootstrap.servers": "a:1", "systems.s.producer.bootstrap.servers": "b:1"},
     "systems.s.consumer.bootstrap.servers"),
    ({"systems.s.consumer.bootstrap.servers": " ", "systems.s.producer.bootstrap.servers": "b:1"},
     "systems.s.producer.bootstrap.servers"),
    ({"systems.t.consumer.bootstrap.servers": "a:1"}, None),
])
def test_the_consumers_brokers_then_the_producers(config, key):
    assert system_bootstrap_key(config, "s") == key


def test_the_kafka_brokers_keep_statectls_own_security():
    assert system_brokers({}, "s", "k:9092", OURS) == system_brokers({}, "s", "k:9092", OURS)
    same = system_brokers({"systems.s.consumer.bootstrap.servers": "K:9092 "}, "s", "k:9092", OURS)
    assert (same.bootstrap, same.security, same.elsewhere) == ("k:9092", OURS, False)
    other = system_brokers({"systems.s.consumer.bootstrap.servers": "east:9092"}, "s", "k:9092", OURS)
    assert (other.bootstrap, other.security, other.elsewhere) == ("east:9092", None, True)


def test_sasl_and_tls_from_the_systems_consumer_settings(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    p = "systems.s.consumer."
    sec = consumer_security({
        p + "security.protocol": "sasl_ssl", p + "sasl.mechanism": "SCRAM-SHA-512",
        p + "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                'username="east" password="p\\"w";',
        p + "ssl.truststore.type": "PEM", p + "ssl.truststore.location": str(ca),
        p + "ssl.endpoint.identification.algorithm": ""}, "s")
    assert (sec.protocol, sec.sasl_mechanism, sec.sasl_username, sec.sasl_password) == (
        "SASL_SSL", "SCRAM-SHA-512", "east", 'p"w')
    assert (sec.ssl_cafile, sec.ssl_certfile, sec.ssl_check_hostname) == (str(ca), None, False)
    assert 'p"w' not in repr(sec)
    assert consumer_security({"systems.s.producer.security.protocol": "SSL"}, "s") is None  # the consumer's only


@pytest.mark.parametrize("settings, message", [
    ({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks"}, "ssl.truststore.location is a JKS store"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": 'x required username="u";'},
     "sasl.jaas.config gives no username and password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": 'x required username="u" password="p";'},
     "sasl_mechanism 'GSSAPI'"),
    ({"security.protocol": "TLS"}, "protocol 'TLS'"),
])
def test_settings_statectl_cannot_use_are_config_errors(settings, message):
    with pytest.raises(ConfigError, match=message) as e:
        consumer_security({f"systems.s.consumer.{k}": v for k, v in settings.items()}, "s")
    assert "systems.s.consumer." in str(e.value)
