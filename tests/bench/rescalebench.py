"""make bench, rescale (issue 20; optional: ``--only rescale``), whole processes, on the harness's SeaweedFS:

A hash-partitioned store of 4 tasks (16-byte keys, 1 KiB random values, murmur2 % 4), backed up to S3, is
rescaled 4 -> 8 with ``statectl rescale`` (Spark local[2], start-up included). Reported: the wall time,
the phases (resolve, Spark, ingest, verify, upload, commit), the bytes the executors read (the source
snapshots, from S3) and wrote (the targets' SST files), the bytes uploaded, the keys verified, peak RSS
(spark-submit's JVM included: a child statectl waits for).

    .venv/bin/python -m tests.bench.run --only rescale --size-gib 0.25
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.bench.measure import run_measured

STATECTL = str(Path(sys.executable).parent / "statectl")
JOB, STORE = "rescale-bench", "store"
VALUE_SIZE = 1024


def make_sources(state: Path, size_bytes: int, tasks: int, seed: int = 7) -> int:
    """``tasks`` stores under ``state/STORE/Partition_k``, each holding the keys murmur2 sends to it; return
    the number of keys."""
    import rocksdict

    from statectl.formats.adstore import partition_of

    keys = max(1000, size_bytes // VALUE_SIZE)
    rng = random.Random(seed)
    dbs = []
    for p in range(tasks):
        path = state / STORE / f"Partition_{p}"
        path.parent.mkdir(parents=True, exist_ok=True)
        opts = rocksdict.Options(raw_mode=True)
        opts.set_target_file_size_base(64 * 1024 * 1024)
        dbs.append(rocksdict.Rdict(str(path), opts))
    batches = [rocksdict.WriteBatch(raw_mode=True) for _ in range(tasks)]
    for i in range(keys):
        k = b"key-%012d" % i
        p = partition_of(k, tasks)
        batches[p].put(k, rng.randbytes(VALUE_SIZE))
        if len(batches[p]) >= 4096:
            dbs[p].write(batches[p])
            batches[p] = rocksdict.WriteBatch(raw_mode=True)
    for db, b in zip(dbs, batches):
        if len(b):
            db.write(b)
        db.flush()
        db.close()
    return keys


def bench(work: Path, size_bytes: int, env: dict[str, str], endpoint: str, bucket: str,
          tasks_in: int = 4, tasks_out: int = 8) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    state = work / "state"
    keys = make_sources(state, size_bytes, tasks_in)
    where = ["--blobstore", f"s3://{bucket}/statectl", "--s3-endpoint", endpoint, "--job", JOB, "--store", STORE]
    for p in range(tasks_in):
        subprocess.run([STATECTL, "-q", "backup", *where, "--task", f"Partition {p}", "--state-dir", str(state)],
                       env=env, cwd=work, check=True, capture_output=True)
    cmd = [STATECTL, "-q", "-o", "json", "rescale", *where, "--to-job", f"{JOB}-{tasks_out}", "--from", str(tasks_in),
           "--to", str(tasks_out), "--master", "local[2]", "--work-dir", str(work)]
    sample = run_measured(cmd, env=env, cwd=work / "cwd", timeout=7200)
    r = json.loads(sample.stdout)
    if not r["verified"] or not r["committed"] or r["keys"] != keys:
        raise RuntimeError(f"rescale bench: unexpected result {r}")
    return {"size_bytes": size_bytes, "keys": keys, "tasks_in": tasks_in, "tasks_out": tasks_out,
            "wall_s": round(sample.wall_s, 2), "max_rss_mb": round(sample.max_rss_mb, 1),
            "cpu_s": round(sample.cpu_s, 1),
            "phases": r["phases"], "bytes_read": r["bytes_read"], "bytes_written": r["bytes_written"],
            "bytes_uploaded": r["bytes_uploaded"], "source_bytes": sum(s["bytes"] for s in r["sources"]),
            "per_target_keys": [t["keys"] for t in r["targets"]]}


def report_lines(res: dict[str, Any]) -> list[str]:
    mib = 1024 ** 2
    ph = res["phases"]
    return [
        f"rescale {res['tasks_in']} -> {res['tasks_out']} of {res['source_bytes'] / mib:.0f} MiB "
        f"({res['keys']:,} keys, 1 KiB values), Spark local[2], whole process:",
        f"  wall {res['wall_s']:.1f} s (Spark job {ph.get('spark_s', 0):.1f} s incl. start-up, ingest "
        f"{ph.get('ingest_s', 0):.1f} s, verify {ph.get('verify_s', 0):.1f} s, upload {ph.get('upload_s', 0):.1f} s, "
        f"commit {ph.get('commit_s', 0):.1f} s), peak RSS {res['max_rss_mb']:.0f} MB, CPU {res['cpu_s']:.0f} s",
        f"  executors read {res['bytes_read'] / mib:.1f} MiB (the source snapshots, from S3) and wrote "
        f"{res['bytes_written'] / mib:.1f} MiB of SST files; uploaded {res['bytes_uploaded'] / mib:.1f} MiB; "
        f"keys per target {min(res['per_target_keys']):,}-{max(res['per_target_keys']):,}",
    ]


if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, "-m", "tests.bench.run", "--only", "rescale", *sys.argv[1:]])
