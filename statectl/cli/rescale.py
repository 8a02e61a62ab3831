"""statectl rescale: its flags parsed into RescaleOptions, the run (statectl.engine.rescale.execute), the
result rendered. docs/rescale.md has the reasoning the help points to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import (
    BLOBSTORE,
    SPARK_CONF,
    SPARK_MASTER,
    Env,
    human_bytes,
    parse_spark_conf,
    state_command,
)
from statectl.errors import UsageError

FROM = Annotated[int, typer.Option("--from", metavar="N", help="Source tasks: Partition 0..N-1.", show_default=False)]
TO = Annotated[int, typer.Option("--to", metavar="M", help="Target tasks: Partition 0..M-1.", show_default=False)]
TO_JOB = Annotated[Optional[str], typer.Option("--to-job", help="The targets' job (default: --job).",
                                               show_default=False)]
PARTITIONER = Annotated[Optional[str], typer.Option("--partitioner", metavar="MOD:FN", help=(
    "f(key, tasks) -> task (default: Kafka's murmur2)."), show_default=False)]
FROM_PARTITIONER = Annotated[Optional[str], typer.Option("--from-partitioner", metavar="MOD:FN", help=(
    "Of the sources' keys (default: --partitioner)."), show_default=False)]
TASK_MAP = Annotated[Optional[Path], typer.Option("--task-map", metavar="FILE", help=(
    "JSON {\"from\": [task], \"to\": [task]}."), show_default=False)]
SNAPSHOTS = Annotated[Optional[Path], typer.Option("--snapshots", metavar="FILE", help=(
    "JSON {task: snapshot id} instead of the latest."), show_default=False)]
WORK_DIR = Annotated[Optional[Path], typer.Option("--work-dir", help="For the job's files (default: the temp dir).",
                                                  show_default=False)]
KEY_GROUPS = Annotated[Optional[int], typer.Option("--key-groups", metavar="G", help=(
    "Keys start with their key group, of G (Flink)."), show_default=False)]
IGNORE_OTHER_TASKS = Annotated[bool, typer.Option("--ignore-other-tasks",
                                                  help="Allow snapshots of tasks besides the sources.")]
AGAIN = Annotated[bool, typer.Option("--again", help="A new rescale, whatever an earlier run recorded.")]
FILE_OWNER = Annotated[Optional[str], typer.Option("--file-owner", metavar="USER:GROUP", help=(
    "Owner of the targets' files (default: sources')."), show_default=False)]
DRY_RUN = Annotated[bool, typer.Option("--dry-run", help="Check and print the plan; write nothing.")]

EPILOG = (
    "Examples:\n\n"
    "  statectl rescale --job clicks --store counts --from 8 --to 32 --dry-run\n"
    "  statectl rescale --job clicks --store counts --from 4 --to 2 --to-job c2\n"
    "  statectl rescale --job agg --store state --from 4 --to 8 --key-groups 128\n\n"
    + exit_codes_epilog(0, (1, "failure (nothing committed)"), 2, (3, "partly committed: run it again"),
                        (10, "no source snapshot"), (11, "a target's backup runs"), 13)
)


@state_command(*BLOBSTORE, "kafka", "job", "job_id", "store", "keep_last", "parallelism", "chunk_size", "ttl",
               "grace")
def rescale(env: Env, from_tasks: FROM = 0, to_tasks: TO = 0, to_job: TO_JOB = None, master: SPARK_MASTER = "local[*]",
            spark_conf: SPARK_CONF = None, partitioner: PARTITIONER = None, from_partitioner: FROM_PARTITIONER = None,
            task_map: TASK_MAP = None, snapshots: SNAPSHOTS = None, work_dir: WORK_DIR = None,
            key_groups: KEY_GROUPS = None, ignore_other_tasks: IGNORE_OTHER_TASKS = False, again: AGAIN = False,
            file_owner: FILE_OWNER = None, dry_run: DRY_RUN = False) -> None:
    """Re-partition a store's snapshots of N tasks into M tasks on Spark.

    Commits M new snapshots (no changelog position) once all are verified; only reads the sources'
    snapshots, never a local store. See docs/rescale.md."""
    from statectl.engine.rescale.execute import rescale as run_rescale
    from statectl.engine.rescale.options import RescaleOptions, load_snapshots_file, load_task_map

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
                          master=master, conf=parse_spark_conf(spark_conf), staging=s.blobstore if through else "local",
                          s3=session.s3_options if s.blobstore.startswith("s3://") else None, dry_run=dry_run,
                          work_dir=work_dir, parallelism=s.parallelism, chunk_size=s.chunk_size, ttl_seconds=s.ttl,
                          keep_last=s.keep_last, grace_seconds=s.grace, file_owner=file_owner)
    # opened by the rescale once its Spark job started (the S3 client takes a moment)
    r = run_rescale(opts, lambda: session.blobstore, lambda: session.catalog, env.progress)
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
        keys = "" if r.key_groups is not None and not r.files_rewritten else f"{t.keys} keys, "
        lines.append(f"target {t.task}: {keys}snapshot {t.snapshot_id} (checkpoint {t.checkpoint_id}), "
                     f"{t.files} files, {human_bytes(t.bytes)}")
    done = f"rescaled {r.store} of {r.job} from {r.tasks_in} into {r.tasks_out} tasks of {r.to_job}"
    if r.key_groups is not None and not r.files_rewritten:  # nothing read: no key to count
        lines.append(f"{done} by {r.key_groups} key groups: {human_bytes(r.bytes_copied)} copied server-side unread "
                     f"({r.files_copied} files), committed; no changelog position; {r.duration_s:.1f}s")
        return "\n".join(lines)
    lines.append(f"{done}: {r.keys} keys verified (content hash {r.content_hash}), committed; executors read "
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
