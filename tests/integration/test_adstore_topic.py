"""statectl adstore load --topic (seed 003, unbounded datasets) end to end on a real Kafka-protocol broker
(Tansu), as real ``statectl`` processes: partitioned and broadcast stores, puts and tombstones, Samza's
SIDE-INPUT-OFFSETS, resume, the recovery table (created / resumed / rebuilt: damaged offsets, --max-age,
offsets off the topic), kills at random moments, --follow stopped by SIGTERM and Ctrl-C, and the error exits.

Every store is compared key for key with what was produced (tombstones applied)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import SIDE_INPUT_OFFSETS, read_offsets, write_offsets
from statectl.kafka.client import create_topic
from tests.tools.adstore_extractors import BAD_VALUE
from tests.tools.standby_helpers import (
    STATECTL,
    ChangelogWriter,
    apply_records,
    clean_env,
    cli,
    offsets_of,
    random_records,
    read_store,
    wait_until,
)

STORE = "members"
REPO = Path(__file__).resolve().parents[2]


class Topic:
    """A fresh topic of ``partitions`` on the shared broker, a writer per partition that remembers what it
    wrote, and a state dir."""

    def __init__(self, bootstrap: str, tmp: Path, partitions: int, *, linger_ms: int = 0, state: str = "state"):
        self.bootstrap, self.tmp = bootstrap, tmp
        self.name = f"adstore-{uuid.uuid4().hex[:10]}"
        assert create_topic(bootstrap, self.name, partitions=partitions)
        self.writers = [ChangelogWriter(bootstrap, self.name, p, linger_ms=linger_ms) for p in range(partitions)]
        self.state = tmp / state

    def store(self, p: int, state: Path | None = None) -> Path:
        return (state or self.state) / STORE / f"Partition_{p}"

    def expected(self, p: int) -> dict[bytes, bytes]:
        return apply_records(self.writers[p].records())

    def key(self, p: int) -> str:
        return f"kafka.{self.name}.{p}"

    def last(self, p: int) -> int:
        return self.writers[p].last_offset

    def args(self, *extra: str, state: Path | None = None) -> list[str]:
        return ["adstore", "load", "--kafka", self.bootstrap, "--topic", self.name, "--store", STORE,
                "--state-dir", str(state or self.state), *extra]

    def load(self, *extra: str, code: int = 0, state: Path | None = None) -> subprocess.CompletedProcess:
        return cli(self.tmp, *self.args(*extra, state=state), code=code)

    def load_json(self, *extra: str, state: Path | None = None) -> dict:
        return json.loads(self.load(*extra, "-o", "json", state=state).stdout)

    def assert_exact(self, p: int, state: Path | None = None) -> None:
        store = self.store(p, state)
        assert read_store(store) == self.expected(p)
        assert offsets_of(store, SIDE_INPUT_OFFSETS) == {self.key(p): str(self.last(p))}

    def close(self) -> None:
        for w in self.writers:
            w.close()


@pytest.fixture
def topics(tansu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Make topics with ``topics(partitions)``; the statectl processes can import tests.tools (extractors)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    made: list[Topic] = []

    def make(partitions: int = 1, **kw) -> Topic:
        t = Topic(tansu.bootstrap, tmp_path, partitions, state=f"state-{len(made)}", **kw)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


HOLDER = """import sys, rocksdict
db = rocksdict.Rdict(sys.argv[1], rocksdict.Options(raw_mode=True))
print("ready", flush=True)
sys.stdin.read()
db.close()
"""


def store_files(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.iterdir()) if p.is_file()}


def debris(state: Path) -> list[str]:
    """Temporary dirs left beside the stores (staged rebuilds, replaced stores)."""
    return sorted(p.name for p in (state / STORE).iterdir() if p.name.startswith("."))


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


# -- partitioned and broadcast -------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_partitioned_load_then_resume(topics):
    t = topics(3)
    for p in range(3):
        t.writers[p].send(random_records(random.Random(p), 150, keys=60))
    r = t.load_json()
    assert r["topic"] == t.name
    assert r["records"] == 450 and r["skipped"] == 0
    assert r["offsets"] == {t.key(p): t.last(p) for p in range(3)}
    assert [(s["partitions"], s["case"], s["reason"], s["records"]) for s in r["stores"]] == \
        [([p], "created", None, 150) for p in range(3)]
    for p, s in enumerate(r["stores"]):
        assert s["store_dir"] == str(t.store(p))
        assert s["offsets"] == {t.key(p): t.last(p)}
        assert read_store(t.store(p)) == t.expected(p)
        # Samza's checksum-framed SIDE-INPUT-OFFSETS, read as Samza reads it
        assert read_offsets(t.store(p) / SIDE_INPUT_OFFSETS) == {SSP("kafka", t.name, p): str(t.last(p))}
    assert sum(len(t.expected(p)) for p in range(3)) > 0
    assert debris(t.state) == []

    t.writers[0].send(random_records(random.Random(10), 40, keys=60))
    t.writers[2].send(random_records(random.Random(12), 25, keys=60))
    r = t.load_json()
    assert [(s["case"], s["reason"], s["records"]) for s in r["stores"]] == \
        [("resumed", None, 40), ("resumed", None, 0), ("resumed", None, 25)]
    assert r["records"] == 65
    for p in range(3):
        t.assert_exact(p)
    # nothing new: nothing applied, offsets unchanged
    r = t.load_json()
    assert r["records"] == 0 and {s["case"] for s in r["stores"]} == {"resumed"}
    for p in range(3):
        t.assert_exact(p)


@pytest.mark.timeout(120)
def test_partitioned_load_of_chosen_partitions_and_text_output(topics):
    t = topics(3)
    for p in range(3):
        t.writers[p].send(random_records(random.Random(20 + p), 30, keys=20))
    out = t.load("--partitions", "0,2").stdout
    assert f"{t.store(0)}: created; 30 records; offsets {t.key(0)}={t.last(0)}" in out
    assert "loaded 60 records" in out and t.name in out
    assert not t.store(1).exists()
    t.assert_exact(0)
    t.assert_exact(2)
    r = t.load("--partitions", "5", code=10)
    assert "partition 5" in error_line(r.stderr)


@pytest.mark.timeout(120)
def test_broadcast_with_key_and_value_fields(topics):
    t = topics(3)
    expected: dict[bytes, bytes] = {}
    for p in range(3):
        records = []
        for i in range(40):
            ident = i * 3 + p  # each id lives in one partition: the order across partitions does not matter
            name = {"first": f"n{ident}-{i % 4}", "tags": [p, i]}
            records.append((b"k%d" % i, json.dumps({"id": ident, "profile": name}).encode()))
            expected[str(ident).encode()] = json.dumps(name, separators=(",", ":")).encode()
        t.writers[p].send(records)
        # an overwrite of an id, and a tombstone (no value to find its key in: skipped, as documented)
        t.writers[p].send([(b"x", json.dumps({"id": p, "profile": "again"}).encode()), (b"k0", None)])
        expected[str(p).encode()] = b"again"
    r = t.load_json("--broadcast", "--key-field", "id", "--value-field", "profile")
    [s] = r["stores"]
    assert s["store_dir"] == str(t.store(0)) and s["partitions"] == [0, 1, 2] and s["case"] == "created"
    assert r["skipped"] == 3 and r["records"] == 3 * 41
    assert read_store(t.store(0)) == expected
    assert offsets_of(t.store(0), SIDE_INPUT_OFFSETS) == {t.key(p): str(t.last(p)) for p in range(3)}
    assert sorted(p.name for p in (t.state / STORE).iterdir()) == ["Partition_0", "Partition_0.adstore.lock"]


@pytest.mark.timeout(120)
def test_a_broadcast_store_loaded_as_partitioned_is_rebuilt(topics):
    """Partition_0 of a broadcast load holds every partition: as the partitioned store of partition 0 it
    must not keep the others' keys (nor forget, by rewriting its offsets, that it holds them)."""
    t = topics(2)
    t.writers[0].send([(b"p0-%d" % i, b"v") for i in range(10)])
    t.writers[1].send([(b"p1-%d" % i, b"v") for i in range(10)])
    t.load("--broadcast")
    assert len(read_store(t.store(0))) == 20
    r = t.load_json()
    assert r["stores"][0]["case"] == "rebuilt" and "holds partition 1 of" in r["stores"][0]["reason"], r
    t.assert_exact(0)
    t.assert_exact(1)
    # back to broadcast: the partitioned store of partition 0 is a prefix of it, completed
    r = t.load_json("--broadcast")
    assert r["stores"][0]["case"] == "resumed"
    assert read_store(t.store(0)) == {**t.expected(0), **t.expected(1)}
    # a broadcast load of fewer partitions than the store holds
    r = t.load_json("--broadcast", "--partitions", "1")
    assert r["stores"][0]["case"] == "rebuilt"
    assert read_store(t.store(0)) == t.expected(1)
    assert offsets_of(t.store(0), SIDE_INPUT_OFFSETS) == {t.key(1): str(t.last(1))}


@pytest.mark.timeout(120)
def test_extractor_function_and_class(topics):
    t = topics(2)
    for p in range(2):
        t.writers[p].send([(b"a%d" % p, b"hello"), (b"b%d" % p, None), (None, b"keyless"), (b"a%d" % p, b"bye")])
    r = t.load_json("--extractor", "tests.tools.adstore_extractors:upper")
    assert r["skipped"] == 2 and r["records"] == 6
    for p in range(2):
        assert read_store(t.store(p)) == {b"a%d" % p: b"BYE"}
    t2 = topics(1)
    t2.writers[0].send([(None, json.dumps({"id": i, "name": f"n{i}"}).encode()) for i in range(5)])
    t2.load("--broadcast", "--extractor", "tests.tools.adstore_extractors:ById")
    assert read_store(t2.store(0)) == {str(i).encode(): f"n{i}".encode() for i in range(5)}
    r = t2.load("--extractor", "tests.tools.adstore_extractors:nothing_here", code=2, state=t2.tmp / "other")
    assert "has no nothing_here" in error_line(r.stderr)
    r = t2.load("--extractor", "nocolon", code=2, state=t2.tmp / "other")
    assert "not module:callable" in error_line(r.stderr)


# -- killed at random moments ------------------------------------------------------------------------


# SIGKILL trials of a topic load; make soak runs more (STATECTL_ADSTORE_KILLS)
KILL_TRIALS = int(os.environ.get("STATECTL_ADSTORE_KILLS", "5"))


@pytest.mark.timeout(300)
def test_resume_after_sigkill_at_random_moments(topics):
    t = topics(2, linger_ms=20)
    rng = random.Random(20260611)
    for p in range(2):
        prng = random.Random(100 + p)
        records = [(b"key-%05d" % prng.randrange(20_000), None if prng.random() < 0.1 else prng.randbytes(8))
                   for _ in range(75_000)]
        for i in range(0, len(records), 25_000):
            t.writers[p].send(records[i:i + 25_000])
    expected = [t.expected(p) for p in range(2)]
    began = time.monotonic()  # a whole load, to aim the kills inside one whatever this machine's speed
    t.load(state=t.tmp / "state-whole")
    whole = time.monotonic() - began
    cases: list[str] = []
    kills = 0
    for trial in range(KILL_TRIALS):
        state = t.tmp / f"state-{trial}"
        for kill in range(1 + trial % 2):  # some trials are killed twice before they may finish
            err = t.tmp / f"kill-{trial}-{kill}.err"
            with open(err, "wb") as fh:
                proc = subprocess.Popen([STATECTL, *t.args(state=state)], env=clean_env(t.tmp), cwd=t.tmp,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh)
            try:
                if rng.random() < 0.5:  # after its first flush: the next run resumes from the offsets
                    wait_until(lambda proc=proc, state=state: (t.store(0, state) / SIDE_INPUT_OFFSETS).exists()
                               or proc.poll() is not None, 60, "the first flush")
                    time.sleep(rng.uniform(0.0, 0.25 * whole))
                else:  # anywhere from its start (imports, connecting, the first batches)
                    time.sleep(rng.uniform(0.1, 0.7) * whole)
            finally:
                proc.kill()
                proc.wait(30)
            assert proc.returncode in (-signal.SIGKILL, 0), err.read_text()
            kills += proc.returncode == -signal.SIGKILL
            for p in range(2):  # the offsets never claim more than was produced
                offsets = offsets_of(t.store(p, state), SIDE_INPUT_OFFSETS) or {}
                assert all(int(v) <= t.last(p) for v in offsets.values() if v is not None), offsets
        r = t.load_json("--partitions", "0-1", state=state)
        cases += [s["case"] for s in r["stores"]]
        for p in range(2):
            assert read_store(t.store(p, state)) == expected[p], f"trial {trial} partition {p}: {r}"
            assert offsets_of(t.store(p, state), SIDE_INPUT_OFFSETS) == {t.key(p): str(t.last(p))}
        assert r["offsets"] == {t.key(p): t.last(p) for p in range(2)}
        assert debris(state) == []
    assert kills >= (2 * sum(1 + k % 2 for k in range(KILL_TRIALS)) + 2) // 3, kills  # most landed while it ran
    assert "resumed" in cases, cases  # some after a flush: the next run went on from the offsets


# -- follow ----------------------------------------------------------------------------------------


def _start(t: Topic, *extra: str) -> tuple[subprocess.Popen, Path, Path]:
    out, err = t.tmp / f"follow-{uuid.uuid4().hex[:6]}.out", t.tmp / f"follow-{uuid.uuid4().hex[:6]}.err"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen([STATECTL, *t.args("--follow", *extra)], env=clean_env(t.tmp), cwd=t.tmp,
                                stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
    return proc, out, err


def _reaches(t: Topic, proc: subprocess.Popen, err: Path) -> None:
    def done() -> bool:
        assert proc.poll() is None, err.read_text()
        return all(offsets_of(t.store(p), SIDE_INPUT_OFFSETS) == {t.key(p): str(t.last(p))}
                   for p in range(len(t.writers)))

    wait_until(done, 60, "the follower applies every record")


@pytest.mark.timeout(120)
def test_follow_until_sigterm_then_ctrl_c(topics):
    t = topics(2)
    for p in range(2):
        t.writers[p].send(random_records(random.Random(30 + p), 100, keys=50))
    proc, out, err = _start(t, "-o", "json")
    try:
        _reaches(t, proc, err)
        for p in range(2):
            t.writers[p].send(random_records(random.Random(40 + p), 60, keys=50))
        _reaches(t, proc, err)
        t.writers[1].send(random_records(random.Random(42), 30, keys=50))
        _reaches(t, proc, err)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, err.read_text()
    finally:
        proc.kill()
    r = json.loads(out.read_text())
    assert r["records"] == 100 + 100 + 60 + 90
    assert r["offsets"] == {t.key(p): t.last(p) for p in range(2)}
    for p in range(2):
        t.assert_exact(p)

    proc, out, err = _start(t)
    try:
        t.writers[0].send(random_records(random.Random(50), 20, keys=50))
        _reaches(t, proc, err)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, err.read_text()
    finally:
        proc.kill()
    assert "resumed" in out.read_text()
    for p in range(2):
        t.assert_exact(p)


@pytest.mark.timeout(120)
def test_sigterm_before_the_bootstrap_ends_exits_130_and_the_next_load_resumes(topics):
    """A load stopped before it reached the end offsets must not look loaded to a script: exit 130, what
    it applied recorded; the next load resumes and completes it."""
    t = topics(2)
    for p in range(2):
        t.writers[p].send(random_records(random.Random(60 + p), 1500, keys=1000))
    proc = subprocess.Popen([STATECTL, *t.args("--extractor", "tests.tools.adstore_extractors:slow", "-o", "json")],
                            env=clean_env(t.tmp), cwd=t.tmp, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:  # partition 0 is loaded (its store's offsets written); partition 1 takes 3 s more
        wait_until(lambda: offsets_of(t.store(0), SIDE_INPUT_OFFSETS) is not None, 60, "partition 0 loaded")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    r = json.loads(out)
    assert r["bootstrapped"] is False and r["records"] < 3000
    again = t.load_json()
    assert again["bootstrapped"] is True and [s["case"] for s in again["stores"]] == ["resumed", "resumed"]
    assert again["records"] + r["records"] == 3000
    for p in range(2):
        t.assert_exact(p)


# -- the recovery table ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_extractor_error_on_one_record(topics):
    t = topics(2)
    t.writers[0].send(random_records(random.Random(60), 50, keys=30))
    t.writers[1].send(random_records(random.Random(61), 30, keys=30))
    [bad] = t.writers[1].send([(b"poisoned", BAD_VALUE)])
    t.writers[1].send(random_records(random.Random(62), 20, keys=30))
    args = ("--extractor", "tests.tools.adstore_extractors:fails_on_poison")
    r = t.load(*args, code=1)
    line = error_line(r.stderr)
    assert f"topic {t.name} partition 1 offset {bad}" in line and "RuntimeError: cannot handle this value" in line
    t.assert_exact(0)
    before = [rec for rec in t.writers[1].records() if rec[0] < bad]
    assert read_store(t.store(1)) == apply_records(before)
    assert offsets_of(t.store(1), SIDE_INPUT_OFFSETS) == {t.key(1): str(bad - 1)}
    # the next load resumes at that record, and stops there again
    r = t.load(*args, code=1)
    assert f"partition 1 offset {bad}" in error_line(r.stderr)
    assert read_store(t.store(1)) == apply_records(before)
    assert offsets_of(t.store(1), SIDE_INPUT_OFFSETS) == {t.key(1): str(bad - 1)}
    # a store being rebuilt (its offsets file damaged) that meets the record is left as it was
    (t.store(1) / SIDE_INPUT_OFFSETS).write_bytes(b"garbage")
    files = store_files(t.store(1))
    r = t.load(*args, code=1)
    assert f"partition 1 offset {bad}" in error_line(r.stderr)
    assert store_files(t.store(1)) == files and read_store(t.store(1)) == apply_records(before)
    assert debris(t.state) == []
    # without the extractor, the record is just bytes
    t.load()
    t.assert_exact(1)


@pytest.mark.timeout(120)
def test_invalid_stores_are_rebuilt(topics):
    t = topics(1)
    t.writers[0].send(random_records(random.Random(70), 200, keys=80))
    t.load()
    store = t.store(0)

    def rebuilt(*extra: str) -> str:
        r = t.load_json(*extra)
        [s] = r["stores"]
        assert s["case"] == "rebuilt" and r["records"] == 200 + extra_records[0], r
        t.assert_exact(0)
        assert debris(t.state) == []
        return s["reason"]

    extra_records = [0]
    # a damaged offsets file (garbage bytes), with a store that lost a key meanwhile
    (store / SIDE_INPUT_OFFSETS).write_bytes(b"\x00garbage\xff" * 7)
    reason = rebuilt()
    assert SIDE_INPUT_OFFSETS in reason and "damaged" in reason
    # stale: every file and the dir an hour old
    old = time.time() - 3600
    for p in [*store.iterdir(), store]:
        os.utime(p, (old, old))
    r = t.load_json("--max-age", "2h")  # not stale for 2 hours
    assert r["stores"][0]["case"] == "resumed"
    for p in [*store.iterdir(), store]:
        os.utime(p, (old, old))
    reason = rebuilt("--max-age", "1s")
    assert "stale" in reason and "--max-age 1s" in reason
    # offsets beyond the end of the partition (the topic was recreated, say)
    write_offsets(store / SIDE_INPUT_OFFSETS, {SSP("kafka", t.name, 0): str(t.last(0) + 1000)})
    reason = rebuilt()
    assert "fell off the topic" in reason
    # no offsets file at all: not provably this load's store (a job's own, say): refused, untouched
    (store / SIDE_INPUT_OFFSETS).unlink()
    files = store_files(store)
    r = t.load(code=2)
    assert f"no {SIDE_INPUT_OFFSETS}" in error_line(r.stderr) and "Hint: " in r.stderr
    assert store_files(store) == files
    write_offsets(store / SIDE_INPUT_OFFSETS, {SSP("kafka", t.name, 0): str(t.last(0))})
    t.writers[0].send(random_records(random.Random(71), 10, keys=80))
    extra_records[0] = 10
    # a store dir whose RocksDB files are gone
    for p in store.iterdir():
        if p.name != SIDE_INPUT_OFFSETS:
            p.unlink()
    reason = rebuilt()
    assert "damaged" in reason


# -- error exits -------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_store_held_by_another_process(topics):
    t = topics(1)
    t.writers[0].send(random_records(random.Random(80), 50, keys=30))
    t.load()
    t.writers[0].send(random_records(random.Random(81), 10, keys=30))
    store = t.store(0)
    content, offsets = read_store(store), (store / SIDE_INPUT_OFFSETS).read_bytes()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = t.load(code=11)
        line = error_line(r.stderr)
        assert str(store) in line and f"process {holder.pid}" in line
        r = t.load("--max-age", "1s", code=11)  # never rebuilt under its holder either
        assert read_store(store) == content
        assert (store / SIDE_INPUT_OFFSETS).read_bytes() == offsets
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert debris(t.state) == []
    t.load()
    t.assert_exact(0)


@pytest.mark.timeout(120)
def test_missing_topic_foreign_offsets_and_unreachable_brokers(topics, tmp_path: Path):
    t = topics(1)
    t.writers[0].send(random_records(random.Random(90), 20, keys=10))
    r = cli(tmp_path, "adstore", "load", "--kafka", t.bootstrap, "--topic", f"no-such-{uuid.uuid4().hex[:6]}",
            "--store", STORE, "--state-dir", str(t.state), code=10)
    assert "does not exist" in error_line(r.stderr)
    assert not t.state.exists()

    t.load()
    store = t.store(0)
    write_offsets(store / SIDE_INPUT_OFFSETS, {SSP("kafka", "another-topic", 0): "3"})
    files = store_files(store)
    r = t.load(code=2)
    line = error_line(r.stderr)
    assert "kafka.another-topic.0" in line and t.name in line
    assert store_files(store) == files

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # (STATECTL_TIMEOUT bounds the load's wait for its brokers: 2 s, not the default 15)
    r = cli(tmp_path, "adstore", "load", "--kafka", f"127.0.0.1:{port}", "--topic", t.name, "--store", STORE,
            "--state-dir", str(tmp_path / "elsewhere"), code=1, env={"STATECTL_TIMEOUT": "2s"})
    line = error_line(r.stderr)
    assert f"127.0.0.1:{port}" in line
    assert not (tmp_path / "elsewhere").exists()


def _disk_blocks(dirs: list[Path]) -> tuple[int, int]:
    """(bytes on disk counting each inode once, bytes of the files as they look) over ``dirs``."""
    seen: dict[int, int] = {}
    apparent = 0
    for d in dirs:
        for f in d.rglob("*"):
            if f.is_file():
                st = f.stat()
                seen[st.st_ino] = st.st_blocks * 512
                apparent += st.st_size
    return sum(seen.values()), apparent


@pytest.mark.timeout(180)
def test_a_broadcast_store_for_4_tasks_uses_the_disk_space_of_one(topics):
    """Samza keeps a broadcast side input as one store per task, each with every partition: --tasks fills
    each task's dir, the first loaded, the others hard-linked from it."""
    t = topics(3)
    for p in range(3):
        t.writers[p].send([(b"p%d-%05d" % (p, i), os.urandom(200)) for i in range(3000)])
    tasks = [f"Partition {k}" for k in range(4)]
    r = t.load_json("--broadcast", "--tasks", ",".join(tasks))
    assert [(s["task"], s["case"]) for s in r["stores"]] == [("Partition 0", "created")] + [
        (task, "cloned") for task in tasks[1:]]
    expected = {**t.expected(0), **t.expected(1), **t.expected(2)}
    offsets = {t.key(p): str(t.last(p)) for p in range(3)}
    dirs = [t.store(k) for k in range(4)]
    for d in dirs:
        assert read_store(d) == expected, d
        assert offsets_of(d, SIDE_INPUT_OFFSETS) == offsets == offsets_of(d, "OFFSET-v2")
    on_disk, apparent = _disk_blocks(dirs)
    one, _ = _disk_blocks(dirs[:1])
    assert apparent > 3.5 * one  # four stores' worth of files...
    assert on_disk < 1.3 * one   # ...on the disk space of one (SST files shared by hard links)
    # more records: a rerun resumes the first and links the others again, still one store's space
    for p in range(3):
        t.writers[p].send([(b"p%d-new-%03d" % (p, i), b"v") for i in range(50)])
    r = t.load_json("--broadcast", "--tasks", ",".join(tasks))
    assert r["stores"][0]["case"] == "resumed" and r["records"] == 150
    expected = {**t.expected(0), **t.expected(1), **t.expected(2)}
    for d in dirs:
        assert read_store(d) == expected, d
    assert _disk_blocks(dirs)[0] < 1.3 * _disk_blocks(dirs[:1])[0]
    assert debris(t.state) == []


def test_broadcast_copies_never_replace_what_adstore_did_not_make(topics):
    t = topics(1)
    t.writers[0].send([(b"k", b"v")])
    t.store(2).mkdir(parents=True)
    (t.store(2) / "precious.txt").write_text("mine")
    p = t.load("--broadcast", "--tasks", "Partition 0,Partition 1,Partition 2", code=2)
    assert "did not make" in error_line(p.stderr)
    assert (t.store(2) / "precious.txt").read_text() == "mine"
    assert not t.store(0).exists() and not t.store(1).exists()  # refused before anything was written


@pytest.mark.timeout(120)
def test_a_store_given_partitions_it_did_not_hold(topics):
    """A partition the store's last load did not give it (Kafka only adds partitions; Tansu cannot, so a
    load of fewer stands in for the older topic): loaded from its start and said so, the others resumed,
    nothing lost or rebuilt."""
    t = topics(3)
    for p in range(3):
        t.writers[p].send([(b"p%d-%d" % (p, i), b"v") for i in range(20 + p)])
    t.load("--broadcast", "--partitions", "0,1")
    t.writers[0].send([(b"p0-more", b"v")])
    p = t.load("--broadcast", "-o", "json")
    [s] = json.loads(p.stdout)["stores"]
    assert s["case"] == "resumed" and "partition 2 of" in s["reason"] and "new since it was loaded" in p.stderr
    assert read_store(t.store(0)) == {**t.expected(0), **t.expected(1), **t.expected(2)}
    assert offsets_of(t.store(0), SIDE_INPUT_OFFSETS) == {t.key(k): str(t.last(k)) for k in range(3)}
    assert json.loads(p.stdout)["records"] == 1 + 22  # the new record of 0, and all of partition 2
