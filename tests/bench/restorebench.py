"""The "restore-peers" figure of tests/bench/run.py: ``statectl restore`` into an empty dir against the
plainest download that is as durable, a parallel boto3 GET of the same files with each file fsynced by the
thread that wrote it (tests/bench/s3peer.py ``get --fsync``), on one SeaweedFS server, at several store
sizes and with large (64 MiB) as well as small SST files. The two alternate run by run, the order
swapped every round, so drift on a shared machine hits both alike; the figure is the ratio of medians.

    .venv/bin/python -m tests.bench.run --only restore-peers                 # 512 MiB and 1 GiB, 64 and 4 MiB SSTs
    .venv/bin/python -m tests.bench.restorebench --sizes-mib 512 --sst-mb 64 --runs 7

statectl keeps every check it makes: the catalog and its reader pin, the blob sizes of every file it splits
into ranges checked before a byte is written, the free space, the size and CRC32 of every file as it streams,
fsync of each file and of the dirs, the atomic swap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tests.bench.measure import BenchError, Sample, stat, summarize

if TYPE_CHECKING:
    from tests.bench.run import Bench

DEFAULT_SIZES_MIB = (512, 1024)
DEFAULT_SST_MB = (64, 4)


def figure_restore_peers(bench: "Bench", sizes_mib: tuple[int, ...] = DEFAULT_SIZES_MIB,
                         sst_mbs: tuple[int, ...] = DEFAULT_SST_MB, runs: int | None = None) -> dict[str, Any]:
    """One case per (size, SST size): statectl restore vs boto3 GET + fsync, ``runs`` rounds each."""
    from tests.bench.run import log

    out: dict[str, Any] = {"cases": []}
    for size in sizes_mib:
        for sst in sst_mbs:
            log(f"restore-peers: {size} MiB store, {sst} MiB SSTs")
            out["cases"].append(_case(bench, size, sst, runs or bench.s.runs))
    return out


def _prepare(bench: "Bench", size_mib: int, sst_mb: int) -> tuple[Path, str, str, int]:
    """A store of ``size_mib`` in SSTs of ``sst_mb``, backed up by statectl into one bucket and its
    checkpoint's files PUT by boto3 into another: (work dir, statectl's bucket, boto3's bucket, files)."""
    from tests.bench.run import STORE, VALUE_SIZE, checkpoint_dirs, drop_tree, listing

    assert bench.server is not None
    work = bench.s.work / f"restore-peers-{size_mib}-{sst_mb}"
    drop_tree(work)
    store = work / "state" / STORE / "Partition_0"
    store.parent.mkdir(parents=True)
    keys = size_mib * 1024 * 1024 // VALUE_SIZE
    bench.run([bench.python, "-m", "tests.tools.genstore", str(store), "--keys", str(keys), "--value-size",
               str(VALUE_SIZE), "--sst-mb", str(sst_mb), "--seed", "1"], timeout=7200)
    sc_bucket, peer_bucket = bench.bucket("rpsc"), bench.bucket("rpboto")
    bench.run(bench.sc_backup(store, sc_bucket))
    (cp,) = checkpoint_dirs(store)
    bench.run([bench.python, "-m", "tests.bench.s3peer", "put", str(cp), f"s3://{peer_bucket}/boto3",
               "--endpoint", bench.server.endpoint, "--threads", str(bench.s.parallelism)])
    files = len(listing(cp))
    drop_tree(store.parent.parent)  # restores must download: no local store or checkpoint to reuse
    return work, sc_bucket, peer_bucket, files


def _case(bench: "Bench", size_mib: int, sst_mb: int, runs: int) -> dict[str, Any]:
    from tests.bench.run import STORE, drop_tree, log, sync_all

    assert bench.server is not None
    work, sc_bucket, peer_bucket, files = _prepare(bench, size_mib, sst_mb)
    nostore = work / "no-such-state" / STORE / "Partition_0"
    commands = {
        "statectl": lambda t: bench.sc_restore(sc_bucket, "--target-dir", str(t), "--store-dir", str(nostore)),
        "boto3_fsync": lambda t: [bench.python, "-m", "tests.bench.s3peer", "get", f"s3://{peer_bucket}/boto3",
                                  str(t), "--endpoint", bench.server.endpoint,
                                  "--threads", str(bench.s.parallelism), "--fsync"],
    }
    samples: dict[str, list[Sample]] = {k: [] for k in commands}
    for r in range(runs):
        order = list(commands) if r % 2 == 0 else list(reversed(commands))
        for key in order:
            target = work / "restores" / f"{key}-{r}"
            sample = bench.run(commands[key](target))
            if key == "statectl":
                j = json.loads(sample.stdout)
                if j["files_reused"]:
                    raise BenchError(f"statectl restore reused {j['files_reused']} local files: not a download")
                sample.extra["engine_s"] = j["duration_s"]
            samples[key].append(sample)
            drop_tree(target)
            sync_all()
            log(f"restore-peers {size_mib} MiB/{sst_mb} MiB SSTs: {key} run {r + 1}: {sample.wall_s:.2f} s, "
                f"{sample.cpu_s:.1f} s CPU")
    for b in (sc_bucket, peer_bucket):
        bench.drop_bucket(b)
    drop_tree(work)
    sc, peer = (stat([x.wall_s for x in samples[k]]) for k in ("statectl", "boto3_fsync"))
    return {"size_mib": size_mib, "sst_mb": sst_mb, "files": files, "ratio": round(sc.median / peer.median, 3),
            **{k: summarize(v) for k, v in samples.items()}}


def add_figures(res: dict[str, Any], add: Callable[..., None], fmt: Callable[[dict[str, Any]], str]) -> None:
    """The cases as rows of the run.py table (``add`` and ``fmt`` are run.figures' own)."""
    for c in res.get("cases", []):
        sc, p = c["statectl"]["wall_s"], c["boto3_fsync"]["wall_s"]
        add("3b", f"restore of {c['size_mib']} MiB in {c['files']} files ({c['sst_mb']} MiB SSTs), wall", sc["median"],
            fmt(sc), "boto3 GET x8 + fsync of each file", p["median"], fmt(p), "<= 1.00x", sc["median"] <= p["median"])


def report_lines(res: dict[str, Any]) -> list[str]:
    """The cases as text: medians, ranges and the ratio against the peer."""
    lines = ["restore vs boto3 GET + fsync of each file (ratio of medians; target <= 1.00x):"]
    for c in res.get("cases", []):
        sc, peer = c["statectl"], c["boto3_fsync"]
        lines.append(
            f"  {c['size_mib']:>5} MiB, {c['sst_mb']:>2} MiB SSTs ({c['files']:>4} files): statectl "
            f"{sc['wall_s']['median']:.2f} s [{sc['wall_s']['min']:.2f}-{sc['wall_s']['max']:.2f}], "
            f"CPU {sc['cpu_s']['median']:.2f} s; boto3+fsync {peer['wall_s']['median']:.2f} s "
            f"[{peer['wall_s']['min']:.2f}-{peer['wall_s']['max']:.2f}], CPU {peer['cpu_s']['median']:.2f} s; "
            f"ratio {c['ratio']:.2f}x {'ok' if c['ratio'] <= 1.0 else 'OVER'}")
    return lines


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    from tests.bench.run import Bench, parse_args

    p = argparse.ArgumentParser(prog="python -m tests.bench.restorebench", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes-mib", default=",".join(map(str, DEFAULT_SIZES_MIB)))
    p.add_argument("--sst-mb", default=",".join(map(str, DEFAULT_SST_MB)))
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args(argv)
    bench = Bench(parse_args(["--only", "restore-peers", "--runs", str(a.runs)]))
    try:
        bench.start()
        res = figure_restore_peers(bench, _ints(a.sizes_mib), _ints(a.sst_mb), a.runs)
    finally:
        bench.cleanup()
    print("\n".join(report_lines(res)))
    (bench.s.bench_dir / "restore-peers.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
