"""The "all-stores" figure of tests/bench/run.py: ``backup --all`` of a state dir of many small stores to
SeaweedFS, and ``restore --all`` of them into an empty state dir, at several store counts (50, 100 and 200
stores of 200 keys by default: half as many stores of two tasks each). Both must stay linear in the number
of stores: the figure is the time per store at each count and the ratio of the largest count's time per
store to the smallest's (linear: about 1.0; the process's fixed start weighs more at the smaller count,
so a little under). The counts alternate round by round, the order rotated, every backup into a fresh
bucket and every restore into a fresh dir; each restore's JSON must list every store and no failure.

    .venv/bin/python -m tests.bench.run --only all-stores
    .venv/bin/python -m tests.bench.allbench --counts 50,100,200 --runs 3
    .venv/bin/python -m tests.bench.allbench --before /tmp/main-tree   # also another tree's statectl, interleaved

``--before DIR`` runs the statectl package of another checkout (``git archive main statectl | tar -x -C DIR``)
beside this one's, in the same rounds, with the same stores and server (as ``before_backup``, ``before_restore``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tests.bench.measure import BenchError, Sample, run_measured, stat, summarize

if TYPE_CHECKING:
    from tests.bench.run import Bench

DEFAULT_COUNTS = (50, 100, 200)
KEYS = 200
TASKS = 2  # task dirs per store; task names without '_' name themselves (no job model needed)
RATIO_TARGET = 1.1


def make_state_dir(path: Path, count: int, keys: int = KEYS, value_size: int = 1024) -> None:
    """``count`` stores of ``keys`` keys under ``path`` (``store-NNN/taskT``: count / TASKS stores, TASKS tasks)."""
    from tests.tools.genstore import make_store

    for i in range(count):
        make_store(path / f"store-{i // TASKS:03d}" / f"task{i % TASKS}", keys, value_size, seed=i, sst_mb=4)


def figure_all_stores(bench: "Bench", counts: tuple[int, ...] = DEFAULT_COUNTS, runs: int | None = None,
                      before: Path | None = None) -> dict[str, Any]:
    """backup --all and restore --all at each count, ``runs`` rounds; per count the summaries and the
    medians per store, and the ratio of the largest count's per-store median to the smallest's. ``before``:
    a tree whose statectl package runs too, interleaved (its figures under ``before_backup``, ``before_restore``)."""
    from tests.bench.run import drop_tree

    assert bench.server is not None
    work = bench.s.work / "all-stores"
    drop_tree(work)
    for n in counts:
        bench.run([bench.python, "-c", f"from pathlib import Path; from tests.bench.allbench import make_state_dir; "
                                       f"make_state_dir(Path({str(work / f'state-{n}')!r}), {n})"], timeout=3600)
    trees = {"": None, **({"before_": before} if before is not None else {})}
    samples: dict[tuple[int, str], list[Sample]] = {(n, t + k): [] for n in counts for k in ("backup", "restore")
                                                    for t in trees}
    for r in range(runs or bench.s.runs):
        for n in counts[r % len(counts):] + counts[:r % len(counts)]:
            for tree in list(trees)[r % len(trees):] + list(trees)[:r % len(trees)]:
                _round(bench, work, n, r, tree, trees[tree], samples)
    drop_tree(work)
    out = _summary(counts, samples)
    if before is not None:
        out["before"] = str(before)
    return out


def _round(bench: "Bench", work: Path, n: int, r: int, tree: str, root: Path | None,
           samples: dict[tuple[int, str], list[Sample]]) -> None:
    """backup --all of the ``n`` stores into a fresh bucket, then restore --all of them into a fresh dir."""
    from tests.bench.run import JOB, drop_tree, log, sync_all

    assert bench.server is not None
    env = bench.env if root is None else {**bench.env, "PYTHONPATH": f"{root}:{bench.env['PYTHONPATH']}"}
    bucket = bench.bucket(f"all{n}")
    where = ["--job", JOB, "--blobstore", f"s3://{bucket}/statectl", "--s3-endpoint", bench.server.endpoint,
             "--parallelism", str(bench.s.parallelism)]
    target = work / f"restored-{n}-{r}"
    for kind, cmd in (("backup", ["backup", "--all", "--state-dir", str(work / f"state-{n}")]),
                      ("restore", ["restore", "--all", "--state-dir", str(target)])):
        server = bench.server_cpu_s()
        sample = run_measured([bench.statectl, "-q", "-o", "json", *cmd, *where], env=env, cwd=bench.s.work / "cwd",
                              timeout=3600)
        if server is not None:
            sample.extra["server_cpu_s"] = round((bench.server_cpu_s() or server) - server, 2)
        _check(json.loads(sample.stdout), n, kind)
        samples[(n, tree + kind)].append(sample)
        sync_all()
        log(f"all-stores: {tree}{kind} --all of {n} stores, run {r + 1}: {sample.wall_s:.2f} s "
            f"({sample.wall_s / n * 1000:.1f} ms a store), {sample.cpu_s:.1f} s CPU, server "
            f"{sample.extra.get('server_cpu_s', '?')} s CPU")
    drop_tree(target)
    bench.drop_bucket(bucket)


def _check(doc: dict[str, Any], n: int, kind: str) -> None:
    if doc.get("failures") or len(doc.get("results", [])) != n:
        raise BenchError(f"{kind} --all of {n} stores: {len(doc.get('results', []))} results, "
                         f"failures {doc.get('failures')}")


def _summary(counts: tuple[int, ...], samples: dict[tuple[int, str], list[Sample]]) -> dict[str, Any]:
    out: dict[str, Any] = {"keys": KEYS, "tasks_per_store": TASKS, "counts": list(counts)}
    for kind in sorted({k for _, k in samples}):
        per = {n: stat([x.wall_s for x in samples[(n, kind)]]).median / n for n in counts}
        cpu = {n: stat([x.cpu_s + x.extra.get("server_cpu_s", 0.0) for x in samples[(n, kind)]]).median / n
               for n in counts}
        out[kind] = {
            "by_count": {str(n): {**summarize(samples[(n, kind)]), "per_store_ms": round(per[n] * 1000, 2),
                                  "cpu_per_store_ms": round(cpu[n] * 1000, 2)} for n in counts},
            "ratio": round(per[max(counts)] / per[min(counts)], 3),
            "cpu_ratio": round(cpu[max(counts)] / cpu[min(counts)], 3),
        }
    return out


def add_figures(res: dict[str, Any], add: Callable[..., None], fmt: Callable[[dict[str, Any]], str]) -> None:
    """backup and restore rows of the run.py table (``add`` and ``fmt`` are run.figures' own): the largest
    count against the smallest, per store."""
    lo, hi = str(min(res["counts"])), str(max(res["counts"]))
    for kind in ("backup", "restore"):
        r = res[kind]
        a, b = r["by_count"][hi], r["by_count"][lo]
        add("14", f"{kind} --all of {hi} stores x {res['keys']} keys (S3), per store", a["per_store_ms"] / 1000,
            f"{a['per_store_ms']:.1f} ms ({fmt(a['wall_s'])} in all)", f"the same for {lo} stores",
            b["per_store_ms"] / 1000, f"{b['per_store_ms']:.1f} ms ({fmt(b['wall_s'])} in all)",
            f"<= {RATIO_TARGET:.2f}x (linear)", r["ratio"] <= RATIO_TARGET, ratio=r["ratio"])


def report_lines(res: dict[str, Any]) -> list[str]:
    lines = [f"backup --all / restore --all of N stores x {res['keys']} keys ({res['tasks_per_store']} tasks a store), "
             "S3 (medians [min-max]; per store = median / N):"]
    for kind in ("backup", "restore", "before_backup", "before_restore"):
        if kind not in res:
            continue
        r = res[kind]
        for n in res["counts"]:
            c = r["by_count"][str(n)]
            w = c["wall_s"]
            server = c.get("server_cpu_s", {}).get("median", "?")
            lines.append(f"  {kind:<14} --all {n:>4} stores: {w['median']:6.2f} s [{w['min']:.2f}-{w['max']:.2f}], "
                         f"{c['per_store_ms']:6.1f} ms a store; CPU {c['cpu_s']['median']:.1f} s, server {server} s: "
                         f"{c['cpu_per_store_ms']:.1f} ms a store")
        lines.append(f"  {kind:<14} per store, largest / smallest count: {r['ratio']:.2f}x "
                     f"{'ok' if r['ratio'] <= RATIO_TARGET else 'OVER'} (target <= {RATIO_TARGET:.2f}x); "
                     f"CPU (client + server) {r['cpu_ratio']:.2f}x")
    return lines


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    from tests.bench.run import Bench, parse_args

    p = argparse.ArgumentParser(prog="python -m tests.bench.allbench", description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", default=",".join(map(str, DEFAULT_COUNTS)))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--before", type=Path, default=None, help="a tree whose statectl package also runs, interleaved")
    a = p.parse_args(argv)
    bench = Bench(parse_args(["--only", "all-stores", "--runs", str(a.runs)]))
    try:
        bench.start()
        res = figure_all_stores(bench, _ints(a.counts), a.runs, a.before)
    finally:
        bench.cleanup()
    print("\n".join(report_lines(res)))
    (bench.s.bench_dir / "all-stores.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
