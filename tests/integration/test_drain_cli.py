"""``statectl drain start | status | wait | cancel`` against a real Kafka-protocol broker (Tansu), with a
coordinator stream and a checkpoint topic made by hand: no job runs, so every state a job would bring
about (a notification cleared, checkpoints at the end, a drain message on an intermediate stream) is
written here directly.

Tansu's high watermark under-reports after batched produces (the base offset of the last batch + 1):
the intermediate streams are filled with multi-record batches, so the counts below hold only when the
true ends are read.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.formats.coordinator import coordinator_topic, encode_key
from statectl.formats.drain import (
    DRAIN_NAMESPACE,
    DrainNotification,
    drain_message,
    encode_control,
    encode_notification,
    encode_user_message,
)
from statectl.kafka.client import create_topic, open_consumer, open_producer, produce
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import read_tails

STATUS_FIELDS = {"job", "job_id", "run_id", "notifications", "intermediate", "in_flight", "tasks", "duration_s",
                 "notes", "drain_monitor_enabled", "job_breaking", "checkpoint_gaps", "left_behind"}
LEFT_BEHIND_FIELDS = {"stream", "partition", "task", "next_offset", "notified_offset", "records"}
NOTICE_FIELDS = {"uuid", "run_id", "drain_mode", "state", "offset", "written", "key", "signal"}
BREAKING_FIELDS = {"offset", "key", "bytes", "why", "written"}
IN_FLIGHT_FIELDS = {"stream", "partition", "end_offset", "task", "next_offset", "in_flight"}
START_FIELDS = {"uuid", "run_id", "created", "offset", "duration_s", "notes", "drain_monitor_enabled"}
WAIT_FIELDS = {"run_id", "drained", "uuids", "in_flight", "intermediate", "waited_s", "notes", "signal",
               "left_behind"}
CANCEL_FIELDS = {"run_id", "cancelled", "duration_s", "notes", "bad_removed"}


RUN = "1700000000000-abcdef01"
CID = "1700000000000-1"




def error_line(result) -> str:
    """The one ``Error: ...`` line of a failed command (stdout holds nothing then)."""
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1 and lines[0] == errors[0], result.stderr
    assert result.stdout == ""
    return errors[0]


def batched(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Write (partition, value) records in multi-record batches (so Tansu under-reports the end)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=100, batch_size=1 << 20)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=v, partition=p) for i, (p, v) in enumerate(records)]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


class Job:
    """A job that never ran: its coordinator stream and checkpoint topic, written as Samza would."""

    def __init__(self, bootstrap: str, *, run_id: str | None = RUN, intermediate: str | None = None,
                 partitions: int = 2, monitor: str | None = "true", config: dict[str, str] | None = None):
        self.bootstrap = bootstrap
        self.name = f"drain_cli_{uuid.uuid4().hex[:10]}"
        self.stream = CoordinatorStream(bootstrap, self.name, "1")
        self.stream.create()
        config_extra = config
        config = {"job.name": self.name, "job.id": "1"}
        if monitor is not None:
            config["job.drain-monitor.enabled"] = monitor
        if run_id is not None:
            config["app.run.id"] = run_id
        self.topic = intermediate
        if intermediate is not None:
            config.update({"streams.shuffle.samza.intermediate": "true",
                           "streams.shuffle.samza.physical.name": intermediate,
                           "streams.shuffle.samza.system": "kafka"})
            create_topic(bootstrap, intermediate, partitions=partitions)
        self.stream.write_config({**config, **(config_extra or {})})
        self._log: KafkaCheckpointLog | None = None

    @property
    def args(self) -> list[str]:
        return ["--kafka", self.bootstrap, "--job", self.name]

    def notify(self, run_id: str = RUN) -> DrainNotification:
        n = DrainNotification.create(run_id)
        self.stream.write_notification(n)
        return n

    def checkpoint(self, task: str, checkpoint_id: str, offsets: dict[int, str]) -> None:
        """A v2 checkpoint of ``task``: last processed offset per intermediate partition."""
        if self._log is None:
            self._log = KafkaCheckpointLog(self.bootstrap, self.name, "1")
        self._log.commit_offsets(task, checkpoint_id, {f"kafka.{self.topic}.{p}": o for p, o in offsets.items()})

    def records(self) -> int:
        """How many records the coordinator stream holds (read to its true end)."""
        consumer = open_consumer(self.bootstrap)
        try:
            return read_tails(consumer, self.stream.topic, [0], self.bootstrap)[0].end
        finally:
            consumer.close()

    def close(self) -> None:
        self.stream.close()
        if self._log is not None:
            self._log.close()


@pytest.fixture
def make_job(tansu):
    jobs: list[Job] = []

    def make(**kwargs) -> Job:
        job = Job(tansu.bootstrap, **kwargs)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.close()


def intermediate_topic() -> str:
    return f"drain-shuffle-{uuid.uuid4().hex[:8]}"


def fill(tansu, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` user messages on partition p, in batches."""
    batched(tansu.bootstrap, topic, [(p, encode_user_message(b"m%d" % i)) for p, n in counts.items()
                                     for i in range(n)])


# -- errors before anything is read ------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["status", "start"])
def test_no_coordinator_stream_exits_10_naming_its_topic(cli, tansu, command):
    job = f"never_ran_{uuid.uuid4().hex[:8]}"
    topic = f"__samza_coordinator_{job.replace('_', '-')}_1"
    assert coordinator_topic(job, "1") == topic
    r = cli("drain", command, "--kafka", tansu.bootstrap, "--job", job, code=10)
    line = error_line(r)
    assert topic in line and "does not exist" in line
    consumer = open_consumer(tansu.bootstrap)
    try:
        assert topic not in consumer.topics()  # looking did not create it
    finally:
        consumer.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["status", "start"])
def test_unreachable_brokers_exit_1_naming_them(cli, command):
    r = cli("drain", command, "--kafka", "127.0.0.1:1", "--job", "pv", code=1)
    line = error_line(r)
    assert "127.0.0.1:1" in line and "cannot reach" in line


# -- start and status --------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_start_is_idempotent_per_run_and_status_tells_pending_from_stale(cli, make_job):
    job = make_job()
    first = json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)
    assert set(first) == START_FIELDS
    assert first["created"] is True and first["run_id"] == RUN
    assert str(uuid.UUID(first["uuid"])) == first["uuid"]

    again = json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)
    assert again["created"] is False
    assert (again["uuid"], again["offset"], again["run_id"]) == (first["uuid"], first["offset"], RUN)

    other = json.loads(cli("drain", "start", *job.args, "--run-id", "OTHER", "-o", "json").stdout)
    assert other["created"] is True and other["run_id"] == "OTHER"
    assert other["uuid"] != first["uuid"] and other["offset"] > first["offset"]

    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert set(st) == STATUS_FIELDS
    assert (st["job"], st["job_id"], st["run_id"]) == (job.name, "1", RUN)
    assert all(set(n) == NOTICE_FIELDS for n in st["notifications"])
    assert [(n["uuid"], n["run_id"], n["drain_mode"], n["state"], n["offset"]) for n in st["notifications"]] == [
        (first["uuid"], RUN, "DEFAULT", "pending", first["offset"]),
        (other["uuid"], "OTHER", "DEFAULT", "stale", other["offset"]),
    ]
    assert all(n["written"] and n["written"].endswith("Z") for n in st["notifications"])
    assert (st["intermediate"], st["in_flight"], st["tasks"]) == ([], 0, 0)

    # Seen from run OTHER, it is R's notification that is stale.
    st = json.loads(cli("drain", "status", *job.args, "--run-id", "OTHER", "-o", "json").stdout)
    assert st["run_id"] == "OTHER"
    assert [n["state"] for n in st["notifications"]] == ["stale", "pending"]

    # The written notifications are in Samza's format, under their uuid.
    job.stream.refresh()
    values = job.stream.namespace_values(DRAIN_NAMESPACE)
    assert values[first["uuid"]] == encode_notification(DrainNotification(first["uuid"], RUN))

    text = cli("drain", "status", *job.args).stdout
    assert f"pending  {first['uuid']}" in text and f"stale    {other['uuid']}" in text


@pytest.mark.timeout(120)
def test_start_without_a_run_id_exits_10_with_a_hint(cli, make_job):
    job = make_job(run_id=None)
    r = cli("drain", "start", *job.args, code=10)
    assert "no run id" in error_line(r)
    assert "--run-id" in r.stderr.splitlines()[1]
    assert job.records() == 3  # job.name, job.id, job.drain-monitor.enabled: nothing was written

    r = json.loads(cli("drain", "start", *job.args, "--run-id", "GIVEN", "-o", "json").stdout)
    assert r["created"] is True and r["run_id"] == "GIVEN"
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert st["run_id"] is None
    assert [n["state"] for n in st["notifications"]] == ["stale"]  # no current run: nothing is its


# -- malformed records -------------------------------------------------------------------------------------


def write_malformed(job: Job) -> None:
    producer = open_producer(job.bootstrap)
    try:
        for key, value in [
            (b"not json at all", b"{}"),
            (b'[1,"set-config"]', b'{"values":{"value":"x"}}'),
            (encode_key(DRAIN_NAMESPACE, str(uuid.uuid4())), b"{not json"),
            (encode_key("set-config", "task.window.ms"), b'{"values":{},"source":"x"}'),
        ]:
            produce(producer, job.stream.topic, 0, key, value, job.bootstrap)
    finally:
        producer.close()


@pytest.mark.timeout(120)
def test_malformed_records_are_skipped_with_notes(cli, make_job):
    job = make_job()
    write_malformed(job)
    n = job.notify()
    r = cli("drain", "status", *job.args, "-o", "json")
    st = json.loads(r.stdout)
    assert st["run_id"] == RUN  # the config around the bad set-config record is still read
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(n.uuid, "pending")]
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: ")]
    assert any("2 record(s) with a malformed key" in line for line in notes), r.stderr
    assert any("task.window.ms" in line and "values.value" in line for line in notes), r.stderr
    assert all("skipped a malformed record" in line and job.stream.topic in line for line in notes)
    assert len(st["notes"]) == len(notes) == 2
    # The unreadable drain notification is no note: it breaks the job (Samza's DrainMonitor throws on it).
    assert [(b["offset"], "not JSON" in b["why"]) for b in st["job_breaking"]] == [(job.records() - 3, True)]
    assert "Traceback" not in r.stderr

    # start reads past them too, and finds the pending notification; it warns about the bad one.
    r = cli("drain", "start", *job.args, "-o", "json")
    s = json.loads(r.stdout)
    assert (s["uuid"], s["created"]) == (n.uuid, False)
    assert any("cannot read" in note and "cancel --bad" in note for note in s["notes"])


# -- cancel ------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_cancel_withdraws_a_pending_notification_once(cli, make_job):
    job = make_job()
    n = job.notify()
    stale = job.notify("OLD-RUN")
    r = cli("drain", "cancel", *job.args, "-o", "json")
    c = json.loads(r.stdout)
    assert set(c) == CANCEL_FIELDS
    assert c["cancelled"] == [n.uuid] and c["run_id"] == RUN
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    states = {x["uuid"]: (x["state"], x["run_id"]) for x in st["notifications"]}
    assert states == {n.uuid: ("cleared", RUN), stale.uuid: ("stale", "OLD-RUN")}

    r = cli("drain", "cancel", *job.args, code=10)
    assert "no pending drain notification" in error_line(r)
    r = cli("drain", "cancel", *job.args, "--uuid", n.uuid, code=10)
    assert n.uuid in error_line(r)
    # Waiting for a withdrawn notification is not a drain: wait says so instead of reporting success.
    r = cli("drain", "wait", *job.args, "--uuid", n.uuid, "--timeout", "30", code=1)
    assert f"drain notification {n.uuid} was cancelled" in error_line(r)
    # A later drain of the run that the job completed before a wait began: the wait reports that one, the
    # last of the run, not the cancelled one before it.
    done = job.notify()
    job.stream.clear_notification(done.uuid)
    w = json.loads(cli("drain", "wait", *job.args, "--timeout", "30", "-o", "json").stdout)
    assert w["drained"] is True and w["uuids"] == [done.uuid]


# -- in flight on intermediate streams ---------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_status_counts_messages_in_flight_to_the_true_end(cli, tansu, make_job):
    topic = intermediate_topic()
    job = make_job(intermediate=topic)
    fill(tansu, topic, {0: 5, 1: 3})
    job.checkpoint("Partition 0", CID, {0: "1"})  # offsets 0 and 1 processed
    job.notify()

    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert all(set(i) == IN_FLIGHT_FIELDS for i in st["intermediate"])
    assert st["intermediate"] == [
        {"stream": topic, "partition": 0, "end_offset": 5, "task": "Partition 0", "next_offset": 2, "in_flight": 3},
        {"stream": topic, "partition": 1, "end_offset": 3, "task": None, "next_offset": None, "in_flight": 3},
    ]
    assert st["in_flight"] == 6 and st["tasks"] == 1
    assert [x["state"] for x in st["notifications"]] == ["pending"]

    text = cli("drain", "status", *job.args).stdout
    assert "6 messages in flight on 2 intermediate partitions" in text
    assert f"{topic}[0]" in text and "task Partition 0" in text


@pytest.mark.timeout(120)
def test_a_missing_intermediate_stream_is_a_note(cli, make_job):
    topic = intermediate_topic()
    job = make_job()
    job.stream.write_config({"app.run.id": RUN, "streams.x.samza.intermediate": "true",
                             "streams.x.samza.physical.name": topic})
    r = cli("drain", "status", *job.args, "-o", "json")
    st = json.loads(r.stdout)
    assert st["intermediate"] == [] and st["in_flight"] == 0
    assert any(topic in note and "does not exist" in note for note in st["notes"])


# -- wait --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_wait_times_out_while_messages_are_in_flight(cli, tansu, make_job):
    topic = intermediate_topic()
    job = make_job(intermediate=topic)
    fill(tansu, topic, {0: 5, 1: 3})
    job.notify()
    r = cli("drain", "wait", *job.args, "--timeout", "2", "--poll", "0.5", code=1)
    line = error_line(r)
    assert "has not drained" in line
    assert "8 messages in flight" in line and f"{topic}[0] 5" in line and f"{topic}[1] 3" in line


@pytest.mark.timeout(120)
def test_wait_without_a_notification_exits_10(cli, make_job):
    job = make_job()
    r = cli("drain", "wait", *job.args, "--timeout", "2", code=10)
    assert "no drain notification for run" in error_line(r)
    job.notify("OLD-RUN")  # another run's does not count
    cli("drain", "wait", *job.args, "--timeout", "2", code=10)


@pytest.mark.timeout(180)
def test_wait_returns_once_cleared_and_consumed_to_the_end(cli, tansu, make_job):
    topic = intermediate_topic()
    job = make_job(intermediate=topic)
    fill(tansu, topic, {0: 5, 1: 3})
    job.checkpoint("Partition 0", CID, {0: "1"})
    n = job.notify()
    failures: list[BaseException] = []

    def the_job_drains() -> None:  # what the job would do while wait polls
        try:
            time.sleep(1.0)
            stream = CoordinatorStream(tansu.bootstrap, job.name, "1")
            log = KafkaCheckpointLog(tansu.bootstrap, job.name, "1")
            try:
                log.commit_offsets("Partition 0", "1700000000001-1", {f"kafka.{topic}.0": "4"})
                log.commit_offsets("Partition 1", "1700000000001-1", {f"kafka.{topic}.1": "2"})
                stream.clear_notification(n.uuid)
            finally:
                log.close()
                stream.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failures.append(e)

    worker = threading.Thread(target=the_job_drains, daemon=True)
    worker.start()
    r = cli("drain", "wait", *job.args, "--timeout", "90", "--poll", "0.2", "-o", "json")
    worker.join(timeout=60)
    assert not failures, failures
    w = json.loads(r.stdout)
    assert set(w) == WAIT_FIELDS
    assert (w["drained"], w["in_flight"], w["uuids"], w["run_id"]) == (True, 0, [n.uuid], RUN)
    assert [(i["partition"], i["end_offset"], i["next_offset"], i["in_flight"], i["task"])
            for i in w["intermediate"]] == [(0, 5, 5, 0, "Partition 0"), (1, 3, 3, 0, "Partition 1")]

    # Already drained: wait says so at once.
    w = json.loads(cli("drain", "wait", *job.args, "--timeout", "5", "-o", "json").stdout)
    assert w["drained"] is True and w["uuids"] == [n.uuid]


@pytest.mark.timeout(120)
def test_wait_fails_when_cleared_with_checkpoints_behind(cli, tansu, make_job):
    topic = intermediate_topic()
    job = make_job(intermediate=topic)
    fill(tansu, topic, {0: 5, 1: 3})
    n = job.notify()
    job.checkpoint("Partition 0", CID, {0: "4"})  # to the end
    job.checkpoint("Partition 1", CID, {1: "0"})  # offsets 1 and 2 still to do
    job.stream.clear_notification(n.uuid)
    r = cli("drain", "wait", *job.args, "--timeout", "10", code=1)
    line = error_line(r)
    assert "stopped with messages still in flight" in line
    assert f"2 messages in flight ({topic}[1] 2)" in line and f"{topic}[0]" not in line


# -- seen: the job acts on it ------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_a_drain_message_of_the_run_makes_it_seen_and_cancel_refuses(cli, tansu, make_job):
    topic = intermediate_topic()
    job = make_job(intermediate=topic)
    fill(tansu, topic, {0: 5, 1: 3})
    n = job.notify()

    # A drain message of another run is not this one acting.
    batched(tansu.bootstrap, topic, [(1, encode_control(drain_message("Partition 1", "OLD-RUN")))])
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [x["state"] for x in st["notifications"]] == ["pending"]

    batched(tansu.bootstrap, topic, [(0, encode_user_message(b"late")),
                                     (0, encode_control(drain_message("Partition 0", RUN)))])
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(n.uuid, "seen")]
    assert [i["end_offset"] for i in st["intermediate"]] == [7, 4]

    before = job.records()
    r = cli("drain", "cancel", *job.args, code=1)
    line = error_line(r)
    assert "cannot be undone" in line and n.uuid in line
    assert job.records() == before  # nothing written
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [x["state"] for x in st["notifications"]] == ["seen"]


@pytest.mark.timeout(120)
def test_without_intermediate_streams_a_later_checkpoint_makes_it_seen(cli, make_job):
    job = make_job()
    n = job.notify()
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [x["state"] for x in st["notifications"]] == ["pending"]
    log = KafkaCheckpointLog(job.bootstrap, job.name, "1")
    try:  # a checkpoint older than the notification says nothing
        log.commit_offsets("Partition 0", CID, {"kafka.input.0": "10"})
        st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
        assert [x["state"] for x in st["notifications"]] == ["pending"] and st["tasks"] == 1
        later = int(time.time() * 1000) + 60_000
        log.commit_offsets("Partition 0", f"{later}-1", {"kafka.input.0": "11"})
    finally:
        log.close()
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(n.uuid, "seen")]


@pytest.mark.timeout(300)
def test_concurrent_starts_leave_one_notification_per_run(tmp_path, make_job):
    """Eight concurrent 'drain start' wrote four notifications for one run, although a run is drained
    once: each start now reads the stream back after writing and withdraws its own unless it was first."""
    import subprocess

    from tests.integration.test_bad_input import STATECTL, clean_env

    job = make_job()
    for _round in range(2):
        job2 = job if _round == 0 else make_job()
        procs = [subprocess.Popen([str(STATECTL), "-o", "json", "drain", "start", *job2.args], cwd=tmp_path,
                                  env=clean_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(8)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out))
        st = json.loads(_cli_status(job2))
        pending = [n for n in st["notifications"] if n["state"] == "pending"]
        assert len(pending) == 1, st["notifications"]
        assert {r["uuid"] for r in results} == {pending[0]["uuid"]}, results
        assert sum(r["created"] for r in results) <= 1
        withdrawn = [n for n in st["notifications"] if n["state"] == "cleared"]
        assert len(withdrawn) == len(st["notifications"]) - 1


def _cli_status(job: Job) -> str:
    import subprocess

    from tests.integration.test_bad_input import STATECTL

    p = subprocess.run([str(STATECTL), "-o", "json", "drain", "status", *job.args], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.timeout(120)
def test_wait_follows_a_notification_withdrawn_by_a_concurrent_start(cli, make_job):
    """A 'drain wait' that began while two concurrent starts' notifications were both pending must not end
    as "cancelled" when the later one withdraws its own: it waits for the one that stands."""
    from statectl.engine.drain.model import SUPERSEDED_NAMESPACE

    job = make_job()
    first, second = job.notify(), job.notify()
    done: list = []
    waiter = threading.Thread(target=lambda: done.append(
        cli("drain", "wait", *job.args, "--timeout", "60s", "-o", "json")))
    waiter.start()
    time.sleep(2)  # the waiter has read both as pending
    job.stream.put(SUPERSEDED_NAMESPACE, second.uuid, first.uuid.encode())
    job.stream.clear_notification(second.uuid)
    time.sleep(2)
    assert not done, done[0].stdout if done else None  # the first still stands: it keeps waiting
    job.stream.clear_notification(first.uuid)  # the job drained and cleared it
    waiter.join(90)
    r = done[0]
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["drained"] is True


@pytest.mark.timeout(60)
def test_a_200_kb_run_id_is_listed_without_delay(cli, make_job):
    """A 200 KB run id made 'drain status' take 39 s: every line printed went through a redaction that
    was quadratic in long alphanumeric runs. The timeout bounds a hang (it took minutes with 1 MiB)."""
    run = "r" * 200_000
    job = make_job(run_id=run)
    started = json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)
    assert started["run_id"] == run
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(n["uuid"], n["state"]) for n in st["notifications"]] == [(started["uuid"], "pending")]
    assert f"pending  {started['uuid']}" in cli("drain", "status", *job.args).stdout


# -- the drain monitor, completion by checkpoints, job-breaking and mis-keyed records ---------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("monitor", [None, "false", "yes", " true"])
def test_start_refuses_when_the_drain_monitor_is_off(cli, make_job, monitor):
    job = make_job(monitor=monitor)
    before = job.records()
    r = cli("drain", "start", *job.args, code=14)
    line = error_line(r)
    assert "job.drain-monitor.enabled" in line and "no drain monitor" in line
    assert "--force" in r.stderr.splitlines()[1]
    assert job.records() == before  # nothing written
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert st["drain_monitor_enabled"] is False and st["notifications"] == []
    assert "drain monitor: OFF" in cli("drain", "status", *job.args).stdout

    forced = cli("drain", "start", *job.args, "--force", "-o", "json")
    f = json.loads(forced.stdout)
    assert f["created"] is True and f["drain_monitor_enabled"] is False
    assert any("job.drain-monitor.enabled" in n for n in f["notes"])
    assert [n["uuid"] for n in json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
            ["notifications"]] == [f["uuid"]]


@pytest.mark.timeout(120)
def test_the_drain_monitor_flag_is_read_as_samzas_getboolean(cli, make_job):
    job = make_job(monitor="TRUE")  # "true".equalsIgnoreCase
    assert json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)["drain_monitor_enabled"] is True
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert st["drain_monitor_enabled"] is True
    assert "drain monitor: enabled" in cli("drain", "status", *job.args).stdout


def now_ms() -> int:
    return int(time.time() * 1000)


def put_one(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    producer = open_producer(bootstrap)
    try:
        produce(producer, topic, partition, None, value, bootstrap)
    finally:
        producer.close()


@pytest.mark.timeout(240)
def test_wait_completes_on_checkpoints_when_the_notification_is_never_deleted(cli, tansu, make_job):
    """A standalone job (ZkJobCoordinator, PassthroughJobCoordinator) never tombstones its notification:
    wait finishes on the job's checkpoints instead, and says so (signal "checkpoints")."""
    from statectl.formats.drain import aggregate_partition

    topic, source = intermediate_topic(), f"drain-src-{uuid.uuid4().hex[:8]}"
    job = make_job(intermediate=topic)
    create_topic(tansu.bootstrap, source, partitions=2)
    for p in (0, 1):
        for i in range(5):
            put_one(tansu.bootstrap, source, p, b"in%d" % i)
    fill(tansu, topic, {0: 3, 1: 2})
    time.sleep(0.05)
    n = job.notify()
    time.sleep(0.05)
    put_one(tansu.bootstrap, source, 0, b"after the notification")  # left in the source by the drain
    log = KafkaCheckpointLog(tansu.bootstrap, job.name, "1")
    try:
        def parse_commit(offsets: dict[int, str]) -> None:
            for p, o in offsets.items():
                log.commit_offsets(f"parse-Partition {p}", f"{now_ms()}-1", {f"kafka.{source}.{p}": o})

        # Periodic commits after the notification, before the job drained: no drain yet.
        parse_commit({0: "4", 1: "2"})
        log.commit_offsets("count-Partition 0", f"{now_ms()}-1", {f"kafka.{topic}.0": "2"})
        log.commit_offsets("count-Partition 1", f"{now_ms()}-1", {f"kafka.{topic}.1": "1"})
        st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
        assert [(x["uuid"], x["state"], x["signal"]) for x in st["notifications"]] == [(n.uuid, "pending", None)]
        gaps = " | ".join(st["checkpoint_gaps"])
        assert f"input {source}[1] checkpointed to 3, but 5 records" in gaps, gaps
        assert f"{source}[0]" not in gaps  # covered to what was written before the notification
        assert "no drain message of run" in gaps
        r = cli("drain", "wait", *job.args, "--timeout", "2", "--poll", "0.5", code=1)
        assert "checkpoints do not show a drain" in error_line(r)

        # The job drains: the parse tasks send their drain messages to the aggregate partition, the task
        # reading it broadcasts, every task commits after; the notification stays.
        agg = aggregate_partition(topic, 2)
        for p in (0, 1):
            put_one(tansu.bootstrap, topic, agg, encode_control(drain_message(f"parse-Partition {p}", RUN)))
        put_one(tansu.bootstrap, topic, 1 - agg, encode_control(drain_message(None, RUN)))
        time.sleep(0.05)
        parse_commit({0: "4", 1: "4"})
        st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
        assert [x["state"] for x in st["notifications"]] == ["seen"]  # the intermediate partitions are not consumed
        assert any("messages in flight" in g for g in st["checkpoint_gaps"])
        ends = {i["partition"]: i["end_offset"] for i in st["intermediate"]}
        for p in (0, 1):
            log.commit_offsets(f"count-Partition {p}", f"{now_ms()}-1", {f"kafka.{topic}.{p}": str(ends[p] - 1)})
    finally:
        log.close()

    w = json.loads(cli("drain", "wait", *job.args, "--timeout", "30", "--poll", "0.5", "-o", "json").stdout)
    assert (w["drained"], w["signal"], w["uuids"], w["in_flight"]) == (True, "checkpoints", [n.uuid], 0)
    text = cli("drain", "wait", *job.args, "--timeout", "30").stdout
    assert text.startswith("drained (checkpoints):") and "shown drained by the job's checkpoints" in text
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(x["state"], x["signal"]) for x in st["notifications"]] == [("drained", "checkpoints")]
    assert st["checkpoint_gaps"] == []
    assert "signal checkpoints" in cli("drain", "status", *job.args).stdout
    job.stream.refresh()
    assert job.stream.namespace_values(DRAIN_NAMESPACE)[n.uuid] is not None  # never deleted


@pytest.mark.timeout(120)
def test_a_cleared_notification_says_its_signal(cli, make_job):
    job = make_job()
    n = job.notify()
    job.stream.clear_notification(n.uuid)  # the YARN coordinator's DrainUtils.cleanup
    w = json.loads(cli("drain", "wait", *job.args, "--timeout", "10", "-o", "json").stdout)
    assert (w["drained"], w["signal"]) == (True, "cleared")
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(x["state"], x["signal"]) for x in st["notifications"]] == [("cleared", "cleared")]


def put_raw(job: Job, key: str, value: bytes | None) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=job.bootstrap, acks="all", max_request_size=16 << 20)
    try:
        meta = producer.send(job.stream.topic, key=encode_key(DRAIN_NAMESPACE, key), value=value,
                             partition=0).get(timeout=60)
        return meta.offset
    finally:
        producer.close()


@pytest.mark.timeout(240)
def test_job_breaking_records_are_named_and_cancel_bad_removes_them(cli, make_job):
    job = make_job()
    good = job.notify()
    old = job.notify("OLD-RUN")
    u = str(uuid.uuid4())
    bad = {
        put_raw(job, "garbage", b"\x00\xff garbage bytes"): ("garbage", "not UTF-8"),
        put_raw(job, u, b'{"uuid":"%s","drainMode":"DEFAULT"}' % u.encode()): (u, "'runId' missing"),
        put_raw(job, "wrong-types", b'{"uuid":"%s","runId":7,"drainMode":"DEFAULT"}' % u.encode()):
            ("wrong-types", "'runId' not a string (number)"),
        put_raw(job, "not-a-uuid", b'{"uuid":"1-2-3","runId":"r","drainMode":"DEFAULT"}'): ("not-a-uuid", "not a UUID"),
        put_raw(job, "huge", b"{" + b"x" * (10 << 20)): ("huge", "not JSON"),
    }
    r = cli("drain", "status", *job.args, "-o", "json")
    assert "Traceback" not in r.stderr
    st = json.loads(r.stdout)
    assert all(set(b) == BREAKING_FIELDS for b in st["job_breaking"])
    got = {b["offset"]: (b["key"], b["why"]) for b in st["job_breaking"]}
    assert sorted(got) == sorted(bad)
    for offset, (key, why) in bad.items():
        assert got[offset][0] == key and why in got[offset][1], (got[offset], why)
    assert len(max(got.values(), key=lambda kw: len(kw[1]))[1]) < 300  # a 10 MB value gives a short reason
    assert {b["offset"]: b["bytes"] for b in st["job_breaking"]}[max(bad)] == (10 << 20) + 1
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(good.uuid, "pending"), (old.uuid, "stale")]
    text = cli("drain", "status", *job.args).stdout
    assert text.count("JOB-BREAKING") == 5 and "cancel --bad" in text and max(len(x) for x in text.splitlines()) < 400

    c = json.loads(cli("drain", "cancel", *job.args, "--bad", "-o", "json").stdout)
    assert sorted(b["offset"] for b in c["bad_removed"]) == sorted(bad) and c["cancelled"] == []
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert st["job_breaking"] == []
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(good.uuid, "pending"), (old.uuid, "stale")]
    assert "no record Samza cannot read" in error_line(cli("drain", "cancel", *job.args, "--bad", code=10))
    assert "--uuid" in error_line(cli("drain", "cancel", *job.args, "--bad", "--uuid", good.uuid, code=2))


@pytest.mark.timeout(180)
def test_a_notification_under_another_key_is_shown_and_cancelled(cli, make_job):
    job = make_job()
    u = str(uuid.uuid4())
    # Samza reads values only: this drains run RUN although its key is no uuid (and its uuid upper case).
    job.stream.put(DRAIN_NAMESPACE, "my-drain", encode_notification(DrainNotification(u.upper(), RUN)))
    r = cli("drain", "status", *job.args, "-o", "json")
    st = json.loads(r.stdout)
    assert [(x["uuid"], x["key"], x["state"], x["run_id"]) for x in st["notifications"]] == [
        (u, "my-drain", "pending", RUN)]
    assert any("stored under key 'my-drain'" in note for note in st["notes"])
    assert st["job_breaking"] == []
    assert "key 'my-drain'" in cli("drain", "status", *job.args).stdout
    s = json.loads(cli("drain", "start", *job.args, "-o", "json").stdout)
    assert (s["uuid"], s["created"]) == (u, False)  # the pending one, whatever its key

    c = json.loads(cli("drain", "cancel", *job.args, "--uuid", u.upper(), "-o", "json").stdout)
    assert c["cancelled"] == [u]
    job.stream.refresh()
    assert job.stream.namespace_values(DRAIN_NAMESPACE)["my-drain"] is None  # its own key tombstoned
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(u, "cleared")]

    # Samza's cleanup tombstones the canonical key: the mis-keyed record stays live; status says so and
    # cancel --uuid removes it.
    v = str(uuid.uuid4())
    job.stream.put(DRAIN_NAMESPACE, "other-key", encode_notification(DrainNotification(v, RUN)))
    job.stream.clear_notification(v)
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert ("cleared", "cleared") in [(x["state"], x["signal"]) for x in st["notifications"] if x["uuid"] == v]
    assert any("other-key" in note and "still live" in note for note in st["notes"])
    c = json.loads(cli("drain", "cancel", *job.args, "--uuid", v, "-o", "json").stdout)
    assert c["cancelled"] == [v]
    job.stream.refresh()
    assert job.stream.namespace_values(DRAIN_NAMESPACE)["other-key"] is None


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run_id", ["missing", "blank", "malformed"])
def test_cancel_without_a_known_run_refuses_as_start_does_and_withdraws_nothing(cli, make_job, run_id):
    """No readable app.run.id: every notification would read as another run's, the current drain included.
    cancel (--all-stale, the default, --dry-run too) refuses as start does (exit 10, pass --run-id), writing
    nothing; with --run-id, --all-stale withdraws the other runs' only; --bad alone needs no run."""
    from statectl.formats.coordinator import SET_CONFIG

    job = make_job(run_id=None)
    if run_id == "blank":
        job.stream.refresh()
        job.stream.write_config({**job.stream.config(), "app.run.id": ""})
    elif run_id == "malformed":
        job.stream.put(SET_CONFIG, "app.run.id", b"\x00 not the JSON of a set-config message")
    current = json.loads(cli("drain", "start", *job.args, "--run-id", RUN, "-o", "json").stdout)["uuid"]
    old = job.notify("OLD-RUN")
    records = job.records()
    for extra in (["--all-stale"], ["--all-stale", "--dry-run"], [], ["--dry-run"], ["--all-stale", "--bad"]):
        r = cli("drain", "cancel", *job.args, *extra, code=10)
        assert "no run id" in error_line(r) and "pass --run-id" in r.stderr.splitlines()[1], (extra, r.stderr)
        assert job.records() == records, extra
    assert "record Samza cannot read" in error_line(cli("drain", "cancel", *job.args, "--bad", code=10))

    c = json.loads(cli("drain", "cancel", *job.args, "--all-stale", "--run-id", RUN, "-o", "json").stdout)
    assert c["cancelled"] == [old.uuid]
    job.stream.refresh()
    values = job.stream.namespace_values(DRAIN_NAMESPACE)
    assert values[old.uuid] is None and values[current] is not None


@pytest.mark.timeout(120)
def test_cancel_all_stale_removes_other_runs_notifications(cli, make_job):
    job = make_job()
    ours = job.notify()
    old = job.notify("OLD-RUN")
    w = str(uuid.uuid4())
    job.stream.put(DRAIN_NAMESPACE, "older", encode_notification(DrainNotification(w, "OLDER-RUN")))
    c = json.loads(cli("drain", "cancel", *job.args, "--all-stale", "-o", "json").stdout)
    assert sorted(c["cancelled"]) == sorted([old.uuid, w]) and c["bad_removed"] == []
    job.stream.refresh()
    values = job.stream.namespace_values(DRAIN_NAMESPACE)
    assert values[old.uuid] is None and values["older"] is None and values[ours.uuid] is not None
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert {x["uuid"]: x["state"] for x in st["notifications"]} == {ours.uuid: "pending", old.uuid: "cleared",
                                                                      w: "cleared"}
    assert "notification of another run" in error_line(cli("drain", "cancel", *job.args, "--all-stale", code=10))


# -- standalone jobs: a drain leaves the source backlog behind; only a stopped job has drained ------------


@pytest.mark.timeout(240)
def test_a_job_lagging_its_sources_drains_and_leaves_the_backlog_behind(cli, tansu, make_job):
    """Samza's drain stops fetching sources (SystemConsumers.drain) and processes only what was fetched: a
    job that lagged its sources drains with their backlog unprocessed. wait says so instead of waiting for
    input the job never reads."""
    from statectl.formats.drain import aggregate_partition

    topic, source = intermediate_topic(), f"drain-src-{uuid.uuid4().hex[:8]}"
    job = make_job(intermediate=topic)
    create_topic(tansu.bootstrap, source, partitions=2)
    for p in (0, 1):
        for i in range(10):
            put_one(tansu.bootstrap, source, p, b"in%d" % i)
    fill(tansu, topic, {0: 3, 1: 2})
    time.sleep(0.05)
    n = job.notify()
    time.sleep(0.05)
    agg = aggregate_partition(topic, 2)
    for p in (0, 1):
        put_one(tansu.bootstrap, topic, agg, encode_control(drain_message(f"parse-Partition {p}", RUN)))
    put_one(tansu.bootstrap, topic, 1 - agg, encode_control(drain_message(None, RUN)))
    time.sleep(0.05)
    log = KafkaCheckpointLog(tansu.bootstrap, job.name, "1")
    try:  # the parse tasks had processed 4 and 7 of their 10 records when they drained
        log.commit_offsets("parse-Partition 0", f"{now_ms()}-1", {f"kafka.{source}.0": "3"})
        log.commit_offsets("parse-Partition 1", f"{now_ms()}-1", {f"kafka.{source}.1": "6"})
        st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
        ends = {i["partition"]: i["end_offset"] for i in st["intermediate"]}
        for p in (0, 1):
            log.commit_offsets(f"count-Partition {p}", f"{now_ms()}-1", {f"kafka.{topic}.{p}": str(ends[p] - 1)})
    finally:
        log.close()

    w = json.loads(cli("drain", "wait", *job.args, "--timeout", "30", "--poll", "0.5", "-o", "json").stdout)
    assert set(w) == WAIT_FIELDS
    assert (w["drained"], w["signal"], w["uuids"]) == (True, "checkpoints", [n.uuid])
    assert all(set(b) == LEFT_BEHIND_FIELDS for b in w["left_behind"])
    assert [(b["stream"], b["partition"], b["task"], b["next_offset"], b["notified_offset"], b["records"])
            for b in w["left_behind"]] == [(source, 0, "parse-Partition 0", 4, 10, 6),
                                           (source, 1, "parse-Partition 1", 7, 10, 3)]
    text = cli("drain", "wait", *job.args, "--timeout", "30").stdout
    assert "9 source records left behind" in text and f"{source}[0] 6" in text, text
    st = json.loads(cli("drain", "status", *job.args, "-o", "json").stdout)
    assert [(x["state"], x["signal"]) for x in st["notifications"]] == [("drained", "checkpoints")]
    assert st["checkpoint_gaps"] == [] and [b["records"] for b in st["left_behind"]] == [6, 3]


@pytest.mark.timeout(240)
def test_without_intermediate_streams_only_a_stopped_job_has_drained(cli, tansu, make_job):
    """A job without intermediate streams sends no drain message anywhere: an ordinary commit after the
    notification is no drain; a drained task stops committing (a running one commits every task.commit.ms,
    a commit deferred at most task.commit.max.delay.ms), and then the drain is complete, with whatever the
    job had not fetched of its sources left behind."""
    source = f"drain-src-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap, source, partitions=1)
    for i in range(5):
        put_one(tansu.bootstrap, source, 0, b"in%d" % i)

    running = make_job()  # the defaults: a commit at least every 120 s while it runs
    n = running.notify()
    time.sleep(0.05)
    with KafkaCheckpointLog(tansu.bootstrap, running.name, "1") as log:  # caught up: covers every record
        log.commit_offsets("Partition 0", f"{now_ms()}-1", {f"kafka.{source}.0": "4"})
    st = json.loads(cli("drain", "status", *running.args, "-o", "json").stdout)
    assert [(x["uuid"], x["state"]) for x in st["notifications"]] == [(n.uuid, "seen")]
    assert any("not shown stopped yet" in g for g in st["checkpoint_gaps"]), st["checkpoint_gaps"]
    r = cli("drain", "wait", *running.args, "--timeout", "2", "--poll", "0.5", code=1)
    assert "not shown stopped yet" in error_line(r)

    stopped = make_job(config={"task.commit.ms": "200", "task.commit.max.delay.ms": "100"})
    n = stopped.notify()
    time.sleep(0.05)
    with KafkaCheckpointLog(tansu.bootstrap, stopped.name, "1") as log:  # its final commit: 2 records behind
        log.commit_offsets("Partition 0", f"{now_ms()}-1", {f"kafka.{source}.0": "2"})
    w = json.loads(cli("drain", "wait", *stopped.args, "--timeout", "60", "--poll", "0.2", "-o", "json").stdout)
    assert (w["drained"], w["signal"], w["uuids"]) == (True, "checkpoints", [n.uuid])
    assert [(b["stream"], b["partition"], b["next_offset"], b["records"]) for b in w["left_behind"]] == [
        (source, 0, 3, 2)]
    assert any("stopped committing" in note for note in w["notes"]), w["notes"]


@pytest.mark.timeout(180)
def test_a_source_on_another_cluster_is_checked_there(cli, tansu, tansu_other, make_job):
    """What a drain left behind of a source on another cluster is read on that system's brokers
    (systems.<system>.consumer.bootstrap.servers), not looked for on --kafka."""
    source = tansu_other.create_topic(partitions=1)
    for i in range(6):
        put_one(tansu_other.bootstrap, source, 0, b"in%d" % i)
    job = make_job(config={"task.commit.ms": "200", "task.commit.max.delay.ms": "100",
                           "systems.east.consumer.bootstrap.servers": tansu_other.bootstrap})
    n = job.notify()
    time.sleep(0.05)
    with KafkaCheckpointLog(tansu.bootstrap, job.name, "1") as log:
        log.commit_offsets("Partition 0", f"{now_ms()}-1", {f"east.{source}.0": "1"})
    w = json.loads(cli("drain", "wait", *job.args, "--timeout", "60", "--poll", "0.2", "-o", "json").stdout)
    assert (w["drained"], w["uuids"]) == (True, [n.uuid])
    assert [(b["stream"], b["next_offset"], b["notified_offset"], b["records"]) for b in w["left_behind"]] == [
        (source, 2, 6, 4)]
    assert not any("not on" in note for note in w["notes"]), w["notes"]
