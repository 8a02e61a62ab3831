"""The kafka_* security settings: the protocols and SASL mechanisms statectl knows, and the rules the
settings must satisfy together (``check_security_settings``), one rule set for statectl.config (the
effective settings) and statectl.kafka.client.KafkaSecurity."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from statectl.errors import ConfigError

KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
KAFKA_SASL_KEYS = ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password")
KAFKA_SSL_FILE_KEYS = ("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile")
SASL_HINT = ("check kafka_sasl_mechanism, kafka_sasl_username and kafka_sasl_password (statectl.toml, or "
             "STATECTL_KAFKA_SASL_MECHANISM, STATECTL_KAFKA_SASL_USERNAME, STATECTL_KAFKA_SASL_PASSWORD)")


def check_security_settings(values: Mapping[str, Any], name: Callable[[str], str] = str) -> None:
    """Raise ConfigError (exit 2) for Kafka security settings that cannot work together: the one rule set of
    statectl.config (for the effective settings) and KafkaSecurity.

    ``values`` maps the kafka_* setting names to parsed values (missing = unset); ``name`` renders a setting
    name in a message (statectl.config adds where it came from). The rules: SASL protocols need a mechanism,
    a user name and a password, and the other protocols take none of them; the ssl settings need SSL or
    SASL_SSL; a key file or key password needs a certificate file; the named files exist. Never shows a
    secret.
    """
    protocol = values.get("kafka_security_protocol") or "PLAINTEXT"
    sasl = protocol.startswith("SASL_")
    tls = protocol in ("SSL", "SASL_SSL")
    given = [key for key in KAFKA_SASL_KEYS if values.get(key) not in (None, "")]
    env_hint = "set them in statectl.toml or as " + ", ".join("STATECTL_" + key.upper() for key in KAFKA_SASL_KEYS)
    if sasl and len(given) < len(KAFKA_SASL_KEYS):
        missing = [key for key in KAFKA_SASL_KEYS if key not in given]
        raise ConfigError(f"{name('kafka_security_protocol')} is {protocol}, which needs " + " and ".join(missing)
                          + (": it is not set" if len(missing) == 1 else ": they are not set"), hint=env_hint)
    if not sasl and given:
        raise ConfigError(f"{name(given[0])} is set, but {name('kafka_security_protocol')} is {protocol}: SASL "
                          f"settings need SASL_PLAINTEXT or SASL_SSL",
                          hint="set kafka_security_protocol (STATECTL_KAFKA_SECURITY_PROTOCOL), or unset the SASL "
                               "settings")
    ssl_given = [key for key in KAFKA_SSL_FILE_KEYS + ("kafka_ssl_password",) if values.get(key) not in (None, "")]
    if not tls and ssl_given:
        raise ConfigError(f"{name(ssl_given[0])} is set, but {name('kafka_security_protocol')} is {protocol}: TLS "
                          f"settings need SSL or SASL_SSL",
                          hint="set kafka_security_protocol (STATECTL_KAFKA_SECURITY_PROTOCOL), or unset the ssl "
                               "settings")
    if not values.get("kafka_ssl_certfile"):
        for key in ("kafka_ssl_keyfile", "kafka_ssl_password"):
            if values.get(key):
                raise ConfigError(f"{name(key)} is set, but there is no kafka_ssl_certfile: the key and its password "
                                  f"belong to a client certificate", hint="set kafka_ssl_certfile too")
    for key in KAFKA_SSL_FILE_KEYS:
        path = values.get(key)
        if path and not Path(path).is_file():
            what = "is a directory" if Path(path).is_dir() else "does not exist"
            raise ConfigError(f"{name(key)}: {path} {what}", hint="name a PEM file")
