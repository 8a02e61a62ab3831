"""A hostile operator's blob store URLs, and an S3 store used thousands of times in one process.

Found: a ``file://`` root that is a symlink to ``/`` was accepted; gc's debris sweep walked the whole
root and deleted a user's ``.tmp-*`` and ``*.ttl`` files beside the store; ``symdir/../blobs`` opened
the dir a lexical reading names, not the one the OS resolves; a NUL in the URL crashed with
"unexpected ValueError".
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from tests.integration.test_bad_input import assert_error, clean_env, run
from tests.tools.genstore import make_store

WHERE = ["--job", "hostile", "--store", "counts"]
OLD = time.time() - 3 * 24 * 3600


def _age(*paths: Path) -> None:
    for p in paths:
        os.utime(p, (OLD, OLD), follow_symlinks=False)


def test_a_root_that_resolves_to_the_filesystem_root_is_refused(tmp_path: Path):
    (tmp_path / "rootlink").symlink_to("/")
    (tmp_path / "d").mkdir()
    for url in (f"file://{tmp_path}/rootlink", f"file://{tmp_path}/rootlink/", f"file://{tmp_path}/rootlink/tmp/..",
                f"file://{tmp_path}/d/" + "../" * 40, "file:///"):
        for args in (["snapshots", "list", *WHERE], ["gc", "--grace", "1m", "--dry-run"]):
            p = run(tmp_path, *args, "--blobstore", url)
            assert_error(p, 2, "filesystem root")


def test_gc_touches_nothing_beside_the_store_in_its_root(tmp_path: Path):
    home = tmp_path / "fakehome"
    work = home / "work"
    work.mkdir(parents=True)
    draft, notes = work / ".tmp-draft.txt", work / "notes.ttl"
    draft.write_text("important\n")
    notes.write_text("d\n")
    top_tmp, top_ttl = home / ".tmp-x", home / "y.ttl"
    top_tmp.write_text("mine\n")
    top_ttl.write_text("mine too\n")
    # A killed write of statectl's own, in its own dir: this one is debris.
    (home / "blobs/ab").mkdir(parents=True)
    partial = home / "blobs/ab/.tmp-abab.0000abcd"
    partial.write_bytes(b"partial")
    _age(draft, notes, top_tmp, top_ttl, partial)
    p = run(tmp_path, "gc", "--blobstore", f"file://{home}", "--grace", "1m", "-v", "-o", "json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert [d["key"] for d in result["debris"]] == ["blobs/ab/.tmp-abab.0000abcd"]
    assert not partial.exists()
    assert draft.read_text() == "important\n" and notes.read_text() == "d\n"
    assert top_tmp.read_text() == "mine\n" and top_ttl.read_text() == "mine too\n"


def test_a_symlinked_dir_inside_the_root_is_not_swept(tmp_path: Path):
    # blobs/ as a link elsewhere (here: to a user's dir) is not statectl's to sweep.
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "ab").mkdir(parents=True)
    victim = elsewhere / "ab" / ".tmp-report"
    victim.write_text("a user's file\n")
    _age(victim)
    root = tmp_path / "store"
    root.mkdir()
    (root / "blobs").symlink_to(elsewhere)
    p = run(tmp_path, "gc", "--blobstore", f"file://{root}", "--grace", "1m", "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["debris_deleted"] == 0
    assert victim.read_text() == "a user's file\n"


def test_the_root_is_the_dir_the_os_resolves(tmp_path: Path):
    target = tmp_path / "a" / "b"
    target.mkdir(parents=True)
    (tmp_path / "symdir").symlink_to(target)
    url = f"file://{tmp_path}/symdir/../blobs"  # the OS: a/b/.. = a, so a/blobs; a lexical reading: tmp/blobs
    store = open_blobstore(url)
    assert store.root == tmp_path / "a" / "blobs" == store.inner.root
    assert store.url == url
    store.put_at("checkpoints/x", b"1")
    assert (tmp_path / "a" / "blobs" / "checkpoints" / "x").read_bytes() == b"1"
    assert not (tmp_path / "blobs").exists()
    store.close()
    # and statectl as a command, with a snapshot taken through the link
    state = tmp_path / "state"
    make_store(state / "counts" / "Partition_0", 200, 100, seed=3, sst_mb=1)
    p = run(tmp_path, "backup", *WHERE, "--state-dir", str(state), "--blobstore", url)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "a" / "blobs" / "blobs").is_dir() and not (tmp_path / "blobs").exists()
    p = run(tmp_path, "snapshots", "list", *WHERE, "-o", "json", "--blobstore", f"file://{tmp_path}/a/blobs")
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1, p.stderr


@pytest.mark.parametrize("url", ["file://{tmp}/x%00y", "file://{tmp}/x\x00y", "file://{tmp}/x%0Ay", "file://{tmp}/x\ny",
                                 "file://{tmp}/x%1By", "file://{tmp}/x\ty", "file://{tmp}/x%7Fy", "file://{tmp}/x%C2%85y",
                                 "s3://bucket/x%00y", "s3://bucket/x\x00y", "s3://bucket/pre%0Dfix", "s3://buck%00et/x",
                                 "s3://bucket/a\x1bb"])
def test_control_characters_in_the_url_are_usage_errors(tmp_path: Path, url: str):
    url = url.format(tmp=tmp_path / "stores")
    (tmp_path / "stores").mkdir()
    env = clean_env(tmp_path, STATECTL_S3_ENDPOINT="http://127.0.0.1:9", STATECTL_S3_REGION="us-east-1",
                    AWS_ACCESS_KEY_ID="AK", AWS_SECRET_ACCESS_KEY="SK")
    if "\x00" in url:  # no process takes a NUL in its argv or environment: a config file can hold one
        (tmp_path / "statectl.toml").write_text('[default]\nblobstore = "%s"\n' % url.replace("\x00", "\\u0000"))
        p = run(tmp_path, "snapshots", "list", *WHERE, env=env)
    else:
        p = run(tmp_path, "snapshots", "list", *WHERE, "--blobstore", url, env=env)
    assert_error(p, 2, "control character")
    assert list((tmp_path / "stores").iterdir()) == []


@pytest.mark.timeout(300)  # a hang bound; what 300 rounds cost is for make bench
def test_many_requests_leave_no_threads_behind(seaweed, s3_url: str, s3_options):
    # Each request is bounded by one watchdog thread for the whole process, not a thread per request.
    store = open_blobstore(s3_url, s3=s3_options)
    key = store.put(io.BytesIO(b"x" * 1000), size=1000, ttl_seconds=None)
    baseline = threading.active_count()
    for i in range(300):
        store.stat(key)
        store.put_at(f"checkpoints/{i % 7}", b"r")
        buf = io.BytesIO()
        store.get(key, buf)
        assert buf.getvalue() == b"x" * 1000
    assert list(store.list("checkpoints/"))
    assert threading.active_count() == baseline
    assert [t.name for t in threading.enumerate()].count("statectl-s3-deadlines") == 1
    store.close()
