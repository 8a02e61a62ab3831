"""Settings: flags > STATECTL_* environment > profile in statectl.toml > defaults.

The config file is ``--config PATH`` (or STATECTL_CONFIG), else ``./statectl.toml``, else
``$XDG_CONFIG_HOME/statectl/config.toml``. Each top-level table is a profile; ``[default]`` is used
unless ``--profile`` (or STATECTL_PROFILE) names another::

    [default]
    blobstore = "s3://my-bucket/statectl"
    s3_endpoint = "http://127.0.0.1:8333"
    job = "page-views"

    [staging]
    blobstore = "file:///var/backups/statectl"

Kafka clusters behind TLS and SASL (the kafka_* security keys; each also as STATECTL_KAFKA_...)::

    [prod]
    kafka = "broker1:9093,broker2:9093"
    kafka_security_protocol = "SASL_SSL"
    kafka_sasl_mechanism = "SCRAM-SHA-512"
    kafka_sasl_username = "statectl"
    kafka_ssl_cafile = "/etc/kafka/ca.pem"
    # kafka_sasl_password: better from the environment, STATECTL_KAFKA_SASL_PASSWORD
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from statectl import defaults
from statectl.errors import ConfigError, UsageError
from statectl.kafka.settings import KAFKA_SASL_MECHANISMS, KAFKA_SECURITY_PROTOCOLS, check_security_settings
from statectl.ratelimit import format_rate, parse_rate
from statectl.redact import check_secret

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
# What botocore reads from the environment when statectl passes no credentials and no AWS profile.
AWS_SECRET_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_size(value: Any, what: str = "size") -> int:
    """``64MiB``, ``64M``, ``1g``, ``1048576`` -> bytes (binary units). Raises UsageError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.match(str(value))
    if not m:
        raise UsageError(f"invalid {what} {value!r}: expected e.g. 64MiB, 512k or a number of bytes")
    unit = (m.group(2) or "").lower().replace("i", "").replace("b", "") if m.group(2) else ""
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def parse_duration(value: Any, what: str = "duration") -> int:
    """``30d``, ``6h``, ``90m``, ``45s``, ``3600`` -> seconds. Raises UsageError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _DURATION.match(str(value))
    if not m:
        raise UsageError(f"invalid {what} {value!r}: expected e.g. 30d, 6h, 90m or a number of seconds")
    return int(float(m.group(1)) * _DURATION_UNITS[(m.group(2) or "s").lower()])


def parse_seconds(value: Any, what: str = "duration") -> float:
    """As parse_duration, to the fraction of a second (``500ms`` -> 0.5): for timeouts. Raises UsageError."""
    m = _DURATION.match(str(value))
    if not m:
        raise UsageError(f"invalid {what} {value!r}: expected e.g. 90s, 10m, 500ms or a number of seconds")
    return float(m.group(1)) * _DURATION_UNITS[(m.group(2) or "s").lower()]


def format_size(n: int) -> str:
    """Bytes as parse_size reads them back, in the largest binary unit that is exact: ``64MiB``, ``512KiB``."""
    for unit, factor in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def format_duration(seconds: int) -> str:
    """Seconds as parse_duration reads them back, in the largest unit that is exact: ``30d``, ``6h``, ``15s``."""
    for unit in ("w", "d", "h", "m"):
        factor = int(_DURATION_UNITS[unit])
        if seconds and seconds % factor == 0:
            return f"{seconds // factor}{unit}"
    return f"{seconds}s"


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("expected a string")
    return v


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError("expected an integer")
    return int(v)


def _secret(v: Any) -> str:
    v = _str(v)
    check_secret(v)
    return v


def _output(v: Any) -> str:
    v = _str(v).lower()
    if v not in ("text", "json"):
        raise ValueError("expected text or json")
    return v


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        v = _str(v).strip().upper()
        if v not in options:
            raise ValueError("expected " + ", ".join(options[:-1]) + " or " + options[-1])
        return v

    return parse


def _path(v: Any) -> str:
    """A file path, ``~`` expanded. Whether it exists is checked for the effective settings only (resolve):
    a profile that is not in use may name files of another machine."""
    v = _str(v)
    if not v.strip():
        raise ValueError("expected a file path")
    if any(not ch.isprintable() for ch in v):
        raise ValueError("it contains a control character")
    return str(Path(v).expanduser())


def _username(v: Any) -> str:
    v = _str(v)
    if not v or v != v.strip():
        raise ValueError("expected a user name without leading or trailing whitespace")
    if any(not ch.isprintable() for ch in v):
        raise ValueError("it contains a control character")
    return v


def _sse(v: Any) -> str:
    from statectl.blobstore import SSE_MODES

    v = _str(v)
    if v not in SSE_MODES:
        raise ValueError("expected AES256 or aws:kms")
    return v


def _kms_key(v: Any) -> str:
    v = _str(v)
    if not v or any(ch.isspace() or not ch.isprintable() for ch in v):
        raise ValueError("expected a KMS key id, ARN or alias, without spaces")
    return v


def _zookeeper(v: Any) -> str:
    from statectl.zookeeper.client import check_connect

    return check_connect(_str(v))


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


@dataclass(frozen=True)
class Key:
    parse: Callable[[Any], Any]
    default: Any = None
    secret: bool = False
    help: str = ""
    show: Callable[[Any], str] = str  # the default as a user writes it (help texts: "(default 64MiB)")

    def default_text(self) -> str:
        return self.show(self.default)


KEYS: dict[str, Key] = {
    "blobstore": Key(_str, None, help="blob store URL: file:///path or s3://bucket/prefix"),
    "s3_endpoint": Key(_str, help="endpoint URL of an S3-compatible store"),
    "s3_region": Key(_str),
    "s3_access_key_id": Key(_secret, secret=True),
    "s3_secret_access_key": Key(_secret, secret=True),
    "s3_session_token": Key(_secret, secret=True),
    "s3_profile": Key(_str, help="AWS shared-config profile for boto3"),
    "sse": Key(_sse, help="S3 server-side encryption of every object statectl writes: AES256 or aws:kms"),
    "sse_kms_key_id": Key(_kms_key, help="the KMS key (id, ARN or alias) of sse aws:kms"),
    "kafka": Key(_str, help="Kafka bootstrap servers HOST:PORT[,..]"),
    "kafka_security_protocol": Key(_choice(KAFKA_SECURITY_PROTOCOLS), "PLAINTEXT",
                                   help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    "kafka_sasl_mechanism": Key(_choice(KAFKA_SASL_MECHANISMS), help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    "kafka_sasl_username": Key(_username),
    "kafka_sasl_password": Key(_secret, secret=True),
    "kafka_ssl_cafile": Key(_path, help="PEM file of the CAs that signed the brokers' certificates "
                                        "(default: the system's CAs)"),
    "kafka_ssl_certfile": Key(_path, help="PEM file of the client certificate (and its key, unless "
                                          "kafka_ssl_keyfile is given)"),
    "kafka_ssl_keyfile": Key(_path, help="PEM file of the client certificate's private key"),
    "kafka_ssl_password": Key(_secret, secret=True, help="password of the client certificate's private key"),
    "kafka_ssl_check_hostname": Key(_bool, True, help="check that a broker's certificate names the host "
                                                      "connected to"),
    "zookeeper": Key(_zookeeper, help="ZooKeeper of a standalone job (its zk.connect): host:port[,host:port]"
                                      "[/chroot]"),
    "job": Key(_str),
    "job_id": Key(_str, defaults.JOB_ID),
    "task": Key(_str, defaults.TASK),
    "store": Key(_str),
    "state_dir": Key(_str),
    "standby_root": Key(_str, help="statectl's dir for standby replicas, pre-restored dirs and failover journals "
                                   "(default: <state_dir>.statectl-standby, beside the state dir)"),
    "parallelism": Key(_int, defaults.PARALLELISM),
    "chunk_size": Key(lambda v: parse_size(v, "chunk_size"), defaults.CHUNK_SIZE, show=format_size),
    "ttl": Key(lambda v: parse_duration(v, "ttl"), defaults.TTL_SECONDS, show=format_duration),
    "limit_rate": Key(parse_rate, None, show=format_rate,
                      help="bytes a second a backup, restore, copy or load moves through this host, shared by all "
                           "its transfers: 50MiB/s, 500KiB/s, 1G/s (1024-based) or off"),
    "retries": Key(_int, defaults.RETRIES),
    "timeout": Key(lambda v: parse_duration(v, "timeout"), defaults.TIMEOUT_S, show=format_duration,
                   help="how long a blob store may leave a connection or a read unanswered"),
    "retry_time": Key(lambda v: parse_duration(v, "retry_time"), defaults.RETRY_TIME_S, show=format_duration,
                      help="stop retrying a failing blob store request after this long"),
    "keep_last": Key(_int, defaults.KEEP_LAST, help="snapshots kept restorable per task/store"),
    "grace": Key(lambda v: parse_duration(v, "grace"), defaults.GRACE_SECONDS, show=format_duration,
                 help="unreferenced blobs, and those of snapshots retention dropped, stay at least this long"),
    "output": Key(_output, "text"),
    "quiet": Key(_bool, False),
    "verbose": Key(_bool, False),
    "debug": Key(_bool, False),
}


@dataclass(frozen=True)
class Value:
    value: Any
    source: str  # "flag", "env STATECTL_X", "profile NAME (FILE)", "default"


class Settings:
    """Effective settings with where each value came from."""

    def __init__(self, values: dict[str, Value], config_file: Path | None, profile: str,
                 warnings: tuple[str, ...] = ()):
        self._values = values
        self.config_file = config_file
        self.profile = profile
        self.warnings = warnings  # what is wrong in the profiles not in use (load_profile), for the operator

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name].value
        except KeyError:
            raise AttributeError(name) from None

    def source(self, name: str) -> str:
        return self._values[name].source

    def items(self) -> list[tuple[str, Value]]:
        return sorted(self._values.items())

    def masked(self, name: str) -> Any:
        v = self._values[name].value
        return "****" if v is not None and KEYS[name].secret else v

    def shown(self, name: str) -> str:
        """The value as a user writes it in a config file (sizes ``64MiB``, durations ``6h``; secrets
        masked; empty for none)."""
        v = self.masked(name)
        if v is None:
            return ""
        return v if v == "****" else KEYS[name].show(v)


def find_config_file(explicit: str | None, env: Mapping[str, str]) -> Path | None:
    """The config file to read, or None. An explicitly named file must exist (ConfigError)."""
    explicit = explicit or env.get("STATECTL_CONFIG")
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        return p
    local = Path("statectl.toml")
    if local.is_file():
        return local
    xdg = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    p = Path(xdg) / "statectl" / "config.toml"
    return p if p.is_file() else None


def load_profile(path: Path, profile: str, explicit_profile: bool,
                 warnings: list[str] | None = None) -> dict[str, Any]:
    """Read one profile table from a TOML file, validating every key of every profile.

    Raises ConfigError naming the file and the key for bad TOML, a key outside a profile table, and unknown
    keys and bad values in ``profile``. The same in another profile (one not in use: a typo there must not
    stop every command) is appended to ``warnings``, naming the profile, and its table is not used.
    """
    import tomli

    try:
        data = tomli.loads(path.read_text(encoding="utf-8"))
    except tomli.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    for name, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: key {name!r} must be inside a profile table such as [default]")
        for key, value in table.items():
            problem = _key_problem(path, name, key, value)
            if problem is None:
                continue
            if name == profile:
                raise problem
            if warnings is not None:
                warnings.append(f"{problem} (profile {name!r} is not in use: only a warning)")
    if profile not in data:
        if explicit_profile:
            raise ConfigError(f"{path}: no profile [{profile}]",
                              hint="profiles there: " + (", ".join(sorted(data)) or "none"))
        return {}
    return {k.replace("-", "_"): v for k, v in data[profile].items()}


def _key_problem(path: Path, profile: str, key: str, value: Any) -> ConfigError | None:
    """The ConfigError for ``key = value`` in ``[profile]`` of ``path`` (a secret's value never shown), or None."""
    spec = KEYS.get(key.replace("-", "_"))
    if spec is None:
        return ConfigError(f"{path}: [{profile}] unknown key {key!r}", hint="known keys: " + ", ".join(sorted(KEYS)))
    try:
        spec.parse(value)
    except (TypeError, ValueError, UsageError) as e:
        if spec.secret:
            return _secret_error(f"{path}: [{profile}] key {key!r}", e)
        return ConfigError(f"{path}: [{profile}] key {key!r}: invalid value {value!r} ({e})")
    return None


def resolve(flags: Mapping[str, Any], *, config: str | None = None, profile: str | None = None,
            env: Mapping[str, str] | None = None) -> Settings:
    """Merge flags (None = not given) > STATECTL_* env > profile > defaults into Settings.

    Raises ConfigError for a bad config file or an invalid environment value, UsageError for bad flags.
    """
    env = os.environ if env is None else env
    explicit_profile = bool(profile or env.get("STATECTL_PROFILE"))
    profile_name = profile or env.get("STATECTL_PROFILE") or "default"
    path = find_config_file(config, env)
    warnings: list[str] = []
    prof = load_profile(path, profile_name, explicit_profile, warnings) if path else {}
    if explicit_profile and path is None and profile_name != "default":
        raise ConfigError(f"profile {profile_name!r} asked for, but there is no config file",
                          hint="create ./statectl.toml or pass --config")
    values: dict[str, Value] = {}
    for name, spec in KEYS.items():
        env_name = "STATECTL_" + name.upper()
        if flags.get(name) is not None:
            raw, source = flags[name], "flag"
        elif env.get(env_name) not in (None, ""):
            raw, source = env[env_name], f"env {env_name}"
        elif name in prof:
            raw, source = prof[name], f"profile {profile_name} ({path})"
        else:
            values[name] = Value(spec.default, "default")
            continue
        try:
            parsed = spec.parse(raw)
        except (TypeError, ValueError, UsageError) as e:
            where = {"flag": f"--{name.replace('_', '-')}"}.get(source, source)
            if spec.secret:
                raise _secret_error(f"{name} from {where}", e) from None
            raise (UsageError if source == "flag" else ConfigError)(f"{where}: invalid value {raw!r} ({e})") from None
        values[name] = Value(parsed, source)
    if values["blobstore"].value is None:
        from statectl.blobstore import default_blobstore_url

        values["blobstore"] = Value(default_blobstore_url(), "default")
    if (str(values["blobstore"].value).startswith("s3://") and not values["s3_access_key_id"].value
            and not values["s3_profile"].value):
        # Without statectl's own credentials or an AWS profile, botocore takes these from the environment.
        for name in AWS_SECRET_ENV:
            try:
                check_secret(env.get(name) or "")
            except ValueError as e:
                raise _secret_error(f"env {name}", e) from None
    _check_sse(values)
    check_security_settings({name: v.value for name, v in values.items()},
                            lambda key: key if values[key].source == "default" else f"{key} ({values[key].source})")
    return Settings(values, path, profile_name, tuple(warnings))


def _rank(source: str) -> int:
    """How a setting's source ranks in the precedence: default < profile < env < flag."""
    return next(i for i, kind in enumerate(("default", "profile", "env", "flag")) if source.startswith(kind))


def _check_sse(values: dict[str, Value]) -> None:
    """A KMS key id goes with sse aws:kms only. One set at a lower precedence than an sse of another mode is
    replaced along with it (``--sse AES256`` over a profile's aws:kms and key); one set where sse is not
    aws:kms is an error: UsageError for a flag, ConfigError otherwise (both exit 2)."""
    key, sse = values["sse_kms_key_id"], values["sse"]
    if key.value is None or sse.value == "aws:kms":
        return
    if _rank(sse.source) > _rank(key.source):
        values["sse_kms_key_id"] = Value(None, sse.source)
        return
    if key.source == "flag":
        raise UsageError(f"--sse-kms-key-id needs --sse aws:kms, not {sse.value or 'none'}"
                         + ("" if sse.source in ("flag", "default") else f" ({sse.source})"),
                         hint="add --sse aws:kms; AES256 encrypts with S3's own keys and takes no KMS key")
    raise ConfigError(f"sse_kms_key_id ({key.source}) needs sse aws:kms, not {sse.value or 'none'}"
                      + ("" if sse.source == "default" else f" ({sse.source})"),
                      hint="set sse = \"aws:kms\" beside it; AES256 encrypts with S3's own keys and takes no KMS key")


def _secret_error(where: str, e: Exception) -> ConfigError:
    """The error for an invalid secret setting: names it and its source, never its value."""
    return ConfigError(f"{where}: invalid value: {e}; the value is not shown",
                       hint="access keys, secret keys, session tokens and passwords are printable ASCII without "
                            "spaces: check how it was set (e.g. a file with CRLF line ends, or a copy-paste)")
