"""Endpoints that accept TCP connections and never answer (or answer a byte at a time), and secrets that
must never be printed.

A blob store behind such an endpoint hung `snapshots list` for 546 s and `doctor` for minutes; one that
sent a header line every 5 s held them for 507 s, and one that trickled a body never let go; the
session token appeared on stderr with --debug, and a password inside the endpoint URL in the error line.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

import pytest

from statectl.blobstore import S3Options, open_blobstore
from statectl.errors import BlobStoreError
from tests.integration.test_bad_input import (WHERE, World, assert_error, assert_unchanged, capture, capture_after,
                                              make_world, s3_env)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield server.getsockname()[1]
    stop.set()
    t.join()
    for c in held:
        c.close()
    server.close()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path, keys=300)


def at_once(*runs: Callable[[], subprocess.CompletedProcess]) -> list[subprocess.CompletedProcess]:
    """Run independent commands side by side, each its own process: their waits on an endpoint that does not
    answer overlap, and each one's result is checked as before."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda run: run(), runs))


# A second a request, two for its retries: the deadline, not the 9 attempts, ends a request that gets no answer.
FAST = {"STATECTL_TIMEOUT": "1s", "STATECTL_RETRY_TIME": "2s", "STATECTL_RETRIES": "8"}


def test_blob_store_that_never_answers(world: World, silent_port: int):
    env = s3_env(world.tmp, f"http://127.0.0.1:{silent_port}", "AK", "SK", **FAST)
    url = "s3://backups/statectl"
    before = capture([world.store], [world.tmp])
    every = (["snapshots", "list", *WHERE], ["backup", *WHERE, "--state-dir", str(world.state)],
             ["restore", *WHERE, "--state-dir", str(world.state)], ["gc"])
    # (each fails at the blob store before it touches the state dir: the backup takes its lease first)
    for p in at_once(*(partial(world.run, *args, "--blobstore", url, env=env, timeout=30) for args in every)):
        line = assert_error(p, 1, f"127.0.0.1:{silent_port}", "no answer", "within 1s")
        # The deadline, not the 9 attempts, ended it.
        attempts = int(line.split("gave up after ")[1].split(" ")[0])
        assert attempts < 9, line
        assert "STATECTL_TIMEOUT" in p.stderr
    assert_unchanged(before, capture_after(before))


def test_doctor_with_endpoints_that_never_answer(world: World, silent_port: int):
    env = s3_env(world.tmp, f"http://127.0.0.1:{silent_port}", "AK", "SK", **FAST)
    p = world.run("doctor", "--job", "page-views", "--blobstore", "s3://backups/statectl",
                  "--kafka", f"127.0.0.1:{silent_port}", "-o", "json", env=env, timeout=60)
    assert p.returncode == 1, p.stderr
    checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["blob store"]["status"] == "fail" and f"127.0.0.1:{silent_port}" in checks["blob store"]["detail"]
    assert checks["kafka"]["status"] == "fail" and f"127.0.0.1:{silent_port}" in checks["kafka"]["detail"]


def test_kafka_brokers_that_never_answer(world: World, silent_port: int):
    # (the backup takes and releases its lease in the blob store before it asks Kafka)
    before = capture([world.store], [world.state, world.blobs / "blobs", world.blobs / "checkpoints"])
    every = (["backup", *WHERE, "--state-dir", str(world.state)],
             ["restore", *WHERE, "--target-dir", str(world.tmp / "t")],
             ["restore", "--from-changelog", "c", "--partition", "0", "--target-dir", str(world.tmp / "t")])
    # (a restore's reader pin and a backup's lease do not exclude each other: the three run side by side)
    for p in at_once(*(partial(world.run, *args, "--kafka", f"127.0.0.1:{silent_port}", timeout=60)
                       for args in every)):
        assert_error(p, 1, f"127.0.0.1:{silent_port}")
    assert_unchanged(before, capture_after(before), mtime_may_change=("counts",))
    assert not (world.tmp / "t").exists()


def test_timeout_settings_are_validated(world: World):
    for name, value in (("STATECTL_TIMEOUT", "soon"), ("STATECTL_RETRY_TIME", "-1s")):
        p = world.run("snapshots", "list", *WHERE, env=s3_env(world.tmp, "http://127.0.0.1:9", "AK", "SK",
                                                             **{name: value}))
        assert_error(p, 2, name)
    p = world.run("snapshots", "list", *WHERE, "--blobstore", "s3://backups/x",
                  env=s3_env(world.tmp, "http://127.0.0.1:9", "AK", "SK", STATECTL_TIMEOUT="0s"))
    assert_error(p, 2, "timeout")


# ---- endpoints that answer a byte at a time ------------------------------------------------------

Answer = Callable[[socket.socket, threading.Event], None]


class Trickle:
    """A loopback HTTP server whose ``answer(conn, stop)`` runs for each request it reads (its head, and
    with ``read_body`` its Content-Length body too)."""

    def __init__(self, answer: Answer, *, rcvbuf: int | None = None, read_body: bool = False):
        self.answer = answer
        self.read_body = read_body
        self.server = socket.socket()
        if rcvbuf:  # inherited by accepted connections: a slow reader then holds little of an upload
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            if self.read_body:
                head, _, body = head.partition(b"\r\n\r\n")
                fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
                fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
                if fields.get(b"expect", b"").lower() == b"100-continue":
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                left = int(fields.get(b"content-length", b"0")) - len(body)
                while left > 0:
                    data = conn.recv(min(left, 1 << 20))
                    if not data:
                        return
                    left -= len(data)
            self.answer(conn, self.stop)
        except OSError:
            pass  # the client gave up and closed

    def close(self) -> None:
        self.stop.set()
        for c in self.conns:
            c.close()
        self.server.close()
        for t in self.threads:
            t.join(5)


@pytest.fixture
def trickle(request) -> Iterator[Callable[..., Trickle]]:
    servers: list[Trickle] = []

    def start(answer: Answer, **kw) -> Trickle:
        servers.append(Trickle(answer, **kw))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def header_by_header(conn: socket.socket, stop: threading.Event) -> None:
    """A status line, then one header line a second, for ever: each read gets a byte within the timeout."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    i = 0
    while not stop.wait(1):
        conn.sendall(b"X-Slow-%d: %d\r\n" % (i, i))
        i += 1


def byte_by_byte(conn: socket.socket, stop: threading.Event) -> None:
    """A complete head announcing 100 MB, then one body byte a second."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: 100000000\r\n\r\n")
    while not stop.wait(1):
        conn.sendall(b" ")


def reading_byte_by_byte(conn: socket.socket, stop: threading.Event) -> None:
    """Takes a request body one byte a second, and never answers."""
    while not stop.wait(1):
        if not conn.recv(1):
            return


SLOW = {"STATECTL_TIMEOUT": "2s", "STATECTL_RETRY_TIME": "5s", "STATECTL_RETRIES": "8"}


@pytest.mark.parametrize("answer", [pytest.param(header_by_header, marks=pytest.mark.soak), byte_by_byte],
                         ids=["headers", "body"])  # headers: make soak (17 s each)
def test_blob_store_that_answers_a_byte_at_a_time(world: World, trickle, answer: Answer):
    # Each byte comes well within the 2 s read timeout: only a bound on the whole request ends these.
    server = trickle(answer)
    env = s3_env(world.tmp, server.endpoint, "AK", "SK", **SLOW)
    p, doctor = at_once(
        partial(world.run, "snapshots", "list", *WHERE, "--blobstore", "s3://backups/statectl", env=env, timeout=60),
        partial(world.run, "doctor", "--blobstore", "s3://backups/statectl", "-o", "json", env=env, timeout=60))
    assert_error(p, 1, f"127.0.0.1:{server.port}", "no answer", "within 8s")  # 4 x the timeout
    assert "STATECTL_TIMEOUT" in p.stderr
    p = doctor
    assert p.returncode == 1, p.stderr
    check = {c["name"]: c for c in json.loads(p.stdout)["checks"]}["blob store"]
    assert check["status"] == "fail" and f"127.0.0.1:{server.port}" in check["detail"], check


def _bounded(call: Callable[[], object], limit: float = 60) -> BaseException | None:
    """Run ``call`` in a thread and return what it raised; fail the test if it is still running after ``limit``."""
    raised: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as e:
            raised[0] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"still running after {limit}s"
    return raised[0]


def _store(endpoint: str, timeout_s: float = 2, retry_time_s: float = 5):
    return open_blobstore("s3://backups/statectl", retries=8, retry_time_s=retry_time_s,
                          s3=S3Options(endpoint_url=endpoint, region="us-east-1", access_key_id="AK",
                                       secret_access_key="SK", timeout_s=timeout_s))


@pytest.mark.parametrize("answer, into", [(header_by_header, False), (byte_by_byte, False), (byte_by_byte, True)],
                         ids=["headers", "body", "body-into-the-sink"])
def test_a_download_that_trickles_fails_after_about_the_timeout(trickle, answer: Answer, into: bool):
    # A data blob's get has no total bound (a long download that keeps moving must go on), but fewer than
    # 64 KiB within a timeout fails the attempt: also when the body is read straight into a restore's buffer.
    from statectl.progress import NullProgress
    from statectl.transfer.sink import CrcSink

    server = trickle(answer)
    store = _store(server.endpoint)
    e = _bounded(lambda: store.get("blobs/ab/abcd", CrcSink(NullProgress()) if into else io.BytesIO()))
    assert isinstance(e, BlobStoreError), e
    assert f"127.0.0.1:{server.port}" in str(e) and "gave up after" in str(e), e
    assert "stalled: less than 64 KiB in 2s" in str(e), e
    store.close()


@pytest.mark.parametrize("size, said", [(1000, "stalled: less than 64 KiB in 2s"),
                                        (6 * 1024 * 1024, "create upload")], ids=["put", "multipart"])
def test_an_upload_answered_header_by_header_fails(trickle, size: int, said: str):
    # A blob's body goes up at full speed, then the answer never ends: the transfer no longer moves. A
    # multipart upload's first request is bookkeeping, bounded as a whole (4 x 2 s).
    server = trickle(header_by_header, read_body=True)
    store = open_blobstore("s3://backups/statectl", retries=8, retry_time_s=5,
                           s3=S3Options(endpoint_url=server.endpoint, region="us-east-1", access_key_id="AK",
                                        secret_access_key="SK", timeout_s=2, part_size=5 * 1024 * 1024))
    e = _bounded(lambda: store.put(io.BytesIO(bytes(size)), size=size, ttl_seconds=None))
    assert isinstance(e, BlobStoreError), e
    assert f"127.0.0.1:{server.port}" in str(e) and said in str(e) and "gave up after" in str(e), e
    store.close()


def test_an_upload_the_endpoint_takes_a_byte_at_a_time_fails(trickle):
    server = trickle(reading_byte_by_byte, rcvbuf=4096)
    store = _store(server.endpoint)
    data = io.BytesIO(bytes(16 * 1024 * 1024))
    e = _bounded(lambda: store.put(data, size=16 * 1024 * 1024, ttl_seconds=None))
    assert isinstance(e, BlobStoreError), e
    assert f"127.0.0.1:{server.port}" in str(e) and "gave up after" in str(e), e
    store.close()


def test_a_slow_download_that_keeps_moving_is_never_cut(trickle):
    # 100 KiB every 0.25 s for about 6 s: far longer than a metadata request may take (4 x 1 s), and every
    # second brings more than 64 KiB.
    size = 25 * 100 * 1024

    def steady(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nETag: \"e\"\r\n"
                     b"Content-Length: %d\r\n\r\n" % size)
        for _ in range(25):
            if stop.wait(0.25):
                return
            conn.sendall(b"x" * 100 * 1024)

    server = trickle(steady)
    store = _store(server.endpoint, timeout_s=1, retry_time_s=0)
    buf = io.BytesIO()
    assert _bounded(lambda: store.get("blobs/ab/abcd", buf)) is None
    assert buf.getvalue() == b"x" * size
    store.close()


# ---- secrets -------------------------------------------------------------------------------------

TOKEN = "FQoGZXIvYXdzEXAMPLE-session-token/with+chars=="
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
PASSWORD = "pw-S3cret-42"


def _no_secrets(p, *secrets: str) -> None:
    for s in secrets:
        assert s not in p.stdout and s not in p.stderr, f"{s!r} printed:\n{p.stdout}\n{p.stderr}"


def test_secrets_never_printed_with_debug(world: World, seaweed):
    bucket = seaweed.make_bucket()
    url = f"s3://{bucket}/statectl"
    env = s3_env(world.tmp, seaweed.endpoint, seaweed.access_key, SECRET, STATECTL_S3_SESSION_TOKEN=TOKEN)
    ok = world.run("--debug", "backup", *WHERE, "--state-dir", str(world.state), "--blobstore", url, env=env)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "X-Amz-Security-Token" in ok.stderr  # botocore did log the headers: they were masked
    failing = world.run("--debug", "snapshots", "list", *WHERE, "--blobstore", f"s3://no-such-{bucket}/x", env=env)
    assert failing.returncode == 10
    # The same from boto3's own chain (AWS_* variables) rather than statectl's settings.
    aws = dict(env, AWS_ACCESS_KEY_ID=seaweed.access_key, AWS_SECRET_ACCESS_KEY=SECRET, AWS_SESSION_TOKEN=TOKEN)
    for k in ("STATECTL_S3_ACCESS_KEY_ID", "STATECTL_S3_SECRET_ACCESS_KEY", "STATECTL_S3_SESSION_TOKEN"):
        aws.pop(k)
    listed = world.run("--debug", "-o", "json", "snapshots", "list", *WHERE, "--blobstore", url, env=aws)
    assert listed.returncode == 0, listed.stderr[-2000:]
    for p in (ok, failing, listed):
        _no_secrets(p, TOKEN, SECRET)
        assert "****" in p.stderr


def test_password_in_the_endpoint_url_is_masked(world: World, silent_port: int):
    endpoint = f"http://admin:{PASSWORD}@127.0.0.1:{silent_port}"
    env = s3_env(world.tmp, endpoint, "AK", "SK", **FAST)
    runs = at_once(partial(world.run, "snapshots", "list", *WHERE, "--blobstore", "s3://backups/x", env=env,
                           timeout=30),
                   partial(world.run, "--debug", "snapshots", "list", *WHERE, "--blobstore", "s3://backups/x", env=env,
                           timeout=30),
                   partial(world.run, "doctor", "--blobstore", "s3://backups/x", env=env, timeout=60),
                   partial(world.run, "doctor", "-o", "json", "--blobstore", "s3://backups/x", env=env, timeout=60),
                   partial(world.run, "config", "show", "-o", "json", env=env),
                   partial(world.run, "config", "show", "--s3-endpoint", endpoint, env=env))
    for p in runs:
        _no_secrets(p, PASSWORD)
    assert runs[0].returncode == 1 and "admin:****@" in runs[0].stderr
    assert "admin:****@127.0.0.1" in runs[4].stdout
