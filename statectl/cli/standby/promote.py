"""statectl standby promote: one task's replica (or pre-restore, or with --container every store of a
container) made what the job's next start restores from."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from statectl.cli.common import Env, exit_codes_epilog, state_command
from statectl.cli.standby.failover import run_failover
from statectl.cli.standby.shared import (
    CHANGELOG,
    CONTAINER,
    PARTITION,
    REPLICA,
    REPLICA_DIR,
    TIMEOUT,
    TO_CHECKPOINT,
    WHERE,
    metrics_file_option,
    metrics_path,
    no_single_task_flags,
    replica_of,
    root_flag,
)
from statectl.errors import UsageError

EPILOG = (
    "Fences the follower, catches the replica up and renames it where the job's next start keeps it: the active "
    "store dir (non-transactional restore) or <active dir>-<checkpoint id> (transactional, or a pre-restore under "
    "blob-store restore). Then points the task's container at this host on the coordinator stream, unless it runs "
    "other tasks too. Never replaces another store's dir; what the next start would delete is refused (exit 14, "
    "nothing changed). Restore modes, refusals: see docs/standby.md.\n\n"
    "Examples:\n\n  statectl standby promote --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state\n\n"
    "  statectl standby promote --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --dry-run\n\n"
    + exit_codes_epilog(0, (1, "not caught up within --timeout, a recreated changelog, a full disk"),
                        2, (10, "no replica"), (11, "the active store or the replica is held"),
                        (14, "refused: the next start would delete what promote makes (nothing changed)")))
ACTIVE_DIR = Annotated[Optional[Path], typer.Option(
    "--active-dir", help="The active store dir (default: <state-dir>/<store>/<task>).", show_default=False)]
DRY_RUN = Annotated[bool, typer.Option(
    "--dry-run", help="Make the checks and print the plan; change nothing. Exits as the promote would.")]
NON_TRANSACTIONAL = Annotated[bool, typer.Option(
    "--non-transactional-restore", help="The job restores the store non-transactionally: needed only when its "
                                        "config cannot be read.")]
PROMOTE_COUNTERS = metrics_file_option("the failover counters of the promotes run on this host")


def _counting_failovers(func: Any) -> Any:
    """promote --metrics-file: count the promote's result in the file (statectl.metrics.record_failover),
    whether it promoted, was refused or failed; without the flag, the promote as it is. A promote whose
    task and store are not known (flags missing) is not counted."""

    @functools.wraps(func)
    def command(env: Env, **kwargs: Any) -> Any:
        path = metrics_path(kwargs.get("metrics_file"))
        if path is None or kwargs.get("container") is not None or kwargs.get("dry_run"):
            # a container's promote counts its own stores; a dry run promotes nothing
            return func(env=env, **kwargs)
        try:
            out = func(env=env, **kwargs)
        except (Exception, KeyboardInterrupt) as e:
            _record_failover(env, path, e)
            raise
        _record_failover(env, path, None)
        return out

    return command


def _record_failover(env: Env, path: Path, error: BaseException | None) -> None:
    from statectl.errors import StatectlError
    from statectl.metrics import record_failover, result_of

    try:
        ref = env.session.ref()
    except StatectlError:
        env.progress.note(f"warning: --metrics-file {path}: the promote is not counted (no job, task and store)")
        return
    try:
        note = record_failover(path, ref.job, ref.job_id, ref.task, ref.store, result_of(error))
    except OSError as e:
        env.progress.note(f"warning: --metrics-file {path} not written: {e}")
        return
    if note:
        env.progress.note(f"warning: {note}")


def _promote_plan_text(p: Any) -> str:
    lines = [f"would stop the follower (pid {p.fence_pid})" if p.fence_pid is not None else "no follower runs"]
    if p.restore_mode == "blob-store":
        lines.append(f"would bring the pre-restored {p.replica_dir} to the snapshot of checkpoint {p.checkpoint_id} "
                     f"(downloading what differs) and rename it to {p.promoted_dir}; the job's next start renames it "
                     f"into {p.active_dir}")
    else:
        lines.append(f"would catch {p.replica_dir} up from changelog offset {p.applied_offset} to {p.catch_up_to}"
                     + ("" if p.restore_mode == "transactional" else " (or the end as it is then)"))
    if p.restore_mode == "blob-store":
        pass
    elif p.in_place:
        lines.append(f"would leave it where it is ({p.promoted_dir}, --layout active-path)")
    else:
        lines.append(f"would move it to {p.promoted_dir}" + (", replacing the store there" if p.replaces_active else ""))
    loc = p.locality
    if loc is not None:
        lines.append(f"would point container {loc.container} at host {loc.host} on the coordinator stream (now "
                     f"{loc.current or 'none'})" if loc.write else f"would leave the container placement as it is: "
                                                                    f"{loc.why}")
    lines.append(f"dry run: would promote {p.replica_dir} to {p.promoted_dir} ({p.restore_mode} restore)")
    return "\n".join(lines)


def _restore_route(env: Env, replica_dir: Path | None, active_dir: Path | None, changelog: str | None,
                   partition: int | None, replica: int) -> Any:
    """Whether promote takes the blob-store path (_promote_pre_restored's test, without promoting), with the
    coordinator stream read for it (engine.standby.prerestore_promote.restore_route); None when the flags
    rule that path out, nothing read."""
    s, session = env.settings, env.session
    if not s.kafka or not s.state_dir or replica_dir is not None or active_dir is not None:
        return None
    if replica < 0 or (partition is not None and partition < 0) or (changelog is not None and not changelog.strip()):
        return None
    from statectl.engine.standby.prerestore_promote import restore_route

    return restore_route(s.kafka, session.ref(), security=session.kafka_security)


def _promote_pre_restored(env: Env, seconds: float) -> None:
    """promote of a store the job restores from the blob store (engine.standby.prerestore_promote;
    _restore_route says which)."""
    from statectl.engine.standby.placement import update_locality
    from statectl.engine.standby.prerestore_promote import promote_pre_restored

    s, session = env.settings, env.session

    ref = session.ref()
    security = session.kafka_security
    r = promote_pre_restored(ref, Path(s.state_dir).absolute(), s.kafka, session.blobstore, session.catalog,
                             security=security, timeout_s=seconds, progress=env.progress, root=root_flag(env),
                             on_locality=lambda: update_locality(s.kafka, ref, security=security))
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, f"promoted the pre-restored {r.promoted_dir} (checkpoint {r.checkpoint_id}, blob-store restore: the "
                f"job's next start renames it into the store dir) in {r.duration_s:.2f}s")


@state_command(*WHERE, "standby_root", "zookeeper", "blobstore", "s3_endpoint")
@_counting_failovers
def promote(env: Env, changelog: CHANGELOG = None, partition: PARTITION = None, replica: REPLICA = 0,
            replica_dir: REPLICA_DIR = None, container: CONTAINER = None, timeout: TIMEOUT = "60s",
            to_checkpoint: TO_CHECKPOINT = False, active_dir: ACTIVE_DIR = None, metrics_file: PROMOTE_COUNTERS = None,
            dry_run: DRY_RUN = False, non_transactional_restore: NON_TRANSACTIONAL = False) -> None:
    """Make a replica what the job's next start restores from, and point its container at this host."""
    from statectl.config import parse_seconds

    seconds = parse_seconds(timeout, "--timeout")  # dry run or not: a bad value is the same usage error
    if container is not None:
        no_single_task_flags(env, "promote", changelog, partition, replica_dir)
        if active_dir is not None:
            raise UsageError("promote --container puts each store in its task's store dir: --active-dir excludes it")
        if non_transactional_restore:
            raise UsageError("--non-transactional-restore excludes --container: a container's promote reads each "
                             "store's restore from the job's config")
        return run_failover(env, container, replica, None, dry_run, timeout, to_checkpoint,
                            metrics_path(metrics_file), locality=False)
    route = _restore_route(env, replica_dir, active_dir, changelog, partition, replica)
    if route is not None and route.blob_store:
        if non_transactional_restore:
            raise UsageError("--non-transactional-restore: the job's config restores the store from the blob store",
                             hint="leave --non-transactional-restore out: the job's config decides")
        return _plan_pre_restored(env) if dry_run else _promote_pre_restored(env, seconds)
    # the stream the route read names the changelog too: it is not read again
    rep = replica_of(env, changelog, partition, replica, replica_dir, stream=route.stream if route else None)
    s = env.settings
    if replica_dir is None and s.state_dir:
        from statectl.engine.standby.dirs import locate_replica

        rep, found = locate_replica(rep, Path(s.state_dir), replica)
        if found:
            env.progress.note(found)
    if active_dir is None:
        if not s.state_dir:
            raise UsageError("standby promote needs --state-dir (or --active-dir)")
        from statectl.local.layout import store_dir

        active_dir = store_dir(Path(s.state_dir), rep.ref.store, rep.ref.task)
    _promote_replica(env, rep, Path(active_dir).absolute(), seconds, to_checkpoint, dry_run, non_transactional_restore)


def _promote_replica(env: Env, rep: Any, active_dir: Path, seconds: float, to_checkpoint: bool, dry_run: bool,
                     non_transactional_restore: bool) -> None:
    """promote (or its plan, ``dry_run``) of the changelog replica ``rep`` into ``active_dir``."""
    from statectl.engine.standby.placement import update_locality
    from statectl.engine.standby.promote import plan_promote
    from statectl.engine.standby.promote import promote as run_promote

    s, security = env.settings, env.session.kafka_security
    state_dir = Path(s.state_dir) if s.state_dir else None
    if dry_run:
        p = plan_promote(rep, active_dir, s.kafka, security=security, to_checkpoint=to_checkpoint, state_dir=state_dir,
                         assume_non_transactional=non_transactional_restore)
        for note in p.notes:
            env.progress.note(note)
        env.emit(p, _promote_plan_text(p))
        return
    r = run_promote(rep, active_dir, s.kafka, security=security, timeout_s=seconds, to_checkpoint=to_checkpoint,
                    on_locality=lambda: update_locality(s.kafka, rep.ref, security=security), progress=env.progress,
                    state_dir=state_dir, assume_non_transactional=non_transactional_restore)
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, f"promoted {rep.replica_dir} to {r.promoted_dir} at changelog offset {r.caught_up_offset} "
                f"({r.records_applied} records caught up, {r.restore_mode} restore) in {r.duration_s:.2f}s"
                + ("; pointed its container at this host on the coordinator stream" if r.locality_updated else ""))


def _plan_pre_restored(env: Env) -> None:
    """promote --dry-run of a store the job restores from the blob store: its plan printed."""
    from statectl.engine.standby.prerestore_promote import plan_promote_pre_restored

    session = env.session
    p = plan_promote_pre_restored(session.ref(), Path(env.settings.state_dir).absolute(), env.settings.kafka,
                                  session.blobstore, security=session.kafka_security, root=root_flag(env))
    for note in p.notes:
        env.progress.note(note)
    env.emit(p, _promote_plan_text(p))
