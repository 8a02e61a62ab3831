"""statectl restore"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import STORE, Env, human_bytes, state_command
from statectl.errors import UsageError

EPILOG = (
    "Examples:\n\n"
    "  statectl restore --job page-views --state-dir /var/samza/state --store counts --task 'Partition 0'\n\n"
    "  statectl restore --job page-views --store counts --snapshot 3f2a9c --target-dir /tmp/counts-copy\n\n"
    "  statectl restore --job page-views --state-dir /var/samza/state --store counts --dry-run\n\n"
    "  statectl restore --from-changelog page-views-counts-changelog --partition 0 --kafka broker:9092 "
    "--target-dir /tmp/counts-rebuilt\n\n"
    + exit_codes_epilog(0, (1, "failure (corrupt snapshot, CRC mismatch, disk full: the old store is untouched)"), 2,
                        (10, "no such snapshot, topic or partition"), (11, "target store held by a running process"))
)


@state_command(*STORE, "parallelism")
def restore(
    env: Env,
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    target_dir: Annotated[Optional[Path], typer.Option("--target-dir", help="Restore here instead of the store dir.", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty target dir that is not a RocksDB store (never one holding a store, the blob store or a mount point).")] = False,
    from_other_store: Annotated[bool, typer.Option("--from-other-store", help="Let --snapshot name a snapshot of another job, task or store: a deliberate cross-restore.")] = False,
    from_changelog: Annotated[Optional[str], typer.Option("--from-changelog", metavar="TOPIC", help="Rebuild the store by replaying this Kafka changelog topic instead (needs --kafka and --partition).", show_default=False)] = None,
    partition: Annotated[Optional[int], typer.Option("--partition", metavar="N", help="The changelog partition to replay (with --from-changelog).", show_default=False)] = None,
    until_offset: Annotated[Optional[int], typer.Option("--until-offset", metavar="N", help="Replay only the records below offset N (default: to the end).", show_default=False)] = None,
    to_checkpoint: Annotated[bool, typer.Option("--to-checkpoint", help="Replay up to the changelog offset in the task's latest Samza checkpoint (needs --job and --store).")] = False,
    system: Annotated[str, typer.Option("--system", help="The changelog's Samza system, named in the store's OFFSET-v2 file (with --from-changelog).")] = "kafka",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing (not even a reader pin); print the plan: each file downloaded or reused (--from-changelog: the offsets replayed).")] = False,
) -> None:
    """Restore a store from its latest snapshot (or --snapshot), built aside and swapped in atomically.

    Replaces the store dir (or --target-dir) only; identical local files are reused. Never replaces another
    store's dir, a mount point or the blob store, nor a non-empty dir that is not a RocksDB store without
    --force. With --from-changelog it replays the store's Kafka changelog instead (--to-checkpoint: up to
    the task's latest Samza checkpoint). See man statectl-restore or docs/backup.md."""
    if from_changelog is not None:
        _restore_from_changelog(env, from_changelog, partition, target_dir, force, snapshot, until_offset,
                                to_checkpoint, system, dry_run)
        return
    changelog_only = [flag for flag, given in (("--partition", partition is not None),
                                               ("--until-offset", until_offset is not None),
                                               ("--to-checkpoint", to_checkpoint),
                                               ("--system", system != "kafka")) if given]
    if changelog_only:
        raise UsageError(f"{', '.join(changelog_only)} only go with --from-changelog TOPIC")
    if from_other_store and snapshot is None:
        raise UsageError("--from-other-store needs --snapshot ID: a cross-restore names the snapshot it takes")

    from statectl.engine.restore import RestoreOptions, plan_restore
    from statectl.engine.restore import restore as run_restore

    session, s = env.session, env.settings
    if target_dir is not None and env.flags.store_dir is None and not s.state_dir:
        sdir = target_dir
    else:
        sdir = session.store_dir(env.flags.store_dir)
    opts = RestoreOptions(ref=session.ref(), store_dir=sdir, target_dir=target_dir, snapshot=snapshot,
                          parallelism=s.parallelism, force=force, from_other_store=from_other_store,
                          state_dir=Path(s.state_dir) if s.state_dir else None)
    if dry_run:
        plan = plan_restore(opts, session.blobstore, session.catalog, env.progress)
        lines = [f"would download {f.path} ({human_bytes(f.size)})" if f.action == "download"
                 else f"would reuse {f.path} ({human_bytes(f.size)}) from {f.source}" for f in plan.files]
        lines.append(f"dry run: would restore snapshot {plan.snapshot_id} (checkpoint {plan.checkpoint_id}) into "
                     f"{plan.target_dir}: {plan.files_total} files, {plan.files_downloaded} downloaded "
                     f"({human_bytes(plan.bytes_downloaded)}), {plan.files_reused} reused locally")
        env.emit(plan, "\n".join(lines))
        return
    r = run_restore(opts, session.blobstore, session.catalog, env.progress)
    env.emit(r, f"restored snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}) from {r.blobstore} into "
                f"{r.target_dir}: "
                f"{r.files_total} files, {r.files_downloaded} downloaded ({human_bytes(r.bytes_downloaded)}), "
                f"{r.files_reused} reused locally, {r.duration_s:.1f}s")


def _restore_from_changelog(env: Env, topic: str, partition: Optional[int], target_dir: Optional[Path], force: bool,
                            snapshot: Optional[str], until_offset: Optional[int], to_checkpoint: bool,
                            system: str, dry_run: bool) -> None:
    from statectl.blobstore import file_root
    from statectl.engine.changelog import (
        ChangelogRestoreOptions,
        plan_restore_from_changelog,
        restore_from_changelog,
    )

    session, s = env.session, env.settings
    if not s.kafka:
        raise UsageError("--from-changelog needs Kafka brokers",
                         hint="pass --kafka HOST:PORT[,..] (or set STATECTL_KAFKA)")
    if partition is None:
        raise UsageError("--from-changelog needs --partition N")
    if snapshot is not None:
        raise UsageError("--snapshot and --from-changelog are alternatives: pass one of them")
    opts = ChangelogRestoreOptions(
        bootstrap=s.kafka, topic=topic, partition=partition,
        target_dir=target_dir if target_dir is not None else session.store_dir(env.flags.store_dir),
        stop_offset=until_offset, checkpoint_ref=session.ref() if to_checkpoint else None, force=force, system=system,
        security=session.kafka_security, state_dir=Path(s.state_dir) if s.state_dir else None,
        own_store=session.store_dir(env.flags.store_dir) if s.state_dir and s.store else None,
        blob_root=file_root(s.blobstore) if s.blobstore else None)
    if dry_run:
        p = plan_restore_from_changelog(opts, env.progress)
        upto = f"below offset {p.stop_offset}" if p.stop_offset is not None else f"to its end (offset {p.end_offset} now)"
        env.emit(p, f"dry run: would replay {p.topic}[{p.partition}] from offset {p.first_offset} {upto}, at most "
                    f"{p.offsets} records, into {p.target_dir}" + (", replacing the store there" if p.replaces_store
                                                                   else ""))
        return
    r = restore_from_changelog(opts, env.progress)
    env.emit(r, f"replayed {r.records} records ({human_bytes(r.bytes)}) of {r.topic}[{r.partition}] up to offset "
                f"{r.end_offset} into {r.target_dir}, {r.duration_s:.1f}s")
