"""How statectl makes botocore's S3 client: its Config (no retries of its own, statectl's timeouts, payload
signing only where a body can be altered on the way), the credentials botocore resolves by itself masked
in logs, and a buffered response shorter than its Content-Length refused instead of parsed as empty; the
service models botocore loads, loaded once per process."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from statectl import __version__
from statectl.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from statectl.blobstore import S3Options

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

# botocore's data loader (the S3 service model, endpoints and partitions: parsed JSON it never changes),
# shared by every session of the process. A new session would parse them again: 0.07-0.10 s of CPU for
# each client, against 0.01 s with the loader of an earlier one, and a command opens several clients
# (its blob store, its checkpoints, a copy's target).
_loader: Any = None
_loader_lock = threading.Lock()
_models_frozen = False  # new_client: the first client's objects are left out of the collector's walks


def _shared_loader(session: Any) -> None:
    """Give ``session`` the process's data loader (the first session's), unless its data_path setting
    (AWS_DATA_PATH) asks for models of its own."""
    global _loader
    if session.get_config_variable("data_path"):
        return
    with _loader_lock:
        if _loader is None:
            _loader = session.get_component("data_loader")
        else:
            session.register_component("data_loader", _loader)


def _client_config(options: "S3Options") -> Any:
    """botocore's Config for the client: no retries of its own, statectl's timeouts and pool size."""
    from botocore.config import Config

    loopback = bool(options.endpoint_url) and urlparse(options.endpoint_url).hostname in _LOOPBACK
    # A signed payload makes botocore read every body twice: a SHA-256 pass before the request, then
    # the send (with request_checksum_calculation="when_required" it signs even over https). Over TLS
    # or loopback nothing can alter the body on the way, and every file's CRC32 is in the index and
    # checked on restore, so the body is signed only on plain http across a network.
    tls = (options.endpoint_url or "https://").lower().startswith("https://")
    sign_payload = not (tls or loopback)
    return Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        # An empty dict, not None: botocore then ignores HTTP(S)_PROXY, which cannot reach loopback.
        proxies={} if loopback else None,
        max_pool_connections=options.max_connections,
        connect_timeout=options.timeout_s,
        read_timeout=options.timeout_s,
        s3={"addressing_style": "path" if options.endpoint_url else "auto", "payload_signing_enabled": sign_payload},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        # A fixed User-Agent: botocore otherwise rebuilds and sanitises its own for every request, a
        # tenth of the client's CPU per request when a backup sends thousands of small ones.
        user_agent=f"statectl/{__version__}",
    )


def new_client(options: "S3Options") -> Any:
    """A botocore S3 client for ``options``; ConfigError for an unknown AWS profile.

    The process's first client imports botocore and loads its models: some 70 000 objects that live as long as
    the process and hold no garbage. The cyclic collector is paused meanwhile and then leaves them out of its
    walks (gc.freeze): its collections during that load, and the first ones after it, walked them all, 0.08-0.17 s
    of a restore's start before its first GET (measured at load 10-15). Only cyclic garbage alive at that
    moment is never collected, once per process."""
    import gc

    global _models_frozen
    if _models_frozen or not gc.isenabled():
        return _new_client(options)
    gc.disable()
    try:
        return _new_client(options)
    finally:
        _models_frozen = True
        gc.freeze()
        gc.enable()


def _new_client(options: "S3Options") -> Any:
    try:
        # botocore's own session: what boto3 wraps, without boto3's import cost at every start.
        import botocore.session
        from botocore.exceptions import ProfileNotFound
    except ImportError as e:  # pragma: no cover - boto3 (and so botocore) is a dependency
        raise MissingDependencyError("s3 blob stores need boto3", hint="pip install boto3") from e
    no_profile = ConfigError(f"s3: AWS profile {options.profile!r} not found",
                             hint="check s3_profile, or the profiles in ~/.aws/config")
    session = botocore.session.Session(profile=options.profile)
    kwargs: dict[str, Any] = {"config": _client_config(options)}
    if options.endpoint_url:
        kwargs["endpoint_url"] = options.endpoint_url
        if options.endpoint_url.startswith("http://"):
            kwargs["verify"] = False  # plain http: a CA bundle from the environment must not matter
    if options.access_key_id:
        kwargs["aws_access_key_id"] = options.access_key_id
        kwargs["aws_secret_access_key"] = options.secret_access_key
        kwargs["aws_session_token"] = options.session_token
    try:
        _shared_loader(session)
        kwargs["region_name"] = options.region or session.get_config_variable("region") or "us-east-1"
        client = session.create_client("s3", **kwargs)
    except ProfileNotFound:
        raise no_profile from None
    if not options.access_key_id:
        _mask_resolved_credentials(session)
    client.meta.events.register("before-parse.s3.*", _refuse_short_body)
    return client


def _refuse_short_body(operation_model: Any, response_dict: dict[str, Any], **_: Any) -> None:
    """Raise IncompleteReadError for a buffered response body shorter (or longer) than its Content-Length.

    botocore reads non-streaming bodies with urllib3's length check off and parses an empty body as an
    empty result (only a partial XML document counts as an error): a connection closed right after the
    head would pass a listing off as "no objects" and a tag set as "no TTL". Streaming bodies (get) are
    checked as they are read.
    """
    body = response_dict.get("body")
    if not isinstance(body, (bytes, bytearray)) or operation_model.http.get("method") == "HEAD":
        return
    declared = response_dict.get("headers", {}).get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) != len(body):
        from botocore.exceptions import IncompleteReadError

        raise IncompleteReadError(actual_bytes=len(body), expected_bytes=int(declared))


def _mask_resolved_credentials(session: Any) -> None:
    """Mask the secret key and token botocore found by itself (~/.aws files, a credential process,
    instance roles), which statectl's settings never saw: a --debug log or an error may quote them. The
    session resolved them already to create the client: asking again costs nothing."""
    from statectl import redact

    try:
        creds = session.get_credentials()
        frozen = creds.get_frozen_credentials() if creds is not None else None
    except Exception:  # no credentials, or a provider failing: the first request reports it
        return
    if frozen is not None:
        redact.add_secrets([frozen.secret_key, frozen.token])
