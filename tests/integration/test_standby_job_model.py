"""statectl standby on a real Samza job's coordinator stream, on Tansu.

A job of 12 tasks ``Partition 0`` .. ``Partition 11`` whose changelog partitions Samza gave out in
lexicographic task-name order (JobModelCalculator's TreeMap of TaskName) and stored as ``set-changelog``
messages (written here with statectl's encoder, byte-exact to Samza's): ``Partition 10`` is on changelog
partition 2. Its config names the changelog as a bare topic on ``job.changelog.system``. Followers run as
real processes; every changelog partition holds keys of its own, so the replica shows whose data it follows.
Then the bad inputs: each a one-line error with its exit code, and nothing deleted.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from statectl.engine.standby.replica import standby_dir
from statectl.formats.coordinator import coordinator_topic, standby_task_name
from statectl.kafka.coordinator import CoordinatorStream
from tests.tools.genstore import fingerprint, make_store
from tests.tools.standby_helpers import (
    ChangelogWriter,
    Follower,
    apply_records,
    cli,
    offsets_of,
    read_store,
    wait_until,
)

STORE = "counts"
SYSTEM = "samza-kafka"  # not "kafka": the offset files must name the job's system
KAFKA_FACTORY = "org.apache.samza.system.kafka.KafkaSystemFactory"
TASKS = [f"Partition {n}" for n in range(12)]
# JobModelCalculator's first assignment: tasks in String.compareTo order get 0, 1, 2, ...
SAMZA_MAPPING = {"Partition 0": 0, "Partition 1": 1, "Partition 10": 2, "Partition 11": 3, "Partition 2": 4,
                 "Partition 3": 5, "Partition 4": 6, "Partition 5": 7, "Partition 6": 8, "Partition 7": 9,
                 "Partition 8": 10, "Partition 9": 11}


def test_the_mapping_is_samzas_lexicographic_one():
    assert {t: i for i, t in enumerate(sorted(TASKS))} == SAMZA_MAPPING


def records(partition: int, n: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    """Keys of this partition only; every fifth record deletes a key written before."""
    out: list[tuple[bytes, bytes | None]] = []
    for j in range(start, start + n):
        if j % 5 == 4:
            out.append((b"p%02d-key-%04d" % (partition, j - 2), None))
        else:
            out.append((b"p%02d-key-%04d" % (partition, j), b"value of partition %d record %d" % (partition, j)))
    return out


def job_config(topic: str, **extra: str) -> dict[str, str]:
    """A Samza job's config as its coordinator stream holds it: the changelog a bare topic on
    job.changelog.system (job.default.system is another system)."""
    config = {
        "job.name": "pv", "job.id": "1",
        "job.default.system": "kafka",
        "job.changelog.system": SYSTEM,
        "systems.kafka.samza.factory": KAFKA_FACTORY,
        f"systems.{SYSTEM}.samza.factory": KAFKA_FACTORY,
        f"stores.{STORE}.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
        f"stores.{STORE}.changelog": topic,
        "job.standbytasks.replication.factor": "2",
    }
    config.update(extra)
    return config


def write_job(bootstrap: str, job: str, config: dict[str, str], mapping: dict[str, int]) -> None:
    """The coordinator stream a job coordinator leaves: config, then every task model's changelog partition
    (ClusterBasedJobCoordinator writes the standbys' too: their active's partition) and task modes."""
    with CoordinatorStream(bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config(config)
        for task, partition in mapping.items():
            cs.write_changelog_partition(task, partition)
            cs.write_changelog_partition(standby_task_name(task, 0), partition)
            cs.write_task_mode(task, "Active")
            cs.write_task_mode(standby_task_name(task, 0), "Standby")


@dataclass
class Job:
    bootstrap: str
    tmp: Path
    job: str
    topic: str
    writers: list[ChangelogWriter]

    @property
    def state(self) -> Path:
        return self.tmp / "state"

    def where(self, task: str, *extra: str) -> list[str]:
        return ["--kafka", self.bootstrap, "--job", self.job, "--task", task, "--store", STORE,
                "--state-dir", str(self.state), *extra]

    def key(self, partition: int) -> str:
        return f"{SYSTEM}.{self.topic}.{partition}"


@pytest.fixture
def job12(tansu, tmp_path: Path):
    tag = uuid.uuid4().hex[:10]
    topic = tansu.create_topic(f"pv-counts-changelog-{tag}", partitions=12)
    writers = [ChangelogWriter(tansu.bootstrap, topic, p) for p in range(12)]
    for p, w in enumerate(writers):
        w.send(records(p, 30 + p))
    (tmp_path / "state").mkdir()
    try:
        yield Job(tansu.bootstrap, tmp_path, f"pv-job-{tag}", topic, writers)
    finally:
        for w in writers:
            w.close()


@pytest.fixture
def followers():
    started: list[Follower] = []
    yield started
    for f in started:
        f.kill()


@pytest.mark.timeout(300)
def test_partition_10_follows_and_promotes_changelog_partition_2(job12: Job, followers):
    j = job12
    write_job(j.bootstrap, j.job, job_config(j.topic), SAMZA_MAPPING)
    task = "Partition 10"
    replica = standby_dir(j.state, STORE, task)
    active = j.state / STORE / "Partition_10"
    p2 = j.writers[2]

    f = Follower(j.tmp, j.where(task))  # no --changelog, no --partition: the job's coordinator stream says
    followers.append(f)

    def at(offset: int) -> bool:
        # The follower writes OFFSET-v2, then SIDE-INPUT-OFFSETS (as Samza does): both name the end once
        # the second is written.
        f.assert_running()
        want = {j.key(2): str(offset)}
        try:
            return offsets_of(replica) == want and offsets_of(replica, "SIDE-INPUT-OFFSETS") == want
        except (OSError, ValueError):
            return False

    wait_until(lambda: at(p2.last_offset), 90, f"the replica reaches partition 2's end\n{f.describe()}")
    assert read_store(replica) == p2.state()
    assert "guessing" not in f.stderr() and "taking changelog" not in f.stderr(), f.describe()  # nothing guessed

    # A tail on partition 2 (and on partition 10, which is another task's) for the promote to catch up.
    p2.send(records(2, 7, start=100))
    j.writers[10].send(records(10, 7, start=100))
    p = cli(j.tmp, "standby", "promote", *j.where(task), "-o", "json")
    r = json.loads(p.stdout)
    assert f.wait(60) == 0, f.describe()
    assert r["promoted_dir"] == str(active) and r["caught_up_offset"] == p2.last_offset
    got = read_store(active)
    assert got == p2.state() == apply_records(p2.records())
    assert got and all(k.startswith(b"p02-") for k in got)
    assert offsets_of(active) == {j.key(2): str(p2.last_offset)}
    assert offsets_of(active, "SIDE-INPUT-OFFSETS") == {j.key(2): str(p2.last_offset)}
    assert f.result()["records_applied"] + r["records_applied"] == len(p2.log)


@pytest.mark.timeout(300)
def test_partition_override_and_a_changelog_given_as_system_and_topic(job12: Job, followers):
    """--partition overrides the mapping; --changelog <system>.<topic> names the system the offset files carry."""
    j = job12
    write_job(j.bootstrap, j.job, job_config(j.topic), SAMZA_MAPPING)
    task = "Partition 3"
    replica = standby_dir(j.state, STORE, task)
    f = Follower(j.tmp, j.where(task, "--changelog", f"kafka.{j.topic}", "--partition", "7"))
    followers.append(f)
    p7 = j.writers[7]
    wait_until(lambda: f.assert_running() or offsets_of(replica) == {f"kafka.{j.topic}.7": str(p7.last_offset)}, 90,
               f"the replica reaches partition 7's end\n{f.describe()}")
    assert f.terminate() == 0, f.describe()
    assert read_store(replica) == p7.state()


@pytest.mark.timeout(120)
def test_only_without_a_coordinator_stream_is_the_partition_guessed_from_the_name(job12: Job):
    from statectl.catalog.refs import StoreRef
    from statectl.engine.standby.changelog import resolve_changelog

    j = job12
    ref = StoreRef(j.job, "1", "Partition 10", STORE)
    r = resolve_changelog(j.bootstrap, ref, changelog=j.topic)  # no stream: a guess, and a bare topic on kafka
    assert (r.system, r.topic, r.partition) == ("kafka", j.topic, 10)
    assert any("guessing changelog partition 10" in n for n in r.notes), r.notes
    assert any("to be on system 'kafka'" in n for n in r.notes), r.notes
    write_job(j.bootstrap, j.job, job_config(j.topic), SAMZA_MAPPING)
    r = resolve_changelog(j.bootstrap, ref)
    assert (r.system, r.topic, r.partition, r.notes) == (SYSTEM, j.topic, 2, ())
    r = resolve_changelog(j.bootstrap, ref, changelog=j.topic)  # a bare --changelog: job.changelog.system
    assert (r.system, r.topic, r.partition, r.notes) == (SYSTEM, j.topic, 2, ())
    r = resolve_changelog(j.bootstrap, ref, partition=10)  # the override
    assert (r.system, r.partition) == (SYSTEM, 10)


@pytest.mark.timeout(120)
def test_promote_reads_the_coordinator_stream_once_for_its_route_and_changelog(job12: Job, tmp_path: Path,
                                                                               monkeypatch):
    """promote asks the stream whether the job restores from the blob store and which changelog partition is the
    task's: one read answers both. With no replica, promote stops (exit 10) before its plan reads anything more,
    so every read of the stream counted here is one of those two answers'."""
    from typer.testing import CliRunner

    from statectl.cli.main import app
    from tests.tools.standby_helpers import isolate_cli

    j = job12
    write_job(j.bootstrap, j.job, job_config(j.topic), SAMZA_MAPPING)
    reads: list[str] = []
    refresh = CoordinatorStream.refresh

    def counted(self: CoordinatorStream) -> bool:
        reads.append(self.topic)
        return refresh(self)

    (tmp_path / "cli").mkdir()
    isolate_cli(tmp_path / "cli", monkeypatch)
    monkeypatch.setattr(CoordinatorStream, "refresh", counted)
    r = CliRunner().invoke(app, ["standby", "promote", *j.where("Partition 10"), "--dry-run"])
    assert r.exit_code == 10, (r.exit_code, r.stdout, r.stderr)
    assert f"no replica at {standby_dir(j.state, STORE, 'Partition 10').absolute()}" in r.stderr, r.stderr
    assert reads == [coordinator_topic(j.job, "1")], reads


# -- bad input: one line, its exit code, nothing deleted ------------------------------------------------------


def one_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


def refused(j: Job, task: str, code: int, *extra: str) -> tuple[str, str]:
    """Run follow and promote for ``task``; both exit ``code`` with one error line and leave the state dir
    (an active store of the task, kept by fingerprint) as it was. Return (follow's stderr, its error line)."""
    active = j.state / STORE / task.replace(" ", "_")
    if not active.exists():
        make_store(active, 50, 16, seed=3)
    before = fingerprint(active)
    listing = sorted(str(p.relative_to(j.state)) for p in j.state.rglob("*") if p.parent == j.state / STORE)
    out = []
    for verb in ("follow", "promote"):
        p = cli(j.tmp, "standby", verb, *j.where(task, *extra), code=code)
        assert p.stdout == "", p.stdout
        out.append((p.stderr, one_error(p.stderr)))
        assert fingerprint(active) == before
        assert sorted(str(p.relative_to(j.state)) for p in j.state.rglob("*") if p.parent == j.state / STORE) == listing
        assert not standby_dir(j.state, STORE, task).exists()
    assert out[0][1] == out[1][1], out
    return out[0]


@pytest.mark.timeout(180)
def test_no_set_changelog_for_the_task_exits_10(job12: Job):
    j = job12
    mapping = {t: p for t, p in SAMZA_MAPPING.items() if t != "Partition 5"}
    write_job(j.bootstrap, j.job, job_config(j.topic), mapping)
    stderr, error = refused(j, "Partition 5", 10)
    assert "'Partition 5'" in error and "set-changelog" in error, error
    assert "Hint:" in stderr and "--partition" in stderr.split("Hint:", 1)[1], stderr


@pytest.mark.timeout(180)
def test_two_tasks_on_one_partition_exit_1_naming_both(job12: Job):
    j = job12
    mapping = dict(SAMZA_MAPPING, **{"Partition 2": 2})  # Partition 10 is on 2 as well
    write_job(j.bootstrap, j.job, job_config(j.topic), mapping)
    for task, other in (("Partition 10", "Partition 2"), ("Partition 2", "Partition 10")):
        _, error = refused(j, task, 1)
        assert f"'{task}'" in error and f"'{other}'" in error and "partition 2" in error, error
    # A task whose partition only its own standby shares is fine: the others still resolve.
    cli(j.tmp, "standby", "promote", *j.where("Partition 11"), code=10)  # no replica yet: exit 10, not 1


@pytest.mark.timeout(180)
def test_a_changelog_with_fewer_partitions_than_the_mapping_names_exits_10(job12: Job, tansu):
    j = job12
    small = tansu.create_topic(f"pv-counts-small-{uuid.uuid4().hex[:8]}", partitions=4)
    write_job(j.bootstrap, j.job, job_config(small), SAMZA_MAPPING)
    _, error = refused(j, "Partition 1", 10)  # its partition 1 exists; the mapping names up to 11
    assert small in error and "4 partitions" in error and "11" in error, error


@pytest.mark.timeout(180)
@pytest.mark.parametrize("changelog, system", [
    ("kafka2.{topic}", "kafka2"),  # <system>.<topic> on a system the config does not define
    ("my.{topic}", "my"),  # a "bare" topic with a dot is <system>.<topic> to Samza
])
def test_a_changelog_on_an_unknown_system_exits_2(job12: Job, changelog: str, system: str):
    j = job12
    write_job(j.bootstrap, j.job, job_config(j.topic, **{f"stores.{STORE}.changelog": changelog.format(topic=j.topic)}),
              SAMZA_MAPPING)
    _, error = refused(j, "Partition 10", 2)
    assert f"system '{system}'" in error and f"systems.{system}.samza.factory" in error, error
    # The same by hand.
    p = cli(j.tmp, "standby", "follow", *j.where("Partition 10", "--changelog", f"nope.{j.topic}"), code=2)
    assert "system 'nope'" in one_error(p.stderr), p.stderr
