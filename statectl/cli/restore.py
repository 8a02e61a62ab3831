"""statectl restore: a snapshot (or, with --from-changelog, the changelog) into a store dir, through
engine.restore or engine.changelog, rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import STORE, Env, human_bytes, state_command
from statectl.errors import PartialError, UsageError

EPILOG = (
    "Examples:\n\n"
    "  statectl restore --job page-views --state-dir /var/samza/state --store counts --task 'Partition 0'\n\n"
    "  statectl restore --job page-views --store counts --snapshot 3f2a9c --target-dir /tmp/counts-copy\n\n"
    "  statectl restore --job page-views --state-dir /var/samza/state --all\n\n"
    "  statectl restore --from-changelog page-views-counts-changelog --partition 0 --kafka broker:9092 "
    "--target-dir /tmp/counts-rebuilt\n\n"
    + exit_codes_epilog(0, (1, "failure (the old store untouched)"), 2, (3, "some stores failed"),
                        (10, "no such snapshot or topic"), (11, "store held by a process"))
)


@state_command(*STORE, "parallelism", "limit_rate")
def restore(
    env: Env,
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Snapshot id, prefix or checkpoint id (default: latest).", show_default=False)] = None,
    target_dir: Annotated[Optional[Path], typer.Option("--target-dir", help="Restore here instead of the store dir.", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty dir that is not a store.")] = False,
    from_other_store: Annotated[bool, typer.Option("--from-other-store", help="--snapshot may name another store's snapshot.")] = False,
    from_changelog: Annotated[Optional[str], typer.Option("--from-changelog", metavar="TOPIC", help="Replay this changelog topic instead.", show_default=False)] = None,
    partition: Annotated[Optional[int], typer.Option("--partition", metavar="N", help="The changelog partition to replay.", show_default=False)] = None,
    until_offset: Annotated[Optional[int], typer.Option("--until-offset", metavar="N", help="Replay below offset N only (default: all).", show_default=False)] = None,
    to_checkpoint: Annotated[bool, typer.Option("--to-checkpoint", help="Replay up to the task's latest checkpoint.")] = False,
    system: Annotated[str, typer.Option("--system", help="The changelog's Samza system.")] = "kafka",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing (not even a pin); print the plan.")] = False,
    all_stores: Annotated[bool, typer.Option("--all", help="Every store of every task of --job.")] = False,
    all_tasks: Annotated[bool, typer.Option("--all-tasks", help="Every task of --store.")] = False,
    container: Annotated[Optional[str], typer.Option("--container", metavar="ID", help="Only this container's tasks (job model).", show_default=False)] = None,
) -> None:
    """Restore a store from its latest snapshot (or --snapshot), built aside and swapped in atomically.

    Replaces only the store dir (or --target-dir), reusing identical local files; never another store's
    dir, a mount point or the blob store. --from-changelog replays the changelog instead."""
    changelog_only = [flag for flag, given in (("--partition", partition is not None),
                                               ("--until-offset", until_offset is not None),
                                               ("--to-checkpoint", to_checkpoint),
                                               ("--system", system != "kafka")) if given]
    if all_stores or all_tasks or container is not None:
        single = [flag for flag, on in (("--snapshot", snapshot is not None), ("--target-dir", target_dir is not None),
                                        ("--from-other-store", from_other_store),
                                        ("--from-changelog", from_changelog is not None)) if on]
        _restore_all(env, all_stores, all_tasks, container, force, dry_run, given=single + changelog_only)
    elif from_changelog is not None:
        _restore_from_changelog(env, from_changelog, partition, target_dir, force, snapshot, until_offset,
                                to_checkpoint, system, dry_run)
    elif changelog_only:
        raise UsageError(f"{', '.join(changelog_only)} only go with --from-changelog TOPIC")
    elif from_other_store and snapshot is None:
        raise UsageError("--from-other-store needs --snapshot ID: a cross-restore names the snapshot it takes")
    else:
        _restore_one(env, snapshot, target_dir, force, from_other_store, dry_run)


def _restore_one(env: Env, snapshot: Optional[str], target_dir: Optional[Path], force: bool, from_other_store: bool,
                 dry_run: bool) -> None:
    from statectl.engine.restore import RestoreOptions, plan_restore
    from statectl.engine.restore import restore as run_restore

    session, s = env.session, env.settings
    if target_dir is not None and env.flags.store_dir is None and not s.state_dir:
        sdir = target_dir
    else:
        sdir = session.store_dir(env.flags.store_dir)
    opts = RestoreOptions(ref=session.ref(), store_dir=sdir, target_dir=target_dir, snapshot=snapshot,
                          parallelism=s.parallelism, force=force, from_other_store=from_other_store,
                          state_dir=Path(s.state_dir) if s.state_dir else None, rate_limit=session.rate_limit)
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


def _restore_all(env: Env, all_stores: bool, all_tasks: bool, container: Optional[str], force: bool, dry_run: bool,
                 given: list[str]) -> None:
    from statectl.engine.restore_all import RestoreAllOptions, restore_all

    session, s = env.session, env.settings
    flag = "--all" if all_stores else "--all-tasks"
    if not (all_stores or all_tasks):
        raise UsageError("--container goes with --all (every store of its tasks) or --all-tasks (one --store)")
    if all_stores and all_tasks:
        raise UsageError("give --all (every store) or --all-tasks (every task of --store), not both")
    if all_stores and env.flags.store:
        raise UsageError("--all restores every store of the job; do not combine it with --store",
                         hint="--all-tasks restores every task of one --store")
    if all_tasks and not s.store:
        raise UsageError("--all-tasks needs --store", hint="--all restores every store")
    given += [f"--{name.replace('_', '-')}" for name in ("task", "store_dir") if getattr(env.flags, name)]
    if given:
        raise UsageError(f"{flag} restores the latest snapshot of each task into its store dir; do not combine "
                         f"it with {', '.join(given)}")
    if not s.state_dir:
        raise UsageError(f"{flag} needs --state-dir", hint="each store goes to <state-dir>/<store>/<task>")
    opts = RestoreAllOptions(ref=session.ref(need_store=all_tasks), state_dir=Path(s.state_dir),
                             parallelism=s.parallelism, force=force, container=container, kafka=s.kafka,
                             zookeeper=s.zookeeper, kafka_security=session.kafka_security if s.kafka else None,
                             rate_limit=session.rate_limit)
    r = restore_all(opts, session.blobstore, session.catalog, env.progress, dry_run=dry_run)
    if dry_run:
        lines = [f"dry run: would restore snapshot {p.snapshot_id} of {p.store}/{p.task} into {p.target_dir}: "
                 f"{p.files_total} files, {p.files_downloaded} downloaded ({human_bytes(p.bytes_downloaded)}), "
                 f"{p.files_reused} reused locally" for p in r.results]
    else:
        lines = [f"restored snapshot {x.snapshot_id} of {x.store}/{x.task} from {x.blobstore} into {x.target_dir}: "
                 f"{x.files_total} files, {x.files_downloaded} downloaded ({human_bytes(x.bytes_downloaded)}), "
                 f"{x.files_reused} reused locally, {x.duration_s:.1f}s" for x in r.results]
    lines += [f"FAILED {path}: {err}" for path, err in r.failures]
    env.emit(r, "\n".join(lines))
    if r.failures:
        raise PartialError(f"{len(r.failures)} of {len(r.failures) + len(r.results)} stores failed to restore"
                           + (" (dry run)" if dry_run else ""))


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
