"""backup --all / --all-tasks name each task dir's real task, never a guess from the dir's name.

The layout is the example job's (examples/pageviews): store ``counts`` of tasks ``count-Partition 0..2``
(statectl.pipeline's task names), in dirs ``count-Partition_0..2``. Samza writes both ' ' and '_' as '_', so
the names come from the job model on a Samza-format coordinator stream or from the job's checkpoint topic
(both on Tansu, with --kafka), or from the tasks the blob store already holds snapshots of; a dir none of
them names, and a damaged store, are failures (exit 3) naming the dir.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef
from statectl.formats.coordinator import standby_task_name
from statectl.kafka.coordinator import CoordinatorStream
from statectl.local.layout import store_dir
from statectl.pipeline.spec import task_name
from tests.integration.test_kafka_checkpoints import SEED_V2, Topic, samza_key
from tests.tools.genstore import fingerprint, make_store

TASKS = [task_name("count", p) for p in range(3)]  # "count-Partition 0" .. 2, as the example job names them
UNNAMED = "cannot name its task without guessing ('_' in a task dir stands for ' ' or '_')"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    for p, task in enumerate(TASKS):
        make_store(store_dir(state, "counts", task), 300 + p, 128, seed=p)
    return state


@pytest.fixture
def job() -> str:
    return f"page-views-{uuid.uuid4().hex[:8]}"


def backed_up(doc: dict) -> list[tuple[str, str]]:
    return sorted((r["store"], r["task"]) for r in doc["results"])


def catalog_tasks(cli, job: str) -> list[str]:
    return sorted(t["task"] for t in json.loads(cli("snapshots", "list", "--job", job, "-o", "json").stdout))


def test_the_job_model_on_the_coordinator_stream_names_the_tasks(cli, tansu, state: Path, job: str, tmp_path):
    # What the example job's coordinator writes (pipeline.runner: each task's changelog partition), with the
    # task modes and a standby task per active task as a Samza job coordinator writes them.
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"job.name": job, "job.id": "1"})
        for p, task in enumerate(TASKS):
            cs.write_changelog_partition(task, p)
            cs.write_changelog_partition(standby_task_name(task, 0), p)
            cs.write_task_mode(task, "Active")
            cs.write_task_mode(standby_task_name(task, 0), "Standby")
    where = ["--job", job, "--kafka", tansu.bootstrap, "--state-dir", str(state)]
    doc = json.loads(cli("backup", *where, "--store", "counts", "--all-tasks", "-o", "json").stdout)
    assert doc["failures"] == [] and backed_up(doc) == [("counts", t) for t in TASKS]
    # Committed under the real names: what a Samza job restores from.
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        assert log.task_names() == set(TASKS)
    assert catalog_tasks(cli, job) == TASKS
    doc = json.loads(cli("backup", *where, "--all", "-o", "json").stdout)
    assert doc["failures"] == [] and backed_up(doc) == [("counts", t) for t in TASKS]
    target = tmp_path / "restored"
    cli("restore", "--job", job, "--kafka", tansu.bootstrap, "--store", "counts", "--task", TASKS[1],
        "--target-dir", str(target))
    assert fingerprint(target) == fingerprint(store_dir(state, "counts", TASKS[1]))


def test_the_checkpoint_topic_names_the_tasks(cli, tansu, state: Path, job: str):
    # No coordinator stream: the job's own checkpoints name its tasks.
    Topic(tansu.bootstrap, job).create(tansu).produce(*[(samza_key(t), SEED_V2) for t in TASKS])
    doc = json.loads(cli("backup", "--all", "--job", job, "--kafka", tansu.bootstrap, "--state-dir", str(state),
                         "-o", "json").stdout)
    assert doc["failures"] == [] and backed_up(doc) == [("counts", t) for t in TASKS]
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        assert log.task_names() == set(TASKS)
        assert all(log.latest_checkpoints()[0][t].input_offsets for t in TASKS)  # the job's offsets kept


def test_a_dir_no_source_names_is_a_failure_naming_it(cli, tansu, state: Path, job: str):
    # --kafka, but the job has neither a coordinator stream nor a checkpoint topic, and the blob store knows
    # only one of its tasks: the two other dirs are named in the failures, and nothing is committed for them.
    cli("backup", "--job", job, "--store", "counts", "--task", TASKS[0], "--state-dir", str(state))
    r = cli("backup", "--all", "--job", job, "--kafka", tansu.bootstrap, "--state-dir", str(state), "-o", "json",
            code=3)
    doc = json.loads(r.stdout)
    assert backed_up(doc) == [("counts", TASKS[0])]
    dirs = [str(store_dir(state, "counts", t)) for t in TASKS[1:]]
    assert [path for path, _ in doc["failures"]] == dirs
    for (path, error), name in zip(doc["failures"], ["count-Partition_1", "count-Partition_2"]):
        assert error == (f"{UNNAMED}: no task of job {job}-1 has dir {name} in the job model on its coordinator "
                         "stream, its checkpoint topic or the blob store's catalog; back it up with --store counts "
                         "--task NAME")
    assert r.stderr.startswith("Error: 2 of 3 stores failed to back up")
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        assert log.task_names() == {TASKS[0]}
    assert catalog_tasks(cli, job) == [TASKS[0]]


def test_without_kafka_the_blob_stores_catalog_names_the_tasks(cli, state: Path):
    # A first --all-tasks into an empty blob store names no task dir with '_': each is a failure, none is
    # backed up under a made-up name.
    where = ["--job", "page-views", "--store", "counts", "--state-dir", str(state)]
    r = cli("backup", *where, "--all-tasks", "-o", "json", code=3)
    doc = json.loads(r.stdout)
    assert doc["results"] == [] and len(doc["failures"]) == 3
    assert doc["failures"][0] == [str(store_dir(state, "counts", TASKS[0])), (
        f"{UNNAMED}: no task of job page-views-1 has dir count-Partition_0 in the blob store's catalog; back it "
        "up with --store counts --task NAME, or pass --kafka (the job's coordinator stream names its tasks)")]
    cli("snapshots", "list", "--job", "page-views", code=10)  # nothing recorded
    # The tasks the job's own commits (statectl.pipeline) or a backup with --task recorded name them after.
    for task in TASKS:
        cli("backup", *where, "--task", task)
    doc = json.loads(cli("backup", *where, "--all-tasks", "-o", "json").stdout)
    assert doc["failures"] == [] and backed_up(doc) == [("counts", t) for t in TASKS]
    assert catalog_tasks(cli, "page-views") == TASKS
    # A dir name without '_' is its task's name: no source needed.
    make_store(store_dir(state, "totals", "count"), 100, 64, seed=7)
    doc = json.loads(cli("backup", "--all", "--job", "page-views", "--state-dir", str(state), "-o", "json").stdout)
    assert doc["failures"] == [] and backed_up(doc) == [("counts", t) for t in TASKS] + [("totals", "count")]


def test_a_dir_two_known_tasks_share_is_a_failure(cli, state: Path):
    # The blob store holds snapshots of 'count-Partition 0' and of 'count-Partition_0' (e.g. a backup that
    # guessed): both have the dir count-Partition_0, so which one it holds is not known.
    where = ["--job", "page-views", "--store", "counts", "--state-dir", str(state)]
    for task in TASKS:
        cli("backup", *where, "--task", task)
    cli("backup", *where, "--store-dir", str(store_dir(state, "counts", TASKS[0])), "--task", "count-Partition_0")
    r = cli("backup", *where, "--all-tasks", "-o", "json", code=3)
    doc = json.loads(r.stdout)
    assert backed_up(doc) == [("counts", t) for t in TASKS[1:]]
    assert doc["failures"] == [[str(store_dir(state, "counts", TASKS[0])), (
        f"{UNNAMED}: tasks 'count-Partition 0' and 'count-Partition_0' of job page-views-1 both have dir "
        "count-Partition_0 in the blob store's catalog; back it up with --store counts --task NAME, or pass "
        "--kafka (the job's coordinator stream names its tasks)")]]


@pytest.mark.parametrize("flag", [["--all"], ["--store", "counts", "--all-tasks"]])
def test_a_damaged_store_is_a_failure(cli, state: Path, flag: list[str]):
    where = ["--job", "page-views", "--state-dir", str(state)]
    for task in TASKS:
        cli("backup", *where, "--store", "counts", "--task", task)
    damaged = store_dir(state, "counts", TASKS[2])
    (damaged / "CURRENT").unlink()
    before = sorted(p.name for p in damaged.iterdir())
    r = cli("backup", *where, *flag, "-o", "json", code=3)
    doc = json.loads(r.stdout)
    assert backed_up(doc) == [("counts", t) for t in TASKS[:2]]
    assert doc["failures"] == [[str(damaged), "a damaged store (RocksDB's or Samza's files, but no CURRENT naming "
                                              "a MANIFEST): not backed up"]]
    assert r.stderr.startswith("Error: 1 of 3 ")
    assert sorted(p.name for p in damaged.iterdir()) == before  # left as it was
    # Only a damaged store: still exit 3 with it in the failures, not "no stores".
    for task in TASKS[:2]:
        (store_dir(state, "counts", task) / "CURRENT").unlink()
    doc = json.loads(cli("backup", *where, *flag, "-o", "json", code=3).stdout)
    assert doc["results"] == [] and len(doc["failures"]) == 3


def test_stores_of_one_task_backed_up_at_once_keep_each_others_markers(cli, tansu, tmp_path: Path, job: str):
    """backup --all backs up several stores at once: their commits to the one checkpoint topic each merge the
    task's other markers, and all of them stay in the task's latest checkpoint."""
    state = tmp_path / "state"
    stores = [f"store{i}" for i in range(6)]
    for i, s in enumerate(stores):
        make_store(store_dir(state, s, "p0"), 100, 64, seed=i)
    for _ in range(2):
        doc = json.loads(cli("backup", "--job", job, "--kafka", tansu.bootstrap, "--state-dir", str(state), "--all",
                             "-o", "json").stdout)
        assert doc["failures"] == [] and backed_up(doc) == [(s, "p0") for s in stores]
        with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
            markers = {s: log.latest(StoreRef(job, "1", "p0", s)) for s in stores}
        # The task's one latest checkpoint (its id the last commit's) holds each store's snapshot.
        assert {s: m[1] for s, m in markers.items() if m} == {r["store"]: r["snapshot_id"] for r in doc["results"]}
