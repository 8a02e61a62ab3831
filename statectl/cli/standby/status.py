"""statectl standby status and check: the replicas on this host, and the job's placement of actives and standbys."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from statectl.cli.common import Env, exit_codes_epilog, state_command, table
from statectl.cli.standby.shared import metrics_file_option, metrics_path, root_flag, write_metrics
from statectl.errors import UsageError

STATUS_EPILOG = (
    "Reads only: the status files of the replicas in the standby root (--standby-root), in their tasks' active "
    "store dirs (--layout active-path), the pre-restores, and those an older statectl kept in the state dir "
    "(layout old, with the command that moves them). --metrics-file: for node_exporter, from cron. See "
    "docs/standby.md.\n\n"
    "Example:\n\n  statectl standby status --state-dir /var/samza/state -o json\n\n"
    + exit_codes_epilog(0, 2, (10, "no such state dir")))
CHECK_EPILOG = (
    "Reads only the job's coordinator stream. Also lists the standby containers with no host, and proposes the "
    "hosts each of them (and each in violation) can be placed on, from the --host candidates, else every host the "
    "job's locality names. See docs/standby.md.\n\n"
    "Example:\n\n  statectl standby check --kafka broker:9092 --job page-views --host node-7 --host node-8\n\n"
    + exit_codes_epilog((0, "no task shares a host with its standby (unmapped standby containers too)"),
                        (1, "some task's active and standby share a host"), 2, (10, "no coordinator stream")))
HOSTS = Annotated[Optional[list[str]], typer.Option(
    "--host", help="A candidate host for the proposals (repeatable; default: every host the job's locality names).",
    show_default=False)]


@state_command("state_dir", "standby_root")
def status(env: Env, metrics_file: metrics_file_option("each replica's lag, offsets and follower_up") = None) -> None:
    """The replicas under the state dir: lag, follower pid, whether they are promotable."""
    from statectl.engine.standby.status import replicas

    if not env.settings.state_dir:
        raise UsageError("standby status needs --state-dir")
    metrics_file = metrics_path(metrics_file)
    rows = replicas(Path(env.settings.state_dir), root_flag(env))
    if metrics_file is not None:
        from statectl.metrics import status_families

        write_metrics(env, metrics_file, lambda: status_families(rows))
    env.emit(rows, status_text(rows))


STATUS_HEADER = ["REPLICA", "OFFSET", "LAG RECORDS", "LAG SECONDS", "FOLLOWER", "PROMOTABLE", "LAYOUT", "CONTAINER"]


def status_text(rows: list[Any]) -> str:
    """The replicas as a table under STATUS_HEADER (an old-layout one followed by the command that moves it),
    or ``no replicas``."""
    if not rows:
        return "no replicas"

    def cells(r: Any) -> list[str]:
        return ["-" if v is None else str(v) for v in (
            r.replica_dir, r.applied_offset, r.lag_records, None if r.lag_s is None else f"{r.lag_s:.1f}",
            f"pid {r.follower_pid}" if r.following else None, "yes" if r.promotable else "no", r.layout,
            r.container)]

    header, *lines = table(STATUS_HEADER, [cells(r) for r in rows])
    out = [header]
    for r, line in zip(rows, lines):
        out.append(line)
        if r.move_command:
            out.append(f"  old layout: in the state dir, where Samza deletes it; move it: {r.move_command}")
    return "\n".join(out)


@state_command("kafka", "job", "job_id")
def check(env: Env, metrics_file: metrics_file_option("the placement violations and unmapped standby containers") = None,
          host: HOSTS = None) -> None:
    """Report any task whose active and standby containers are placed on the same host (they must never be),
    the standby containers with no host, and where they can be placed."""
    from statectl.engine.standby.placement import check_placement
    from statectl.errors import StatectlError

    s = env.settings
    if not s.kafka or not s.job:
        raise UsageError("standby check needs --kafka and --job")
    metrics_file = metrics_path(metrics_file)
    r = check_placement(s.kafka, s.job, s.job_id, hosts=host or None, security=env.session.kafka_security)
    if metrics_file is not None:
        from statectl.metrics import check_families

        write_metrics(env, metrics_file, lambda: check_families(s.job, s.job_id, r))
    for note in r.notes:
        env.progress.note(note)
    lines = [f"{v.task} and {v.standby} both on {v.host} (containers {v.container}, {v.standby_container})"
             for v in r.violations] or [f"{r.tasks} tasks, {r.standbys} standbys: no task shares a host with its standby"]
    lines += [f"standby container {u.container} (of container {u.active_container or '?'}) has no host: "
              f"{', '.join(u.tasks)}" for u in r.unmapped]
    lines += [f"standby container {p.standby_container} ({p.reason.replace('_', ' ')}) can be placed on: "
              f"{', '.join(p.candidate_hosts)}" for p in r.proposals if p.candidate_hosts]
    env.emit(r, "\n".join(lines))
    if r.violations:
        raise StatectlError(f"{len(r.violations)} task(s) share a host with their standby")

