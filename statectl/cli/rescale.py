"""statectl rescale"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.adstore import _conf
from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import BLOBSTORE, Env, human_bytes, state_command
from statectl.errors import UsageError

EPILOG = (
    "Hash-partitioned stores (a key lives in the task of its Kafka partition): every key of the sources is "
    "re-routed to task partitioner(key, M), Kafka's default toPositive(murmur2(key)) % M unless --partitioner "
    "names another. The Spark executors read the source snapshots from the blob store (each file's CRC32 "
    "checked), write the targets' SST files, which are ingested into staged stores, verified (key count and an "
    "order-independent content hash equal the sources'; every key in its partitioner's task) and uploaded with "
    "a TTL. Only then are the M checkpoints committed. A failure or a kill before that commits nothing and "
    "leaves the sources untouched ('statectl gc' reclaims the TTL'd uploads).\n\n"
    "Key-group stores (--key-groups G: every key starts with its key group, Flink's layout; task i of N owns "
    "the contiguous key groups Flink's KeyGroupRangeAssignment gives): each source's MANIFEST gives its files' "
    "key ranges. A file wholly inside a target's key groups is copied server-side into the target's snapshot, "
    "unread, at its level; a boundary file (and any file whose key range overlaps one) is read by the executors, "
    "which rewrite its keys into the targets they belong to. Each target gets a MANIFEST listing both. The "
    "verification covers the rewritten keys (count, content hash, task) and every target's files (key groups, "
    "no overlaps within a level).\n\n"
    "The new checkpoints carry no changelog position (JSON changelog_position: null): the old partitioning's "
    "changelog offsets mean nothing for the new tasks. With --kafka, a target task whose latest checkpoint "
    "names one for the store gets a changelog marker with no offset.\n\n"
    "Before reading a key it refuses (exit 1) sources that are not the --from layout: the store has snapshots "
    "of other tasks (--ignore-other-tasks if they are left over), or a source's files hold keys (key groups) "
    "of another task; the executors check every key of a hash-partitioned source as they read it. The rescale "
    "is recorded in the blob store before its first commit: the same command run again commits the targets a "
    "cut commit left (exit 3 says so), or says it is done and writes nothing; it refuses when the sources "
    "changed since (--again starts a new rescale). A dry run makes every check but the executors'.\n\n"
    "Examples:\n\n"
    "  statectl rescale --job page-views --store counts --from 8 --to 32 --blobstore s3://backups/samza\n\n"
    "  statectl rescale --job page-views --store counts --from 4 --to 2 --to-job page-views-small --dry-run\n\n"
    "  statectl rescale --job sessions --store window-state --from 4 --to 8 --key-groups 128 --dry-run\n\n"
    "  statectl rescale --job page-views --store counts --from 2 --to 3 --master yarn "
    "--partitioner mylib.parts:route\n\n"
    + exit_codes_epilog(0, (1, "failure: the sources are not the --from layout or not what the recorded rescale "
                               "read, a damaged source snapshot, the Spark job failed, or the verification failed "
                               "(nothing committed)"), 2,
                        (3, "the commit of a target failed after others were committed (it says which; run the "
                            "same command again)"),
                        (10, "a source task has no snapshot"),
                        (11, "a backup of a target store is running"), (13, "pyspark or Java missing"))
)


@state_command(*BLOBSTORE, "kafka", "job", "job_id", "store", "keep_last", "parallelism", "chunk_size", "ttl",
               "grace")
def rescale(
    env: Env,
    from_tasks: Annotated[int, typer.Option("--from", metavar="N", help="Source tasks: Partition 0..N-1.")] = 0,
    to_tasks: Annotated[int, typer.Option("--to", metavar="M", help="Target tasks: Partition 0..M-1.")] = 0,
    to_job: Annotated[Optional[str], typer.Option("--to-job", help="The job the new snapshots are for (default: "
                                                  "--job).", show_default=False)] = None,
    master: Annotated[str, typer.Option("--master", help="Spark master: local[*], yarn, k8s://..., "
                                        "spark://...")] = "local[*]",
    spark_conf: Annotated[Optional[list[str]], typer.Option("--spark-conf", help="KEY=VALUE for spark-submit "
                                                            "(repeatable).", show_default=False)] = None,
    partitioner: Annotated[Optional[str], typer.Option("--partitioner", metavar="MODULE:CALLABLE", help=(
        "f(key: bytes, partitions: int) -> int, importable where the executors and statectl run (its "
        "verification routes every key again); default: Kafka's murmur2 partitioner."), show_default=False)] = None,
    from_partitioner: Annotated[Optional[str], typer.Option("--from-partitioner", metavar="MODULE:CALLABLE", help=(
        "The partitioner that placed the sources' keys, when not --partitioner (murmur2: Kafka's); every source "
        "key must route to its own task by it."), show_default=False)] = None,
    task_map: Annotated[Optional[Path], typer.Option("--task-map", metavar="FILE", help=(
        "JSON {\"from\": [source task names], \"to\": [target task names]} instead of Partition k."),
        show_default=False)] = None,
    snapshots: Annotated[Optional[Path], typer.Option("--snapshots", metavar="FILE", help=(
        "JSON {task name: snapshot id} of source snapshots to take instead of the latest."),
        show_default=False)] = None,
    work_dir: Annotated[Optional[Path], typer.Option("--work-dir", help="Where the Spark job's files and the staged "
                                                     "target stores go (default: the temp dir).",
                                                     show_default=False)] = None,
    key_groups: Annotated[Optional[int], typer.Option("--key-groups", metavar="G", help=(
        "The store's keys start with their key group, of G (Flink's layout: 1 byte when G <= 128, else 2): "
        "files inside a target's key groups are copied server-side unread, only the others are rewritten."),
        show_default=False)] = None,
    ignore_other_tasks: Annotated[bool, typer.Option("--ignore-other-tasks", help=(
        "Rescale although the store has snapshots of tasks besides the sources (left over from an earlier "
        "scale-in that statectl did not record)."))] = False,
    again: Annotated[bool, typer.Option("--again", help=(
        "A new rescale, whatever the blob store records of this one (done, or cut in its commit) or of another "
        "one into the target store."))] = False,
    file_owner: Annotated[Optional[str], typer.Option("--file-owner", metavar="USER:GROUP", help=(
        "The owner and group names the targets' files are recorded with: the target job's user, which Samza's "
        "restore compares with its restored files' (default: the source snapshots')."), show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Make every check but the executors' and print the plan "
                                          "(with --key-groups: the bytes copied server-side and rewritten; run again: "
                                          "what is left to commit); run and commit nothing.")] = False,
) -> None:
    """Re-partition the snapshots of a store's N tasks into M new snapshots on Spark, verified, then committed
    together. The new checkpoints carry no changelog position."""
    from statectl.engine.rescale import RescaleOptions, load_snapshots_file, load_task_map
    from statectl.engine.rescale import rescale as run_rescale

    session, s = env.session, env.settings
    if not s.job or not s.store:
        raise UsageError("rescale needs --job and --store")
    sources, targets = load_task_map(task_map) if task_map else ((), ())
    through = not master.startswith("local")
    opts = RescaleOptions(store=s.store, job=s.job, job_id=s.job_id, from_tasks=from_tasks, to_tasks=to_tasks,
                          to_job=to_job, sources=sources, targets=targets,
                          snapshots=load_snapshots_file(snapshots) if snapshots else {}, partitioner=partitioner,
                          from_partitioner=from_partitioner, key_groups=key_groups,
                          ignore_other_tasks=ignore_other_tasks, again=again,
                          master=master, conf=_conf(spark_conf), staging=s.blobstore if through else "local",
                          s3=session.s3_options if s.blobstore.startswith("s3://") else None, dry_run=dry_run,
                          work_dir=work_dir, parallelism=s.parallelism, chunk_size=s.chunk_size, ttl_seconds=s.ttl,
                          keep_last=s.keep_last, grace_seconds=s.grace, file_owner=file_owner)
    r = run_rescale(opts, session.blobstore, session.catalog, env.progress)
    env.emit(r, _text(r))


def _text(r) -> str:
    lines = []
    if r.rerun:
        return _rerun_text(r)
    for src in r.sources:
        lines.append(f"source {src.task}: snapshot {src.snapshot_id} (checkpoint {src.checkpoint_id}), {src.files} "
                     f"files, {human_bytes(src.bytes)}" + ("" if src.keys is None else f", {src.keys} keys"))
    if r.key_groups is not None:
        for t in r.targets:
            lines.append(f"{'plan ' if r.dry_run else ''}target {t.task}: {t.files_copied} files "
                         f"({human_bytes(t.bytes_copied)}) copied server-side, {t.files_read} files "
                         f"({human_bytes(t.bytes_read)}) read and rewritten")
    if r.dry_run:
        if r.key_groups is not None:
            lines.append(f"dry run: would re-partition {r.store} of {r.job} from {r.tasks_in} into {r.tasks_out} tasks "
                         f"of {r.to_job} by {r.key_groups} key groups: {human_bytes(r.bytes_copied)} copied "
                         f"server-side ({r.files_copied} files), {human_bytes(r.bytes_rewritten)} read and rewritten "
                         f"by the executors ({r.files_rewritten} files)")
            return "\n".join(lines)
        lines.append(f"dry run: would re-partition {r.store} of {r.job} from {r.tasks_in} into {r.tasks_out} tasks "
                     f"of {r.to_job} ({r.partitioner}), reading {human_bytes(sum(s.bytes for s in r.sources))}")
        return "\n".join(lines)
    for t in r.targets:
        lines.append(f"target {t.task}: {t.keys} keys, snapshot {t.snapshot_id} (checkpoint {t.checkpoint_id}), "
                     f"{t.files} files, {human_bytes(t.bytes)}")
    lines.append(f"rescaled {r.store} of {r.job} from {r.tasks_in} into {r.tasks_out} tasks of {r.to_job}: {r.keys} "
                 f"keys verified (content hash {r.content_hash}), committed; executors read "
                 f"{human_bytes(r.bytes_read)} and wrote {human_bytes(r.bytes_written)}; no changelog position; "
                 f"{r.duration_s:.1f}s")
    return "\n".join(lines)


def _rerun_text(r) -> str:
    what = (f"rescale of {r.store} of {r.job} from {r.tasks_in} into {r.tasks_out} tasks of {r.to_job} "
            f"({r.keys} keys, content hash {r.content_hash})")
    if r.rerun == "done":
        return f"{what}: done before; nothing to do"
    if r.dry_run:
        return f"dry run: {what}: its commit was cut; would commit the targets it left from their uploads"
    lines = [f"target {t.task}: snapshot {t.snapshot_id} (checkpoint {t.checkpoint_id})" for t in r.targets]
    return "\n".join(lines + [f"{what}: its commit was cut; committed the targets it left: every target committed"])
