"""Endpoints that accept TCP connections and never answer, and secrets that must never be printed.

A blob store behind such an endpoint hung `snapshots list` for 546 s and `doctor` for minutes; the
session token appeared on stderr with --debug, and a password inside the endpoint URL in the error line.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

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


FAST = {"STATECTL_TIMEOUT": "1s", "STATECTL_RETRY_TIME": "3s", "STATECTL_RETRIES": "8"}


def test_blob_store_that_never_answers(world: World, silent_port: int):
    env = s3_env(world.tmp, f"http://127.0.0.1:{silent_port}", "AK", "SK", **FAST)
    url = "s3://backups/statectl"
    before = capture([world.store], [world.tmp])
    for args in (["snapshots", "list", *WHERE], ["backup", *WHERE, "--state-dir", str(world.state)],
                 ["restore", *WHERE, "--state-dir", str(world.state)], ["gc"]):
        p = world.run(*args, "--blobstore", url, env=env, timeout=30)
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
    for args in (["backup", *WHERE, "--state-dir", str(world.state)],
                 ["restore", *WHERE, "--target-dir", str(world.tmp / "t")],
                 ["restore", "--from-changelog", "c", "--partition", "0", "--target-dir", str(world.tmp / "t")]):
        p = world.run(*args, "--kafka", f"127.0.0.1:{silent_port}", timeout=60)
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
    runs = [world.run("snapshots", "list", *WHERE, "--blobstore", "s3://backups/x", env=env, timeout=30),
            world.run("--debug", "snapshots", "list", *WHERE, "--blobstore", "s3://backups/x", env=env, timeout=30),
            world.run("doctor", "--blobstore", "s3://backups/x", env=env, timeout=60),
            world.run("doctor", "-o", "json", "--blobstore", "s3://backups/x", env=env, timeout=60),
            world.run("config", "show", "-o", "json", env=env),
            world.run("config", "show", "--s3-endpoint", endpoint, env=env)]
    for p in runs:
        _no_secrets(p, PASSWORD)
    assert runs[0].returncode == 1 and "admin:****@" in runs[0].stderr
    assert "admin:****@127.0.0.1" in runs[4].stdout
