"""adstore against hostile surroundings, as real statectl processes on a real broker (Tansu) and real
RocksDB: dirs it did not make (a job's store, a folder of files, a versioned adstore, a file) are never
replaced; names that would reach outside the state dir; damaged versions never made current; concurrent
loads and switches on one store (one at a time, exit 11 naming the holder); empty datasets and files
changing while read; a store held by a job (adstore's own hint); a full disk (failpoints, and a real one:
a small tmpfs)."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from statectl.errors import DiskFullError
from statectl.formats.adstore import MANIFEST
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import SIDE_INPUT_OFFSETS, write_offsets
from statectl.kafka.client import create_topic
from statectl.local.datasets import DatasetError
from statectl.progress import NullProgress
from tests.tools.standby_helpers import STATECTL, ChangelogWriter, clean_env, cli, offsets_of, read_store, wait_until

STORE = "members"
REPO = Path(__file__).resolve().parents[2]


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr and "unexpected" not in stderr, stderr
    return lines[0]


def hint_line(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if line.startswith("Hint: ")]
    return line


def tree(root: Path, *, locks: bool = True) -> dict[str, bytes | str]:
    """Every file (its bytes), dir and link under ``root``, by relative path (``locks``: the adstore lock
    files too, which hold the pid of their last holder)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            if not locks and name.endswith(".adstore.lock"):
                continue
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def write_rocks(path: Path, entries: dict[bytes, bytes]) -> None:
    import rocksdict

    path.parent.mkdir(parents=True, exist_ok=True)
    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
    try:
        for k, v in entries.items():
            db[k] = v
    finally:
        db.close()
    (path / "rocksdict-config.json").unlink(missing_ok=True)


def run(tmp: Path, *args: str, failpoints: str | None = None, code: int | None = 0) -> subprocess.CompletedProcess:
    env = clean_env(tmp)
    if failpoints:
        env["STATECTL_FAILPOINTS"] = failpoints
    p = subprocess.run([STATECTL, *args], env=env, cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=180)
    if code is not None:
        assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
    return p


def write_csv(path: Path, n: int, *, start: int = 0, tag: str = "v") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "name"])
        for i in range(start, start + n):
            w.writerow([f"id-{i:07d}", f"{tag}-{i}"])
    return path


class Topic:
    def __init__(self, bootstrap: str, tmp: Path, partitions: int = 1):
        self.bootstrap, self.tmp = bootstrap, tmp
        self.name = f"hostile-{uuid.uuid4().hex[:10]}"
        assert create_topic(bootstrap, self.name, partitions=partitions)
        self.writers = [ChangelogWriter(bootstrap, self.name, p) for p in range(partitions)]
        self.state = tmp / "state"

    def store(self, p: int = 0) -> Path:
        return self.state / STORE / f"Partition_{p}"

    def args(self, *extra: str) -> list[str]:
        return ["adstore", "load", "--kafka", self.bootstrap, "--topic", self.name, "--store", STORE,
                "--state-dir", str(self.state), *extra]

    def send(self, p: int, n: int, tag: str = "v") -> None:
        self.writers[p].send([(b"k%04d" % i, f"{tag}{i}".encode()) for i in range(n)])

    def expected(self, p: int = 0) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        for _, k, v in self.writers[p].records():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out

    def close(self) -> None:
        for w in self.writers:
            w.close()


@pytest.fixture
def topic(tansu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    t = Topic(tansu.bootstrap, tmp_path)
    yield t
    t.close()


class Files:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.state = tmp / "state"

    def store(self, k: int = 0) -> Path:
        return self.state / STORE / f"Partition_{k}"

    def versions_dir(self, k: int = 0) -> Path:
        return self.state / STORE / f"Partition_{k}.versions"

    def where(self) -> list[str]:
        return ["--store", STORE, "--state-dir", str(self.state)]

    def args(self, dataset: Path, *extra: str) -> list[str]:
        return ["adstore", "load", "--from-file", str(dataset), "--key-field", "id", *self.where(), *extra]

    def load(self, dataset: Path, *extra: str, code: int = 0,
             failpoints: str | None = None) -> subprocess.CompletedProcess:
        return run(self.tmp, *self.args(dataset, *extra), code=code, failpoints=failpoints)

    def current(self, k: int = 0) -> int | None:
        if not os.path.lexists(self.store(k)):
            return None
        return int(os.readlink(self.store(k)).rsplit("/", 1)[1])

    def numbers(self, k: int = 0) -> list[int]:
        return sorted(int(p.name) for p in self.versions_dir(k).iterdir() if p.name.isdigit())

    def leftovers(self, k: int = 0) -> list[str]:
        return sorted(p.name for p in self.versions_dir(k).iterdir() if not p.name.isdigit())


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


# -- 2: a topic load replaces only what it made ----------------------------------------------------------


@pytest.mark.timeout(180)
def test_topic_load_refuses_dirs_it_did_not_make(topic: Topic, tmp_path: Path):
    topic.send(0, 30)
    # a job's own store at the store dir: a RocksDB store without SIDE-INPUT-OFFSETS
    job_store = topic.store(0)
    write_rocks(job_store, {b"job-key": b"job-value"})
    (job_store / "OFFSET-v2").write_bytes(b"the job's changelog offsets")
    before = tree(topic.state)
    r = cli(tmp_path, *topic.args(), code=2)
    line = error_line(r.stderr)
    assert str(job_store) in line and SIDE_INPUT_OFFSETS in line and "refusing" in line
    assert "another --store" in hint_line(r.stderr)
    assert tree(topic.state) == before  # untouched: no staged dir, no new file
    for extra in (["--max-age", "1s"], ["--broadcast"]):  # never rebuilt, whatever the flags
        cli(tmp_path, *topic.args(*extra), code=2)
        assert tree(topic.state) == before

    # --store-dir: a folder of plain files (a broadcast store dir named directly)
    folder = tmp_path / "my-folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("precious")
    (folder / "sub" / "data.bin").write_bytes(b"\x00\x01")
    before = tree(folder)
    args = ["adstore", "load", "--kafka", topic.bootstrap, "--topic", topic.name, "--store", STORE,
            "--broadcast", "--store-dir", str(folder)]
    r = cli(tmp_path, *args, code=2)
    assert str(folder) in error_line(r.stderr) and "a dir that adstore load did not make" in r.stderr
    assert tree(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".my-folder")) == []

    # a file where the store dir would be
    a_file = tmp_path / "a-file"
    a_file.write_text("not a dir")
    r = cli(tmp_path, *args[:-1], str(a_file), code=2)
    assert "not a directory" in error_line(r.stderr) and a_file.read_text() == "not a dir"

    # a versioned adstore (a link to its current version)
    ds = write_csv(tmp_path / "d.csv", 5)
    state2 = tmp_path / "state2"
    cli(tmp_path, "adstore", "load", "--from-file", str(ds), "--key-field", "id", "--store", STORE,
        "--state-dir", str(state2))
    before = tree(state2)
    r = cli(tmp_path, "adstore", "load", "--kafka", topic.bootstrap, "--topic", topic.name, "--store", STORE,
            "--state-dir", str(state2), code=2)
    assert "versioned adstore" in error_line(r.stderr)
    assert tree(state2) == before

    # an empty dir is loaded into; a store holding the adstore's own (damaged) offsets file is rebuilt
    empty = tmp_path / "empty-store"
    empty.mkdir()
    r = json.loads(cli(tmp_path, *args[:-1], str(empty), "-o", "json").stdout)
    assert r["stores"][0]["case"] == "created" and read_store(empty) == topic.expected()
    (empty / SIDE_INPUT_OFFSETS).write_bytes(b"\xffdamaged")
    r = json.loads(cli(tmp_path, *args[:-1], str(empty), "-o", "json").stdout)
    assert r["stores"][0]["case"] == "rebuilt" and "damaged" in r["stores"][0]["reason"]
    assert read_store(empty) == topic.expected()


@pytest.mark.timeout(180)
def test_a_store_killed_before_its_first_flush_is_still_the_loads_own(topic: Topic, tmp_path: Path):
    """A new store dir appears with its offsets file: a load killed right after creating it leaves a dir
    the next load recognises (and completes), never one it must refuse."""
    topic.send(0, 50)
    p = subprocess.Popen([STATECTL, *topic.args()], env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="adstore-apply"),
                         cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGKILL, err
    assert offsets_of(topic.store(0), SIDE_INPUT_OFFSETS) == {}  # Samza writes no nulls: a partition with no record yet is left out
    r = json.loads(cli(tmp_path, *topic.args("-o", "json")).stdout)
    assert r["stores"][0]["case"] == "resumed" and r["records"] == 50
    assert read_store(topic.store(0)) == topic.expected()
    assert sorted(p.name for p in topic.store(0).parent.iterdir()) == ["Partition_0", "Partition_0.adstore.lock"]


# -- 6: names that would leave the state dir ---------------------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("flag,name", [("--store", "../../escape"), ("--store", ".."), ("--task", "../../x"),
                                       ("--store", "a/b")])
def test_names_that_escape_the_state_dir_are_refused(topic: Topic, tmp_path: Path, flag: str, name: str):
    topic.send(0, 5)
    work = tmp_path / "work"
    state = work / "deep" / "state"
    state.mkdir(parents=True)
    ds = write_csv(tmp_path / "data" / "d.csv", 5)
    before = tree(work)
    tops = sorted(p.name for p in tmp_path.iterdir())
    names = {"--store": STORE, "--task": "Partition 0", flag: name}
    where = ["--state-dir", str(state), "--store", names["--store"], "--task", names["--task"]]
    for args in (["adstore", "load", "--kafka", topic.bootstrap, "--topic", topic.name, *where],
                 ["adstore", "load", "--kafka", topic.bootstrap, "--topic", topic.name, "--broadcast", *where],
                 ["adstore", "load", "--from-file", str(ds), "--key-field", "id", *where],
                 ["adstore", "load", "--from-file", str(ds), "--key-field", "id", "--partition-count", "2", *where],
                 ["adstore", "switch", *where, "--version", "1"]):
        r = run(tmp_path, *args, code=2)
        assert repr(name) in error_line(r.stderr)
        assert tree(work) == before, args
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("xdg-")) == tops, args


# -- 9: switch verifies the version; versions reports damage -----------------------------------------------


@pytest.mark.timeout(180)
def test_switch_refuses_a_damaged_version_and_versions_reports_it(files: Files, tmp_path: Path):
    files.load(write_csv(tmp_path / "v1.csv", 300, tag="one"))
    files.load(write_csv(tmp_path / "v2.csv", 200, tag="two"))
    files.load(write_csv(tmp_path / "v3.csv", 100, tag="three"), "--keep-versions", "3")
    v1, v2 = files.versions_dir() / "1", files.versions_dir() / "2"
    v2_entries = read_store(v2)
    (v1 / "CURRENT").unlink()  # version 1 is no RocksDB store any more

    r = json.loads(cli(tmp_path, "adstore", "versions", *files.where(), "-o", "json").stdout)
    problems = {v["version"]: v["problem"] for v in r["versions"]}
    assert problems[2] is None and problems[3] is None and "damaged" in problems[1] and "CURRENT" in problems[1]
    text = cli(tmp_path, "adstore", "versions", *files.where()).stdout
    assert text.splitlines()[0].split()[0] == "VERSION" and "damaged" in text.splitlines()[1]

    r = cli(tmp_path, "adstore", "switch", *files.where(), "--version", "1", code=1)
    assert "version 1" in error_line(r.stderr) and "damaged" in r.stderr
    assert files.current() == 3
    r = cli(tmp_path, "adstore", "switch", *files.where(), "--version", "1", "--quick", code=1)
    assert files.current() == 3

    # version 2 changed under its manifest (an entry added): the cheap checks (--quick) see nothing; versions,
    # as switch, reads every entry and names it
    write_rocks(v2, {b"intruder": b"x"})
    assert json.loads(cli(tmp_path, "adstore", "versions", *files.where(), "--quick", "-o", "json").stdout)[
        "versions"][1]["problem"] is None
    before = tree(files.state)
    r = json.loads(cli(tmp_path, "adstore", "versions", *files.where(), "-o", "json").stdout)
    problems = {v["version"]: v["problem"] for v in r["versions"]}
    assert problems[3] is None and "damaged" in problems[1]
    assert problems[2].startswith(f"damaged: it holds {len(v2_entries) + 1} keys") and "manifest says" in problems[2]
    assert tree(files.state) == before  # read-only: no config file left in a version
    r = cli(tmp_path, "adstore", "switch", *files.where(), code=1)  # the rollback to 2
    assert "version 2" in error_line(r.stderr) and f"{len(v2_entries) + 1} keys" in r.stderr
    assert files.current() == 3
    # --quick only checks that it opens (documented): it switches
    r = json.loads(cli(tmp_path, "adstore", "switch", *files.where(), "--quick", "-o", "json").stdout)
    assert (r["version"], r["previous"]) == (2, 3) and files.current() == 2
    # an intact version switches back after the full check
    r = json.loads(cli(tmp_path, "adstore", "switch", *files.where(), "--version", "3", "-o", "json").stdout)
    assert (r["version"], r["previous"]) == (3, 2) and files.current() == 3


# -- 10: one load or switch per store ----------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_a_second_load_or_switch_on_a_store_exits_11_naming_the_holder(files: Files, tmp_path: Path):
    files.load(write_csv(tmp_path / "v1.csv", 100))
    big = write_csv(tmp_path / "v2.csv", 30_000)
    err = tmp_path / "holder.err"
    with open(err, "wb") as fh:  # holds the store's lock, stalled in its first write batch
        holder = subprocess.Popen([STATECTL, *files.args(big)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=fh,
                                  env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="changelog-apply=sleep:600"))
    try:
        wait_until(lambda: any(p.name.startswith(".building-") for p in files.versions_dir().iterdir())
                   or holder.poll() is not None, 60, "the first load builds")
        assert holder.poll() is None, err.read_text()
        lock = files.store().with_name("Partition_0.adstore.lock")
        assert lock.is_file() and "Partition_0-" not in lock.name  # Samza deletes "<task dir>-*" beside stores
        r = files.load(write_csv(tmp_path / "v3.csv", 10), code=11)
        line = error_line(r.stderr)
        assert str(files.store()) in line and f"process {holder.pid}" in line
        r = run(tmp_path, "adstore", "switch", *files.where(), "--version", "1", code=11)
        assert f"process {holder.pid}" in error_line(r.stderr)
        assert files.current() == 1 and files.numbers() == [1]
    finally:
        holder.kill()
        holder.wait(30)
    # the holder's lock died with it; its build is removed by the next load, which follows version 1
    r = json.loads(files.load(write_csv(tmp_path / "v4.csv", 20), "-o", "json").stdout)
    assert r["version"] == 2 and r["stores"][0]["previous"] == 1
    assert files.current() == 2 and files.leftovers() == []


@pytest.mark.timeout(300)
def test_concurrent_loads_keep_the_version_chain(files: Files, tmp_path: Path):
    """Loads started together: each exits 0 or 11; those that ran did so one after another, so the current
    version is the newest, each one's previous is the one before it, and --keep-versions holds."""
    files.load(write_csv(tmp_path / "v0.csv", 50, tag="zero"))
    procs = []
    for i in range(5):
        ds = write_csv(tmp_path / f"c{i}.csv", 4000, tag=f"load{i}")
        procs.append((ds, subprocess.Popen([STATECTL, *files.args(ds, "--keep-versions", "2", "-o", "json")],
                                           cwd=tmp_path, env=clean_env(tmp_path), stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    done = []
    for ds, p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode in (0, 11), err
        if p.returncode == 11:
            assert "process " in error_line(err) and "adstore.lock" in err
        else:
            done.append((json.loads(out), ds))
    assert done
    done.sort(key=lambda d: d[0]["version"])
    chain = [1] + [r["version"] for r, _ in done]
    assert chain == sorted(set(chain))
    assert [r["stores"][0]["previous"] for r, _ in done] == chain[:-1]
    assert files.current() == chain[-1] == max(files.numbers())
    assert len(files.numbers()) <= 2 and files.leftovers() == []
    last_ds = done[-1][1]
    assert read_store(files.store())[b"id-0000000"] == json.dumps({"name": f"{last_ds.stem.replace('c', 'load')}-0"},
                                                                  separators=(",", ":")).encode()


@pytest.mark.timeout(180)
def test_a_second_topic_load_on_a_followed_store_exits_11(topic: Topic, tmp_path: Path):
    topic.send(0, 20)
    err = tmp_path / "follow.err"
    with open(err, "wb") as fh:
        follower = subprocess.Popen([STATECTL, *topic.args("--follow")], env=clean_env(tmp_path), cwd=tmp_path,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh)
    try:
        wait_until(lambda: offsets_of(topic.store(0), SIDE_INPUT_OFFSETS) == {f"kafka.{topic.name}.0": "19"}
                   or follower.poll() is not None, 60, "the follower catches up")
        assert follower.poll() is None, err.read_text()
        r = cli(tmp_path, *topic.args(), code=11)
        assert f"process {follower.pid}" in error_line(r.stderr) and "adstore" in r.stderr
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(30) == 0, err.read_text()
    finally:
        follower.kill()
        follower.wait(30)
    cli(tmp_path, *topic.args())


# -- 11a: empty datasets, files changing while read --------------------------------------------------------


@pytest.mark.timeout(180)
def test_an_empty_dataset_is_refused_unless_allowed(files: Files, tmp_path: Path):
    files.load(write_csv(tmp_path / "v1.csv", 10))
    header_only = tmp_path / "header.csv"
    header_only.write_text("id,name\n")
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text("\n\n")
    for ds, extra in ((header_only, []), (nothing, []), (header_only, ["--partition-count", "2"])):
        r = files.load(ds, *extra, code=1)
        assert str(ds) in error_line(r.stderr) and "no rows" in r.stderr and "--allow-empty" in hint_line(r.stderr)
        assert files.current() == 1 and files.numbers() == [1] and files.leftovers() == []
        assert not files.versions_dir(1).exists() or files.numbers(1) == []
    r = json.loads(files.load(header_only, "--allow-empty", "-o", "json").stdout)
    assert r["version"] == 2 and r["stores"][0]["keys"] == 0 and files.current() == 2
    assert read_store(files.store()) == {}
    r = run(tmp_path, "adstore", "load", "--kafka", "127.0.0.1:9", "--topic", "t", "--store", STORE,
            "--state-dir", str(files.state), "--allow-empty", code=2)
    assert "--allow-empty" in error_line(r.stderr)


class _Appender(NullProgress):
    """Appends a row to ``victim`` when the load moves on from its first file (``victim`` is then being read)."""

    def __init__(self, victim: Path):
        super().__init__()
        self.victim = victim
        self.done = 0

    def file_done(self) -> None:
        self.done += 1
        if self.done == 1:
            with open(self.victim, "a") as f:
                f.write("id-late,late\n")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("change", ["append", "replace"])
def test_a_file_changed_while_read_fails_the_load(files: Files, tmp_path: Path, change: str):
    from statectl.engine.adstore.files import FileLoadOptions, load_file
    from statectl.formats.adstore import KeyValueSpec

    files.load(write_csv(tmp_path / "v1.csv", 10))
    data = tmp_path / "export"
    write_csv(data / "part-0.csv", 50)
    victim = write_csv(data / "part-1.csv", 50, start=50)

    class Replacer(_Appender):
        def file_done(self) -> None:
            self.done += 1
            if self.done == 1:
                write_csv(data / "new.tmp", 50, start=50, tag="w")
                os.replace(data / "new.tmp", victim)

    progress = _Appender(victim) if change == "append" else Replacer(victim)
    opts = FileLoadOptions(data, STORE, files.state, spec=KeyValueSpec(key_column="id", value_column="name"))
    with pytest.raises(DatasetError) as e:
        load_file(opts, progress=progress)
    assert str(victim) in str(e.value) and "while it was read" in str(e.value) and e.value.exit_code == 1
    assert ("changed size" if change == "append" else "was replaced") in str(e.value)
    assert files.current() == 1 and files.numbers() == [1] and files.leftovers() == []


# -- 11: the lock-held hint, a full disk -------------------------------------------------------------------


HOLDER = """import sys, rocksdict
db = rocksdict.Rdict(sys.argv[1], rocksdict.Options(raw_mode=True))
print("ready", flush=True)
sys.stdin.read()
db.close()
"""


@pytest.mark.timeout(180)
def test_a_store_held_by_a_job_gets_adstores_own_hint(topic: Topic, tmp_path: Path):
    topic.send(0, 10)
    cli(tmp_path, *topic.args())
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(topic.store(0))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        for extra in ([], ["--max-age", "1s"]):
            r = cli(tmp_path, *topic.args(*extra), code=11)
            assert f"process {holder.pid}" in error_line(r.stderr)
            hint = hint_line(r.stderr)
            assert "--checkpoint-dir" not in hint and "back up" not in hint and "adstore load" in hint
    finally:
        holder.stdin.close()
        holder.wait(30)


@pytest.mark.timeout(180)
def test_a_full_disk_during_a_file_load(files: Files, tmp_path: Path):
    files.load(write_csv(tmp_path / "v1.csv", 10))
    before = read_store(files.store())
    ds = write_csv(tmp_path / "v2.csv", 25_000)
    for fp, extra in (("changelog-apply=raise:ENOSPC", []), ("changelog-apply=1*off->raise:ENOSPC", []),
                      ("changelog-apply=raise:EDQUOT", ["--partition-count", "2"])):
        r = files.load(ds, *extra, code=1, failpoints=fp)
        line = error_line(r.stderr)
        assert "no space left on device" in line and "no new version" in line, r.stderr
        assert files.current() == 1 and files.numbers() == [1] and files.leftovers() == []
        assert read_store(files.store()) == before
        assert not files.versions_dir(1).exists() or list(files.versions_dir(1).iterdir()) == []


@pytest.mark.timeout(180)
def test_a_full_disk_during_a_topic_load(topic: Topic, tmp_path: Path):
    topic.send(0, 40)
    # a new store: the error, one line; what is there is what its offsets say (nothing yet)
    r = run(tmp_path, *topic.args(), failpoints="adstore-apply=raise:ENOSPC", code=1)
    assert "no space left on device" in error_line(r.stderr) and str(topic.store(0)) in r.stderr
    assert offsets_of(topic.store(0), SIDE_INPUT_OFFSETS) == {}
    cli(tmp_path, *topic.args())
    assert read_store(topic.store(0)) == topic.expected()
    # a store being rebuilt is left as it was, with nothing staged beside it
    write_offsets(topic.store(0) / SIDE_INPUT_OFFSETS, {SSP("kafka", topic.name, 0): "not a number"})
    before = tree(topic.state, locks=False)
    r = run(tmp_path, *topic.args(), failpoints="adstore-apply=raise:ENOSPC", code=1)
    assert "no space left on device" in error_line(r.stderr) and "left as it was" in r.stderr
    assert tree(topic.state, locks=False) == before


@pytest.mark.timeout(180)
def test_a_really_full_disk_during_a_file_load(small_disk, tmp_path: Path):
    """The state dir on a 2 MiB tmpfs: RocksDB's own "IO error: No space left on device" (no OSError) is the
    disk-full error (exit 1), not an unexpected one; the current version stays, no build is left behind."""
    files = Files(tmp_path)
    files.state = small_disk(2)
    files.load(write_csv(tmp_path / "v1.csv", 10))
    before = read_store(files.store())
    big = tmp_path / "v2.csv"
    with open(big, "w") as f:  # 4 MiB that do not compress
        f.write("id,name\n" + "".join(f"id-{i:07d},{os.urandom(20).hex()}\n" for i in range(70_000)))
    for extra in ([], ["--partition-count", "2"]):
        r = files.load(big, *extra, code=1)
        line = error_line(r.stderr)
        assert "no space left on device" in line and "no new version" in line, r.stderr
        if not extra:
            assert files.current() == 1 and files.numbers() == [1] and files.leftovers() == []
            assert read_store(files.store()) == before
    assert sorted(p.name for p in (files.state / STORE).iterdir() if not p.name.endswith(".adstore.lock")) == [
        "Partition_0", "Partition_0.versions", "Partition_1.versions"]
    assert list((files.state / STORE / "Partition_1.versions").iterdir()) == []


def test_disk_full_is_a_typed_error_in_process(files: Files, tmp_path: Path):
    """The engine raises DiskFullError (exit 1), for a Python caller too."""
    from statectl import failpoints
    from statectl.engine.adstore.files import FileLoadOptions, load_file
    from statectl.formats.adstore import KeyValueSpec

    ds = write_csv(tmp_path / "d.csv", 100)
    with failpoints.active("changelog-apply=raise:ENOSPC"), pytest.raises(DiskFullError) as e:
        load_file(FileLoadOptions(ds, STORE, files.state, spec=KeyValueSpec(key_column="id")))
    assert e.value.exit_code == 1 and not os.path.lexists(files.store())


# -- every dir adstore deletes is provably its own ---------------------------------------------------------


def test_old_spark_build_dirs_are_removed_only_when_provably_a_builds(tmp_path: Path):
    from statectl.engine.adstore.builds import BUILD_LOCK, remove_old_builds

    parent = tmp_path / "state" / STORE
    parent.mkdir(parents=True)
    old = 3 * 24 * 3600

    def build_dir(name: str, files: dict[str, bytes]) -> Path:
        d = parent / name
        d.mkdir()
        for n, data in files.items():
            (d / n).write_bytes(data)
        for p in [*d.iterdir(), d]:
            t = os.stat(p).st_mtime - old
            os.utime(p, (t, t), follow_symlinks=False)
        return d

    ours = parent / ".adstore-build-0000000000000000"
    stale = build_dir(".adstore-build-1111111111111111", {"BUILD-JOB.json": b"{}", "spark-submit.log": b"",
                                                          "store-0-0000-0000.sst": b"x", BUILD_LOCK: b""})
    foreign = build_dir(".adstore-build-2222222222222222", {"BUILD-JOB.json": b"{}", "my-thesis.pdf": b"%PDF"})
    odd_name = build_dir(".adstore-build-not-hex-at-all", {"BUILD-JOB.json": b"{}"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "BUILD-JOB.json").write_bytes(b"{}")
    link = parent / ".adstore-build-3333333333333333"
    link.symlink_to(elsewhere)
    in_use = build_dir(".adstore-build-4444444444444444", {"BUILD-JOB.json": b"{}", BUILD_LOCK: b""})
    fd = os.open(in_use / BUILD_LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for p in (in_use / BUILD_LOCK, in_use):
            t = os.stat(p).st_mtime - old
            os.utime(p, (t, t))
        remove_old_builds(ours)
    finally:
        os.close(fd)
    assert not stale.exists()
    assert foreign.is_dir() and (foreign / "my-thesis.pdf").exists() and odd_name.is_dir()
    assert link.is_symlink() and (elsewhere / "BUILD-JOB.json").exists()
    assert in_use.is_dir()


def test_version_dirs_and_builds_adstore_did_not_make_are_left_alone(files: Files, tmp_path: Path):
    from statectl.local.versions import prune, remove_dead_builds

    for i in range(3):
        files.load(write_csv(tmp_path / f"v{i}.csv", 5, tag=f"t{i}"), "--keep-versions", "3")
    root = files.versions_dir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / MANIFEST).write_text("{}")
    (elsewhere / "precious").write_text("keep me")
    (root / "0").symlink_to(elsewhere)  # a link named as a version
    (root / "9").mkdir()  # a dir named as a version, without a manifest: not sealed by a build
    (root / "9" / "precious").write_text("keep me")
    odd = root / ".building-7-1-notours"  # not a build's name (pid 1 is alive anyway)
    odd.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    not_ours = root / f".building-8-{dead.pid}-0123456789"  # 10 hex: not VersionBuild's name
    not_ours.mkdir()
    remove_dead_builds(files.store())
    assert prune(files.store(), 1) == [1, 2]
    assert (elsewhere / "precious").read_text() == "keep me" and (root / "0").is_symlink()
    assert (root / "9" / "precious").exists() and odd.is_dir() and not_ours.is_dir()
    assert files.current() == 3


@pytest.mark.soak  # 25 s; test_a_file_changed_while_read_fails_the_load (the put path) runs in make test
@pytest.mark.timeout(600)
def test_a_file_changed_during_the_spark_build_fails_the_load(files: Files, tmp_path: Path):
    """The Spark path compares the dataset's files before and after the build: a file rewritten while the
    job runs fails the load, no version is made, and the build's dir is removed (it was built from what
    is no longer there)."""
    from statectl.engine.adstore.common import SparkOptions
    from statectl.engine.adstore.files import FileLoadOptions, load_file
    from statectl.formats.adstore import KeyValueSpec

    files.load(write_csv(tmp_path / "v1.csv", 10))
    victim = write_csv(tmp_path / "data" / "d.csv", 500)

    class Rewriter(NullProgress):
        def note(self, message: str) -> None:
            super().note(message)
            if message.startswith("running the Spark build"):  # the job is about to read the files
                with open(victim, "a") as f:
                    f.write("id-late,late\n")

    opts = FileLoadOptions(victim, STORE, files.state, spec=KeyValueSpec(key_column="id", value_column="name"))
    with pytest.raises(DatasetError) as e:
        load_file(opts, progress=Rewriter(), spark=SparkOptions(master="local[2]"))
    assert str(victim) in str(e.value) and "changed size" in str(e.value)
    assert files.current() == 1 and files.numbers() == [1] and files.leftovers() == []
    assert not list((files.state / STORE).glob(".adstore-build-*"))
