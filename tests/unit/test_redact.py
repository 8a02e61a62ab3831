"""Masking at the output edge (statectl.redact); end to end in tests/integration/test_hostile_endpoints.py."""

from __future__ import annotations

import json
import logging

import pytest
from urllib.parse import quote

from statectl import redact


def test_known_secrets_and_url_passwords_are_masked():
    redact.add_secret("s3cr3t/value+x=")
    redact.add_secret("abc")  # too short to mask safely: ordinary words would go
    text = ("Error: s3: http://bob:hunter22@host:9000/b failed; token s3cr3t/value+x= and s3cr3t%2Fvalue%2Bx%3D; "
            "abc stays")
    assert redact.redact(text) == ("Error: s3: http://bob:****@host:9000/b failed; token **** and ****; abc stays")


def test_log_records_are_masked_args_included(caplog):
    redact.add_secret("TOKEN-123456")
    logger = logging.getLogger("statectl.test")
    handler = logging.StreamHandler()
    handler.addFilter(redact.RedactingFilter())
    record = logging.LogRecord("x", logging.DEBUG, __file__, 1, "headers %s", ({"X-Amz-Security-Token": b"TOKEN-123456"},),
                               None)
    assert handler.filter(record)
    assert "TOKEN-123456" not in record.getMessage() and "****" in record.getMessage()
    logger.debug("nothing secret")


def test_a_secret_is_masked_in_its_repr_escaped_and_bytes_forms():
    """botocore rejects and logs header values as bytes literals; tracebacks show repr()s."""
    token = "FwoGZXIvYXdzEJrTOKENSECRET\r\nVALUE==é\x01"
    redact.add_secret(token)
    printed = [
        f"Invalid header value {token.encode()!r}",                       # b'...\r\n...\xc3\xa9\x01'
        f"headers={{'X-Amz-Security-Token': {token.encode()!r}}}",
        f"ValueError({token!r})",                                           # '...\r\n...é\x01'
        f"escaped {token.encode('unicode_escape').decode()}",               # ...\xe9\x01
        json.dumps({"token": token}), json.dumps({"token": token}, ensure_ascii=False),
        repr(f"outer {token.encode()!r}"),                                  # a repr inside a repr
        f"url ?x={quote(token, safe='')}",
    ]
    for text in printed:
        out = redact.redact(text)
        assert "TOKENSECRET" not in out and "VALUE==" not in out, (text, out)
        assert "****" in out


def test_a_url_password_with_raw_at_slash_colon_and_hash_is_masked_whole():
    endpoint = "http://u:p@ss:w/rdX#1@127.0.0.1:9000"
    for text in (f"Custom endpoint `{endpoint}` was not a valid URI", f"s3_endpoint  {endpoint}  flag",
                 json.dumps({"value": endpoint}), f"at {endpoint}/bucket/key failed"):
        out = redact.redact(text)
        assert "ss:w" not in out and "rdX" not in out, out
        assert "http://u:****@127.0.0.1:9000" in out, out
    # An ordinary URL and one with a user but no password stay as they are.
    for text in ("http://127.0.0.1:9000/bucket/a?list-type=2&prefix=x", "s3://bucket/prefix/key", "http://u@host/x"):
        assert redact.redact(text) == text


def test_add_url_registers_the_whole_password_for_any_printed_form():
    redact.add_url("http://admin:Zq@9/x:#Y@host:9000")
    # The password reaches output without its URL (e.g. in a library's message): still masked.
    assert redact.redact("password 'Zq@9/x:#Y' rejected") == "password '****' rejected"


def test_secret_query_values_are_masked():
    url = ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F2026"
           "&X-Amz-Security-Token=FwoGZXIvYXdz&X-Amz-Signature=abcdef0123&X-Amz-Expires=60")
    out = redact.redact(f"GET {url} failed")
    assert out == ("GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=****"
                   "&X-Amz-Security-Token=****&X-Amz-Signature=****&X-Amz-Expires=60 failed")
    assert redact.redact("http://h/p?token=t0k3n#frag and http://h/p?password=pw&secret=s&a=1") == \
        "http://h/p?token=****#frag and http://h/p?password=****&secret=****&a=1"
    assert redact.redact("http://h/p?sig=abc&prefix=token&list-type=2") == "http://h/p?sig=****&prefix=token&list-type=2"


def test_kafka_passwords_from_the_environment_are_masked_as_kafka_python_logs_them():
    redact.add_from_env({"STATECTL_KAFKA_SASL_PASSWORD": "Sasl-env-pw-31",
                         "STATECTL_KAFKA_SSL_PASSWORD": "Key-env-pw-31"})
    config_log = ("Starting KafkaConsumer with configuration: {'security_protocol': 'SASL_SSL', "
                  "'sasl_plain_username': 'alice', 'sasl_plain_password': 'Sasl-env-pw-31', 'ssl_password': "
                  "'Key-env-pw-31'}")
    wire = b"\x00\x00\x00\x1f\x00$alice\x00alice\x00Sasl-env-pw-31"  # a SASL PLAIN request
    plain_auth_log = f"Send: {wire!r}"
    for text in (config_log, plain_auth_log):
        out = redact.redact(text)
        assert "Sasl-env-pw-31" not in out and "Key-env-pw-31" not in out, out
        assert "alice" in out


@pytest.mark.timeout(60)
def test_redaction_is_linear_in_the_text_length():
    """A 1 MiB key or a 200 KB run id goes through redact() on every line printed: the URL-password and
    secret-parameter scans must not backtrack over it (both took minutes on such input when they were
    regexes tried at every position). The timeout bounds a hang; the figures are in the bench."""
    hostile = ["a" * (1 << 20), "?" + "secret" * 200_000, "&" + "x" * (1 << 20) + "token",
               "a:b://" * 200_000, "http://" + "u:p" * 300_000, "x://a:b" * 100_000 + "@"]
    for text in hostile:
        assert redact.redact(text).count("****") <= 1
    # ...and what it masks in such text is still masked.
    assert redact.redact("k" * 100_000 + " http://u:pw@host " + "k" * 100_000).count("http://u:****@host") == 1


def test_url_passwords_are_found_as_the_url_grammar_says():
    text = "see http://bob:pw1@h/x and s3+x://:pw2@@host and 9ab://u:p@ and a://u/x:y@z and x://u:@h"
    found = [text[c + 1:a] for _, c, a in redact.url_passwords(text)]
    assert found == ["pw1", "pw2@", "p"]
