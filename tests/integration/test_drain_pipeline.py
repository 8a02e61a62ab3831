"""Drain end to end: the two-stage example job (examples/pageviews) as real OS processes on a
real Kafka-protocol broker (Tansu, one per test: the example's topic names are fixed), drained with the
statectl CLI while input is still being produced, killed in the middle of a drain, drained with a
notification written before it started; notifications of other runs ignored, a cancel honoured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.formats.drain import encode_control, drain_message
from statectl.kafka.client import create_topic, open_consumer, open_producer
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.tails import read_tails
from tests.servers import TansuServer
from tests.tools.standby_helpers import cli_here, process_state
from tests.tools.standby_helpers import wait_until as standby_wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pageviews" / "job.py"
STATECTL = str(Path(sys.executable).parent / "statectl")
SOURCE, INTERMEDIATE, OUTPUT = "page-views-raw", "page-views-1-partition_by-by-page", "page-view-counts"
JOB = "page-views"
PAGES = [f"/page/{i}" for i in range(12)]
FAST = ["task.commit.ms=1000", "task.window.ms=500", "job.drain-monitor.poll.interval.ms=300"]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def broker():
    server = TansuServer().start()
    try:
        create_topic(server.bootstrap, SOURCE, partitions=4)
        create_topic(server.bootstrap, OUTPUT, partitions=1)
        yield server.bootstrap
    finally:
        server.stop()


def clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    return dict(env, XDG_CONFIG_HOME=str(tmp / "cfg"), XDG_DATA_HOME=str(tmp / "data"))


class Job:
    """One deployment of the example job: its coordinator process and the container processes it starts."""

    def __init__(self, bootstrap: str, tmp: Path, *, run_id: str | None = None, config: list[str] = FAST,
                 script: Path = EXAMPLE, env: dict[str, str] | None = None):
        self.bootstrap, self.tmp = bootstrap, tmp
        self.blobstore = f"file://{tmp / 'blobs'}"
        args = [sys.executable, str(script), "run", "--kafka", bootstrap, "--state-dir", str(tmp / "state"),
                "--blobstore", self.blobstore]
        if run_id:
            args += ["--run-id", run_id]
        for item in config:
            args += ["--config", item]
        self.log = open(tmp / f"job-{uuid.uuid4().hex[:6]}.log", "wb")
        self.proc = subprocess.Popen(args, env={**clean_env(tmp), **(env or {})}, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def containers(self) -> dict[str, int]:
        """stage -> pid of its live container process."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.proc.pid and b"container" in cmd and b"--stage" in cmd:
                found[cmd[cmd.index(b"--stage") + 1].decode()] = int(entry.name)
        return found

    def wait_for_containers(self, stages=("parse", "count")) -> dict[str, int]:
        deadline = time.monotonic() + 60
        while True:
            found = self.containers()
            if all(s in found for s in stages):
                return found
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, f"containers did not start: {self.output()}"
            time.sleep(0.1)

    def signal(self, stage: str, sig: int) -> None:
        os.kill(self.wait_for_containers((stage,))[stage], sig)

    def output(self) -> str:
        """The log's tail, for an assertion's message."""
        return self.log_text()[-4000:]

    def log_text(self) -> str:
        """The whole log, for what a test looks for in it: on a busy machine the clients' warnings can push
        a line out of the tail."""
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        containers = self.containers()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for pid in containers.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


@pytest.fixture
def jobs():
    started: list[Job] = []
    yield started
    for job in started:
        job.stop()


class Feeder:
    """Produces page views (round-robin over the source partitions) on a thread until stopped."""

    def __init__(self, bootstrap: str, rate_per_s: float = 2000):
        self.bootstrap, self.rate = bootstrap, rate_per_s
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def send(self, n: int) -> None:
        producer = open_producer(self.bootstrap)
        try:
            for _ in range(n):
                self._one(producer)
            producer.flush()
        finally:
            producer.close()

    def _one(self, producer) -> None:
        page = PAGES[self.sent % len(PAGES)]
        value = json.dumps({"page": page, "user": self.sent, "ts": int(time.time() * 1000)}).encode()
        producer.send(SOURCE, value=value, partition=self.sent % 4)
        self.sent += 1

    def _run(self) -> None:
        producer = open_producer(self.bootstrap)
        try:
            while not self._stop.is_set():
                for _ in range(int(self.rate / 20)):
                    self._one(producer)
                producer.flush()
                time.sleep(0.05)
        finally:
            producer.close()

    def start(self) -> "Feeder":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def read_all(bootstrap: str, topic: str) -> dict[int, list]:
    """Every record of ``topic``, per partition."""
    import kafka

    consumer = open_consumer(bootstrap)
    try:
        parts = sorted(consumer.partitions_for_topic(topic) or [])
        ends = {p: t.end for p, t in read_tails(consumer, topic, parts, bootstrap).items()}
        tps = [kafka.TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[int, list] = {p: [] for p in parts}
        deadline = time.monotonic() + 60
        while any(len(out[p]) < ends[p] for p in parts):
            assert time.monotonic() < deadline
            for tp, recs in consumer.poll(timeout_ms=200).items():
                out[tp.partition] += recs
        return out
    finally:
        consumer.close()


def counted(bootstrap: str) -> Counter:
    """Page -> the sum of the counts of every pane the job emitted."""
    total: Counter = Counter()
    for records in read_all(bootstrap, OUTPUT).values():
        for r in records:
            pane = json.loads(r.value)
            total[pane["page"]] += pane["count"]
    return total


def consumed(bootstrap: str) -> Counter:
    """Page -> the source records the job's final checkpoints say it processed (offsets <= checkpointed)."""
    cps, _ = KafkaCheckpointLog(bootstrap, JOB, "1").latest_checkpoints()
    done = {}
    for task, cp in cps.items():
        for ssp, offset in cp.input_offsets.items():
            if ssp.startswith(f"kafka.{SOURCE}."):
                done[int(ssp.rsplit(".", 1)[1])] = int(offset)
    total: Counter = Counter()
    for p, records in read_all(bootstrap, SOURCE).items():
        total.update(json.loads(r.value)["page"] for r in records if r.offset <= done.get(p, -1))
    return total


def gone(pid: int) -> bool:
    """The process is dead (or a zombie nobody reaped yet)."""
    try:
        return process_state(pid) in ("Z", "X")
    except OSError:
        return True


def source_progress(bootstrap: str, topic: str = SOURCE) -> int:
    """How many records of ``topic`` (the source; the intermediate stream: what the count tasks did) the
    tasks' checkpoints cover (0 before the first commit)."""
    try:
        cps, _ = KafkaCheckpointLog(bootstrap, JOB, "1").latest_checkpoints()
    except Exception:  # noqa: BLE001 - no checkpoint topic yet
        return 0
    return sum(int(o) + 1 for cp in cps.values() for ssp, o in cp.input_offsets.items()
               if ssp.startswith(f"kafka.{topic}."))


def cli(*args: str, code: int = 0, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    p = subprocess.run([STATECTL, *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
    return p


def status(bootstrap: str) -> dict:
    """``statectl drain status -o json``'s document, from its engine call in this process: the tests poll it,
    and a statectl process a look cost 0.3 s of CPU (test_drain_cli runs the command itself)."""
    from statectl.cli.common import json_text
    from statectl.engine.drain.model import DrainTarget
    from statectl.engine.drain.status import status as drain_status

    return json.loads(json_text(drain_status(DrainTarget(bootstrap, JOB))))


def wait_until(what, timeout: float = 60.0, why: str = ""):
    """tests.tools.standby_helpers.wait_until, asking every 0.2 s at most (the checks here read topics)."""
    return standby_wait_until(what, timeout, why, interval=0.2)


def assert_drained_cleanly(bootstrap: str, tmp: Path, blobstore: str, *, exactly_once: bool = True,
                           totals_exact: bool = True) -> None:
    """After a drain: the intermediate stream consumed to its end by the final checkpoints, every record
    the checkpoints say was processed counted in the emitted panes (exactly once, or at least once after
    a kill), the notification cleared, and each count task's final snapshot restoring to the totals
    (exactly: a snapshot and the offsets it covers are one checkpoint; at least, when a stage-1 task
    was killed after forwarding records it had not checkpointed)."""
    st = status(bootstrap)
    assert st["in_flight"] == 0 and len(st["intermediate"]) == 3
    assert all(i["next_offset"] == i["end_offset"] for i in st["intermediate"]), st["intermediate"]
    assert st["notifications"] and all(n["state"] in ("cleared", "stale") for n in st["notifications"])
    expected, got = consumed(bootstrap), counted(bootstrap)
    assert sum(expected.values()) > 0
    if exactly_once:
        assert got == expected
    else:
        assert all(got[page] >= n for page, n in expected.items()), (got, expected)
    # The stores' final snapshots hold each page's total.
    import rocksdict

    totals: Counter = Counter()
    for p in range(3):
        target = tmp / f"restored-{p}"
        cli_here(tmp, "restore", "--kafka", bootstrap, "--blobstore", blobstore, "--job", JOB, "--task",
                 f"count-Partition {p}", "--store", "counts", "--target-dir", str(target))  # a read-back: in-process
        db = rocksdict.Rdict(str(target), rocksdict.Options(raw_mode=True),
                             access_type=rocksdict.AccessType.read_only())
        try:
            for key, value in db.items(from_key=b"total/"):
                if not key.startswith(b"total/"):
                    break
                totals[key[len(b"total/"):].decode()] += int(value)
            assert not any(k.startswith(b"pane/") for k in db.keys()), "a pane was left unfired"
        finally:
            db.close()
    if totals_exact:
        assert totals == expected
    else:
        assert all(totals[page] >= n for page, n in expected.items()), (totals, expected)


def test_drain_while_input_is_produced(broker, tmp_path: Path, jobs):
    job = Job(broker, tmp_path)
    jobs.append(job)
    feeder = Feeder(broker).start()
    try:
        wait_until(lambda: sum(counted(broker).values()) > 500, why="the job emits counts")
        # Garbage on the coordinator stream must not stop anything.
        with CoordinatorStream(broker, JOB, "1") as cs:
            cs.require()  # the job mapped its stateful tasks to their changelog partitions, as Samza does
            mapping = cs.changelog_partitions()
            assert mapping and all(name.endswith(f"-Partition {p}") for name, p in mapping.items()), mapping
            cs.put("samza-drain-v1", "not-a-uuid", b"{not json")
            cs.put("set-config", "job.garbage", b"[]")
        started = json.loads(cli("drain", "start", "--kafka", broker, "--job", JOB, "-o", "json").stdout)
        assert started["created"] is True
        again = json.loads(cli("drain", "start", "--kafka", broker, "--job", JOB, "-o", "json").stdout)
        assert (again["uuid"], again["created"]) == (started["uuid"], False)
        waited = json.loads(cli("drain", "wait", "--kafka", broker, "--job", JOB, "--timeout", "180", "-o",
                                "json").stdout)
        assert waited["drained"] is True and waited["in_flight"] == 0 and waited["uuids"] == [started["uuid"]]
    finally:
        feeder.stop()
    assert job.proc.wait(timeout=60) == 0, job.output()
    assert feeder.sent > sum(consumed(broker).values())  # input kept coming after the drain: it waits in the source
    assert_drained_cleanly(broker, tmp_path, job.blobstore)
    st = status(broker)
    assert [(n["uuid"], n["state"]) for n in st["notifications"]] == [(started["uuid"], "cleared")]


def test_a_stage_killed_in_the_middle_of_a_drain_is_restarted_and_the_drain_completes(broker, tmp_path: Path, jobs):
    job = Job(broker, tmp_path)
    jobs.append(job)
    job.wait_for_containers()
    Feeder(broker).send(3000)
    wait_until(lambda: sum(counted(broker).values()) > 0, why="the job emits counts")
    # A backlog on the intermediate stream: stage 2 is stopped while stage 1 forwards 20 000 more.
    job.signal("count", signal.SIGSTOP)
    Feeder(broker).send(20_000)
    wait_until(lambda: status(broker)["in_flight"] >= 20_000, why="stage 1 forwards the backlog")
    cli("drain", "start", "--kafka", broker, "--job", JOB)
    wait_until(lambda: any(n["state"] == "seen" for n in status(broker)["notifications"]), why="stage 1 drains")
    first = job.containers()["count"]
    done = source_progress(broker, INTERMEDIATE)
    os.kill(first, signal.SIGCONT)
    wait_until(lambda: source_progress(broker, INTERMEDIATE) > done,  # it works through the backlog, commits...
               why="stage 2 commits")
    os.kill(first, signal.SIGKILL)  # ...and dies in the middle of the drain
    restarted = wait_until(lambda: job.containers().get("count") not in (None, first), why="the restart")
    assert restarted
    cli("drain", "wait", "--kafka", broker, "--job", JOB, "--timeout", "180")
    assert job.proc.wait(timeout=60) == 0, job.output()
    assert "restarting it" in job.log_text(), job.output()
    assert_drained_cleanly(broker, tmp_path, job.blobstore, exactly_once=False)


def test_a_notification_written_before_the_job_starts(broker, tmp_path: Path, jobs):
    # A first deployment leaves a backlog on the intermediate stream when it is killed.
    first = Job(broker, tmp_path, run_id="1700000000000-aaaaaaaa")
    jobs.append(first)
    first.wait_for_containers()
    first.signal("count", signal.SIGSTOP)
    Feeder(broker).send(4000)
    wait_until(lambda: status(broker)["in_flight"] >= 4000, why="stage 1 forwards the input")
    wait_until(lambda: source_progress(broker) == 4000, why="stage 1 commits")
    containers = first.containers()
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(timeout=30)
    # A running container dies with its coordinator; the stopped one gets the signal once it runs again.
    parse = containers["parse"]
    wait_until(lambda: gone(parse), why="the parse container dies with its coordinator")
    os.kill(containers["count"], signal.SIGKILL)
    before = KafkaCheckpointLog(broker, JOB, "1").latest_checkpoints()[0]
    Feeder(broker).send(500)  # new input that the drained deployment must leave in the source
    # The drain for the next deployment is requested before it starts.
    run = "1700000000001-bbbbbbbb"
    started = json.loads(cli("drain", "start", "--kafka", broker, "--job", JOB, "--run-id", run, "-o", "json").stdout)
    assert started["run_id"] == run
    second = Job(broker, tmp_path, run_id=run)
    jobs.append(second)
    assert second.proc.wait(timeout=180) == 0, second.output()
    after = KafkaCheckpointLog(broker, JOB, "1").latest_checkpoints()[0]
    for task, cp in after.items():  # stage 1 read nothing new from its source
        if task.startswith("parse-") and task in before:
            assert cp.input_offsets == before[task].input_offsets, task
    st = status(broker)
    assert st["in_flight"] == 0 and st["run_id"] == run
    assert {n["uuid"]: n["state"] for n in st["notifications"]}[started["uuid"]] == "cleared"
    assert_drained_cleanly(broker, tmp_path, second.blobstore, exactly_once=False, totals_exact=False)


def test_other_runs_drains_are_ignored_and_a_cancel_leaves_the_job_running(broker, tmp_path: Path, jobs):
    job = Job(broker, tmp_path)
    jobs.append(job)
    stages = job.wait_for_containers()
    Feeder(broker).send(1000)
    wait_until(lambda: sum(counted(broker).values()) >= 1000, why="the first counts")
    # A notification and drain control messages of another run: ignored.
    stale = json.loads(cli("drain", "start", "--kafka", broker, "--job", JOB, "--run-id", "1600000000000-deadbeef",
                           "-o", "json").stdout)
    producer = open_producer(broker)
    for p in range(3):
        producer.send(INTERMEDIATE, value=encode_control(drain_message(None, "1600000000000-deadbeef")), partition=p)
    producer.flush()
    producer.close()
    # A drain of this run, withdrawn before the job could see it (its containers are stopped meanwhile).
    for pid in stages.values():
        os.kill(pid, signal.SIGSTOP)
    ours = json.loads(cli("drain", "start", "--kafka", broker, "--job", JOB, "-o", "json").stdout)
    cancelled = json.loads(cli("drain", "cancel", "--kafka", broker, "--job", JOB, "-o", "json").stdout)
    assert cancelled["cancelled"] == [ours["uuid"]]
    for pid in stages.values():
        os.kill(pid, signal.SIGCONT)
    Feeder(broker).send(1000)
    wait_until(lambda: sum(counted(broker).values()) >= 2000, why="the job goes on counting")
    assert job.proc.poll() is None and job.containers() == stages
    states = {n["uuid"]: n["state"] for n in status(broker)["notifications"]}
    assert states == {stale["uuid"]: "stale", ours["uuid"]: "cleared"}
    # Cancelling a drain the job already acts on is refused: stage 2 is held so that it cannot finish.
    os.kill(stages["count"], signal.SIGSTOP)
    cli("drain", "start", "--kafka", broker, "--job", JOB)
    wait_until(lambda: any(n["state"] == "seen" for n in status(broker)["notifications"]), why="stage 1 drains")
    refused = cli("drain", "cancel", "--kafka", broker, "--job", JOB, code=1)
    assert "cannot be undone" in refused.stderr
    os.kill(stages["count"], signal.SIGCONT)
    cli("drain", "wait", "--kafka", broker, "--job", JOB, "--timeout", "180")
    assert job.proc.wait(timeout=60) == 0, job.output()
    assert_drained_cleanly(broker, tmp_path, job.blobstore)
