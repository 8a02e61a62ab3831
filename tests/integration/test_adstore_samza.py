"""adstore against Samza's own rules (issue 19, seed 003) on the real Tansu broker and real dirs: the two
offset files TaskSideInputStorageManager writes, an OFFSET-v2 left by an earlier Samza run, ``adstore
status``'s prediction of what Samza's next start does (StorageManagerUtil.isStaleStore / isOffsetFileValid),
the job's config and job model from its coordinator stream, and one store fed by several streams."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, read_offsets, write_side_input_offsets
from statectl.kafka.client import create_topic
from tests.tools.standby_helpers import (
    STATECTL,
    ChangelogWriter,
    apply_records,
    clean_env,
    cli,
    random_records,
    read_store,
    wait_until,
)

STORE = "members"
REPO = Path(__file__).resolve().parents[2]
DAY_S = 24 * 3600


def new_topic(bootstrap: str, partitions: int) -> tuple[str, list[ChangelogWriter]]:
    name = f"adsamza-{uuid.uuid4().hex[:10]}"
    assert create_topic(bootstrap, name, partitions=partitions)
    return name, [ChangelogWriter(bootstrap, name, p) for p in range(partitions)]


@pytest.fixture
def writers():
    made: list[ChangelogWriter] = []
    yield made
    for w in made:
        w.close()


def load(tmp: Path, bootstrap: str, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    return cli(tmp, "adstore", "load", "--kafka", bootstrap, "--store", STORE, *args, code=code)


def status(tmp: Path, *args: str, code: int = 0) -> dict:
    return json.loads(cli(tmp, "adstore", "status", "--store", STORE, *args, "-o", "json", code=code).stdout)


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# -- item 1: OFFSET-v2 and SIDE-INPUT-OFFSETS ------------------------------------------------------------


@pytest.mark.timeout(120)
def test_both_offset_files_are_written_with_the_same_bytes(tansu, tmp_path: Path, writers):
    topic, ws = new_topic(tansu.bootstrap, 3)
    writers += ws
    for p in (0, 2):  # partition 1 stays empty: no record yet, so no entry (Samza writes no nulls)
        ws[p].send(random_records(random.Random(p), 80, keys=30))
    state = tmp_path / "state"
    load(tmp_path, tansu.bootstrap, "--topic", topic, "--state-dir", str(state))
    for p in range(3):
        store = state / STORE / f"Partition_{p}"
        v2, side = (store / OFFSET_V2).read_bytes(), (store / SIDE_INPUT_OFFSETS).read_bytes()
        assert v2 == side
        expected = {} if p == 1 else {SSP("kafka", topic, p): str(ws[p].last_offset)}
        assert read_offsets(store / OFFSET_V2) == expected
        assert (store / OFFSET_V2).stat().st_mtime <= (store / SIDE_INPUT_OFFSETS).stat().st_mtime  # v2 first
        assert read_store(store) == apply_records(ws[p].records())
    # broadcast: one store holding every partition, both files alike
    bstore = tmp_path / "bcast"
    load(tmp_path, tansu.bootstrap, "--topic", topic, "--broadcast", "--store-dir", str(bstore))
    assert (bstore / OFFSET_V2).read_bytes() == (bstore / SIDE_INPUT_OFFSETS).read_bytes()
    assert set(read_offsets(bstore / OFFSET_V2)) == {SSP("kafka", topic, 0), SSP("kafka", topic, 2)}


@pytest.mark.timeout(120)
def test_a_load_over_an_old_samza_offset_v2_resumes_from_statectls_offsets(tansu, tmp_path: Path, writers):
    topic, ws = new_topic(tansu.bootstrap, 1)
    writers += ws
    ws[0].send([(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)])
    state = tmp_path / "state"
    store = state / STORE / "Partition_0"
    load(tmp_path, tansu.bootstrap, "--topic", topic, "--state-dir", str(state))
    # an OFFSET-v2 left by an earlier Samza run, at offset 9, older than what statectl applied (49)
    from statectl.formats.offsets import write_offsets

    write_offsets(store / OFFSET_V2, {SSP("kafka", topic, 0): "9"})
    ws[0].send([(f"n{i}".encode(), f"w{i}".encode()) for i in range(5)])
    r = load(tmp_path, tansu.bootstrap, "--topic", topic, "--state-dir", str(state), "-o", "json")
    out = json.loads(r.stdout)
    # resumed after 49 (statectl's SIDE-INPUT-OFFSETS), not after 9: only the 5 new records applied
    assert out["stores"][0]["case"] == "resumed" and out["records"] == 5, out
    assert OFFSET_V2 in r.stderr and "differs" in r.stderr
    assert read_offsets(store / OFFSET_V2) == {SSP("kafka", topic, 0): "54"}
    assert (store / OFFSET_V2).read_bytes() == (store / SIDE_INPUT_OFFSETS).read_bytes()
    assert read_store(store) == apply_records(ws[0].records())


# -- item 2: adstore status ------------------------------------------------------------------------------


def by_dir(r: dict) -> dict[str, dict]:
    return {Path(s["store_dir"]).name: s for s in r["stores"]}


@pytest.mark.timeout(120)
def test_status_predicts_keep_stale_and_mismatched(tansu, tmp_path: Path, writers):
    topic, ws = new_topic(tansu.bootstrap, 3)
    writers += ws
    ws[0].send([(b"a", b"1"), (b"b", b"2")])
    ws[1].send([(b"c", b"3")])
    state = tmp_path / "state"
    r = load(tmp_path, tansu.bootstrap, "--topic", topic, "--state-dir", str(state))
    # partition 2 has no record: its offset files are empty, and Samza deletes such a store: the load says so
    assert "Partition_2: Samza's next start would delete this store (delete-mismatched" in r.stderr, r.stderr
    assert "Partition_0: Samza" not in r.stderr
    out = status(tmp_path, "--state-dir", str(state), code=14)
    s = by_dir(out)
    assert [s[f"Partition_{p}"]["action"] for p in range(3)] == ["keep", "keep", "delete-mismatched"]
    assert s["Partition_0"]["offsets"] == {f"kafka.{topic}.0": "1"} and s["Partition_0"]["offset_file"] == OFFSET_V2
    assert s["Partition_0"]["expected"] == [f"kafka.{topic}.0"] and s["Partition_0"]["expected_from"] == "store"
    assert 0 <= s["Partition_0"]["age_s"] < 60
    assert out["deleted"] == 1 and out["retention_ms"] == 24 * 3600 * 1000
    # stale: OFFSET-v2 decides (Samza reads its mtime first), 1 day is enough (>=)
    p0 = state / STORE / "Partition_0"
    old = time.time() - DAY_S - 5
    os.utime(p0 / OFFSET_V2, (old, old))
    s = by_dir(status(tmp_path, "--state-dir", str(state), code=14))
    assert s["Partition_0"]["action"] == "delete-stale" and s["Partition_0"]["age_file"] == OFFSET_V2
    assert "24h" in s["Partition_0"]["reason"]
    # ...and SIDE-INPUT-OFFSETS' mtime does not matter while OFFSET-v2 exists
    os.utime(p0 / OFFSET_V2, None)
    os.utime(p0 / SIDE_INPUT_OFFSETS, (old, old))
    assert by_dir(status(tmp_path, "--state-dir", str(state), code=14))["Partition_0"]["action"] == "keep"
    # a CHECKPOINT-V2 in the dir decides the age before OFFSET-v2 (StorageManagerUtil.isStaleStore)
    (p0 / "CHECKPOINT-V2").write_bytes(b"x")
    os.utime(p0 / "CHECKPOINT-V2", (old, old))
    s = by_dir(status(tmp_path, "--store-dir", str(p0), code=14))
    assert s["Partition_0"]["action"] == "delete-stale" and s["Partition_0"]["age_file"] == "CHECKPOINT-V2"
    (p0 / "CHECKPOINT-V2").unlink()
    # mismatched: offsets of another SSP too
    from statectl.formats.offsets import write_offsets

    write_offsets(p0 / OFFSET_V2, {SSP("kafka", topic, 0): "1", SSP("kafka", "other", 0): "5"})
    s = by_dir(status(tmp_path, "--store-dir", str(p0), code=14))
    assert s["Partition_0"]["action"] == "delete-mismatched" and "kafka.other.0" in s["Partition_0"]["reason"]
    # the next load rewrites both files from SIDE-INPUT-OFFSETS: kept again
    load(tmp_path, tansu.bootstrap, "--topic", topic, "--state-dir", str(state), "--partitions", "0,1")
    r = cli(tmp_path, "adstore", "status", "--store", STORE, "--state-dir", str(state), code=14)
    assert "Partition_0: keep" in r.stdout and "Partition_2: delete-mismatched" in r.stdout
    ws[2].send([(b"d", b"4")])
    load(tmp_path, tansu.bootstrap, "--topic", topic, "--state-dir", str(state))
    assert status(tmp_path, "--state-dir", str(state))["deleted"] == 0  # exit 0: every store is kept


# -- item 3: the job's config and job model -----------------------------------------------------------------

SERDES = {
    "serializers.registry.string.class": "org.apache.samza.serializers.StringSerdeFactory",
    "serializers.registry.json.class": "org.apache.samza.serializers.JsonSerdeV2Factory",
    "serializers.registry.int.class": "org.apache.samza.serializers.IntegerSerdeFactory",
}


def write_job(bootstrap: str, job: str, config: dict[str, str], tasks: list[str], *, checkpoints: bool = False) -> None:
    """The job's config and tasks on its coordinator stream; with ``checkpoints``, a v1 checkpoint of each task
    (spelled out as Samza writes it) and its config says so: its next start keeps the state dir."""
    from kafka import KafkaProducer

    from statectl.formats.checkpoint import checkpoint_topic
    from statectl.kafka.coordinator import CoordinatorStream

    if checkpoints:
        factory = "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory"
        config = {**config, "task.checkpoint.factory": factory}
        create_topic(bootstrap, checkpoint_topic(job, "1"), partitions=1)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        grouper = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
        for t in tasks:
            key = f'{{"systemstreampartition-grouper-factory":"{grouper}","taskName":"{t}","type":"checkpoint"}}'
            producer.send(checkpoint_topic(job, "1"), key=key.encode(), value=b"{}", partition=0).get(timeout=30)
        producer.close()
    with CoordinatorStream(bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config(config)
        for t in tasks:
            cs.write_task_container(t, "0")


@pytest.mark.timeout(180)
def test_load_takes_topics_serdes_and_partitions_from_the_job(tansu, tmp_path: Path, writers):
    a, wa = new_topic(tansu.bootstrap, 3)
    b, wb = new_topic(tansu.bootstrap, 2)  # task Partition 2 gets no partition of b
    writers += wa + wb
    for p in range(3):
        wa[p].send([(f"a{p}-{i}".encode(), json.dumps({"n": i, "x": 1.50}).encode()) for i in range(10)])
    for p in range(2):
        wb[p].send([(f"b{p}-{i}".encode(), b'  {"m" : [1, 2.0e3]}  ') for i in range(5)])
    wb[0].send([(b"bad-\xff", b'"s"')])  # a key that is not UTF-8: the string serde replaces it, as Java does
    job = f"job-{uuid.uuid4().hex[:6]}"
    config = {"systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
              f"stores.{STORE}.side.inputs": f"kafka.{a}", f"stores.{STORE}.adstore.input": f"kafka.{b}",
              f"stores.{STORE}.key.serde": "string", f"stores.{STORE}.msg.serde": "json", **SERDES}
    write_job(tansu.bootstrap, job, config, ["Partition 0", "Partition 1", "Partition 2"], checkpoints=True)
    state = tmp_path / "state"
    base = ["--job", job, "--state-dir", str(state)]
    out = json.loads(load(tmp_path, tansu.bootstrap, *base, "-o", "json").stdout)
    assert out["topics"] == [a, b]
    assert {s["task"]: sorted(s["offsets"]) for s in out["stores"]} == {
        "Partition 0": sorted([f"kafka.{a}.0", f"kafka.{b}.0"]), "Partition 1": sorted([f"kafka.{a}.1", f"kafka.{b}.1"]),
        "Partition 2": [f"kafka.{a}.2"]}
    p0 = read_store(state / STORE / "Partition_0")
    assert p0[b"a0-3"] == b'{"n":3,"x":1.5}'  # JsonSerdeV2's round trip: compact, 1.50 -> 1.5
    assert p0[b"b0-0"] == b'{"m":[1,2000.0]}'
    assert p0["bad-\ufffd".encode()] == b'"s"'
    assert len(read_store(state / STORE / "Partition_2")) == 10
    # status against the job: every store holds exactly its task's SSPs
    st = status(tmp_path, "--kafka", tansu.bootstrap, *base)
    assert [(s["task"], s["action"], s["expected_from"]) for s in st["stores"]] == [
        (f"Partition {k}", "keep", "job") for k in range(3)]
    # flags override: the value bytes as they are, one topic only
    state2 = tmp_path / "state2"
    out = json.loads(load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(state2), "--topic", a,
                          "--value-serde", "byte-array", "-o", "json").stdout)
    assert out["topics"] == [a] and len(out["stores"]) == 3
    assert read_store(state2 / STORE / "Partition_0")[b"a0-3"] == json.dumps({"n": 3, "x": 1.50}).encode()
    # ...and such a store is not what the job's next start expects (b's partitions missing): exit 14
    st = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state2), code=14)
    assert [s["action"] for s in st["stores"]] == ["delete-mismatched", "delete-mismatched", "keep"]
    assert f"no offset for kafka.{b}.0" in st["stores"][0]["reason"]


@pytest.mark.timeout(180)
def test_job_configs_statectl_cannot_honour_are_one_line_errors(tansu, tmp_path: Path, writers,
                                                                monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the statectl processes import tests.tools (extractors)
    a, wa = new_topic(tansu.bootstrap, 1)
    writers += wa
    wa[0].send([(b"k", b"\x00\x00\x00\x07"), (b"k2", b"\x01")])
    state = tmp_path / "state"

    def job_with(extra: dict[str, str]) -> str:
        job = f"job-{uuid.uuid4().hex[:6]}"
        write_job(tansu.bootstrap, job, {f"stores.{STORE}.side.inputs": f"kafka.{a}", **SERDES, **extra},
                  ["Partition 0"])
        return job

    job = job_with({f"stores.{STORE}.side.inputs.processor.factory": "com.example.MyProcessorFactory"})
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(state), code=2)
    assert f"stores.{STORE}.side.inputs.processor.factory=com.example.MyProcessorFactory" in error_line(r.stderr)
    assert not state.exists()  # nothing written
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(state), "--extractor",
             "tests.tools.adstore_extractors:upper")
    job = job_with({f"stores.{STORE}.msg.serde": "avro", "serializers.registry.avro.class": "com.example.AvroSerdeFactory"})
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(tmp_path / "s2"), code=2)
    assert "serializers.registry.avro.class=com.example.AvroSerdeFactory" in error_line(r.stderr)
    job = job_with({f"stores.{STORE}.msg.serde": "nope"})
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(tmp_path / "s2"), code=2)
    assert f"stores.{STORE}.msg.serde=nope" in error_line(r.stderr)
    # garbage bytes for the serde: the integer serde needs 4 bytes; what came before stays, with its offsets
    job = job_with({f"stores.{STORE}.msg.serde": "int"})
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(tmp_path / "s3"), code=1)
    line = error_line(r.stderr)
    assert f"topic {a} partition 0 offset 1" in line and "integer" in line, line
    store = tmp_path / "s3" / STORE / "Partition_0"
    assert read_store(store) == {b"k": b"\x00\x00\x00\x07"}
    assert read_offsets(store / OFFSET_V2) == {SSP("kafka", a, 0): "0"}
    r = load(tmp_path, tansu.bootstrap, "--job", "no-such-job", "--state-dir", str(tmp_path / "s4"), code=10)
    assert "coordinator stream" in error_line(r.stderr)
    r = load(tmp_path, tansu.bootstrap, "--topic", a, "--state-dir", str(tmp_path / "s4"), "--key-serde", "uuid",
             code=2)
    assert "--key-serde" in error_line(r.stderr)


# -- item 4: one store, several streams -------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_two_topics_into_one_store_killed_and_resumed_per_ssp(tansu, tmp_path: Path, writers):
    a, wa = new_topic(tansu.bootstrap, 2)
    b, wb = new_topic(tansu.bootstrap, 1)
    writers += wa + wb
    for p in range(2):
        wa[p].send(random_records(random.Random(p), 60, keys=20))
    wb[0].send([(f"b{i}".encode(), f"v{i}".encode()) for i in range(30)])
    state = tmp_path / "state"
    args = ["--topic", a, "--topic", b, "--state-dir", str(state)]
    out = json.loads(load(tmp_path, tansu.bootstrap, *args, "-o", "json").stdout)
    s0, s1 = state / STORE / "Partition_0", state / STORE / "Partition_1"
    # task 0's store holds partition 0 of both streams, task 1's only a's partition 1 (b has one partition)
    assert out["stores"][0]["offsets"] == {f"kafka.{a}.0": wa[0].last_offset, f"kafka.{b}.0": wb[0].last_offset}
    assert out["stores"][1]["offsets"] == {f"kafka.{a}.1": wa[1].last_offset}
    assert read_store(s0) == {**apply_records(wa[0].records()), **apply_records(wb[0].records())}
    assert read_offsets(s0 / SIDE_INPUT_OFFSETS) == {SSP("kafka", a, 0): str(wa[0].last_offset),
                                                     SSP("kafka", b, 0): str(wb[0].last_offset)}
    from statectl.formats.offsets import offsets_json

    assert (s0 / OFFSET_V2).read_bytes() == (s0 / SIDE_INPUT_OFFSETS).read_bytes()
    from statectl.formats.offsets import read_offset_file

    assert read_offset_file(s0 / OFFSET_V2) == offsets_json(read_offsets(s0 / OFFSET_V2))  # byte-exact order
    old_b = wb[0].last_offset
    # more in both streams; killed after a's new records were applied and recorded, before b's
    wa[0].send([(f"n{i}".encode(), b"new") for i in range(25)])
    wb[0].send([(f"m{i}".encode(), b"new") for i in range(15)])
    p = subprocess.Popen([STATECTL, "adstore", "load", "--kafka", tansu.bootstrap, "--store", STORE, *args,
                          "--partitions", "0"],
                         env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="adstore-apply=1*sleep:2.2->kill"),
                         cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGKILL, err
    assert read_offsets(s0 / SIDE_INPUT_OFFSETS) == {SSP("kafka", a, 0): str(wa[0].last_offset),
                                                     SSP("kafka", b, 0): str(old_b)}
    assert (s0 / OFFSET_V2).read_bytes() == (s0 / SIDE_INPUT_OFFSETS).read_bytes()
    out = json.loads(load(tmp_path, tansu.bootstrap, *args, "-o", "json").stdout)
    # resumed per SSP: only b's 15 new records were left to apply
    assert [s["case"] for s in out["stores"]] == ["resumed", "resumed"] and out["records"] == 15, out
    assert read_store(s0) == {**apply_records(wa[0].records()), **apply_records(wb[0].records())}
    assert out["stores"][0]["offsets"] == {f"kafka.{a}.0": wa[0].last_offset, f"kafka.{b}.0": wb[0].last_offset}
    assert status(tmp_path, "--state-dir", str(state))["deleted"] == 0


# -- side inputs on another cluster ------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_side_inputs_on_another_cluster_are_read_there(tansu, tansu_other, tmp_path: Path, writers):
    """KafkaConsumerConfig: a system's consumer reads from systems.<system>.consumer.bootstrap.servers; the
    job's coordinator stream stays on --kafka."""
    topic, ws = new_topic(tansu_other.bootstrap, 2)
    writers += ws
    for p in range(2):
        ws[p].send([(f"r{p}-{i}".encode(), f"v{i}".encode()) for i in range(7)])
    assert topic not in tansu.topics()
    job = f"job-{uuid.uuid4().hex[:6]}"
    config = {"systems.remote.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
              "systems.remote.consumer.bootstrap.servers": tansu_other.bootstrap,
              f"stores.{STORE}.side.inputs": f"remote.{topic}"}
    write_job(tansu.bootstrap, job, config, ["Partition 0", "Partition 1"], checkpoints=True)
    state = tmp_path / "state"
    r = load(tmp_path, tansu.bootstrap, "--job", job, "--state-dir", str(state), "-o", "json")
    out = json.loads(r.stdout)
    assert tansu_other.bootstrap in r.stderr and "systems.remote.consumer.bootstrap.servers" in r.stderr
    assert {s["task"]: sorted(s["offsets"]) for s in out["stores"]} == {
        f"Partition {p}": [f"remote.{topic}.{p}"] for p in range(2)}
    for p in range(2):
        store = state / STORE / f"Partition_{p}"
        assert read_store(store) == apply_records(ws[p].records())
        assert read_offsets(store / OFFSET_V2) == {SSP("remote", topic, p): str(ws[p].last_offset)}
    st = status(tmp_path, "--kafka", tansu.bootstrap, "--job", job, "--state-dir", str(state))
    assert [s["action"] for s in st["stores"]] == ["keep", "keep"]

    # The system's consumer security applies there: a keystore statectl cannot read is a one-line error.
    job2 = f"job-{uuid.uuid4().hex[:6]}"
    write_job(tansu.bootstrap, job2, {**config, "systems.remote.consumer.security.protocol": "SSL",
                                      "systems.remote.consumer.ssl.truststore.location": "/etc/trust.jks"},
              ["Partition 0", "Partition 1"])
    r = load(tmp_path, tansu.bootstrap, "--job", job2, "--state-dir", str(tmp_path / "s2"), code=2)
    assert "systems.remote.consumer.ssl.truststore.location is a JKS store" in error_line(r.stderr)
