"""Every --help fits a screen, and its examples run as they are pasted.

Which examples run (and the sandbox they run in):

- Every example line of every --help is read (a ``statectl ...`` line, continuation lines joined, after
  any ``NAME=value`` assignments, which become its environment) and split with shlex.
- It runs unless it needs a server: it names an ``s3://`` URL, ``--s3-endpoint``, ``--to-s3-endpoint``,
  ``--kafka``, ``--zookeeper``, ``--spark`` or ``--master``, or is a command that always runs one
  (SERVER_COMMANDS). Those are only parsed (test_examples.py).
- Each top-level command runs its examples, in the order of the command tree and of its help, as a real
  process in a fresh copy of the sandbox: the current dir, with HOME and XDG dirs inside it. Every absolute
  path of an example (also in a ``file://`` URL or an ``--opt=/path``) is re-rooted there. The sandbox
  holds what the examples name: job page-views' store counts, tasks Partition 0 and 1, under
  /var/samza/state, backed up to the default blob store (Partition 0 twice, the store changed between:
  3f2a9c and 1d2e3f stand for the newer and the older snapshot's ids); a checkpoint dir the job made,
  /var/samza/state/counts/Partition_0-1700000000000-123; index.json, an index blob of a Samza job;
  statectl.toml with a [staging] profile; and the dataset /data/members.parquet (columns id, name).
- It must exit 0, but for the few that cannot in a sandbox: EXIT lists them with the code they exit with
  and why.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statectl.cli.main import app
from tests.unit.cli.test_common import _commands

ROOT = Path(__file__).resolve().parents[3]
STATECTL = str(Path(sys.executable).parent / "statectl")
MAX_HELP_LINES = 60

SERVER_FLAGS = {"--s3-endpoint", "--to-s3-endpoint", "--kafka", "--zookeeper", "--spark", "--master"}
SERVER_COMMANDS = {"rescale": "Spark"}
# An example (a part of its line) -> (the code it exits with in the sandbox, why).
EXIT = {
    "statectl diff --job page-views --store counts --snapshot": (1, "the sandbox changed the store between its "
                                                                    "backups: the snapshots differ"),
    "statectl adstore switch --state-dir /var/samza/state --store members --version 3": (
        10, "the sandbox's store has one version, from the load example"),
    "statectl adstore switch --state-dir /var/samza/state --store members --dry-run": (
        10, "the sandbox's store has one version, from the load example: none to roll back to"),
}
NEWER, OLDER = "3f2a9c", "1d2e3f"


def _help(words: list[str]) -> str:
    r = CliRunner().invoke(app, [*words, "--help"], terminal_width=100, env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    return r.output


def _paths() -> list[str]:
    """Every command path, groups and statectl itself included."""
    out = {""}
    for path in _commands():
        words = path.split()
        out.update(" ".join(words[:i]) for i in range(1, len(words) + 1))
    return sorted(out)


@pytest.mark.parametrize("path", _paths())
def test_every_help_fits_a_screen(path: str):
    text = _help(path.split())
    assert len(text.splitlines()) <= MAX_HELP_LINES, \
        f"statectl {path} --help is {len(text.splitlines())} lines (at most {MAX_HELP_LINES}):\n{text}"


# -- examples that run --------------------------------------------------------------------------------

def examples(help_text: str) -> list[str]:
    """The example lines of a --help text, continuation lines joined."""
    out: list[str] = []
    lines = help_text.splitlines()
    in_examples, i = False, 0
    while i < len(lines):
        line = lines[i].strip()
        in_examples = in_examples or line.startswith("Example")
        if in_examples and re.match(r"([A-Z_][A-Z0-9_]*=\S+ )*statectl ", line):
            while line.endswith("\\"):
                i += 1
                line = line[:-1] + lines[i].strip()
            out.append(line)
        i += 1
    return out


def needs_server(path: str, args: list[str]) -> bool:
    return path.split()[0] in SERVER_COMMANDS or any(
        "s3://" in a or a.split("=", 1)[0] in SERVER_FLAGS for a in args)


def _reroot(arg: str, root: Path, ids: dict[str, str]) -> str:
    if arg in ids:
        return ids[arg]
    name, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if value.startswith("file:///"):
        value = f"file://{root}{value[len('file://'):]}"
    elif value.startswith("/"):
        value = f"{root}{value}"
    return name + eq + value


def _split(example: str) -> tuple[dict[str, str], list[str]]:
    """An example's environment assignments and its words (after statectl)."""
    words = shlex.split(example, comments=True)
    env = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "statectl", example
    return env, words[1:]


def _make_store(path: Path, keys: range) -> None:
    from rocksdict import Options, Rdict

    db = Rdict(str(path), Options(raw_mode=True))
    for i in keys:
        db[b"page-%05d" % i] = b"%d" % i
    db.close()


def _environ(root: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("STATECTL_") and not k.startswith("XDG_")}
    return {**keep, "HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "home/.config"),
            "XDG_DATA_HOME": str(root / "home/.local/share"), "XDG_CACHE_HOME": str(root / "home/.cache"),
            "TMPDIR": str(root / "tmp"), "COLUMNS": "100"}


def _statectl(root: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([STATECTL, *args], cwd=root, env={**_environ(root), **(env or {})}, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The sandbox the module doc describes, and the snapshot ids its examples' placeholders stand for."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("sandbox") / "root"
    state = root / "var/samza/state"
    for d in ("home", "tmp", "data", "var/samza/state/counts"):
        (root / d).mkdir(parents=True)
    _make_store(state / "counts/Partition_0", range(1000))
    _make_store(state / "counts/Partition_1", range(1000, 1500))
    common = ["--job", "page-views", "--state-dir", str(state), "--store", "counts", "--keep-last", "2"]
    ids = []
    for task, keys in (("Partition 0", range(1000, 1200)), ("Partition 0", None), ("Partition 1", None)):
        r = _statectl(root, ["-o", "json", "backup", *common, "--task", task])
        assert r.returncode == 0, r.stderr
        ids.append(re.search(r'"snapshot_id": "[^"]*?([0-9a-f]{12})[^"]*"', r.stdout).group(1))
        if keys is not None:
            _make_store(state / "counts/Partition_0", keys)
    shutil.copytree(state / "counts/Partition_0", state / "counts/Partition_0-1700000000000-123")
    shutil.copy(ROOT / "tests/data/samza-index.json", root / "index.json")
    (root / "statectl.toml").write_text("[default]\n\n[staging]\nkeep_last = 3\n", encoding="utf-8")
    pq.write_table(pa.table({"id": [f"m{i}" for i in range(100)], "name": [f"name {i}" for i in range(100)]}),
                   root / "data/members.parquet")
    return root, {NEWER: ids[1], OLDER: ids[0]}


def _groups() -> dict[str, list[tuple[str, str]]]:
    """Top-level command -> its (command path, example) pairs, in the tree's and the help's order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path in _commands():
        for example in examples(_help(path.split())):
            out.setdefault(path.split()[0], []).append((path, example))
    return out


GROUPS = _groups()


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_help_examples_run_as_pasted(group: str, sandbox, tmp_path):
    base, ids = sandbox
    root = tmp_path / "root"
    shutil.copytree(base, root, symlinks=True)
    ran = 0
    for path, example in GROUPS[group]:
        env, args = _split(example)
        if needs_server(path, args):
            continue
        r = _statectl(root, [_reroot(a, root, ids) for a in args], env)
        code, why = next(((c, w) for part, (c, w) in EXIT.items() if example.startswith(part)), (0, ""))
        assert r.returncode == code, f"{example}\n(in {root}) exit {r.returncode}, not {code} {why}:\n{r.stderr}"
        assert "Traceback" not in r.stderr
        ran += 1
    if group in ("backup", "restore", "diff", "snapshots", "gc", "doctor", "lease", "config", "version"):
        assert ran, f"no example of statectl {group} runs without a server"


def test_every_exception_names_an_example():
    every = [example for pairs in GROUPS.values() for _, example in pairs]
    for part in EXIT:
        assert any(example.startswith(part) for example in every), f"EXIT names no example: {part}"


def test_the_rule_tells_server_examples_from_the_others():
    assert needs_server("backup", ["backup", "--blobstore", "s3://b/p"])
    assert needs_server("gc", ["gc", "--blobstore=s3://b/p"])
    assert needs_server("drain start", ["drain", "start", "--kafka", "broker:9092"])
    assert needs_server("rescale", ["rescale", "--job", "j"])
    assert not needs_server("backup", ["backup", "--blobstore", "file:///var/backups/statectl", "--create"])
    root = Path("/sandbox")
    assert _reroot("file:///var/b", root, {}) == "file:///sandbox/var/b"
    assert _reroot("--target-dir=/tmp/x", root, {}) == "--target-dir=/sandbox/tmp/x"
    assert _reroot("state/counts", root, {}) == "state/counts" and _reroot(NEWER, root, {NEWER: "ab"}) == "ab"
    assert _split("STATECTL_RETRIES=1 statectl doctor -o json   # in CI") == ({"STATECTL_RETRIES": "1"},
                                                                             ["doctor", "-o", "json"])
