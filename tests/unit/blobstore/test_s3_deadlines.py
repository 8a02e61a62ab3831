"""The bounds of one S3 request (statectl/blobstore/deadlines.py): the rules on a fake clock, and the watchdog on
real sockets. Against endpoints that answer a byte at a time: tests/integration/test_hostile_endpoints.py."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from statectl.blobstore import S3Options, deadlines
from statectl.blobstore.deadlines import DEADLINE_FACTOR, MIN_PROGRESS_BYTES, Attempt, Watchdog
from statectl.blobstore.s3 import S3BlobStore


def attempt(bulk: bool, timeout: float = 10) -> Attempt:
    att = Attempt(bulk, timeout)
    att.due = att.window  # as if it started at 0, so the tests can pass plain numbers as "now"
    return att


def test_a_metadata_request_is_bounded_as_a_whole():
    att = attempt(bulk=False)
    assert att.due == DEADLINE_FACTOR * 10
    att.moved = 10**9  # however much moved
    assert att.check(39.9) == 40
    assert att.check(40) is None and att.why == "deadline"


def test_a_bulk_transfer_must_move_64_kib_every_timeout():
    att = attempt(bulk=True)
    assert att.check(9.9) == 10
    att.moved = MIN_PROGRESS_BYTES
    assert att.check(10) == 20  # the window moves on
    att.moved += MIN_PROGRESS_BYTES - 1
    assert att.check(20) is None and att.why == "stalled"


def test_a_bulk_transfer_that_keeps_moving_has_no_end():
    att = attempt(bulk=True)
    now = 0.0
    for _ in range(1000):  # 10 000 s
        now += 10
        att.moved += MIN_PROGRESS_BYTES
        assert att.check(now) == now + 10


def test_nothing_at_all_is_no_answer():
    att = attempt(bulk=True)
    assert att.check(10) is None and att.why == "deadline"


def test_local_work_does_not_count():
    att = Attempt(True, 0.05)
    att.pause()
    time.sleep(0.1)
    now = time.monotonic()
    assert att.check(now) == pytest.approx(now + 0.05)  # paused: checked again later, never expired
    due = att.due
    att.resume()
    assert att.due >= due + 0.1  # the paused time is added


def test_a_bulk_response_head_is_bounded_like_a_metadata_request():
    att = attempt(bulk=True)
    att.head_by = 25
    for now in (10, 20):
        att.moved += MIN_PROGRESS_BYTES  # a head of 64 KiB lines, one every timeout
        assert att.check(now) is not None
    assert att.check(25) is None and att.why == "head"


def test_the_watchdog_shuts_an_overdue_request_down():
    a, b = socket.socketpair()
    watchdog = Watchdog()
    att = Attempt(False, 0.1)  # due in 0.4 s
    att.sock = a
    started = time.monotonic()
    watchdog.add(att)
    a.settimeout(30)
    assert a.recv(10) == b""  # woken by the shutdown, not the 30 s timeout
    assert att.expired and 0.3 < time.monotonic() - started < 5
    watchdog.remove(att)
    a.close()
    b.close()


def test_a_finished_request_is_never_shut_down():
    a, b = socket.socketpair()
    watchdog = Watchdog()
    att = Attempt(False, 0.05)
    att.sock = a
    watchdog.add(att)
    watchdog.remove(att)
    time.sleep(0.4)
    assert not att.expired
    b.sendall(b"x")
    assert a.recv(1) == b"x"
    a.close()
    b.close()


def test_a_reused_connection_belongs_to_its_new_request():
    class Conn:
        _statectl_attempt = None
        sock = None

    watchdog = Watchdog()
    conn = Conn()
    first, second = Attempt(False, 1), Attempt(False, 1)
    watchdog.bind(conn, first)
    assert first.conn is conn
    watchdog.bind(conn, second)
    assert first.conn is None and second.conn is conn and conn._statectl_attempt is second


def test_one_watchdog_thread_however_many_requests():
    watchdog = Watchdog()
    before = threading.active_count()
    for _ in range(2000):
        att = Attempt(True, 15)
        watchdog.add(att)
        watchdog.remove(att)
    assert threading.active_count() == before + 1
    assert not watchdog._active


def test_the_client_uses_the_bounded_connections():
    s3 = S3BlobStore("bucket", "p", S3Options(endpoint_url="http://127.0.0.1:9", access_key_id="a",
                                              secret_access_key="b", region="us-east-1"), "s3://bucket/p")
    assert s3.deadlines, "botocore's insides moved: S3 requests would have no total bound"
    pools = s3._client._endpoint.http_session._manager.pool_classes_by_scheme
    assert (pools["http"], pools["https"]) == deadlines.pool_classes()
    s3.close()
