"""End of stream end to end (as Samza's EndOfStreamMessage): the two-stage example job
(examples/pageviews) with its source declared bounded (``--config streams.page-views-raw.samza.bounded=true``)
as real OS processes on Tansu: it reads the source to its end as of the start of the run, ends by itself
with every record counted exactly once, the end of stream aggregated through the shuffle; a count
container killed in the middle of the end of stream is restarted and the job still ends; and
``task.callback.drain.timeout.ms`` fails a drain whose ``on_drain`` overruns it. The aggregating count task
dying between saving its end-of-stream states and writing its final checkpoint runs in-process (a failpoint
places the crash) on an intermediate stream the test writes; so does a count task with two stores dying at
each point of its commit (between the stores' uploads, before and after its one checkpoint)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.records import PENDING
from statectl.catalog.refs import StoreRef
from statectl.engine.restore import RestoreOptions, restore
from statectl.formats.checkpoint import BLOB_STORE_FACTORY
from statectl.formats.coordinator import new_run_id
from statectl.formats.drain import (
    END_OF_STREAM,
    USER_MESSAGE,
    aggregate_partition,
    decode_control,
    drain_message,
    encode_control,
    encode_user_message,
    end_of_stream_message,
)
from statectl.kafka.client import open_producer
from statectl.kafka.coordinator import CoordinatorStream
from statectl.pipeline.container import Container
from statectl.pipeline.control import load_end_states
from statectl.pipeline.runner import prepare
from statectl.pipeline.state import Runtime
from statectl.session import Session
from tests.integration.test_drain_pipeline import (  # noqa: F401 - the fixtures are used by name
    FAST,
    INTERMEDIATE,
    JOB,
    PAGES,
    ROOT,
    SOURCE,
    Feeder,
    Job,
    broker,
    cli,
    clean_env,
    consumed,
    counted,
    gone,
    jobs,
    read_all,
    source_progress,
    wait_until,
)
from tests.tools.standby_helpers import cli_here

pytestmark = pytest.mark.timeout(300)

BOUNDED = [*FAST, f"streams.{SOURCE}.samza.bounded=true"]
SLOW_JOB = Path(__file__).resolve().parent / "pageviews_slow_drain.py"


def produce(bootstrap: str, per_partition: dict[int, int]) -> int:
    """Page views to the given source partitions (page i % 12 for the i-th record of each); how many."""
    producer = open_producer(bootstrap)
    n = 0
    for p, count in per_partition.items():
        for i in range(count):
            page = PAGES[i % len(PAGES)]
            producer.send(SOURCE, value=json.dumps({"page": page, "user": n, "ts": 1_700_000_000_000 + n}).encode(),
                          partition=p)
            n += 1
    producer.flush()
    producer.close()
    return n


def source_pages(bootstrap: str, ends: dict[int, int]) -> Counter:
    """Page -> the source records below ``ends`` (partition -> next offset)."""
    total: Counter = Counter()
    for p, records in read_all(bootstrap, SOURCE).items():
        total.update(json.loads(r.value)["page"] for r in records if r.offset < ends[p])
    return total


def control_messages(bootstrap: str, intermediate: dict[int, list] | None = None) -> dict[int, list]:
    """Per intermediate partition: (offset, timestamp, control message) of its control messages (of
    ``intermediate``, the stream's records as read_all gives them, when the caller read them already)."""
    out: dict[int, list] = {}
    for p, records in (intermediate or read_all(bootstrap, INTERMEDIATE)).items():
        out[p] = [(r.offset, r.timestamp, decode_control(r.value)) for r in records if r.value[0] != USER_MESSAGE]
    return out


def restored_totals(bootstrap: str, tmp: Path, blobstore: str) -> Counter:
    """Page -> the totals held by the count tasks' final snapshots (no pane may be left unfired)."""
    import rocksdict

    totals: Counter = Counter()
    for p in range(3):
        target = tmp / f"restored-{p}"
        cli_here(tmp, "restore", "--kafka", bootstrap, "--blobstore", blobstore, "--job", JOB, "--task",
                 f"count-Partition {p}", "--store", "counts", "--target-dir", str(target))  # a read-back: in-process
        db = rocksdict.Rdict(str(target), rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
        try:
            for key, value in db.items():
                assert not key.startswith(b"pane/"), "a pane was left unfired"
                if key.startswith(b"total/"):
                    totals[key[len(b"total/"):].decode()] += int(value)
        finally:
            db.close()
    return totals


def assert_ended_cleanly(bootstrap: str, tmp: Path, blobstore: str, bounds: dict[int, int], *,
                         exactly_once: bool = True) -> None:
    """The job read its source exactly to ``bounds`` and its intermediate stream to the end; every record
    counted (in the emitted panes exactly once, or at least once after a kill; in the final snapshots
    exactly); the end of stream aggregated: the four parse tasks' end-of-stream messages on the aggregate
    partition, the last of them its last record, then one broadcast on each other partition (Samza's
    ControlMessageSender.broadcastToOtherPartitions), its last record; each partition's last record is
    the last offset the count task reading it checkpointed."""
    cps, _ = KafkaCheckpointLog(bootstrap, JOB, "1").latest_checkpoints()
    assert {p: cps[f"parse-Partition {p}"].input_offsets.get(f"kafka.{SOURCE}.{p}") for p in range(4)} == \
        {p: str(bounds[p] - 1) for p in range(4)}  # the parse checkpoints stop exactly at the bounds
    expected = source_pages(bootstrap, bounds)
    assert sum(expected.values()) == sum(bounds.values())
    assert consumed(bootstrap) == expected
    got = counted(bootstrap)
    if exactly_once:
        assert got == expected
    else:
        assert all(got[page] >= n for page, n in expected.items()), (got, expected)
    assert restored_totals(bootstrap, tmp, blobstore) == expected

    intermediate = read_all(bootstrap, INTERMEDIATE)
    controls = control_messages(bootstrap, intermediate)
    agg = aggregate_partition(INTERMEDIATE, 3)
    ends = {p: len(records) for p, records in intermediate.items()}
    producers = [(off, ts, m) for off, ts, m in controls[agg] if m.type == END_OF_STREAM and m.task_name]
    assert sorted({m.task_name for _, _, m in producers}) == [f"parse-Partition {p}" for p in range(4)]
    last_producer_ts = max(ts for _, ts, _ in producers)
    for p in range(3):
        broadcasts = [(off, ts) for off, ts, m in controls[p] if m.type == END_OF_STREAM and m.task_name is None]
        if p == agg:
            assert broadcasts == [], controls[p]
            off = max(o for o, _, _ in producers)
        else:
            assert len(broadcasts) == 1, controls[p]
            off, ts = broadcasts[0]
            assert ts >= last_producer_ts  # broadcast only once every upstream task had ended
        assert off == ends[p] - 1  # the last record of the partition
        assert cps[f"count-Partition {p}"].input_offsets[f"kafka.{INTERMEDIATE}.{p}"] == str(off)


def test_a_job_with_a_bounded_source_ends_by_itself(broker, tmp_path: Path, jobs):
    # Uneven partitions: parse-Partition 3 is still at work long after the other three have ended.
    bounds = {0: 300, 1: 200, 2: 100, 3: 30_000}
    produce(broker, bounds)
    job = Job(broker, tmp_path, config=BOUNDED)
    jobs.append(job)
    stages = job.wait_for_containers()
    produce(broker, {0: 50, 3: 50})  # after the run started: beyond its end, left for the next run
    agg = aggregate_partition(INTERMEDIATE, 3)

    def producer_eos() -> set[str]:
        return {m.task_name for _, _, m in control_messages(broker)[agg] if m.type == END_OF_STREAM and m.task_name}

    early = wait_until(lambda: producer_eos() or None, timeout=90, why="a parse task ends")
    assert "parse-Partition 3" not in early, early
    # Upstream tasks have ended, one has not: the count tasks wait for it.
    os.kill(stages["parse"], signal.SIGSTOP)
    try:
        time.sleep(3)
        assert "parse-Partition 3" not in producer_eos()
        assert not gone(stages["count"]), "a count task ended before every upstream task had"
        assert not any(m.task_name is None for msgs in control_messages(broker).values() for _, _, m in msgs
                       if m.type == END_OF_STREAM)
    finally:
        os.kill(stages["parse"], signal.SIGCONT)
    assert job.proc.wait(timeout=180) == 0, job.output()
    out = job.output()
    assert "reached the end of its inputs and stopped" in out and "restarting" not in out
    assert_ended_cleanly(broker, tmp_path, job.blobstore, bounds)

    # The next run (a new run id: in BATCH mode a checkpoint topic of its own, KafkaUtil.getCheckpointTopic)
    # processes the sources to their new ends, and ends again.
    more = {0: 50 + 40, 1: 40, 2: 40, 3: 50 + 40}
    produce(broker, {p: 40 for p in range(4)})
    second = Job(broker, tmp_path, config=BOUNDED)
    jobs.append(second)
    assert second.proc.wait(timeout=180) == 0, second.output()
    expected = source_pages(broker, {p: bounds[p] + more[p] for p in range(4)})
    assert consumed(broker) == expected
    assert restored_totals(broker, tmp_path, second.blobstore) == expected
    assert counted(broker) == expected


def test_a_count_container_killed_in_the_middle_of_the_end_of_stream_is_restarted_and_the_job_ends(
        broker, tmp_path: Path, jobs):
    bounds = {p: 5_000 for p in range(4)}
    produce(broker, bounds)
    job = Job(broker, tmp_path, config=BOUNDED)
    jobs.append(job)
    stages = job.wait_for_containers()
    os.kill(stages["count"], signal.SIGSTOP)  # a backlog on the intermediate stream
    wait_until(lambda: gone(stages["parse"]), timeout=120, why="stage 1 reaches the end of its input and exits")
    done = source_progress(broker, INTERMEDIATE)
    os.kill(stages["count"], signal.SIGCONT)
    wait_until(lambda: source_progress(broker, INTERMEDIATE) > done,  # it works through the backlog, commits...
               why="stage 2 commits")
    os.kill(stages["count"], signal.SIGKILL)  # ...and dies before the end
    wait_until(lambda: job.containers().get("count") not in (None, stages["count"]), why="the restart")
    assert job.proc.wait(timeout=180) == 0, job.output()
    assert "restarting it" in job.log_text(), job.output()
    assert_ended_cleanly(broker, tmp_path, job.blobstore, bounds, exactly_once=False)


def shuffled(bootstrap: str, per_partition: int) -> Counter:
    """What the parse stage writes, written by the test: ``per_partition`` page views on each intermediate
    partition and, on the aggregate partition, each parse task's end of stream after a quarter of them;
    page -> the records written."""
    agg = aggregate_partition(INTERMEDIATE, 3)
    producer = open_producer(bootstrap)
    written: Counter = Counter()
    for p in range(3):
        for i in range(per_partition):
            page = PAGES[i % len(PAGES)]
            value = encode_user_message(json.dumps({"page": page, "ts": 1_700_000_000_000 + i}).encode())
            producer.send(INTERMEDIATE, key=page.encode(), value=value, partition=p)
            written[page] += 1
            if p == agg and (i + 1) % (per_partition // 4) == 0:
                task = f"parse-Partition {(i + 1) // (per_partition // 4) - 1}"
                producer.send(INTERMEDIATE, value=encode_control(end_of_stream_message(task)), partition=p)
    producer.flush()
    producer.close()
    return written


def test_a_count_container_dying_between_its_end_states_and_its_checkpoint_resumes_from_the_checkpoint(
        broker, tmp_path: Path):
    from examples.pageviews.job import JOB as PAGEVIEWS

    run_id = new_run_id()
    # Commits only when a task ends: the aggregating task's final commit is the container's first.
    config = {**dict(kv.split("=", 1) for kv in BOUNDED), "task.commit.ms": "3600000"}
    prepare(PAGEVIEWS, broker, run_id, overrides=config)
    written = shuffled(broker, 400)
    agg = aggregate_partition(INTERMEDIATE, 3)

    def count_stage() -> None:
        with Session.from_env(kafka=broker, blobstore=f"file://{tmp_path / 'blobs'}", job=JOB, job_id="1",
                              env=clean_env(tmp_path), create_blobstore=True) as session:
            Container(PAGEVIEWS, "count", Runtime(broker, tmp_path / "state", run_id, session)).run()

    with failpoints.active("before-kafka-commit=1*raise"), pytest.raises(failpoints.FailpointError):
        count_stage()
    # The crash came after the end states were saved (every parse task's end of stream read), before the
    # checkpoint that covers the records read with them.
    with CoordinatorStream(broker, JOB, "1") as cs:
        cs.require()
        eos = load_end_states(cs, f"count-Partition {agg}", run_id)[1]
    assert len(eos[f"kafka.{INTERMEDIATE}.{agg}"]) == 4, eos
    assert source_progress(broker, INTERMEDIATE) == 0  # no checkpoint written

    count_stage()  # the restart
    assert restored_totals(broker, tmp_path, f"file://{tmp_path / 'blobs'}") == written
    cps, _ = KafkaCheckpointLog(broker, JOB, "1").latest_checkpoints()
    ends = {p: len(records) for p, records in read_all(broker, INTERMEDIATE).items()}
    assert {p: cps[f"count-Partition {p}"].input_offsets[f"kafka.{INTERMEDIATE}.{p}"] for p in range(3)} == \
        {p: str(ends[p] - 1) for p in range(3)}


class TwoStoreCount:
    """The count stage with two stores: every page view counted in "counts" and again in "views", so a
    record applied twice to either store shows."""

    def __init__(self, ctx):
        self.stores = [ctx.stores["counts"], ctx.stores["views"]]

    def process(self, msg, out):
        page = json.loads(msg.value)["page"].encode()
        for store in self.stores:
            store.put(page, str(int(store.get(page) or b"0") + 1).encode())


def two_store_job():
    """The example job with TwoStoreCount as its count stage's task."""
    from examples.pageviews.job import JOB as PAGEVIEWS

    return replace(PAGEVIEWS, stages=tuple(replace(s, task=TwoStoreCount, stores=("counts", "views"))
                                           if s.name == "count" else s for s in PAGEVIEWS.stages))


def two_store_count(bootstrap: str, tmp: str, run_id: str) -> None:
    """The count stage of two_store_job, run ``run_id``, in this process (the test's, or one it starts to be
    killed)."""
    with Session.from_env(kafka=bootstrap, blobstore=f"file://{Path(tmp) / 'blobs'}", job=JOB, job_id="1",
                          env=clean_env(Path(tmp)), create_blobstore=True) as session:
        Container(two_store_job(), "count", Runtime(bootstrap, Path(tmp) / "state", run_id, session)).run()


def feed_and_drain(bootstrap: str, run_id: str, per_partition: int, written: Counter) -> None:
    """Page views on each intermediate partition (counted in ``written``), then the run's drain there: every
    count task drains, its drain commit its only one in the run."""
    producer = open_producer(bootstrap)
    for p in range(3):
        for i in range(per_partition):
            page = PAGES[(i + p) % len(PAGES)]
            producer.send(INTERMEDIATE, key=page.encode(), partition=p,
                          value=encode_user_message(json.dumps({"page": page, "ts": 1_700_000_000_000}).encode()))
            written[page] += 1
        producer.send(INTERMEDIATE, value=encode_control(drain_message(None, run_id)), partition=p)
    producer.flush()
    producer.close()


def test_a_task_with_two_stores_dying_in_its_commit_restarts_with_both_stores_exact(broker, tmp_path: Path):
    config = {**dict(kv.split("=", 1) for kv in FAST), "task.commit.ms": "3600000"}  # commits only on drain
    blobstore, written = f"file://{tmp_path / 'blobs'}", Counter()

    def pending_records() -> list[str]:
        with Session.from_env(kafka=broker, blobstore=blobstore, job=JOB, job_id="1", env=clean_env(tmp_path)) as s:
            return [f"{p} {store}" for p in range(3) for store in ("counts", "views")
                    for r in s.catalog.records(StoreRef(JOB, "1", f"count-Partition {p}", store)) if r.state == PENDING]

    first, second = new_run_id(), new_run_id()
    prepare(two_store_job(), broker, first, overrides=config)
    feed_and_drain(broker, first, 200, written)
    two_store_count(broker, str(tmp_path), first)  # every task's checkpoint: both stores, its first 200 records
    prepare(two_store_job(), broker, second, overrides=config)
    feed_and_drain(broker, second, 300, written)
    # The first task to drain dies: killed after uploading "counts", before "views" (its leases left held);
    # failing with both uploaded and recorded pending in the catalog, before its checkpoint; failing after its
    # checkpoint, before the catalog says committed.
    killed = subprocess.run([sys.executable, "-c", "import sys; from tests.integration.test_eos_pipeline import "
                             "two_store_count; two_store_count(*sys.argv[1:])", broker, str(tmp_path), second],
                            cwd=ROOT, env={**clean_env(tmp_path), "STATECTL_FAILPOINTS": "before-upload=1*off->1*kill"},
                            capture_output=True, timeout=180)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    for failpoint in ("before-kafka-commit=1*raise", "after-kafka-commit=1*raise"):
        with failpoints.active(failpoint), pytest.raises(failpoints.FailpointError):
            two_store_count(broker, str(tmp_path), second)
        if failpoint.startswith("before-kafka-commit"):
            assert pending_records(), "no store's snapshot was left newer in the catalog than in the checkpoint"
    two_store_count(broker, str(tmp_path), second)

    # What the next start restores: each task's one checkpoint, both stores' snapshots and its offsets.
    cps, _ = KafkaCheckpointLog(broker, JOB, "1").latest_checkpoints()
    assert {cps[f"count-Partition {p}"].input_offsets[f"kafka.{INTERMEDIATE}.{p}"] for p in range(3)} == \
        {str(200 + 1 + 300 + 1 - 1)}  # every record and both drains
    assert restored_counts(broker, tmp_path, blobstore, cps, "counts") == written  # none applied twice, none lost
    assert restored_counts(broker, tmp_path, blobstore, cps, "views") == written


def restored_counts(bootstrap: str, tmp: Path, blobstore: str, cps: dict, store: str) -> Counter:
    """Page -> the counts held by the snapshots of ``store`` the count tasks' checkpoints ``cps`` name."""
    import rocksdict

    totals: Counter = Counter()
    with Session.from_env(kafka=bootstrap, blobstore=blobstore, job=JOB, job_id="1", env=clean_env(tmp)) as session:
        for p in range(3):
            task, target = f"count-Partition {p}", tmp / "restored" / store / str(p)
            snapshot = cps[task].state_checkpoint_markers[BLOB_STORE_FACTORY][store]
            restore(RestoreOptions(StoreRef(JOB, "1", task, store), target, snapshot=snapshot), session.blobstore,
                    session.catalog)
            db = rocksdict.Rdict(str(target), rocksdict.Options(raw_mode=True),
                                 access_type=rocksdict.AccessType.read_only())
            try:
                totals.update({key.decode(): int(value) for key, value in db.items()})
            finally:
                db.close()
    return totals


def test_a_drain_callback_longer_than_the_drain_timeout_fails_the_container(broker, tmp_path: Path, jobs):
    # The coordinator gives up after 2 restarts of a stage (the pipeline's limit is 10: the same path, 11 starts).
    restarts = 2
    job = Job(broker, tmp_path, script=SLOW_JOB, env={"SLOW_DRAIN_S": "30", "SLOW_DRAIN_RESTARTS": str(restarts)},
              config=[*FAST, "task.callback.drain.timeout.ms=700"])
    jobs.append(job)
    job.wait_for_containers()
    Feeder(broker).send(1000)
    wait_until(lambda: sum(counted(broker).values()) > 0, why="the job emits counts")
    cli("drain", "start", "--kafka", broker, "--job", JOB)
    started = time.monotonic()
    code = job.proc.wait(timeout=240)
    out = job.log_text()
    assert code == 1, out[-4000:]
    assert out.count("did not complete within task.callback.drain.timeout.ms=700") == restarts + 1, out[-4000:]
    assert out.count("stage count exited with 1; restarting it") == restarts, out[-4000:]
    assert f"stage count failed {restarts + 1} times; giving up" in out
    # Each attempt was cut at the timeout, not after the 30 s sleep.
    assert time.monotonic() - started < (restarts + 1) * 30


def test_a_drain_callback_within_the_drain_timeout_drains(broker, tmp_path: Path, jobs):
    job = Job(broker, tmp_path, script=SLOW_JOB, env={"SLOW_DRAIN_S": "1"},
              config=[*FAST, "task.callback.drain.timeout.ms=10000"])
    jobs.append(job)
    job.wait_for_containers()
    Feeder(broker).send(1000)
    wait_until(lambda: sum(counted(broker).values()) > 0, why="the job emits counts")
    cli("drain", "start", "--kafka", broker, "--job", JOB)
    assert job.proc.wait(timeout=180) == 0, job.output()
    assert "did not complete" not in job.log_text(), job.output()
