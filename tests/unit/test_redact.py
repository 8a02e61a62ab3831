"""Masking at the output edge (statectl.redact); end to end in tests/integration/test_hostile_endpoints.py."""

from __future__ import annotations

import logging

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
