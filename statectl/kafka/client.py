"""kafka-python clients with statectl's settings, errors mapped to statectl.errors, and reading a partition to
its end.

- Brokers that cannot be reached within ``timeout_s`` raise a StatectlError naming them (exit 1).
- Credentials or certificates the brokers reject, a TLS handshake that fails and a SASL mechanism the brokers
  do not offer raise AuthError naming the brokers, never a password (exit 12). Settings that cannot work
  (files missing, a SASL protocol without a password...) raise ConfigError before any connection (exit 2).
- A topic or partition that does not exist raises NotFoundError naming it (exit 10). Existence is checked
  through metadata before any offset request: some brokers (Tansu) create a topic on a ListOffsets request.
- kafka-python missing raises MissingDependencyError (exit 13).

Consumers never join a group (``group_id=None``): partitions are assigned and positions kept here.

When a bootstrap with TLS or SASL configured fails, statectl.kafka.diagnose repeats the handshakes by hand
to tell a security failure (AuthError, with the broker's reason) from brokers that are not there; a
rejected password therefore costs ``timeout_s`` before it is reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator

from statectl.errors import AuthError, ConfigError, MissingDependencyError, NotFoundError, StatectlError
from statectl.kafka.settings import (
    KAFKA_SASL_MECHANISMS,
    KAFKA_SECURITY_PROTOCOLS,
    SASL_HINT,
    check_security_settings,
)

DEFAULT_TIMEOUT_S = 5.0
# An empty poll this long, at or past the reported end, means the end (see PartitionReader).
EMPTY_POLL_MS = 300
# Fail a read that makes no progress for this long while short of the reported end.
STALL_TIMEOUT_S = 60.0
MAX_POLL_RECORDS = 10_000
# How statectl's consumers fetch: big responses (a changelog replay reads whole partitions) and a short wait
# at the end. The benchmarks' raw consumers fetch the same way.
FETCH_SETTINGS = {"fetch_max_wait_ms": 100, "max_partition_fetch_bytes": 8 * 1024 * 1024,
                  "fetch_max_bytes": 64 * 1024 * 1024, "max_poll_records": MAX_POLL_RECORDS}
CLIENT_ID = "statectl"


def kafka_module() -> Any:
    """The ``kafka`` package (kafka-python); MissingDependencyError when it is not installed."""
    try:
        import kafka
    except ImportError as e:
        raise MissingDependencyError("kafka-python is not installed; it is needed for --kafka",
                                     hint="pip install kafka-python") from e
    return kafka


def kafka_errors() -> Any:
    kafka_module()
    import kafka.errors

    return kafka.errors


def bootstrap_servers(bootstrap: str) -> list[str]:
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers:
        from statectl.errors import UsageError

        raise UsageError("no Kafka brokers given", hint="pass --kafka HOST:PORT[,HOST:PORT...]")
    return servers


# -- security ------------------------------------------------------------------------------------------


class _NoKeyPassword(Exception):
    """OpenSSL asked for the password of an encrypted private key, and none is configured."""


@dataclass(frozen=True, repr=False)
class KafkaSecurity:
    """How statectl secures its Kafka connections: TLS (``SSL``), SASL (``SASL_PLAINTEXT``) or both
    (``SASL_SSL``); ``PLAINTEXT`` is neither.

    Build it with :meth:`from_settings` from the kafka_* settings, or directly. Construction normalises the
    protocol and mechanism names, checks the combination with the same rules as the config
    (check_security_settings: ConfigError, exit 2, e.g. a SASL protocol without a password, a key file
    that does not exist) and registers both passwords with statectl.redact, so they are masked in any
    output from then on. ``repr()`` masks them too.
    """

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_check_hostname: bool = True

    _SECRETS = ("sasl_password", "ssl_password")

    def __post_init__(self) -> None:
        from statectl import redact

        for name, options in (("protocol", KAFKA_SECURITY_PROTOCOLS), ("sasl_mechanism", KAFKA_SASL_MECHANISMS)):
            value = getattr(self, name)
            if value is None and name == "sasl_mechanism":
                continue
            normal = value.strip().upper() if isinstance(value, str) else value
            if normal not in options:
                raise ConfigError(f"Kafka security {name} {value!r}: expected " + ", ".join(options[:-1])
                                  + " or " + options[-1])
            object.__setattr__(self, name, normal)
        for name in self._SECRETS:
            value = getattr(self, name)
            if value is not None:
                try:
                    if not isinstance(value, str):
                        raise ValueError("expected a string")
                    redact.check_secret(value)
                except ValueError as e:
                    raise ConfigError(f"Kafka security {name}: invalid value: {e}; the value is not shown") from None
        redact.add_secrets(getattr(self, name) for name in self._SECRETS)
        check_security_settings(self._settings())

    @classmethod
    def from_settings(cls, settings: Any) -> KafkaSecurity | None:
        """The security the resolved settings (statectl.config.Settings, or anything with the kafka_* setting
        attributes) ask for; None for PLAINTEXT, which needs nothing. Raises ConfigError as the constructor."""
        security = cls(protocol=settings.kafka_security_protocol or "PLAINTEXT",
                       sasl_mechanism=settings.kafka_sasl_mechanism, sasl_username=settings.kafka_sasl_username,
                       sasl_password=settings.kafka_sasl_password, ssl_cafile=settings.kafka_ssl_cafile,
                       ssl_certfile=settings.kafka_ssl_certfile, ssl_keyfile=settings.kafka_ssl_keyfile,
                       ssl_password=settings.kafka_ssl_password,
                       ssl_check_hostname=True if settings.kafka_ssl_check_hostname is None
                       else bool(settings.kafka_ssl_check_hostname))
        return None if security.protocol == "PLAINTEXT" else security

    def _settings(self) -> dict[str, Any]:
        return {"kafka_security_protocol": self.protocol, "kafka_sasl_mechanism": self.sasl_mechanism,
                "kafka_sasl_username": self.sasl_username, "kafka_sasl_password": self.sasl_password,
                "kafka_ssl_cafile": self.ssl_cafile, "kafka_ssl_certfile": self.ssl_certfile,
                "kafka_ssl_keyfile": self.ssl_keyfile, "kafka_ssl_password": self.ssl_password}

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def client_kwargs(self) -> dict[str, Any]:
        """The kafka-python keyword arguments (KafkaConsumer, KafkaProducer, KafkaAdminClient) for this
        security: ``security_protocol`` always, the ``sasl_*`` ones with SASL, the ``ssl_*`` ones with TLS
        (the files and key password only when set)."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            kwargs.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.sasl_username,
                          sasl_plain_password=self.sasl_password)
        if self.tls:
            kwargs["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
                if getattr(self, name) is not None:
                    kwargs[name] = getattr(self, name)
        return kwargs

    def ssl_context(self) -> Any:
        """An ``ssl.SSLContext`` for the brokers, made as kafka-python makes it from :meth:`client_kwargs` (TLS
        1.2 or later, the CA file or else the system's CAs, the client certificate), with the files loaded now.

        The clients get this context rather than loading the files themselves in their I/O thread, where a
        bad file only shows as a bootstrap timeout and OpenSSL would prompt on the terminal for the password
        of an encrypted key. Raises ConfigError (exit 2) for a CA or certificate file that cannot be loaded or
        an encrypted key without kafka_ssl_password, AuthError (exit 12) when kafka_ssl_password does not
        decrypt the key.
        """
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_cafile:
            try:
                ctx.load_verify_locations(self.ssl_cafile)
            except (ssl.SSLError, OSError) as e:
                raise ConfigError(f"kafka_ssl_cafile {self.ssl_cafile}: no CA certificate could be loaded from it "
                                  f"({ssl_reason(e)})",
                                  hint="it must hold PEM certificates (-----BEGIN CERTIFICATE-----)") from None
        else:
            ctx.load_default_certs()
        if self.ssl_certfile:
            asked = []

            def password() -> str:
                asked.append(True)
                if self.ssl_password is None:
                    raise _NoKeyPassword
                return self.ssl_password

            key = self.ssl_keyfile or self.ssl_certfile
            try:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, password)
            except _NoKeyPassword:
                raise ConfigError(f"the private key in {key} is encrypted, and no kafka_ssl_password is set",
                                  hint="set STATECTL_KAFKA_SSL_PASSWORD (or kafka_ssl_password in statectl.toml)"
                                  ) from None
            except (ssl.SSLError, OSError) as e:
                if asked and getattr(e, "reason", None) is None:
                    raise AuthError(f"kafka_ssl_password does not decrypt the private key in {key} "
                                    f"({ssl_reason(e)})",
                                    hint="check kafka_ssl_password (or STATECTL_KAFKA_SSL_PASSWORD)") from None
                files = f"kafka_ssl_certfile {self.ssl_certfile}" + (
                    f" and kafka_ssl_keyfile {self.ssl_keyfile}" if self.ssl_keyfile else "")
                raise ConfigError(f"{files}: cannot load the client certificate and its key ({ssl_reason(e)})",
                                  hint="PEM files; the key must be the certificate's (or in the certificate "
                                       "file when kafka_ssl_keyfile is not set)") from None
        return ctx

    def __repr__(self) -> str:
        from statectl.redact import MASK

        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            parts.append(f"{f.name}={MASK!r}" if f.name in self._SECRETS and value is not None
                         else f"{f.name}={value!r}")
        return f"KafkaSecurity({', '.join(parts)})"


def ssl_reason(e: BaseException) -> str:
    text = getattr(e, "verify_message", None) or getattr(e, "reason", None) or getattr(e, "strerror", None)
    return str(text or e)


def kafka_message(e: BaseException) -> str:
    """kafka-python's message without the class names it repeats in front ("X: X: text" -> "X: text")."""
    text = str(e)
    name = type(e).__name__ + ": "
    while text.startswith(name + name):
        text = text[len(name):]
    return text


def _auth_errors(errors: Any) -> tuple[type[BaseException], ...]:
    return tuple(getattr(errors, name) for name in
                 ("SaslAuthenticationFailedError", "UnsupportedSaslMechanismError", "IllegalSaslStateError",
                  "AuthorizationError") if hasattr(errors, name))


def auth_failed(bootstrap: str, e: BaseException, security: KafkaSecurity | None = None) -> AuthError:
    """The error for credentials the brokers rejected (SASL) or an operation their ACLs do not allow."""
    errors = kafka_errors()
    authorization = getattr(errors, "AuthorizationError", ())
    if authorization and isinstance(e, authorization):
        of = f" of {security.sasl_username}" if security is not None and security.sasl else ""
        return AuthError(f"kafka {bootstrap}: not authorized: {kafka_message(e)}",
                         hint=f"the brokers accepted the credentials{of}, but their ACLs do not allow this")
    if security is not None and security.sasl:
        return AuthError(f"Kafka brokers {bootstrap} rejected SASL {security.sasl_mechanism} authentication as "
                         f"{security.sasl_username}: {kafka_message(e)}", hint=SASL_HINT)
    return AuthError(f"Kafka brokers {bootstrap} rejected the authentication: {kafka_message(e)}", hint=SASL_HINT)


def kafka_failure(bootstrap: str, e: BaseException, doing: str, *, client: Any = None,
                  security: KafkaSecurity | None = None, reach: bool = False) -> StatectlError:
    """The one error for a kafka-python error ``e`` raised while ``doing`` (e.g. "writing to T"): AuthError
    when the brokers refused the credentials or their ACLs the operation (naming the SASL user of
    ``security``, or of the ``client`` statectl opened); with ``reach``, the unreachable-brokers error;
    else StatectlError ``kafka BOOTSTRAP: DOING failed: E``. The caller raises it ``from e``."""
    security = security if security is not None else getattr(client, STATECTL_SECURITY, None)
    if isinstance(e, _auth_errors(kafka_errors())):
        return auth_failed(bootstrap, e, security)
    if reach:
        return unreachable(bootstrap, f"{doing}: {e}", security)
    return StatectlError(f"kafka {bootstrap}: {doing} failed: {e}")


# The attribute of a client _open made that holds its KafkaSecurity (kafka_failure names its SASL user).
STATECTL_SECURITY = "_statectl_security"


def unreachable(bootstrap: str, cause: object, security: KafkaSecurity | None = None) -> StatectlError:
    """The error for brokers that cannot be reached (or answer nothing useful)."""
    hint = "check --kafka HOST:PORT[,..] (or STATECTL_KAFKA) and that the brokers are up"
    if security is None:
        hint += ", and kafka_security_protocol if their listener needs TLS or SASL"
    return StatectlError(f"cannot reach Kafka brokers {bootstrap}: {cause}", hint=hint)


# -- clients -------------------------------------------------------------------------------------------


def _common(bootstrap: str, timeout_s: float, security: KafkaSecurity | None) -> dict[str, Any]:
    cfg = {
        "bootstrap_servers": bootstrap_servers(bootstrap),
        "client_id": CLIENT_ID,
        "bootstrap_timeout_ms": int(timeout_s * 1000),
        "request_timeout_ms": max(30_000, int(timeout_s * 1000)),
    }
    if security is not None:
        cfg.update(security.client_kwargs())
        if security.tls:
            cfg["ssl_context"] = security.ssl_context()
    return cfg


def _open(bootstrap: str, factory: Callable[[], Any], security: KafkaSecurity | None = None,
          timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    errors = kafka_errors()
    unreachable_errors = tuple(getattr(errors, name) for name in
                               ("KafkaTimeoutError", "KafkaConnectionError", "NoBrokersAvailable")
                               if hasattr(errors, name))
    # The diagnosis builds on this module's settings and errors, so it is imported here, not above.
    from statectl.kafka.diagnose import diagnose

    # kafka-python (3.0) bounds neither the TLS handshake nor the bootstrap around it: against a port that
    # accepts TCP and never answers TLS, its constructors wait forever. One handshake first, with a timeout.
    found = diagnose(bootstrap, security, timeout_s, tls_only=True)
    if found is not None:
        raise found
    try:
        client = factory()
        try:
            setattr(client, STATECTL_SECURITY, security)
        except AttributeError:  # a client class with __slots__: errors name no SASL user
            pass
        return client
    except _auth_errors(errors) as e:
        raise auth_failed(bootstrap, e, security) from e
    except unreachable_errors as e:
        found = diagnose(bootstrap, security, timeout_s)
        if found is not None:
            raise found from e
        raise unreachable(bootstrap, e, security) from e
    except errors.KafkaError as e:
        raise StatectlError(f"kafka {bootstrap}: {e}") from e


def open_consumer(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                  security: KafkaSecurity | None = None, changes: bool = False) -> Any:
    """A KafkaConsumer outside any group, that never creates topics and never resets a position silently
    (an out-of-range position raises). ``changes``: its polls return kafka.changes.Change tuples (offset,
    timestamp, key, value), decoded with less work than ConsumerRecords. The caller closes it. Errors as the
    module says."""
    kafka = kafka_module()
    cfg = dict(_common(bootstrap, timeout_s, security), group_id=None, enable_auto_commit=False,
               allow_auto_create_topics=False, auto_offset_reset="none", **FETCH_SETTINGS)
    consumer = _open(bootstrap, lambda: kafka.KafkaConsumer(**cfg), security, timeout_s)
    if changes:
        from statectl.kafka.changes import decode_changes

        decode_changes(consumer)
    return consumer


class LazyConsumer:
    """One consumer (open_consumer) opened at the first call, not before: checks that come first refuse
    without connecting. ``with LazyConsumer(...) as consumer_of: consumer_of()``; closed when the block is
    left."""

    def __init__(self, bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, security: KafkaSecurity | None = None):
        self.bootstrap, self.timeout_s, self.security = bootstrap, timeout_s, security
        self._consumer: Any = None

    def __call__(self) -> Any:
        if self._consumer is None:
            self._consumer = open_consumer(self.bootstrap, timeout_s=self.timeout_s, security=self.security)
        return self._consumer

    def __enter__(self) -> "LazyConsumer":
        return self

    def __exit__(self, *exc: object) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


def open_producer(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                  security: KafkaSecurity | None = None) -> Any:
    """A KafkaProducer with ``acks=all`` that never creates topics. The caller closes it."""
    kafka = kafka_module()
    cfg = dict(_common(bootstrap, timeout_s, security), acks="all", allow_auto_create_topics=False,
               max_block_ms=max(10_000, int(timeout_s * 1000)))
    return _open(bootstrap, lambda: kafka.KafkaProducer(**cfg), security, timeout_s)


def open_admin(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, security: KafkaSecurity | None = None) -> Any:
    """A KafkaAdminClient. The caller closes it."""
    kafka = kafka_module()
    cfg = _common(bootstrap, timeout_s, security)
    return _open(bootstrap, lambda: kafka.KafkaAdminClient(**cfg), security, timeout_s)


def topic_names(bootstrap: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                security: KafkaSecurity | None = None) -> set[str]:
    """The names of every topic on the cluster (metadata only). Errors as the module says."""
    consumer = open_consumer(bootstrap, timeout_s=timeout_s, security=security)
    try:
        return set(consumer.topics())
    except kafka_errors().KafkaError as e:
        raise kafka_failure(bootstrap, e, "listing the topics", client=consumer, reach=True) from e
    finally:
        consumer.close()


def partition_count(consumer: Any, topic: str, bootstrap: str) -> int | None:
    """The number of partitions of ``topic``, or None when it does not exist (metadata only: this never
    creates the topic). AuthError when the brokers' ACLs refuse."""
    errors = kafka_errors()
    try:
        if topic not in consumer.topics():
            return None
        parts = consumer.partitions_for_topic(topic)
    except errors.KafkaError as e:
        raise kafka_failure(bootstrap, e, f"reading the metadata of {topic}", client=consumer, reach=True) from e
    return len(parts) if parts else None


def require_partition(consumer: Any, topic: str, partition: int, bootstrap: str) -> None:
    """Raise NotFoundError (exit 10) unless ``topic`` exists on the brokers with ``partition``."""
    n = partition_count(consumer, topic, bootstrap)
    if n is None:
        raise NotFoundError(f"topic {topic} does not exist on {bootstrap}",
                            hint="check the topic name and --kafka")
    if not 0 <= partition < n:
        raise NotFoundError(f"topic {topic} has {n} partition{'s' if n != 1 else ''}; there is no partition "
                            f"{partition}", hint=f"pass --partition between 0 and {n - 1}")


def create_topic(bootstrap: str, topic: str, *, partitions: int = 1, configs: dict[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, security: KafkaSecurity | None = None) -> bool:
    """Create ``topic`` with the brokers' default replication factor; False if it already existed.
    AuthError when the brokers' ACLs refuse."""
    errors = kafka_errors()
    from kafka.admin import NewTopic

    admin = open_admin(bootstrap, timeout_s=timeout_s, security=security)
    try:
        admin.create_topics([NewTopic(topic, partitions, -1, topic_configs=dict(configs or {}))])
        return True
    except errors.TopicAlreadyExistsError:
        return False
    except errors.KafkaError as e:
        raise kafka_failure(bootstrap, e, f"creating topic {topic}", security=security) from e
    finally:
        admin.close()


def produce(producer: Any, topic: str, partition: int, key: bytes | None, value: bytes | None, bootstrap: str,
            *, timeout_s: float = 30.0) -> int:
    """Write one record, wait for all in-sync replicas (the producer's acks=all) and flush; return its offset.

    Raises StatectlError when the write fails or times out: then it may or may not have been written;
    AuthError when the brokers refuse it (ACLs).
    """
    errors = kafka_errors()
    try:
        meta = producer.send(topic, key=key, value=value, partition=partition).get(timeout=timeout_s)
        producer.flush(timeout=timeout_s)
    except errors.KafkaTimeoutError as e:
        raise StatectlError(f"kafka {bootstrap}: writing to {topic} timed out: {e}") from e
    except errors.KafkaError as e:
        raise kafka_failure(bootstrap, e, f"writing to {topic}", client=producer) from e
    return meta.offset


class OffsetOutOfRange(StatectlError):
    """A read position that is not in the partition's log (deleted by retention or compaction, or the
    topic recreated shorter)."""


class PartitionReader:
    """Reads one partition from a start offset to its end, in batches, on an assigned consumer.

    "The end" follows SERVICES.md: Tansu reports a high watermark that is the base offset of the last record
    batch + 1, so it under-reports after batched produces. A read is done only after a poll that returns
    nothing AND a position at or past the reported end; the end is never used to count what remains.
    ``position`` is the next offset to read (after the last record returned); ``reported_end`` is the end
    the broker reported when the read began.
    """

    def __init__(self, consumer: Any, topic: str, partition: int, bootstrap: str, *,
                 empty_poll_ms: int = EMPTY_POLL_MS, stall_timeout_s: float = STALL_TIMEOUT_S):
        kafka = kafka_module()
        self.consumer = consumer
        self.topic = topic
        self.partition = partition
        self.bootstrap = bootstrap
        self.empty_poll_ms = empty_poll_ms
        self.stall_timeout_s = stall_timeout_s
        self.tp = kafka.TopicPartition(topic, partition)
        self.position: int | None = None
        self.beginning: int | None = None
        self.reported_end: int | None = None
        self.caught_up = False  # follow mode: the read has reached the end at least once

    def _offsets(self) -> tuple[int, int]:
        return self._listed(self.consumer.beginning_offsets), self._listed(self.consumer.end_offsets)

    def _listed(self, ask: Callable[[list[Any]], dict[Any, int]]) -> int:
        """This partition's offset from ``ask`` (beginning_offsets or end_offsets), errors mapped."""
        try:
            return ask([self.tp])[self.tp]
        except kafka_errors().KafkaError as e:
            raise kafka_failure(self.bootstrap, e, f"listing offsets of {self.topic}[{self.partition}]",
                                client=self.consumer, reach=True) from e

    def _poll(self, wait_ms: int) -> tuple[list[Any], int]:
        """One poll: the records it brought and the consumer's position after them, errors mapped."""
        errors = kafka_errors()
        try:
            records = self.consumer.poll(timeout_ms=wait_ms).get(self.tp, [])
            return records, self.consumer.position(self.tp)
        except errors.OffsetOutOfRangeError as e:
            raise OffsetOutOfRange(f"offset {self.position} of {self.topic}[{self.partition}] is out of range "
                                   f"(the log starts at {self.beginning}): {e}") from e
        except errors.KafkaError as e:
            raise kafka_failure(self.bootstrap, e, f"reading {self.topic}[{self.partition}] at offset "
                                f"{self.position}", client=self.consumer) from e

    def seek(self, start: int | None = None) -> int:
        """Assign the partition and position it at ``start`` (None, or before the log start: the log start).

        Returns the position. The partition must exist (see :func:`require_partition`).
        """
        begin, end = self._offsets()
        self.beginning, self.reported_end = begin, end
        pos = begin if start is None or start < begin else start
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, pos)
        self.position = pos
        return pos

    def at_end(self, position: int | None = None) -> bool:
        """Whether ``position`` (default: the reader's; a caller reading ahead passes the next offset it has
        applied) has reached the end the client last heard of (the high watermark of its latest fetch; on Tansu
        the last batch's base offset + 1, so it may be reached with records still to come: a hint for when to
        flush, never an end of the read)."""
        hw = self.consumer.highwater(self.tp)
        position = self.position if position is None else position
        return hw is not None and position is not None and position >= hw

    def batches(self, stop: int | None = None, *, follow: bool = False, quick: bool = False) -> Iterator[list[Any]]:
        """Yield lists of ConsumerRecords in offset order from the current position to the end, or to the
        records below offset ``stop`` (exclusive, like an end offset). Call :meth:`seek` first.

        ``follow`` (a standby keeping a replica current): the read never ends by itself. Once caught up
        with the end, every poll that brings nothing yields an empty list (``caught_up`` is then True), so
        the caller can flush, check whether to stop, and close the generator; new records keep coming as
        they are written. ``stop`` still ends the read.

        ``quick`` (a reader that already read to the end once, reading on): the end is asked for again first,
        and when the position is already there, the read ends after one poll that does not wait (it returns
        what the client holds), instead of an empty poll of ``empty_poll_ms``. Sound on Tansu too: fetches
        return whole record batches, so a position past the reported end (the last batch's base offset + 1)
        means the last batch was read.

        Raises StatectlError when the brokers fail, or the read stalls for ``stall_timeout_s`` short of the
        reported end; StatectlError when the position is out of range (e.g. deleted by retention).
        """
        if self.position is None:
            raise RuntimeError("PartitionReader.batches() before seek()")
        quick = quick and stop is None and not follow
        if quick:
            self.reported_end = self._listed(self.consumer.end_offsets)
        last_progress = time.monotonic()
        while stop is None or self.position < stop:
            # Quick and at the end already: a poll that does not wait returns what the client still holds.
            records, position = self._poll(0 if quick and self.position >= self.reported_end else self.empty_poll_ms)
            if stop is not None and records and records[-1].offset >= stop:
                records = [r for r in records if r.offset < stop]
                position = stop
            if records:
                self.position = position
                last_progress = time.monotonic()
                yield records
                continue
            if position > self.position:  # only control records or compacted gaps
                self.position = position
                last_progress = time.monotonic()
                continue
            assert self.reported_end is not None
            if self.position >= self.reported_end:
                if not follow:
                    return
                self.caught_up = True
                last_progress = time.monotonic()
                yield []
                continue
            if time.monotonic() - last_progress > self.stall_timeout_s:
                raise StatectlError(f"kafka {self.bootstrap}: reading {self.topic}[{self.partition}] stalled at "
                                    f"offset {self.position} for {self.stall_timeout_s:.0f}s, short of its end "
                                    f"{self.reported_end}")
