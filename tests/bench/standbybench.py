"""make bench, standby (issue 10), on one Tansu broker started here:

1. ``statectl standby promote`` (a whole process) of a replica of --small-gib and --big-gib of state with a
   10 000-record changelog tail to catch up: its time must not grow with the state (a tail plus a rename).
2. The follower's apply rate (bootstrapping a replica from a changelog of --records records) next to a raw
   kafka-python read of the same partition (PartitionReader, nothing applied).
3. The time to a promotable replica on an empty host: seeded from a snapshot (the job's checkpoint names
   it with its changelog position) plus the tail, vs bootstrapped from the changelog alone.

    .venv/bin/python -m tests.bench.standbybench [--small-gib 1 --big-gib 4 --records 500000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

STATECTL = str(Path(sys.executable).parent / "statectl")
TAIL = 10_000
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
    t0 = time.monotonic()
    r = subprocess.run([STATECTL, "standby", "promote", "--kafka", bootstrap, "--job", "bench", "--task", "Partition 0",
                        "--store", "s", "--changelog", topic, "--partition", "0", "--replica-dir", str(replica),
                        "--active-dir", str(active), "-o", "json"], capture_output=True, text=True, env=_env(work))
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"promote failed: {r.stderr}")
    assert json.loads(r.stdout)["records_applied"] == TAIL
    shutil.rmtree(active.parent.parent)
    return round(wall, 3)


def _follow_until(bootstrap: str, replica: Any, end: int, seed: Any = None,
                  samples: list[tuple[float, int]] | None = None) -> tuple[float, Any]:
    """Follow until the replica holds offset ``end`` - 1; return (seconds, FollowResult). ``samples`` gets
    (time, records applied) at each status report (every 0.25 s)."""
    from statectl.engine.standby import follow

    stop = threading.Event()
    done: list[Any] = []

    def on_status(st: Any) -> None:
        if samples is not None:
            samples.append((time.monotonic(), st.records_applied))
        if st.applied_offset is not None and st.applied_offset >= end - 1:
            stop.set()

    t0 = time.monotonic()
    th = threading.Thread(target=lambda: done.append(follow(replica, bootstrap, seed=seed, stop=stop,
                                                            on_status=on_status, status_every_s=0.25)))
    th.start()
    th.join()
    return time.monotonic() - t0, done[0]


def _rates(bootstrap: str, work: Path, records: int) -> dict[str, Any]:
    from statectl.catalog.refs import StoreRef
    from statectl.engine.standby import Replica
    from statectl.kafka.client import PartitionReader, create_topic, open_consumer

    topic = "rate-changelog"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, records)
    consumer = open_consumer(bootstrap)
    t0 = time.monotonic()
    reader = PartitionReader(consumer, topic, 0, bootstrap)
    reader.seek(0)
    n = sum(len(b) for b in reader.batches())
    raw_s = time.monotonic() - t0
    consumer.close()
    replica = Replica(StoreRef("bench", "1", "Partition 0", "rate"), topic, 0, work / "rate" / "Standby-0")
    samples: list[tuple[float, int]] = []
    follow_s, result = _follow_until(bootstrap, replica, records, samples=samples)
    shutil.rmtree(work / "rate")
    # The apply rate while applying: from the first report with records applied to the last (the start,
    # a consumer's bootstrap and the store's creation, is in follow_s).
    (t1, r1), (t2, r2) = next(s for s in samples if s[1] > 0), samples[-1]
    rate = (r2 - r1) / (t2 - t1) if t2 > t1 else result.records_applied / follow_s
    return {"records": n, "raw_read_s": round(raw_s, 2), "raw_rate": round(n / raw_s),
            "follow_s": round(follow_s, 2), "follow_rate": round(rate),
            "follow_vs_raw": round(rate / (n / raw_s), 2)}


def _seeded_vs_bootstrapped(bootstrap: str, work: Path, records: int) -> dict[str, Any]:
    from statectl.catalog.refs import StoreRef
    from statectl.engine.backup import BackupOptions, backup
    from statectl.engine.restore import RestoreOptions, restore
    from statectl.engine.standby import Replica
    from statectl.formats.checkpoint import KAFKA_CHANGELOG_FACTORY, SSP, KafkaChangelogMarker, encode_changelog_marker
    from statectl.kafka.client import create_topic
    from statectl.session import Session

    topic, job = "seed-changelog", "seedbench"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, records)
    ref = StoreRef(job, "1", "Partition 0", "s")
    session = Session.from_env(kafka=bootstrap, blobstore=f"file://{work / 'blobs'}")
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


def bench(work: Path, small_gib: float = 1.0, big_gib: float = 4.0, records: int = 500_000) -> dict[str, Any]:
    from tests.servers import TansuServer

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"small_gib": small_gib, "big_gib": big_gib, "tail": TAIL}
    with TansuServer() as tansu:
        b = tansu.bootstrap
        out["promote_small_s"] = _promote(b, work, small_gib)
        out["promote_big_s"] = _promote(b, work, big_gib)
        out["promote_ratio"] = round(out["promote_big_s"] / out["promote_small_s"], 2)
        out.update(_rates(b, work, records))
        out.update(_seeded_vs_bootstrapped(b, work, records))
    return out


def report_lines(r: dict[str, Any]) -> list[str]:
    return [
        f"standby promote with a {r['tail']}-record tail: {r['promote_small_s']} s at {r['small_gib']} GiB, "
        f"{r['promote_big_s']} s at {r['big_gib']} GiB -> {r['promote_ratio']}x (whole processes)",
        f"follower apply rate: {r['follow_rate']} records/s vs raw kafka-python read {r['raw_rate']} records/s -> "
        f"{r['follow_vs_raw']}x ({r['records']} records)",
        f"to a promotable replica from an empty host ({r['seed_records']} records + {r['tail']} tail): seeded from a "
        f"snapshot {r['seeded_s']} s ({r['seeded_applied']} records applied) vs bootstrapped from the changelog "
        f"{r['bootstrapped_s']} s ({r['bootstrapped_applied']} applied) -> {r['seeded_vs_bootstrapped']}x",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small-gib", type=float, default=1.0)
    p.add_argument("--big-gib", type=float, default=4.0)
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--work", type=Path, default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="standbybench-", dir=args.work) as tmp:
        r = bench(Path(tmp), args.small_gib, args.big_gib, args.records)
    print("\n".join(report_lines(r)))
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
