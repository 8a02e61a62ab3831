"""Store, task and job names that cannot be one file name: a newline or another control character, a blank
name, one too long for the filesystem. Every command that turns such a name into a path refuses it as it
refuses ``..`` (exit 2, one line naming the flag), and changes nothing; the longest name it takes works end
to end, in the state dir and in a file:// blob store. Real rocksdict stores, file:// blob stores."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statectl.local.layout import store_dir
from tests.integration.test_dry_run import tree
from tests.tools.genstore import fingerprint, make_store

BAD = {
    "newline": "a\nb",
    "escape": "red\x1b[31m",
    "tab": "a\tb",
    "blank": "   ",
    "too-long": "x" * 300,
}


def _commands(tmp: Path, flag: str, name: str) -> list[list[str]]:
    blobs = ["--blobstore", f"file://{tmp / 'blobs'}"]
    names = {"--job": "pv", "--store": "counts", "--task": "Partition 0", flag: name}
    ref = [f for k, v in names.items() for f in (k, v)]
    state = ["--state-dir", str(tmp / "state")]
    ds = str(tmp / "d.csv")
    out = [["backup", *blobs, *ref, *state],
           ["restore", *blobs, *ref, *state],
           ["restore", *blobs, *ref, *state, "--dry-run"],
           ["diff", *blobs, *ref, *state],
           ["snapshots", "show", *blobs, *ref],
           ["snapshots", "verify", *blobs, *ref],
           ["lease", "show", *blobs, *ref],
           ["lease", "break", *blobs, *ref, "--yes"],
           ["snapshots", "copy", *blobs, "--job", "pv", "--store", "counts", f"--to-{flag[2:]}", name],
           ["snapshots", "copy", *blobs, "--job", "pv", "--store", "counts", f"--to-{flag[2:]}", name, "--dry-run"]]
    if flag != "--job":
        out += [["snapshots", "list", *blobs, "--job", "pv", flag, name]]
    else:
        out += [["snapshots", "list", *blobs, "--job", name]]
    if flag == "--store":
        out += [["adstore", "status", *state, "--store", name]]
    if flag != "--task":  # refused before the brokers (none listen there) are asked anything
        seal = ["adstore", "seal-checkpoint", "--kafka", "127.0.0.1:9", "--job", "pv", "--store", "counts", *state]
        out += [[*seal, flag, name], [*seal, flag, name, "--dry-run"]]
    if flag != "--job":
        adstore = ["--store", names["--store"], "--task", names["--task"], *state]
        out += [["adstore", "load", "--from-file", ds, "--key-field", "id", *adstore],
                ["adstore", "load", "--from-file", ds, "--key-field", "id", *adstore, "--dry-run"],
                ["adstore", "versions", *adstore],
                ["adstore", "switch", *adstore, "--version", "1"]]
    return out


@pytest.fixture
def world(cli, tmp_path: Path) -> Path:
    """A backed-up store and a CSV dataset; a store dir under each bad task name too (what a name with a
    newline reaches when nothing refuses it)."""
    state = tmp_path / "state"
    make_store(store_dir(state, "counts", "Partition 0"), 300, 64, seed=1)
    cli("backup", "--blobstore", f"file://{tmp_path / 'blobs'}", "--job", "pv", "--store", "counts",
        "--state-dir", str(state), "--create")
    (tmp_path / "d.csv").write_text("id,v\n" + "".join(f"{i},{i * 7}\n" for i in range(50)))
    for name in ("a\nb", "red\x1b[31m", "a\tb", "___"):
        make_store(state / "counts" / name, 50, 16, seed=2)
    return tmp_path


@pytest.mark.parametrize("flag", ["--task", "--store", "--job"])
@pytest.mark.parametrize("kind", list(BAD))
def test_a_name_that_cannot_be_a_file_name_is_refused_as_dotdot_is(cli, world: Path, flag: str, kind: str):
    name = BAD[kind]
    before = tree(world, dir_mtimes=False)
    for args in _commands(world, flag, name):
        r = cli(*args, code=2)
        line = r.stderr.splitlines()[0]
        what = {"--task": "task", "--store": "store", "--job": "job"}[flag]
        assert line.startswith(f"Error: invalid {what} "), (args, r.stderr)
        assert {"too-long": "too long for a file name", "blank": "it is blank"}.get(kind, "control character") \
            in line, (args, line)
        assert "unexpected" not in r.stderr and "report it" not in r.stderr
        assert tree(world, dir_mtimes=False) == before, args


def test_the_longest_names_taken_work_end_to_end(cli, tmp_path: Path):
    """200 bytes (the limit in UTF-8), and a name whose URL-quoted form (as blob keys spell it) is at its limit:
    backup, copy, restore and adstore load make every dir and key they need, beside checkpoint dirs."""
    blobs = ["--blobstore", f"file://{tmp_path / 'blobs'}"]
    state = tmp_path / "state"
    for store, task in (("s" * 200, "Partition 0"), ("é" * 39, "t" * 200)):
        sdir = store_dir(state, store, task)
        make_store(sdir, 200, 64, seed=3)
        ref = ["--job", "j" * 200, "--store", store, "--task", task]
        cli("backup", *blobs, *ref, "--state-dir", str(state), "--create")
        r = json.loads(cli("snapshots", "copy", *blobs, *ref, "--to-task", "Partition 9", "-o", "json").stdout)
        assert r["task"] == "Partition 9"
        cli("restore", *blobs, *ref, "--target-dir", str(tmp_path / "restored" / store[:8]))
        assert fingerprint(tmp_path / "restored" / store[:8]) == fingerprint(sdir)
        assert any(p.name.startswith(f"{sdir.name}-") for p in sdir.parent.iterdir())  # its checkpoint dir
    (tmp_path / "d.csv").write_text("id,v\n1,2\n")
    cli("adstore", "load", "--from-file", str(tmp_path / "d.csv"), "--key-field", "id", "--store", "a" * 200,
        "--task", "b" * 200, "--state-dir", str(state))
    assert os.path.islink(store_dir(state, "a" * 200, "b" * 200))
