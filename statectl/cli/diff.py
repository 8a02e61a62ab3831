"""statectl diff"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from statectl.cli.common import (
    BlobstoreOpt,
    Env,
    JobIdOpt,
    JobOpt,
    KafkaOpt,
    S3EndpointOpt,
    StateDirOpt,
    StoreDirOpt,
    StoreOpt,
    TaskOpt,
    human_bytes,
)

EPILOG = (
    "Examples:\n\n"
    "  statectl diff --job page-views --state-dir /var/samza/state --store counts   # local store vs latest snapshot\n\n"
    "  statectl diff --job page-views --store counts --snapshot 1700000000000-1 --against 1690000000000-7\n\n"
    "Exit codes: 0 same, 1 different, 10 no such snapshot."
)


def diff(
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
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Snapshot to compare (default: the latest).", show_default=False)] = None,
    against: Annotated[Optional[str], typer.Option("--against", help="Compare --snapshot with this snapshot instead of the local store.", show_default=False)] = None,
) -> None:
    """Show what differs between the local store and a snapshot, or between two snapshots."""
    from pathlib import Path

    from statectl.engine.diff import DiffOptions
    from statectl.engine.diff import diff as run_diff

    env = Env(ctx, blobstore=blobstore, s3_endpoint=s3_endpoint, kafka=kafka, job=job, job_id=job_id, task=task, store=store,
              state_dir=str(state_dir) if state_dir else None)
    try:
        sdir = env.store_dir(store_dir) if against is None else (store_dir or Path("."))
        r = run_diff(DiffOptions(env.ref(), sdir, snapshot, against), env.blobstore, env.checkpoints)
        lines = [f"+ {e.path} ({human_bytes(e.size)})" for e in r.added]
        lines += [f"- {e.path} ({human_bytes(e.size)})" for e in r.removed]
        lines.append(f"{len(r.added)} added ({human_bytes(r.bytes_added)}), {len(r.retained)} unchanged, "
                     f"{len(r.removed)} removed ({human_bytes(r.bytes_removed)}): {r.new} vs {r.old}")
        env.emit(r, "\n".join(lines))
    finally:
        env.close()
    if not r.same:
        raise typer.Exit(1)
