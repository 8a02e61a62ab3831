"""statectl standby failover: a whole container onto its standby host, and the container promote that shares it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from statectl.cli.common import Env, exit_codes_epilog, state_command
from statectl.cli.standby.shared import (
    REPLICA,
    TIMEOUT,
    TO_CHECKPOINT,
    container_of_flags,
    metrics_file_option,
    metrics_path,
)
from statectl.errors import UsageError

EPILOG = (
    "Run on the standby container's host. Writes the job's locality (the standby container's mapping deleted, the "
    "active container's pointed here) and every store of the container promoted into the state dir, each step "
    "journaled in <standby-root>/failover/: run the same command again to finish one interrupted. Checks every "
    "store before it writes anything. The steps and refusals: see docs/standby.md.\n\n"
    "Example:\n\n  statectl standby failover --kafka broker:9092 --job page-views --container 0 "
    "--state-dir /var/samza/state --dry-run\n\n"
    + exit_codes_epilog(0, (1, "a store failed to catch up or the disk is full (run again to finish), or a "
                               "changelog was recreated since its replica was followed"),
                        (2, "usage, or this host is not the standby container's host"),
                        (10, "no coordinator stream, no such container, no replica here, or no standby host "
                             "(pass --host)"),
                        (11, "a process holds a task's active state, or another promote or failover runs"),
                        (14, "refused: the job's next start would delete a promoted dir (nothing changed)")))
ACTIVE_CONTAINER = Annotated[Optional[str], typer.Option(
    "--container", help="The active container to fail over (its id in the job model, such as 0; required).",
    show_default=False)]
HOST = Annotated[Optional[str], typer.Option(
    "--host", help="This host's name as the job's locality names it (default: its hostname).", show_default=False)]
DRY_RUN = Annotated[bool, typer.Option("--dry-run", help="Check everything and show each step; change nothing.")]
FAILOVER_COUNTERS = metrics_file_option("the failover counters of the promotes run on this host")


@state_command("kafka", "job", "job_id", "state_dir", "standby_root", "blobstore", "s3_endpoint")
def failover(env: Env, container: ACTIVE_CONTAINER = None, replica: REPLICA = 0, host: HOST = None,
             dry_run: DRY_RUN = False, timeout: TIMEOUT = "60s", to_checkpoint: TO_CHECKPOINT = False,
             metrics_file: FAILOVER_COUNTERS = None) -> None:
    """Fail a whole container over onto its standby host: locality, stop the standby, promote every store."""
    s = env.settings
    if container is None:
        raise UsageError("standby failover needs --container", hint="pass the active container's id, such as 0")
    if not s.kafka or not s.job or not s.state_dir:
        raise UsageError("standby failover needs --kafka, --job and --state-dir")
    run_failover(env, container, replica, host, dry_run, timeout, to_checkpoint, metrics_path(metrics_file),
                 locality=True)


def run_failover(env: Env, container: str, replica: int, host: str | None, dry_run: bool, timeout: str,
                 to_checkpoint: bool, metrics_file: Path | None, *, locality: bool) -> None:
    """The container's failover (``locality`` False: its promote, engine.standby.failover), its --metrics-file
    counters and its steps rendered."""
    from statectl.config import parse_seconds
    from statectl.engine.standby.container import MODE_ALL, blob_restored_stores
    from statectl.engine.standby.failover import failover as run_failover

    seconds = parse_seconds(timeout, "--timeout")
    sc = container_of_flags(env, container, replica, mode=MODE_ALL)
    s = env.settings
    blob = bool(blob_restored_stores(sc.config))  # their pre-restores are promoted: the blob store is needed
    try:
        r = run_failover(sc, s.kafka, Path(s.state_dir).absolute(), security=env.session.kafka_security, host=host,
                         dry_run=dry_run, timeout_s=seconds, to_checkpoint=to_checkpoint, locality=locality,
                         progress=env.progress, blobstore=env.session.blobstore if blob else None,
                         catalog=env.session.catalog if blob else None)
    except (Exception, KeyboardInterrupt) as e:
        if metrics_file is not None and not dry_run:
            _count_stores(env, metrics_file, sc, e)
        raise
    if metrics_file is not None and not dry_run:
        _count_stores(env, metrics_file, sc, None, only={(x.task, x.store) for x in r.stores if x.status == "promoted"})
    for note in r.notes:
        env.progress.note(note)
    lines = [f"{'DRY RUN: ' if r.dry_run else ''}container {r.container} -> {r.standby_host} "
             f"(standby container {r.standby_container})"]
    lines += [f"  {st.step:<24} {st.status:<13} {st.detail}" for st in r.steps]
    lines += [f"  {x.task} / {x.store}: {x.status}" + (f" -> {x.promoted_dir} ({x.restore_mode})" if x.promoted_dir
                                                      else "") for x in r.stores]
    env.emit(r, "\n".join(lines))


def _count_stores(env: Env, path: Path, sc: Any, error: BaseException | None,
                  only: set[tuple[str, str]] | None = None) -> None:
    """--metrics-file of a container's promote or failover: one failover counted per store (promoted now;
    or, when it raised, the result of that error for every store)."""
    from statectl.metrics import record_failover, result_of

    result = result_of(error)
    for rep in sc.replicas:
        if only is not None and (rep.ref.task, rep.ref.store) not in only:
            continue
        try:
            note = record_failover(path, rep.ref.job, rep.ref.job_id, rep.ref.task, rep.ref.store, result)
        except OSError as e:
            env.progress.note(f"warning: --metrics-file {path} not written: {e}")
            return
        if note:
            env.progress.note(f"warning: {note}")

