"""make bench, adstore (issue 11), whole processes, on one Tansu broker started here:

1. The put path from a topic (``statectl adstore load --topic``: --records records, 16-byte keys, 100-byte
   values, 2 partitions, partitioned stores) vs a raw kafka-python consume of the same records (a process
   that reads both partitions to their end and keeps nothing). Target: at least 0.7x the raw rate.
2. The Spark bulk path from Parquet (``adstore load --from-file --spark``, local[2], Spark's start-up
   included) vs the put path from the same rows. Target: at least 2x faster.
3. The ingest step alone (from the Spark path's phases), and the peak RSS of each (the Spark path's
   includes spark-submit's JVM: it is a child statectl waits for).
4. The crossover (:func:`crossover_bench`): the Spark path vs the put path at 4 M rows of shuffled keys,
   8 M sorted and 20 M shuffled, side by side round by round. Targets: at least 1.0x, 1.0x and 1.5x.

    .venv/bin/python -m tests.bench.adstorebench [--records 2000000]
    # the Parquet figures alone (no broker), each master side by side with the put path, rounds repeated
    .venv/bin/python -m tests.bench.adstorebench --files-only --masters 'local[2],local[1]' --repeat 2
    # the same rows as JSON lines ({"k": ..., "v": ...} per line)
    .venv/bin/python -m tests.bench.adstorebench --files-only --format jsonl --repeat 2
    # keys in no order, a third of the rows overwriting earlier ones (default: ascending, distinct)
    .venv/bin/python -m tests.bench.adstorebench --files-only --order shuffled
    # the crossover figure (make bench --only adstore runs it too): Spark vs put at 4 M shuffled, 8 M sorted
    # and 20 M shuffled rows, 3 rounds; smaller sizes for a quick look
    .venv/bin/python -m tests.bench.adstorebench --crossover --repeat 3
    .venv/bin/python -m tests.bench.adstorebench --crossover 400k:shuffled,800k:sorted --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench.measure import run_measured

STATECTL = str(Path(sys.executable).parent / "statectl")
PARTITIONS = 2

RAW_CONSUME = r"""
import sys
from kafka import KafkaConsumer, TopicPartition
bootstrap, topic, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100, max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20,
                  max_poll_records=10000)
tps = [TopicPartition(topic, p) for p in range(n)]
got = 0
for group in ([tps] if mode == "together" else [[tp] for tp in tps]):
    c.assign(group)
    c.seek_to_beginning()
    while True:
        polled = c.poll(timeout_ms=300)
        for recs in polled.values():
            got += len(recs)
        if not polled and all(c.position(tp) >= c.end_offsets([tp])[tp] for tp in group):
            break
print(got)
"""


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    return dict(env, XDG_CONFIG_HOME=str(work / "cfg"), XDG_DATA_HOME=str(work / "data"))


def _key(i: int) -> bytes:
    return b"key-%012d" % i  # 16 bytes


def _value(i: int) -> bytes:
    return (b"%010d" % i) + b"v" * 90  # 100 bytes


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer

    from statectl.formats.adstore import partition_of

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=50, batch_size=1 << 20)
    try:
        for i in range(n):
            k = _key(i)
            p.send(topic, key=k, value=_value(i), partition=partition_of(k, PARTITIONS))
        p.flush()
    finally:
        p.close()


def _ids(lo: int, hi: int, n: int, order: str) -> list[int]:
    """The key numbers of rows lo..hi: ascending and distinct ("sorted": the put path's best case, its SST
    written as the rows come), or ("shuffled") drawn at random from 0.8 n numbers: keys in no order, about
    a third of the rows overwriting an earlier one (what an export from a warehouse gives)."""
    if order == "sorted":
        return list(range(lo, hi))
    import numpy as np

    return np.random.default_rng(lo).integers(0, max(1, n * 4 // 5), hi - lo).tolist()


def _parquet(path: Path, n: int, order: str = "sorted") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    step = 500_000
    writer = None
    try:
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            ids = _ids(lo, hi, n, order)
            t = pa.table({"k": [_key(i).decode() for i in ids], "v": [_value(i).decode() for i in range(lo, hi)]})
            if writer is None:
                writer = pq.ParquetWriter(path, t.schema)
            writer.write_table(t)
    finally:
        if writer is not None:
            writer.close()


def _jsonl(path: Path, n: int, order: str = "sorted") -> None:
    with open(path, "w") as fh:
        for lo in range(0, n, 500_000):
            hi = min(n, lo + 500_000)
            fh.writelines(f'{{"k":"{_key(k).decode()}","v":"{_value(i).decode()}"}}\n'
                          for k, i in zip(_ids(lo, hi, n, order), range(lo, hi)))


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


def bench(work: Path, records: int = 2_000_000) -> dict[str, Any]:
    from statectl.kafka.client import create_topic
    from tests.servers import TansuServer

    work.mkdir(parents=True, exist_ok=True)
    env = _env(work)
    out: dict[str, Any] = {"records": records}
    with TansuServer() as tansu:
        b = tansu.bootstrap
        topic = "adstore-bench"
        create_topic(b, topic, partitions=PARTITIONS)
        _produce(b, topic, records)
        # The peer: the faster of a plain consume of both partitions at once and one after the other.
        raws = [run_measured([sys.executable, "-c", RAW_CONSUME, b, topic, str(PARTITIONS), mode], env=env,
                             cwd=work / "raw") for mode in ("together", "one-by-one")]
        for r in raws:
            if int(r.stdout.strip()) != records:
                raise RuntimeError(f"the raw consumer read {r.stdout.strip()} records, not {records}")
        out["raw_modes_s"] = [round(r.wall_s, 2) for r in raws]
        raw = min(raws, key=lambda r: r.wall_s)
        put = run_measured([STATECTL, "adstore", "load", "--kafka", b, "--topic", topic, "--store", "t", "--state-dir",
                            str(work / "state"), "-o", "json"], env=env, cwd=work / "put")
        if json.loads(put.stdout)["records"] != records:
            raise RuntimeError("the topic load applied a different number of records")
        out.update(raw_s=round(raw.wall_s, 2), raw_rss_mb=round(raw.max_rss_mb), topic_put_s=round(put.wall_s, 2),
                   topic_put_rss_mb=round(put.max_rss_mb), topic_put_rate=round(records / put.wall_s),
                   raw_rate=round(records / raw.wall_s), topic_put_vs_raw=_ratio(raw.wall_s, put.wall_s))
    data = work / "rows.parquet"
    _parquet(data, records)
    common = ["adstore", "load", "--from-file", str(data), "--key-field", "k", "--value-field", "v", "-o", "json"]
    fput = run_measured([STATECTL, *common, "--store", "fp", "--state-dir", str(work / "state")], env=env,
                        cwd=work / "fput")
    fsp = run_measured([STATECTL, *common, "--store", "fs", "--state-dir", str(work / "state"), "--spark", "--master",
                        "local[2]"], env=env, cwd=work / "fspark")
    put_r, spark_r = json.loads(fput.stdout), json.loads(fsp.stdout)
    if put_r["stores"][0]["checksum"] != spark_r["stores"][0]["checksum"]:
        raise RuntimeError("the Spark path and the put path built different stores")
    out.update(file_put_s=round(fput.wall_s, 2), file_put_rss_mb=round(fput.max_rss_mb),
               spark_s=round(fsp.wall_s, 2), spark_rss_mb=round(fsp.max_rss_mb),
               spark_vs_put=_ratio(fput.wall_s, fsp.wall_s), phases=spark_r.get("phases", {}))
    return out


def files_bench(work: Path, records: int, masters: list[str], repeat: int, fmt: str = "parquet",
                order: str = "sorted", warm: bool = True) -> dict[str, Any]:
    """The put path and the Spark path under each of ``masters`` from one Parquet (or JSON-lines) file of
    rows in ``order`` (:func:`_ids`), ``repeat`` rounds (each round runs them all, one after the other, so
    a ratio compares runs made side by side); the median of the rounds' ratios: spark_<master>/put (time)
    and each master's time over the first's. Before the rounds, one Spark build of 1 000 rows, so the
    rounds map the driver's class archive (statectl.spark.launch.ClassArchive) as every build but a
    machine's first does: its time is ``first_build_s`` (recording the archive, when there was none); without
    ``warm`` there is none (a figure measured after another)."""
    import shutil
    import statistics

    work.mkdir(parents=True, exist_ok=True)
    env = _env(work)
    data = work / f"rows.{fmt}"
    write = _parquet if fmt == "parquet" else _jsonl
    write(data, records, order)
    common = ["adstore", "load", "--from-file", str(data), "--key-field", "k", "--value-field", "v", "-o", "json"]
    first = None
    if warm:
        tiny = work / f"warm.{fmt}"
        write(tiny, 1000)
        first = run_measured([STATECTL, *common[:3], str(tiny), *common[4:], "--store", "warm", "--state-dir",
                              str(work / "warm-state"), "--spark", "--master", masters[0]], env=env, cwd=work / "warm")
    rounds = []
    for r in range(repeat):
        got: dict[str, Any] = {}
        runs = [("put", [])] + [(m, ["--spark", "--master", m]) for m in masters]
        for name, extra in (runs if r % 2 == 0 else runs[::-1]):  # who goes first alternates
            cwd = work / f"r{r}-{name}"
            s = run_measured([STATECTL, *common, "--store", f"s{r}{len(got)}", "--state-dir", str(work / "state"),
                              *extra], env=env, cwd=cwd)
            res = json.loads(s.stdout)
            got[name] = {"s": round(s.wall_s, 2), "rss_mb": round(s.max_rss_mb), "phases": res.get("phases", {}),
                         "checksum": res["stores"][0]["checksum"]}
        if len({g["checksum"] for g in got.values()}) != 1:
            raise RuntimeError("the Spark path and the put path built different stores")
        rounds.append(got)
        shutil.rmtree(work / "state", ignore_errors=True)
    out: dict[str, Any] = {"records": records, "format": fmt, "order": order,
                           "first_build_s": round(first.wall_s, 2) if first else None, "rounds": rounds}
    for m in masters:
        ratios = [g[m]["s"] / g["put"]["s"] for g in rounds]
        out[f"spark_{m}/put"] = round(statistics.median(ratios), 3)
        out[f"spark_{m}/put_range"] = [round(min(ratios), 3), round(max(ratios), 3)]
    for m in masters[1:]:
        out[f"{m}/{masters[0]}"] = round(statistics.median(g[m]["s"] / g[masters[0]]["s"] for g in rounds), 3)
    return out


# The crossover figure's cases: (rows, key order); targets: the Spark path no slower than the put path at 4 M
# shuffled and at 8 M sorted rows, and at least 1.5x faster at 20 M.
CROSSOVER = ((4_000_000, "shuffled"), (8_000_000, "sorted"), (20_000_000, "shuffled"))
CROSSOVER_TARGETS = {(4_000_000, "shuffled"): 1.0, (8_000_000, "sorted"): 1.0, (20_000_000, "shuffled"): 1.5}


def crossover_bench(work: Path, cases: list[tuple[int, str]], rounds: int,
                    master: str = "local[2]") -> dict[str, Any]:
    """``adstore load --from-file --spark`` against the put path (the same load without --spark) for each
    case (rows, key order: :func:`_ids`) of one Parquet file, ``rounds`` rounds each, the two run side by side
    in every round (:func:`files_bench`; a warm-up build first). Per case: the median of the rounds' put/spark
    time ratios (above 1: Spark is faster), their range, the medians of each path's time and the Spark
    path's phases of its median round."""
    import statistics

    out: dict[str, Any] = {"master": master, "rounds": rounds, "cases": []}
    for i, (records, order) in enumerate(cases):
        r = files_bench(work / f"c{i}", records, [master], rounds, order=order, warm=i == 0)
        runs = r["rounds"]
        speed = sorted(g["put"]["s"] / g[master]["s"] for g in runs)
        mid = sorted(runs, key=lambda g: g[master]["s"])[len(runs) // 2]
        out["cases"].append({
            "records": records, "order": order, "put_s": round(statistics.median(g["put"]["s"] for g in runs), 2),
            "spark_s": round(statistics.median(g[master]["s"] for g in runs), 2),
            "put_over_spark": round(statistics.median(speed), 3), "range": [round(speed[0], 3), round(speed[-1], 3)],
            "target": CROSSOVER_TARGETS.get((records, order)), "spark_phases": mid[master]["phases"],
            "put_phases": mid["put"]["phases"], "runs": [{k: g[k]["s"] for k in ("put", master)} for g in runs]})
        if r["first_build_s"] is not None:
            out["first_build_s"] = r["first_build_s"]
    return out


def crossover_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"adstore --from-file --spark ({r['master']}) vs the put path, Parquet, 16 B keys, 100 B values, "
             f"{r['rounds']} rounds side by side (put/spark time: above 1, Spark is faster)"]
    for c in r["cases"]:
        target = c["target"]
        verdict = "" if target is None else f" (target >= {target}x: {'met' if c['put_over_spark'] >= target else 'missed'})"
        lines.append(f"  {c['records']:,} rows, keys {c['order']}: Spark {c['spark_s']} s, put {c['put_s']} s -> "
                     f"{c['put_over_spark']}x [{c['range'][0]}-{c['range'][1]}]{verdict}; Spark phases "
                     f"{', '.join(f'{k} {v}' for k, v in c['spark_phases'].items())}")
    return lines


def parse_cases(text: str) -> list[tuple[int, str]]:
    """``4M:shuffled,8M:sorted,20M`` (order shuffled unless named; K and M multiply) -> cases."""
    out = []
    for item in text.split(","):
        size, _, order = item.strip().partition(":")
        mult = {"k": 1_000, "m": 1_000_000}.get(size[-1:].lower(), 1)
        out.append((int(float(size.rstrip("kKmM")) * mult), order or "shuffled"))
    return out


def report_lines(r: dict[str, Any]) -> list[str]:
    ph = r.get("phases", {})
    return [
        f"adstore from a topic, {r['records']:,} records: put path {r['topic_put_s']} s ({r['topic_put_rate']:,}/s, "
        f"{r['topic_put_rss_mb']} MB) vs raw kafka-python consume {r['raw_s']} s ({r['raw_rate']:,}/s, "
        f"{r['raw_rss_mb']} MB) -> {r['topic_put_vs_raw']}x the raw rate (target >= 0.7x)",
        f"adstore from Parquet: Spark bulk path {r['spark_s']} s ({r['spark_rss_mb']} MB peak, JVM included) vs put path "
        f"{r['file_put_s']} s ({r['file_put_rss_mb']} MB) -> {r['spark_vs_put']}x faster (target >= 2x); "
        f"phases {', '.join(f'{k} {v} s' for k, v in ph.items())}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--files-only", action="store_true", help="only the Parquet figures: put path vs Spark path")
    p.add_argument("--masters", default="local[2]", help="with --files-only: Spark masters, comma-separated")
    p.add_argument("--repeat", type=int, default=1, help="with --files-only: rounds")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help="with --files-only: the input")
    p.add_argument("--order", choices=("sorted", "shuffled"), default="sorted",
                   help="with --files-only: keys ascending and distinct, or in no order with repeats")
    p.add_argument("--crossover", nargs="?", const="4M:shuffled,8M:sorted,20M:shuffled", default=None,
                   metavar="ROWS:ORDER,...", help="only the Spark path vs the put path at these sizes (default "
                   "4M:shuffled,8M:sorted,20M:shuffled), --repeat rounds")
    args = p.parse_args(argv)
    if args.crossover:
        with tempfile.TemporaryDirectory(prefix="adstorebench-", dir=args.work) as tmp:
            r = crossover_bench(Path(tmp), parse_cases(args.crossover), args.repeat, args.masters.split(",")[0])
        print("\n".join(crossover_lines(r)))
        print(json.dumps(r))
        return 0
    if args.files_only:
        with tempfile.TemporaryDirectory(prefix="adstorebench-", dir=args.work) as tmp:
            r = files_bench(Path(tmp), args.records, args.masters.split(","), args.repeat, args.format, args.order)
        print(json.dumps(r, indent=1))
        return 0
    with tempfile.TemporaryDirectory(prefix="adstorebench-", dir=args.work) as tmp:
        r = bench(Path(tmp), args.records)
    print("\n".join(report_lines(r)))
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
