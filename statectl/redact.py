"""Secrets never reach output: errors, hints, tracebacks, ``--debug`` logs, notes, text and JSON results.

Masking happens at the output edge, on whatever text is about to be written, rather than in each message:
a secret can arrive inside a library's exception or log record that statectl did not word. Masked are
the values of the secret settings (S3 secret key and session token, and the access key id the config
marks secret), the same from the AWS_* environment, and the password of any ``scheme://user:pass@host``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Iterable, Mapping
from urllib.parse import quote, urlparse

MASK = "****"
MIN_SECRET = 4  # shorter values would mask ordinary words
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "STATECTL_S3_SECRET_ACCESS_KEY",
              "STATECTL_S3_SESSION_TOKEN", "STATECTL_S3_ACCESS_KEY_ID")
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s'\"]*):(?P<pw>[^/@\s'\"]+)@")
_secrets: set[str] = set()
_lock = threading.Lock()


def add_secret(value: object) -> None:
    """Mask ``value`` (and its URL-encoded form) from now on, wherever it appears."""
    if not isinstance(value, str) or len(value) < MIN_SECRET:
        return
    with _lock:
        _secrets.update({value, quote(value, safe="")})


def add_secrets(values: Iterable[object]) -> None:
    for v in values:
        add_secret(v)


def add_url(url: object) -> None:
    """Mask the password of a URL with userinfo."""
    if isinstance(url, str) and "@" in url:
        try:
            add_secret(urlparse(url).password)
        except ValueError:
            pass


def add_from_env(env: Mapping[str, str] = os.environ) -> None:
    add_secrets(env.get(name) for name in SECRET_ENV)
    add_url(env.get("STATECTL_S3_ENDPOINT"))
    add_url(env.get("AWS_ENDPOINT_URL"))


def redact(text: str) -> str:
    """``text`` with every known secret and URL password replaced by ****."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    return text


class RedactingFilter(logging.Filter):
    """A handler filter that masks secrets in each record's formatted message (args included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not match its format: leave it to logging
            return True
        record.msg, record.args = redact(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
