"""The --output json contract: the field names of every command's result are pinned here.

Scripts depend on these names. Adding a field means adding it here too; renaming or removing one
breaks this test on purpose (CLI.md: keep them stable, add rather than rename).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statectl.cli.main import app
from statectl.local.layout import store_dir
from tests.tools.genstore import make_store
from tests.tools.standby_helpers import isolate_cli

DATA = Path(__file__).parent.parent / "data"

BACKUP = ["blobstore", "bytes_total", "bytes_uploaded", "checkpoint_id", "duration_s", "files_removed",
          "files_total", "files_uploaded", "notes", "snapshot_id", "store", "task"]
LEASE = ["broken_by", "etag", "expires", "host", "key", "live", "local_alive", "operation", "pid", "released",
         "released_at", "started", "started_s", "store"]
RESTORE = ["blobstore", "bytes_downloaded", "bytes_total", "checkpoint_id", "duration_s", "files_downloaded",
           "files_reused", "files_total", "notes", "snapshot_id", "store", "target_dir", "task"]
COPY = ["blobstore", "blobs_copied", "bytes_copied", "bytes_through_client", "checkpoint_id", "duration_s", "files",
        "job", "job_id", "notes", "server_side", "snapshot_id", "source_snapshot_id", "store", "task", "to_blobstore"]
SCHEMAS: dict[str, object] = {
    "backup": BACKUP,
    "backup --all": {"results": [BACKUP], "failures": None, "blobstore": None, "dry_run": None},
    "backup --dry-run": {"store": None, "task": None, "source": None, "previous_snapshot_id": None, "files_total": None,
                         "files_uploaded": None, "bytes_total": None, "bytes_uploaded": None, "files_removed": None,
                         "files": [["action", "path", "size"]], "expired": [["checkpoint_id", "reason", "snapshot_id",
                                                                            "until"]],
                         "deleted": [["blob_id", "reason"]], "dry_run": None, "notes": None, "blobstore": None},
    "restore": RESTORE,
    "restore --all": {"results": [RESTORE], "failures": None, "blobstore": None, "dry_run": None, "container": None},
    "snapshots copy --all": {"results": [COPY], "failures": None, "blobstore": None, "to_blobstore": None,
                             "dry_run": None},
    "diff": {"blobstore": None, "new": None, "old": None, "added": [["path", "size"]], "retained": [["path", "size"]],
             "removed": [["path", "size"]], "bytes_added": None, "bytes_removed": None,
             "changed": [["old_size", "path", "size"]]},
    "snapshots list": [["blobstore", "bytes", "checkpoint_id", "created", "files", "kind", "latest", "problem",
                        "snapshot_id"]],
    "snapshots list (jobs)": [["blobstore", "checkpoints", "job", "job_id", "kind", "latest_checkpoint_id",
                               "latest_checkpoint_time", "stores", "tasks"]],
    "snapshots list --job": [["blobstore", "created", "job", "job_id", "kind", "latest_checkpoint_id",
                              "latest_snapshot_id", "snapshots", "store", "task"]],
    "snapshots show": {"creation-time-millis": None, "dir-index": None, "prev-snapshot-index-blob-id": None,
                       "snapshot-metadata": ["checkpoint-id", "job-id", "job-name", "store-name", "task-name"]},
    "snapshots verify": ["blobstore", "blobs", "corrupt", "downloaded", "files", "missing", "ok", "snapshot_id"],
    "gc": {"blobs_deleted": None, "bytes_reclaimed": None, "blobs_kept": None, "snapshots_expired": None,
           "cleanups_finished": None, "stores": None, "dry_run": None, "duration_s": None, "requests": None,
           "deleted": [["key", "reason", "size"]], "notes": None, "debris_deleted": None,
           "debris": [["key", "reason", "size"]], "expired": [["checkpoint_id", "reason", "snapshot_id", "store"]],
           "blobstore": None},
    "lease show": LEASE,
    "lease break": LEASE,
    "config show": {"config_file": None, "profile": None, "settings": [["key", "source", "value"]]},
    "doctor": {"ok": None, "checks": [["detail", "hint", "name", "status"]]},
}


def shape(obj: object, like: object) -> object:
    """``obj`` reduced to the shape ``like`` describes: a list of names = an object's sorted keys; a dict =
    its keys and their sub-shapes (None: any value); [x] = a list whose items have shape x."""
    if like is None:
        return None
    if isinstance(like, list) and like and isinstance(like[0], (list, dict)):
        assert isinstance(obj, list)
        return [shape(o, like[0]) for o in obj[:1]] or like[:1]
    if isinstance(like, list):
        assert isinstance(obj, dict), obj
        return sorted(obj)
    assert isinstance(obj, dict), obj
    return {k: shape(v, like.get(k)) for k, v in obj.items()} if set(obj) == set(like) else sorted(obj)


@pytest.fixture
def run(tmp_path: Path, monkeypatch):
    isolate_cli(tmp_path, monkeypatch)
    runner = CliRunner()

    def run(*args: str, code: int = 0):
        r = runner.invoke(app, [*args, "-o", "json"])
        assert r.exit_code == code, (args, r.exit_code, r.stderr)
        return json.loads(r.stdout)

    return run


def test_every_command_result_has_its_pinned_fields(run, tmp_path: Path):
    state = tmp_path / "state"
    sdir = store_dir(state, "counts", "Partition 0")
    make_store(sdir, 1500, 256, seed=1, sst_mb=1)
    where = ["--job", "pv", "--store", "counts"]
    got = {
        "backup": run("backup", *where, "--state-dir", str(state)),
        "backup --all": run("backup", "--all", "--job", "pv", "--state-dir", str(state)),
    }
    got["restore --all"] = run("restore", "--all", "--job", "pv", "--state-dir", str(tmp_path / "new"))
    got["snapshots copy --all"] = run("snapshots", "copy", "--all", "--job", "pv", "--to-job", "pv-copy")
    make_store(sdir, 100, 256, seed=2, start=10_000, sst_mb=1)
    got["backup --dry-run"] = run("backup", *where, "--state-dir", str(state), "--dry-run")
    got["diff"] = run("diff", *where, "--state-dir", str(state), code=1)
    got["restore"] = run("restore", *where, "--target-dir", str(tmp_path / "copy"))
    got["snapshots list"] = run("snapshots", "list", *where)
    got["snapshots list (jobs)"] = run("snapshots", "list")
    got["snapshots list --job"] = run("snapshots", "list", "--job", "pv")
    got["snapshots show"] = run("snapshots", "show", *where)
    got["snapshots verify"] = run("snapshots", "verify", *where)
    got["gc"] = run("gc", "--dry-run", "--grace", "1m")
    got["lease show"] = run("lease", "show", *where)
    got["lease break"] = run("lease", "break", *where, "--yes")
    got["config show"] = run("config", "show")
    got["doctor"] = run("doctor", "--state-dir", str(state))
    assert set(got) == set(SCHEMAS)
    for name, like in SCHEMAS.items():
        assert shape(got[name], like) == shape_of(like), name
    # An index saved from a real Samza job reads the same way.
    assert sorted(run("snapshots", "show", "--index-file", str(DATA / "samza-index.json"))) == \
        sorted(SCHEMAS["snapshots show"])


def shape_of(like: object) -> object:
    if like is None:
        return None
    if isinstance(like, list) and like and isinstance(like[0], (list, dict)):
        return [shape_of(like[0])]
    if isinstance(like, list):
        return sorted(like)
    return {k: shape_of(v) for k, v in like.items()}


def test_every_error_under_json_output_is_one_json_document_on_stdout(tmp_path: Path):
    """With -o json, stdout was empty on every error: a script that parses it got nothing. Now the error
    is the command's document ({"error", "hint", "exit_code"}); the Error: line stays on stderr."""
    from tests.integration.test_bad_input import clean_env, run

    state = tmp_path / "state"
    cases = [
        (["-o", "json", "adstore", "versions", "--state-dir", str(state), "--store", "s"], 10),
        (["-o", "json", "standby", "follow", "--store", "s", "--state-dir", str(state)], 2),
        (["-o", "json", "drain", "start"], 2),
        (["restore", "--bogus-flag", "-o", "json"], 2),
        (["-o", "json", "bogus-command"], 2),  # an unknown command is found before -o is taken in
        (["bogus-command", "--output=json"], 2),
        (["-o", "json", "--bogus-flag"], 2),
        (["-o", "json", "snapshots", "bogus-command"], 2),
        (["-o", "json", "adstore", "load", "--topic", "t", "--store", "../../escape", "--kafka", "127.0.0.1:1",
          "--state-dir", str(state)], 2),
    ]
    for args, code in cases:
        p = run(tmp_path, *args)
        assert p.returncode == code, (args, p.stdout, p.stderr)
        doc = json.loads(p.stdout)
        assert doc["exit_code"] == code and doc["error"] and "hint" in doc, (args, doc)
        assert p.stderr.startswith("Error: " + doc["error"].splitlines()[0][:40]), (args, p.stderr)
    # The output setting from the environment counts too; text output keeps stdout empty.
    p = run(tmp_path, "drain", "start", env=clean_env(tmp_path, STATECTL_OUTPUT="json"))
    assert p.returncode == 2 and json.loads(p.stdout)["exit_code"] == 2
    p = run(tmp_path, "drain", "start")
    assert p.returncode == 2 and p.stdout == ""
