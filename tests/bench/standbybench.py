"""make bench, standby (issue 10), on one Tansu broker started here:

1. ``statectl standby promote`` (a whole process) of a replica of --small-gib and --big-gib of state with a
   10 000-record changelog tail to catch up: its time must not grow with the state (a tail plus a rename).
2. The follower's apply rate (follow() bootstrapping a replica from a changelog of --records records) next to
   a raw kafka-python KafkaConsumer reading the same partition (statectl's fetch settings, nothing applied),
   interleaved --rounds times: medians and their ratio.
3. The time to a promotable replica on an empty host: seeded from a snapshot (the job's checkpoint names
   it with its changelog position) plus the tail, vs bootstrapped from the changelog alone.
4. Whole containers (issue 18): a job of 3 tasks x 2 stores (6 changelog partitions, --container-records
   records of 100-byte values in all) whose container 0 has its standby container 0-0 on this host.
   ``statectl standby follow --container 0`` (a whole process, from empty replicas until every replica's
   OFFSET-v2 holds its partition's last offset) vs a raw kafka-python KafkaConsumer (a whole process, one
   consumer assigned the same 6 partitions, reading to their ends, nothing applied), interleaved
   --rounds times: medians and their ratio.
5. ``statectl standby failover --container 0`` (a whole process) of that container with each of its 6
   replicas holding --failover-mib of state (and at --failover-small-mib, to show it is flat): the
   replicas are made by the container follower from small changelogs, grown with genstore.make_store
   while it is stopped, followed again; the follower is paused while a tail is written to every
   changelog, resumed, and the failover fences it and promotes every store.

    .venv/bin/python -m tests.bench.standbybench [--small-gib 1 --big-gib 4 --records 500000]
    .venv/bin/python -m tests.bench.standbybench --parts container,failover --container-records 200000 \
        --failover-small-mib 64 --failover-mib 512
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

STATECTL = str(Path(sys.executable).parent / "statectl")
ROOT = Path(__file__).resolve().parents[2]
TAIL = 10_000
PARTS = ("promote", "rates", "seed", "container", "failover")
VALUE = b"v" * 100


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    return dict(env, XDG_CONFIG_HOME=str(work / "cfg"), XDG_DATA_HOME=str(work / "data"))


def _produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    from statectl.kafka.client import open_producer

    producer = open_producer(bootstrap)
    try:
        for i in range(start, start + n):
            producer.send(topic, key=b"k%09d" % (i % 200_000), value=VALUE, partition=0)
        producer.flush()
    finally:
        producer.close()


def _promote(bootstrap: str, work: Path, gib: float) -> float:
    from statectl.catalog.refs import StoreRef
    from statectl.engine.standby.replica import FollowStatus, Replica, write_status
    from statectl.formats.checkpoint import SSP
    from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_offsets
    from statectl.kafka.client import create_topic
    from tests.tools.genstore import make_store

    topic = f"promote-{int(gib * 1024)}m"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, 2 * TAIL)
    replica, active = work / f"state-{topic}" / "s" / "Standby-Partition_0-0", work / f"state-{topic}" / "s" / "Partition_0"
    make_store(replica, int(gib * 1024 ** 3 / 1024), 1024, seed=7, sst_mb=64)
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):  # the replica holds offsets 0..9999: the tail is 10 000
        write_offsets(replica / name, {SSP("kafka", topic, 0): str(TAIL - 1)})
    # The status file a follower writes beside its replica: promote moves only a replica a follower made.
    rep = Replica(StoreRef("bench", "1", "Partition 0", "s"), topic, 0, replica)
    write_status(rep, FollowStatus(str(replica), topic, 0, os.getpid(), socket.gethostname(), TAIL - 1,
                                   seeded_from="changelog", job="bench", job_id="1", task="Partition 0", store="s"))
    t0 = time.monotonic()
    r = subprocess.run([STATECTL, "standby", "promote", "--kafka", bootstrap, "--job", "bench", "--task", "Partition 0",
                        "--store", "s", "--changelog", topic, "--partition", "0", "--replica-dir", str(replica),
                        "--active-dir", str(active), "--non-transactional-restore", "-o", "json"],
                       capture_output=True, text=True, env=_env(work))
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"promote failed: {r.stderr}")
    assert json.loads(r.stdout)["records_applied"] == TAIL
    shutil.rmtree(active.parent.parent)
    return round(wall, 3)


def _follow_until(bootstrap: str, replica: Any, end: int, seed: Any = None) -> tuple[float, Any]:
    """Follow until the replica holds offset ``end`` - 1; return (seconds, FollowResult)."""
    from statectl.engine.standby.follow import follow

    stop = threading.Event()
    done: list[Any] = []

    def on_status(st: Any) -> None:
        if st.applied_offset is not None and st.applied_offset >= end - 1:
            stop.set()

    t0 = time.monotonic()
    th = threading.Thread(target=lambda: done.append(follow(replica, bootstrap, seed=seed, stop=stop,
                                                            on_status=on_status, status_every_s=0.25)))
    th.start()
    th.join()
    return time.monotonic() - t0, done[0]


def raw_rate(bootstrap: str, topic: str, records: int) -> float:
    """The peer of the follower's apply rate: a plain kafka-python KafkaConsumer (statectl's fetch settings, no
    group) reading partition 0 of ``topic`` from its start until it has ``records``, nothing applied; records/s
    from its first poll that brought records to its last record."""
    from kafka import KafkaConsumer, TopicPartition

    from statectl.kafka.client import FETCH_SETTINGS

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", **FETCH_SETTINGS)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning()
        n = first = 0
        t0 = 0.0
        while n < records:
            got = len(c.poll(timeout_ms=500).get(tp, []))
            if got and not n:
                t0, first = time.monotonic(), got
            n += got
        return (n - first) / (time.monotonic() - t0)
    finally:
        c.close()


def follow_rate(bootstrap: str, topic: str, records: int, replica_dir: Path) -> float:
    """The follower's apply rate: follow() (in this process) bootstrapping a replica in ``replica_dir`` from
    partition 0 of ``topic``, whose last offset is ``records`` - 1; records/s between the first offset the
    replica's OFFSET-v2 names and the last, polled every 20 ms (an offset is written after a flush: both ends
    are records applied and durable). The start (a consumer's bootstrap, the store's creation) is not in it.
    The poll reads the file only when a stat says it was replaced: in the follower's process, reading and
    parsing it 50 times a second took a tenth of the interpreter's time from the follower."""
    from statectl.catalog.refs import StoreRef
    from statectl.engine.standby.follow import follow
    from statectl.engine.standby.replica import Replica
    from statectl.formats.offsets import OFFSET_V2, read_offsets

    stop = threading.Event()
    seen: list[tuple[float, int]] = []
    replica = Replica(StoreRef("bench", "1", "Partition 0", "rate"), topic, 0, replica_dir)
    th = threading.Thread(target=follow, args=(replica, bootstrap), kwargs={"stop": stop})
    th.start()
    stamp: tuple[int, int] | None = None
    try:
        while th.is_alive() and (not seen or seen[-1][1] < records - 1):
            try:
                st = os.stat(replica_dir / OFFSET_V2)  # written by a rename: a new inode each time
                now = (st.st_ino, st.st_mtime_ns)
                offset = -1 if now == stamp else int(next(iter(read_offsets(replica_dir / OFFSET_V2).values())))
                stamp = now
            except (OSError, ValueError, StopIteration, TypeError):
                offset = -1
            if offset >= 0 and (not seen or offset > seen[-1][1]):
                seen.append((time.monotonic(), offset))
            time.sleep(0.02)
    finally:
        stop.set()
        th.join()
    if not seen or seen[-1][1] < records - 1:
        raise RuntimeError(f"the follower stopped at {seen[-1:]} of {records} records")
    (t1, o1), (t2, o2) = seen[0], seen[-1]
    return (o2 - o1) / (t2 - t1)


def _rates(bootstrap: str, work: Path, records: int, rounds: int) -> dict[str, Any]:
    """The follower's apply rate vs the raw consumer's read rate of the same changelog (the module doc, 2),
    interleaved ``rounds`` times, the order alternating: medians and their ratio."""
    from statectl.kafka.client import create_topic

    topic = "rate-changelog"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, records)
    raw: list[float] = []
    applied: list[float] = []

    def follow_once(i: int) -> None:
        applied.append(follow_rate(bootstrap, topic, records, work / "rate" / f"Standby-{i}"))
        shutil.rmtree(work / "rate")

    for i in range(rounds):
        steps = [lambda: raw.append(raw_rate(bootstrap, topic, records)), lambda: follow_once(i)]
        for step in steps if i % 2 == 0 else steps[::-1]:
            step()
    raw_med, follow_med = statistics.median(raw), statistics.median(applied)
    return {"records": records, "rate_rounds": rounds, "raw_rate": round(raw_med),
            "raw_rates": [round(x) for x in raw], "follow_rate": round(follow_med),
            "follow_rates": [round(x) for x in applied], "follow_vs_raw": round(follow_med / raw_med, 2),
            "follow_vs_raw_rounds": [round(f / r, 2) for f, r in zip(applied, raw)]}


def _seeded_vs_bootstrapped(bootstrap: str, work: Path, records: int) -> dict[str, Any]:
    from statectl.catalog.refs import StoreRef
    from statectl.engine.backup import BackupOptions, backup
    from statectl.engine.restore import RestoreOptions, restore
    from statectl.engine.standby.replica import Replica
    from statectl.formats.checkpoint import KAFKA_CHANGELOG_FACTORY, SSP, KafkaChangelogMarker, encode_changelog_marker
    from statectl.kafka.client import create_topic
    from statectl.session import Session

    topic, job = "seed-changelog", "seedbench"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, records)
    ref = StoreRef(job, "1", "Partition 0", "s")
    session = Session.from_env(kafka=bootstrap, blobstore=f"file://{work / 'blobs'}", create_blobstore=True)
    # The active's store and its snapshot, which the job's checkpoint names with its changelog position.
    built = work / "active" / "s" / "Partition_0"
    subprocess.run([STATECTL, "restore", "--from-changelog", topic, "--partition", "0", "--kafka", bootstrap,
                    "--target-dir", str(built), "--job", job, "--store", "s"], check=True, capture_output=True,
                   env=_env(work))
    marker = encode_changelog_marker(KafkaChangelogMarker(SSP("kafka", topic, 0), str(records - 1)))
    backup(BackupOptions(ref, built, markers={KAFKA_CHANGELOG_FACTORY: {"s": marker}}), session.blobstore,
           session.catalog)
    _produce(bootstrap, topic, TAIL, start=records)
    end = records + TAIL

    def seed(index_id: str, target: Path) -> None:
        restore(RestoreOptions(ref, target, target_dir=target, snapshot=index_id, force=True), session.blobstore,
                session.catalog)

    seeded_s, seeded = _follow_until(bootstrap, Replica(ref, topic, 0, work / "h1" / "s" / "Standby-Partition_0-0"),
                                     end, seed)
    boot_s, booted = _follow_until(bootstrap, Replica(ref, topic, 0, work / "h2" / "s" / "Standby-Partition_0-0"), end)
    session.close()
    return {"seed_records": records, "seeded_s": round(seeded_s, 2), "seeded_applied": seeded.records_applied,
            "bootstrapped_s": round(boot_s, 2), "bootstrapped_applied": booted.records_applied,
            "seeded_vs_bootstrapped": round(seeded_s / boot_s, 2)}


# -- whole containers (issue 18) -------------------------------------------------------------------------

CT_STORES = ("counts", "sums")
CT_TASKS = ("Partition 0", "Partition 1", "Partition 2")  # container 0; changelog partitions 0, 1, 2
FO_CHANGELOG = 1_000  # records per changelog partition the follower makes the failover's replicas from
FO_TAIL = 2_000  # records per changelog partition written while the follower is paused, before the failover


def _container_job(bootstrap: str, job: str) -> dict[str, str]:
    """A job of 3 tasks in container 0 with 2 stores, and the coordinator stream a Samza job coordinator
    leaves for it with standbys (RF 2, so non-transactional restore): container 0 on host-a, its standby
    container 0-0 on this host. Returns store -> changelog topic (3 partitions each)."""
    from statectl.formats.coordinator import standby_task_name
    from statectl.kafka.client import create_topic
    from statectl.kafka.coordinator import CoordinatorStream

    topics = {s: f"{job}-{s}-changelog" for s in CT_STORES}
    for t in topics.values():
        create_topic(bootstrap, t, partitions=len(CT_TASKS))
    cfg = {"job.name": job, "job.id": "1", "job.default.system": "kafka",
           "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
           "job.standbytasks.replication.factor": "2",
           **{f"stores.{s}.changelog": f"kafka.{t}" for s, t in topics.items()},
           **{f"stores.{s}.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory"
              for s in topics}}
    with CoordinatorStream(bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config(cfg)
        for p, task in enumerate(CT_TASKS):
            standby = standby_task_name(task, 0)
            cs.write_changelog_partition(task, p)
            cs.write_changelog_partition(standby, p)
            cs.write_task_container(task, "0")
            cs.write_task_container(standby, "0-0")
            cs.write_task_mode(task, "Active")
            cs.write_task_mode(standby, "Standby")
        cs.write_container_host("0", "host-a")
        cs.write_container_host("0-0", socket.gethostname())
    return topics


def _produce_spread(bootstrap: str, topics: dict[str, str], per_partition: int, start: int = 0,
                    ends: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
    """Write ``per_partition`` records (100-byte values) to every partition of every changelog; return
    (store, partition) -> the partition's last offset (from the producer's acks: never the end Tansu
    reports)."""
    from statectl.kafka.client import open_producer

    ends = dict(ends or {})
    producer = open_producer(bootstrap)
    try:
        last = {}
        for i in range(start, start + per_partition):
            for s, t in topics.items():
                for p in range(len(CT_TASKS)):
                    last[(s, p)] = producer.send(t, key=b"k%09d" % i, value=VALUE, partition=p)
        producer.flush()
        for sp, fut in last.items():
            ends[sp] = fut.get(timeout=60).offset
    finally:
        producer.close()
    return ends


def _replica_offsets(state: Path) -> dict[tuple[str, int], int | None]:
    from statectl.engine.standby.replica import standby_dir
    from statectl.formats.offsets import OFFSET_V2, read_offsets

    out: dict[tuple[str, int], int | None] = {}
    for p, task in enumerate(CT_TASKS):
        for s in CT_STORES:
            try:
                values = list(read_offsets(standby_dir(state, s, task) / OFFSET_V2).values())
                out[(s, p)] = int(values[0]) if values and values[0] is not None else None
            except (OSError, ValueError, IndexError):
                out[(s, p)] = None
    return out


def _at_ends(state: Path, ends: dict[tuple[str, int], int]) -> bool:
    got = _replica_offsets(state)
    return all(got.get(sp) is not None and got[sp] >= end for sp, end in ends.items())  # type: ignore[operator]


def _follower(bootstrap: str, job: str, state: Path, work: Path, name: str) -> tuple[subprocess.Popen, Path]:
    out = work / f"{name}.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen([STATECTL, "standby", "follow", "--container", "0", "--kafka", bootstrap, "--job", job,
                                 "--state-dir", str(state), "-o", "json"], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=_env(work), cwd=work)
    return proc, out


def _wait_for(what: str, pred: Any, proc: subprocess.Popen, out: Path, timeout_s: float = 600.0,
              every_s: float = 0.02) -> float:
    """Poll ``pred`` until true; the time it became true (time.monotonic()). Fails if ``proc`` exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        if pred():
            return time.monotonic()
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: the follower exited {proc.returncode}: {out.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s} s: {out.read_text()[-3000:]}")
        time.sleep(every_s)


def _stop(proc: subprocess.Popen, out: Path) -> dict[str, Any]:
    """SIGTERM the follower, wait; its result (the last JSON line)."""
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(120)
    lines = [ln for ln in out.read_text().splitlines() if ln.startswith("{")]
    if rc != 0 or not lines:
        raise RuntimeError(f"follower exited {rc}: {out.read_text()[-3000:]}")
    return json.loads(lines[-1])


def raw_read(bootstrap: str, spec: dict[str, int]) -> int:
    """The peer of ``follow --container``: one kafka-python KafkaConsumer (statectl's fetch settings, no
    group) assigned every partition of ``spec`` ("topic:partition" -> last offset), reading each from its
    start until its position is past that offset; nothing applied. Returns the records read."""
    from kafka import KafkaConsumer, TopicPartition

    from statectl.kafka.client import FETCH_SETTINGS

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", **FETCH_SETTINGS)
    try:
        ends = {TopicPartition(k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1])): v for k, v in spec.items()}
        c.assign(list(ends))
        c.seek_to_beginning()
        n, left = 0, set(ends)
        while left:
            for tp, recs in c.poll(timeout_ms=500).items():
                n += len(recs)
                if recs and recs[-1].offset >= ends[tp]:
                    left.discard(tp)
        return n
    finally:
        c.close()


def _container_rates(bootstrap: str, work: Path, records: int, rounds: int) -> dict[str, Any]:
    job = "ctfollow"
    topics = _container_job(bootstrap, job)
    per = max(1, records // (len(CT_TASKS) * len(CT_STORES)))
    ends = _produce_spread(bootstrap, topics, per)
    total = sum(e + 1 for e in ends.values())
    spec = {f"{topics[s]}:{p}": e for (s, p), e in ends.items()}
    raw_s: list[float] = []
    follow_s: list[float] = []

    def raw() -> None:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "tests.bench.standbybench", "--raw-read", bootstrap, json.dumps(spec)],
                           capture_output=True, text=True, env=_env(work), cwd=ROOT)
        wall = time.monotonic() - t0
        if r.returncode != 0 or int(r.stdout.split()[-1]) != total:
            raise RuntimeError(f"raw read failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-2000:]}")
        raw_s.append(wall)

    def follow(i: int) -> None:
        state = work / f"ctfollow-{i}"
        state.mkdir()
        t0 = time.monotonic()
        proc, out = _follower(bootstrap, job, state, work, f"ctfollow-{i}")
        try:
            t1 = _wait_for("container follow", lambda: _at_ends(state, ends), proc, out)
        except BaseException:
            proc.kill()
            raise
        follow_s.append(t1 - t0)
        applied = sum(x["records_applied"] for x in _stop(proc, out)["replicas"])
        if applied != total:
            raise RuntimeError(f"the container follower applied {applied} records, not {total}")
        shutil.rmtree(state)

    for i in range(rounds):  # interleaved, the order alternating round by round
        for step in ((raw, lambda: follow(i)) if i % 2 == 0 else (lambda: follow(i), raw)):
            step()
    raw_med, follow_med = statistics.median(raw_s), statistics.median(follow_s)
    return {"ct_records": total, "ct_partitions": len(ends), "ct_rounds": rounds,
            "ct_raw_s": round(raw_med, 2), "ct_raw_runs": [round(x, 2) for x in raw_s],
            "ct_raw_rate": round(total / raw_med),
            "ct_follow_s": round(follow_med, 2), "ct_follow_runs": [round(x, 2) for x in follow_s],
            "ct_follow_rate": round(total / follow_med),
            "ct_follow_vs_raw": round(raw_med / follow_med, 2),
            "ct_follow_vs_raw_rounds": [round(r / f, 2) for f, r in zip(follow_s, raw_s)]}


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _failover(bootstrap: str, work: Path, mib: float) -> dict[str, Any]:
    """One failover of container 0 whose 6 replicas hold ``mib`` MiB each (the module doc, 5)."""
    from statectl.engine.standby.replica import standby_dir
    from statectl.formats.offsets import OFFSET_V2, read_offsets
    from tests.tools.genstore import make_store

    job = f"ctfailover{int(mib)}"
    topics = _container_job(bootstrap, job)
    ends = _produce_spread(bootstrap, topics, FO_CHANGELOG)
    state = work / job
    state.mkdir()
    # The container follower makes the replicas (their dirs, status files, offsets)...
    proc, out = _follower(bootstrap, job, state, work, f"{job}-1")
    try:
        _wait_for("failover replicas", lambda: _at_ends(state, ends), proc, out)
    except BaseException:
        proc.kill()
        raise
    _stop(proc, out)
    # ...grown to ``mib`` each while it is stopped (keys apart from the changelog's; the offsets stay)...
    dirs = [standby_dir(state, s, t) for t in CT_TASKS for s in CT_STORES]
    for i, d in enumerate(dirs):
        make_store(d, int(mib * 1024 * 1024 / 1024), 1024, seed=100 + i, sst_mb=64)
    sizes = [_du(d) for d in dirs]
    # ...and followed again: the running follower failover fences.
    proc, out = _follower(bootstrap, job, state, work, f"{job}-2")
    try:
        _wait_for("follower back", lambda: _at_ends(state, ends) and all(
            json.loads(d.with_name(d.name + ".standby.json").read_text()).get("pid") == proc.pid for d in dirs),
                  proc, out)
        os.kill(proc.pid, signal.SIGSTOP)  # paused (a follower behind) while the tail is written
        try:
            ends = _produce_spread(bootstrap, topics, FO_TAIL, start=FO_CHANGELOG, ends=ends)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        t0 = time.monotonic()
        r = subprocess.run([STATECTL, "standby", "failover", "--container", "0", "--kafka", bootstrap, "--job", job,
                            "--state-dir", str(state), "-o", "json"], capture_output=True, text=True, env=_env(work),
                           cwd=work)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"failover failed ({r.returncode}): {r.stderr[-3000:]}")
        follower_rc = proc.wait(120)
    except BaseException:
        proc.kill()
        raise
    res = json.loads(r.stdout)
    statuses = sorted({x["status"] for x in res["stores"]})
    promote_applied = sum((x.get("result") or {}).get("records_applied", 0) for x in res["stores"])
    follower = [json.loads(ln) for ln in out.read_text().splitlines() if ln.startswith("{")][-1]
    for p, task in enumerate(CT_TASKS):  # every store in its active dir, at its partition's end
        for s in CT_STORES:
            got = read_offsets(state / s / task.replace(" ", "_") / OFFSET_V2)
            if [int(v) for v in got.values()] != [ends[(s, p)]]:
                raise RuntimeError(f"store {s} of {task} promoted at {got}, not {ends[(s, p)]}")
    shutil.rmtree(state)
    return {"mib": mib, "wall_s": round(wall, 3), "reported_s": res["duration_s"], "statuses": statuses,
            "follower_rc": follower_rc, "replica_mib": [round(x / 1024 ** 2) for x in sizes],
            "tail_records": FO_TAIL * len(ends), "follower_applied": sum(x["records_applied"] for x in follower["replicas"]),
            "promote_applied": promote_applied}


def bench(work: Path, small_gib: float = 1.0, big_gib: float = 4.0, records: int = 500_000, *,
          container_records: int | None = None, rounds: int = 3, failover_small_mib: float = 64,
          failover_mib: float = 512, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    from tests.servers import TansuServer

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"small_gib": small_gib, "big_gib": big_gib, "tail": TAIL}
    with TansuServer() as tansu:
        b = tansu.bootstrap
        if "promote" in parts:
            out["promote_small_s"] = _promote(b, work, small_gib)
            out["promote_big_s"] = _promote(b, work, big_gib)
            out["promote_ratio"] = round(out["promote_big_s"] / out["promote_small_s"], 2)
        if "rates" in parts:
            out.update(_rates(b, work, records, rounds))
        if "seed" in parts:
            out.update(_seeded_vs_bootstrapped(b, work, records))
        if "container" in parts:
            out.update(_container_rates(b, work, container_records or records, rounds))
        if "failover" in parts:
            small = _failover(b, work, failover_small_mib)
            big = _failover(b, work, failover_mib)
            out["failover"] = {"small": small, "big": big, "ratio": round(big["wall_s"] / small["wall_s"], 2)}
    return out


def _spread(ratios: list[float]) -> str:
    """The ratios of the interleaved rounds, each pair on its own: their range."""
    return f"{min(ratios)}-{max(ratios)}x" if ratios else "-"


def report_lines(r: dict[str, Any]) -> list[str]:
    lines = []
    if "promote_small_s" in r:
        lines.append(
        f"standby promote with a {r['tail']}-record tail: {r['promote_small_s']} s at {r['small_gib']} GiB, "
        f"{r['promote_big_s']} s at {r['big_gib']} GiB -> {r['promote_ratio']}x (whole processes)")
    if "follow_rate" in r:
        lines.append(
            f"standby follow bootstrapping {r['records']} records (median of {r['rate_rounds']}, interleaved): "
            f"{r['follow_rate']} records/s applied vs one raw kafka-python consumer {r['raw_rate']} records/s read "
            f"-> {r['follow_vs_raw']}x (rounds {_spread(r['follow_vs_raw_rounds'])}; goal >= 0.9x)")
    if "seeded_s" in r:
        lines.append(
        f"to a promotable replica from an empty host ({r['seed_records']} records + {r['tail']} tail): seeded from a "
        f"snapshot {r['seeded_s']} s ({r['seeded_applied']} records applied) vs bootstrapped from the changelog "
        f"{r['bootstrapped_s']} s ({r['bootstrapped_applied']} applied) -> {r['seeded_vs_bootstrapped']}x")
    if "ct_follow_rate" in r:
        lines.append(
            f"container follow (3 tasks x 2 stores, {r['ct_partitions']} partitions, {r['ct_records']} records, "
            f"whole processes, median of {r['ct_rounds']}): statectl standby follow --container "
            f"{r['ct_follow_s']} s = {r['ct_follow_rate']} records/s vs one raw kafka-python consumer "
            f"{r['ct_raw_s']} s = {r['ct_raw_rate']} records/s -> {r['ct_follow_vs_raw']}x "
            f"(rounds {_spread(r['ct_follow_vs_raw_rounds'])}; goal >= 0.85x)")
    if "failover" in r:
        f = r["failover"]
        lines.append(
            f"container failover (3 tasks x 2 stores, whole process, a running follower fenced, a "
            f"{f['big']['tail_records']}-record tail): {f['small']['wall_s']} s at 6 x {f['small']['mib']:g} MiB, "
            f"{f['big']['wall_s']} s at 6 x {f['big']['mib']:g} MiB -> {f['ratio']}x (goal <= 3 s, flat)")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small-gib", type=float, default=1.0)
    p.add_argument("--big-gib", type=float, default=4.0)
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--container-records", type=int, default=None,
                   help="records in all over the container's 6 changelog partitions (default --records)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds of follow vs raw read (the apply rate and the container)")
    p.add_argument("--failover-mib", type=float, default=512, help="state per replica of the container failover")
    p.add_argument("--failover-small-mib", type=float, default=64,
                   help="state per replica of the small container failover (flat in state size)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"which figures: {', '.join(PARTS)} (default all)")
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--raw-read", nargs=2, metavar=("BOOTSTRAP", "SPEC"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.raw_read:  # the raw peer of follow --container, as a process of its own
        print(raw_read(args.raw_read[0], json.loads(args.raw_read[1])))
        return 0
    parts = tuple(x.strip() for x in args.parts.split(",") if x.strip())
    if set(parts) - set(PARTS):
        p.error(f"--parts: choose from {', '.join(PARTS)}")
    with tempfile.TemporaryDirectory(prefix="standbybench-", dir=args.work) as tmp:
        r = bench(Path(tmp), args.small_gib, args.big_gib, args.records, container_records=args.container_records,
                  rounds=args.rounds, failover_small_mib=args.failover_small_mib, failover_mib=args.failover_mib,
                  parts=parts)
    print("\n".join(report_lines(r)))
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
