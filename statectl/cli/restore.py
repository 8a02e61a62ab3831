"""statectl restore"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.common import (BlobstoreOpt, Env, JobIdOpt, JobOpt, ParallelismOpt, S3EndpointOpt, StateDirOpt,
                                 StoreDirOpt, StoreOpt, TaskOpt, human_bytes)

EPILOG = (
    "Examples:\n\n"
    "  statectl restore --job page-views --state-dir /var/samza/state --store counts --task 'Partition 0'\n\n"
    "  statectl restore --job page-views --store counts --snapshot 3f2a9c --target-dir /tmp/counts-copy\n\n"
    "Exit codes: 0 ok, 1 failure (corrupt snapshot, CRC mismatch, disk full: the old store is untouched), "
    "10 no such snapshot, 11 target store held by a running process."
)


def restore(
    ctx: typer.Context,
    blobstore: BlobstoreOpt = None,
    s3_endpoint: S3EndpointOpt = None,
    job: JobOpt = None,
    job_id: JobIdOpt = None,
    task: TaskOpt = None,
    store: StoreOpt = None,
    state_dir: StateDirOpt = None,
    store_dir: StoreDirOpt = None,
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    target_dir: Annotated[Optional[Path], typer.Option("--target-dir", help="Restore here instead of the store dir.", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty target dir that is not a RocksDB store.")] = False,
    parallelism: ParallelismOpt = None,
) -> None:
    """Restore a store from its latest snapshot (or --snapshot), built aside and swapped in atomically."""
    from statectl.engine.restore import RestoreOptions, restore as run_restore

    env = Env(ctx, blobstore=blobstore, s3_endpoint=s3_endpoint, job=job, job_id=job_id, task=task, store=store,
              state_dir=str(state_dir) if state_dir else None, parallelism=parallelism)
    try:
        if target_dir is not None and store_dir is None and not env.settings.state_dir:
            sdir = target_dir
        else:
            sdir = env.store_dir(store_dir)
        opts = RestoreOptions(ref=env.ref(), store_dir=sdir, target_dir=target_dir, snapshot=snapshot,
                              parallelism=env.settings.parallelism, force=force)
        r = run_restore(opts, env.blobstore, env.checkpoints, env.progress())
        env.emit(r, f"restored snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}) into {r.target_dir}: "
                    f"{r.files_total} files, {r.files_downloaded} downloaded ({human_bytes(r.bytes_downloaded)}), "
                    f"{r.files_reused} reused locally, {r.duration_s:.1f}s")
    finally:
        env.close()
