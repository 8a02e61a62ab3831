"""A hostile tester's secrets and leases, end to end through statectl run as a real process.

- A session token with a control character (``\\r``, ``\\n``) or a non-ASCII one reached botocore, whose
  ``Invalid header value b'...\\r'`` printed it in every command; a token with a backslash appeared
  in --debug logs as ``b'..\\\\..'``, a form the exact-string masking missed.
- A URL password with a raw ``@`` or ``/`` was masked only up to its first ``@``.
- A lease record with an absurd expiry (1e20, NaN, a string, negative, a huge int) made ``lease show``,
  ``backup`` and ``lease break`` fail with "unexpected OverflowError".
- About one concurrent backup in ten exited 11 while a gc looped: gc holds a store's lease for a
  moment, and the backup gave up at once instead of waiting for it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from statectl.blobstore import open_blobstore
from statectl.blobstore.base import BlobStore
from statectl.catalog.lease import Lease, lease_key
from tests.integration.test_bad_input import (REF, STATECTL, WHERE, World, assert_error, clean_env, make_world,
                                              s3_env)

TOKEN = "FwoGZXIvYXdzEJrTOKENSECRETVALUE=="
BAD_TOKENS = [TOKEN + "\r", TOKEN + "\n", TOKEN[:12] + "\n" + TOKEN[12:], TOKEN + "é"]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path, keys=300)


@pytest.fixture
def refused_port() -> int:
    """A loopback port nobody listens on: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def blobs(world: World) -> Iterator[BlobStore]:
    """The world's embedded default blob store (file://), opened in this process."""
    bs = open_blobstore(f"file://{world.blobs}")
    yield bs
    bs.close()


FAST = {"STATECTL_TIMEOUT": "1s", "STATECTL_RETRY_TIME": "2s", "STATECTL_RETRIES": "1"}


def _no_secret(p: subprocess.CompletedProcess, *fragments: str) -> None:
    for f in fragments:
        assert f not in p.stdout and f not in p.stderr, f"{f!r} printed:\n{p.stdout}\n{p.stderr}"


def _refused(p: subprocess.CompletedProcess, *names: str) -> str:
    """The config error for a bad secret (with --debug a traceback follows it, as for every error)."""
    if "--debug" not in p.args:
        return assert_error(p, 2, *names)
    assert p.returncode == 2, p.stderr
    line = p.stderr.splitlines()[0]
    assert line.startswith("Error: ") and all(n in line for n in names), p.stderr
    return line


def _every_command(world: World) -> list[list[str]]:
    state = ["--state-dir", str(world.state)]
    return [["snapshots", "list", *WHERE], ["snapshots", "show", *WHERE], ["snapshots", "verify", *WHERE],
            ["backup", *WHERE, *state], ["restore", *WHERE, "--target-dir", str(world.tmp / "t")],
            ["diff", *WHERE, *state], ["gc"], ["lease", "show", *WHERE], ["lease", "break", *WHERE, "--yes"],
            ["doctor"], ["doctor", "-o", "json"], ["config", "show"], ["config", "show", "-o", "json"],
            ["--debug", "snapshots", "list", *WHERE], ["-o", "json", "backup", *WHERE, *state]]


# ---- 1. secrets with control or non-ASCII characters ----------------------------------------------


def test_a_session_token_with_a_carriage_return_is_refused_by_every_command(world: World, refused_port: int):
    env = s3_env(world.tmp, f"http://127.0.0.1:{refused_port}", "AKIDEXAMPLE", "SECRETKEYEXAMPLE",
                 STATECTL_S3_SESSION_TOKEN=BAD_TOKENS[0], **FAST)
    for args in _every_command(world):
        p = world.run(*args, "--blobstore", "s3://hostile/p", env=env)
        line = _refused(p, "s3_session_token", "env STATECTL_S3_SESSION_TOKEN", "line break")
        assert "not shown" in line
        _no_secret(p, "TOKENSECRET", "SECRETKEYEXAMPLE")
    assert not (world.tmp / "t").exists()


@pytest.mark.parametrize("token", BAD_TOKENS[1:], ids=["trailing-newline", "embedded-newline", "non-ascii"])
def test_other_bad_session_tokens_are_refused_from_each_source(world: World, refused_port: int, token: str):
    endpoint = f"http://127.0.0.1:{refused_port}"
    why = "non-ASCII" if "é" in token else "line break"
    sources = {
        "env STATECTL_S3_SESSION_TOKEN": s3_env(world.tmp, endpoint, "AK12", "SK12", STATECTL_S3_SESSION_TOKEN=token),
        # boto3's own chain: statectl passes no credentials, so botocore would send these.
        "env AWS_SESSION_TOKEN": clean_env(world.tmp, STATECTL_S3_ENDPOINT=endpoint, AWS_ACCESS_KEY_ID="AK12",
                                           AWS_SECRET_ACCESS_KEY="SK12", AWS_SESSION_TOKEN=token),
    }
    for source, env in sources.items():
        for args in (["snapshots", "list", *WHERE], ["doctor", "-o", "json"], ["--debug", "gc"]):
            p = world.run(*args, "--blobstore", "s3://hostile/p", env=dict(env, **FAST))
            _refused(p, source, why)
            _no_secret(p, "TOKENSECRET")
    profile = world.tmp / "statectl.toml"
    profile.write_text(f"[default]\ns3_session_token = {json.dumps(token)}\n", encoding="utf-8")
    try:
        p = world.run("snapshots", "list", *WHERE, "--blobstore", "s3://hostile/p",
                      env=clean_env(world.tmp, STATECTL_S3_ENDPOINT=endpoint))
        assert_error(p, 2, "statectl.toml", "s3_session_token", why)
        _no_secret(p, "TOKENSECRET")
    finally:
        profile.unlink()


def test_a_token_that_prints_escaped_is_masked_in_debug_logs(world: World, refused_port: int):
    """A backslash is a valid character, but botocore logs header values as bytes literals, where it
    shows doubled: the masking must know that form too."""
    token = "FwoGZXIvYXdz\\EJrTOKENSECRET/abc="
    env = s3_env(world.tmp, f"http://127.0.0.1:{refused_port}", "AKIDEXAMPLE", "SECRETKEYEXAMPLE",
                 STATECTL_S3_SESSION_TOKEN=token, **FAST)
    p = world.run("--debug", "snapshots", "list", *WHERE, "--blobstore", "s3://hostile/p", env=env)
    assert p.returncode == 1, p.stderr
    assert "X-Amz-Security-Token': b'****'" in p.stderr  # botocore did log the header: masked
    _no_secret(p, "TOKENSECRET", "SECRETKEYEXAMPLE")


# ---- 2. URL passwords with raw @ and /, secret query values ---------------------------------------


def test_a_url_password_with_raw_at_and_slash_is_masked_whole(world: World, refused_port: int):
    endpoint = f"http://u:p@ss:w/rdX#1@127.0.0.1:{refused_port}"
    env = s3_env(world.tmp, f"http://127.0.0.1:{refused_port}", "AK12", "SK12", **FAST)
    s3 = ["--blobstore", "s3://hostile/p", "--s3-endpoint", endpoint]
    runs = [world.run("snapshots", "list", *WHERE, *s3, env=env),
            world.run("--debug", "snapshots", "list", *WHERE, *s3, env=env),
            world.run("backup", *WHERE, "--state-dir", str(world.state), *s3, env=env),
            world.run("doctor", *s3, env=env),
            world.run("doctor", "-o", "json", *s3, env=env),
            world.run("config", "show", *s3, env=env),
            world.run("config", "show", "-o", "json", *s3, env=env),
            # The same URL from the environment rather than a flag.
            world.run("snapshots", "list", *WHERE, "--blobstore", "s3://hostile/p",
                      env=dict(env, STATECTL_S3_ENDPOINT=endpoint))]
    for p in runs:
        _no_secret(p, "ss:w", "rdX")
        assert "u:****@127.0.0.1" in p.stdout + p.stderr, p.stdout + p.stderr
    assert runs[0].returncode == 1 and runs[5].returncode == 0
    shown = {r["key"]: r["value"] for r in json.loads(runs[6].stdout)["settings"]}
    assert shown["s3_endpoint"] == f"http://u:****@127.0.0.1:{refused_port}"


def test_secret_query_values_in_a_url_are_masked(world: World, refused_port: int):
    endpoint = f"http://127.0.0.1:{refused_port}/?X-Amz-Signature=SIGSECRET1&token=TOKSECRET2&region=x"
    p = world.run("config", "show", "--s3-endpoint", endpoint, env=clean_env(world.tmp))
    assert p.returncode == 0, p.stderr
    _no_secret(p, "SIGSECRET1", "TOKSECRET2")
    assert "X-Amz-Signature=****&token=****&region=x" in p.stdout


# ---- 3. malformed lease records ---------------------------------------------------------------------

HOSTILE_EXPIRES = {"1e20": "1e20", "NaN": "NaN", "string": '"tomorrow"', "negative": "-5", "huge-int": "1" + "0" * 400}


def _malformed_lease(bs: BlobStore, expires: str) -> None:
    now = time.time()
    text = json.dumps({"owner": "x", "host": "elsewhere.example", "pid": 4242, "operation": "backup",
                       "store": str(REF), "started": now - 60, "acquired": now - 10, "released": False})
    bs.put_at(lease_key(REF), (text[:-1] + f', "expires": {expires}}}').encode())


@pytest.mark.parametrize("expires", sorted(HOSTILE_EXPIRES))
def test_a_malformed_lease_is_shown_taken_over_by_backup_and_broken(world: World, blobs: BlobStore, expires: str):
    _malformed_lease(blobs, HOSTILE_EXPIRES[expires])
    p = world.run("lease", "show", *WHERE)
    assert p.returncode == 0, p.stderr
    assert "malformed (expires is not a time" in p.stdout and "elsewhere.example" in p.stdout, p.stdout
    p = world.run("lease", "show", *WHERE, "-o", "json")
    assert p.returncode == 0, p.stderr
    shown = json.loads(p.stdout)
    assert not shown["live"] and not shown["released"] and shown["expires"] == ""

    p = world.run("lease", "break", *WHERE, "--yes")
    assert p.returncode == 0, p.stderr
    assert "replaced the malformed lease record" in p.stdout, p.stdout
    p = world.run("lease", "show", *WHERE, "-o", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["released"], p.stdout + p.stderr

    # A backup takes a malformed record over (conditionally) and says so in a note.
    _malformed_lease(blobs, HOSTILE_EXPIRES[expires])
    p = world.run("backup", *WHERE, "--state-dir", str(world.state))
    assert p.returncode == 0, p.stderr
    assert "took over the malformed lease record" in p.stderr, p.stderr
    p = world.run("lease", "show", *WHERE)
    assert p.returncode == 0 and "released" in p.stdout and "malformed" not in p.stdout, p.stdout + p.stderr


# ---- 4. a backup meets a gc holding the store's lease ------------------------------------------------


@pytest.mark.timeout(120)
def test_a_backup_waits_for_a_gc_holding_the_lease(world: World, blobs: BlobStore):
    gc_lease = Lease(blobs, REF, operation="gc")
    gc_lease.acquire()
    backup = subprocess.Popen([str(STATECTL), "backup", *WHERE, "--state-dir", str(world.state), "-o", "json"],
                              cwd=world.tmp, env=clean_env(world.tmp), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        # The gc lets go only once the backup is seen waiting (asleep between its polls of the lease), however
        # long the backup took to start on a busy machine.
        wchan = Path(f"/proc/{backup.pid}/wchan")
        while backup.poll() is None and "nanosleep" not in (wchan.read_text() if wchan.exists() else ""):
            time.sleep(0.01)
        gc_lease.release()
        stdout, stderr = backup.communicate(timeout=60)
    finally:
        backup.kill()
    assert backup.returncode == 0, stderr
    notes = json.loads(stdout)["notes"]  # the wait shows in a note, not on a clock
    assert any("waited" in n and "gc" in n for n in notes), notes


@pytest.mark.timeout(120)
def test_a_backup_held_lease_still_fails_a_backup_at_once(world: World, blobs: BlobStore):
    other = Lease(blobs, REF)  # a backup, alive on this host: this test process
    other.acquire()
    try:
        p = subprocess.run([str(STATECTL), "backup", *WHERE, "--state-dir", str(world.state)], cwd=world.tmp,
                           env=clean_env(world.tmp), capture_output=True, text=True, timeout=60)
    finally:
        other.release()
    line = assert_error(p, 11, "another backup of")
    assert "waited" not in line  # no wait: it did not take the holder for a gc
