"""The command line as scripts use it: exit codes, stdout carrying only the result, stable JSON fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statectl.local.layout import store_dir
from tests.tools.genstore import fingerprint, make_store

DATA = Path(__file__).parent.parent / "data"

BACKUP_FIELDS = {"blobstore", "snapshot_id", "checkpoint_id", "store", "task", "files_total", "files_uploaded", "bytes_total",
                 "bytes_uploaded", "files_removed", "duration_s", "notes"}
RESTORE_FIELDS = {"blobstore", "snapshot_id", "checkpoint_id", "target_dir", "files_total", "files_downloaded", "files_reused",
                  "bytes_total", "bytes_downloaded", "duration_s", "notes", "store", "task"}
DIFF_FIELDS = {"blobstore", "new", "old", "added", "retained", "removed", "bytes_added", "bytes_removed", "changed"}
LIST_FIELDS = {"blobstore", "snapshot_id", "checkpoint_id", "created", "files", "bytes", "latest", "problem", "kind"}
VERIFY_FIELDS = {"blobstore", "snapshot_id", "ok", "files", "blobs", "downloaded", "missing", "corrupt"}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 2000, 512, seed=1, sst_mb=1)
    make_store(store_dir(state, "totals", "Partition 1"), 1000, 512, seed=2, sst_mb=1)
    return state


def test_backup_restore_diff_list_verify_json(cli, state: Path, tmp_path: Path):
    common = ["--job", "pv", "--store", "counts"]
    b = json.loads(cli("backup", *common, "--state-dir", str(state), "-o", "json").stdout)
    assert set(b) == BACKUP_FIELDS
    assert b["files_uploaded"] == b["files_total"] > 0 and b["task"] == "Partition 0"

    d = json.loads(cli("diff", *common, "--state-dir", str(state), "-o", "json").stdout)
    assert set(d) == DIFF_FIELDS and d["added"] == [] and d["removed"] == []
    rows = json.loads(cli("snapshots", "list", *common, "-o", "json").stdout)
    assert [set(r) for r in rows] == [LIST_FIELDS]
    assert rows[0]["snapshot_id"] == b["snapshot_id"] and rows[0]["latest"] is True
    v = json.loads(cli("snapshots", "verify", *common, "--download", "-o", "json").stdout)
    assert set(v) == VERIFY_FIELDS and v["ok"] is True and v["downloaded"] is True

    target = tmp_path / "copy"
    r = json.loads(cli("restore", *common, "--target-dir", str(target), "-o", "json").stdout)
    assert set(r) == RESTORE_FIELDS and r["snapshot_id"] == b["snapshot_id"]
    assert fingerprint(target) == fingerprint(store_dir(state, "counts", "Partition 0"))

    # New data locally: diff says different (exit 1) and lists the new files.
    make_store(store_dir(state, "counts", "Partition 0"), 300, 512, seed=3, start=5000, sst_mb=1)
    d = json.loads(cli("diff", *common, "--state-dir", str(state), "-o", "json", code=1).stdout)
    assert any(e["path"].endswith(".sst") for e in d["added"])
    b2 = json.loads(cli("backup", *common, "--state-dir", str(state), "-o", "json").stdout)
    d = json.loads(cli("diff", *common, "--snapshot", b2["checkpoint_id"], "--against", b2["snapshot_id"],
                       "-o", "json").stdout)
    assert d["added"] == [] and len(d["retained"]) == b2["files_total"]
    # With keep-last 1 the superseded snapshot is out of the list at once; its blobs stay for the grace
    # period (a restore that could not pin it may still be reading them), so its index still answers by id.
    rows = json.loads(cli("snapshots", "list", *common, "-o", "json").stdout)
    assert [r["snapshot_id"] for r in rows] == [b2["snapshot_id"]]
    cli("diff", *common, "--snapshot", b2["checkpoint_id"], "--against", b["snapshot_id"], code=1)
    # A backup with no grace deletes it: it is gone, not silently half there.
    cli("backup", *common, "--state-dir", str(state), "--grace", "0s")
    r = cli("diff", *common, "--snapshot", b2["checkpoint_id"], "--against", b["snapshot_id"], code=10)
    assert r.stderr.startswith("Error: no snapshot")


def test_diff_shows_a_rewritten_file_as_one_changed_line(cli, state: Path):
    common = ["--job", "pv", "--store", "counts", "--state-dir", str(state)]
    cli("backup", *common)
    make_store(store_dir(state, "counts", "Partition 0"), 100, 64, seed=4, start=9000)  # a new CURRENT
    lines = cli("diff", *common, code=1).stdout.splitlines()
    assert [line for line in lines if "CURRENT" in line] == ["~ CURRENT (16 B, was 16 B)"], lines
    added = [line for line in lines if line.startswith("+ ")]
    removed = [line for line in lines if line.startswith("- ")]
    assert lines[-1].startswith(f"{len(added)} added (") and f"), 1 changed (16 B), " in lines[-1]
    assert f" unchanged, {len(removed)} removed (" in lines[-1]
    d = json.loads(cli("diff", *common, "-o", "json", code=1).stdout)
    assert d["changed"] == [{"path": "CURRENT", "size": 16, "old_size": 16}]
    # added and removed list every file a backup uploads and drops, a rewritten one in both.
    assert "CURRENT" in {e["path"] for e in d["added"]} & {e["path"] for e in d["removed"]}
    assert d["bytes_added"] == sum(e["size"] for e in d["added"]) and len(d["added"]) == len(added) + 1


def test_counts_of_one_are_singular(cli, state: Path):
    cli("backup", "--job", "pv", "--store", "counts", "--state-dir", str(state))
    text = cli("gc", "--grace", "1m").stdout
    assert ", 1 store in file://" in text and " 0 snapshots expired, " in text, text


def test_text_output_is_the_result_only(cli, state: Path):
    out = cli("backup", "--job", "pv", "--store", "counts", "--state-dir", str(state)).stdout
    assert out.startswith("snapshot blobs/") and out.count("\n") == 1
    listing = cli("snapshots", "list", "--job", "pv", "--store", "counts").stdout.splitlines()
    assert listing[0].startswith("snapshots of pv-1/Partition 0/counts in blob store file://")
    assert listing[1].split()[:3] == ["SNAPSHOT", "CHECKPOINT", "CREATED"] and len(listing) == 3


def name_tasks(cli, state: Path) -> None:
    """Back up each store of ``state`` once with its --task: the blob store then knows which task each
    ``Partition_N`` dir holds ('_' alone does not say)."""
    cli("backup", "--job", "pv", "--store", "counts", "--task", "Partition 0", "--state-dir", str(state))
    cli("backup", "--job", "pv", "--store", "totals", "--task", "Partition 1", "--state-dir", str(state))


def test_backup_all_backs_up_every_store(cli, state: Path, tmp_path: Path):
    # Into an empty blob store, without --kafka, no source names the task of a dir with '_': exit 3, both named.
    r = cli("backup", "--all", "--job", "pv", "--state-dir", str(state), "-o", "json", code=3)
    res = json.loads(r.stdout)
    assert res["results"] == [] and [p for p, _ in res["failures"]] == [
        str(store_dir(state, "counts", "Partition 0")), str(store_dir(state, "totals", "Partition 1"))]
    name_tasks(cli, state)
    res = json.loads(cli("backup", "--all", "--job", "pv", "--state-dir", str(state), "-o", "json").stdout)
    assert res["failures"] == []
    assert sorted((r["store"], r["task"]) for r in res["results"]) == [("counts", "Partition 0"),
                                                                       ("totals", "Partition 1")]
    # A second run is incremental and skips the checkpoint dirs the first one left.
    res = json.loads(cli("backup", "--all", "--job", "pv", "--state-dir", str(state), "-o", "json").stdout)
    assert len(res["results"]) == 2
    target = tmp_path / "t"
    cli("restore", "--job", "pv", "--store", "totals", "--task", "Partition 1", "--target-dir", str(target))
    assert fingerprint(target) == fingerprint(store_dir(state, "totals", "Partition 1"))


def test_backup_all_partial_failure_exits_3(cli, state: Path):
    name_tasks(cli, state)
    bad = state / "broken" / "Partition_0"
    bad.mkdir(parents=True)
    (bad / "CURRENT").write_text("MANIFEST-000001\n")
    (bad / "MANIFEST-000001").write_bytes(b"not a manifest")
    r = cli("backup", "--all", "--job", "pv", "--state-dir", str(state), "-o", "json", code=3)
    res = json.loads(r.stdout)
    assert len(res["results"]) == 2 and len(res["failures"]) == 1
    assert r.stderr.startswith("Error: 1 of 3 stores failed")


def test_show_index_file_from_a_samza_job(cli):
    path = DATA / "samza-index.json"
    shown = json.loads(cli("snapshots", "show", "--index-file", str(path), "-o", "json").stdout)
    original = json.loads(path.read_text())

    def known(obj):
        """The Samza JSON restricted to the fields statectl models (the sample carries unknown extras)."""
        if isinstance(obj, dict):
            return {k: known(v) for k, v in obj.items() if k in shown_keys}
        if isinstance(obj, list):
            return [known(v) for v in obj]
        return obj

    shown_keys = set()

    def collect(obj):
        if isinstance(obj, dict):
            shown_keys.update(obj)
            for v in obj.values():
                collect(v)
        elif isinstance(obj, list):
            for v in obj:
                collect(v)

    collect(shown)
    assert known(original) == shown
    text = cli("snapshots", "show", "--index-file", str(path)).stdout
    assert "checkpoint:" in text and "MANIFEST" in text


def test_settings_from_profile_and_env(cli, state: Path, tmp_path: Path):
    blobs = tmp_path / "profile-blobs"
    (tmp_path / "statectl.toml").write_text(
        f'[default]\njob = "pv"\nstore = "counts"\nstate_dir = "{state}"\n\n'
        f'[other]\nblobstore = "file://{blobs}"\njob = "pv"\nstore = "counts"\nstate_dir = "{state}"\n')
    cli("backup")  # everything from the [default] profile, blob store the embedded default
    assert (tmp_path / "xdg-data" / "statectl" / "blobs" / "checkpoints").is_dir()
    # A blob store that is not the embedded default is made only when asked for (issue 22).
    r = cli("--profile", "other", "backup", code=10)
    assert f"Error: blob store file://{blobs} does not exist" in r.stderr and not blobs.exists()
    cli("--profile", "other", "backup", "--create")
    assert (blobs / "checkpoints").is_dir()
    cli("--profile", "other", "backup")
    env_blobs = tmp_path / "env-blobs"
    cli("backup", "--create", env={"STATECTL_PROFILE": "other", "STATECTL_BLOBSTORE": f"file://{env_blobs}"})
    assert (env_blobs / "checkpoints").is_dir()


def test_every_command_has_help_with_an_example(cli):
    for cmd in (["backup"], ["restore"], ["diff"], ["snapshots", "list"], ["snapshots", "show"],
                ["snapshots", "verify"]):
        out = cli(*cmd, "--help").stdout
        assert "Example" in out and "statectl " + " ".join(cmd) in out, cmd


def test_s3_backup_and_restore_via_cli(cli, state: Path, tmp_path: Path, s3_url: str, s3_options):
    env = {"AWS_ACCESS_KEY_ID": s3_options.access_key_id, "AWS_SECRET_ACCESS_KEY": s3_options.secret_access_key,
           "STATECTL_S3_ENDPOINT": s3_options.endpoint_url}
    common = ["--blobstore", s3_url, "--job", "pv", "--store", "counts"]
    b = json.loads(cli("backup", *common, "--state-dir", str(state), "-o", "json", env=env).stdout)
    target = tmp_path / "from-s3"
    r = json.loads(cli("restore", *common, "--target-dir", str(target), "-o", "json", env=env).stdout)
    assert r["files_downloaded"] == b["files_total"]
    assert fingerprint(target) == fingerprint(store_dir(state, "counts", "Partition 0"))
