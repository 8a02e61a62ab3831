"""statectl snapshots list | show | verify"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import BLOBSTORE, STORE_REF, Env, human_bytes, print_json, state_command
from statectl.errors import CorruptSnapshotError, UsageError

app = typer.Typer(help="List, inspect and verify snapshots.", no_args_is_help=True, rich_markup_mode=None)

# The flags that name a task's store in the catalog: list, show and verify take them all.
SNAPSHOT_FLAGS = (*BLOBSTORE, "kafka", *STORE_REF)


@app.command("list", epilog="Examples:\n\n"
                            "  statectl snapshots list   # the jobs the blob store holds snapshots of\n\n"
                            "  statectl snapshots list --job page-views   # the job's stores and tasks\n\n"
                            "  statectl snapshots list --job page-views --store counts --task 'Partition 0'\n\n"
                            + exit_codes_epilog(0, 2, (10, "unknown job, job id, store or task")))
@state_command(*SNAPSHOT_FLAGS)
def list_(env: Env) -> None:
    """List what the blob store holds, one level at a time: without --job, the jobs; with --job, the job's
    stores and their tasks (with --task, only that task's); with --job and --store, the snapshots of the
    store of --task, newest first.
    A job, store or task the blob store holds nothing of is an error (exit 10) naming the nearest ones.
    Read-only."""
    from statectl.engine.snapshots import list_jobs, list_snapshots, list_tasks

    session, s = env.session, env.settings
    where = f"blob store {s.blobstore}"
    if not s.job:
        if s.store:
            raise UsageError("--store needs --job", hint="'statectl snapshots list' without flags lists the jobs")
        jobs = list_jobs(session.catalog)
        lines = [f"{'JOB':<32} {'JOB ID':<8} {'TASKS':>6} {'CHECKPOINTS':>11} {'LATEST':<21} STORES"]
        lines += [f"{j.job:<32} {j.job_id:<8} {j.tasks:>6} {j.checkpoints:>11} {j.latest_checkpoint_time or '-':<21} "
                  f"{','.join(j.stores)}" for j in jobs]
        env.emit(jobs, (f"jobs in {where}:\n" + "\n".join(lines)) if jobs else f"no jobs in {where}")
        return
    if not s.store:
        tasks = list_tasks(session.catalog, s.job, s.job_id, task=env.flags.task)
        lines = [f"{'STORE':<24} {'TASK':<20} {'SNAPSHOTS':>9} {'LATEST':<21} LATEST SNAPSHOT"]
        lines += [f"{t.store:<24} {t.task:<20} {t.snapshots:>9} {t.created or '-':<21} {t.latest_snapshot_id or '-'}"
                  for t in tasks]
        env.emit(tasks, f"stores and tasks of job {s.job} (id {s.job_id}) in {where}:\n" + "\n".join(lines))
        return
    ref = session.ref()
    rows = list_snapshots(ref, session.blobstore, session.catalog)
    lines = [f"{'SNAPSHOT':<48} {'CHECKPOINT':<22} {'CREATED':<21} {'FILES':>6} {'SIZE':>10}"]
    for r in rows:
        files = "-" if r.files is None else str(r.files)
        lines.append(f"{r.snapshot_id:<48} {r.checkpoint_id:<22} {r.created or '-':<21} {files:>6} "
                     f"{human_bytes(r.bytes):>10}" + (f"  ({r.problem})" if r.problem else ""))
    env.emit(rows, f"snapshots of {ref} in {where}:\n" + "\n".join(lines) if rows
             else f"no committed snapshots of {ref} in {where}")


@app.command("show", epilog="Examples:\n\n  statectl snapshots show --job page-views --store counts\n\n"
                            "  statectl snapshots show --index-file index.json   # an index blob saved from a Samza job\n\n"
                            + exit_codes_epilog(0, (1, "malformed index"), 10))
@state_command(*SNAPSHOT_FLAGS)
def show(
    snapshot: Annotated[Optional[str], typer.Argument(help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    index_file: Annotated[Optional[Path], typer.Option("--index-file", help="Read the index from this file instead of the blob store.", show_default=False)] = None,
    *,
    env: Env,
) -> None:
    """Show one snapshot's index: its metadata and files (as Samza JSON with --output json). Read-only."""
    from statectl.engine.snapshots import read_index_file, show_snapshot
    from statectl.snapshot.model import index_to_json

    session = env.session
    if index_file is not None:
        if snapshot is not None:
            raise UsageError("give a snapshot id or --index-file, not both")
        index, label = read_index_file(index_file), str(index_file)
    else:
        snap = show_snapshot(session.ref(), session.blobstore, session.catalog, snapshot)
        index, label = snap.index, snap.index_blob_id
    if env.json:
        print_json(index_to_json(index))
        return
    m = index.snapshot_metadata
    files = list(index.dir_index.walk_present())
    lines = [
        f"snapshot:   {label}",
        f"blob store: {'-' if index_file is not None else session.blobstore.url}",
        f"checkpoint: {m.checkpoint_id}",
        f"job:        {m.job_name} (id {m.job_id})",
        f"task/store: {m.task_name} / {m.store_name}",
        f"created:    {index.creation_time_millis} ms",
        f"previous:   {index.prev_snapshot_index_blob_id or '-'}",
        f"files:      {len(files)}, {human_bytes(sum(f.size for _, f in files))}",
    ]
    for rel, f in files:
        lines.append(f"  {f.file_metadata.permissions} {f.size:>12} {f.checksum:>10} {rel} ({len(f.blobs)} blobs)")
    removed = list(index.dir_index.removed_files())
    if removed:
        lines.append(f"removed since previous: {len(removed)} files")
    env.emit(index, "\n".join(lines))


@app.command("verify", epilog="Examples:\n\n  statectl snapshots verify --job page-views --store counts\n\n"
                              "  statectl snapshots verify 3f2a9c --download --job page-views --store counts\n\n"
                              + exit_codes_epilog((0, "every blob present (and every CRC right)"),
                                                  (1, "problems found"), 10))
@state_command(*SNAPSHOT_FLAGS, "parallelism")
def verify(
    snapshot: Annotated[Optional[str], typer.Argument(help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    download: Annotated[bool, typer.Option("--download", help="Also download every blob and check each file's CRC32.")] = False,
    *,
    env: Env,
) -> None:
    """Check that every blob of a snapshot exists with the right size (and with --download, the right CRC32).

    Read-only: --download reads every blob and keeps nothing on disk."""
    from statectl.engine.snapshots import verify_snapshot

    session = env.session
    r = verify_snapshot(session.ref(), session.blobstore, session.catalog, snapshot, download=download,
                        parallelism=env.settings.parallelism, progress=env.progress)
    lines = [f"missing: {p.path} ({p.blob_id})" for p in r.missing]
    lines += [f"corrupt: {p.path} {p.blob_id} {p.reason}".replace("  ", " ") for p in r.corrupt]
    what = "blobs present, CRCs match" if download else "blobs present with the right sizes"
    lines.append(f"{'ok' if r.ok else 'FAILED'}: snapshot {r.snapshot_id} in {r.blobstore}, {r.files} files, "
                 f"{r.blobs} blobs"
                 + (f": {what}" if r.ok else f": {len(r.missing)} missing, {len(r.corrupt)} corrupt"))
    env.emit(r, "\n".join(lines))
    if not r.ok:
        # The result (stdout) lists each problem; stderr says in one line that the check failed.
        raise CorruptSnapshotError(f"snapshot {r.snapshot_id} failed verification: "
                                   f"{len(r.missing)} missing, {len(r.corrupt)} corrupt")


@app.command("copy", epilog="Examples:\n\n"
                            "  statectl snapshots copy --job page-views --store counts --task 'Partition 0' "
                            "--to-job page-views-staging\n\n"
                            "  statectl snapshots copy 3f2a9c --blobstore s3://prod/samza --job page-views --store counts "
                            "--to-blobstore s3://staging/samza\n\n"
                            "  statectl snapshots copy --job page-views --store counts --to-job page-views-staging "
                            "--dry-run\n\n"
                            + exit_codes_epilog(0, (1, "a blob of the snapshot is missing; nothing committed"), 2,
                                                (10, "no such snapshot"), (11, "a backup of the target is running"),
                                                12))
@state_command(*SNAPSHOT_FLAGS, "parallelism", "ttl", "keep_last", "grace", "create")
def copy(
    snapshot: Annotated[Optional[str], typer.Argument(help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    to_job: Annotated[Optional[str], typer.Option("--to-job", help="The target's job (default: --job).", show_default=False)] = None,
    to_job_id: Annotated[Optional[str], typer.Option("--to-job-id", help="The target's job id (default: --job-id).", show_default=False)] = None,
    to_task: Annotated[Optional[str], typer.Option("--to-task", help="The target's task (default: --task).", show_default=False)] = None,
    to_store: Annotated[Optional[str], typer.Option("--to-store", help="The target's store (default: --store).", show_default=False)] = None,
    to_blobstore: Annotated[Optional[str], typer.Option("--to-blobstore", help="The target's blob store URL (default: --blobstore); another bucket of the same S3 endpoint still copies server-side.", show_default=False)] = None,
    to_s3_endpoint: Annotated[Optional[str], typer.Option("--to-s3-endpoint", help="The endpoint of an s3:// --to-blobstore (default: --s3-endpoint); another endpoint streams the blobs through this host.", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing (no pin, lease, blob or checkpoint); print the plan: every blob copied, server-side or through this host. Fails as the copy would.")] = False,
    file_owner: Annotated[Optional[str], typer.Option("--file-owner", metavar="USER:GROUP", help="The owner and group names every file of the target is recorded with: the target job's user, which Samza's restore compares with its restored files' (default: the source's, file by file).", show_default=False)] = None,
    *,
    env: Env,
) -> None:
    """Clone a snapshot into a new snapshot of another job, task or store, copying its blobs server-side.

    Writes the copies (with a TTL until committed), an index and the target's checkpoint record (with
    --kafka also on the target job's checkpoint topic); never changes the source. Across endpoints, or
    between file:// and s3://, the blobs stream through this host. See man statectl-snapshots-copy."""
    from dataclasses import replace

    from statectl.engine.copy import CopyOptions, copy_snapshot, plan_copy

    session, s = env.session, env.settings
    session.create_blobstore = False  # --create starts the target (--to-blobstore) only: the source must exist
    source_ref = session.ref()
    target_ref = replace(source_ref, job=to_job or source_ref.job, job_id=to_job_id or source_ref.job_id,
                         task=to_task or source_ref.task, store=to_store or source_ref.store)
    opts = CopyOptions(source=source_ref, target=target_ref, snapshot=snapshot, parallelism=s.parallelism,
                       ttl_seconds=s.ttl, keep_last=s.keep_last, grace_seconds=s.grace, file_owner=file_owner)
    target, target_catalog = session.blobstore, session.catalog
    opened = None
    if to_blobstore or to_s3_endpoint:  # the engine tells the source store under another name (identity)
        from statectl.blobstore import open_blobstore
        from statectl.catalog.records import BlobCheckpointStore

        s3 = replace(session.s3_options, endpoint_url=to_s3_endpoint or s.s3_endpoint)
        target = opened = open_blobstore(to_blobstore or s.blobstore, s3=s3, retries=s.retries,
                                         retry_time_s=s.retry_time,
                                         # a dry run makes no dir: a new one reads as empty
                                         create=("on-write" if dry_run else True) if env.flags.create else False)
        target_catalog = BlobCheckpointStore(target, session.commit_log)
    try:
        if dry_run:
            plan = plan_copy(opts, session.blobstore, session.catalog, target, env.progress)
            how = "server-side" if plan.server_side else "through this host"
            lines = [f"would copy {b.blob_id} ({human_bytes(b.size)}) of {b.path}" for b in plan.blobs]
            lines.append(f"dry run: would copy snapshot {plan.source_snapshot_id} (checkpoint "
                         f"{plan.source_checkpoint_id}) into a new snapshot of {plan.store}/{plan.task} of job "
                         f"{plan.job} in {plan.target_blobstore}: {plan.files} files, {plan.blobs_copied} blobs, "
                         f"{human_bytes(plan.bytes_copied)} copied {how}")
            env.emit(plan, "\n".join(lines))
            return
        r = copy_snapshot(opts, session.blobstore, session.catalog, target, target_catalog, env.progress)
    finally:
        if opened is not None:
            opened.close()
    how = "server-side" if r.server_side else "streamed through this host"
    to = f" to {r.to_blobstore}" if r.to_blobstore != r.blobstore else ""
    env.emit(r, f"snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}) of {r.store}/{r.task} of job {r.job} "
                f"in {r.blobstore}{to}: "
                f"{r.blobs_copied} blobs, {human_bytes(r.bytes_copied)} copied {how}, "
                f"{human_bytes(r.bytes_through_client)} through this host, {r.duration_s:.1f}s")
