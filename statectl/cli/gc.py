"""statectl gc: the flags into GcOptions, engine.gc over the whole blob store, the result."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import BLOBSTORE, Env, human_bytes, plural, state_command

EPILOG = (
    "Examples:\n\n"
    "  statectl gc --dry-run   # what would go from the default blob store, and why\n\n"
    "  statectl gc --blobstore s3://backups/samza --keep-last 24 --grace 6h -o json\n\n"
    + exit_codes_epilog(0, (1, "failure (nothing is deleted that a retained snapshot needs)"), 2,
                        (12, "credentials that cannot write, --dry-run too"))
)


@state_command(*BLOBSTORE, "kafka", "job", "job_id", "keep_last", "grace", "parallelism")
def gc(
    env: Env,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Delete nothing; list what would be deleted and why.")] = False,
) -> None:
    """Finish interrupted cleanups, apply retention, delete expired and unreferenced blobs (all jobs).

    Deletes blobs and catalog records no kept snapshot needs; never one a retained snapshot references, a
    running backup may still commit, or younger than --grace. Safe while backups run; run it from cron.
    See man statectl-gc or docs/backup.md."""
    from statectl.engine.gc import GcOptions
    from statectl.engine.gc import gc as run_gc

    s = env.settings
    # Retention is applied by gc only when asked for here (flag, env or profile); otherwise each
    # snapshot keeps the retention its backup asked for.
    keep = s.keep_last if s.source("keep_last") != "default" else None
    # Without --dry-run or -v only the counts are shown: gc then holds no list of what it deleted.
    r = run_gc(GcOptions(grace_seconds=s.grace, keep_last=keep, dry_run=dry_run, parallelism=s.parallelism,
                         itemize=dry_run or s.verbose),
               env.session.blobstore, env.session.catalog, env.progress)
    lines = []
    if dry_run or s.verbose:
        # The retention plan first: which snapshots go and why; then every blob and why.
        lines += [f"{'would expire' if dry_run else 'expired'} snapshot {e.checkpoint_id} of {e.store} "
                  f"({e.snapshot_id}): {e.reason}"
                  + (f"; its blobs stay until {e.blobs_kept_until} (grace)" if e.blobs_kept_until else "")
                  for e in r.expired]
        lines += [f"{'would delete' if dry_run else 'deleted'} {a.key} ({human_bytes(a.size)}): {a.reason}"
                  for a in r.deleted + r.debris]
    verb = "would delete" if dry_run else "deleted"
    debris = f", {plural(r.debris_deleted, 'leftover')} of unfinished writes" if r.debris_deleted else ""
    lines.append(f"{verb} {plural(r.blobs_deleted, 'blob')}{debris} ({human_bytes(r.bytes_reclaimed)}), kept "
                 f"{r.blobs_kept}; {plural(r.snapshots_expired, 'snapshot')} expired, "
                 f"{plural(r.cleanups_finished, 'interrupted cleanup')} finished, {plural(r.stores, 'store')} in "
                 f"{r.blobstore}, {r.duration_s:.1f}s")
    if not (dry_run or s.verbose):
        r.deleted = []  # a gc of 100 000 blobs would print them all: only when asked for
        r.debris = []
    env.emit(r, "\n".join(lines))

