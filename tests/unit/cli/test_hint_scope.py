"""A hint's commands keep the flags that were in scope (statectl.cli.hints): the CLI completes each
statectl.errors.Command of an error's hint with what the failing invocation gave on its command line that says
where the state is, only where the command takes that flag; the failing command itself keeps all its flags.
The commands printed by real failing invocations are run in tests/integration/test_hint_commands.py."""

from __future__ import annotations

import json
import shlex

import pytest
import typer
from typer.testing import CliRunner

from statectl.cli.hints import Invocation, complete
from statectl.cli.main import app
from statectl.errors import NotFoundError, command

ROOT = typer.main.get_command(app)


def _inv(words: str, config: str | None = None, profile: str | None = None, **given) -> Invocation:
    return Invocation(tuple(words.split()), tuple(given.items()), config, profile)


def _words(cmd, inv) -> list[str]:
    return shlex.split(complete(cmd, ROOT, inv))


def test_scope_flags_the_command_takes_are_added():
    inv = _inv("restore", blobstore="s3://prod/samza", s3_endpoint="http://s3:9000", job="page-views",
               store="counts", state_dir="/var/state", parallelism=4, force=True)
    # snapshots list takes neither --state-dir nor restore's own options.
    assert _words(command("snapshots list"), inv) == [
        "statectl", "snapshots", "list", "--blobstore", "s3://prod/samza", "--s3-endpoint", "http://s3:9000",
        "--job", "page-views", "--store", "counts"]
    # backup takes --state-dir too; --parallelism is not where the state is, so it is left to the default.
    assert _words(command("backup"), inv) == [
        "statectl", "backup", "--blobstore", "s3://prod/samza", "--s3-endpoint", "http://s3:9000", "--job",
        "page-views", "--store", "counts", "--state-dir", "/var/state"]


def test_the_command_s_own_args_win_and_without_leaves_settings_out():
    inv = _inv("snapshots list", blobstore="file:///b", job="pge-views", job_id="2", store="x")
    assert _words(command("snapshots list", without=("job", "job_id", "task", "store")), inv) == [
        "statectl", "snapshots", "list", "--blobstore", "file:///b"]
    assert _words(command("snapshots list", "--job", "page-views", without=("store",)), inv) == [
        "statectl", "snapshots", "list", "--blobstore", "file:///b", "--job-id", "2", "--job", "page-views"]
    assert _words(command("snapshots list", "--job=page-views"), inv) == [
        "statectl", "snapshots", "list", "--blobstore", "file:///b", "--job-id", "2", "--store", "x",
        "--job=page-views"]


def test_the_failing_command_again_keeps_all_its_flags_and_arguments():
    inv = _inv("snapshots copy", blobstore="file:///a", job="pv", store="counts", snapshot="3f2a9c",
               to_blobstore="file:///b", dry_run=True, parallelism=2)
    assert _words(command("snapshots copy", "--create"), inv) == [
        "statectl", "snapshots", "copy", "--blobstore", "file:///a", "--job", "pv", "--store", "counts",
        "--to-blobstore", "file:///b", "--dry-run", "--parallelism", "2", "--create", "3f2a9c"]


def test_a_snapshot_named_goes_where_the_command_takes_it():
    inv = _inv("restore", blobstore="file:///a", job="pv", store="counts", snapshot="-odd")
    # restore's --snapshot is snapshots verify's argument (after --: it starts with a dash).
    assert _words(command("snapshots verify"), inv)[-2:] == ["--", "-odd"]
    assert "-odd" not in _words(command("snapshots list"), inv)


def test_config_and_profile_come_first_and_an_unknown_command_is_as_given():
    inv = _inv("gc", config="/etc/statectl.toml", profile="prod", blobstore="file:///a")
    assert _words(command("snapshots list"), inv) == [
        "statectl", "--config", "/etc/statectl.toml", "--profile", "prod", "snapshots", "list", "--blobstore",
        "file:///a"]
    assert complete(command("no such", "--x"), ROOT, inv) == "statectl no such --x"


@pytest.fixture
def failing(monkeypatch, tmp_path):
    """``statectl backup`` made to fail with a hint of two commands, run with the CLI's error edge."""
    from tests.tools.standby_helpers import isolate_cli

    isolate_cli(tmp_path, monkeypatch)

    def fail(*args, **kwargs):
        raise NotFoundError("no such thing", hint=("run ", command("snapshots list"), " or ",
                                                   command("backup", "--create"), " (or not)"))

    monkeypatch.setattr("statectl.session.Session.ref", fail)
    return tmp_path


def test_the_cli_prints_and_returns_the_completed_hint(failing):
    url = f"file://{failing / 'blobs'}"
    args = ["backup", "--blobstore", url, "--job", "pv", "--store", "counts", "--state-dir", "st", "--ttl", "2h"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 10, r.stderr
    assert r.stderr.splitlines()[1] == (
        f"Hint: run 'statectl snapshots list --blobstore {url} --job pv --store counts' or 'statectl backup "
        f"--blobstore {url} --job pv --store counts --state-dir st --ttl 2h --create' (or not)")
    r = CliRunner().invoke(app, [*args, "-o", "json"])
    assert json.loads(r.stdout)["hint"] == r.stderr.splitlines()[1][len("Hint: "):]
    # A Python caller reads the commands as given.
    with pytest.raises(NotFoundError) as e:
        from statectl.session import Session

        Session.ref(None)  # type: ignore[arg-type]
    assert e.value.hint == "run 'statectl snapshots list' or 'statectl backup --create' (or not)"
