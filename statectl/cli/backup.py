"""statectl backup"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.common import (
    BlobstoreOpt,
    Env,
    JobIdOpt,
    JobOpt,
    KafkaOpt,
    KeepLastOpt,
    ParallelismOpt,
    S3EndpointOpt,
    StateDirOpt,
    StoreDirOpt,
    StoreOpt,
    TaskOpt,
    human_bytes,
)
from statectl.errors import PartialError, UsageError

EPILOG = (
    "Examples:\n\n"
    "  statectl backup --job page-views --state-dir /var/samza/state --store counts --task 'Partition 0'\n\n"
    "  statectl backup --blobstore s3://backups/samza --job page-views --state-dir /var/samza/state --all\n\n"
    "  statectl backup --job page-views --store-dir state/counts/Partition_0 "
    "--checkpoint-dir state/counts/Partition_0-1700000000000-123  # the job holds the store\n\n"
    "Exit codes: 0 ok, 1 failure, 3 some stores failed (--all), 10 not found, 11 store held by a running process."
)


def backup(
    ctx: typer.Context,
    blobstore: BlobstoreOpt = None,
    s3_endpoint: S3EndpointOpt = None,
    kafka: KafkaOpt = None,
    job: JobOpt = None,
    job_id: JobIdOpt = None,
    task: TaskOpt = None,
    store: StoreOpt = None,
    state_dir: StateDirOpt = None,
    store_dir: StoreDirOpt = None,
    checkpoint_dir: Annotated[Optional[Path], typer.Option("--checkpoint-dir", help="Back up this checkpoint dir the job made (for a store a running job holds).", show_default=False)] = None,
    all_stores: Annotated[bool, typer.Option("--all", help="Back up every store under --state-dir.")] = False,
    keep_last: KeepLastOpt = None,
    parallelism: ParallelismOpt = None,
    chunk_size: Annotated[Optional[str], typer.Option("--chunk-size", help="Upload files in blobs of at most this size (default 64MiB).", show_default=False)] = None,
    ttl: Annotated[Optional[str], typer.Option("--ttl", help="Expiry of uncommitted blobs (default 30d).", show_default=False)] = None,
) -> None:
    """Take an incremental snapshot of a RocksDB store: checkpoint it, upload only what changed, commit."""
    from statectl.engine.backup import BackupOptions, backup_all
    from statectl.engine.backup import backup as run_backup

    env = Env(ctx, blobstore=blobstore, s3_endpoint=s3_endpoint, kafka=kafka, job=job, job_id=job_id, task=task, store=store,
              state_dir=str(state_dir) if state_dir else None, parallelism=parallelism, chunk_size=chunk_size, ttl=ttl,
              keep_last=keep_last)
    s = env.settings
    try:
        if all_stores:
            if store or store_dir or checkpoint_dir:
                raise UsageError("--all backs up every store under --state-dir; do not combine it with "
                                 "--store, --store-dir or --checkpoint-dir")
            if not s.state_dir:
                raise UsageError("--all needs --state-dir")
            ref = env.ref(need_store=False)
            base = BackupOptions(ref=ref, store_dir=Path(s.state_dir), parallelism=s.parallelism,
                                 chunk_size=s.chunk_size, ttl_seconds=s.ttl, keep_last=s.keep_last)
            result = backup_all(Path(s.state_dir), base, env.blobstore, env.checkpoints, env.progress())
            lines = [_line(r) for r in result.results]
            lines += [f"FAILED {path}: {err}" for path, err in result.failures]
            env.emit(result, "\n".join(lines))
            if result.failures:
                raise PartialError(f"{len(result.failures)} of {len(result.failures) + len(result.results)} "
                                   "stores failed to back up")
            return
        opts = BackupOptions(ref=env.ref(), store_dir=env.store_dir(store_dir), checkpoint_dir=checkpoint_dir,
                             parallelism=s.parallelism, chunk_size=s.chunk_size, ttl_seconds=s.ttl, keep_last=s.keep_last)
        r = run_backup(opts, env.blobstore, env.checkpoints, env.progress())
        env.emit(r, _line(r))
    finally:
        env.close()


def _line(r) -> str:
    return (f"snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}) of {r.store}/{r.task}: "
            f"{r.files_uploaded} of {r.files_total} files uploaded, "
            f"{human_bytes(r.bytes_uploaded)} of {human_bytes(r.bytes_total)}, {r.duration_s:.1f}s")
