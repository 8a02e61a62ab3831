"""statectl drain start | status | wait | cancel: the commands over the drain engine
(statectl.engine.drain); the reasoning behind each is in docs/drain.md."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import Env, state_command
from statectl.errors import UsageError

if TYPE_CHECKING:
    from statectl.engine.drain.model import DrainStatus, DrainTarget

app = typer.Typer(help="Stop a job after it has processed everything in flight (Samza's drain).",
                  no_args_is_help=True, rich_markup_mode=None)

JOB = ("kafka", "job", "job_id")
RUN_ID = Annotated[Optional[str], typer.Option("--run-id", help="The run to drain (default: the job's app.run.id "
                                                                "in its coordinator stream).", show_default=False)]
UUID = Annotated[Optional[str], typer.Option("--uuid", help="Just this notification (default: every one of the "
                                                            "current run).", show_default=False)]
DRY_RUN = Annotated[bool, typer.Option("--dry-run", help="Read the coordinator stream and print what would be "
                                                            "written; write nothing.")]


def _target(env: Env, run_id: str | None = None) -> DrainTarget:
    from statectl.engine.drain.model import DrainTarget

    s = env.settings
    if not s.kafka:
        raise UsageError("drain needs --kafka: the job's coordinator stream is where the notification goes")
    if not s.job:
        raise UsageError("drain needs --job")
    return DrainTarget(s.kafka, s.job, s.job_id, run_id=run_id, security=env.session.kafka_security)


@app.command("start", epilog="Examples:\n\n  statectl drain start --kafka broker:9092 --job page-views\n\n"
             "  statectl drain start --kafka broker:9092 --job page-views --dry-run\n\n"
             + exit_codes_epilog(0, 1, 2, (10, "no coordinator stream, or no run id found and none given"),
                                 (14, "the job runs no drain monitor (job.drain-monitor.enabled is not true)")))
@state_command(*JOB)
def start(
    env: Env,
    run_id: RUN_ID = None,
    force: Annotated[bool, typer.Option("--force", help="Write the notification even though the job's config does "
                                                        "not enable its drain monitor.")] = False,
    dry_run: DRY_RUN = False,
) -> None:
    """Ask the job's current run to drain: write a drain notification to its coordinator stream.

    Writes one record to __samza_coordinator_<job>_<job-id> (a notification already pending for the run is
    reported, not repeated); never touches the job's checkpoints, stores or streams. Refuses, writing
    nothing, when the job's config does not enable Samza's drain monitor (job.drain-monitor.enabled=true).
    See docs/drain.md."""
    from statectl.engine.drain.start import plan_start
    from statectl.engine.drain.start import start as run_start

    if dry_run:
        p = plan_start(_target(env, run_id), force=force)
        for note in p.notes:
            env.progress.note(note)
        env.emit(p, f"dry run: would write a drain notification for run {p.run_id} to {p.topic}" if p.created else
                    f"dry run: drain notification {p.uuid} for run {p.run_id} is pending already: nothing would be "
                    "written")
        return
    r = run_start(_target(env, run_id), force=force)
    for note in r.notes:
        env.progress.note(note)
    verb = "wrote" if r.created else "already pending:"
    env.emit(r, f"{verb} drain notification {r.uuid} for run {r.run_id}")


@app.command("status", epilog="Example:\n\n  statectl drain status --kafka broker:9092 --job page-views -o json\n\n"
             + exit_codes_epilog(0, 1, 2, (10, "no coordinator stream")))
@state_command(*JOB)
def status(env: Env, run_id: RUN_ID = None) -> None:
    """Each drain notification with its state, and the messages in flight on the job's intermediate streams.

    Reads only (the coordinator stream, the checkpoint topic, the ends of the intermediate streams). States:
    pending, seen, drained, cleared, stale, with the signal that showed the end (cleared or checkpoints);
    whether the job runs a drain monitor; records Samza cannot read, listed as JOB-BREAKING ('drain cancel
    --bad' removes them). See docs/drain.md."""
    from statectl.engine.drain.status import status as run_status

    r = run_status(_target(env, run_id))
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, _status_text(r))


@app.command("wait", epilog="Example:\n\n  statectl drain wait --kafka broker:9092 --job page-views --timeout 600\n\n"
             + exit_codes_epilog(0, (1, "timed out, or the job stopped with messages still in flight"), 2,
                                 (10, "no notification to wait for")))
@state_command(*JOB)
def wait(
    env: Env,
    timeout: Annotated[str, typer.Option("--timeout", help="Give up after this long (e.g. 600, 10m).")] = "10m",
    uuid: UUID = None,
    run_id: RUN_ID = None,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between looks.")] = 1.0,
) -> None:
    """Block until the job has drained: the notification cleared, or its checkpoints showing the drain.

    Reads only. Says which signal showed the drain ('cleared' by the job's coordinator, or 'checkpoints'
    for standalone jobs, which never clear a notification) and the source records the job left behind for
    its next deployment. See docs/drain.md."""
    from statectl.config import parse_seconds
    from statectl.engine.drain.model import left_behind_text
    from statectl.engine.drain.wait import wait as run_wait

    seconds = parse_seconds(timeout, "--timeout")
    if poll <= 0:
        raise UsageError("--poll must be positive")
    with _WaitDisplay(env) as display:
        r = run_wait(_target(env, run_id), timeout_s=seconds, uuid=uuid, poll_s=poll, on_poll=display.update)
    for note in r.notes:
        env.progress.note(note)
    how = "cleared" if r.signal == "cleared" else "shown drained by the job's checkpoints"
    left = f", {left_behind_text(r.left_behind)}" if r.left_behind else ""
    env.emit(r, f"drained ({r.signal}): run {r.run_id}, notification {', '.join(r.uuids)} {how}, "
                f"{len(r.intermediate)} intermediate partitions consumed to their end{left}, {r.waited_s:.1f}s")


@app.command("cancel", epilog="Examples:\n\n  statectl drain cancel --kafka broker:9092 --job page-views\n"
             "  statectl drain cancel --kafka broker:9092 --job page-views --bad --all-stale\n"
             "  statectl drain cancel --kafka broker:9092 --job page-views --dry-run\n\n"
             + exit_codes_epilog(0, (1, "the job already acts on it: a drain cannot be undone"), 2,
                                 (10, "nothing to cancel, or no run id found and none given")))
@state_command(*JOB)
def cancel(
    env: Env,
    uuid: UUID = None,
    run_id: RUN_ID = None,
    bad: Annotated[bool, typer.Option("--bad", help="Remove the records Samza cannot read (job-breaking).")] = False,
    all_stale: Annotated[bool, typer.Option("--all-stale",
                                            help="Remove the notifications of every other run.")] = False,
    dry_run: DRY_RUN = False,
) -> None:
    """Withdraw a pending drain notification, unless the job already acts on it.

    Writes tombstones to the coordinator stream, each under the key its record is stored under: the pending
    notifications of the current run (or --uuid); with --bad, the records Samza cannot read; with
    --all-stale, every other run's notifications. Never touches the job's checkpoints, stores or streams.
    See docs/drain.md."""
    from statectl.engine.drain.cancel import cancel as run_cancel
    from statectl.engine.drain.cancel import plan_cancel

    if dry_run:
        p = plan_cancel(_target(env, run_id), uuid, bad=bad, all_stale=all_stale)
        for note in p.notes:
            env.progress.note(note)
        what = {"pending": "withdraw pending", "drained": "remove drained", "stale": "remove other run's"}
        lines = [f"would {what[t.kind]} drain notification {t.uuid} (key {_short(t.key)!r}, offset {t.offset})"
                 if t.uuid is not None else
                 f"would remove job-breaking record at offset {t.offset} (key {_short(t.key)!r})"
                 for t in p.tombstones]
        lines.append(f"dry run: would write {len(p.tombstones)} tombstone(s) to {p.topic}")
        env.emit(p, "\n".join(lines))
        return
    r = run_cancel(_target(env, run_id), uuid, bad=bad, all_stale=all_stale)
    for note in r.notes:
        env.progress.note(note)
    lines = [f"cancelled drain notification {u} (run {r.run_id})" for u in r.cancelled]
    lines += [f"removed job-breaking record at offset {b.offset} (key {_short(b.key)!r})" for b in r.bad_removed]
    env.emit(r, "\n".join(lines))


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _status_text(r: DrainStatus) -> str:
    from statectl.engine.drain.model import left_behind_text

    lines = [f"job {r.job}-{r.job_id}, run {r.run_id or '(none)'}"]
    lines.append("drain monitor: enabled" if r.drain_monitor_enabled else
                 "drain monitor: OFF (job.drain-monitor.enabled is not true: the job ignores drain notifications)")
    if not r.notifications:
        lines.append("no drain notification")
    for n in r.notifications:
        line = f"  {n.state:<8} {n.uuid}  run {_short(n.run_id or '?')}  written {n.written or '?'}"
        if n.signal:
            line += f"  signal {n.signal}"
        if n.key and n.key != n.uuid:
            line += f"  key {_short(n.key)!r}"
        lines.append(line)
    for b in r.job_breaking:
        lines.append(f"  JOB-BREAKING offset {b.offset} key {_short(b.key)!r} ({b.bytes} bytes): {b.why}")
    if r.job_breaking:
        lines.append("  Samza's DrainMonitor throws on these: the job's containers fail at start; "
                     "remove them with 'statectl drain cancel --bad'")
    if r.left_behind:
        lines.append(f"the drain completed with {left_behind_text(r.left_behind)}")
    if r.checkpoint_gaps:
        lines.append("not drained by its checkpoints yet: " + "; ".join(r.checkpoint_gaps[:4])
                     + (f" and {len(r.checkpoint_gaps) - 4} more" if len(r.checkpoint_gaps) > 4 else ""))
    if r.intermediate:
        lines.append(f"{r.in_flight} messages in flight on {len(r.intermediate)} intermediate partitions")
        lines += [f"  {i.stream}[{i.partition}]  {i.in_flight:>10}  end {i.end_offset}  task {i.task or '-'}"
                  for i in r.intermediate if i.in_flight]
    else:
        lines.append("no intermediate streams")
    return "\n".join(lines)


class _WaitDisplay:
    """On a terminal (not JSON, not quiet, not CI): a live line with the messages in flight going to zero."""

    def __init__(self, env: Env):
        import os

        s = env.settings
        self._live: Any = None
        if sys.stderr.isatty() and not s.quiet and not env.json and not os.environ.get("CI"):
            from rich.console import Console
            from rich.live import Live

            self._live = Live("", console=Console(stderr=True, markup=False, highlight=False), transient=True)

    def update(self, st: DrainStatus) -> None:
        if self._live is not None:
            states = ", ".join(f"{n.uuid[:8]} {n.state}" for n in st.pending()) or "cleared"
            self._live.update(f"draining {st.job}-{st.job_id}: {st.in_flight} messages in flight on "
                              f"{len(st.intermediate)} partitions; notification {states}")

    def __enter__(self) -> _WaitDisplay:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
