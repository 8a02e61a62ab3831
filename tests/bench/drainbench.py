"""make bench, drain: how long a drain takes next to the pipeline's own throughput, and how long
``drain status`` takes on a job with 64 intermediate partitions. On one Tansu broker started here.

1. Throughput: the example job (examples/pageviews) with its count stage stopped (SIGSTOP) while 100 000
   page views go through the parse stage into the intermediate stream; the count stage is let go and
   timed until nothing is in flight. throughput = messages / seconds.
2. Drain: the same backlog in a new deployment; the count stage is let go and ``statectl drain start``
   runs at once; timed from there until ``statectl drain wait`` returns (both whole processes). The
   drain should cost about in-flight / throughput + one poll interval + the final commit.
3. ``statectl drain status`` (a whole process, and the engine's own duration) on a job whose config names
   an intermediate stream of 64 partitions, each holding records, with 64 tasks' checkpoints.

    .venv/bin/python -m tests.bench.drainbench [--messages 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pageviews" / "job.py"
STATECTL = str(Path(sys.executable).parent / "statectl")
SOURCE, INTERMEDIATE, OUTPUT, JOB = "page-views-raw", "page-views-1-partition_by-by-page", "page-view-counts", "page-views"
POLL_MS = 500


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    return dict(env, XDG_CONFIG_HOME=str(work / "cfg"), XDG_DATA_HOME=str(work / "data"))


def _start_job(bootstrap: str, work: Path) -> subprocess.Popen:
    log = open(work / f"job-{time.time_ns()}.log", "wb")
    return subprocess.Popen([sys.executable, str(EXAMPLE), "run", "--kafka", bootstrap, "--state-dir",
                             str(work / "state"), "--blobstore", f"file://{work / 'blobs'}", "--config",
                             f"job.drain-monitor.poll.interval.ms={POLL_MS}"],
                            env=_env(work), stdout=log, stderr=subprocess.STDOUT)


def _container(job: subprocess.Popen, stage: str, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if ppid == job.pid and b"--stage" in cmd and cmd[cmd.index(b"--stage") + 1] == stage.encode():
                return int(entry.name)
        time.sleep(0.1)
    raise RuntimeError(f"no {stage} container")


def _in_flight(bootstrap: str) -> int:
    from statectl.engine.drain.model import DrainTarget
    from statectl.engine.drain.status import status

    return status(DrainTarget(bootstrap, JOB)).in_flight


def _produce(bootstrap: str, n: int) -> None:
    from statectl.kafka.client import open_producer

    producer = open_producer(bootstrap)
    try:
        now = int(time.time() * 1000)
        for i in range(n):
            producer.send(SOURCE, value=json.dumps({"page": f"/p/{i % 200}", "user": i, "ts": now}).encode(),
                          partition=i % 4)
        producer.flush()
    finally:
        producer.close()


def _backlog(bootstrap: str, work: Path, n: int) -> tuple[subprocess.Popen, int]:
    """A deployment with ``n`` messages in flight on the intermediate stream and its count stage stopped."""
    job = _start_job(bootstrap, work)
    count = _container(job, "count")
    _container(job, "parse")
    time.sleep(2)  # both containers polling
    os.kill(count, signal.SIGSTOP)
    _produce(bootstrap, n)
    deadline = time.monotonic() + 600
    while _in_flight(bootstrap) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the parse stage did not forward the backlog")
        time.sleep(0.5)
    return job, count


def _stop(job: subprocess.Popen) -> None:
    if job.poll() is None:
        job.terminate()
        job.wait(timeout=120)


def bench(work: Path, messages: int = 100_000, partitions: int = 64) -> dict[str, Any]:
    from statectl.kafka.client import create_topic
    from tests.servers import TansuServer

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"messages": messages, "poll_interval_s": POLL_MS / 1000}
    with TansuServer() as tansu:
        b = tansu.bootstrap
        create_topic(b, SOURCE, partitions=4)
        create_topic(b, OUTPUT, partitions=1)

        # 1. throughput
        job, count = _backlog(b, work, messages)
        t0 = time.monotonic()
        os.kill(count, signal.SIGCONT)
        while _in_flight(b) > 0:
            time.sleep(0.1)
        out["throughput_s"] = round(time.monotonic() - t0, 2)
        out["throughput_msg_s"] = round(messages / out["throughput_s"])
        _stop(job)

        # 2. drain
        job, count = _backlog(b, work, messages)
        os.kill(count, signal.SIGCONT)
        t0 = time.monotonic()
        subprocess.run([STATECTL, "drain", "start", "--kafka", b, "--job", JOB], check=True, capture_output=True,
                       env=_env(work))
        started = time.monotonic()
        waited = subprocess.run([STATECTL, "drain", "wait", "--kafka", b, "--job", JOB, "--timeout", "600",
                                 "--poll", "0.2", "-o", "json"], capture_output=True, text=True, env=_env(work))
        out["drain_s"] = round(time.monotonic() - t0, 2)
        out["drain_start_s"] = round(started - t0, 2)
        if waited.returncode != 0:
            raise RuntimeError(f"drain wait failed: {waited.stderr}")
        job.wait(timeout=120)
        out["expected_s"] = round(messages / out["throughput_msg_s"] + POLL_MS / 1000, 2)
        out["drain_vs_expected"] = round(out["drain_s"] / out["expected_s"], 2)

        # 3. drain status on 64 intermediate partitions
        out.update(_status64(b, work, partitions))
    return out


def _status64(bootstrap: str, work: Path, partitions: int) -> dict[str, Any]:
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.formats.coordinator import new_run_id
    from statectl.kafka.client import create_topic, open_producer
    from statectl.kafka.coordinator import CoordinatorStream

    job, topic = "wide", "wide-1-partition_by-p1"
    with CoordinatorStream(bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"app.run.id": new_run_id(), f"streams.{topic}.samza.intermediate": "true",
                         f"streams.{topic}.samza.physical.name": topic, f"streams.{topic}.samza.system": "kafka"})
    create_topic(bootstrap, topic, partitions=partitions)
    producer = open_producer(bootstrap)
    for p in range(partitions):
        for i in range(100):
            producer.send(topic, value=b"\x00" + b"x" * 100, partition=p)
    producer.flush()
    producer.close()
    log = KafkaCheckpointLog(bootstrap, job, "1")
    for p in range(partitions):
        log.commit_offsets(f"Partition {p}", f"{int(time.time() * 1000)}-{p}", {f"kafka.{topic}.{p}": "49"})
    log.close()
    walls, engine = [], []
    for _ in range(5):
        t0 = time.monotonic()
        r = subprocess.run([STATECTL, "drain", "status", "--kafka", bootstrap, "--job", job, "-o", "json"],
                           capture_output=True, text=True, env=_env(work), check=True)
        walls.append(time.monotonic() - t0)
        st = json.loads(r.stdout)
        engine.append(st["duration_s"])
        assert len(st["intermediate"]) == partitions and st["in_flight"] == partitions * 50, st["in_flight"]
    return {"status_partitions": partitions, "status_wall_s": round(statistics.median(walls), 3),
            "status_engine_s": round(statistics.median(engine), 3)}


def report_lines(r: dict[str, Any]) -> list[str]:
    return [
        f"pipeline throughput (count stage, from a backlog): {r['throughput_msg_s']} msg/s "
        f"({r['messages']} messages in {r['throughput_s']} s)",
        f"drain with {r['messages']} messages in flight: {r['drain_s']} s from 'drain start' to 'drain wait' "
        f"returning; expected in-flight/throughput + poll = {r['expected_s']} s -> {r['drain_vs_expected']}x",
        f"drain status, {r['status_partitions']} intermediate partitions: {r['status_wall_s']} s whole process, "
        f"{r['status_engine_s']} s in the engine (medians of 5)",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--work", type=Path, default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="drainbench-") as tmp:
        r = bench(args.work or Path(tmp), args.messages, args.partitions)
    print("\n".join(report_lines(r)))
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
