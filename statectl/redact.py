"""Secrets never reach output: errors, hints, tracebacks, ``--debug`` logs, notes, text and JSON results.

Masking happens at the output edge, on whatever text is about to be written, rather than in each message:
a secret can arrive inside a library's exception or log record that statectl did not word. Masked are
the values of the secret settings (S3 secret key and session token, the access key id the config marks
secret, the Kafka SASL password and TLS key password), the same from the AWS_* and STATECTL_* environment,
the password of any ``scheme://user:pass@host`` and the values of secret-looking query parameters
(``?X-Amz-Signature=...``, ``&token=...``).

A registered secret is masked in every form it is printed in, not only as itself: URL-encoded, as the
inside of its ``repr()`` (``\\r``, ``\\n``, ``\\xe9``), as the inside of the ``b'...'`` literal of its
UTF-8 bytes (how botocore logs and rejects header values), JSON-escaped, and each of those once more
with its backslashes doubled (a repr inside a repr). The config refuses secrets with control, space or
non-ASCII characters in the first place (check_secret, used by statectl.config), so these forms matter
for secrets that reach statectl another way (~/.aws, URLs).

The userinfo of a URL is everything between ``://`` and the last ``@`` of the URL token (the text up
to whitespace, a quote, a backtick or angle bracket): a raw ``@``, ``/``, ``:`` or ``#`` in a password
is masked with the rest of it. A URL whose path holds an ``@`` after a ``host:port`` is masked from the
port on: an over-masked path is a lesser evil than a half-masked password.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Iterable, Mapping
from urllib.parse import quote, unquote

MASK = "****"
MIN_SECRET = 4  # shorter values would mask ordinary words
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "STATECTL_S3_SECRET_ACCESS_KEY",
              "STATECTL_S3_SESSION_TOKEN", "STATECTL_S3_ACCESS_KEY_ID", "STATECTL_KAFKA_SASL_PASSWORD",
              "STATECTL_KAFKA_SSL_PASSWORD")
_TOKEN_END = r"\s'\"`<>"
# Linear-time matching only: statectl prints keys, run ids and paths an operator chose, of any length. The
# scans below never backtrack over more than a bounded stretch (a regex like ``[a-z][a-z0-9]*://`` tried at
# every position of a 1 MiB alphanumeric run is quadratic), and each part of the text is scanned O(1) times.
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_SCHEME_CHARS = _LETTERS | frozenset("0123456789+.-")
_USER = re.compile(rf"[^/:{_TOKEN_END}]*")  # the user of scheme://user:pw@ (stops at the next ':' or '/')
_TOKEN = re.compile(rf"[^{_TOKEN_END}]*")   # the rest of the URL token
# A parameter name is bounded (64 characters either side of the secret-looking word), so a long run of
# name characters after '?' or '&' costs a bounded amount of backtracking per start, not the run's square.
_NAME = r"[A-Za-z0-9_.-]{0,64}"
_SECRET_QUERY = re.compile(
    rf"(?P<key>[?&;](?:{_NAME}(?:secret|token|passw(?:or)?d|pwd|signature|credential|api[_-]?key"
    rf"|access[_-]?key){_NAME}|sig)=)(?P<value>[^&#{_TOKEN_END}]+)", re.IGNORECASE)
_secrets: set[str] = set()
_lock = threading.Lock()


def printed_forms(value: str) -> set[str]:
    """The ways ``value`` can appear in printed text: itself, URL-encoded, repr-, unicode-escape-,
    bytes-literal- and JSON-escaped, and the escaped ones with their backslashes doubled."""
    escaped = {
        repr(value)[1:-1],
        value.encode("unicode_escape").decode("ascii"),
        repr(value.encode("utf-8", "surrogatepass"))[2:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    forms = {value, quote(value, safe="")} | escaped
    forms |= {f.replace("\\", "\\\\") for f in escaped if "\\" in f}
    return forms


def url_passwords(text: str) -> list[tuple[int, int, int]]:
    """Where ``text`` holds URL passwords: (start, colon, at) per ``scheme://user:pw@`` (the password is
    ``text[colon + 1:at]``; the URL starts at ``start``), left to right, not overlapping. The password runs
    to the last ``@`` of its URL token. Linear in ``len(text)``: it is what every printed line goes
    through (see the note on _SCHEME_CHARS)."""
    found: list[tuple[int, int, int]] = []
    resume = 0                     # matches do not overlap: the next one starts after the last '@'
    run: tuple[int, int, int] = (-1, -1, -1)  # (from, token end, last '@' in it): one scan per token
    i = text.find("://")
    while i >= 0:
        start = i
        while start > resume and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < i and text[start] not in _LETTERS:  # a scheme starts with a letter
            start += 1
        user_end = _USER.match(text, i + 3).end()
        if start < i and user_end < len(text) and text[user_end] == ":":
            pw = user_end + 1
            if not (run[0] <= pw <= run[1]):
                end = _TOKEN.match(text, pw).end()
                run = (pw, end, text.rfind("@", pw, end))
            at = run[2]
            if at > pw:  # a password of one character or more
                found.append((start, user_end, at))
                resume = at + 1
                i = text.find("://", resume)
                continue
        i = text.find("://", i + 1)
    return found


def check_secret(value: str) -> None:
    """Raise ValueError, without the value, unless ``value`` is printable ASCII without whitespace.

    Access keys, secret keys and session tokens never hold anything else, and statectl holds the passwords it
    takes (Kafka SASL, TLS key) to the same rule: a trailing newline or CR from a file, or a non-ASCII
    character, would only make the HTTP or Kafka layer fail with the value in its message. statectl.config
    refuses such settings with it.
    """
    for ch in value:
        if ch in "\r\n":
            raise ValueError("it contains a line break (a trailing newline, or CRLF line ends?)")
        if ch.isspace():
            raise ValueError("it contains whitespace")
        if not ch.isascii():
            raise ValueError("it contains a non-ASCII character")
        if not ch.isprintable():
            raise ValueError("it contains a control character")


def add_secret(value: object) -> None:
    """Mask ``value`` in every printed form (see printed_forms) from now on, wherever it appears."""
    if not isinstance(value, str) or len(value) < MIN_SECRET:
        return
    forms = printed_forms(value)
    with _lock:
        _secrets.update(forms)


def add_secrets(values: Iterable[object]) -> None:
    for v in values:
        add_secret(v)


def add_url(url: object) -> None:
    """Mask the password of a URL with userinfo (everything after ``user:`` up to the last ``@``), in
    its URL-encoded and decoded forms, and the values of its secret-looking query parameters."""
    if not isinstance(url, str):
        return
    for _, colon, at in url_passwords(url):
        pw = url[colon + 1:at]
        add_secrets((pw, unquote(pw)))
    for m in _SECRET_QUERY.finditer(url):
        add_secrets((m["value"], unquote(m["value"])))


def add_from_env(env: Mapping[str, str] = os.environ) -> None:
    add_secrets(env.get(name) for name in SECRET_ENV)
    add_url(env.get("STATECTL_S3_ENDPOINT"))
    add_url(env.get("AWS_ENDPOINT_URL"))


def redact(text: str) -> str:
    """``text`` with every known secret (in any printed form), URL password and secret query value
    replaced by ****."""
    if not text:
        return text
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    parts, last = [], 0
    for _, colon, at in url_passwords(text):
        parts += [text[last:colon], f":{MASK}@"]
        last = at + 1
    text = "".join(parts) + text[last:] if parts else text
    return _SECRET_QUERY.sub(lambda m: m["key"] + MASK, text)


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
