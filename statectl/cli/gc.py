"""statectl gc"""

from __future__ import annotations

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
    human_bytes,
)

EPILOG = (
    "Examples:\n\n"
    "  statectl gc --blobstore s3://backups/samza --dry-run     # what would go, and why\n\n"
    "  statectl gc --blobstore s3://backups/samza --keep-last 24 --grace 6h -o json\n\n"
    "Exit codes: 0 ok, 1 failure (nothing is deleted that a retained snapshot needs), 2 usage, 12 auth."
)


def gc(
    ctx: typer.Context,
    blobstore: BlobstoreOpt = None,
    s3_endpoint: S3EndpointOpt = None,
    kafka: KafkaOpt = None,
    job: JobOpt = None,
    job_id: JobIdOpt = None,
    keep_last: KeepLastOpt = None,
    grace: Annotated[Optional[str], typer.Option("--grace", help="Leave unreferenced blobs younger than this (default 6h, at least 1m): a write in flight may still need them. Blobs a running backup may commit are kept whatever the grace. [env STATECTL_GRACE]", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Delete nothing; list what would be deleted and why.")] = False,
    parallelism: ParallelismOpt = None,
) -> None:
    """Finish interrupted cleanups, apply retention, delete expired and unreferenced blobs (all jobs)."""
    from statectl.engine.gc import GcOptions
    from statectl.engine.gc import gc as run_gc

    env = Env(ctx, blobstore=blobstore, s3_endpoint=s3_endpoint, kafka=kafka, job=job, job_id=job_id,
              keep_last=keep_last, grace=grace, parallelism=parallelism)
    s = env.settings
    try:
        # Retention is applied by gc only when asked for here (flag, env or profile); otherwise each
        # snapshot keeps the retention its backup asked for.
        keep = s.keep_last if s.source("keep_last") != "default" else None
        r = run_gc(GcOptions(grace_seconds=s.grace, keep_last=keep, dry_run=dry_run, parallelism=s.parallelism),
                   env.blobstore, env.checkpoints, env.progress())
        lines = []
        if dry_run or s.verbose:
            lines += [f"{'would delete' if dry_run else 'deleted'} {a.key} ({human_bytes(a.size)}): {a.reason}"
                      for a in r.deleted + r.debris]
        verb = "would delete" if dry_run else "deleted"
        debris = f", {r.debris_deleted} leftovers of unfinished writes" if r.debris_deleted else ""
        lines.append(f"{verb} {r.blobs_deleted} blobs{debris} ({human_bytes(r.bytes_reclaimed)}), kept {r.blobs_kept}; "
                     f"{r.snapshots_expired} snapshots expired, {r.cleanups_finished} interrupted cleanups finished, "
                     f"{r.stores} stores, {r.duration_s:.1f}s")
        if not (dry_run or s.verbose):
            r.deleted = []  # a gc of 100 000 blobs would print them all: only when asked for
            r.debris = []
        env.emit(r, "\n".join(lines))
    finally:
        env.close()
