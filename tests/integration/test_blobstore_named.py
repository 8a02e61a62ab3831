"""Issue 22, point 1: backups must not land where nobody looks. Every result of backup, restore, snapshots
list/show/verify/copy and gc names the blob store it used (text and JSON), against file:// and SeaweedFS;
a file:// dir that does not exist is exit 10 and is not made unless --create; backup says which tasks it
took (a note naming the task dirs it left out; --all-tasks takes every one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statectl.cli.main import app
from statectl.local.layout import store_dir
from tests.tools.genstore import fingerprint, make_store
from tests.tools.standby_helpers import isolate_cli

WHERE = ["--job", "pv", "--store", "counts"]


@pytest.fixture
def env(tmp_path: Path, monkeypatch) -> Path:
    isolate_cli(tmp_path, monkeypatch)
    state = tmp_path / "state"
    for p in range(3):
        make_store(store_dir(state, "counts", f"Partition {p}"), 300 + p, 128, seed=p)
    return state


def _run(*args: str, code: int = 0):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == code, (args, r.exit_code, r.stdout, r.stderr)
    return r


@pytest.fixture(params=["file", "s3"])
def url(request, tmp_path: Path, monkeypatch, env) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'backups' / 'statectl'}"
    seaweed = request.getfixturevalue("seaweed")
    monkeypatch.setenv("STATECTL_S3_ENDPOINT", seaweed.endpoint)
    monkeypatch.setenv("STATECTL_S3_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    return request.getfixturevalue("s3_url")


def test_every_result_names_its_blob_store(url: str, env: Path, tmp_path: Path):
    state = env
    create = ["--create"] if url.startswith("file://") else []
    b = json.loads(_run("backup", *WHERE, "--blobstore", url, *create, "--state-dir", str(state), "-o", "json").stdout)
    assert b["blobstore"] == url and b["task"] == "Partition 0"
    text = _run("backup", *WHERE, "--blobstore", url, "--state-dir", str(state)).stdout
    assert f"of counts/Partition 0 in {url}: " in text
    for task in ("Partition 1", "Partition 2"):  # the blob store then knows the task of each Partition_N dir
        _run("backup", *WHERE, "--blobstore", url, "--state-dir", str(state), "--task", task)
    docs = {
        "backup --all": ["backup", "--all", "--job", "pv", "--state-dir", str(state)],
        "restore": ["restore", *WHERE, "--target-dir", str(tmp_path / "r")],
        "snapshots verify": ["snapshots", "verify", *WHERE],
        "diff": ["diff", *WHERE, "--state-dir", str(state)],
        "snapshots copy": ["snapshots", "copy", *WHERE, "--to-job", "pv-staging"],
        "gc": ["gc", "--dry-run", "--grace", "1m"],
    }
    for name, args in docs.items():
        doc = json.loads(_run(*args, "--blobstore", url, "-o", "json").stdout)
        assert doc["blobstore"] == url, name
    assert fingerprint(tmp_path / "r") == fingerprint(store_dir(state, "counts", "Partition 0"))
    texts = {
        "restore": (["restore", *WHERE, "--target-dir", str(tmp_path / "r2")], f" from {url} into "),
        "snapshots verify": (["snapshots", "verify", *WHERE], f" in {url}, "),
        "diff": (["diff", *WHERE, "--state-dir", str(state)], f" (in {url})\n"),
        "snapshots show": (["snapshots", "show", *WHERE], f"blob store: {url}\n"),
        "snapshots list": (["snapshots", "list", *WHERE], f"snapshots of pv-1/Partition 0/counts in blob store {url}:"),
        "snapshots copy": (["snapshots", "copy", *WHERE, "--to-job", "pv-2"],
                           f" to pv-2-1/Partition 0/counts in {url}: "),
        "gc": (["gc", "--dry-run", "--grace", "1m"], f" stores in {url}, "),
    }
    for name, (args, part) in texts.items():
        assert part in _run(*args, "--blobstore", url).stdout, name
    rows = json.loads(_run("snapshots", "list", *WHERE, "--blobstore", url, "-o", "json").stdout)
    assert {r["blobstore"] for r in rows} == {url}


def test_a_file_blob_store_that_does_not_exist_is_an_error_unless_create(env: Path, tmp_path: Path):
    state = env
    typo = tmp_path / "bakcups" / "statectl"
    url = f"file://{typo}"
    commands = [["backup", *WHERE, "--state-dir", str(state)], ["backup", "--all", "--job", "pv", "--state-dir",
                                                                 str(state)],
                ["restore", *WHERE, "--target-dir", str(tmp_path / "r")], ["snapshots", "list"],
                ["snapshots", "list", *WHERE], ["snapshots", "verify", *WHERE], ["gc", "--dry-run"],
                ["snapshots", "copy", *WHERE, "--to-job", "x"]]
    for args in commands:
        r = _run(*args, "--blobstore", url, code=10)
        error, hint = r.stderr.splitlines()
        if args[:2] == ["snapshots", "copy"]:  # its --create starts the target only: the source must exist
            assert error == f"Error: blob store {url} does not exist (the source, --blobstore)"
            assert hint == "Hint: check --blobstore (and --s3-endpoint): a copy's source must exist"
            continue
        assert error == f"Error: blob store {url} does not exist", args
        # The command that starts it there: a backup with the flags of this one that it takes.
        start, end = "Hint: check --blobstore; to start a new blob store there, run '", "' (or create the dir)"
        assert hint.startswith(start) and hint.endswith(end), hint
        argv = hint[len(start):-len(end)].split()
        assert argv[:2] == ["statectl", "backup"] and argv[-1] == "--create" and f"--blobstore {url}" in hint
    assert not (tmp_path / "bakcups").exists() and not (tmp_path / "r").exists()
    # A usage error is said first, as with a missing bucket: the dir is looked at on first use.
    r = _run("backup", *WHERE, "--state-dir", str(state), "--blobstore", url, "--keep-last", "0", code=2)
    assert r.stderr.startswith("Error: --keep-last must be at least 1")
    # --create starts it; afterwards it is an ordinary blob store.
    _run("backup", *WHERE, "--state-dir", str(state), "--blobstore", url, "--create")
    assert (typo / "checkpoints").is_dir()
    _run("backup", *WHERE, "--state-dir", str(state), "--blobstore", url)
    # A copy to another file:// store makes the target only with --create.
    other = tmp_path / "staging"
    r = _run("snapshots", "copy", *WHERE, "--blobstore", url, "--to-blobstore", f"file://{other}", code=10)
    assert f"blob store file://{other} does not exist" in r.stderr and not other.exists()
    doc = json.loads(_run("snapshots", "copy", *WHERE, "--blobstore", url, "--to-blobstore", f"file://{other}",
                          "--create", "-o", "json").stdout)
    assert (doc["blobstore"], doc["to_blobstore"]) == (url, f"file://{other}")
    # ... and never the source.
    r = _run("snapshots", "copy", *WHERE, "--blobstore", f"file://{tmp_path / 'nosource'}", "--to-blobstore",
             f"file://{other}", "--create", code=10)
    assert f"blob store file://{tmp_path / 'nosource'} does not exist" in r.stderr
    assert not (tmp_path / "nosource").exists()
    # The embedded default is made on first use, as before.
    _run("backup", *WHERE, "--state-dir", str(state))
    assert (tmp_path / "xdg-data" / "statectl" / "blobs" / "checkpoints").is_dir()


def test_backup_says_which_tasks_it_took(env: Path):
    state = env
    r = _run("backup", *WHERE, "--state-dir", str(state), "-o", "json")
    doc = json.loads(r.stdout)
    assert doc["task"] == "Partition 0"
    note = ("backed up task 'Partition 0' of store counts only; 2 other task dirs of the store under "
            f"{state} not backed up: Partition_1, Partition_2 (--all-tasks backs up every one)")
    assert doc["notes"] == [note]
    # An explicit --store-dir names one dir: nothing to say about the others.
    doc = json.loads(_run("backup", *WHERE, "--store-dir", str(store_dir(state, "counts", "Partition 1")),
                          "--task", "Partition 1", "-o", "json").stdout)
    assert doc["notes"] == []

    # Partition_2's task is not known yet (the blob store has snapshots of 'Partition 0' and 'Partition 1'):
    # --all-tasks says so (exit 3) and backs up the others.
    doc = json.loads(_run("backup", *WHERE, "--state-dir", str(state), "--all-tasks", "-o", "json", code=3).stdout)
    assert [x["task"] for x in doc["results"]] == ["Partition 0", "Partition 1"]
    assert [p for p, _ in doc["failures"]] == [str(store_dir(state, "counts", "Partition 2"))]
    _run("backup", *WHERE, "--state-dir", str(state), "--task", "Partition 2")
    doc = json.loads(_run("backup", *WHERE, "--state-dir", str(state), "--all-tasks", "-o", "json").stdout)
    assert [(x["store"], x["task"], x["notes"]) for x in doc["results"]] == [
        ("counts", f"Partition {p}", []) for p in range(3)]
    assert doc["failures"] == []
    tasks = json.loads(_run("snapshots", "list", "--job", "pv", "-o", "json").stdout)
    assert [(t["store"], t["task"]) for t in tasks] == [("counts", f"Partition {p}") for p in range(3)]

    for args, message in [
        (["--job", "pv", "--state-dir", str(state), "--all-tasks"], "--all-tasks needs --store"),
        ([*WHERE, "--state-dir", str(state), "--all-tasks", "--all"], "give --all (every store) or --all-tasks"),
        ([*WHERE, "--state-dir", str(state), "--all"], "--all backs up every store under --state-dir; do not "
                                                        "combine it with --store"),
        ([*WHERE, "--state-dir", str(state), "--all-tasks", "--task", "Partition 1"],
         "--all-tasks backs up every task dir under --state-dir; do not combine it with --task"),
        ([*WHERE, "--all-tasks"], "--all-tasks needs --state-dir"),
    ]:
        assert _run("backup", *args, code=2).stderr.startswith(f"Error: {message}"), args
    r = _run("backup", "--job", "pv", "--store", "cnts", "--state-dir", str(state), "--all-tasks", code=10)
    assert r.stderr.startswith(f"Error: no RocksDB task dirs of store cnts under {state}")
