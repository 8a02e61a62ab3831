"""statectl snapshots copy at the CLI edge (file://, in-process): exact exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from statectl.cli.main import app


def _run(tmp_path: Path, *args: str):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    (tmp_path / "blobs").mkdir(exist_ok=True)  # an existing (empty) blob store
    return CliRunner().invoke(app, ["snapshots", "copy", "--blobstore", f"file://{tmp_path / 'blobs'}",
                                    "--job", "pv", "--store", "counts", *args], env=env)


def test_no_snapshot_to_copy_is_exit_10(tmp_path: Path):
    r = _run(tmp_path, "--to-job", "staging")
    assert r.exit_code == 10, r.output
    assert "no snapshot of" in r.output and "Traceback" not in r.output


def test_copy_onto_itself_is_a_usage_error(tmp_path: Path):
    r = _run(tmp_path)
    assert r.exit_code == 2, r.output
    assert "the target of a copy is the source store itself" in r.output


def test_bad_snapshot_id_is_exit_10(tmp_path: Path):
    r = _run(tmp_path, "nosuchid123", "--to-job", "staging")
    assert r.exit_code == 10, r.output


def test_help_documents_exit_codes():
    r = CliRunner().invoke(app, ["snapshots", "copy", "--help"])
    assert r.exit_code == 0
    for code in ("10", "11", "12"):
        assert code in r.output
    assert "--to-blobstore" in r.output and "server-side" in r.output


def test_a_target_kms_key_without_aws_kms_is_a_usage_error(tmp_path: Path):
    for args, said in ((["--to-sse-kms-key-id", "alias/k"], "needs --to-sse aws:kms, not none"),
                       (["--to-sse", "AES256", "--to-sse-kms-key-id", "alias/k"], "needs --to-sse aws:kms, not AES256"),
                       (["--to-sse", "aws:kms", "--to-sse-kms-key-id", "a b"], "--to-sse-kms-key-id: invalid value"),
                       (["--to-sse", "aes"], "Invalid value for '--to-sse'")):
        r = _run(tmp_path, "--to-job", "staging", *args)
        assert r.exit_code == 2, r.output
        assert said in r.stderr and r.stderr.count("Error:") == 1 and "Traceback" not in r.output
    assert sorted(p.name for p in (tmp_path / "blobs").iterdir()) == []  # nothing written
