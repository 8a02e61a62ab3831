"""statectl backup"""

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
    "  statectl backup --blobstore file:///var/backups/statectl --create --job page-views "
    "--state-dir /var/samza/state --store counts\n\n"
    "  statectl backup --job page-views --store counts --store-dir /var/samza/state/counts/Partition_0 "
    "--checkpoint-dir /var/samza/state/counts/Partition_0-1700000000000-123\n\n"
    + exit_codes_epilog(0, 1, (3, "--all, --all-tasks: some store failed"),
                        (10, "no such store dir, or no file:// blob store dir (without --create)"),
                        (11, "store held by a running process"))
)


@state_command(*STORE, "keep_last", "parallelism", "chunk_size", "ttl", "grace", "create")
def backup(
    env: Env,
    checkpoint_dir: Annotated[Optional[Path], typer.Option("--checkpoint-dir", help="Back up this checkpoint dir the job made (for a store a running job holds).", show_default=False)] = None,
    all_stores: Annotated[bool, typer.Option("--all", help="Back up every store under --state-dir: each task dir of each store.")] = False,
    all_tasks: Annotated[bool, typer.Option("--all-tasks", help="Back up every task dir of --store under --state-dir (without it, only the --task one).")] = False,
) -> None:
    """Take an incremental snapshot of a RocksDB store: checkpoint it, upload only what changed, commit.

    Writes blobs, an index and a checkpoint record to the blob store (and a RocksDB checkpoint beside the
    store while it uploads); never changes the store. One store dir is one task's store: --store and --task
    under --state-dir, or --store-dir. How --all names tasks, and retention: man statectl-backup."""
    from statectl.engine.backup import BackupOptions, backup_all
    from statectl.engine.backup import backup as run_backup

    session, s = env.session, env.settings
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
                             keep_last=s.keep_last, grace_seconds=s.grace)
        result = backup_all(Path(s.state_dir), base, session.blobstore, session.catalog, env.progress,
                            store=s.store if all_tasks else None)
        lines = [_line(r) for r in result.results]
        lines += [f"FAILED {path}: {err}" for path, err in result.failures]
        env.emit(result, "\n".join(lines))
        if result.failures:
            raise PartialError(f"{len(result.failures)} of {len(result.failures) + len(result.results)} "
                               f"{'stores' if all_stores else 'tasks'} failed to back up")
        return
    from_state_dir = env.flags.store_dir is None and bool(s.state_dir)
    opts = BackupOptions(ref=session.ref(), store_dir=session.store_dir(env.flags.store_dir),
                         checkpoint_dir=checkpoint_dir, parallelism=s.parallelism, chunk_size=s.chunk_size,
                         ttl_seconds=s.ttl, keep_last=s.keep_last, grace_seconds=s.grace,
                         state_dir=Path(s.state_dir) if from_state_dir else None)
    r = run_backup(opts, session.blobstore, session.catalog, env.progress)
    env.emit(r, _line(r))


def _line(r) -> str:
    return (f"snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}) of {r.store}/{r.task} in {r.blobstore}: "
            f"{r.files_uploaded} of {r.files_total} files uploaded, "
            f"{human_bytes(r.bytes_uploaded)} of {human_bytes(r.bytes_total)}, {r.duration_s:.1f}s")
