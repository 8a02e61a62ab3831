"""The "copy" figure of tests/bench/run.py (issue 20): ``statectl snapshots copy`` of the store's snapshot
into another bucket of the same SeaweedFS server (server-side: CopyObject) vs ``statectl restore`` +
``statectl backup`` of the same data into a fresh bucket vs ``rclone copy`` between the two buckets (which
rclone also does server-side within one remote). Each command a whole process, interleaved round by round,
every run into a fresh bucket. Bytes through the client come from statectl's JSON (``bytes_through_client``;
restore's bytes_downloaded + backup's bytes_uploaded); rclone's as its own stats line reports them. The
snapshot's size is the store's (``--size-gib``, 1 GiB by default)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.bench.measure import BenchError, Sample, summarize

if TYPE_CHECKING:
    from tests.bench.run import Bench


def figure_copy(bench: "Bench", store: Path) -> dict[str, Any]:
    from tests.bench.run import JOB, STORE, Variant, drop_tree, human, log

    s = bench.s
    assert bench.server is not None
    endpoint = bench.server.endpoint
    log("copy: statectl snapshots copy vs restore + backup vs rclone copy, bucket to bucket on one server")
    src = bench.bucket("copysrc")
    first = bench.run(bench.sc_backup(store, src))
    if first.returncode != 0:
        raise BenchError(f"backup for the copy figure failed: {first.stderr[-2000:]}")
    snap_bytes = json.loads(first.stdout)["bytes_total"]
    work = s.work / "copy"
    work.mkdir(exist_ok=True)
    made: dict[str, list[str]] = {}

    def fresh(key: str) -> str:
        for old in made.pop(key, []):
            bench.drop_bucket(old)
        b = bench.bucket(f"copy{key.replace('_', '')}")
        made.setdefault(key, []).append(b)
        return b

    def copy_cmd(run: int) -> list[str]:
        dst = fresh("statectl")
        return bench.sc("snapshots", "copy", "--blobstore", f"s3://{src}/statectl", "--to-blobstore",
                        f"s3://{dst}/statectl", "--to-job", JOB + "-copy")

    def restore_backup_cmd(run: int) -> list[str]:
        dst = fresh("restore_backup")
        target = work / f"rb-{run}" / STORE / "Partition_0"
        drop_tree(target.parent.parent)
        restore = bench.sc("restore", "--blobstore", f"s3://{src}/statectl", "--target-dir", str(target),
                           "--store-dir", str(work / "nowhere" / STORE / "Partition_0"))
        backup = bench.sc("backup", "--blobstore", f"s3://{dst}/statectl", "--store-dir", str(target))
        backup[backup.index("--job") + 1] = JOB + "-copy"
        return ["sh", "-c", f"{shlex.join(restore)} && {shlex.join(backup)}"]

    def rclone_cmd(run: int) -> list[str]:
        dst = fresh("rclone")
        return [bench.rclone, "copy", f"bench:{src}/statectl/blobs", f"bench:{dst}/rclone", "--transfers",
                str(s.parallelism), "--checkers", str(s.parallelism), "--s3-no-check-bucket", "--stats-one-line",
                "-v", "--stats", "1h"]

    def after_statectl(run: int, sample: Sample) -> None:
        if sample.returncode != 0:
            raise BenchError(f"snapshots copy failed: {sample.stderr[-2000:]}")
        j = json.loads(sample.stdout)
        sample.extra.update(bytes_through_client=j["bytes_through_client"], bytes_copied=j["bytes_copied"],
                            blobs_copied=j["blobs_copied"], engine_s=j["duration_s"], server_side=not j["notes"])

    def after_restore_backup(run: int, sample: Sample) -> None:
        if sample.returncode != 0:
            raise BenchError(f"restore + backup failed: {sample.stderr[-2000:]}")
        docs, text, dec = [], sample.stdout.strip(), json.JSONDecoder()
        while text:  # two JSON documents, one after the other (each pretty-printed)
            doc, end = dec.raw_decode(text)
            docs.append(doc)
            text = text[end:].strip()
        r, b = docs[0], docs[-1]
        sample.extra.update(bytes_through_client=r["bytes_downloaded"] + b["bytes_uploaded"])
        drop_tree(work / f"rb-{run}")

    def after_rclone(run: int, sample: Sample) -> None:
        if sample.returncode != 0:
            raise BenchError(f"rclone copy failed: {sample.stderr[-2000:]}")
        m = re.findall(r"([\d.]+ \w?i?B) / ([\d.]+ \w?i?B)", sample.stderr)
        sample.extra["rclone_stats"] = m[-1][0] if m else "?"

    variants = [Variant("statectl_copy", copy_cmd, after_statectl),
                Variant("restore_backup", restore_backup_cmd, after_restore_backup)]
    if bench.rclone:
        variants.append(Variant("rclone", rclone_cmd, after_rclone))
    else:
        log("copy: rclone is not installed: its row is left out")
    bench.rounds("copy", variants)
    out: dict[str, Any] = {"snapshot_bytes": snap_bytes}
    for v in variants:
        out[v.key] = {**summarize(v.samples), "extra": [x.extra for x in v.samples]}
    for buckets in made.values():
        for b in buckets:
            bench.drop_bucket(b)
    bench.drop_bucket(src)
    log(f"copy: {human(snap_bytes)} snapshot; " + "; ".join(
        f"{k} {out[k]['wall_s']['median']:.2f} s" for k in out if isinstance(out[k], dict) and "wall_s" in out[k]))
    return out


def report_lines(res: dict[str, Any]) -> list[str]:
    from tests.bench.run import human

    lines = [f"copy of a {human(res['snapshot_bytes'])} snapshot to another bucket of the same server "
             "(medians; bytes through the client):"]
    for key, what in (("statectl_copy", "statectl snapshots copy (CopyObject)"),
                      ("restore_backup", "statectl restore + backup"), ("rclone", "rclone copy bucket to bucket")):
        r = res.get(key)
        if not r:
            continue
        ex = r["extra"][-1] if r["extra"] else {}
        through = ex.get("bytes_through_client")
        shown = human(through) if through is not None else f"rclone: {ex.get('rclone_stats', '?')} transferred"
        lines.append(f"  {what:<40} {r['wall_s']['median']:7.2f} s [{r['wall_s']['min']:.2f}-{r['wall_s']['max']:.2f}]"
                     f"  {shown}")
    return lines
