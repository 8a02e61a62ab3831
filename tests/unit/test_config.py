"""Settings: flags > STATECTL_* env > profile > defaults, and the errors for bad config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statectl.config import KEYS, parse_duration, parse_size, resolve
from statectl.errors import ConfigError, UsageError

NO_FLAGS: dict = {}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A clean environment: cwd is an empty tmp dir, XDG dirs point inside it.

    resolve() takes the environment as a dict; only the default blob store URL still reads os.environ
    (XDG_DATA_HOME), so that is pinned too.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def write(path: Path | str, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


PROFILE = """\
[default]
blobstore = "s3://bucket/prefix"
job = "from-profile"
store = "profile-store"
parallelism = 4
chunk-size = "1MiB"
s3_endpoint = "http://127.0.0.1:8333"

[staging]
blobstore = "file:///var/backups/statectl"
job = "staging-job"
ttl = "7d"
"""


def test_defaults_only(env, tmp_path):
    s = resolve(NO_FLAGS, env=env)
    assert s.config_file is None
    assert s.profile == "default"
    for name, spec in KEYS.items():
        assert s.source(name) == "default", name
        if name != "blobstore":
            assert getattr(s, name) == spec.default, name
    assert s.blobstore == "file://" + str(tmp_path / "data" / "statectl" / "blobs")
    assert (s.job_id, s.task, s.parallelism, s.chunk_size, s.ttl, s.retries, s.output) == (
        "1", "Partition 0", 8, 64 * 1024 * 1024, 30 * 86400, 8, "text")
    assert (s.quiet, s.verbose, s.debug) == (False, False, False)


def test_precedence_flags_env_profile_defaults(env):
    write("statectl.toml", PROFILE)
    env = dict(env, STATECTL_JOB="from-env", STATECTL_PARALLELISM="16", STATECTL_STORE="",
               STATECTL_OUTPUT="json")
    s = resolve({"job": "from-flag", "store": None, "output": "text"}, env=env)

    assert s.config_file == Path("statectl.toml")
    assert s.profile == "default"
    assert (s.job, s.source("job")) == ("from-flag", "flag")
    assert (s.output, s.source("output")) == ("text", "flag")  # a flag beats env
    assert (s.parallelism, s.source("parallelism")) == (16, "env STATECTL_PARALLELISM")
    # an empty env value counts as unset, and a None flag as not given
    assert (s.store, s.source("store")) == ("profile-store", "profile default (statectl.toml)")
    assert (s.chunk_size, s.source("chunk_size")) == (1024 * 1024, "profile default (statectl.toml)")
    assert (s.s3_endpoint, s.source("s3_endpoint")) == ("http://127.0.0.1:8333", "profile default (statectl.toml)")
    assert (s.blobstore, s.source("blobstore")) == ("s3://bucket/prefix", "profile default (statectl.toml)")
    assert (s.ttl, s.source("ttl")) == (30 * 86400, "default")
    assert (s.job_id, s.source("job_id")) == ("1", "default")
    assert (s.s3_region, s.source("s3_region")) == (None, "default")
    assert [name for name, _ in s.items()] == sorted(KEYS)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_named_profile(env, how):
    write("statectl.toml", PROFILE)
    if how == "flag":
        s = resolve(NO_FLAGS, profile="staging", env=env)
    else:
        s = resolve(NO_FLAGS, env=dict(env, STATECTL_PROFILE="staging"))
    assert s.profile == "staging"
    assert (s.job, s.source("job")) == ("staging-job", "profile staging (statectl.toml)")
    assert (s.ttl, s.source("ttl")) == (7 * 86400, "profile staging (statectl.toml)")
    assert (s.store, s.source("store")) == (None, "default")  # nothing leaks in from [default]


def test_flag_profile_beats_env_profile(env):
    write("statectl.toml", PROFILE)
    s = resolve(NO_FLAGS, profile="default", env=dict(env, STATECTL_PROFILE="staging"))
    assert (s.profile, s.job) == ("default", "from-profile")


def test_missing_default_profile_is_fine(env):
    write("statectl.toml", "[staging]\njob = \"j\"\n")
    s = resolve(NO_FLAGS, env=env)
    assert (s.job, s.source("job")) == (None, "default")
    assert s.config_file == Path("statectl.toml")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_explicit_config_file(env, tmp_path, how):
    path = write(tmp_path / "etc" / "custom.toml", '[default]\njob = "custom"\n')
    write("statectl.toml", '[default]\njob = "local"\n')  # an explicit file wins over ./statectl.toml
    if how == "flag":
        s = resolve(NO_FLAGS, config=str(path), env=env)
    else:
        s = resolve(NO_FLAGS, env=dict(env, STATECTL_CONFIG=str(path)))
    assert s.config_file == path
    assert (s.job, s.source("job")) == ("custom", f"profile default ({path})")


def test_xdg_config_file(env, tmp_path):
    path = write(tmp_path / "xdg" / "statectl" / "config.toml", '[default]\njob = "xdg"\n')
    s = resolve(NO_FLAGS, env=env)
    assert s.config_file == path
    assert (s.job, s.source("job")) == ("xdg", f"profile default ({path})")
    # ./statectl.toml wins over the XDG file
    write("statectl.toml", '[default]\njob = "local"\n')
    assert resolve(NO_FLAGS, env=env).job == "local"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_missing_explicit_config_file(env, tmp_path, how):
    missing = tmp_path / "nope" / "statectl.toml"
    with pytest.raises(ConfigError) as exc:
        if how == "flag":
            resolve(NO_FLAGS, config=str(missing), env=env)
        else:
            resolve(NO_FLAGS, env=dict(env, STATECTL_CONFIG=str(missing)))
    assert str(exc.value) == f"config file {missing} does not exist"


def test_bad_toml(env):
    write("statectl.toml", "[default]\njob = \"unterminated\n")
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, env=env)
    assert str(exc.value).startswith("statectl.toml: invalid TOML: ")


def test_config_file_not_utf8(env):
    Path("statectl.toml").write_bytes(b'[default]\njob = "\xff"\n')
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, env=env)
    assert str(exc.value).startswith("statectl.toml: ")


@pytest.mark.parametrize("profile_text, profile", [
    ('[default]\nblobstor = "s3://b"\n', "default"),
    ('[default]\njob = "j"\n[other]\nblobstor = "s3://b"\n', "other"),  # the profile in use
])
def test_unknown_key(env, profile_text, profile):
    write("statectl.toml", profile_text)
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, profile=profile, env=env)
    assert str(exc.value) == f"statectl.toml: [{profile}] unknown key 'blobstor'"
    assert exc.value.hint == "known keys: " + ", ".join(sorted(KEYS))


@pytest.mark.parametrize("line, message", [
    ('blobstor = "s3://b"', "unknown key 'blobstor'"),
    ('parallelism = "many"', "key 'parallelism': invalid value 'many' ("),
    ("s3_secret_access_key = 123456789", "key 's3_secret_access_key': invalid value: "),
])
def test_a_typo_in_a_profile_not_in_use_is_a_warning_naming_it(env, line, message):
    write("statectl.toml", f'[default]\njob = "j"\n\n[staging]\n{line}\n')
    s = resolve(NO_FLAGS, env=env)
    assert s.job == "j" and len(s.warnings) == 1 and "123456789" not in s.warnings[0]
    assert s.warnings[0].startswith(f"statectl.toml: [staging] {message}")
    assert s.warnings[0].endswith("(profile 'staging' is not in use: only a warning)")
    # No profile in use at all (no [default]): every profile's problem is a warning.
    write("statectl.toml", f"[staging]\n{line}\n")
    assert len(resolve(NO_FLAGS, env=env).warnings) == 1
    # In the profile in use it stays an error.
    with pytest.raises(ConfigError, match=r"^statectl.toml: \[staging\] "):
        resolve(NO_FLAGS, profile="staging", env=env)


def test_the_cli_prints_a_warning_for_a_profile_not_in_use(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from statectl.cli.main import app
    from tests.tools.standby_helpers import isolate_cli

    isolate_cli(tmp_path, monkeypatch)
    write(tmp_path / "statectl.toml", '[default]\njob = "j"\n\n[prod]\nparalelism = 4\n')
    r = CliRunner().invoke(app, ["config", "show"])
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ("warning: statectl.toml: [prod] unknown key 'paralelism' (profile 'prod' is not in use: "
                        "only a warning)\n")
    assert CliRunner().invoke(app, ["config", "show", "-q"]).stderr == ""
    r = CliRunner().invoke(app, ["--profile", "prod", "config", "show"])
    assert r.exit_code == 2 and r.stderr.startswith("Error: statectl.toml: [prod] unknown key 'paralelism'")


@pytest.mark.parametrize("line, key, value", [
    ('parallelism = "many"', "parallelism", "'many'"),
    ("parallelism = 1.5", "parallelism", "1.5"),
    ("parallelism = true", "parallelism", "True"),
    ("job = 5", "job", "5"),
    ('output = "xml"', "output", "'xml'"),
    ('quiet = "maybe"', "quiet", "'maybe'"),
    ('chunk_size = "lots"', "chunk_size", "'lots'"),
    ('ttl = "forever"', "ttl", "'forever'"),
    ("blobstore = [1, 2]", "blobstore", "[1, 2]"),
])
def test_bad_value_type(env, line, key, value):
    write("statectl.toml", f"[default]\n{line}\n")
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, env=env)
    assert str(exc.value).startswith(f"statectl.toml: [default] key {key!r}: invalid value {value} (")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_unknown_explicit_profile(env, how):
    write("statectl.toml", PROFILE)
    with pytest.raises(ConfigError) as exc:
        if how == "flag":
            resolve(NO_FLAGS, profile="prod", env=env)
        else:
            resolve(NO_FLAGS, env=dict(env, STATECTL_PROFILE="prod"))
    assert str(exc.value) == "statectl.toml: no profile [prod]"
    assert exc.value.hint == "profiles there: default, staging"


def test_explicit_profile_without_config_file(env):
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, profile="prod", env=env)
    assert str(exc.value) == "profile 'prod' asked for, but there is no config file"
    # naming the default profile needs no file
    assert resolve(NO_FLAGS, profile="default", env=env).profile == "default"


def test_top_level_scalar(env):
    write("statectl.toml", 'job = "j"\n[default]\nstore = "s"\n')
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, env=env)
    assert str(exc.value) == "statectl.toml: key 'job' must be inside a profile table such as [default]"


@pytest.mark.parametrize("name, value", [
    ("STATECTL_PARALLELISM", "many"),
    ("STATECTL_RETRIES", "1.5"),
    ("STATECTL_OUTPUT", "xml"),
    ("STATECTL_QUIET", "maybe"),
    ("STATECTL_CHUNK_SIZE", "huge"),
    ("STATECTL_TTL", "forever"),
    ("STATECTL_ZOOKEEPER", "zk1:2181,zk2:port/x"),
    ("STATECTL_LIMIT_RATE", "0"),
    ("STATECTL_LIMIT_RATE", "-1MiB/s"),
])
def test_invalid_env_value(env, name, value):
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, env=dict(env, **{name: value}))
    assert str(exc.value).startswith(f"env {name}: invalid value {value!r} (")


@pytest.mark.parametrize("name, value, flag", [
    ("parallelism", "many", "--parallelism"),
    ("output", "xml", "--output"),
    ("chunk_size", "huge", "--chunk-size"),
    ("ttl", "forever", "--ttl"),
    ("zookeeper", "zk1:2181/samza/", "--zookeeper"),
    ("limit_rate", "fast", "--limit-rate"),
    ("limit_rate", "0", "--limit-rate"),
])
def test_invalid_flag_value_is_a_usage_error(env, name, value, flag):
    with pytest.raises(UsageError) as exc:
        resolve({name: value}, env=env)
    assert type(exc.value) is UsageError
    assert str(exc.value).startswith(f"{flag}: invalid value {value!r} (")


@pytest.mark.parametrize("name, raw, parsed", [
    ("STATECTL_PARALLELISM", "16", 16),
    ("STATECTL_CHUNK_SIZE", "8MiB", 8 * 1024 * 1024),
    ("STATECTL_TTL", "6h", 6 * 3600),
    ("STATECTL_QUIET", "yes", True),
    ("STATECTL_DEBUG", "0", False),
    ("STATECTL_OUTPUT", "JSON", "json"),
    ("STATECTL_LIMIT_RATE", "20MiB/s", 20 * 1024 * 1024),
    ("STATECTL_LIMIT_RATE", "off", None),
    ("STATECTL_ZOOKEEPER", " zk1:2181,[::1]:2182,zk3/samza/prod ", "zk1:2181,[::1]:2182,zk3/samza/prod"),
])
def test_env_values_are_parsed(env, name, raw, parsed):
    s = resolve(NO_FLAGS, env=dict(env, **{name: raw}))
    key = name[len("STATECTL_"):].lower()
    assert getattr(s, key) == parsed
    assert s.source(key) == f"env {name}"


def test_secrets_are_masked(env):
    write("statectl.toml", '[default]\ns3_access_key_id = "AKIAFROMFILE"\n')
    s = resolve(NO_FLAGS, env=dict(env, STATECTL_S3_SECRET_ACCESS_KEY="s3cr3t"))
    assert s.s3_secret_access_key == "s3cr3t"
    assert s.masked("s3_secret_access_key") == "****"
    assert s.masked("s3_access_key_id") == "****"
    assert s.masked("s3_session_token") is None  # unset: nothing to hide
    assert s.masked("job_id") == "1"
    assert s.masked("parallelism") == 8
    assert {name for name, spec in KEYS.items() if spec.secret} == {
        "s3_access_key_id", "s3_secret_access_key", "s3_session_token", "kafka_sasl_password", "kafka_ssl_password"}


def test_unknown_setting_is_an_attribute_error(env):
    s = resolve(NO_FLAGS, env=env)
    with pytest.raises(AttributeError):
        s.no_such_setting


SIZES = [
    ("1048576", 1048576),
    (1048576, 1048576),
    (0, 0),
    ("0", 0),
    ("10b", 10),
    ("10B", 10),
    ("512k", 512 * 1024),
    ("512K", 512 * 1024),
    ("512KiB", 512 * 1024),
    ("512kb", 512 * 1024),
    ("64M", 64 * 1024 ** 2),
    ("64MiB", 64 * 1024 ** 2),
    ("64 MiB", 64 * 1024 ** 2),
    (" 64mb ", 64 * 1024 ** 2),
    ("1g", 1024 ** 3),
    ("1GiB", 1024 ** 3),
    ("2T", 2 * 1024 ** 4),
    ("1.5k", 1536),
    ("0.5MiB", 512 * 1024),
]


@pytest.mark.parametrize("value, expected", SIZES, ids=[repr(v) for v, _ in SIZES])
def test_parse_size(value, expected):
    assert parse_size(value) == expected


@pytest.mark.parametrize("value", ["", "abc", "-1", "1.2.3", "5 x", "1kk", "1p", "MiB", "1e6", True, None])
def test_parse_size_invalid(value):
    with pytest.raises(UsageError) as exc:
        parse_size(value, "chunk_size")
    assert str(exc.value) == f"invalid chunk_size {value!r}: expected e.g. 64MiB, 512k or a number of bytes"


DURATIONS = [
    ("3600", 3600),
    (3600, 3600),
    ("45s", 45),
    ("90m", 5400),
    ("6h", 21600),
    ("30d", 30 * 86400),
    (" 2D ", 2 * 86400),
    ("1w", 604800),
    ("1.5h", 5400),
    ("1500ms", 1),
    ("0", 0),
]


@pytest.mark.parametrize("value, expected", DURATIONS, ids=[repr(v) for v, _ in DURATIONS])
def test_parse_duration(value, expected):
    assert parse_duration(value) == expected


@pytest.mark.parametrize("value", ["", "1y", "-5s", "abc", "5 minutes", "h", "1h30m", False, None])
def test_parse_duration_invalid(value):
    with pytest.raises(UsageError) as exc:
        parse_duration(value, "ttl")
    assert str(exc.value) == f"invalid ttl {value!r}: expected e.g. 30d, 6h, 90m or a number of seconds"


# ---- secrets with characters no credential has ----------------------------------------------------

BAD_SECRETS = [("FwoGZXIvYXdzEJrTOKENSECRETVALUE==\r", "line break"), ("FwoGZXIvYXdzEJrTOKENSECRETVALUE==\n", "line break"),
               ("FwoGZXIvYXdzEJrTOKEN\nSECRETVALUE==", "line break"), ("FwoGZXIvYXdz EJrTOKENSECRETVALUE", "whitespace"),
               ("FwoGZXIvYXdzEJrTOKENSECRETVALUE\t", "whitespace"), ("FwoGZXIvYXdzEJrTOKENSECRETVALUEé", "non-ASCII"),
               ("FwoGZXIvYXdzEJrTOKENSECRETVALUE\x00", "control character")]


def _assert_secret_refused(e: pytest.ExceptionInfo, value: str, *names: str) -> None:
    message = str(e.value) + (e.value.hint or "")
    assert e.value.exit_code == 2
    assert "TOKENSECRET" not in message and value not in message and repr(value) not in message, message
    assert "\n" not in str(e.value) and "\r" not in str(e.value)
    for name in names:
        assert name in str(e.value), (name, str(e.value))


@pytest.mark.parametrize("value,why", BAD_SECRETS)
@pytest.mark.parametrize("key", ["s3_access_key_id", "s3_secret_access_key", "s3_session_token", "kafka_sasl_password",
                                 "kafka_ssl_password"])
def test_secret_settings_with_control_space_or_non_ascii_characters_are_refused(env, key, value, why):
    with pytest.raises(ConfigError) as e:
        resolve({key: value}, env=env)
    _assert_secret_refused(e, value, key, f"--{key.replace('_', '-')}", why)
    env_name = "STATECTL_" + key.upper()
    with pytest.raises(ConfigError) as e:
        resolve(NO_FLAGS, env=dict(env, **{env_name: value}))
    _assert_secret_refused(e, value, key, f"env {env_name}", why)
    write("statectl.toml", f"[default]\n{key} = {json.dumps(value)}\n")
    with pytest.raises(ConfigError) as e:
        resolve(NO_FLAGS, env=env)
    _assert_secret_refused(e, value, "statectl.toml", key, why)


def test_a_secret_of_the_wrong_type_in_the_profile_is_not_shown(env):
    write("statectl.toml", "[default]\ns3_secret_access_key = 123456789\n")
    with pytest.raises(ConfigError) as e:
        resolve(NO_FLAGS, env=env)
    _assert_secret_refused(e, "123456789", "s3_secret_access_key")


@pytest.mark.parametrize("name", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"])
def test_aws_env_secrets_are_checked_when_botocore_would_use_them(env, name):
    value = "FwoGZXIvYXdzEJrTOKENSECRETVALUE==\r"
    aws = dict(env, **{name: value})
    with pytest.raises(ConfigError) as e:
        resolve({"blobstore": "s3://bucket/p"}, env=aws)
    _assert_secret_refused(e, value, f"env {name}", "line break")
    # Not read at all: a file:// blob store, statectl's own keys, or an AWS profile (botocore then
    # ignores the AWS_* credentials).
    resolve({"blobstore": "file:///tmp/x"}, env=aws)
    resolve({"blobstore": "s3://bucket/p", "s3_access_key_id": "AK", "s3_secret_access_key": "SK"}, env=aws)
    resolve({"blobstore": "s3://bucket/p", "s3_profile": "prod"}, env=aws)


def test_ordinary_secrets_pass(env):
    token = "FwoGZXIvYXdzEJr//////////wEaDEXAMPLE+token/with=signs=="
    s = resolve({"s3_access_key_id": "AKIAIOSFODNN7EXAMPLE", "s3_secret_access_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCY",
                 "s3_session_token": token}, env=dict(env, AWS_SESSION_TOKEN=token))
    assert s.s3_session_token == token


# ---- Kafka security: TLS and SASL ------------------------------------------------------------------

SASL_ENV = {"STATECTL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "STATECTL_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "STATECTL_KAFKA_SASL_USERNAME": "statectl", "STATECTL_KAFKA_SASL_PASSWORD": "Kafka-pw-from-env-1"}


def test_kafka_security_defaults(env):
    s = resolve(NO_FLAGS, env=env)
    assert (s.kafka_security_protocol, s.kafka_ssl_check_hostname) == ("PLAINTEXT", True)
    for key in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password", "kafka_ssl_cafile",
                "kafka_ssl_certfile", "kafka_ssl_keyfile", "kafka_ssl_password"):
        assert (getattr(s, key), s.source(key)) == (None, "default"), key


def test_kafka_security_from_profile_and_env(env, tmp_path):
    ca = write(tmp_path / "pki" / "ca.pem", "x")
    write("statectl.toml", f"""\
[default]
kafka = "b1:9093"
kafka_security_protocol = "sasl_ssl"
kafka_sasl_mechanism = "scram-sha-256"
kafka_sasl_username = "from-profile"
kafka_sasl_password = "Kafka-pw-from-profile-1"
kafka_ssl_cafile = "{ca}"
kafka_ssl_check_hostname = false
""")
    s = resolve(NO_FLAGS, env=dict(env, STATECTL_KAFKA_SASL_PASSWORD="Kafka-pw-from-env-1",
                                   STATECTL_KAFKA_SASL_MECHANISM="SCRAM-SHA-512"))
    profile = "profile default (statectl.toml)"
    assert (s.kafka_security_protocol, s.source("kafka_security_protocol")) == ("SASL_SSL", profile)
    assert (s.kafka_sasl_mechanism, s.source("kafka_sasl_mechanism")) == (
        "SCRAM-SHA-512", "env STATECTL_KAFKA_SASL_MECHANISM")  # env beats the profile
    assert (s.kafka_sasl_username, s.source("kafka_sasl_username")) == ("from-profile", profile)
    assert (s.kafka_sasl_password, s.source("kafka_sasl_password")) == (
        "Kafka-pw-from-env-1", "env STATECTL_KAFKA_SASL_PASSWORD")
    assert (s.kafka_ssl_cafile, s.kafka_ssl_check_hostname) == (str(ca), False)
    assert s.masked("kafka_sasl_password") == "****" and s.masked("kafka_sasl_username") == "from-profile"
    # flags beat both (the CLI may offer them; resolve takes any key)
    s = resolve({"kafka_sasl_username": "from-flag"}, env=dict(env, **SASL_ENV, STATECTL_KAFKA_SSL_CAFILE=str(ca)))
    assert (s.kafka_sasl_username, s.source("kafka_sasl_username")) == ("from-flag", "flag")


def test_kafka_file_paths_expand_the_home_dir(env, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    ca = write(tmp_path / "home" / "ca.pem", "x")
    s = resolve(NO_FLAGS, env=dict(env, STATECTL_KAFKA_SECURITY_PROTOCOL="SSL", STATECTL_KAFKA_SSL_CAFILE="~/ca.pem"))
    assert s.kafka_ssl_cafile == str(ca)


@pytest.mark.parametrize("extra, message", [
    ({"STATECTL_KAFKA_SASL_PASSWORD": ""},  # empty = unset
     "kafka_security_protocol (env STATECTL_KAFKA_SECURITY_PROTOCOL) is SASL_SSL, which needs kafka_sasl_password: "
     "it is not set"),
    ({"STATECTL_KAFKA_SECURITY_PROTOCOL": "SSL"},
     "kafka_sasl_mechanism (env STATECTL_KAFKA_SASL_MECHANISM) is set, but kafka_security_protocol (env "
     "STATECTL_KAFKA_SECURITY_PROTOCOL) is SSL: SASL settings need SASL_PLAINTEXT or SASL_SSL"),
    ({"STATECTL_KAFKA_SECURITY_PROTOCOL": "", "STATECTL_KAFKA_SASL_MECHANISM": "", "STATECTL_KAFKA_SASL_USERNAME": ""},
     "kafka_sasl_password (env STATECTL_KAFKA_SASL_PASSWORD) is set, but kafka_security_protocol is PLAINTEXT: SASL "
     "settings need SASL_PLAINTEXT or SASL_SSL"),
    ({"STATECTL_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "STATECTL_KAFKA_SSL_CAFILE": "/etc/ca.pem"},
     "kafka_ssl_cafile (env STATECTL_KAFKA_SSL_CAFILE) is set, but kafka_security_protocol (env "
     "STATECTL_KAFKA_SECURITY_PROTOCOL) is SASL_PLAINTEXT: TLS settings need SSL or SASL_SSL"),
    ({"STATECTL_KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"},
     "kafka_ssl_cafile (env STATECTL_KAFKA_SSL_CAFILE): /nonexistent/ca.pem does not exist"),
    ({"STATECTL_KAFKA_SSL_CERTFILE": "/"}, "kafka_ssl_certfile (env STATECTL_KAFKA_SSL_CERTFILE): / is a directory"),
    ({"STATECTL_KAFKA_SSL_PASSWORD": "Key-pw-123"},
     "kafka_ssl_password (env STATECTL_KAFKA_SSL_PASSWORD) is set, but there is no kafka_ssl_certfile: the key and its "
     "password belong to a client certificate"),
])
def test_kafka_security_combinations_that_cannot_work(env, extra, message):
    with pytest.raises(ConfigError) as e:
        resolve(NO_FLAGS, env={**env, **SASL_ENV, **extra})
    assert str(e.value) == message
    assert e.value.exit_code == 2 and e.value.hint
    shown = str(e.value) + e.value.hint
    assert "Kafka-pw-from-env-1" not in shown and "Key-pw-123" not in shown


def test_kafka_keyfile_needs_a_certfile(env, tmp_path):
    key = write(tmp_path / "client.key", "x")
    with pytest.raises(ConfigError, match=r"^kafka_ssl_keyfile \(flag\) is set, but there is no kafka_ssl_certfile"):
        resolve({"kafka_security_protocol": "SSL", "kafka_ssl_keyfile": str(key)}, env=env)


@pytest.mark.parametrize("line, key", [
    ('kafka_security_protocol = "TLS"', "kafka_security_protocol"),
    ('kafka_sasl_mechanism = "GSSAPI"', "kafka_sasl_mechanism"),
    ('kafka_ssl_check_hostname = "perhaps"', "kafka_ssl_check_hostname"),
    ('kafka_ssl_cafile = ""', "kafka_ssl_cafile"),
    ('kafka_sasl_username = " padded "', "kafka_sasl_username"),
])
def test_bad_kafka_security_values(env, line, key):
    write("statectl.toml", f"[default]\n{line}\n")
    with pytest.raises(ConfigError) as e:
        resolve(NO_FLAGS, env=env)
    assert str(e.value).startswith(f"statectl.toml: [default] key {key!r}: invalid value ")


def test_kafka_files_of_a_profile_not_in_use_are_not_checked(env):
    write("statectl.toml", '[default]\njob = "j"\n\n[prod]\nkafka_security_protocol = "SSL"\n'
                           'kafka_ssl_cafile = "/only/on/the/prod/machines/ca.pem"\n')
    assert resolve(NO_FLAGS, env=env).kafka_ssl_cafile is None
    with pytest.raises(ConfigError, match=r"^kafka_ssl_cafile \(profile prod \(statectl.toml\)\): /only/on"):
        resolve(NO_FLAGS, profile="prod", env=env)


def test_config_show_never_prints_the_kafka_passwords(tmp_path, monkeypatch):
    """`statectl config show`, text and JSON, with the passwords from the environment and the profile."""
    from typer.testing import CliRunner

    from statectl.cli.main import app

    for name in list(os.environ):
        if name.startswith("STATECTL_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    cert = write(tmp_path / "client.pem", "x")
    write("statectl.toml", f'[default]\nkafka_ssl_certfile = "{cert}"\nkafka_ssl_password = "Key-pw-from-profile-7"\n')
    env = dict(SASL_ENV, STATECTL_KAFKA_SASL_PASSWORD="Sasl-pw-from-env-7")
    runner = CliRunner()
    for args in (["config", "show"], ["-o", "json", "config", "show"]):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 0, result.output
        out = result.stdout + result.stderr
        assert "Sasl-pw-from-env-7" not in out and "Key-pw-from-profile-7" not in out
        assert "kafka_sasl_password" in out and "statectl" in out
    rows = {r["key"]: r for r in json.loads(result.stdout)["settings"]}
    assert rows["kafka_sasl_password"] == {"key": "kafka_sasl_password", "value": "****",
                                           "source": "env STATECTL_KAFKA_SASL_PASSWORD"}
    assert rows["kafka_ssl_password"]["value"] == "****" and rows["kafka_sasl_username"]["value"] == "statectl"
    # An error that quotes the password (as a library's might) is masked too, and a refused password is not shown.
    bad = runner.invoke(app, ["config", "show"], env=dict(env, STATECTL_KAFKA_SASL_PASSWORD="Sasl-pw-with-CR-7\r"))
    assert bad.exit_code == 2
    assert "Sasl-pw-with-CR-7" not in bad.stdout + bad.stderr
    assert "kafka_sasl_password from env STATECTL_KAFKA_SASL_PASSWORD: invalid value: it contains a line break" in \
        bad.stderr


def test_config_show_prints_sizes_and_durations_as_a_user_writes_them(tmp_path, monkeypatch):
    """Text: 64MiB, 6h, 90s as a config file would say them (and read back to the same values); JSON: the
    bytes and seconds."""
    from typer.testing import CliRunner

    from statectl.cli.main import app

    for name in list(os.environ):
        if name.startswith("STATECTL_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    write("statectl.toml", '[default]\nchunk_size = "8MiB"\nttl = "90s"\nlimit_rate = "500k"\n')
    runner = CliRunner()
    text = runner.invoke(app, ["config", "show"])
    assert text.exit_code == 0, text.output
    shown = {line.split()[0]: line.split()[1] for line in text.stdout.splitlines()[3:] if len(line.split()) >= 3}
    assert shown["chunk_size"] == "8MiB" and shown["ttl"] == "90s" and shown["grace"] == "6h"
    assert shown["limit_rate"] == "500KiB/s"
    assert parse_size(shown["chunk_size"]) == 8 * 1024 * 1024 and parse_duration(shown["grace"]) == 6 * 3600
    rows = {r["key"]: r for r in json.loads(runner.invoke(app, ["-o", "json", "config", "show"]).stdout)["settings"]}
    assert rows["chunk_size"]["value"] == 8 * 1024 * 1024 and rows["ttl"]["value"] == 90
    assert rows["limit_rate"]["value"] == 500 * 1024


def test_limit_rate_from_a_profile_and_off_from_a_flag(env):
    write("statectl.toml", '[default]\nlimit_rate = "20MiB/s"\n[slow]\nlimit_rate = "500KiB/s"\n')
    s = resolve(NO_FLAGS, env=env)
    assert s.limit_rate == 20 * 1024 * 1024 and s.source("limit_rate").startswith("profile default")
    assert resolve(NO_FLAGS, profile="slow", env=env).limit_rate == 500 * 1024
    s = resolve({"limit_rate": "off"}, env=env)  # one run without the profile's limit
    assert s.limit_rate is None and s.source("limit_rate") == "flag"


@pytest.mark.parametrize("value", ['"0"', '"-20MiB/s"', '"fast"', "0", '"50"'])
def test_a_bad_limit_rate_in_a_profile_is_a_config_error(env, value):
    write("statectl.toml", f"[default]\nlimit_rate = {value}\n")
    with pytest.raises(ConfigError) as exc:
        resolve(NO_FLAGS, env=env)
    assert "key 'limit_rate': invalid value" in str(exc.value) and "\n" not in str(exc.value)
    assert exc.value.exit_code == 2


# -- S3 server-side encryption ------------------------------------------------------------------------

def test_sse_settings_from_flags_env_and_profile(env):
    s = resolve({"sse": "aws:kms", "sse_kms_key_id": "alias/backups"}, env=env)
    assert (s.sse, s.sse_kms_key_id) == ("aws:kms", "alias/backups")
    assert resolve(NO_FLAGS, env=dict(env, STATECTL_SSE="AES256")).sse == "AES256"
    write("statectl.toml", '[default]\nsse = "aws:kms"\nsse_kms_key_id = "arn:aws:kms:eu-west-1:1:key/k"\n')
    s = resolve(NO_FLAGS, env=env)
    assert (s.sse, s.sse_kms_key_id) == ("aws:kms", "arn:aws:kms:eu-west-1:1:key/k")
    assert resolve(NO_FLAGS, env=env, config="statectl.toml").source("sse").startswith("profile default")
    # --sse aws:kms over the profile's keeps the profile's key; AES256 over it replaces the pair.
    assert resolve({"sse": "aws:kms"}, env=env).sse_kms_key_id == "arn:aws:kms:eu-west-1:1:key/k"
    s = resolve({"sse": "AES256"}, env=env)
    assert (s.sse, s.sse_kms_key_id) == ("AES256", None)
    assert resolve(NO_FLAGS, env=dict(env, STATECTL_SSE="AES256")).sse_kms_key_id is None


@pytest.mark.parametrize("flags, message", [
    ({"sse": "aes256"}, "--sse: invalid value 'aes256' (expected AES256 or aws:kms)"),
    ({"sse": "aws:kms:dsse"}, "--sse: invalid value 'aws:kms:dsse' (expected AES256 or aws:kms)"),
    ({"sse_kms_key_id": "k"}, "--sse-kms-key-id needs --sse aws:kms, not none"),
    ({"sse": "AES256", "sse_kms_key_id": "k"}, "--sse-kms-key-id needs --sse aws:kms, not AES256"),
    ({"sse": "aws:kms", "sse_kms_key_id": "two words"}, "--sse-kms-key-id: invalid value 'two words'"),
    ({"sse": "aws:kms", "sse_kms_key_id": ""}, "--sse-kms-key-id: invalid value ''"),
])
def test_sse_flags_that_cannot_work_are_usage_errors(env, flags, message):
    with pytest.raises(UsageError) as exc:
        resolve(flags, env=env)
    assert not isinstance(exc.value, ConfigError)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_a_kms_key_without_aws_kms_in_env_or_profile_is_a_config_error(env):
    with pytest.raises(UsageError, match=r"^--sse-kms-key-id needs --sse aws:kms, not AES256 \(env STATECTL_SSE\)$"):
        resolve({"sse_kms_key_id": "k"}, env=dict(env, STATECTL_SSE="AES256"))
    write("statectl.toml", '[default]\nsse_kms_key_id = "k"\n')
    with pytest.raises(ConfigError, match=r"^sse_kms_key_id \(profile default \(statectl.toml\)\) needs sse aws:kms, "
                                          r"not none$"):
        resolve(NO_FLAGS, env=env)
    with pytest.raises(ConfigError, match=r"not AES256 \(env STATECTL_SSE\)$"):
        resolve(NO_FLAGS, env=dict(env, STATECTL_SSE_KMS_KEY_ID="k2", STATECTL_SSE="AES256"))
    write("statectl.toml", '[default]\nsse = "aws"\n')
    with pytest.raises(ConfigError, match="key 'sse': invalid value 'aws' \\(expected AES256 or aws:kms\\)"):
        resolve(NO_FLAGS, env=env)
