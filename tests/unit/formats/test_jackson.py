"""formats/jackson.py: JSON string escaping exactly as Jackson's, checked against a char-by-char model.

The model and the literal cases below were checked against jackson-core's own UTF8JsonGenerator
(``writeValueAsBytes``) and WriterBasedJsonGenerator (``writeValueAsString``); the literals are their output.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.formats.jackson import json_string, to_json, to_json_text

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def jackson_model(s: str, escape_surrogates: bool = False) -> str:
    """Jackson's escaping, one UTF-16 char at a time: short forms, other controls as upper-case \\u00XX and,
    for UTF8JsonGenerator (``escape_surrogates``), every surrogate as upper-case \\uXXXX."""
    units = s.encode("utf-16-be", "surrogatepass")
    out = []
    for i in range(0, len(units), 2):
        u = (units[i] << 8) | units[i + 1]
        c = chr(u)
        if c in _SHORT:
            out.append(_SHORT[c])
        elif u < 0x20 or (escape_surrogates and 0xD800 <= u <= 0xDFFF):
            out.append(f"\\u{u:04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def utf16(s: str) -> bytes:
    """The string as Java holds it: a pair of surrogate code points and the character they make are equal."""
    return s.encode("utf-16-be", "surrogatepass")


ANY_TEXT = st.text(st.characters()) | st.text(alphabet='\\u001fabcdef"\x1f\x00\n\U0001F600\ud800\udc00')


@settings(max_examples=500)
@given(ANY_TEXT)
def test_json_string_matches_jackson(s: str):
    assert utf16(json_string(s)) == utf16(jackson_model(s))
    assert json_string(s, escape_surrogates=True) == jackson_model(s, escape_surrogates=True)


@pytest.mark.parametrize("s, utf8_generator, writer_generator", [
    # (input, writeValueAsBytes, writeValueAsString as UTF-8 or None when the same), from jackson-core itself
    ("".join(map(chr, range(0x20))),
     (b'"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000B\\f\\r\\u000E\\u000F'
      b'\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001A\\u001B\\u001C\\u001D'
      b'\\u001E\\u001F"'), None),
    (' !"/\\\x7f', b'" !\\"/\\\\\x7f"', None),
    ("\u2028\u00a0\ufeff\uffff", b'"\xe2\x80\xa8\xc2\xa0\xef\xbb\xbf\xef\xbf\xbf"', None),
    ("\U0001F600 \U00010000 \U0010FFFF", b'"\\uD83D\\uDE00 \\uD800\\uDC00 \\uDBFF\\uDFFF"',
     '"\U0001F600 \U00010000 \U0010FFFF"'.encode()),
    ("\ud83d\ude00", b'"\\uD83D\\uDE00"', None),  # a pair as two code points: the same to Java
    ("\ud800", b'"\\uD800"', None),
    ("\udc00x", b'"\\uDC00x"', None),
    ("a\\u001fb", b'"a\\\\u001fb"', None),
])
def test_jackson_bytes(s, utf8_generator, writer_generator):
    assert to_json(s) == utf8_generator
    assert to_json({s: [s, 1, None, True]}) == b"{" + utf8_generator + b":[" + utf8_generator + b",1,null,true]}"
    if writer_generator is not None:
        assert to_json_text(s).encode() == writer_generator


def test_other_values_are_refused():
    with pytest.raises(TypeError):
        to_json({"a": 1.5})
    with pytest.raises(TypeError):
        to_json_text({1, 2})
