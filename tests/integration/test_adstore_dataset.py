"""statectl adstore load --topic --dataset-versions (seed 003, "Bounded dataset": versions delivered in a
stream, each ended by an end-of-dataset marker) as real processes on a real Kafka-protocol broker (Tansu):
versions sealed and switched to at their markers, switch / rollback, per-task sealing of a partitioned and
a broadcast dataset, kill -9 mid-version then resume, --follow, and the refused markers (no version
started, an older version, garbage). Every version is compared key for key with the records produced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from statectl.engine.adstore.dataset import CURSOR, END_MARKER_HEADER
from statectl.formats.adstore import MANIFEST
from statectl.kafka.client import create_topic
from tests.tools.standby_helpers import STATECTL, clean_env, cli, read_store, wait_until

STORE = "dataset"


class DatasetTopic:
    """A fresh topic on the shared broker and a producer that can write markers (header or key)."""

    def __init__(self, bootstrap: str, tmp: Path, partitions: int = 1):
        from kafka import KafkaProducer

        self.bootstrap, self.tmp = bootstrap, tmp
        self.name = f"dataset-{uuid.uuid4().hex[:10]}"
        assert create_topic(bootstrap, self.name, partitions=partitions)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self.state = tmp / "state"

    def send(self, p: int, records: list[tuple[bytes, bytes | None]]) -> None:
        futures = [self.producer.send(self.name, key=k, value=v, partition=p) for k, v in records]
        self.producer.flush()
        for f in futures:
            f.get(timeout=60)

    def marker(self, p: int, value: bytes, *, key: bytes | None = None) -> None:
        if key is not None:
            f = self.producer.send(self.name, key=key, value=value, partition=p)
        else:
            f = self.producer.send(self.name, key=None, value=b"", partition=p,
                                   headers=[(END_MARKER_HEADER, value)])
        self.producer.flush()
        f.get(timeout=60)

    def store(self, p: int = 0) -> Path:
        return self.state / STORE / f"Partition_{p}"

    def versions_dir(self, p: int = 0) -> Path:
        return self.state / STORE / f"Partition_{p}.versions"

    def current(self, p: int = 0) -> int | None:
        s = self.store(p)
        return int(os.readlink(s).rsplit("/", 1)[1]) if os.path.islink(s) else None

    def numbers(self, p: int = 0) -> list[int]:
        d = self.versions_dir(p)
        return sorted(int(x.name) for x in d.iterdir() if x.name.isdigit()) if d.is_dir() else []

    def manifest(self, number: int, p: int = 0) -> dict:
        return json.loads((self.versions_dir(p) / str(number) / MANIFEST).read_text())

    def args(self, *extra: str) -> list[str]:
        return ["adstore", "load", "--kafka", self.bootstrap, "--topic", self.name, "--store", STORE,
                "--state-dir", str(self.state), "--dataset-versions", *extra]

    def load(self, *extra: str, code: int = 0) -> subprocess.CompletedProcess:
        return cli(self.tmp, *self.args(*extra), code=code)

    def load_json(self, *extra: str, code: int = 0) -> dict:
        return json.loads(self.load(*extra, "-o", "json", code=code).stdout)

    def where(self, p: int = 0) -> list[str]:
        return ["--store", STORE, "--state-dir", str(self.state), "--task", f"Partition {p}"]

    def close(self) -> None:
        self.producer.close(timeout=10)


@pytest.fixture
def dataset(tansu, tmp_path: Path):
    made: list[DatasetTopic] = []

    def make(partitions: int = 1) -> DatasetTopic:
        t = DatasetTopic(tansu.bootstrap, tmp_path / f"t{len(made)}", partitions)
        t.tmp.mkdir(parents=True, exist_ok=True)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def entries(tag: str, n: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    return [(b"k-%04d" % i, f"{tag}-{i}".encode()) for i in range(start, start + n)]


def as_dict(records: list[tuple[bytes, bytes | None]]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for k, v in records:
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def test_two_versions_in_one_topic_are_sealed_switched_and_rolled_back(dataset):
    t = dataset()
    v1 = entries("one", 300) + [(b"k-0007", None)]  # a delete inside a version applies to that version
    v2 = entries("two", 120, start=200)
    t.send(0, v1)
    t.marker(0, b"1")
    t.send(0, v2)
    t.marker(0, b"2")

    r = t.load_json()
    assert r["versions_sealed"] == 2 and r["version"] == 2, r
    (st,) = r["stores"]
    assert [(v["version"], v["dataset_version"], v["records"]) for v in st["sealed"]] == [(1, 1, 301), (2, 2, 120)]
    assert t.numbers() == [1, 2] and t.current() == 2
    assert read_store(t.versions_dir() / "1") == as_dict(v1)
    assert read_store(t.store()) == as_dict(v2)  # version 2 holds only its own records, not version 1's
    m = t.manifest(2)
    assert m["source"] == f"topic:{t.name}" and m["rows"] == 120 and m["keys"] == 120
    assert m["extra"]["topic"] == t.name and m["extra"]["partitions"] == [0]
    assert m["extra"]["offsets"] == {f"kafka.{t.name}.0": 302 + 120} and m["extra"]["dataset_version"] == 2
    assert t.manifest(1)["extra"]["offsets"] == {f"kafka.{t.name}.0": 301}

    listed = json.loads(cli(t.tmp, "adstore", "versions", *t.where(), "-o", "json").stdout)
    assert [(v["version"], v["current"], v["source"]) for v in listed["versions"]] == [
        (1, False, f"topic:{t.name}"), (2, True, f"topic:{t.name}")]
    back = json.loads(cli(t.tmp, "adstore", "switch", *t.where(), "-o", "json").stdout)
    assert back["version"] == 1 and back["previous"] == 2 and t.current() == 1
    assert read_store(t.store()) == as_dict(v1)
    cli(t.tmp, "adstore", "switch", *t.where(), "--version", "2")
    assert t.current() == 2 and read_store(t.store()) == as_dict(v2)

    again = t.load_json()  # nothing new: nothing rebuilt, nothing switched
    assert again["versions_sealed"] == 0 and again["version"] == 2 and t.numbers() == [1, 2]

    t.send(0, entries("three", 10))
    t.marker(0, b"3")
    r3 = t.load_json("--keep-versions", "2")
    assert r3["version"] == 3 and r3["stores"][0]["sealed"][0]["deleted_versions"] == [1]
    assert t.numbers() == [2, 3] and read_store(t.store()) == as_dict(entries("three", 10))


def test_a_rollback_is_not_undone_by_the_next_load(dataset):
    t = dataset()
    t.send(0, entries("one", 5))
    t.marker(0, b"1")
    t.send(0, entries("two", 6))
    t.marker(0, b"2")
    t.load()
    cli(t.tmp, "adstore", "switch", *t.where())
    assert t.current() == 1
    t.load()
    assert t.current() == 1  # the operator's rollback stands until a new version is sealed


def test_a_marker_key_instead_of_the_header(dataset):
    t = dataset()
    t.send(0, entries("one", 50))
    t.marker(0, b"7", key=b"__END__")
    t.send(0, entries("two", 3))
    r = t.load_json("--end-marker", "__END__")
    assert r["version"] == 1 and r["stores"][0]["sealed"][0]["dataset_version"] == 7
    assert r["stores"][0]["pending_records"] == 3  # the next version has no marker yet: not kept
    assert read_store(t.store()) == as_dict(entries("one", 50))
    assert b"__END__" not in read_store(t.store())


def test_partitioned_dataset_is_sealed_per_task_when_its_partitions_saw_the_marker(dataset):
    t = dataset(partitions=2)
    p0, p1 = entries("p0", 40), entries("p1", 30, start=100)
    t.send(0, p0)
    t.send(1, p1)
    t.marker(0, b"1")  # partition 1's marker has not come yet
    r = t.load_json()
    assert t.current(0) == 1 and read_store(t.store(0)) == as_dict(p0)
    assert t.current(1) is None and not t.store(1).exists()  # its task is not sealed yet
    assert {s["store_dir"]: s["pending_records"] for s in r["stores"]}[str(t.store(1).absolute())] == 30
    t.marker(1, b"1")
    t.load()
    assert t.current(1) == 1 and read_store(t.store(1)) == as_dict(p1)
    assert t.current(0) == 1 and t.numbers(0) == [1]  # version 1 of partition 0 is not rebuilt


def test_broadcast_dataset_is_sealed_only_when_every_partition_saw_the_marker(dataset):
    t = dataset(partitions=3)
    bdir = t.state / STORE / "Partition_0"
    parts = [entries(f"p{p}", 20, start=100 * p) for p in range(3)]
    for p in range(3):
        t.send(p, parts[p])
    t.marker(0, b"1")
    t.marker(1, b"1")
    t.send(0, entries("next", 5, start=900))  # after partition 0's marker: the next version
    r = t.load_json("--broadcast")
    assert r["versions_sealed"] == 0 and not os.path.lexists(bdir)
    t.marker(2, b"1")
    r = t.load_json("--broadcast")
    assert r["versions_sealed"] == 1
    want = {}
    for p in range(3):
        want.update(as_dict(parts[p]))
    assert read_store(bdir) == want  # not the record after partition 0's marker
    t.marker(1, b"2")
    t.marker(2, b"2")
    t.marker(0, b"2")
    r = t.load_json("--broadcast")
    assert r["version"] == 2 and read_store(bdir) == as_dict(entries("next", 5, start=900))


def test_kill_9_mid_version_then_resume_completes_it_with_exactly_its_records(dataset):
    t = dataset()
    v1 = entries("one", 100)
    t.send(0, v1)
    t.marker(0, b"1")
    v2 = []
    for chunk in range(6):  # several polls' worth of records, so the kill lands mid-version
        part = entries(f"two{chunk}", 400, start=chunk * 300)
        v2 += part
        t.send(0, part)
    t.marker(0, b"2")
    env = dict(clean_env(t.tmp), STATECTL_FAILPOINTS="adstore-apply=1*off->sleep:60")  # stalls mid-version 2
    proc = subprocess.Popen([STATECTL, *t.args()], env=env, cwd=t.tmp, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: t.current() == 1 and any(x.name.startswith(".building-")
                                                    for x in t.versions_dir().iterdir()), why="version 2 begun")
        time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert t.current() == 1 and t.numbers() == [1]  # the half-built version 2 is no version, never current
    assert read_store(t.store()) == as_dict(v1)
    assert any(x.name.startswith(".building-") for x in t.versions_dir().iterdir())

    r = t.load_json()
    assert [(v["version"], v["records"]) for v in r["stores"][0]["sealed"]] == [(2, len(v2))]
    assert t.current() == 2 and read_store(t.store()) == as_dict(v2)
    assert read_store(t.versions_dir() / "1") == as_dict(v1)  # never rebuilt
    assert not any(x.name.startswith(".building-") for x in t.versions_dir().iterdir())


def test_kill_between_seal_and_switch_is_completed_by_the_next_load(dataset):
    t = dataset()
    t.send(0, entries("one", 10))
    t.marker(0, b"1")
    env = dict(clean_env(t.tmp), STATECTL_FAILPOINTS="adstore-dataset-switch=kill")
    p = subprocess.run([STATECTL, *t.args()], env=env, cwd=t.tmp, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == -signal.SIGKILL
    assert t.numbers() == [1] and t.current() is None  # sealed, not current
    r = t.load_json()
    assert r["versions_sealed"] == 0 and r["version"] == 1 and t.numbers() == [1]  # switched to, not rebuilt
    assert read_store(t.store()) == as_dict(entries("one", 10))


def test_a_marker_with_no_version_started_is_refused_unless_allow_empty(dataset):
    t = dataset()
    t.send(0, entries("one", 10))
    t.marker(0, b"1")
    t.marker(0, b"2")  # no record since the previous marker
    t.send(0, entries("three", 4))
    t.marker(0, b"3")
    p = t.load("-o", "json", code=3)
    r = json.loads(p.stdout)
    assert [v["dataset_version"] for v in r["stores"][0]["sealed"]] == [1, 3]
    (refused,) = r["stores"][0]["refused"]
    assert refused["records"] == 0 and "without records" in refused["reason"]
    assert "refused" in p.stderr and "--allow-empty" in p.stderr
    assert t.current() == 2 and read_store(t.store()) == as_dict(entries("three", 4))
    assert json.loads((t.versions_dir() / CURSOR).read_text())["dataset_version"] == 3
    t.load()  # refused once: the next load does not meet it again

    u = dataset()
    u.send(0, entries("one", 3))
    u.marker(0, b"1")
    u.marker(0, b"2")
    r = u.load_json("--allow-empty")
    assert r["version"] == 2 and read_store(u.store()) == {}
    assert u.manifest(2)["keys"] == 0


def test_an_older_marker_and_garbage_markers_are_refused_and_nothing_is_lost(dataset):
    t = dataset()
    t.send(0, entries("one", 10))
    t.marker(0, b"5")
    t.load()
    assert t.current() == 1
    t.send(0, entries("stale", 7))
    t.marker(0, b"4")  # older than 5
    t.send(0, entries("junk", 3))
    t.marker(0, b"\xff\x00garbage")
    t.send(0, entries("neg", 2))
    t.marker(0, b"-1")
    t.send(0, entries("six", 8))
    t.marker(0, b"6")
    p = t.load("-o", "json", code=3)
    r = json.loads(p.stdout)
    reasons = [x["reason"] for x in r["stores"][0]["refused"]]
    assert len(reasons) == 3, reasons
    assert "not above version 5" in reasons[0] and "not a dataset version" in reasons[1]
    assert "not a dataset version" in reasons[2]
    assert [x["records"] for x in r["stores"][0]["refused"]] == [7, 3, 2]
    assert len(r["refused"]) == 3 and all(f"{t.name} partition 0 offset" in line for line in r["refused"])
    assert all(line in p.stderr for line in r["refused"])  # one line each, on stderr too
    assert "Traceback" not in p.stderr
    assert [v["dataset_version"] for v in r["stores"][0]["sealed"]] == [6]
    assert read_store(t.store()) == as_dict(entries("six", 8))  # the version after the bad ones is whole
    assert read_store(t.versions_dir() / "1") == as_dict(entries("one", 10))


def test_a_garbage_marker_leaves_the_current_version_untouched(dataset):
    t = dataset()
    t.send(0, entries("one", 10))
    t.marker(0, b"1")
    t.load()
    t.send(0, entries("two", 5))
    t.marker(0, b"two")
    p = t.load(code=3)
    assert t.current() == 1 and t.numbers() == [1] and read_store(t.store()) == as_dict(entries("one", 10))
    assert "'two'" in p.stderr and "is not a dataset version" in p.stderr


def test_follow_seals_each_new_version_as_its_marker_comes(dataset):
    t = dataset()
    t.send(0, entries("one", 10))
    t.marker(0, b"1")
    proc = subprocess.Popen([STATECTL, *t.args("--follow", "-o", "json")], env=clean_env(t.tmp), cwd=t.tmp,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: t.current() == 1, why="version 1 sealed")
        t.send(0, entries("two", 20))
        time.sleep(0.5)
        assert t.current() == 1  # records without their marker are not a version
        t.marker(0, b"2")
        wait_until(lambda: t.current() == 2, why="version 2 sealed by the follower")
        assert read_store(t.store()) == as_dict(entries("two", 20))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["versions_sealed"] == 2


def test_dataset_versions_refuse_a_topic_store_and_bad_flags(dataset):
    t = dataset()
    t.send(0, entries("one", 3))
    plain = ["adstore", "load", "--kafka", t.bootstrap, "--topic", t.name, "--store", STORE, "--state-dir",
             str(t.state)]
    cli(t.tmp, *plain)  # an unbounded topic store (a plain dir)
    p = t.load(code=2)
    assert "not a versioned adstore" in p.stderr and "Traceback" not in p.stderr
    p = cli(t.tmp, *plain, "--end-marker", "X", code=2)
    assert "--end-marker is for --dataset-versions" in p.stderr
    p = cli(t.tmp, *t.args("--spark"), code=2)
    assert "--dataset-versions" in p.stderr
    for spec, says in (("nocolon", "is not module:callable"), ("no_such_module_here:f", "cannot import")):
        p = cli(t.tmp, *t.args("--extractor", spec), "--state-dir", str(t.tmp / "other"), code=2)
        assert says in p.stderr and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 2


def test_a_store_loaded_partitioned_is_not_loaded_as_broadcast(dataset):
    t = dataset(partitions=2)
    t.send(0, entries("one", 4))
    t.marker(0, b"1")
    t.load()
    before = read_store(t.store(0))
    p = t.load("--broadcast", code=2)  # Partition_0 would hold partition 1 too
    assert "holds dataset versions of partition 0" in p.stderr and "Traceback" not in p.stderr
    assert t.current(0) == 1 and read_store(t.store(0)) == before


def test_a_record_that_cannot_be_extracted_fails_the_load_and_keeps_the_current_version(dataset):
    t = dataset()
    good = [(None, json.dumps({"id": f"u{i}", "n": i}).encode()) for i in range(5)]
    t.send(0, good)
    t.marker(0, b"1")
    t.send(0, good[:2] + [(None, b"not json")])
    t.marker(0, b"2")
    p = t.load("--key-field", "id", "--value-field", "n", code=1)
    assert "offset 8" in p.stderr and "cannot extract" in p.stderr and "Traceback" not in p.stderr
    assert t.current() == 1 and t.numbers() == [1]
    assert read_store(t.store()) == {f"u{i}".encode(): str(i).encode() for i in range(5)}
    assert not any(x.name.startswith(".building-") for x in t.versions_dir().iterdir())
    t.load("--key-field", "id", "--value-field", "n", code=1)  # the same record again: nothing skipped


def test_switch_rolls_back_while_follow_runs_and_a_second_loader_exits_11(dataset):
    t = dataset()
    t.send(0, entries("one", 10))
    t.marker(0, b"1")
    t.send(0, entries("two", 20))
    t.marker(0, b"2")
    proc = subprocess.Popen([STATECTL, *t.args("--follow")], env=clean_env(t.tmp), cwd=t.tmp,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: t.current() == 2, why="version 2 sealed")
        p = t.load(code=11)  # one loader per store
        assert "locked by process" in p.stderr
        cli(t.tmp, "adstore", "switch", *t.where())  # the follower holds no lock on the version chain meanwhile
        assert t.current() == 1 and read_store(t.store()) == as_dict(entries("one", 10))
        time.sleep(1)
        assert t.current() == 1  # the follower leaves the rollback alone...
        t.send(0, entries("three", 3))
        t.marker(0, b"3")
        wait_until(lambda: t.current() == 3, why="version 3 sealed")  # ...until the next version is sealed
        assert read_store(t.store()) == as_dict(entries("three", 3))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


@pytest.mark.timeout(240)
def test_a_really_full_disk_drops_the_version_being_built_and_keeps_the_current_one(dataset, small_disk):
    """The state dir on a 2 MiB tmpfs: RocksDB's own "IO error: No space left on device" (no OSError) is the
    disk-full error (exit 1), not an unexpected one."""
    t = dataset()
    t.state = small_disk(2)
    t.send(0, entries("one", 10))
    t.marker(0, b"1")
    t.load()
    t.send(0, [(b"k-%06d" % i, os.urandom(40)) for i in range(60_000)])  # more than the disk holds
    t.marker(0, b"2")
    r = t.load(code=1)
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "no space left on device" in errors[0], r.stderr
    assert "unexpected" not in r.stderr
    assert t.current() == 1 and t.numbers() == [1] and read_store(t.store()) == as_dict(entries("one", 10))
