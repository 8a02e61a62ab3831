"""statectl rescale --key-groups: key-group stores (Flink's layout) re-partitioned by copying every file a
target needs server-side, unread, and clipping off the key groups it does not own with range deletions;
a source whose files reach into another source's key groups of a target is read whole by the executors.
Whole statectl processes, real rocksdict, a file:// blob store or SeaweedFS, real spark-submit (local[2])
where a source is read. Each target must hold exactly the keys of its key groups, open in RocksDB, compact,
and restore as any snapshot."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from statectl.formats.keygroups import key_group, task_of
from tests.integration.test_rescale import STORE, _latest, _restored, _sources_intact
from tests.tools.standby_helpers import cli, cli_here

pytestmark = pytest.mark.timeout(600)
GROUPS = 128
SPARK = ["--master", "local[2]"]


def _key(group: int, i: int) -> bytes:
    return bytes([group]) + b"user-%05d" % i


def _make_sources(tmp: Path, blobs: str, job: str, n: int, foreign: bool = False,
                  groups: int = GROUPS) -> dict[bytes, bytes]:
    """N key-group stores: a bulk-loaded base (one SST file per 3 key groups, at the bottom level), then
    overwrites and deletions in two key groups flushed into L0 (inside a target of 4 -> 8), and in the two
    key groups around the middle of each source (a boundary of 4 -> 8); backed up. ``foreign``: a last
    flush also holds a key of the task before's last key group, which is not the source's to give (Flink
    clips it away). ``groups``: the store's number of key groups. Returns the content the sources own."""
    import rocksdict

    from statectl.formats.keygroups import task_range
    from statectl.rocks.sst import ingest_into_new_store, write_sst

    rng = random.Random(3)
    expected: dict[bytes, bytes] = {}
    for p in range(n):
        first, last = task_range(p, n, groups)
        path = tmp / "state" / STORE / f"Partition_{p}"
        path.parent.mkdir(parents=True, exist_ok=True)
        ssts = []
        for g0 in range(first, last + 1, 3):
            entries = []
            for g in range(g0, min(g0 + 3, last + 1)):
                for i in range(150):
                    entries.append((_key(g, i), rng.randbytes(100)))
            write_sst(tmp / f"base-{p}-{g0}.sst", entries)
            ssts.append(tmp / f"base-{p}-{g0}.sst")
            expected.update(entries)
        ingest_into_new_store(path, ssts)
        db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
        mid = (first + last + 1) // 2
        for pair in ((first + 5, first + 6), (mid - 1, mid)):
            for g in pair:
                for i in range(0, 150, 4):
                    db[_key(g, i)] = v = b"new-" + rng.randbytes(8)
                    expected[_key(g, i)] = v
                for i in range(1, 150, 9):
                    del db[_key(g, i)]
                    expected.pop(_key(g, i))
            db.flush()
        if foreign and p > 0:  # beside an overwrite in its first key group, a key of the task before's last
            db[_key(first, 3)] = v = b"mine"
            expected[_key(first, 3)] = v
            db[_key(first - 1, 999)] = b"not mine"
            db.flush()
        db.close()
        cli_here(tmp, "backup", "--create", "--blobstore", blobs, "--job", job, "--store", STORE, "--task",
                 f"Partition {p}", "--state-dir", str(tmp / "state"))
    return expected


def _check(tmp: Path, blobs: str, job: str, m: int, expected: dict[bytes, bytes], r: dict) -> None:
    assert r["verified"] and r["committed"] and r["changelog_position"] is None and r["key_groups"] == GROUPS
    for j in range(m):
        want = {k: v for k, v in expected.items() if task_of(key_group(k, GROUPS), m, GROUPS) == j}
        got = _restored(tmp, blobs, job, f"Partition {j}")
        assert got == want, f"target Partition {j} differs from its key groups' keys"
        # a real RocksDB opens the restored target read-write and compacts it
        import rocksdict

        path = tmp / "restored" / job / f"Partition_{j}"
        db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
        try:
            db.compact_range(None, None)
            assert dict(db.items()) == want
        finally:
            db.close()


def _sst_count(tmp: Path, blobs: str, job: str, task: str) -> int:
    snap = _latest(tmp, blobs, job, task)[0]
    shown = json.loads(cli_here(tmp, "snapshots", "show", snap, "--blobstore", blobs, "--job", job, "--store", STORE,
                                "--task", task, "-o", "json").stdout)
    return sum(f["file-name"].endswith(".sst") for f in shown["dir-index"]["files-present"])


def test_scale_out_and_back_copies_every_file_and_reads_none(tmp_path: Path):
    """4 -> 8: every file a target needs is copied, the boundary files into both targets, and the key groups
    beyond a target's clipped off (a source's key of the task before's key group among them); no Spark job.
    8 -> 4, the targets back: the files both halves copied are listed once, the range deletions left behind,
    and each target is its source's files again."""
    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "kg", 4, foreign=True)
    before = {f"Partition {p}": _latest(tmp_path, blobs, "kg", f"Partition {p}") for p in range(4)}
    args = ["rescale", "--blobstore", blobs, "--job", "kg", "--to-job", "kg8", "--store", STORE, "--from", "4",
            "--to", "8", "--key-groups", str(GROUPS), "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    dry = json.loads(cli(tmp_path, *args, "--dry-run").stdout)
    assert dry["dry_run"] and not dry["committed"]
    ssts = sum(s["bytes"] for s in dry["sources"]) - 4 * 64 * 1024  # give or take the MANIFESTs and OPTIONS
    assert dry["bytes_copied"] > ssts and dry["bytes_rewritten"] == 0 and dry["files_rewritten"] == 0, dry
    text = cli(tmp_path, *args[:-2], "--dry-run").stdout
    assert "copied server-side" in text and "0 files (0 B) read and rewritten" in text

    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert (r["bytes_copied"], r["files_copied"]) == (dry["bytes_copied"], dry["files_copied"])
    assert r["bytes_read"] == 0 and r["bytes_written"] == 0 and "spark_s" not in r["phases"], r
    _check(tmp_path, blobs, "kg8", 8, expected, r)
    _sources_intact(tmp_path, blobs, "kg", before)

    back = [a if a not in ("kg", "kg8", "4", "8") else {"kg": "kg8", "kg8": "kg4", "4": "8", "8": "4"}[a]
            for a in args]
    r = json.loads(cli(tmp_path, *back, timeout=300).stdout)
    assert r["bytes_read"] == 0 and r["bytes_rewritten"] == 0 and "spark_s" not in r["phases"], r
    _check(tmp_path, blobs, "kg4", 4, expected, r)
    for p in range(4):  # the source's files, each once, and a range deletion of the task before's key
        assert _sst_count(tmp_path, blobs, "kg4", f"Partition {p}") == _sst_count(tmp_path, blobs, "kg",
                                                                                  f"Partition {p}") + (p > 0)


def test_sources_reaching_into_each_others_key_groups_are_read_whole(tmp_path: Path):
    """4 -> 2 where sources 1 and 3 hold a key of the task before's last key group, which lands in the same
    target: their files cannot be listed beside the others', so the executors read those two whole; the
    other two are copied."""
    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "kg", 4, foreign=True)
    r = json.loads(cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "kg", "--to-job", "kg2", "--store", STORE,
                       "--from", "4", "--to", "2", "--key-groups", str(GROUPS), "--work-dir", str(tmp_path), *SPARK,
                       "-o", "json", timeout=300).stdout)
    sources = r["sources"]
    assert r["bytes_rewritten"] == sources[1]["bytes"] + sources[3]["bytes"], r
    assert [s["keys"] for s in sources].count(None) == 2 and r["bytes_read"] > 0
    assert all(t["files_copied"] > 0 and t["files_read"] > 0 for t in r["targets"])
    _check(tmp_path, blobs, "kg2", 2, expected, r)


def test_scale_in_is_all_server_side_copies(tmp_path: Path):
    """4 -> 2: every source lies inside one target, nothing is read (no Spark job), the L0 files and
    their deletions go over as they are. Killed first while it copies: nothing committed. On file:// the
    copies are hard links to the sources' days-old files: gc keeps them as the fresh copies they are until
    their TTL or the grace runs out, then reclaims them, and the sources' blobs stay whole."""
    import subprocess

    from tests.integration.test_rescale import _nothing_committed, _uncommitted_blobs_carry_a_ttl
    from tests.tools.standby_helpers import STATECTL, clean_env

    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "kg", 4)
    before = {f"Partition {p}": _latest(tmp_path, blobs, "kg", f"Partition {p}") for p in range(4)}
    old = time.time() - 2 * 24 * 3600
    for f in (tmp_path / "blobs" / "blobs").rglob("*"):
        os.utime(f, (old, old))
    args = ["rescale", "--blobstore", blobs, "--job", "kg", "--to-job", "kg2", "--store", STORE, "--from", "4", "--to",
            "2", "--key-groups", str(GROUPS), "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    # killed while it copies: nothing committed, the sources as they were, every copy made so far TTL'd
    p = subprocess.run([STATECTL, *args], env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="during-copy=kill"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == -9, (p.returncode, p.stderr)
    _nothing_committed(tmp_path, blobs, "kg2", 2)
    _sources_intact(tmp_path, blobs, "kg", before)
    assert _uncommitted_blobs_carry_a_ttl(blobs, [ids[0] for ids in before.values()]) > 0
    _linked_copies_outlive_gc_until_due(tmp_path, blobs, before)
    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert r["bytes_rewritten"] == 0 and r["bytes_read"] == 0 and r["files_copied"] > 20
    assert all(t["files_read"] == 0 and t["bytes_copied"] > 0 for t in r["targets"])
    assert r["bytes_copied"] == sum(t["bytes_copied"] for t in r["targets"])
    # each target: the copies, a MANIFEST and CURRENT
    assert all(t["files"] == t["files_copied"] + 2 for t in r["targets"]), r["targets"]
    _check(tmp_path, blobs, "kg2", 2, expected, r)


def _linked_copies_outlive_gc_until_due(tmp: Path, blobs: str, sources: dict[str, list[str]]) -> None:
    """The TTL'd blobs a killed rescale left: its copies, each a hard link to a source's file, and the targets'
    own files it may have uploaded meanwhile. A gc keeps them all; once half the copies have an expired TTL and
    the others' sidecars are past the grace (and the uploads' TTLs expired), a gc deletes every one of them and
    nothing else, and the sources verify byte for byte."""
    root = tmp / "blobs"
    ttls = list((root / "blobs").rglob("*.ttl"))
    # (a sidecar without its blob is a copy the kill cut short: gc sweeps it as debris)
    left = sorted(b for b in (t.with_name(t.name[:-len(".ttl")]) for t in ttls) if b.exists())
    kept = {f.stat().st_ino for f in (root / "blobs").rglob("*") if f.is_file() and f.suffix != ".ttl"
            and f not in left}
    copies = [b for b in left if b.stat().st_ino in kept]
    assert copies and all(c.stat().st_nlink == 2 for c in copies), "the copies are not links to the sources' files"
    uploads = [b for b in left if b not in copies]
    gc = ["gc", "--blobstore", blobs, "--grace", "1m", "-v", "-o", "json"]
    assert json.loads(cli(tmp, *gc).stdout)["blobs_deleted"] == 0
    assert all(b.exists() for b in left)
    old = time.time() - 2 * 24 * 3600
    expected = []
    for k, b in enumerate(left):
        ttl = b.with_name(b.name + ".ttl")
        if k % 2 or b in uploads:
            ttl.write_text(str(int(time.time()) - 10))
            expected.append((b.relative_to(root).as_posix(), "TTL expired"))
        else:
            os.utime(ttl, (old, old))
            expected.append((b.relative_to(root).as_posix(), "unreferenced, older than the grace period"))
    r = json.loads(cli(tmp, *gc).stdout)
    assert sorted((d["key"], d["reason"]) for d in r["deleted"]) == sorted(expected)
    assert not any(b.exists() for b in left)
    _sources_intact(tmp, blobs, "kg", sources)


def test_not_a_key_group_store_exits_1(tmp_path: Path):
    blobs = f"file://{tmp_path / 'blobs'}"
    _make_sources(tmp_path, blobs, "kg", 2)
    p = cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "kg", "--store", STORE, "--from", "2", "--to", "4",
            "--key-groups", "16", "--dry-run", code=1)
    assert "key group" in p.stderr and "--key-groups" in p.stderr
    p = cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "kg", "--store", STORE, "--from", "2", "--to", "4",
            "--key-groups", "16", "--partitioner", "a:b", code=2)


def _blob_ids(url: str, s3: dict, job: str, tasks: int, tmp: Path) -> tuple[set[str], set[str]]:
    """The blob ids of the latest snapshots of ``job``'s tasks: of their SST files, and of their MANIFESTs."""
    from statectl.blobstore import S3Options, open_blobstore
    from statectl.catalog.index import read_index

    store = open_blobstore(url, s3=S3Options(**s3))
    try:
        ssts, manifests = set(), set()
        for p in range(tasks):
            index = read_index(store, _latest(tmp, url, job, f"Partition {p}")[0])
            for rel, fi in index.dir_index.walk_present():
                (ssts if rel.endswith(".sst") else manifests if rel.startswith("MANIFEST") else set()).update(
                    b.blob_id for b in fi.blobs)
        return ssts, manifests
    finally:
        store.close()


def test_on_s3_no_source_file_is_downloaded(tmp_path: Path, faulty_s3):
    """On SeaweedFS, every request through a proxy that logs them: 4 -> 8 and 8 -> 4 GET the sources'
    MANIFESTs but no byte of any source SST file; the targets restore to exactly their key groups' keys."""
    proxy = faulty_s3.proxy
    (tmp_path / "statectl.toml").write_text(
        f'[default]\ns3_endpoint = "{proxy.url}"\ns3_region = "us-east-1"\n'
        f's3_access_key_id = "{faulty_s3.seaweed.access_key}"\n'
        f's3_secret_access_key = "{faulty_s3.seaweed.secret_key}"\n')
    s3 = {"endpoint_url": faulty_s3.seaweed.endpoint, "region": "us-east-1",
          "access_key_id": faulty_s3.seaweed.access_key, "secret_access_key": faulty_s3.seaweed.secret_key}
    url = faulty_s3.url
    expected = _make_sources(tmp_path, url, "kg", 4)
    for job, to_job, n, m in (("kg", "kg8", 4, 8), ("kg8", "kg4", 8, 4)):
        ssts, manifests = _blob_ids(url, s3, job, n, tmp_path)
        proxy.reset_stats()
        r = json.loads(cli(tmp_path, "rescale", "--blobstore", url, "--job", job, "--to-job", to_job, "--store", STORE,
                           "--from", str(n), "--to", str(m), "--key-groups", str(GROUPS), "--work-dir",
                           str(tmp_path), *SPARK, "-o", "json", timeout=300).stdout)
        gets = [target for method, target, _ in list(proxy.log) if method == "GET"]
        assert all(any(b in g for g in gets) for b in manifests), "the proxy's log misses the MANIFESTs' GETs"
        downloaded = [g for g in gets if any(b in g for b in ssts)]
        assert not downloaded, f"{len(downloaded)} GETs of source SST blobs, e.g. {downloaded[0]}"
        _check(tmp_path, url, to_job, m, expected, r)
