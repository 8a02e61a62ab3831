"""Where a job's Kafka system is: the brokers and the TLS/SASL settings its consumers use, from the job's
config, as Samza's KafkaConsumerConfig.getKafkaSystemConsumerConfig builds a system's consumer.

A system's consumer takes every ``systems.<system>.consumer.*`` key as a Kafka client setting. Its brokers
are ``systems.<system>.consumer.bootstrap.servers``, else ``systems.<system>.producer.bootstrap.servers``
(Samza's fallback), else ``systems.<system>.bootstrap.servers``; none of them: the system is on the brokers
statectl was given (``--kafka``). A changelog or side input on another cluster is read there, with the
security that system's consumer settings give (``security.protocol``, ``sasl.mechanism``, the user name and
password of ``sasl.jaas.config``, PEM ``ssl.truststore``/``ssl.keystore`` files, ``ssl.key.password``,
``ssl.endpoint.identification.algorithm``); on the ``--kafka`` brokers, statectl's own settings hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from statectl.errors import ConfigError
from statectl.kafka.client import KafkaSecurity


@dataclass(frozen=True)
class SystemBrokers:
    """The brokers of a system and the security to reach them with (None: PLAINTEXT); ``key``: the config
    key that named them (None: the ``--kafka`` brokers, none being configured)."""

    bootstrap: str
    security: KafkaSecurity | None
    key: str | None = None

    @property
    def elsewhere(self) -> bool:
        """Whether the system is on other brokers than ``--kafka``."""
        return self.key is not None


def system_bootstrap_key(config: Mapping[str, str], system: str) -> str | None:
    """The config key naming ``system``'s brokers (see the module doc), or None."""
    for key in (f"systems.{system}.consumer.bootstrap.servers", f"systems.{system}.producer.bootstrap.servers",
                f"systems.{system}.bootstrap.servers"):
        if (config.get(key) or "").strip():
            return key
    return None


def _servers(bootstrap: str) -> set[str]:
    return {s.strip().lower() for s in bootstrap.split(",") if s.strip()}


def system_brokers(config: Mapping[str, str], system: str, bootstrap: str,
                   security: KafkaSecurity | None) -> SystemBrokers:
    """Where ``system`` of a job with ``config`` is read: ``bootstrap`` with ``security`` when its config names
    no brokers or names these; else the configured brokers with the security of the system's consumer
    settings. Raises ConfigError (exit 2, naming the key) for consumer security settings statectl cannot use
    (a JKS or PKCS12 store, a SASL mechanism kafka-python lacks, a JAAS config without user and password)."""
    key = system_bootstrap_key(config, system)
    if key is None or _servers(config[key]) == _servers(bootstrap):
        return SystemBrokers(bootstrap, security)
    return SystemBrokers(config[key].strip(), consumer_security(config, system), key)


def consumer_security(config: Mapping[str, str], system: str) -> KafkaSecurity | None:
    """The security of ``system``'s consumer settings (None: PLAINTEXT, Kafka's default)."""
    prefix = f"systems.{system}.consumer."
    props = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol == "PLAINTEXT":
        return None
    kwargs: dict = {"protocol": protocol}
    if protocol.startswith("SASL_"):
        kwargs["sasl_mechanism"] = (props.get("sasl.mechanism") or "GSSAPI").strip()
        kwargs["sasl_username"], kwargs["sasl_password"] = _jaas_credentials(props.get("sasl.jaas.config"),
                                                                             prefix + "sasl.jaas.config")
    if protocol in ("SSL", "SASL_SSL"):
        kwargs["ssl_cafile"] = _pem(props, prefix, "truststore")
        kwargs["ssl_certfile"] = _pem(props, prefix, "keystore")
        kwargs["ssl_password"] = props.get("ssl.key.password") if kwargs["ssl_certfile"] else None
        # An empty endpoint identification algorithm turns hostname verification off (Kafka's client).
        kwargs["ssl_check_hostname"] = (props.get("ssl.endpoint.identification.algorithm", "https") or "") != ""
    try:
        return KafkaSecurity(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"the consumer settings of system {system} ({prefix}*): {e}",
                          hint="statectl reads PEM stores and the PLAIN or SCRAM mechanisms") from None


def _pem(props: Mapping[str, str], prefix: str, store: str) -> str | None:
    location = (props.get(f"ssl.{store}.location") or "").strip() or None
    kind = (props.get(f"ssl.{store}.type") or "JKS").strip().upper()
    if location is not None and kind != "PEM":
        raise ConfigError(f"{prefix}ssl.{store}.location is a {kind} store: statectl reads PEM files only",
                          hint=f"give the system a PEM {store} ({prefix}ssl.{store}.type=PEM)")
    return location


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas_credentials(jaas: str | None, key: str) -> tuple[str, str]:
    """``username`` and ``password`` of a PlainLoginModule or ScramLoginModule JAAS config."""
    options = {name: value.replace('\\"', '"') for name, value in _JAAS_OPTION.findall(jaas or "")}
    if "username" not in options or "password" not in options:
        raise ConfigError(f"{key} gives no username and password", hint="statectl logs in with PLAIN or SCRAM")
    return options["username"], options["password"]
