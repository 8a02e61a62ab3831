"""make bench, rescale (optional: ``--only rescale``), whole processes, on the harness's SeaweedFS:

A hash-partitioned store of 4 tasks (``--rescale-keys`` 16-byte keys, 100-byte random values, murmur2 % 4),
backed up to S3, is rescaled 4 -> 2 and 4 -> 8 with ``statectl rescale`` (Spark local[2], start-up
included), against the obvious script doing the same (:data:`SCRIPT`): ``statectl restore`` of each of the 4
snapshots, a plain Python re-key with rocksdict and Kafka's murmur2 (statectl.formats.adstore.partition_of)
into the M new stores, ``statectl backup`` of each; run in turn, round by round. Reported: the medians and
spread of both, their ratio (the goal: <= 0.5x), the rescale's phases (resolve, Spark, ingest, verify,
upload, commit), the bytes the executors read and wrote, the keys verified, peak RSS (spark-submit's JVM
included: a child statectl waits for).

The same size as a key-group store (Flink's layout: 128 key groups, a 1-byte prefix; each task's store
bulk-loaded as 64 MiB SST files at the bottom level, as a compacted store holds them) is rescaled 4 -> 8
and 8 -> 4 with ``--key-groups 128``, on SeaweedFS and on ``file://``: reported beside the wall time are
the bytes copied server-side (unread) and read and rewritten by the executors: ``--only rescale-kg``.

    .venv/bin/python -m tests.bench.run --only rescale --rescale-keys 2000000 --runs 3
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from tests.bench.measure import run_measured, stat

STATECTL = str(Path(sys.executable).parent / "statectl")
JOB, STORE = "rescale-bench", "store"
VALUE_SIZE = 1024  # the key-group figure's values
HASH_VALUE_SIZE = 100  # the hash figure's values (the adstore figure's rows: 16-byte keys, 100-byte values)
GOAL = 0.5  # the rescale's time over the script's, at most

# The obvious script: restore the N snapshots, re-key them in plain Python, back up the M new stores.
SCRIPT = """set -e
for p in $(seq 0 $((N - 1))); do
  "$STATECTL" -q restore $WHERE --job "$JOB" --task "Partition $p" --target-dir "$W/src/$p"
done
"$PYTHON" "$W/rekey.py" "$W/src" "$N" "$M" "$W/dst/$STORE"
for q in $(seq 0 $((M - 1))); do
  "$STATECTL" -q backup $WHERE --job "$TO_JOB" --task "Partition $q" --state-dir "$W/dst"
done
"""
REKEY = """import sys
import rocksdict
from statectl.formats.adstore import partition_of

src, n, m, dst = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
outs = [rocksdict.Rdict(f"{dst}/Partition_{q}", rocksdict.Options(raw_mode=True)) for q in range(m)]
batches = [rocksdict.WriteBatch(raw_mode=True) for _ in range(m)]
keys = 0
for p in range(n):
    db = rocksdict.Rdict(f"{src}/{p}", rocksdict.Options(raw_mode=True),
                         access_type=rocksdict.AccessType.read_only())
    for k, v in db.items():
        q = partition_of(k, m)
        batches[q].put(k, v)
        keys += 1
        if len(batches[q]) >= 4096:
            outs[q].write(batches[q])
            batches[q] = rocksdict.WriteBatch(raw_mode=True)
    db.close()
for db, b in zip(outs, batches):
    if len(b):
        db.write(b)
    db.flush()
    db.close()
with open(f"{dst}.keys", "w") as fh:
    fh.write(str(keys))
"""


# The floor a Spark rescale cannot go below: a job that starts a SparkContext on local[2], runs
# one empty task per core (the Python workers' start) and stops, launched as statectl launches the rescale's
# (the same command line, started the same way, driver JVM options and class archive).
EMPTY_JOB = """import sys
from pyspark import SparkContext

sc = SparkContext.getOrCreate()
sc.parallelize([0, 1], 2).mapPartitions(lambda it: [0]).collect()
sc.stop()
"""


def make_sources(state: Path, keys: int, tasks: int, value_size: int = HASH_VALUE_SIZE, seed: int = 7) -> int:
    """``tasks`` stores under ``state/STORE/Partition_k``, each holding the keys murmur2 sends to it; return
    the number of keys."""
    import pyarrow as pa
    import rocksdict

    from statectl.formats.adstore import partitions_of

    rng = random.Random(seed)
    dbs = []
    for p in range(tasks):
        path = state / STORE / f"Partition_{p}"
        path.parent.mkdir(parents=True, exist_ok=True)
        opts = rocksdict.Options(raw_mode=True)
        opts.set_target_file_size_base(64 * 1024 * 1024)
        dbs.append(rocksdict.Rdict(str(path), opts))
    for lo in range(0, keys, 65536):
        ks = [b"key-%012d" % i for i in range(lo, min(keys, lo + 65536))]
        batches = [rocksdict.WriteBatch(raw_mode=True) for _ in range(tasks)]
        for k, p in zip(ks, partitions_of(pa.array(ks, pa.binary()), tasks).tolist()):
            batches[p].put(k, rng.randbytes(value_size))
        for db, b in zip(dbs, batches):
            db.write(b)
    for db in dbs:
        db.flush()
        db.close()
    return keys


def bench(work: Path, keys: int, env: dict[str, str], endpoint: str, bucket: str, rounds: int,
          directions: tuple[tuple[int, int], ...] = ((4, 2), (4, 8)), log: Callable[[str], None] = print) -> dict[str, Any]:
    """The rescale and the script, each direction, ``rounds`` times in turn (which runs first alternates)."""
    work.mkdir(parents=True, exist_ok=True)
    state = work / "state"
    tasks_in = directions[0][0]
    make_sources(state, keys, tasks_in)
    where = ["--blobstore", f"s3://{bucket}/statectl", "--s3-endpoint", endpoint, "--store", STORE]
    for p in range(tasks_in):
        subprocess.run([STATECTL, "-q", "backup", *where, "--job", JOB, "--task", f"Partition {p}", "--state-dir",
                        str(state)], env=env, cwd=work, check=True, capture_output=True)
    (work / "rekey.py").write_text(REKEY)
    (work / "cwd").mkdir(exist_ok=True)
    out: dict[str, Any] = {"keys": keys, "value_size": HASH_VALUE_SIZE, "cases": []}
    # untimed: the first Spark job on a machine records the JVM's class archive (statectl.spark.launch)
    warm = _rescale(work, where, *directions[0], f"{JOB}-warm-up", keys, env)
    out["warm_up_s"], out["source_bytes"] = warm["wall_s"], warm["source_bytes"]
    log(f"  rescale {directions[0][0]} -> {directions[0][1]}, warm-up (the class archive recorded): "
        f"{warm['wall_s']:.1f} s")
    floor: list[dict[str, Any]] = []
    for n, m in directions:
        case: dict[str, Any] = {"tasks_in": n, "tasks_out": m, "statectl": [], "script": []}
        for r in range(rounds):
            order = ("statectl", "script") if r % 2 == 0 else ("script", "statectl")
            for who in order:
                run = _rescale if who == "statectl" else _script
                case[who].append(run(work, where, n, m, f"{JOB}-{who}-{m}-r{r}", keys, env))
                log(f"  rescale {n} -> {m}, round {r + 1}: {who} {case[who][-1]['wall_s']:.1f} s")
            floor.append(empty_spark_job(work, env))
            log(f"  an empty Spark job: {floor[-1]['wall_s']:.1f} s")
        out["cases"].append(_summary(case))
    out["empty_spark_job"] = {"wall": stat([x["wall_s"] for x in floor]).to_json(),
                              "cpu": stat([x["cpu_s"] for x in floor]).to_json()}
    return out


def empty_spark_job(work: Path, env: dict[str, str]) -> dict[str, Any]:
    """EMPTY_JOB's wall and CPU time, launched as statectl launches a rescale's job."""
    from statectl.spark.launch import ClassArchive, launch_command, rescale_conf
    from statectl.spark.probe import spark_submit_path

    submit = spark_submit_path()
    job = work / "empty-job.py"
    job.write_text(EMPTY_JOB)
    conf = rescale_conf({})
    archive = ClassArchive(submit, conf)  # the rescale's warm-up recorded it
    if archive.recording is not None:
        archive.discard()
    run_env = dict(env, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    cmd, run_env = launch_command(submit, job, "local[2]", archive.conf(conf) if archive.recording is None else conf,
                                  run_env, work / "cwd")
    cmd[-2:] = [str(job)]  # the empty job instead of statectl's
    sample = run_measured(cmd, env=run_env, cwd=work / "cwd", timeout=600)
    return {"wall_s": round(sample.wall_s, 2), "cpu_s": round(sample.cpu_s, 1)}


def _rescale(work: Path, where: list[str], n: int, m: int, to_job: str, keys: int,
             env: dict[str, str]) -> dict[str, Any]:
    cmd = [STATECTL, "-q", "-o", "json", "rescale", *where, "--job", JOB, "--to-job", to_job, "--from", str(n),
           "--to", str(m), "--master", "local[2]", "--work-dir", str(work)]
    os.sync()
    sample = run_measured(cmd, env=env, cwd=work / "cwd", timeout=7200)
    r = json.loads(sample.stdout)
    if not r["verified"] or not r["committed"] or r["keys"] != keys:
        raise RuntimeError(f"rescale bench: unexpected result {r}")
    return {"wall_s": round(sample.wall_s, 2), "max_rss_mb": round(sample.max_rss_mb, 1),
            "cpu_s": round(sample.cpu_s, 1), "phases": r["phases"], "bytes_read": r["bytes_read"],
            "bytes_written": r["bytes_written"], "bytes_uploaded": r["bytes_uploaded"],
            "source_bytes": sum(s["bytes"] for s in r["sources"]), "per_target_keys": [t["keys"] for t in r["targets"]]}


def _script(work: Path, where: list[str], n: int, m: int, to_job: str, keys: int,
            env: dict[str, str]) -> dict[str, Any]:
    import shutil

    w = work / "script"
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir()
    (w / "rekey.py").write_text(REKEY)
    script_env = dict(env, N=str(n), M=str(m), W=str(w), STORE=STORE, JOB=JOB, TO_JOB=to_job, STATECTL=STATECTL,
                      PYTHON=sys.executable, WHERE=" ".join(where))
    os.sync()
    sample = run_measured(["sh", "-c", SCRIPT], env=script_env, cwd=work / "cwd", timeout=7200)
    done = int((w / "dst" / f"{STORE}.keys").read_text())
    if done != keys:
        raise RuntimeError(f"rescale bench: the script re-keyed {done} keys, not {keys}")
    shutil.rmtree(w, ignore_errors=True)
    return {"wall_s": round(sample.wall_s, 2), "max_rss_mb": round(sample.max_rss_mb, 1),
            "cpu_s": round(sample.cpu_s, 1)}


def _summary(case: dict[str, Any]) -> dict[str, Any]:
    for who in ("statectl", "script"):
        case[f"{who}_wall"] = stat([x["wall_s"] for x in case[who]]).to_json()
        case[f"{who}_cpu"] = stat([x["cpu_s"] for x in case[who]]).to_json()
    case["ratio"] = round(case["statectl_wall"]["median"] / case["script_wall"]["median"], 3)
    case["phases"] = {k: round(statistics.median(x["phases"].get(k, 0) for x in case["statectl"]), 2)
                      for k in case["statectl"][0]["phases"]}
    last = case["statectl"][-1]
    case.update({k: last[k] for k in ("bytes_read", "bytes_written", "bytes_uploaded", "per_target_keys")})
    case["max_rss_mb"] = max(x["max_rss_mb"] for x in case["statectl"])
    return case


def add_figures(res: dict[str, Any], add: Callable[..., None], fmt: Callable[[dict[str, Any]], str]) -> None:
    """The cases as rows of the run.py table (``add`` and ``fmt`` are run.figures' own)."""
    for c in res.get("cases", []):
        sc, p = c["statectl_wall"], c["script_wall"]
        add("12", f"rescale {c['tasks_in']} -> {c['tasks_out']} of {res['keys']:,} keys (Spark local[2]), wall",
            sc["median"], fmt(sc), "restore + Python re-key + backup", p["median"], fmt(p), f"<= {GOAL:.2f}x",
            sc["median"] <= GOAL * p["median"])


KEY_GROUPS = 128
SST_BYTES = 64 * 1024 * 1024


def make_key_group_sources(state: Path, size_bytes: int, tasks: int, seed: int = 7) -> int:
    """``tasks`` key-group stores under ``state/STORE/Partition_k`` (task k holds the key groups Flink's
    KeyGroupRangeAssignment gives it), each bulk-loaded from SST files of about SST_BYTES; return the
    number of keys."""
    from statectl.formats.keygroups import task_range
    from statectl.rocks.sst import ingest_into_new_store, write_sst

    keys = max(1000, size_bytes // VALUE_SIZE)
    per_group = max(1, keys // KEY_GROUPS)
    rng = random.Random(seed)
    for p in range(tasks):
        first, last = task_range(p, tasks, KEY_GROUPS)
        path = state / STORE / f"Partition_{p}"
        path.parent.mkdir(parents=True, exist_ok=True)
        ssts, entries, n = [], [], 0

        def flush() -> None:
            nonlocal entries
            if entries:
                f = state / f"load-{p}-{len(ssts)}.sst"
                write_sst(f, entries)
                ssts.append(f)
                entries = []

        for g in range(first, last + 1):
            for i in range(per_group):
                entries.append((bytes([g]) + b"key-%012d" % i, rng.randbytes(VALUE_SIZE)))
                if len(entries) * (VALUE_SIZE + 17) >= SST_BYTES:
                    flush()
        flush()
        ingest_into_new_store(path, ssts)
        for f in ssts:
            f.unlink()
    return per_group * KEY_GROUPS


def bench_key_groups(work: Path, size_bytes: int, env: dict[str, str], stores: dict[str, list[str]],
                     out: dict[str, Any], rounds: int = 1, server_cpu: Callable[[], float | None] | None = None) -> None:
    """4 -> 8 and then 8 -> 4 (the targets of the first, back) of one key-group store, backed up to each of
    ``stores`` (name -> the blob store's statectl flags) and rescaled there, ``rounds`` times, the stores in
    turn round by round; after each rescale, the same bytes copied by the plainest means (raw_copy of the
    targets' SST blobs: what it copied, and its range deletions). The samples go into ``out`` as they are
    measured, with the load average and (``server_cpu``) the S3 server's CPU seconds of each."""
    work.mkdir(parents=True, exist_ok=True)
    state = work / "kg-state"
    keys = make_key_group_sources(state, size_bytes, 4)
    job = f"{JOB}-kg"
    out.update({"size_bytes": size_bytes, "keys": keys, "rounds": rounds})
    (work / "cwd").mkdir(exist_ok=True)
    for store, flags in stores.items():
        for p in range(4):
            subprocess.run([STATECTL, "-q", "backup", *flags, "--store", STORE, "--create", "--job", job, "--task",
                            f"Partition {p}", "--state-dir", str(state)], env=env, cwd=work, check=True,
                           capture_output=True)
    for r in range(rounds):
        for store, flags in stores.items():
            where = [*flags, "--store", STORE]
            cpu = server_cpu if store == "s3" else None
            for name, src, dst, n, m in (("out", job, f"{job}-8-{r}", 4, 8), ("in", f"{job}-8-{r}", f"{job}-4-{r}", 8, 4)):
                cmd = [STATECTL, "-q", "-o", "json", "rescale", *where, "--job", src, "--to-job", dst, "--from", str(n),
                       "--to", str(m), "--key-groups", str(KEY_GROUPS), "--master", "local[2]", "--work-dir", str(work)]
                os.sync()  # the backups' and the last round's write-back out of the timed run
                load, before = os.getloadavg()[0], cpu() if cpu else None
                sample = run_measured(cmd, env=env, cwd=work / "cwd", timeout=7200)
                server = round((cpu() or 0) - before, 2) if cpu and before is not None else None
                res = json.loads(sample.stdout)
                if not res["verified"] or not res["committed"]:
                    raise RuntimeError(f"rescale bench: unexpected result {res}")
                floor = raw_copy(flags, source_ssts(where, dst, m, env, work), env, cpu)
                out.setdefault(store, {}).setdefault(name, []).append({
                    "tasks_in": n, "tasks_out": m, "wall_s": round(sample.wall_s, 2), "cpu_s": round(sample.cpu_s, 2),
                    "server_cpu_s": server, "load": round(load, 1), "max_rss_mb": round(sample.max_rss_mb, 1),
                    "phases": res["phases"], "bytes_copied": res["bytes_copied"],
                    "bytes_rewritten": res["bytes_rewritten"], "bytes_read": res["bytes_read"],
                    "bytes_written": res["bytes_written"], "bytes_uploaded": res["bytes_uploaded"],
                    "source_bytes": sum(x["bytes"] for x in res["sources"]), "raw_copy": floor})


def source_ssts(where: list[str], job: str, tasks: int, env: dict[str, str], work: Path) -> list[tuple[str, int]]:
    """The blob ids and sizes of the SST files of ``job``'s latest snapshots (tasks 0..``tasks``-1)."""
    out = []
    for p in range(tasks):
        task = ["--job", job, "--task", f"Partition {p}"]
        listed = subprocess.run([STATECTL, "-o", "json", "snapshots", "list", *where, *task], env=env, cwd=work,
                                check=True, capture_output=True, text=True).stdout
        shown = subprocess.run([STATECTL, "-o", "json", "snapshots", "show", json.loads(listed)[0]["snapshot_id"],
                                *where, *task], env=env, cwd=work, check=True, capture_output=True, text=True).stdout
        for f in json.loads(shown)["dir-index"]["files-present"]:
            if f["file-name"].endswith(".sst"):
                blobs = sorted(f["blobs"], key=lambda b: b["offset"])
                ends = [b["offset"] for b in blobs[1:]] + [f["file-metadata"]["size"]]
                out += [(b["blob-id"], end - b["offset"]) for b, end in zip(blobs, ends)]
    return out


def raw_copy(flags: list[str], blobs: list[tuple[str, int]], env: dict[str, str],
             server_cpu: Callable[[], float | None] | None = None, threads: int = 8) -> dict[str, Any]:
    """The floor of a rescale's copies on this store: every blob of ``blobs`` copied once, 8 at a time, by the
    plainest means (S3: boto3 copy_object; file://: copy_file_range and fsync, the disk's write speed), in this
    process, with the S3 server's CPU seconds (``server_cpu``); the copies are deleted afterwards, untimed."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    url = flags[flags.index("--blobstore") + 1]
    if url.startswith("file://"):
        root = Path(url[len("file://"):])

        def one(blob: tuple[str, int]) -> str:
            dst = root / f"{blob[0]}.rawcopy"
            with open(root / blob[0], "rb") as f, open(dst, "wb") as g:
                while os.copy_file_range(f.fileno(), g.fileno(), 64 << 20):
                    pass
                os.fsync(g.fileno())
            return str(dst)

        def drop(done: list[str]) -> None:
            for d in done:
                os.unlink(d)
    else:
        from tests.servers import loopback_s3_client

        bucket, _, prefix = url[len("s3://"):].partition("/")
        client = loopback_s3_client(flags[flags.index("--s3-endpoint") + 1], env["AWS_ACCESS_KEY_ID"],
                                    env["AWS_SECRET_ACCESS_KEY"])

        def one(blob: tuple[str, int]) -> str:
            key = f"{prefix}/{blob[0]}"
            client.copy_object(Bucket=bucket, Key=f"{key}.rawcopy", CopySource={"Bucket": bucket, "Key": key})
            return f"{key}.rawcopy"

        def drop(done: list[str]) -> None:
            client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in done]})
    os.sync()
    before = server_cpu() if server_cpu else None
    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(one, blobs))
    wall = time.monotonic() - t0
    server = round((server_cpu() or 0) - before, 2) if server_cpu and before is not None else None
    drop(done)
    return {"bytes": sum(n for _, n in blobs), "wall_s": round(wall, 2), "server_cpu_s": server}


def report_lines(res: dict[str, Any]) -> list[str]:
    lines = []
    mib = 1024 ** 2
    for c in res.get("cases", []):
        sc, p, ph = c["statectl_wall"], c["script_wall"], c["phases"]
        lines += [
            f"rescale {c['tasks_in']} -> {c['tasks_out']} of {res['source_bytes'] / mib:.0f} MiB ({res['keys']:,} keys, "
            f"{res['value_size']}-byte values), Spark local[2], whole process, vs the obvious script (restore + Python "
            f"re-key + backup; goal <= {GOAL:.2f}x):",
            f"  statectl {sc['median']:.1f} s [{sc['min']:.1f}-{sc['max']:.1f}], script {p['median']:.1f} s "
            f"[{p['min']:.1f}-{p['max']:.1f}], n={sc['n']}: ratio {c['ratio']:.2f}x "
            f"{'ok' if c['ratio'] <= GOAL else 'OVER'}; CPU (medians) {c['statectl_cpu']['median']:.1f} s and "
            f"{c['script_cpu']['median']:.1f} s",
            f"  phases (medians): Spark job {ph.get('spark_s', 0):.1f} s incl. start-up, ingest "
            f"{ph.get('ingest_s', 0):.1f} s, verify {ph.get('verify_s', 0):.1f} s, upload {ph.get('upload_s', 0):.1f} s, "
            f"commit {ph.get('commit_s', 0):.1f} s; peak RSS {c['max_rss_mb']:.0f} MB",
            f"  Spark job phases (medians): SparkContext {ph.get('spark_session_s', 0):.1f} s, to the first task "
            f"{ph.get('spark_tasks_start_s', 0):.1f} s, the stage {ph.get('spark_write_s', 0):.1f} s (its tasks: "
            f"download {ph.get('spark_fetch_s', 0):.1f} s, read-route-write {ph.get('spark_split_s', 0):.1f} s, "
            "summed)",
            f"  executors read {c['bytes_read'] / mib:.1f} MiB (the source snapshots, from S3) and wrote "
            f"{c['bytes_written'] / mib:.1f} MiB of SST files; uploaded {c['bytes_uploaded'] / mib:.1f} MiB; "
            f"keys per target {min(c['per_target_keys']):,}-{max(c['per_target_keys']):,}"]
    floor = res.get("empty_spark_job")
    if floor:
        w, c = floor["wall"], floor["cpu"]
        lines.append(f"an empty Spark job (SparkContext on local[2], one empty task per core, stop; launched as the "
                     f"rescale's): {w['median']:.1f} s [{w['min']:.1f}-{w['max']:.1f}], CPU {c['median']:.1f} s, "
                     f"n={w['n']}")
    return lines + key_group_lines(res.get("key_groups"))


# Goals of a key-group rescale of 1 GiB, each direction: Flink's ingest-DB restore (1.3-1.5 s) plus the commit.
KEY_GROUP_GOAL_S = {"s3": 8.0, "file": 3.0}


def key_group_lines(kg: dict[str, Any] | None) -> list[str]:
    if not kg:
        return []
    mib = 1024 ** 2
    lines = [f"rescale of a key-group store ({KEY_GROUPS} key groups, 64 MiB SST files), --key-groups, whole process, "
             f"{kg.get('rounds', 1)} rounds (goal at 1 GiB: "
             + ", ".join(f"{k} <= {v:.0f} s" for k, v in KEY_GROUP_GOAL_S.items()) + " each way):"]
    for store, goal in KEY_GROUP_GOAL_S.items():
        for name in ("out", "in"):
            runs = kg.get(store, {}).get(name)
            if not runs:
                continue
            runs = runs if isinstance(runs, list) else [runs]
            r, wall = runs[0], stat([x["wall_s"] for x in runs])
            ph = {k: stat([x["phases"].get(k, 0.0) for x in runs]).median for k in ("resolve_s", "copy_s", "upload_s",
                                                                                   "commit_s")}
            loads = [x.get("load", 0.0) for x in runs]
            lines.append(
                f"  {store} {r['tasks_in']} -> {r['tasks_out']}: wall {wall.median:.2f} s [{wall.min:.2f}-{wall.max:.2f}] "
                f"n={wall.n} {'ok' if wall.median <= goal else 'OVER'} (load {min(loads):.1f}-{max(loads):.1f}); "
                f"phases (medians): resolve {ph['resolve_s']:.2f} s, copy {ph['copy_s']:.2f} s, upload {ph['upload_s']:.2f}"
                f" s (overlapping the copies), commit {ph['commit_s']:.2f} s; {r['bytes_copied'] / mib:.0f} MiB copied "
                f"server-side of {r['source_bytes'] / mib:.0f} MiB, {r['bytes_rewritten'] / mib:.0f} MiB rewritten; "
                f"statectl CPU {stat([x.get('cpu_s', 0.0) for x in runs]).median:.2f} s" + _server_cpu(runs))
            floors = [x["raw_copy"] for x in runs if x.get("raw_copy")]
            if floors:
                fw = stat([f["wall_s"] for f in floors])
                rate = floors[0]["bytes"] / mib / max(fw.median, 1e-3)
                lines.append(f"    the same {floors[0]['bytes'] / mib:.0f} MiB copied by the plainest means: "
                             f"{fw.median:.2f} s [{fw.min:.2f}-{fw.max:.2f}] ({rate:.0f} MiB/s)" + _server_cpu(floors))
    return lines


def _server_cpu(samples: list[dict[str, Any]]) -> str:
    cpu = [x["server_cpu_s"] for x in samples if x.get("server_cpu_s") is not None]
    return f", SeaweedFS CPU {stat(cpu).median:.1f} s" if cpu else ""


if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, "-m", "tests.bench.run", "--only", "rescale", *sys.argv[1:]])
