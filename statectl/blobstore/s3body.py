"""A GetObject body read straight into its destination's buffer, for a destination that offers one.

botocore's ``StreamingBody.read`` returns each piece of a body as a new bytes object (http.client's read of
the socket, passed up through urllib3 unchanged: botocore asks it not to decode), which the destination then
copies where it wants it. A destination with ``recv_buffer()`` and ``received(n)`` (transfer.sink.CrcSink)
gets the bytes from the socket into its own buffer instead, through http.client's ``readinto``: no bytes
object, no copy. That response is reached through two attributes the libraries do not document
(``StreamingBody._raw_stream``, urllib3's ``HTTPResponse._fp``); where they are not what this expects, where
urllib3 would decode the body, or the body is chunked, ``http_response`` says so and the caller reads as
before. Errors are botocore's own for the same failures, so the store maps them as it maps a ``read``'s.
"""

from __future__ import annotations

import http.client
from typing import Any


def http_response(body: Any) -> http.client.HTTPResponse | None:
    """The http.client response under ``body`` (botocore's StreamingBody) when its bytes may be read straight
    off it: urllib3 neither decodes them nor has read any yet, and the body has a Content-Length. Else None."""
    raw = getattr(body, "_raw_stream", None)
    fp = getattr(raw, "_fp", None)
    if not isinstance(fp, http.client.HTTPResponse) or fp.chunked or fp.length is None:
        return None
    if getattr(raw, "decode_content", True) or not callable(getattr(raw, "release_conn", None)):
        return None
    try:
        if raw.tell() != 0:
            return None
    except (AttributeError, TypeError):
        return None
    return fp


def read_into(body: Any, fp: http.client.HTTPResponse, dst: Any, endpoint: str) -> int:
    """Read what is left of ``fp`` (``http_response(body)``) into ``dst``'s buffers; the bytes read.

    Fails as botocore's reads do: a body shorter than its Content-Length is an IncompleteReadError, a socket
    timeout a ReadTimeoutError, another socket or protocol error a ResponseStreamingError; whatever ``dst``
    raises passes. A body read to its end gives its connection back to urllib3's pool; one that fails leaves
    it to ``body.close()``, which closes it (a connection with unread bytes is never reused)."""
    from botocore import exceptions as bx
    from urllib3.exceptions import ProtocolError

    expected = fp.length or 0
    written = 0
    while fp.length:
        view = dst.recv_buffer()
        try:
            n = fp.readinto(view)
        except TimeoutError as e:
            raise bx.ReadTimeoutError(endpoint_url=endpoint, error=e) from e
        except (OSError, http.client.HTTPException) as e:  # wrapped as urllib3 and botocore wrap them
            raise bx.ResponseStreamingError(error=ProtocolError(f"Connection broken: {e!r}", e)) from e
        if not n:
            raise bx.IncompleteReadError(actual_bytes=written, expected_bytes=expected)
        dst.received(n)
        written += n
    body._raw_stream.release_conn()  # read to its end: http.client closed its side, the socket is reusable
    return written
