"""Benchmarks of the recovery paths: snapshot restore vs changelog replay, and gc of a large prefix.

    .venv/bin/python -m tests.bench.recovery [--size-gib 1] [--blobs 100000] [--quick]

1. The same state (random 1 KiB values, ~64 MiB SST files) is backed up to SeaweedFS and also
   produced, record by record, to a changelog topic on Tansu. Then, as whole processes:
   ``statectl restore --target-dir`` (snapshot) vs ``statectl restore --from-changelog`` (replay).
   Target: snapshot restore >= 10x faster. Both results are checked key for key.
2. gc of a prefix holding N blobs (default 100 000; a snapshot references a few, the rest are
   unreferenced and past the one-minute minimum grace period): wall time, peak RSS and the requests it sent
   by kind (list: one per listing, however many pages). Peak RSS at 100 000 and 1 000 000 blobs on file://,
   the figure that must stay flat, is figure 7 of ``make bench`` (tests/bench/gcmem.py).
3. (--only smallfiles) backup of 5 000 small files to SeaweedFS vs file://.
4. (--only dirty) restore of half the state size alone vs right after a quarter of it of unrelated,
   unsynced writes on the same filesystem (durability must be targeted, not a filesystem-wide sync).

Writes a report to stdout and JSON to .bench/recovery.json. Runs after ``make bench`` (which
installs everything) or alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.bench.gcmem import CHILD
from tests.bench.measure import run_measured, summarize
from tests.servers import SeaweedServer, TansuServer
from tests.tools.genstore import fingerprint, make_store

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".bench" / "recovery"
STATECTL = str(Path(sys.executable).parent / "statectl")


def log(msg: str) -> None:
    print(f"[recovery] {msg}", file=sys.stderr, flush=True)


def produce_changelog(bootstrap: str, topic: str, store: Path) -> tuple[int, int]:
    """Write every key/value of ``store`` to partition 0 of ``topic``; return (records, bytes)."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from rocksdict import AccessType, Options, Rdict

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=1 << 20,
                             max_request_size=4 << 20)
    n = size = 0
    with __import__("tempfile").TemporaryDirectory() as sec:
        db = Rdict(str(store), Options(raw_mode=True), access_type=AccessType.secondary(sec))
        try:
            for k, v in db.items():
                producer.send(topic, key=k, value=v, partition=0)
                n += 1
                size += len(k) + len(v)
        finally:
            db.close()
    producer.flush()
    producer.close()
    return n, size


def bench_changelog_vs_snapshot(size_bytes: int, runs: int, seaweed: SeaweedServer, tansu: TansuServer,
                                env: dict[str, str]) -> dict:
    store = WORK / "state" / "counts" / "Partition_0"
    keys = size_bytes // 1024
    log(f"generating {keys} keys of 1 KiB")
    make_store(store, keys, 1024, seed=42, sst_mb=64)
    expected = fingerprint(store)
    bucket = seaweed.make_bucket()
    url = f"s3://{bucket}/recovery"
    common = ["--blobstore", url, "--job", "bench", "--store", "counts", "-q"]
    run_measured([STATECTL, "backup", *common, "--store-dir", str(store)], env=env, cwd=WORK)
    topic = "bench-counts-changelog"
    log("producing the changelog")
    t0 = time.monotonic()
    records, nbytes = produce_changelog(tansu.bootstrap, topic, store)
    log(f"produced {records} records ({nbytes} bytes) in {time.monotonic() - t0:.1f}s")

    snap, replay = [], []
    for i in range(runs):
        target = WORK / "restored"
        drop(target)
        snap.append(run_measured([STATECTL, "restore", *common, "--store-dir", str(WORK / "absent"),
                                  "--target-dir", str(target)], env=env, cwd=WORK))
        assert fingerprint(target) == expected, "snapshot restore gave other key/values"
        drop(target)
        replay.append(run_measured([STATECTL, "restore", "--kafka", tansu.bootstrap, "--from-changelog", topic,
                                    "--partition", "0", "--target-dir", str(target), "-q"], env=env, cwd=WORK))
        assert fingerprint(target) == expected, "changelog replay gave other key/values"
        drop(target)
        log(f"run {i + 1}: snapshot {snap[-1].wall_s:.1f}s, changelog {replay[-1].wall_s:.1f}s")
    ratios = sorted(r.wall_s / s.wall_s for s, r in zip(snap, replay))
    drop(WORK / "state")
    return {"records": records, "bytes": nbytes, "snapshot_restore": summarize(snap),
            "changelog_replay": summarize(replay), "speedup_median": round(ratios[len(ratios) // 2], 2),
            "speedup_min": round(ratios[0], 2), "target": ">= 10x"}


def bench_gc(blobs: int, seaweed: SeaweedServer, env: dict[str, str]) -> dict:
    bucket = seaweed.make_bucket()
    url = f"s3://{bucket}/gc"
    store = WORK / "gc-state" / "s" / "Partition_0"
    make_store(store, 2000, 1024, seed=1, sst_mb=1)
    run_measured([STATECTL, "backup", "--blobstore", url, "--job", "gcbench", "--store", "s", "--store-dir",
                  str(store), "-q"], env=env, cwd=WORK)
    client = seaweed.client
    log(f"creating {blobs} unreferenced blobs")
    t0 = time.monotonic()

    def put(i: int) -> None:
        u = f"{i:032x}"
        client.put_object(Bucket=bucket, Key=f"gc/blobs/{u[-2:]}/{u}", Body=b"x" * 100)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(put, range(blobs)))
    log(f"created in {time.monotonic() - t0:.1f}s; running gc in 61s")
    time.sleep(61)  # --grace is at least 1m, S3 objects cannot be backdated, and the last one was just made
    # statectl gc as ``python -c CHILD``, which writes its own peak RSS (VmHWM) at exit: wait4's ru_maxrss
    # would also count this harness's memory from before the child's exec (tests/bench/gcmem.py).
    hwm = WORK / ".gc-hwm"
    sample = run_measured([sys.executable, "-c", CHILD, "gc", "--blobstore", url, "--grace", "1m", "-o", "json"],
                          env={**env, "GCMEM_HWM_FILE": str(hwm)}, cwd=WORK)
    result = json.loads(sample.stdout)
    left = sum(1 for _ in _list_all(client, bucket, "gc/blobs/"))
    drop(WORK / "gc-state")
    rss_mb = int(hwm.read_text()) * 1024 / 1e6
    return {"blobs": blobs, "wall_s": round(sample.wall_s, 2), "max_rss_mb": round(rss_mb, 1),
            "blobs_deleted": result["blobs_deleted"], "blobs_kept": result["blobs_kept"],
            "blobs_left": left, "requests": result["requests"]}


def bench_small_files(files: int, runs: int, seaweed: SeaweedServer, env: dict[str, str]) -> dict:
    """Backup of a checkpoint dir holding ``files`` small files (4 KiB, as blob files or tiny SSTs of a real
    store): to SeaweedFS vs to file://, whole processes, interleaved; and the S3 requests per operation."""
    store = WORK / "small-state" / "s" / "Partition_0"
    make_store(store, 200, 100, seed=1)
    cp = store.with_name(store.name + "-1700000000000-1")
    shutil.copytree(store, cp)
    for i in range(files):
        (cp / f"{100000 + i:06d}.blob").write_bytes(os.urandom(4096))
    samples: dict[str, list] = {"s3": [], "file": []}
    for run in range(runs):
        for kind in ("s3", "file"):
            url = f"s3://{seaweed.make_bucket()}/small" if kind == "s3" else f"file://{WORK / f'small-blobs-{run}'}"
            if kind == "file":  # an existing blob store (a missing file:// dir is an error without --create)
                (WORK / f"small-blobs-{run}").mkdir(parents=True, exist_ok=True)
            sample = run_measured([STATECTL, "backup", "--blobstore", url, "--job", "small", "--store", "s",
                                   "--store-dir", str(store), "--checkpoint-dir", str(cp), "-q", "-o", "json"],
                                  env=env, cwd=WORK)
            samples[kind].append(sample)
    total = len(os.listdir(cp))
    drop(WORK / "small-state")
    s3, fs = summarize(samples["s3"]), summarize(samples["file"])
    return {"files": total, "s3": s3, "file": fs, "s3_files_per_s": round(total / s3["wall_s"]["median"]),
            "ratio_s3_to_file": round(s3["wall_s"]["median"] / fs["wall_s"]["median"], 2)}


def bench_restore_with_dirty_data(size_bytes: int, dirty_bytes: int, runs: int, seaweed: SeaweedServer,
                                  env: dict[str, str]) -> dict:
    """Restore of ``size_bytes`` from SeaweedFS into an empty dir, alone and right after another process
    wrote ``dirty_bytes`` to the same filesystem without syncing: a restore that syncs the whole filesystem
    pays for the other's data; one that fsyncs its own files does not."""
    bucket = seaweed.make_bucket()
    url = f"s3://{bucket}/dirty"
    store = WORK / "dirty-state" / "s" / "Partition_0"
    make_store(store, max(1, size_bytes // 1024), 1024, seed=3)
    run_measured([STATECTL, "backup", "--blobstore", url, "--job", "dirty", "--store", "s", "--store-dir",
                  str(store), "-q"], env=env, cwd=WORK)
    drop(WORK / "dirty-state")
    samples: dict[str, list] = {"clean": [], "dirty": []}
    for run in range(runs):
        for kind in ("clean", "dirty"):
            os.sync()
            if kind == "dirty":
                with open(WORK / "unrelated.bin", "wb") as f:  # another process's writes, not yet on disk
                    for _ in range(dirty_bytes // (8 << 20)):
                        f.write(os.urandom(8 << 20))
            target = WORK / f"dirty-restore-{kind}-{run}"
            samples[kind].append(run_measured([STATECTL, "restore", "--blobstore", url, "--job", "dirty", "--store",
                                               "s", "--target-dir", str(target), "-q"], env=env, cwd=WORK))
            drop(target)
            (WORK / "unrelated.bin").unlink(missing_ok=True)
    clean, dirty = summarize(samples["clean"]), summarize(samples["dirty"])
    return {"size_bytes": size_bytes, "dirty_bytes": dirty_bytes, "clean": clean, "dirty": dirty,
            "ratio_dirty_to_clean": round(dirty["wall_s"]["median"] / clean["wall_s"]["median"], 2)}


def _list_all(client, bucket: str, prefix: str):
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        yield from page.get("Contents", [])


def drop(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="recovery")
    p.add_argument("--size-gib", type=float, default=1.0)
    p.add_argument("--blobs", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="128 MiB of state, 10 000 blobs, 1 run")
    p.add_argument("--only", choices=["changelog", "gc", "smallfiles", "dirty"], help="run only one figure")
    p.add_argument("--small-files", type=int, default=5000)
    a = p.parse_args(argv)
    size = int((0.125 if a.quick else a.size_gib) * 1024 ** 3)
    blobs = 10_000 if a.quick else a.blobs
    runs = 1 if a.quick else a.runs
    drop(WORK)
    WORK.mkdir(parents=True)
    report: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "size_bytes": size}
    with SeaweedServer() as seaweed, TansuServer() as tansu:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
        env.update(AWS_ACCESS_KEY_ID=seaweed.access_key, AWS_SECRET_ACCESS_KEY=seaweed.secret_key,
                   STATECTL_S3_ENDPOINT=seaweed.endpoint, XDG_CONFIG_HOME=str(WORK / "cfg"),
                   XDG_DATA_HOME=str(WORK / "data"))
        if a.only in (None, "changelog"):
            report["changelog_vs_snapshot"] = bench_changelog_vs_snapshot(size, runs, seaweed, tansu, env)
        if a.only in (None, "gc"):
            report["gc"] = bench_gc(blobs, seaweed, env)
        if a.only in (None, "smallfiles"):
            report["small_files"] = bench_small_files(500 if a.quick else a.small_files, runs, seaweed, env)
        if a.only in (None, "dirty"):
            report["dirty"] = bench_restore_with_dirty_data(size // 2, size // 4, runs, seaweed, env)
    (ROOT / ".bench").mkdir(exist_ok=True)
    (ROOT / ".bench" / f"recovery{'-' + a.only if a.only else ''}.json").write_text(json.dumps(report, indent=2))
    c, g = report.get("changelog_vs_snapshot"), report.get("gc")
    if c:
        print(f"restore of {size / 1024 ** 3:.2f} GiB ({c['records']} records): snapshot "
              f"{c['snapshot_restore']['wall_s']['median']:.1f}s vs changelog replay "
              f"{c['changelog_replay']['wall_s']['median']:.1f}s (median of {runs}): snapshot restore "
              f"{c['speedup_median']}x faster (min {c['speedup_min']}x; target >= 10x)")
    sf, d = report.get("small_files"), report.get("dirty")
    if sf:
        print(f"backup of {sf['files']} small files: SeaweedFS {sf['s3']['wall_s']['median']:.1f}s "
              f"({sf['s3_files_per_s']} files/s) vs file:// {sf['file']['wall_s']['median']:.1f}s: "
              f"{sf['ratio_s3_to_file']}x")
    if d:
        print(f"restore of {d['size_bytes'] / 1024 ** 2:.0f} MiB from SeaweedFS: {d['clean']['wall_s']['median']:.2f}s "
              f"alone vs {d['dirty']['wall_s']['median']:.2f}s right after {d['dirty_bytes'] / 1024 ** 2:.0f} MiB of "
              f"unrelated unsynced writes: {d['ratio_dirty_to_clean']}x")
    if g:
        print(f"gc of a prefix with {g['blobs']} unreferenced blobs: {g['wall_s']}s, deleted {g['blobs_deleted']}, "
              f"kept {g['blobs_kept']}, left {g['blobs_left']}; peak RSS {g['max_rss_mb']} MB; requests: "
              + ", ".join(f"{k} {v}" for k, v in g["requests"].items()))
    drop(WORK)
    return 0


if __name__ == "__main__":
    sys.exit(main())
