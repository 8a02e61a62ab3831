"""statectl.ratelimit: the --limit-rate grammar, and the token bucket on an injected clock (its real-clock
behaviour across threads and servers: tests/integration/test_limit_rate.py)."""

from __future__ import annotations

import threading

import pytest

from statectl.errors import UsageError
from statectl.parallel import Cancelled
from statectl.ratelimit import MIN_RATE, RateLimit, format_rate, parse_rate

KiB, MiB, GiB = 1024, 1024 ** 2, 1024 ** 3


@pytest.mark.parametrize("text, rate", [
    ("50MiB/s", 50 * MiB), ("50M", 50 * MiB), ("50mb/s", 50 * MiB), ("500KiB/s", 500 * KiB), ("500k", 500 * KiB),
    ("1G/s", GiB), ("1gib", GiB), ("2T/s", 2 * 1024 ** 4), ("1048576", MiB), ("4096B/s", 4 * KiB),
    ("1.5MiB/s", 1536 * KiB), (" 20 MiB / s ", 20 * MiB), ("1KiB/s", MIN_RATE), (20 * MiB, 20 * MiB),
])
def test_rates_parse_1024_based(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["off", "OFF", " off ", None])
def test_off_is_no_limit(text):
    assert parse_rate(text) is None


@pytest.mark.parametrize("text, why", [
    ("0", "below the minimum"), ("0MiB/s", "below the minimum"), ("50", "below the minimum"),
    ("1023B/s", "below the minimum"), (0, "below the minimum"), (-5, "below the minimum"),
    ("-5MiB/s", "expected a rate"), ("fast", "expected a rate"), ("", "expected a rate"),
    ("10 MiB/min", "expected a rate"), ("5mbit/s", "expected a rate"), ("1e6", "expected a rate"),
    ("50MiB/s/s", "expected a rate"), (True, "expected a rate"),
])
def test_bad_rates_are_one_line_errors(text, why):
    with pytest.raises(ValueError) as e:
        parse_rate(text)
    assert why in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("rate, text", [(20 * MiB, "20MiB/s"), (1536 * KiB, "1536KiB/s"), (GiB, "1GiB/s"),
                                        (1000 * 1000, "1000000B/s"), (None, "off")])
def test_format_reads_back(rate, text):
    assert format_rate(rate) == text
    assert parse_rate(text) == rate


class FakeTime:
    """A clock that only moves when the bucket sleeps (or the test says so); records every sleep."""

    def __init__(self, *, advance: bool = True) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.cancel_next = False
        self.advance = advance  # False: the sleepers are other threads, the clock stands still

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float, cancel: threading.Event | None) -> bool:
        self.sleeps.append(seconds)
        if self.cancel_next:
            return True
        self.now += seconds if self.advance else 0
        return False


def test_bytes_taken_need_their_time_from_an_empty_bucket():
    t = FakeTime()
    bucket = RateLimit(MiB, clock=t.clock, sleep=t.sleep)
    for _ in range(40):
        bucket.take(256 * KiB)
    assert t.now - 1000.0 == pytest.approx(10.0)  # 10 MiB at 1 MiB/s, not a byte early
    assert len(t.sleeps) == 40  # one sleep a take: no polling


def test_time_that_passes_pays_for_bytes_and_no_sleep_is_needed():
    t = FakeTime()
    bucket = RateLimit(MiB, clock=t.clock, sleep=t.sleep)
    t.now += 0.05
    bucket.take(50 * KiB)
    assert t.sleeps == []


def test_an_idle_bucket_saves_up_only_its_burst():
    t = FakeTime()
    bucket = RateLimit(10 * MiB, clock=t.clock, sleep=t.sleep)
    assert bucket.burst == MiB  # a tenth of a second
    t.now += 3600  # an hour idle
    bucket.take(MiB)
    assert t.sleeps == []
    bucket.take(10 * MiB)
    assert t.sleeps == [pytest.approx(1.0)]
    assert RateLimit(MIN_RATE).burst == 64 * KiB


def test_takers_queue_behind_each_other():
    t = FakeTime(advance=False)
    bucket = RateLimit(MiB, clock=t.clock, sleep=t.sleep)
    bucket.take(MiB)  # three threads at the same instant: each waits for the bytes of those before it too
    bucket.take(MiB)
    bucket.take(MiB)
    assert t.sleeps == [pytest.approx(1.0), pytest.approx(2.0), pytest.approx(3.0)]


def test_a_cancelled_sleep_raises_and_gives_the_bytes_back():
    t = FakeTime()
    bucket = RateLimit(MiB, clock=t.clock, sleep=t.sleep)
    t.cancel_next = True
    with pytest.raises(Cancelled):
        bucket.take(4 * MiB, threading.Event())
    t.cancel_next = False
    t.sleeps.clear()
    bucket.take(MiB)  # the cancelled 4 MiB are no debt of the next taker
    assert t.sleeps == [pytest.approx(1.0)]


def test_nothing_to_take_never_sleeps():
    t = FakeTime()
    bucket = RateLimit(MiB, clock=t.clock, sleep=t.sleep)
    bucket.take(0)
    assert t.sleeps == []


@pytest.mark.parametrize("rate", [0, -1, MIN_RATE - 1, 1.5 * MiB, "1MiB/s", True])
def test_the_engine_refuses_a_rate_below_the_minimum(rate):
    with pytest.raises(UsageError, match="--limit-rate must be at least 1KiB/s"):
        RateLimit(rate)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_cancel_ends_a_real_sleep_at_once():
    bucket = RateLimit(MIN_RATE)
    cancel = threading.Event()
    raised: list[BaseException] = []

    def taker() -> None:
        try:
            bucket.take(GiB, cancel)  # twelve days at 1 KiB/s
        except BaseException as e:  # noqa: BLE001 - what it raised is the assertion
            raised.append(e)

    thread = threading.Thread(target=taker)
    thread.start()
    cancel.set()
    thread.join()  # bounded by the test's timeout, not by the twelve days
    assert len(raised) == 1 and isinstance(raised[0], Cancelled)


@pytest.mark.timeout(60)
def test_threads_share_one_rate_on_the_real_clock():
    import time

    rate = 8 * MiB
    started = time.monotonic()
    bucket = RateLimit(rate)

    def taker() -> None:
        for _ in range(32):
            bucket.take(16 * KiB)

    threads = [threading.Thread(target=taker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert time.monotonic() - started >= 8 * 32 * 16 * KiB / rate  # 4 MiB at 8 MiB/s: half a second at least
