"""kafka.readahead.ReadAhead: order, errors after the items before them, and a close that stops the reading
thread and closes its iterator there (real threads; the follower's use of it runs against Tansu in
tests/integration/test_standby.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from statectl.kafka.readahead import ReadAhead


def reading(name: str) -> bool:
    return any(t.name == name and t.is_alive() for t in threading.enumerate())


def test_items_come_in_order_and_the_iterator_runs_on_another_thread():
    threads = set()

    def make() -> Iterator[int]:
        for i in range(100):
            threads.add(threading.get_ident())
            yield i

    assert list(ReadAhead(make, depth=3)) == list(range(100))
    assert threads and threading.get_ident() not in threads


def test_an_error_is_raised_after_the_items_before_it():
    def make() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("broken at 3")

    got = []
    with pytest.raises(ValueError, match="broken at 3"):
        for x in ReadAhead(make):
            got.append(x)
    assert got == [1, 2]


def test_an_error_making_the_iterator_is_raised_in_the_caller():
    def make() -> Iterator[int]:
        raise OSError("no consumer")

    with pytest.raises(OSError, match="no consumer"):
        list(ReadAhead(make))


def test_close_stops_a_reader_blocked_ahead_and_closes_its_iterator_on_its_thread():
    closed_on: list[int] = []
    made = threading.Event()

    def make() -> Iterator[int]:
        try:
            i = 0
            while True:  # an endless read: only close ends it
                made.set()
                yield i
                i += 1
        finally:
            closed_on.append(threading.get_ident())

    ahead = ReadAhead(make, depth=2, name="ra-close")
    it = iter(ahead)
    assert next(it) == 0 and next(it) == 1
    made.wait(10)
    it.close()  # the caller stops early: the reader, blocked on the full queue, stops too
    assert not reading("ra-close")
    assert closed_on and closed_on[0] != threading.get_ident()


def test_leaving_a_with_block_stops_the_reader():
    def make() -> Iterator[int]:
        i = 0
        while True:
            yield i
            i += 1

    with ReadAhead(make, depth=1, name="ra-with") as ahead:
        for x in ahead:
            if x == 5:
                assert reading("ra-with")
                break
    assert not reading("ra-with")
