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
