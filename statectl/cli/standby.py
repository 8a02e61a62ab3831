"""statectl standby follow | status | promote | check"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from statectl.cli.common import Env, exit_codes_epilog, state_command, stop_on_signals
from statectl.errors import UsageError

if TYPE_CHECKING:
    from statectl.engine.standby import Replica

app = typer.Typer(help="Hot replicas of a store kept current from its changelog, promoted in seconds (seed 001).",
                  no_args_is_help=True, rich_markup_mode=None)

WHERE = ("kafka", "job", "job_id", "task", "store", "state_dir")
CHANGELOG = Annotated[Optional[str], typer.Option(
    "--changelog", help="The store's changelog, as Samza's stores.<store>.changelog names it: <system>.<topic> (split "
                        "at the first dot, so a topic with dots needs its system: kafka.my.topic), or a bare <topic> "
                        "on the config's job.changelog.system, else job.default.system, else 'kafka' (default: "
                        "stores.<store>.changelog in the job's config on its coordinator stream). The system is named "
                        "in the replica's offset files and must be one the config defines "
                        "(systems.<system>.samza.factory).", show_default=False)]
PARTITION = Annotated[Optional[int], typer.Option(
    "--partition", help="Its changelog partition, overriding the job's mapping (default: the task's set-changelog "
                        "mapping on the coordinator stream; only without one, N of a task named 'Partition N', with "
                        "a warning).", show_default=False)]
REPLICA = Annotated[int, typer.Option("--replica", help="Replica number n of the standby task Standby-<task>-<n>.")]
REPLICA_DIR = Annotated[Optional[Path], typer.Option(
    "--replica-dir", help="The replica's dir (default: <state-dir>/.statectl-standby/<n>/<store>/<task>, where Samza "
                          "never looks; its lock and status files beside it).", show_default=False)]
LAYOUT = Annotated[str, typer.Option(
    "--layout", help="standby-root: the replica in <state-dir>/.statectl-standby/<n>/<store>/<task>. active-path: "
                     "in the task's active store dir <state-dir>/<store>/<task>, as Samza's own standby keeps it, so "
                     "that promote moves nothing; only on a host that runs no active of the task (its store's LOCK "
                     "free, the job's locality elsewhere), else exit 2.")]


def _metrics_file(what: str) -> Any:
    return Annotated[Optional[Path], typer.Option(
        "--metrics-file", help=f"Write {what} to this file in Prometheus text format, for node_exporter's textfile "
                               "collector (a *.prom file in its --collector.textfile.directory), replaced atomically. "
                               "A file that cannot be written is a warning; the exit code stays the command's.",
        show_default=False)]


# -- metrics (statectl.metrics) ------------------------------------------------------------------------------


def _serve_metrics(env: Env, rep: Replica, port: int | None, addr: str) -> tuple[Any, Any] | None:
    """follow --metrics-port: (the follower's FollowerMetrics, its MetricsServer) serving, or None without
    the flag; UsageError (exit 2) when the port cannot be listened on."""
    if port is None:
        return None
    from statectl.metrics import FollowerMetrics, replica_labels, serve

    ref = rep.ref
    collector = FollowerMetrics(replica_labels(ref.job, ref.job_id, ref.task, ref.store, rep.changelog,
                                               rep.partition, rep.replica_dir))
    server = serve(collector, port, addr)
    env.progress.note(f"serving metrics on {server.url}")
    return collector, server


def _metrics_path(path: Path | None) -> Path | None:
    """--metrics-file checked before the command does anything (statectl.metrics.check_textfile)."""
    if path is None:
        return None
    from statectl.metrics import check_textfile

    return check_textfile(path)


def _write_metrics(env: Env, path: Path, families: Any) -> None:
    """Write ``families()`` to --metrics-file; a failure is a warning, the exit code stays the command's."""
    from statectl.metrics import write_textfile

    try:
        write_textfile(path, families())
    except OSError as e:
        env.progress.note(f"warning: --metrics-file {path} not written: {e}")


def _counting_failovers(func: Any) -> Any:
    """promote --metrics-file: count the promote's result in the file (statectl.metrics.record_failover),
    whether it promoted, was refused or failed; without the flag, the promote as it is. A promote whose
    task and store are not known (flags missing) is not counted."""

    @functools.wraps(func)
    def command(env: Env, **kwargs: Any) -> Any:
        path = _metrics_path(kwargs.get("metrics_file"))
        if path is None:
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


def _replica(env: Env, changelog: str | None, partition: int | None, replica: int, replica_dir: Path | None,
             *, need_dir: bool = True) -> Replica:
    from statectl.engine.standby import Replica, resolve_changelog, standby_dir

    s, session = env.settings, env.session
    if not s.kafka:
        raise UsageError("standby needs --kafka: the replica follows the store's changelog there")
    ref = session.ref()
    if replica_dir is None:
        if not s.state_dir:
            raise UsageError("standby needs --state-dir (or --replica-dir)")
        replica_dir = standby_dir(Path(s.state_dir), ref.store, ref.task, replica)
    where = resolve_changelog(s.kafka, ref, changelog=changelog, partition=partition,
                              security=session.kafka_security)
    for note in where.notes:
        env.progress.note(note)
    return Replica(ref, where.topic, where.partition, Path(replica_dir).absolute(), system=where.system)


@app.command("follow", epilog=(
    "Seeds the replica from the latest snapshot whose checkpoint names the store's changelog position (a job that "
    "dual-commits), else from the changelog alone; then applies the changelog as it grows, recording the applied "
    "offset in OFFSET-v2 as Samza's standby stores do. Runs until SIGTERM (exit 0) or Ctrl-C (exit 130). A "
    "--replica-dir must not exist, be empty, or be a replica the follower made (its <dir>.standby.json names it): "
    "the task's active store, another store or a dir of files is refused (exit 2), never wiped; so is a dir in the "
    "store's dir whose name contains '<task>-', which Samza's restore of the task deletes. A replica an older "
    "statectl kept at <store>/Standby-<task>-<n> is moved into the standby root first (with the default dir, when "
    "no follower holds it), with a note. --to-checkpoint applies the changelog only up to the task's latest "
    "checkpointed changelog offset (read from the job's checkpoint topic as checkpoints come): what a promote needs "
    "under Samza's transactional restore (the default), where the job restores to that offset and the replica "
    "cannot be rolled back. --pre-restore (a job restoring the store from the blob store) follows the job's "
    "checkpoint topic instead of the changelog and keeps the latest snapshot restored as "
    "<store>/<task>-<checkpointId>, "
    "the checkpoint dir Samza's start renames into the store dir when it is identical to the snapshot: files of the "
    "previous one are hard-linked, only new ones downloaded, then the previous one (its own, never another) is "
    "deleted.\n\n"
    "--metrics-port serves the replica's lag, offsets, records applied, re-seeds and follower_up on "
    "http://<--metrics-addr>:<port>/metrics (statectl_standby_*; a port that cannot be listened on: exit 2, "
    "before the replica is touched).\n\n"
    "Example:\n\n  statectl standby follow --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --metrics-port 9464\n\n"
    + exit_codes_epilog(0, 1, (2, "usage, or the --metrics-port cannot be listened on"),
                        (10, "no such changelog topic or partition"),
                        (11, "another follower holds the replica, or a process holds its store"), 130)))
@state_command(*WHERE, "blobstore", "s3_endpoint")
def follow(env: Env, changelog: CHANGELOG = None, partition: PARTITION = None, replica: REPLICA = 0,
           replica_dir: REPLICA_DIR = None, layout: LAYOUT = "standby-root",
           to_checkpoint: Annotated[bool, typer.Option(
               "--to-checkpoint", help="Apply only up to the task's latest checkpointed changelog offset, as "
                                       "checkpoints come (for a promote under Samza's transactional restore).")
           ] = False,
           pre_restore: Annotated[bool, typer.Option(
               "--pre-restore", help="For a job restoring the store from the blob store: instead of the changelog, "
                                     "keep the snapshot of the task's latest checkpoint restored as "
                                     "<state-dir>/<store>/<task>-<checkpointId>, the dir Samza's start reuses "
                                     "(only new files downloaded as snapshots land). Only on a host that runs no "
                                     "active of the task (else exit 2); not with --to-checkpoint, --layout "
                                     "active-path or --replica-dir.")] = False,
           metrics_port: Annotated[Optional[int], typer.Option(
               "--metrics-port", help="Serve Prometheus metrics of the replica on this port (0: any free port, "
                                      "which a note names).", show_default=False)] = None,
           metrics_addr: Annotated[str, typer.Option(
               "--metrics-addr", help="The address --metrics-port listens on: all IPv4 interfaces by default, as "
                                      "node_exporter's :9100 (Prometheus scrapes from another host); 127.0.0.1 for "
                                      "this host only, :: for IPv6 too.")] = "0.0.0.0") -> None:
    """Keep a hot replica of a task's store current from its changelog (runs until stopped)."""
    from statectl.engine.restore import RestoreOptions, restore
    from statectl.engine.standby import follow as run_follow

    if pre_restore:
        return _follow_pre_restored(env, to_checkpoint, layout, replica_dir, metrics_port, metrics_addr)
    rep = _replica(env, changelog, partition, replica, replica_dir)
    rep, legacy = _layout(env, rep, layout, replica, replica_dir)
    session = env.session

    def seed(index_id: str, target: Path) -> None:
        restore(RestoreOptions(rep.ref, target, target_dir=target, snapshot=index_id, force=True),
                session.blobstore, session.catalog, env.progress)

    metrics = _serve_metrics(env, rep, metrics_port, metrics_addr)
    stop, interrupted = stop_on_signals()
    display = _Lag(env)
    try:
        r = run_follow(rep, env.settings.kafka, security=session.kafka_security, seed=seed, stop=stop,
                       on_status=display.update if metrics is None else metrics[0].feeding(display.update),
                       progress=env.progress,
                       argv=[sys.executable, "-m", "statectl", *sys.argv[1:]], cwd=os.getcwd(),
                       state_dir=Path(env.settings.state_dir) if env.settings.state_dir else None,
                       legacy_dir=legacy, active_path=layout == "active-path", to_checkpoint=to_checkpoint)
    finally:
        display.close()
        if metrics is not None:
            metrics[0].stopped()
            metrics[1].close()
    if env.json:  # JSON lines throughout: the result is the last line
        from statectl.cli.common import to_jsonable

        sys.stdout.write(json.dumps(to_jsonable(r)) + "\n")
        sys.stdout.flush()
    else:
        env.emit(r, f"stopped following {r.replica_dir}: applied {r.records_applied} records, now at changelog "
                    f"offset {r.applied_offset}")
    if interrupted and interrupted[0] == signal.SIGINT:
        raise typer.Exit(130)


class _Lag:
    """The follower's lag: a live line on a terminal, JSON lines with -o json, nothing otherwise."""

    def __init__(self, env: Env):
        import os

        self._json = env.json
        self._live: Any = None
        if not env.json and sys.stderr.isatty() and not env.settings.quiet and not os.environ.get("CI"):
            from rich.console import Console
            from rich.live import Live

            self._live = Live("", console=Console(stderr=True, markup=False, highlight=False), transient=True)
            self._live.start()

    def update(self, st: Any) -> None:
        if self._json:
            from statectl.cli.common import to_jsonable

            sys.stdout.write(json.dumps(to_jsonable(st)) + "\n")
            sys.stdout.flush()
        elif self._live is not None:
            lag_s = "?" if st.lag_s is None else f"{st.lag_s:.1f}s"
            self._live.update(f"{st.replica_dir}: offset {st.applied_offset}, lag {st.lag_records} records / {lag_s}, "
                              f"{st.records_applied} applied")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


@app.command("status", epilog="Lists the replicas in the standby root (<state-dir>/.statectl-standby), those kept in "
             "their task's active store dir (--layout active-path), and those an older statectl kept at "
             "<store>/Standby-<task>-<n>, where Samza's restore of the task deletes them, with the command that "
             "moves them. --metrics-file writes each replica's lag, offsets, follower_up and promotable "
             "(statectl_standby_*) for node_exporter; run it from cron.\n\n"
             "Example:\n\n  statectl standby status --state-dir /var/samza/state -o json\n\n"
             + exit_codes_epilog(0, 2, (10, "no such state dir")))
@state_command("state_dir")
def status(env: Env, metrics_file: _metrics_file("each replica's lag, offsets and follower_up") = None) -> None:
    """The replicas under the state dir: lag, follower pid, whether they are promotable."""
    from statectl.engine.standby import replicas

    if not env.settings.state_dir:
        raise UsageError("standby status needs --state-dir")
    metrics_file = _metrics_path(metrics_file)
    rows = replicas(Path(env.settings.state_dir))
    if metrics_file is not None:
        from statectl.metrics import status_families

        _write_metrics(env, metrics_file, lambda: status_families(rows))
    lines = []
    for r in rows:
        lines.append(f"{r.replica_dir}  offset {r.applied_offset}  lag {r.lag_records} records / "
                     f"{'?' if r.lag_s is None else f'{r.lag_s:.1f}s'}  "
                     f"{'following (pid ' + str(r.follower_pid) + ')' if r.following else 'not followed'}  "
                     f"{'promotable' if r.promotable else 'not promotable'}  {r.layout}")
        if r.move_command:
            lines.append(f"  old layout: Samza's restore of the task deletes it; move it: {r.move_command}")
    env.emit(rows, "\n".join(lines or ["no replicas"]))


@app.command("promote", epilog=(
    "Reads how the job's next start restores the store (its config on the coordinator stream, the task's latest "
    "checkpoint) and produces what that start keeps, or refuses with exit 14 changing nothing. Non-transactional "
    "restore from the Kafka changelog (task.transactional.state.restore.enabled=false, "
    "job.standbytasks.replication.factor > 1, or task.async.commit=true): fences the follower, catches the replica "
    "up to the changelog's end (--to-checkpoint: to the active's last checkpointed changelog offset), writes the "
    "offset files Samza expects and swaps the replica into the active store dir atomically; the old active dir is "
    "kept aside until the swap is done. Transactional restore (Samza's default): catches the replica up exactly to "
    "the offset the job restores to (the task's checkpointed changelog offset; the newest once the checkpoint is "
    "older than 0.9 x min.compaction.lag.ms) and renames it to <active dir>-<checkpoint id> of the task's latest "
    "checkpoint, leaving the active dir as it is (the start deletes it); a replica already past that offset is "
    "refused (exit 14: follow with --to-checkpoint). The blob-store restore backend: fences the 'follow "
    "--pre-restore' follower and checks its <active dir>-<checkpoint id> is the latest checkpoint's and identical to "
    "its snapshot (Samza's rule), bringing it there incrementally within --timeout when it is behind; the next start "
    "renames it into the store dir; without a pre-restored dir, exit 14. clean.on.container.start, or "
    "transactional restore without a checkpointed changelog offset: exit 14. Without the job's coordinator stream: "
    "as non-transactional, with a note that the restore mode could not be checked. JSON's restore_mode says which "
    "applied. --active-dir must not exist, be empty, or be a RocksDB store (not another store's dir in the state "
    "dir, nor a versioned adstore): else exit 2, before the follower is fenced. Without --replica-dir it takes the "
    "task's replica wherever it is: in the standby root, in the active store dir (--layout active-path: caught up "
    "there, nothing moved under non-transactional restore), or where an older statectl kept it "
    "(<store>/Standby-<task>-<n>). Then points the task's container at this host on the coordinator stream.\n\n"
    "--metrics-file counts the promote in statectl_standby_failovers_total{samza_job, samza_job_id, task, store, "
    "result}: promoted, refused (exit 14) or failed (any other exit); the file is the counter's store, read back "
    "and rewritten by each promote under a lock beside it, so give all promotes on a host the same file.\n\n"
    "Example:\n\n  statectl standby promote --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --timeout 30\n\n"
    + exit_codes_epilog(0, (1, "could not catch up within --timeout (the replica and follower are as they were), "
                               "or the disk is full"),
                        2, (10, "no replica"), (11, "the active store is held by a running process"),
                        (14, "refused: the job's next start would delete the promoted dir (nothing changed)"))))
@state_command(*WHERE, "blobstore", "s3_endpoint")
@_counting_failovers
def promote(env: Env, changelog: CHANGELOG = None, partition: PARTITION = None, replica: REPLICA = 0,
            replica_dir: REPLICA_DIR = None,
            timeout: Annotated[str, typer.Option("--timeout", help="Give up catching up after this long.")] = "60s",
            to_checkpoint: Annotated[bool, typer.Option("--to-checkpoint", help="Catch up only to the active's last "
                                                        "checkpointed changelog offset.")] = False,
            active_dir: Annotated[Optional[Path], typer.Option("--active-dir", help="The active store dir (default: "
                                                               "<state-dir>/<store>/<task>).", show_default=False)] = None,
            metrics_file: _metrics_file("the failover counters of the promotes run on this host") = None) -> None:
    """Make a replica what the job's next start restores from: fence its follower, catch up, move it in."""
    from statectl.config import parse_seconds
    from statectl.engine.standby import promote as run_promote
    from statectl.engine.standby import update_locality
    from statectl.local.layout import store_dir

    if _promote_pre_restored(env, timeout, replica_dir, active_dir, changelog, partition, replica):
        return
    rep = _replica(env, changelog, partition, replica, replica_dir)
    s = env.settings
    if replica_dir is None and s.state_dir:
        from statectl.engine.standby import locate_replica

        rep, found = locate_replica(rep, Path(s.state_dir), replica)
        if found:
            env.progress.note(found)
    if active_dir is None:
        if not s.state_dir:
            raise UsageError("standby promote needs --state-dir (or --active-dir)")
        active_dir = store_dir(Path(s.state_dir), rep.ref.store, rep.ref.task)
    security = env.session.kafka_security
    r = run_promote(rep, Path(active_dir).absolute(), s.kafka, security=security,
                    timeout_s=parse_seconds(timeout, "--timeout"), to_checkpoint=to_checkpoint,
                    on_locality=lambda: update_locality(s.kafka, rep.ref, security=security), progress=env.progress,
                    state_dir=Path(s.state_dir) if s.state_dir else None)
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, f"promoted {rep.replica_dir} to {r.promoted_dir} at changelog offset {r.caught_up_offset} "
                f"({r.records_applied} records caught up, {r.restore_mode} restore) in {r.duration_s:.2f}s")


@app.command("check", epilog="--metrics-file writes the placement violations, one series for each, and the job's "
             "active and standby task counts (statectl_standby_*), also when some are found (exit 1).\n\n"
             "Example:\n\n  statectl standby check --kafka broker:9092 --job page-views\n\n"
             + exit_codes_epilog((0, "no task shares a host with its standby"),
                                 (1, "some task's active and standby share a host"), 2, (10, "no coordinator stream")))
@state_command("kafka", "job", "job_id")
def check(env: Env, metrics_file: _metrics_file("the placement violations") = None) -> None:
    """Report any task whose active and standby containers are placed on the same host (seed 001, invariant 1)."""
    from statectl.engine.standby import check_placement
    from statectl.errors import StatectlError

    s = env.settings
    if not s.kafka or not s.job:
        raise UsageError("standby check needs --kafka and --job")
    metrics_file = _metrics_path(metrics_file)
    r = check_placement(s.kafka, s.job, s.job_id, security=env.session.kafka_security)
    if metrics_file is not None:
        from statectl.metrics import check_families

        _write_metrics(env, metrics_file, lambda: check_families(s.job, s.job_id, r))
    for note in r.notes:
        env.progress.note(note)
    lines = [f"{v.task} and {v.standby} both on {v.host} (containers {v.container}, {v.standby_container})"
             for v in r.violations] or [f"{r.tasks} tasks, {r.standbys} standbys: no task shares a host with its standby"]
    env.emit(r, "\n".join(lines))
    if r.violations:
        raise StatectlError(f"{len(r.violations)} task(s) share a host with their standby")


def _layout(env: Env, rep: Replica, layout: str, replica: int, replica_dir: Path | None) -> tuple[Replica, Path | None]:
    """The replica in the layout asked for, and the old-layout dir follow moves it from (None: none)."""
    from statectl.engine.standby import active_path_replica, legacy_standby_dir

    if layout not in ("standby-root", "active-path"):
        raise UsageError(f"--layout must be standby-root or active-path, not {layout!r}")
    if replica_dir is not None:
        if layout != "standby-root":
            raise UsageError("--layout active-path and --replica-dir exclude each other")
        return rep, None
    state = Path(env.settings.state_dir)
    if layout == "active-path":
        return active_path_replica(rep, state), None
    return rep, legacy_standby_dir(state, rep.ref.store, rep.ref.task, replica).absolute()



# -- blob-store jobs: follow --pre-restore, and its promote (engine.prerestore) ------------------------------------


def _follow_pre_restored(env: Env, to_checkpoint: bool, layout: str, replica_dir: Path | None,
                         metrics_port: int | None, metrics_addr: str) -> None:
    from statectl.engine.prerestore import follow_pre_restored, prerestore_replica

    for given, flag in ((to_checkpoint, "--to-checkpoint"), (layout != "standby-root", "--layout " + layout),
                        (replica_dir is not None, "--replica-dir")):
        if given:
            raise UsageError(f"--pre-restore and {flag} exclude each other",
                             hint="--pre-restore keeps <state-dir>/<store>/<task>-<checkpointId>, nothing else")
    s, session = env.settings, env.session
    if not s.kafka or not s.state_dir:
        raise UsageError("standby follow --pre-restore needs --kafka (the job's checkpoints) and --state-dir")
    ref = session.ref()
    state = Path(s.state_dir).absolute()
    metrics = _serve_metrics(env, prerestore_replica(state, ref), metrics_port, metrics_addr)
    stop, interrupted = stop_on_signals()
    display = _Lag(env)
    try:
        r = follow_pre_restored(ref, state, s.kafka, session.blobstore, session.catalog,
                                security=session.kafka_security, stop=stop,
                                on_status=display.update if metrics is None else metrics[0].feeding(display.update),
                                progress=env.progress, argv=[sys.executable, "-m", "statectl", *sys.argv[1:]],
                                cwd=os.getcwd())
    finally:
        display.close()
        if metrics is not None:
            metrics[0].stopped()
            metrics[1].close()
    if env.json:  # JSON lines throughout: the result is the last line
        from statectl.cli.common import to_jsonable

        sys.stdout.write(json.dumps(to_jsonable(r)) + "\n")
        sys.stdout.flush()
    else:
        env.emit(r, f"stopped pre-restoring: {r.replica_dir or 'no snapshot pre-restored'} ({r.records_applied} "
                    "files downloaded)")
    if interrupted and interrupted[0] == signal.SIGINT:
        raise typer.Exit(130)


def _promote_pre_restored(env: Env, timeout: str, replica_dir: Path | None, active_dir: Path | None,
                          changelog: str | None, partition: int | None, replica: int) -> bool:
    """promote of a store the job restores from the blob store (engine.prerestore): done, and True; False for
    any other store, and for flags the changelog promote refuses before asking a broker (it goes on as before)."""
    s, session = env.settings, env.session
    if not s.kafka or not s.state_dir or replica_dir is not None or active_dir is not None:
        return False
    if replica < 0 or (partition is not None and partition < 0) or (changelog is not None and not changelog.strip()):
        return False
    from statectl.config import parse_seconds
    from statectl.engine.prerestore import promote_pre_restored, restores_from_blob_store
    from statectl.engine.standby import update_locality

    ref = session.ref()
    security = session.kafka_security
    seconds = parse_seconds(timeout, "--timeout")
    if not restores_from_blob_store(s.kafka, ref, security=security):
        return False
    r = promote_pre_restored(ref, Path(s.state_dir).absolute(), s.kafka, session.blobstore, session.catalog,
                             security=security, timeout_s=seconds, progress=env.progress,
                             on_locality=lambda: update_locality(s.kafka, ref, security=security))
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, f"promoted the pre-restored {r.promoted_dir} (checkpoint {r.checkpoint_id}, blob-store restore: the "
                f"job's next start renames it into the store dir) in {r.duration_s:.2f}s")
    return True
