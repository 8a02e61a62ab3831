"""statectl backup: the flags of one store (or --all-tasks) into BackupOptions, engine.backup, the result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import STORE, Env, human_bytes, state_command
from statectl.errors import PartialError, UsageError

EPILOG = (
    "Examples:\n\n"
    "  statectl backup --job page-views --state-dir /var/samza/state --store counts --task 'Partition 0'\n\n"
    "  statectl backup --blobstore s3://backups/samza --job page-views --state-dir /var/samza/state --all -q\n\n"
    "  statectl backup --job page-views --state-dir /var/samza/state --all --dry-run\n\n"
    + exit_codes_epilog(0, 1, (3, "some stores failed"), (10, "no such store or blob store dir"),
                        (11, "store held by a process"))
)


@state_command(*STORE, "keep_last", "parallelism", "limit_rate", "chunk_size", "ttl", "grace", "create", "sse",
               "sse_kms_key_id")
def backup(
    env: Env,
    checkpoint_dir: Annotated[Optional[Path], typer.Option("--checkpoint-dir", help="Back up this checkpoint dir the job made.", show_default=False)] = None,
    all_stores: Annotated[bool, typer.Option("--all", help="Every task dir of every store under --state-dir.")] = False,
    all_tasks: Annotated[bool, typer.Option("--all-tasks", help="Every task dir of --store.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; print the plan.")] = False,
) -> None:
    """Take an incremental snapshot of a RocksDB store: checkpoint it, upload only what changed, commit.

    Writes blobs, an index and a checkpoint record; never changes the store. More: man statectl-backup."""
    from statectl.engine.backup import BackupOptions, backup_all, plan_backup
    from statectl.engine.backup import backup as run_backup

    session, s = env.session, env.settings
    if dry_run and env.flags.create:
        session.create_blobstore = "on-write"  # type: ignore[assignment]  # a new file:// dir reads as empty
    if all_stores or all_tasks:
        flag = "--all" if all_stores else "--all-tasks"
        if all_stores and all_tasks:
            raise UsageError("give --all (every store) or --all-tasks (every task of --store), not both")
        if all_stores and env.flags.store:
            raise UsageError("--all backs up every store under --state-dir; do not combine it with --store",
                             hint="--all-tasks backs up every task of one --store")
        if all_tasks and not s.store:
            raise UsageError("--all-tasks needs --store", hint="--all backs up every store")
        if env.flags.store_dir or checkpoint_dir or (env.flags.task and all_tasks):
            raise UsageError(f"{flag} backs up every task dir under --state-dir; do not combine it with "
                             "--task, --store-dir or --checkpoint-dir")
        if not s.state_dir:
            raise UsageError(f"{flag} needs --state-dir")
        base = BackupOptions(ref=session.ref(need_store=False), store_dir=Path(s.state_dir),
                             parallelism=s.parallelism, chunk_size=s.chunk_size, ttl_seconds=s.ttl,
                             keep_last=s.keep_last, grace_seconds=s.grace, rate_limit=session.rate_limit)
        result = backup_all(Path(s.state_dir), base, session.blobstore, session.catalog, env.progress,
                            store=s.store if all_tasks else None, dry_run=dry_run)
        lines = [_plan_line(r) if dry_run else _line(r) for r in result.results]
        lines += [f"FAILED {path}: {err}" for path, err in result.failures]
        env.emit(result, "\n".join(lines))
        if result.failures:
            raise PartialError(f"{len(result.failures)} of {len(result.failures) + len(result.results)} "
                               f"{'stores' if all_stores else 'tasks'} failed to back up"
                               + (" (dry run)" if dry_run else ""))
        return
    from_state_dir = env.flags.store_dir is None and bool(s.state_dir)
    opts = BackupOptions(ref=session.ref(), store_dir=session.store_dir(env.flags.store_dir),
                         checkpoint_dir=checkpoint_dir, parallelism=s.parallelism, chunk_size=s.chunk_size,
                         ttl_seconds=s.ttl, keep_last=s.keep_last, grace_seconds=s.grace,
                         state_dir=Path(s.state_dir) if from_state_dir else None, rate_limit=session.rate_limit)
    if dry_run:
        plan = plan_backup(opts, session.blobstore, session.catalog, env.progress)
        env.emit(plan, _plan_text(plan))
        return
    r = run_backup(opts, session.blobstore, session.catalog, env.progress)
    env.emit(r, _line(r))


def _line(r) -> str:
    return (f"snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}) of {r.store}/{r.task} in {r.blobstore}: "
            f"{r.files_uploaded} of {r.files_total} files uploaded, "
            f"{human_bytes(r.bytes_uploaded)} of {human_bytes(r.bytes_total)}, {r.duration_s:.1f}s")


def _plan_line(p) -> str:
    prev = f"on snapshot {p.previous_snapshot_id}" if p.previous_snapshot_id else "a full backup"
    return (f"dry run: would back up {p.store}/{p.task} from {p.source} into {p.blobstore} ({prev}): "
            f"{p.files_uploaded} of {p.files_total} files uploaded, {human_bytes(p.bytes_uploaded)} of "
            f"{human_bytes(p.bytes_total)}; retention would expire {len(p.expired)} snapshot"
            f"{'' if len(p.expired) == 1 else 's'} and delete {len(p.deleted)} blob{'' if len(p.deleted) == 1 else 's'}")


def _plan_text(p) -> str:
    lines = [f"would upload {f.path} ({human_bytes(f.size)})" for f in p.files if f.action == "upload"]
    lines += [f"would expire snapshot {e.snapshot_id} (checkpoint {e.checkpoint_id}): {e.reason}"
              + (f"; its blobs kept until {e.until}" if e.until else "") for e in p.expired]
    lines += [f"would delete {d.blob_id}: {d.reason}" for d in p.deleted]
    return "\n".join([*lines, _plan_line(p)])
