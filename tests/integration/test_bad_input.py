"""Bad input, end to end: statectl run as a real process must fail with one ``Error:`` line (and at
most one ``Hint:`` line), the documented exit code, no traceback, and nothing existing changed.

Every case compares before and after: the store's keys and values (genstore.fingerprint), a recursive
listing with sizes and mtimes of the state dir, and of the blob store (its dir, or its bucket listing).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from statectl import failpoints
from statectl.blobstore import open_blobstore
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.local.layout import store_dir
from statectl.errors import DiskFullError
from tests.tools.genstore import fingerprint, make_store

STATECTL = Path(sys.executable).parent / "statectl"
JOB, STORE, TASK = "page-views", "counts", "Partition 0"
REF = StoreRef(JOB, "1", TASK, STORE)
WHERE = ["--job", JOB, "--store", STORE]  # the snapshot's identity, for every state command
TMP_INFIX = ".statectl-restore-"


# ---- running statectl ----------------------------------------------------------------------------

def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Nothing of the developer's environment: no STATECTL_*, AWS_*, proxies or config files."""
    env = {
        "PATH": f"{STATECTL.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "LANG": "C.UTF-8",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }
    env.update(extra)
    return env


def run(tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(STATECTL), *args], cwd=tmp, env=env or clean_env(tmp), capture_output=True,
                          text=True, timeout=timeout)


def assert_error(p: subprocess.CompletedProcess, code: int, *names: str) -> str:
    """The contract for bad input; returns the error line. ``names`` must all appear in it."""
    where = f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    assert p.returncode == code, where
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, where
    lines = p.stderr.splitlines()
    assert lines and lines[0].startswith("Error: "), where
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("Hint: ")), where
    assert not lines[0].startswith("Error: unexpected "), where  # the catch-all for exceptions nobody mapped
    for name in names:
        assert name in lines[0], f"{name!r} not named in the error\n{where}"
    return lines[0]


# ---- what must not change ------------------------------------------------------------------------

def tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: kind, size (files) and mtime, by relative path."""
    out: dict[str, tuple] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            kind = "d" if p.is_dir() and not p.is_symlink() else ("l" if p.is_symlink() else "f")
            rel = str(p.relative_to(root))
            if kind == "d" and (rel + "/").startswith("pins/"):
                continue  # a reader's pin came and went (statectl.catalog.pins): a file left there still shows
            out[rel] = (kind, st.st_size if kind == "f" else 0, st.st_mtime_ns, st.st_mode)
    return out


def assert_same_tree(before: dict[str, tuple], after: dict[str, tuple], *, mtime_may_change: tuple[str, ...] = ()):
    """``mtime_may_change``: dirs in which a temp dir was made and removed again (their entries must
    still be the same, only their own mtime moved)."""
    assert sorted(after) == sorted(before), f"added {sorted(set(after) - set(before))}, " \
                                             f"removed {sorted(set(before) - set(after))}"
    for rel, b in before.items():
        a = after[rel]
        if rel in mtime_may_change:
            a, b = a[:2] + a[3:], b[:2] + b[3:]
        assert a == b, f"{rel} changed: {b} -> {a}"


@dataclass
class Capture:
    fingerprints: dict[str, tuple[int, str]]
    trees: dict[str, dict[str, tuple]]


def capture(stores: list[Path], dirs: list[Path]) -> Capture:
    # fingerprint() opens the store (as a secondary) and rocksdict rewrites its rocksdict-config.json:
    # fingerprint first, list after, so both listings are taken between the fingerprints.
    fps = {str(s): fingerprint(s) for s in stores}
    return Capture(fps, {str(d): tree(d) for d in dirs})


def capture_after(before: Capture) -> Capture:
    trees = {d: tree(Path(d)) for d in before.trees}
    return Capture({s: fingerprint(s) for s in before.fingerprints}, trees)


def assert_unchanged(before: Capture, after: Capture, *, mtime_may_change: tuple[str, ...] = ()) -> None:
    assert after.fingerprints == before.fingerprints
    for d in before.trees:
        assert_same_tree(before.trees[d], after.trees[d], mtime_may_change=mtime_may_change)


def temp_dirs_beside(store: Path) -> list[str]:
    return [p.name for p in store.parent.iterdir() if TMP_INFIX in p.name or ".statectl-old-" in p.name]


# ---- a world: one snapshot in the file:// store, and a different store in its place -----------

@dataclass
class World:
    tmp: Path
    state: Path
    store: Path     # the live store at the snapshot's store dir, with other contents than the snapshot
    blobs: Path     # the embedded default blob store, file://$XDG_DATA_HOME/statectl/blobs
    snapshot_id: str
    checkpoint_id: str

    def run(self, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        return run(self.tmp, *args, **kw)

    def restore_args(self) -> list[str]:
        return ["restore", *WHERE, "--state-dir", str(self.state)]

    @property
    def index_path(self) -> Path:
        return self.blobs.joinpath(*self.snapshot_id.split("/"))

    def index(self) -> dict:
        return json.loads(self.index_path.read_bytes())

    def write_index(self, obj: Any) -> None:
        self.index_path.write_text(json.dumps(obj))

    def biggest_file(self) -> tuple[str, Path]:
        """(file name, blob path) of the snapshot's largest file (an SST, in one blob)."""
        files = self.index()["dir-index"]["files-present"]
        f = max(files, key=lambda f: f["file-metadata"]["size"])
        assert len(f["blobs"]) == 1
        return f["file-name"], self.blobs.joinpath(*f["blobs"][0]["blob-id"].split("/"))

    def capture(self) -> Capture:
        return capture([self.store], [self.state, self.blobs])


def make_world(tmp: Path, *, keys: int = 2000, value_size: int = 512, sst_mb: int = 64) -> World:
    """Snapshot a store that then disappears, and put a different store at its place: a restore
    then has to download every file (nothing identical to reuse locally)."""
    (tmp / "home").mkdir()
    blobs = tmp / "xdg-data" / "statectl" / "blobs"
    src = store_dir(tmp / "src", STORE, TASK)
    make_store(src, keys, value_size, seed=1, sst_mb=sst_mb)
    bs = open_blobstore(f"file://{blobs}")
    try:
        r = backup(BackupOptions(REF, src), bs, BlobCheckpointStore(bs))
    finally:
        bs.close()
    shutil.rmtree(tmp / "src")
    state = tmp / "state"
    live = store_dir(state, STORE, TASK)
    make_store(live, 300, 100, seed=2)
    return World(tmp, state, live, blobs, r.snapshot_id, r.checkpoint_id)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


# ---- malformed and unsafe indexes ----------------------------------------------------------------

def test_snapshots_list_finds_the_index(world: World):
    p = world.run("snapshots", "list", *WHERE, "-o", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [r["snapshot_id"] for r in rows] == [world.snapshot_id]
    assert world.index_path.is_file()


def _garbage(data: bytes) -> bytes:
    return b"{this is not JSON"


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated"])
@pytest.mark.parametrize("command", ["restore", "show", "verify", "diff"])
def test_malformed_index(world: World, damage: Callable[[bytes], bytes], command: str):
    p = world.run("snapshots", "list", *WHERE, "-o", "json")
    index_path = world.blobs.joinpath(*json.loads(p.stdout)[0]["snapshot_id"].split("/"))
    index_path.write_bytes(damage(index_path.read_bytes()))
    args = {
        "restore": world.restore_args(),
        "show": ["snapshots", "show", *WHERE],
        "verify": ["snapshots", "verify", "--download", *WHERE],
        "diff": ["diff", *WHERE, "--state-dir", str(world.state)],
    }[command]
    before = world.capture()
    p = world.run(*args)
    assert_error(p, 1, world.snapshot_id, "malformed index")
    assert_unchanged(before, capture_after(before))


@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated"])
def test_malformed_index_file(world: World, damage: Callable[[bytes], bytes]):
    f = world.tmp / "saved-index.json"
    f.write_bytes(damage(world.index_path.read_bytes()))
    p = world.run("snapshots", "show", "--index-file", str(f))
    assert_error(p, 1, str(f), "malformed index")


def _unsafe_names(tmp: Path) -> list[str]:
    return ["..", "../escaped", str(tmp / "escaped"), "a/b", "a\x00b", "."]


UNSAFE_IDS = ["dotdot", "dotdot-slash", "absolute", "slash", "nul", "dot"]


@pytest.mark.parametrize("where", ["file", "dir", "file-in-dir"])
@pytest.mark.parametrize("which", range(6), ids=UNSAFE_IDS)
def test_unsafe_names_in_index(world: World, where: str, which: int):
    name = _unsafe_names(world.tmp)[which]
    index = world.index()
    root = index["dir-index"]
    f0 = dict(root["files-present"][0])
    if where == "file":
        root["files-present"][0]["file-name"] = name
    elif where == "dir":
        root["sub-dirs-present"] = [{"dir-name": name, "files-present": [f0]}]
    else:
        root["sub-dirs-present"] = [{"dir-name": "sub", "files-present": [dict(f0, **{"file-name": name})]}]
    world.write_index(index)
    outside = world.tmp / "escaped"
    new_target = world.tmp / "new" / "target"

    before = capture([world.store], [world.tmp])
    p = world.run(*world.restore_args())
    assert_error(p, 1, world.snapshot_id, "unsafe name")
    if where == "file":  # and into a new dir, which must not even be created
        p = world.run("restore", *WHERE, "--target-dir", str(new_target))
        assert_error(p, 1, "unsafe name")
    after = capture_after(before)
    assert_unchanged(before, after)
    assert not outside.exists() and not new_target.parent.exists()
    assert not temp_dirs_beside(world.store)


# ---- damaged blobs -------------------------------------------------------------------------------

def _missing(blob: Path) -> None:
    blob.unlink()


def _short(blob: Path) -> None:
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2])


def _long(blob: Path) -> None:
    with open(blob, "ab") as f:
        f.write(b"trailing bytes the index does not know")


def _flipped(blob: Path) -> None:
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))


DAMAGE = {  # damage, words of the restore error, does `verify` without --download see it
    "missing": (_missing, "missing", True),
    "short": (_short, "shorter than the index says", True),
    "long": (_long, "longer than the index says", True),
    "flipped": (_flipped, "CRC mismatch", False),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_blob(world: World, kind: str):
    damage, words, size_check_sees_it = DAMAGE[kind]
    file_name, blob = world.biggest_file()
    damage(blob)
    before = world.capture()

    p = world.run(*world.restore_args())
    assert_error(p, 1, file_name, words)
    # The temp dir beside the store came and went: only the parent dir's own mtime may move.
    assert_unchanged(before, capture_after(before), mtime_may_change=(STORE,))
    assert not temp_dirs_beside(world.store)

    before = world.capture()
    p = world.run("snapshots", "verify", *WHERE)
    if size_check_sees_it:
        assert_error(p, 1, world.snapshot_id)
        assert file_name in p.stdout
    else:
        assert p.returncode == 0, p.stderr
    p = world.run("snapshots", "verify", "--download", *WHERE, "-o", "json")
    assert_error(p, 1, world.snapshot_id)
    result = json.loads(p.stdout)
    assert result["ok"] is False
    assert [x["path"] for x in result["missing"] + result["corrupt"]] == [file_name]
    assert_unchanged(before, capture_after(before))


# ---- not found -----------------------------------------------------------------------------------

UNKNOWN = ["1600000000000-1", "deadbeefcafe"]


@pytest.mark.parametrize("snapshot", UNKNOWN)
def test_unknown_snapshot(world: World, snapshot: str):
    before = world.capture()
    for args in (
        [*world.restore_args(), "--snapshot", snapshot],
        ["restore", *WHERE, "--snapshot", snapshot, "--target-dir", str(world.tmp / "elsewhere")],
        ["diff", *WHERE, "--state-dir", str(world.state), "--snapshot", snapshot],
        ["diff", *WHERE, "--snapshot", snapshot, "--against", world.checkpoint_id],
        ["snapshots", "show", snapshot, *WHERE],
        ["snapshots", "verify", snapshot, *WHERE],
    ):
        assert_error(world.run(*args), 10, snapshot)
    assert_unchanged(before, capture_after(before))
    assert not (world.tmp / "elsewhere").exists()


def test_no_snapshot_of_that_store(world: World):
    before = world.capture()
    for args in (["restore", "--job", JOB, "--store", "other", "--target-dir", str(world.tmp / "elsewhere")],
                 ["snapshots", "show", "--job", JOB, "--store", "other"]):
        assert_error(world.run(*args), 10, "other")
    assert_unchanged(before, capture_after(before))


def test_backup_of_a_dir_that_is_not_a_store(world: World):
    junk = world.tmp / "junk"
    (junk / "sub").mkdir(parents=True)
    (junk / "notes.txt").write_text("hello\n")
    (junk / "sub" / "data.bin").write_bytes(os.urandom(4096))
    half = world.tmp / "half"  # a CURRENT naming a MANIFEST that is not there
    half.mkdir()
    (half / "CURRENT").write_text("MANIFEST-000009\n")
    before = capture([world.store], [world.tmp])
    for d in (junk, half):
        p = world.run("backup", *WHERE, "--store-dir", str(d))
        assert_error(p, 1, str(d), "not a RocksDB store")
        p = world.run("backup", *WHERE, "--store-dir", str(world.store), "--checkpoint-dir", str(d))
        assert_error(p, 1, str(d), "not a RocksDB store")
    assert_unchanged(before, capture_after(before))


def test_backup_of_a_store_dir_that_does_not_exist(world: World):
    before = capture([world.store], [])
    missing = world.tmp / "no" / "such" / "store"
    assert_error(world.run("backup", *WHERE, "--store-dir", str(missing)), 10, str(missing))
    assert_error(world.run("backup", "--job", JOB, "--store", "nosuch", "--state-dir", str(world.state)), 10,
                 str(store_dir(world.state, "nosuch", TASK)))
    assert_error(world.run("backup", "--job", JOB, "--all", "--state-dir", str(missing)), 10, str(missing))
    empty = world.tmp / "empty-state"
    empty.mkdir()
    before_empty = tree(world.tmp)
    assert_error(world.run("backup", "--job", JOB, "--all", "--state-dir", str(empty)), 10, str(empty))
    assert_error(world.run("diff", *WHERE, "--store-dir", str(missing)), 10, str(missing))
    assert_same_tree(before_empty, tree(world.tmp))
    assert not missing.parent.exists()
    assert_unchanged(before, capture_after(before))


# ---- a store held by a running process -----------------------------------------------------------

HOLDER = """
import sys
from rocksdict import Checkpoint, Options, Rdict
db = Rdict(sys.argv[1], Options(raw_mode=True))
Checkpoint(db).create_checkpoint(sys.argv[2])
print("ready", flush=True)
sys.stdin.read()  # hold the store until the test closes our stdin
db.close()
"""


def test_store_held_by_another_process(world: World):
    cid = f"{time.time_ns() // 1_000_000}-1"
    cp_dir = world.store.with_name(f"{world.store.name}-{cid}")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(world.store), str(cp_dir)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.strip() == "ready", holder.stderr.read()
        held = fingerprint(world.store)
        before = capture([world.store], [world.store, world.blobs])

        p = world.run("backup", *WHERE, "--state-dir", str(world.state))
        assert_error(p, 11, str(world.store), "held")
        assert "--checkpoint-dir" in p.stderr.splitlines()[1]
        p = world.run(*world.restore_args())
        assert_error(p, 11, str(world.store), "held")
        assert "--checkpoint-dir" not in p.stderr  # that way out is for backups
        # The holding process itself may append to its RocksDB info LOG at any moment: not ours to compare.
        assert_unchanged(_without_info_logs(before), _without_info_logs(capture_after(before)))
        assert not temp_dirs_beside(world.store)
        store_tree = _no_logs(tree(world.store))

        # The way to back up a store a job holds: a checkpoint dir the job made.
        p = world.run("backup", *WHERE, "--state-dir", str(world.state), "--checkpoint-dir", str(cp_dir),
                      "-o", "json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["checkpoint_id"] == cid
        assert_same_tree(store_tree, _no_logs(tree(world.store)))
        copy = world.tmp / "copy"
        p = world.run("restore", *WHERE, "--target-dir", str(copy))
        assert p.returncode == 0, p.stderr
        assert fingerprint(copy) == held
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.returncode == 0, holder.stderr.read()


def _no_logs(entries: dict[str, tuple]) -> dict[str, tuple]:
    return {k: v for k, v in entries.items() if not Path(k).name.startswith("LOG")}


def _without_info_logs(c: Capture) -> Capture:
    return Capture(c.fingerprints, {d: _no_logs(t) for d, t in c.trees.items()})


# ---- restore targets -----------------------------------------------------------------------------

def test_restore_into_a_non_empty_dir_that_is_not_a_store(world: World):
    target = world.tmp / "precious"
    (target / "docs").mkdir(parents=True)
    (target / "docs" / "thesis.tex").write_text("\\documentclass{article}\n")
    (target / "photo.jpg").write_bytes(os.urandom(2048))
    a_file = world.tmp / "a-file"
    a_file.write_text("not a dir\n")
    before = capture([world.store], [world.tmp])
    p = world.run("restore", *WHERE, "--target-dir", str(target))
    assert_error(p, 2, str(target), "not empty")
    assert "--force" in p.stderr
    assert_error(world.run("restore", *WHERE, "--target-dir", str(a_file)), 2, str(a_file))
    assert_unchanged(before, capture_after(before))


# ---- config and flags ----------------------------------------------------------------------------

CONFIGS = {  # file (relative to the test's dir), content, words of the error
    "invalid-toml": ("statectl.toml", "[default\njob = 'x'\n", ["statectl.toml", "invalid TOML"]),
    "unknown-key": ("statectl.toml", "[default]\njobb = 'x'\n", ["statectl.toml", "'jobb'"]),
    "bad-value": ("statectl.toml", "[default]\nparallelism = 'lots'\n", ["statectl.toml", "'parallelism'"]),
    "key-outside-profile": ("statectl.toml", "job = 'x'\n", ["statectl.toml", "'job'"]),
    "xdg-unknown-key": ("xdg-config/statectl/config.toml", "[default]\nbogus = 1\n",
                        ["xdg-config/statectl/config.toml", "'bogus'"]),
    "not-utf8": ("statectl.toml", b"\xff\xfe[default]\n", ["statectl.toml"]),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_bad_config_file(world: World, case: str):
    rel, content, words = CONFIGS[case]
    path = world.tmp / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = world.capture()
    backup_args = ["backup", *WHERE, "--state-dir", str(world.state)]
    for args in (["snapshots", "list", *WHERE], world.restore_args(), backup_args):
        assert_error(world.run(*args), 2, *words)
    assert_unchanged(before, capture_after(before))


def test_config_file_or_profile_that_does_not_exist(world: World):
    missing = world.tmp / "nope.toml"
    assert_error(world.run("--config", str(missing), "snapshots", "list", *WHERE), 2, str(missing))
    (world.tmp / "statectl.toml").write_text("[default]\njob = 'x'\n")
    assert_error(world.run("--profile", "staging", "snapshots", "list", *WHERE), 2, "statectl.toml", "[staging]")


def test_bad_environment_value(world: World):
    env = clean_env(world.tmp, STATECTL_PARALLELISM="many")
    assert_error(world.run("snapshots", "list", *WHERE, env=env), 2, "STATECTL_PARALLELISM", "many")


FLAGS = {  # args after the command, words of the error
    "chunk-size-nonsense": (["backup", "--chunk-size", "nonsense"], ["nonsense"]),
    "chunk-size-zero": (["backup", "--chunk-size", "0"], ["--chunk-size"]),
    "parallelism-zero-backup": (["backup", "--parallelism", "0"], ["--parallelism"]),
    "parallelism-zero-restore": (["restore", "--parallelism", "0"], ["--parallelism"]),
    "parallelism-zero-verify": (["snapshots", "verify", "--download", "--parallelism", "0"], ["--parallelism"]),
    "parallelism-not-a-number": (["backup", "-j", "many"], ["--parallelism"]),
    "unknown-scheme": (["backup", "--blobstore", "ftp://host/backups"], ["'ftp'"]),
    "plain-path-blobstore": (["restore", "--blobstore", "/var/backups"], ["/var/backups"]),
    "file-url-with-host": (["backup", "--blobstore", "file://host/x"], ["file://host/x"]),
    "ttl-nonsense": (["backup", "--ttl", "forever"], ["forever"]),
    "output-format": (["backup", "-o", "yaml"], ["yaml"]),
    "unknown-option": (["backup", "--no-such-flag"], ["--no-such-flag"]),
    "unknown-command": (["bakcup"], ["bakcup"]),
    "slash-in-store-name": (["backup", "--store", "a/b"], ["a/b"]),
}


@pytest.mark.parametrize("case", list(FLAGS))
def test_bad_flags(world: World, case: str):
    args, words = FLAGS[case]
    if args[0] != "bakcup":  # everything else a valid command would need, so only the bad flag is wrong
        args = [*args, "--job", JOB] + ([] if "--store" in args else ["--store", STORE])
        args += ["--state-dir", str(world.state)] if args[0] in ("backup", "restore") else []
    before = world.capture()
    assert_error(world.run(*args), 2, *words)
    assert_unchanged(before, capture_after(before))


# ---- S3 ------------------------------------------------------------------------------------------

def s3_env(tmp: Path, endpoint: str, access_key: str, secret_key: str, **extra: str) -> dict[str, str]:
    return clean_env(tmp, STATECTL_S3_ENDPOINT=endpoint, STATECTL_S3_REGION="us-east-1",
                     STATECTL_S3_ACCESS_KEY_ID=access_key, STATECTL_S3_SECRET_ACCESS_KEY=secret_key, **extra)


def bucket_listing(client, bucket: str) -> list[tuple]:
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        out += [(o["Key"], o["Size"], o["ETag"], o["LastModified"]) for o in page.get("Contents", [])]
    return sorted(out)


def s3_commands(world: World, url: str) -> list[list[str]]:
    return [
        ["backup", *WHERE, "--state-dir", str(world.state), "--blobstore", url],
        ["restore", *WHERE, "--state-dir", str(world.state), "--blobstore", url],
        ["restore", *WHERE, "--target-dir", str(world.tmp / "elsewhere"), "--blobstore", url],
        ["snapshots", "list", *WHERE, "--blobstore", url],
    ]


def test_s3_bucket_that_does_not_exist(world: World, seaweed):
    bucket = f"no-such-{uuid.uuid4().hex[:12]}"
    env = s3_env(world.tmp, seaweed.endpoint, seaweed.access_key, seaweed.secret_key)
    before = capture([world.store], [world.tmp])
    for args in s3_commands(world, f"s3://{bucket}/statectl"):
        assert_error(world.run(*args, env=env), 10, bucket)
    assert_unchanged(before, capture_after(before))
    assert bucket not in {b["Name"] for b in seaweed.client.list_buckets()["Buckets"]}


def _seed_bucket(world: World, server, bucket: str) -> None:
    """Back up the live store into the bucket with the right credentials (so a restore has a target)."""
    env = s3_env(world.tmp, server.endpoint, server.access_key, server.secret_key)
    p = world.run("backup", *WHERE, "--state-dir", str(world.state), "--blobstore", f"s3://{bucket}/statectl", env=env)
    assert p.returncode == 0, p.stderr


def test_s3_wrong_credentials(world: World, seaweed_auth):
    bucket = seaweed_auth.make_bucket()
    _seed_bucket(world, seaweed_auth, bucket)
    listing = bucket_listing(seaweed_auth.client, bucket)
    before = capture([world.store], [world.tmp])
    for access_key, secret_key in ((seaweed_auth.access_key, "wrong-secret"), ("NOBODY", seaweed_auth.secret_key)):
        env = s3_env(world.tmp, seaweed_auth.endpoint, access_key, secret_key)
        for args in s3_commands(world, f"s3://{bucket}/statectl"):
            assert_error(world.run(*args, env=env), 12, bucket)
    assert_unchanged(before, capture_after(before))
    assert bucket_listing(seaweed_auth.client, bucket) == listing


@pytest.mark.timeout(300)  # a hang bound; connections are refused at once, so each command fails fast
def test_s3_endpoint_unreachable(world: World):
    with socket.socket() as s:  # a port nobody listens on: connections are refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = s3_env(world.tmp, f"http://127.0.0.1:{port}", "AK", "SK", STATECTL_RETRIES="2")
    before = capture([world.store], [world.tmp])
    for args in s3_commands(world, "s3://backups/statectl"):
        line = assert_error(world.run(*args, env=env), 1, f"127.0.0.1:{port}")
        assert "3 attempts" in line
    assert_unchanged(before, capture_after(before))


# ---- the disk fills up mid-restore ---------------------------------------------------------------

@pytest.fixture
def small_tmpfs(tmp_path: Path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.strip()}); test_disk_full_injected covers ENOSPC")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_disk_full_on_a_real_tmpfs(tmp_path: Path, small_tmpfs: Path):
    # A snapshot of about 6 MiB in 1 MiB SST files, restored over a small store on a 4 MiB tmpfs.
    world = make_world(tmp_path, keys=6000, value_size=1024, sst_mb=1)
    target = small_tmpfs / STORE
    make_store(target, 300, 100, seed=3)
    used = shutil.disk_usage(small_tmpfs).used
    before = capture([target], [small_tmpfs, world.blobs])
    p = world.run("restore", *WHERE, "--target-dir", str(target))
    assert_error(p, 1, "no space left", str(target))
    assert_unchanged(before, capture_after(before))  # nothing left beside the store either
    assert not temp_dirs_beside(target)
    assert shutil.disk_usage(small_tmpfs).used == used


def test_disk_full_injected(world: World):
    """The same in-process: after two writes into restored files every write fails with ENOSPC, as a full
    disk would."""
    from statectl.engine.restore import RestoreOptions, restore

    before = world.capture()
    bs = open_blobstore(f"file://{world.blobs}")
    try:
        with failpoints.active("download-write=2*off->raise:ENOSPC") as fp, pytest.raises(DiskFullError) as err:
            restore(RestoreOptions(REF, world.store, parallelism=4), bs, BlobCheckpointStore(bs))
    finally:
        bs.close()
    assert fp.hits("download-write") > 2
    assert err.value.exit_code == 1
    assert str(world.store) in str(err.value) and "\n" not in str(err.value)
    assert_unchanged(before, capture_after(before), mtime_may_change=(STORE,))
    assert not temp_dirs_beside(world.store)
