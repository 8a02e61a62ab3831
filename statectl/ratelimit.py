"""Bandwidth limits: the ``--limit-rate`` grammar (:func:`parse_rate`, :func:`format_rate`) and
:class:`RateLimit`, the one token bucket every transfer thread of a command takes from.

A rate is a number of bytes a second with an optional binary unit and an optional ``/s``, case-insensitive,
as curl's --limit-rate and rclone's --bwlimit read it: ``50MiB/s``, ``50M``, ``500KiB/s``, ``1G/s``,
``1048576`` (K, M, G, T are 1024-based, with or without ``i`` and ``B``); ``off`` is no limit. A rate
below MIN_RATE is refused: ``--limit-rate 50`` (50 bytes a second) is a forgotten unit, and a transfer at
that pace would look hung.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable

from statectl.errors import UsageError
from statectl.parallel import Cancelled

MIN_RATE = 1024
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*(?:/\s*s)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}
OFF = "off"
EXAMPLES = "e.g. 50MiB/s, 500KiB/s, 1G/s, or off"


def parse_rate(value: Any) -> int | None:
    """A rate (see the module doc) -> bytes a second; ``off`` (or None) -> None: no limit. An int is taken
    as bytes a second. Raises ValueError, one line, for anything else and for a rate below MIN_RATE
    (zero and negative rates included)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected a rate, {EXAMPLES}")
    if isinstance(value, int):
        rate = value
    else:
        text = str(value).strip()
        if text.lower() == OFF:
            return None
        m = _RATE.match(text)
        if not m:
            raise ValueError(f"expected a rate, {EXAMPLES}")
        rate = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if rate < MIN_RATE:
        raise ValueError(f"{rate} bytes a second is below the minimum, {format_rate(MIN_RATE)}; {OFF} for no limit")
    return rate


def format_rate(rate: int | None) -> str:
    """Bytes a second as parse_rate reads them back, in the largest binary unit that is exact:
    ``20MiB/s``, ``1536KiB/s``, ``1000B/s``; None: ``off``."""
    if rate is None:
        return OFF
    for unit, factor in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if rate and rate % factor == 0:
            return f"{rate // factor}{unit}/s"
    return f"{rate}B/s"


def _sleep(seconds: float, cancel: threading.Event | None) -> bool:
    """Sleep ``seconds``; True when ``cancel`` was set meanwhile (it ends the sleep at once)."""
    if cancel is None:
        time.sleep(seconds)  # a signal (Ctrl-C in the main thread) still interrupts it
        return False
    return cancel.wait(seconds)


class RateLimit:
    """A token bucket of ``rate`` bytes a second, shared by the threads of one command.

    ``take(n)`` debits ``n`` bytes and, when the bucket is in debt, sleeps until the bytes are earned:
    one sleep per call, never a polling loop, and callers are served in the order they came (a thread
    that takes after another waits behind it). The bucket starts empty, so whatever is taken by time t
    after it was made is at most ``rate * t``: a transfer of N bytes lasts at least N / rate. While
    nobody takes, it fills to at most ``burst`` bytes (a tenth of a second of traffic, at least 64 KiB):
    a pause buys no more than that much of a burst afterwards.

    ``clock`` (monotonic seconds) and ``sleep(seconds, cancel) -> cancelled`` are injectable for tests.
    Raises UsageError for a rate below MIN_RATE.
    """

    def __init__(self, rate: int, *, burst: int | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float, threading.Event | None], bool] = _sleep):
        if isinstance(rate, bool) or not isinstance(rate, int) or rate < MIN_RATE:
            raise UsageError(f"--limit-rate must be at least {format_rate(MIN_RATE)}, not {rate!r}")
        self.rate = rate
        self.burst = burst if burst is not None else max(64 * 1024, rate // 10)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = 0.0
        self._last = clock()

    def take(self, n: int, cancel: threading.Event | None = None) -> None:
        """Account ``n`` bytes, sleeping as long as the rate needs. Raises Cancelled (the bytes given back)
        when ``cancel`` is set while it sleeps; thread-safe."""
        if n <= 0:
            return
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate) - n
            self._last = now
            debt = -self._tokens
        if debt > 0 and self._sleep(debt / self.rate, cancel):
            with self._lock:
                self._tokens = min(float(self.burst), self._tokens + n)
            raise Cancelled()

    def __repr__(self) -> str:
        return f"RateLimit({format_rate(self.rate)})"
