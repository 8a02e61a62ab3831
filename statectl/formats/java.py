"""The few java.lang semantics that Samza's formats inherit, reproduced exactly.

Samza reads checkpoint ids with ``Long.parseLong``, offset-file partitions with ``Integer.parseInt``,
checks required strings with commons-lang's ``StringUtils.isBlank`` and checksums strings with
``String.getBytes()`` (UTF-8 on every JVM Samza supports in practice). Each function here is the Python
equivalent, character for character: Java strings are UTF-16, so a character outside the Basic
Multilingual Plane is two ``char`` s to Java, and none of them is a digit or whitespace. The tables come
from :mod:`unicodedata`; tests compare them with the running JDK's over the whole BMP. Pure functions.
"""

from __future__ import annotations

import math
import unicodedata

JAVA_INT_MIN, JAVA_INT_MAX = -(2 ** 31), 2 ** 31 - 1
JAVA_LONG_MIN, JAVA_LONG_MAX = -(2 ** 63), 2 ** 63 - 1

# Character.isWhitespace: SPACE_SEPARATOR, LINE_SEPARATOR and PARAGRAPH_SEPARATOR except the
# non-breaking spaces, plus these controls.
_WHITESPACE_CONTROLS = frozenset("\t\n\u000b\f\r\u001c\u001d\u001e\u001f")
_NON_BREAKING = frozenset("\u00a0\u2007\u202f")


def java_digit(ch: str, radix: int = 10) -> int:
    """``Character.digit(ch, radix)`` for radix 10 or 16: the value of a decimal digit of any script (Unicode
    category Nd) in the BMP, and with radix 16 the Latin letters a-f and A-F (also fullwidth), else -1.
    ``"\\u0661"`` (ARABIC-INDIC ONE) is 1; ``"\\U0001D7CF"`` is -1 (two chars to Java)."""
    if len(ch) != 1 or ord(ch) > 0xFFFF:
        return -1
    if radix == 16:
        o = ord(ch)
        for base in (0x41, 0x61, 0xFF21, 0xFF41):  # A, a, fullwidth A, fullwidth a
            if base <= o < base + 6:
                return o - base + 10
    if unicodedata.category(ch) != "Nd":
        return -1
    return unicodedata.decimal(ch, -1)


def java_parse_long(text: str, *, minimum: int = JAVA_LONG_MIN, maximum: int = JAVA_LONG_MAX,
                    radix: int = 10) -> int | None:
    """``Long.parseLong(text, radix)`` (with the default range) or ``Integer.parseInt`` (with the int range): an
    optional ``+`` or ``-``, then one or more digits in the sense of :func:`java_digit`, within range.

    Returns None where Java throws NumberFormatException: no spaces, underscores, decimal points, exponents
    or non-BMP digits; ``"+"`` and ``"-"`` alone are invalid. ``"+007"`` is 7 and ``"-0"`` is 0, as in Java.
    """
    if not isinstance(text, str) or not text:
        return None
    negative, digits = False, text
    if text[0] < "0":  # Java tests the first char this way: only '+' and '-' may be there
        if text[0] == "-":
            negative = True
        elif text[0] != "+":
            return None
        digits = text[1:]
        if not digits:
            return None
    value = 0
    for ch in digits:
        d = java_digit(ch, radix)
        if d < 0:
            return None
        value = value * radix + d
    if negative:
        value = -value
    return value if minimum <= value <= maximum else None


def java_is_whitespace(ch: str) -> bool:
    """``Character.isWhitespace(ch)`` for one BMP char (a non-BMP char is never whitespace to Java).

    U+180E (MONGOLIAN VOWEL SEPARATOR) counts as whitespace here: it was a space separator in the Unicode
    of Java 8 and is not in later JDKs. Treating it as blank keeps every check built on this one at least
    as strict as the oldest JVM Samza runs on.
    """
    if ch in _WHITESPACE_CONTROLS or ch == "\u180e":
        return True
    if len(ch) != 1 or ord(ch) > 0xFFFF or ch in _NON_BREAKING:
        return False
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp")


def java_is_blank(value: str | None) -> bool:
    """commons-lang3 ``StringUtils.isBlank``: None, ``""``, or nothing but :func:`java_is_whitespace` chars.

    Samza's index classes reject blank names, owners, ids (their constructors' ``isNotBlank`` checks).
    """
    if value and "!" <= value[0] <= "~":  # the usual case, decided by the first char
        return False
    return value is None or all(java_is_whitespace(ch) for ch in value)


def java_utf8(value: str) -> bytes:
    """``value.getBytes(UTF_8)``: UTF-8 of the UTF-16 string, each unpaired surrogate as ``?``.

    A Python str may hold a surrogate pair as two code points (from a JSON ``\\ud83d\\ude00``); to Java
    that is one character, and it is encoded as one (4 bytes).
    """
    if value.isascii():
        return value.encode("ascii")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        # Re-pair surrogates through UTF-16, as Java sees the string, then replace the unpaired ones.
        java = value.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
        return java.encode("utf-8", "replace")


def java_double_to_string(d: float) -> str:
    """``Double.toString(d)`` (JDK 19 and later: the shortest decimal that reads back as ``d``, of at least
    two digits, the closest such when one digit would do): plain for
    10^-3 <= |d| < 10^7 (at least one digit after the point), else ``d.dddE[-]n``."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    sign = "-" if d < 0 else ""
    digits, exp = _shortest(abs(d))  # abs(d) == 0.digits * 10**exp
    if len(digits) == 1:  # Java then picks the 2-digit decimal closest to d (Double.MIN_VALUE: 4.9E-324)
        import decimal

        with decimal.localcontext() as ctx:
            ctx.prec, ctx.rounding = 2, decimal.ROUND_HALF_EVEN
            two = +decimal.Decimal(abs(d))
        t = two.as_tuple()
        digits = "".join(map(str, t.digits)).rstrip("0") or "0"
        exp = len(t.digits) + int(t.exponent)
    if 1e-3 <= abs(d) < 1e7:
        point = exp
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{exp - 1}"


def _shortest(x: float) -> tuple[str, int]:
    """The shortest round-trip digits of ``x`` > 0 (Python's repr, as JDK 19's Double.toString picks them)
    and ``exp`` with ``x == 0.<digits> * 10**exp``."""
    mant, _, e = repr(x).partition("e")
    whole, _, frac = mant.partition(".")
    exp = int(e or 0)
    if whole.strip("0"):
        exp += len(whole)
        digits = whole + frac
    else:
        exp -= len(frac) - len(frac.lstrip("0"))
        digits = frac.lstrip("0")
    return digits.rstrip("0") or "0", exp
