"""Disaster recovery with credentials that can only read and list: restore, diff and snapshots work, and
change nothing in the bucket, even with an interrupted cleanup pending (that is for the next backup or gc,
which hold the store's lease)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_bad_input import (WHERE, assert_error, bucket_listing, make_world, s3_env)
from tests.tools.genstore import fingerprint, make_store


def test_read_only_credentials_restore_with_a_cleanup_pending(tmp_path: Path, seaweed_auth):
    world = make_world(tmp_path, keys=400)
    bucket = seaweed_auth.make_bucket()
    url = f"s3://{bucket}/statectl"
    rw = s3_env(world.tmp, seaweed_auth.endpoint, seaweed_auth.access_key, seaweed_auth.secret_key)
    ro = s3_env(world.tmp, seaweed_auth.endpoint, seaweed_auth.readonly_access_key, seaweed_auth.readonly_secret_key)
    backup = ["backup", *WHERE, "--state-dir", str(world.state), "--blobstore", url]
    assert world.run(*backup, env=rw).returncode == 0
    make_store(world.store, 200, 100, seed=11, start=50_000)
    expected = fingerprint(world.store)
    # The next backup commits, then dies before its cleanup: the cleanup stays pending.
    p = world.run(*backup, env=dict(rw, STATECTL_FAILPOINTS="after-commit=kill"))
    assert p.returncode == -9, p.stderr
    records = [json.loads(seaweed_auth.client.get_object(Bucket=bucket, Key=o[0])["Body"].read())
               for o in bucket_listing(seaweed_auth.client, bucket) if "/checkpoints/" in o[0]]
    assert sorted(r["cleanup-done"] for r in records) == [False, True]

    listing = bucket_listing(seaweed_auth.client, bucket)
    assert_error(world.run(*backup, env=ro), 12, bucket)  # the identity really cannot write
    target = world.tmp / "recovered"
    for args in (["restore", *WHERE, "--target-dir", str(target), "--blobstore", url],
                 ["restore", *WHERE, "--state-dir", str(world.state), "--blobstore", url],
                 ["diff", *WHERE, "--state-dir", str(world.state), "--blobstore", url],
                 ["snapshots", "list", *WHERE, "--blobstore", url],
                 ["snapshots", "show", *WHERE, "--blobstore", url],
                 ["snapshots", "verify", "--download", *WHERE, "--blobstore", url]):
        p = world.run(*args, env=ro)
        assert p.returncode == 0, (args, p.stderr)
    assert fingerprint(target) == expected == fingerprint(world.store)
    assert bucket_listing(seaweed_auth.client, bucket) == listing

    # The next backup, which can write and holds the lease, finishes the cleanup.
    assert world.run(*backup, env=rw).returncode == 0
    records = [json.loads(seaweed_auth.client.get_object(Bucket=bucket, Key=o[0])["Body"].read())
               for o in bucket_listing(seaweed_auth.client, bucket) if "/checkpoints/" in o[0]]
    assert [r["cleanup-done"] for r in records if r["state"] == "committed"] == [True]
    # The snapshots it dropped are marked expired, their blobs kept until the grace period ends.
    assert all(r["delete-after-millis"] > r["expired-time-millis"] > 0 for r in records if r["state"] == "expired")


def _records(client, bucket: str) -> list[dict]:
    return [json.loads(client.get_object(Bucket=bucket, Key=o[0])["Body"].read())
            for o in bucket_listing(client, bucket) if "/checkpoints/" in o[0]]


def test_read_only_credentials_with_a_half_done_cleanup_and_gc(tmp_path: Path, seaweed_auth):
    """A backup killed half way through its cleanup (the older snapshot marked expired, some of its blobs
    gone): the read-only identity restores, diffs, lists, shows and verifies, and writes nothing, not even a
    reader pin (a note says so); its backup and gc fail with exit 12, and so does its gc --dry-run (a dry run
    exits as the command would); a gc that can write then finishes the cleanup."""
    world = make_world(tmp_path, keys=400)
    bucket = seaweed_auth.make_bucket()
    url = f"s3://{bucket}/statectl"
    rw = s3_env(world.tmp, seaweed_auth.endpoint, seaweed_auth.access_key, seaweed_auth.secret_key)
    ro = s3_env(world.tmp, seaweed_auth.endpoint, seaweed_auth.readonly_access_key, seaweed_auth.readonly_secret_key)
    backup = ["backup", *WHERE, "--state-dir", str(world.state), "--blobstore", url]
    assert world.run(*backup, env=rw).returncode == 0
    make_store(world.store, 200, 100, seed=11, start=50_000)
    expected = fingerprint(world.store)
    # No grace: the cleanup deletes the older snapshot's blobs at once, and is killed half way.
    p = world.run(*backup, "--grace", "0s", env=dict(rw, STATECTL_FAILPOINTS="during-cleanup=kill"))
    assert p.returncode == -9, p.stderr
    assert sorted((r["state"], r["cleanup-done"]) for r in _records(seaweed_auth.client, bucket)) == \
        [("committed", False), ("expired", True)]

    listing = bucket_listing(seaweed_auth.client, bucket)
    for args in (backup, ["gc", "--blobstore", url]):
        line = assert_error(world.run(*args, env=ro), 12, bucket)
        assert "access denied" in line, line
    target = world.tmp / "recovered"
    p = world.run("restore", *WHERE, "--target-dir", str(target), "--blobstore", url, env=ro)
    assert p.returncode == 0, p.stderr
    assert "note: no reader pin" in p.stderr and "cannot write" in p.stderr, p.stderr
    assert fingerprint(target) == expected
    for args in (["diff", *WHERE, "--state-dir", str(world.state), "--blobstore", url],
                 ["snapshots", "list", *WHERE, "--blobstore", url],
                 ["snapshots", "show", *WHERE, "--blobstore", url],
                 ["snapshots", "verify", *WHERE, "--blobstore", url],
                 ["snapshots", "verify", "--download", *WHERE, "--blobstore", url]):
        p = world.run(*args, env=ro)
        assert p.returncode == 0, (args, p.stderr)
    # A dry run exits as the gc would: 12, before it reads anything (the plan of a gc these credentials
    # could not run is no plan); the identity that can write dry-runs it.
    line = assert_error(world.run("gc", "--dry-run", "--blobstore", url, env=ro), 12, bucket)
    assert "access denied" in line and "not write" in line, line
    p = world.run("gc", "--dry-run", "--blobstore", url, env=rw)
    assert p.returncode == 0, p.stderr
    assert "retention of page-views-1/Partition 0/counts: " in p.stdout, p.stdout
    assert bucket_listing(seaweed_auth.client, bucket) == listing

    p = world.run("gc", "--blobstore", url, env=rw)
    assert p.returncode == 0, p.stderr
    assert "1 interrupted cleanup finished" in p.stdout, p.stdout
    assert [(r["state"], r["cleanup-done"]) for r in _records(seaweed_auth.client, bucket)] == [("committed", True)]
    latest = _records(seaweed_auth.client, bucket)[0]["snapshot-index-blob-id"]
    index = json.loads(seaweed_auth.client.get_object(Bucket=bucket, Key=f"statectl/{latest}")["Body"].read())
    needed = {f"statectl/{latest}"} | {f"statectl/{b['blob-id']}" for f in index["dir-index"]["files-present"]
                                        for b in f["blobs"]}
    assert {k for k, *_ in bucket_listing(seaweed_auth.client, bucket) if "/blobs/" in k} == needed
    p = world.run("restore", *WHERE, "--target-dir", str(world.tmp / "again"), "--blobstore", url, env=ro)
    assert p.returncode == 0, p.stderr
    assert fingerprint(world.tmp / "again") == expected
