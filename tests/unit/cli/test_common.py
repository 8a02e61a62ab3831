"""statectl.cli.common: the settings flags defined once, their defaults read from config.KEYS, the Env a
state command runs with, and exit-code lines generated from statectl.errors.EXIT_CODES."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from statectl import config, errors
from statectl.cli import common
from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import STORE, Env, Flags, flag_help, state_command
from statectl.cli.main import EXIT_CODES_HELP, app

# Every command's flags as the contract has them (CLI.md): none may be lost or renamed.
FLAGS = {
    "backup": {"--limit-rate", "--sse", "--sse-kms-key-id", "--all", "--all-tasks", "--blobstore", "--checkpoint-dir", "--chunk-size", "--create", "--dry-run", "--grace", "--job", "--job-id", "--kafka",
               "--keep-last",
               "--parallelism", "--s3-endpoint", "--state-dir", "--store", "--store-dir", "--task", "--ttl", "-j"},
    "restore": {"--limit-rate", "--all", "--all-tasks", "--blobstore", "--container", "--dry-run", "--force", "--from-changelog", "--from-other-store", "--job", "--job-id", "--kafka",
                "--parallelism", "--partition", "--s3-endpoint", "--snapshot", "--state-dir", "--store", "--store-dir",
                "--system", "--target-dir", "--task", "--to-checkpoint", "--until-offset", "-j"},
    "diff": {"--against", "--blobstore", "--job", "--job-id", "--kafka", "--s3-endpoint", "--snapshot", "--state-dir",
             "--store", "--store-dir", "--task"},
    "gc": {"--blobstore", "--dry-run", "--grace", "--job", "--job-id", "--kafka", "--keep-last", "--parallelism",
           "--s3-endpoint", "-j"},
    "doctor": {"--blobstore", "--job", "--job-id", "--kafka", "--s3-endpoint", "--state-dir", "--timeout"},
    "snapshots list": {"--blobstore", "--job", "--job-id", "--kafka", "--s3-endpoint", "--store", "--task"},
    "snapshots show": {"--blobstore", "--index-file", "--job", "--job-id", "--kafka", "--s3-endpoint", "--store",
                       "--task"},
    "snapshots verify": {"--blobstore", "--download", "--job", "--job-id", "--kafka", "--parallelism",
                         "--s3-endpoint", "--store", "--task", "-j"},
    "snapshots copy": {"--limit-rate", "--all", "--all-tasks", "--blobstore", "--create", "--dry-run", "--file-owner", "--grace", "--job", "--job-id", "--kafka",
                       "--keep-last", "--parallelism",
                       "--s3-endpoint", "--store", "--task", "--to-blobstore", "--to-job", "--to-job-id",
                       "--to-s3-endpoint", "--to-sse", "--to-sse-kms-key-id", "--to-store", "--to-task", "--ttl",
                       "-j"},
    "config show": {"--blobstore", "--job", "--job-id", "--kafka", "--keep-last", "--parallelism", "--s3-endpoint",
                    "--state-dir", "--store", "--task", "-j"},
    "lease show": {"--blobstore", "--job", "--job-id", "--s3-endpoint", "--store", "--task"},
    "lease break": {"--blobstore", "--force", "--job", "--job-id", "--s3-endpoint", "--store", "--task", "--yes", "-y"},
    "drain start": {"--dry-run", "--force", "--job", "--job-id", "--kafka", "--run-id"},
    "drain status": {"--job", "--job-id", "--kafka", "--run-id"},
    "drain wait": {"--job", "--job-id", "--kafka", "--poll", "--run-id", "--timeout", "--uuid"},
    "drain cancel": {"--all-stale", "--bad", "--dry-run", "--job", "--job-id", "--kafka", "--run-id", "--uuid"},
    "standby follow": {"--limit-rate", "--blobstore", "--changelog", "--job", "--job-id", "--kafka", "--layout", "--partition",
                       "--replica", "--replica-dir", "--s3-endpoint", "--state-dir", "--store", "--task",
                       "--to-checkpoint", "--metrics-port", "--metrics-addr", "--container", "--pre-restore",
                       "--zookeeper", "--standby-root"},
    "standby status": {"--state-dir", "--metrics-file", "--standby-root"},
    "standby promote": {"--active-dir", "--blobstore", "--changelog", "--job", "--job-id", "--kafka", "--partition",
                        "--replica", "--replica-dir", "--s3-endpoint", "--state-dir", "--store", "--task", "--timeout",
                        "--to-checkpoint", "--metrics-file", "--container", "--dry-run", "--non-transactional-restore",
                        "--zookeeper", "--standby-root"},
    "standby failover": {"--blobstore", "--container", "--dry-run", "--host", "--job", "--job-id", "--kafka",
                         "--metrics-file", "--replica", "--s3-endpoint", "--state-dir", "--timeout", "--to-checkpoint",
                         "--standby-root"},
    "standby check": {"--host", "--job", "--job-id", "--kafka", "--metrics-file"},
    "adstore load": {"--limit-rate", "--allow-empty", "--blobstore", "--broadcast", "--dataset-versions", "--dry-run", "--end-marker", "--extractor",
                     "--follow", "--format", "--from-file", "--kafka", "--keep-versions", "--key-field",
                     "--master", "--max-age",
                     "--partitions", "--partition-count", "--s3-endpoint", "--spark", "--spark-conf", "--stage-through-blobstore",
                     "--state-dir", "--store", "--store-dir", "--task", "--tasks", "--topic", "--value-field",
                     "--value-fields", "--job", "--job-id", "--key-serde", "--value-serde", "--zookeeper"},
    "adstore status": {"--job", "--job-id", "--kafka", "--state-dir", "--store", "--store-dir", "--zookeeper"},
    "adstore seal-checkpoint": {"--dry-run", "--grouper-factory", "--job", "--job-id", "--kafka", "--state-dir",
                                "--store", "--tasks"},
    "adstore versions": {"--quick", "--state-dir", "--store", "--store-dir", "--task"},
    "adstore switch": {"--dry-run", "--state-dir", "--store", "--store-dir", "--quick", "--task", "--version"},
    "version": set(),
    "rescale": {"--again", "--blobstore", "--chunk-size", "--dry-run", "--file-owner", "--from", "--from-partitioner", "--grace",
                "--ignore-other-tasks", "--job", "--job-id", "--kafka",
                "--keep-last", "--key-groups", "--master", "--parallelism", "--partitioner", "--s3-endpoint", "--snapshots",
                "--spark-conf", "--store", "--task-map", "--to", "--to-job", "--ttl", "--work-dir", "-j"},
}


def _commands() -> dict[str, object]:
    out = {}

    def walk(cmd, path):
        if getattr(cmd, "commands", None):
            for name, sub in cmd.commands.items():
                walk(sub, path + [name])
        else:
            out[" ".join(path)] = cmd

    walk(typer.main.get_command(app), [])
    return out


def _params(cmd) -> dict[str, object]:
    ctx = cmd.context_class(cmd, info_name="x")
    return {n: p for p in cmd.get_params(ctx) if not getattr(p, "hidden", False) for n in (*p.opts, *p.secondary_opts)
            if n.startswith("-") and n not in ("-h", "--help")}


def test_every_command_keeps_its_flags():
    commands = _commands()
    assert set(commands) == set(FLAGS)
    for path, cmd in commands.items():
        assert set(_params(cmd)) == FLAGS[path], path


def test_a_shared_flag_is_one_definition_everywhere():
    """The same option (names, help, type, no default of its own) in every command that takes it."""
    seen: dict[str, tuple] = {}
    for path, cmd in _commands().items():
        for name, p in _params(cmd).items():
            if p.name in common._FIELDS:
                shape = (tuple(p.opts), p.help, p.type.name, p.default)
                assert seen.setdefault(p.name, shape) == shape, (path, name)
                assert p.default is None and p.help == flag_help(p.name)
    assert set(seen) == {f.name for f in dataclasses.fields(Flags)}


@pytest.mark.parametrize("name, text", [
    ("job_id", "Job id (default 1). [env STATECTL_JOB_ID]"),
    ("task", "Task name (default 'Partition 0'). [env STATECTL_TASK]"),
    ("keep_last", "Snapshots kept per task and store (default 1). [env STATECTL_KEEP_LAST]"),
    ("parallelism", "Transfers in flight (default 8). [env STATECTL_PARALLELISM]"),
    ("chunk_size", "Largest blob uploaded (default 64MiB). [env STATECTL_CHUNK_SIZE]"),
    ("ttl", "Expiry of uncommitted blobs (default 30d). [env STATECTL_TTL]"),
    ("store_dir", "The store dir itself (instead of --state-dir)."),
])
def test_help_reads_the_default_from_the_settings_table(name, text):
    assert flag_help(name) == text


def test_a_changed_default_shows_in_the_help(monkeypatch):
    monkeypatch.setitem(config.KEYS, "parallelism", dataclasses.replace(config.KEYS["parallelism"], default=16))
    monkeypatch.setitem(config.KEYS, "grace", dataclasses.replace(config.KEYS["grace"], default=2 * 86400))
    assert flag_help("parallelism") == "Transfers in flight (default 16). [env STATECTL_PARALLELISM]"
    assert flag_help("grace") == "Age before a blob no snapshot needs is deleted (default 2d). [env STATECTL_GRACE]"


def test_every_default_in_help_reads_back_as_the_default():
    for name in common._FIELDS:
        key = config.KEYS.get(name)
        if key is not None and key.default is not None:
            assert key.parse(key.default_text()) == key.default, name
            if "{default}" in common._FIELDS[name].metadata["help"]:
                assert re.search(rf"\(default '?{re.escape(key.default_text())}\b", flag_help(name)), name


# -- state_command ------------------------------------------------------------------------------------

def _app_with(command) -> typer.Typer:
    from statectl.cli.main import StatectlGroup

    tool = typer.Typer(cls=StatectlGroup, rich_markup_mode=None, pretty_exceptions_enable=False)
    tool.callback()(lambda: None)
    tool.command("probe")(command)
    return tool


def test_state_command_adds_the_flags_where_env_is_and_hands_over_an_env(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("STATECTL_JOB", raising=False)
    got = {}

    @state_command("blobstore", "job", "store_dir")
    def probe(first: str = typer.Option("a", "--first"), *, env: Env, last: bool = typer.Option(False, "--last")):
        """Probe."""
        got.update(env=env, first=first, last=last, session=env.session)

    names = [n for n in probe.__signature__.parameters]
    assert names == ["first", "ctx", "blobstore", "job", "store_dir", "last"]
    r = CliRunner().invoke(_app_with(probe), ["probe", "--job", "j", "--store-dir", "sd", "--blobstore",
                                              f"file://{tmp_path / 'b'}", "--last"])
    assert r.exit_code == 0, r.output
    env = got["env"]
    assert env.flags == Flags(blobstore=f"file://{tmp_path / 'b'}", job="j", store_dir=Path("sd"))
    assert env.settings.job == "j" and env.settings.source("job") == "flag" and got["last"] and got["first"] == "a"
    assert got["session"]._blobstore is None       # never opened, and the Env closed the session


def test_state_command_closes_the_session_when_the_command_fails(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    closed = []

    @state_command("blobstore")
    def probe(env: Env):
        """Probe."""
        store = env.session.blobstore
        store.close = lambda: closed.append(True)
        raise errors.NotFoundError("nothing here", hint="look elsewhere")

    (tmp_path / "b").mkdir()
    r = CliRunner().invoke(_app_with(probe), ["probe", "--blobstore", f"file://{tmp_path / 'b'}"])
    assert (r.exit_code, closed) == (10, [True])
    assert "Error: nothing here" in r.stderr and "Hint: look elsewhere" in r.stderr


def test_state_command_refuses_what_it_cannot_do():
    with pytest.raises(TypeError, match="not settings flags"):
        state_command("nope")
    with pytest.raises(TypeError, match="takes 'env'"):
        state_command("job")(lambda job: None)


# -- exit codes ---------------------------------------------------------------------------------------

def test_exit_code_lines_come_from_the_table():
    assert exit_codes_epilog(0, (1, "different"), 10) == "Exit codes: 0 ok, 1 different, 10 not found."
    with pytest.raises(ValueError):
        exit_codes_epilog(0, 7)
    assert EXIT_CODES_HELP == ("Exit codes: 0 ok, 1 failure (diff: different), 2 usage, 3 partial, 10 not found, "
                               "11 lock held, 12 auth, 13 missing dependency, 14 discarded, 130 interrupted.")
    assert EXIT_CODES_HELP in (typer.main.get_command(app).help or "")


def test_every_command_documents_exit_codes_of_the_table():
    documented = {c.code for c in errors.EXIT_CODES}
    for path, cmd in _commands().items():
        m = re.search(r"Exit codes: (.*)", cmd.epilog or "", re.S)
        if m is None:
            continue
        codes = {int(c) for c in re.findall(r"(?:^|, )(\d+) ", m.group(1))}
        assert codes and codes <= documented, path


def test_no_command_repeats_the_store_flags_by_hand():
    """The nine store flags come from one place: no module of the CLI declares one of them itself."""
    src = Path(common.__file__).parent
    for module in src.glob("*.py"):
        if module.name == "common.py":
            continue
        text = module.read_text(encoding="utf-8")
        for name in STORE:
            assert f'"--{name.replace("_", "-")}"' not in text, f"{module.name} declares --{name} itself"


def test_the_encryption_flags_offer_what_the_settings_and_the_store_accept():
    from statectl.blobstore import SSE_MODES

    commands = _commands()
    for path, name in (("backup", "--sse"), ("snapshots copy", "--to-sse")):
        assert tuple(_params(commands[path])[name].type.choices) == SSE_MODES, (path, name)
    assert [config.KEYS["sse"].parse(mode) for mode in SSE_MODES] == list(SSE_MODES)
