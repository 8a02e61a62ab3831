"""snapshots copy (issue 20) against real SeaweedFS and file://: within a bucket, across buckets of one
endpoint (server-side: only the index and records through the client), file:// -> s3:// (streamed, with a
note); the copy restores to the source's content; a copy killed half way leaves only what gc reclaims; a
missing source blob fails with nothing committed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from statectl.blobstore import S3Options, open_blobstore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.backup import BackupOptions, backup
from statectl.engine.copy import CopyOptions, copy_snapshot
from statectl.engine.gc import GcOptions, gc
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import CorruptSnapshotError, SnapshotNotFoundError
from statectl.local.layout import store_dir
from tests.tools.gcwait import past_mtime_grain
from tests.tools.genstore import fingerprint, make_store

SRC = StoreRef("page-views", "1", "Partition 0", "counts")
DST = StoreRef("page-views-staging", "1", "Partition 3", "counts-copy")
CHUNK = 1024 * 1024


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    d = store_dir(tmp_path / "state", SRC.store, SRC.task)
    make_store(d, 3000, 1024, seed=3, sst_mb=1)
    return d


def _backup(bs, sdir: Path):
    return backup(BackupOptions(SRC, sdir, chunk_size=CHUNK), bs, BlobCheckpointStore(bs))


def _restored(bs, ref: StoreRef, target: Path) -> tuple[int, str]:
    restore(RestoreOptions(ref, target.parent / "unused", target_dir=target), bs, BlobCheckpointStore(bs))
    return fingerprint(target)


def _s3(seaweed, s3_options: S3Options, bucket: str | None = None):
    bucket = bucket or seaweed.make_bucket()
    return open_blobstore(f"s3://{bucket}/p/{uuid.uuid4().hex[:6]}", s3=s3_options)


def _nothing_committed(bs, ref: StoreRef) -> bool:
    try:
        return BlobCheckpointStore(bs).latest(ref) is None and not BlobCheckpointStore(bs).list(ref)
    except SnapshotNotFoundError:
        return True


def _blob_keys(bs) -> set[str]:
    return {i.key for i in bs.list("blobs/")}


def _referenced(bs) -> set[str]:
    cps = BlobCheckpointStore(bs)
    keys: set[str] = set()
    for ref in cps.refs():
        for r in cps.list(ref):
            keys |= snapshot_blob_ids(r.index_blob_id, read_index(bs, r.index_blob_id))
    return keys


@pytest.mark.parametrize("where", ["file", "s3-same-bucket", "s3-other-bucket"])
def test_copy_restores_to_the_source_content(where, sdir: Path, tmp_path: Path, request):
    if where == "file":
        src = open_blobstore(f"file://{tmp_path / 'blobs'}")
        dst = src
    else:
        seaweed, opts = request.getfixturevalue("seaweed"), request.getfixturevalue("s3_options")
        src = _s3(seaweed, opts)
        dst = src if where == "s3-same-bucket" else _s3(seaweed, opts)
    b = _backup(src, sdir)
    expected = fingerprint(sdir)
    src_blobs_before = _blob_keys(src)
    r = copy_snapshot(CopyOptions(SRC, DST), src, BlobCheckpointStore(src), dst, BlobCheckpointStore(dst))

    assert r.server_side and not r.notes
    assert r.files == b.files_total and r.bytes_copied == b.bytes_total and r.blobs_copied >= r.files - 1
    # Server-side: only the index and the catalog records went through the client, never the data.
    assert r.bytes_through_client < 64 * 1024 < r.bytes_copied, r
    index = read_index(dst, r.snapshot_id)
    m = index.snapshot_metadata
    assert (m.job_name, m.job_id, m.task_name, m.store_name) == (DST.job, DST.job_id, DST.task, DST.store)
    assert m.checkpoint_id == r.checkpoint_id != b.checkpoint_id
    source = read_index(src, b.snapshot_id)
    new_files = dict(index.dir_index.walk_present())
    for rel, f in source.dir_index.walk_present():  # same file metadata and CRCs, new blob ids
        assert new_files[rel].file_metadata == f.file_metadata and new_files[rel].checksum == f.checksum
        assert {x.offset for x in new_files[rel].blobs} == {x.offset for x in f.blobs}
        assert not {x.blob_id for x in new_files[rel].blobs} & {x.blob_id for x in f.blobs}
    # Committed: the copies are permanent (their TTL removed), the target lists the snapshot.
    for blob in index.present_blob_ids()[:5] + [r.snapshot_id]:
        assert dst.stat(blob).expires_at is None
    assert BlobCheckpointStore(dst).latest(DST).index_blob_id == r.snapshot_id
    assert _restored(dst, DST, tmp_path / "restored-copy") == expected
    # The source is untouched and still restores.
    assert src_blobs_before <= _blob_keys(src)
    assert _restored(src, SRC, tmp_path / "restored-src") == expected


def test_copy_file_to_s3_streams_and_says_so(sdir: Path, tmp_path: Path, seaweed, s3_options):
    src = open_blobstore(f"file://{tmp_path / 'blobs'}")
    dst = _s3(seaweed, s3_options)
    _backup(src, sdir)
    r = copy_snapshot(CopyOptions(SRC, DST), src, BlobCheckpointStore(src), dst, BlobCheckpointStore(dst))
    assert not r.server_side
    assert any("streamed" in n for n in r.notes), r.notes
    assert r.bytes_through_client >= 2 * r.bytes_copied  # down from file://, up to S3
    assert _restored(dst, DST, tmp_path / "restored") == fingerprint(sdir)


def test_multipart_server_side_copy_of_a_large_blob(seaweed, s3_options, tmp_path: Path):
    """Above copy_threshold the copy is a multipart upload of UploadPartCopy parts, in parallel."""
    import dataclasses
    import io

    opts = dataclasses.replace(s3_options, copy_threshold=5 * 1024 * 1024, copy_part_size=5 * 1024 * 1024)
    a, b = _s3(seaweed, opts), _s3(seaweed, opts)
    data = os.urandom(12 * 1024 * 1024 + 123)
    key = a.put(io.BytesIO(data), size=len(data), ttl_seconds=None)
    counts_before = b.request_counts().get("copy", 0)
    new = b.copy(key, ttl_seconds=600, source=a, size=len(data))
    assert b.request_counts()["copy"] == counts_before + 1
    out = io.BytesIO()
    b.get(new, out)
    assert out.getvalue() == data
    assert b.stat(new).expires_at is not None  # TTL'd like any copy
    assert b.byte_counts()["sent"] == 0  # nothing went up from the client


def _cli_env(tmp_path: Path, s3_options: S3Options | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "cfg")
    if s3_options is not None:
        env.update(STATECTL_S3_ENDPOINT=s3_options.endpoint_url, AWS_ACCESS_KEY_ID=s3_options.access_key_id,
                   AWS_SECRET_ACCESS_KEY=s3_options.secret_access_key, STATECTL_S3_REGION="us-east-1")
    return env


def _copy_args(src_url: str, dst_url: str, *extra: str) -> list[str]:
    statectl = str(Path(sys.executable).parent / "statectl")
    return [statectl, "--output", "json", "snapshots", "copy", "--blobstore", src_url, "--job", SRC.job,
            "--task", SRC.task, "--store", SRC.store, "--to-blobstore", dst_url, "--to-job", DST.job,
            "--to-task", DST.task, "--to-store", DST.store, "-j", "2", *extra]


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_copy_killed_half_way_leaves_only_what_gc_reclaims(backend, sdir: Path, tmp_path: Path, request,
                                                          monkeypatch):
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)
    if backend == "file":
        src = dst = open_blobstore(f"file://{tmp_path / 'blobs'}")
        s3_options = None
    else:
        seaweed, s3_options = request.getfixturevalue("seaweed"), request.getfixturevalue("s3_options")
        src, dst = _s3(seaweed, s3_options), _s3(seaweed, s3_options)
    _backup(src, sdir)
    expected = fingerprint(sdir)
    src_blobs = _blob_keys(src)
    env = _cli_env(tmp_path, s3_options)
    killed = subprocess.run(_copy_args(src.url, dst.url), env=dict(env, STATECTL_FAILPOINTS="during-copy=kill"),
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert _nothing_committed(dst, DST)
    left = _blob_keys(dst) - src_blobs
    assert left, "the kill came after some blobs were copied"
    assert all(dst.stat(k).expires_at is not None for k in left)  # every copy carries its TTL
    # gc (grace 0, as after the grace) reclaims every copy; the source keeps all its blobs and restores.
    past_mtime_grain(dst)
    gc(GcOptions(grace_seconds=0), dst, BlobCheckpointStore(dst))
    assert _blob_keys(dst) - src_blobs == set()
    assert src_blobs <= _blob_keys(src) and _referenced(src) <= _blob_keys(src)
    assert _restored(src, SRC, tmp_path / "restored") == expected
    # A copy run after it succeeds.
    ok = subprocess.run(_copy_args(src.url, dst.url), env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert set(out) >= {"snapshot_id", "blobs_copied", "bytes_copied", "bytes_through_client", "duration_s", "notes"}
    assert _restored(dst, DST, tmp_path / "restored-copy") == expected


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_missing_source_blob_fails_with_nothing_committed(backend, sdir: Path, tmp_path: Path, request):
    if backend == "file":
        src = dst = open_blobstore(f"file://{tmp_path / 'blobs'}")
        s3_options = None
    else:
        seaweed, s3_options = request.getfixturevalue("seaweed"), request.getfixturevalue("s3_options")
        src = dst = _s3(seaweed, s3_options)
    b = _backup(src, sdir)
    victim = read_index(src, b.snapshot_id).present_blob_ids()[-1]
    src.delete([victim])
    before = _blob_keys(src)
    with pytest.raises(CorruptSnapshotError, match=victim):
        copy_snapshot(CopyOptions(SRC, DST), src, BlobCheckpointStore(src), dst, BlobCheckpointStore(dst))
    assert _nothing_committed(dst, DST)
    r = subprocess.run(_copy_args(src.url, dst.url), env=_cli_env(tmp_path, s3_options), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and victim in errors[0] and "Traceback" not in r.stderr
    assert _nothing_committed(dst, DST)
    # Whatever was copied before the failure carries its TTL; the source lost nothing more.
    assert all(dst.stat(k).expires_at is not None for k in _blob_keys(dst) - before)
    assert before <= _blob_keys(src)


def test_bad_id_and_wrong_credentials(sdir: Path, tmp_path: Path, seaweed_auth):
    opts = S3Options(endpoint_url=seaweed_auth.endpoint, region="us-east-1", access_key_id="AK",
                     secret_access_key="SK", max_connections=8)
    src = _s3(seaweed_auth, opts)
    _backup(src, sdir)
    env = _cli_env(tmp_path, opts)
    bad_id = subprocess.run(_copy_args(src.url, src.url, "ffffffffffff"), env=env, capture_output=True, text=True,
                            timeout=120)
    assert bad_id.returncode == 10, bad_id.stderr
    bad_key = subprocess.run(_copy_args(src.url, src.url), env=dict(env, AWS_SECRET_ACCESS_KEY="wrong"),
                             capture_output=True, text=True, timeout=120)
    assert bad_key.returncode == 12, bad_key.stderr
    assert "Traceback" not in bad_key.stderr
    assert _nothing_committed(src, DST)


def test_unreachable_target_endpoint(sdir: Path, tmp_path: Path):
    src = open_blobstore(f"file://{tmp_path / 'blobs'}")
    _backup(src, sdir)
    env = dict(_cli_env(tmp_path, None), STATECTL_RETRY_TIME="1", STATECTL_TIMEOUT="1",
               AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y")
    r = subprocess.run(_copy_args(src.url, "s3://nowhere-bucket/p", "--to-s3-endpoint", "http://127.0.0.1:9"),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]) == 1
    assert "Traceback" not in r.stderr


def test_copy_commits_to_the_target_jobs_checkpoint_topic(tansu, sdir: Path, tmp_path: Path):
    """With --kafka the copy is committed exactly as a backup: the target job's checkpoint topic names it."""
    from statectl.catalog.kafka_log import KafkaCheckpointLog, KafkaCheckpointLogs
    from tests.integration.test_kafka_checkpoints import Topic

    suffix = uuid.uuid4().hex[:8]
    src_ref = StoreRef(f"pv_{suffix}", "1", "Partition 0", "counts")
    dst_ref = StoreRef(f"staging_{suffix}", "1", "Partition 2", "counts")
    Topic(tansu.bootstrap, src_ref.job).create(tansu)
    Topic(tansu.bootstrap, dst_ref.job).create(tansu)
    bs = open_blobstore(f"file://{tmp_path / 'blobs'}")
    cps = BlobCheckpointStore(bs, KafkaCheckpointLogs(tansu.bootstrap))
    try:
        backup(BackupOptions(src_ref, sdir, chunk_size=CHUNK), bs, cps)
        r = copy_snapshot(CopyOptions(src_ref, dst_ref), bs, cps, bs, cps)
        with KafkaCheckpointLog(tansu.bootstrap, dst_ref.job, "1") as log:
            assert log.latest(dst_ref) == (r.checkpoint_id, r.snapshot_id)
        target = tmp_path / "t"
        restore(RestoreOptions(dst_ref, tmp_path / "none", target_dir=target), bs, cps)
        assert fingerprint(target) == fingerprint(sdir)
    finally:
        cps.close()


def test_copy_domains(tmp_path: Path, seaweed, s3_options):
    """file:// stores copy from each other; S3 stores of one endpoint do; S3 does not copy from file://."""
    import io

    from statectl.errors import UsageError

    a, b = open_blobstore(f"file://{tmp_path / 'a'}"), open_blobstore(f"file://{tmp_path / 'b'}")
    key = a.put(io.BytesIO(b"x" * 1000), size=1000, ttl_seconds=None)
    new = b.copy(key, ttl_seconds=600, source=a, size=1000)
    assert b.stat(new).size == 1000 and b.stat(new).expires_at is not None
    s3 = _s3(seaweed, s3_options)
    assert s3.copy_domain != a.copy_domain
    with pytest.raises(UsageError, match="stream"):
        s3.copy(key, ttl_seconds=600, source=a, size=1000)


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_a_copy_onto_its_source_by_another_spelling_is_refused(backend, sdir: Path, tmp_path: Path, request):
    """--to-blobstore names the source store in another way (a trailing or doubled slash, ``/./``, a symlink
    to the dir, the endpoint with a trailing slash): the same store (exit 2), nothing written; before, it made
    a new snapshot of the source itself and --keep-last retired the source's own."""
    if backend == "s3":
        seaweed, opts = request.getfixturevalue("seaweed"), request.getfixturevalue("s3_options")
        bucket = seaweed.make_bucket()
        url = f"s3://{bucket}/p"
        spellings = [([f"s3://{bucket}/p/"], []), ([f"s3://{bucket}//p"], []),
                     ([url], ["--to-s3-endpoint", opts.endpoint_url + "/"])]
        bs = open_blobstore(url, s3=opts)
    else:
        opts = None
        (tmp_path / "fb").mkdir()
        (tmp_path / "ln").symlink_to(tmp_path / "fb")
        url = f"file://{tmp_path}/fb"
        spellings = [([f"file://{tmp_path}/./fb"], []), ([f"file://{tmp_path}/ln"], []),
                     ([f"file://{tmp_path}/fb/"], [])]
        bs = open_blobstore(url)
    try:
        _backup(bs, sdir)
        listing = {i.key: i.size for i in bs.list("")}
        for (to,), extra in spellings:
            for dry in ([], ["--dry-run"]):
                args = _copy_args(url, to, *extra, *dry, "--keep-last", "1")
                # the source's own job, task and store: only the blob store is named again
                args = args[:args.index("--to-job")] + args[args.index("-j"):]
                p = subprocess.run(args, capture_output=True, text=True, env=_cli_env(tmp_path, opts), timeout=120)
                assert p.returncode == 2, (to, extra, dry, p.stdout, p.stderr)
                assert "the target of a copy is the source store itself" in p.stderr, p.stderr
                assert {i.key: i.size for i in bs.list("")} == listing, (to, extra, dry)
        # another prefix of the same bucket (or a sibling dir) is another store: the copy goes ahead
        sibling = f"{url}-2"
        args = _copy_args(url, sibling, "--create")
        args = args[:args.index("--to-job")] + args[args.index("-j"):]
        p = subprocess.run(args, capture_output=True, text=True, env=_cli_env(tmp_path, opts), timeout=300)
        assert p.returncode == 0, p.stderr
        assert {i.key: i.size for i in bs.list("")} == listing
    finally:
        bs.close()
