"""formats/jackson.py: JSON string escaping exactly as Jackson's, checked against a char-by-char model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.formats.jackson import json_string

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def jackson_model(s: str) -> str:
    """Jackson's escaping, one char at a time: short forms, other controls as upper-case \\u00XX."""
    return '"' + "".join(_SHORT.get(c) or (f"\\u{ord(c):04X}" if c < " " else c) for c in s) + '"'


@settings(max_examples=500)
@given(st.text(st.characters(blacklist_categories=("Cs",))) | st.text(alphabet='\\u001fabcdef"\x1f\x00\n'))
def test_json_string_matches_jackson(s: str):
    assert json_string(s) == jackson_model(s)
