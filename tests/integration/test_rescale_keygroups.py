"""statectl rescale --key-groups: key-group stores (Flink's layout) re-partitioned by copying the files
inside a target's key groups server-side, unread, and rewriting only the boundary ones. Whole statectl
processes, real rocksdict, a file:// blob store, real spark-submit (local[2]) where files are rewritten.
Each target must hold exactly the keys of its key groups, open in RocksDB, and restore as any snapshot."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from statectl.formats.keygroups import key_group, task_of
from tests.integration.test_rescale import STORE, _latest, _restored, _sources_intact
from tests.tools.standby_helpers import cli

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
        cli(tmp, "backup", "--create", "--blobstore", blobs, "--job", job, "--store", STORE, "--task",
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


def test_scale_out_copies_most_bytes_server_side(tmp_path: Path):
    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "kg", 4, foreign=True)
    before = {f"Partition {p}": _latest(tmp_path, blobs, "kg", f"Partition {p}") for p in range(4)}
    args = ["rescale", "--blobstore", blobs, "--job", "kg", "--to-job", "kg8", "--store", STORE, "--from", "4",
            "--to", "8", "--key-groups", str(GROUPS), "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    dry = json.loads(cli(tmp_path, *args, "--dry-run").stdout)
    assert dry["dry_run"] and not dry["committed"]
    total = sum(s["bytes"] for s in dry["sources"])
    assert dry["bytes_copied"] > 0.6 * total and 0 < dry["bytes_rewritten"] < 0.4 * total, dry
    text = cli(tmp_path, *args[:-2], "--dry-run").stdout
    assert "copied server-side" in text and "read and rewritten" in text

    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert (r["bytes_copied"], r["bytes_rewritten"]) == (dry["bytes_copied"], dry["bytes_rewritten"])
    assert r["bytes_read"] <= r["bytes_rewritten"] + 4096 * 4  # the executors read the boundary files only
    _check(tmp_path, blobs, "kg8", 8, expected, r)
    _sources_intact(tmp_path, blobs, "kg", before)


def test_scale_in_is_all_server_side_copies(tmp_path: Path):
    """4 -> 2: every source lies inside one target, nothing is read (no Spark job), the L0 files and
    their deletions go over as they are. Killed first while it copies: nothing committed."""
    import subprocess

    from tests.integration.test_rescale import _nothing_committed, _uncommitted_blobs_carry_a_ttl
    from tests.tools.standby_helpers import STATECTL, clean_env

    blobs = f"file://{tmp_path / 'blobs'}"
    expected = _make_sources(tmp_path, blobs, "kg", 4)
    before = {f"Partition {p}": _latest(tmp_path, blobs, "kg", f"Partition {p}") for p in range(4)}
    args = ["rescale", "--blobstore", blobs, "--job", "kg", "--to-job", "kg2", "--store", STORE, "--from", "4", "--to",
            "2", "--key-groups", str(GROUPS), "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    # killed while it copies: nothing committed, the sources as they were, every copy made so far TTL'd
    p = subprocess.run([STATECTL, *args], env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="during-copy=kill"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == -9, (p.returncode, p.stderr)
    _nothing_committed(tmp_path, blobs, "kg2", 2)
    _sources_intact(tmp_path, blobs, "kg", before)
    assert _uncommitted_blobs_carry_a_ttl(blobs, [ids[0] for ids in before.values()]) > 0
    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert r["bytes_rewritten"] == 0 and r["bytes_read"] == 0 and r["files_copied"] > 20
    assert all(t["files_read"] == 0 and t["bytes_copied"] > 0 for t in r["targets"])
    assert r["bytes_copied"] == sum(t["bytes_copied"] for t in r["targets"])
    # each target: the copies, a MANIFEST and CURRENT
    assert all(t["files"] == t["files_copied"] + 2 for t in r["targets"]), r["targets"]
    _check(tmp_path, blobs, "kg2", 2, expected, r)


def test_not_a_key_group_store_exits_1(tmp_path: Path):
    blobs = f"file://{tmp_path / 'blobs'}"
    _make_sources(tmp_path, blobs, "kg", 2)
    p = cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "kg", "--store", STORE, "--from", "2", "--to", "4",
            "--key-groups", "16", "--dry-run", code=1)
    assert "key group" in p.stderr and "--key-groups" in p.stderr
    p = cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "kg", "--store", STORE, "--from", "2", "--to", "4",
            "--key-groups", "16", "--partitioner", "a:b", code=2)
