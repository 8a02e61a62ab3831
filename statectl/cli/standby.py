"""statectl standby follow | status | promote | check"""

from __future__ import annotations

import dataclasses
import functools
import json
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import Env, state_command, stop_on_signals
from statectl.errors import UsageError

if TYPE_CHECKING:
    from statectl.engine.standby import Replica

app = typer.Typer(help="Hot replicas of a store kept current from its changelog, promoted in seconds.",
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
                        "mapping on the coordinator stream, or with --zookeeper the task's changelog partition in "
                        "the standalone job's model; only without either, N of a task named 'Partition N', with "
                        "a warning).", show_default=False)]
REPLICA = Annotated[int, typer.Option("--replica", help="Replica number n of the standby task Standby-<task>-<n>.")]
REPLICA_DIR = Annotated[Optional[Path], typer.Option(
    "--replica-dir", help="The replica's dir (default: <standby-root>/<n>/<store>/<task>, outside the state dir, "
                          "which Samza clears; its lock and status files beside it).", show_default=False)]
CONTAINER = Annotated[Optional[str], typer.Option(
    "--container", help="A container of the job (its id in the job model: an active container such as 0, or its "
                        "standby container <id>-<n>): every store with a changelog of every task the coordinator "
                        "stream assigns it (--store: only that store); excludes --task, --changelog, --partition and "
                        "--replica-dir.", show_default=False)]
LAYOUT = Annotated[Literal["standby-root", "active-path"], typer.Option(
    "--layout", help="standby-root: the replica in <standby-root>/<n>/<store>/<task>. active-path: in the task's "
                     "active store dir <state-dir>/<store>/<task>, as Samza's own standby keeps it, so that promote "
                     "moves nothing; only on a host that runs no active of the task (its store's LOCK free, the "
                     "job's locality elsewhere), else exit 2; and where no container of the job the locality places "
                     "here clears the state dir at its start (a standby container, one without checkpoints), else "
                     "exit 14.")]


def _metrics_file(what: str) -> Any:
    return Annotated[Optional[Path], typer.Option(
        "--metrics-file", help=f"Write {what} to this file in Prometheus text format, for node_exporter's textfile "
                               "collector (a *.prom file in its --collector.textfile.directory), replaced atomically. "
                               "A file that cannot be written is a warning; the exit code stays the command's.",
        show_default=False)]


# -- metrics (statectl.metrics) ------------------------------------------------------------------------------


def _serve_metrics(env: Env, reps: list[Replica], port: int | None, addr: str) -> tuple[Any, Any] | None:
    """follow --metrics-port: (the followers' ContainerMetrics, a series per replica; its MetricsServer)
    serving, or None without the flag; UsageError (exit 2) when the port cannot be listened on."""
    if port is None:
        return None
    from statectl.metrics import ContainerMetrics, replica_labels, serve

    collector = ContainerMetrics({str(r.replica_dir): replica_labels(
        r.ref.job, r.ref.job_id, r.ref.task, r.ref.store, r.changelog, r.partition, r.replica_dir) for r in reps})
    server = serve(collector, port, addr)
    env.progress.note(f"serving metrics on {server.url}")
    return collector, server


def _following(env: Env, metrics: tuple[Any, Any] | None, run: Any) -> tuple[Any, list[int]]:
    """Run ``run(stop, on_status)`` (a follower, until SIGTERM or Ctrl-C) with its lag shown and its metrics
    fed; return its result and the signals received."""
    stop, interrupted = stop_on_signals()
    display = _Lag(env)
    try:
        r = run(stop, display.update if metrics is None else metrics[0].feeding(display.update))
    finally:
        display.close()
        if metrics is not None:
            metrics[0].stopped()
            metrics[1].close()
    return r, interrupted


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


def _replica(env: Env, changelog: str | None, partition: int | None, replica: int, replica_dir: Path | None,
             *, need_dir: bool = True) -> Replica:
    from statectl.engine.standby import resolve_changelog, standby_dir

    s, session = env.settings, env.session
    if not s.kafka:
        raise UsageError("standby needs --kafka: the replica follows the store's changelog there")
    ref = session.ref()
    if replica_dir is None:
        if not s.state_dir:
            raise UsageError("standby needs --state-dir (or --replica-dir)")
        replica_dir = standby_dir(Path(s.state_dir), ref.store, ref.task, replica, _root(env))
    where = resolve_changelog(s.kafka, ref, changelog=changelog, partition=partition,
                              security=session.kafka_security, zookeeper=s.zookeeper)
    for note in where.notes:
        env.progress.note(note)
    return where.replica(ref, Path(replica_dir).absolute())


def _root(env: Env) -> Path | None:
    """--standby-root as given (None: the default, beside the state dir)."""
    root = env.settings.standby_root
    return Path(root).absolute() if root else None


def _standby_root(env: Env) -> Path | None:
    """The standby root in effect (local.layout.standby_root), None without a state dir."""
    from statectl.local.layout import standby_root

    s = env.settings
    return standby_root(Path(s.state_dir), _root(env)) if s.state_dir else None


@app.command("follow", epilog=(
    "Seeds the replica from the latest snapshot whose checkpoint names the store's changelog position (a job that "
    "dual-commits), else from the changelog alone; then applies the changelog as it grows, recording the applied "
    "offset in OFFSET-v2 as Samza's standby stores do. Runs until SIGTERM (exit 0) or Ctrl-C (exit 130). The "
    "replica is kept in the standby root (--standby-root, default <state-dir>.statectl-standby beside the state "
    "dir), never in the state dir, which a Samza container starting without a checkpoint clears whole; the root "
    "must be on the state dir's filesystem (else exit 2), so that promote moves a replica in with one rename. The "
    "changelog is read on its system's brokers (systems.<system>.consumer.bootstrap.servers in the job's config, "
    "with that system's security), the job's checkpoints and coordinator stream on --kafka. A "
    "--replica-dir must not exist, be empty, or be a replica the follower made (its <dir>.standby.json names it): "
    "the task's active store, another store or a dir of files is refused (exit 2), never wiped; so is a dir in the "
    "store's dir whose name contains '<task>-', which Samza's restore of the task deletes. A replica an older "
    "statectl kept in the state dir (<state-dir>/.statectl-standby/<n>/<store>/<task>, or "
    "<store>/Standby-<task>-<n>) is moved into the standby root first (with the default dir, when no follower holds "
    "it), with a note. --to-checkpoint applies the changelog only up to the task's checkpointed changelog offset in "
    "the checkpoint the job's start reads (task.checkpoint.read.versions; read from the job's checkpoint topic as "
    "checkpoints come): what a promote needs under Samza's transactional restore (the default), where the job "
    "restores to that offset and the replica cannot be rolled back. --pre-restore (a job restoring the store from "
    "the blob store) follows the job's checkpoint topic instead of the changelog and keeps the latest snapshot "
    "restored as <standby-root>/prerestore/<store>/<task>-<checkpointId>, which promote renames to "
    "<state-dir>/<store>/<task>-<checkpointId>, the checkpoint dir Samza's start renames into the store dir when it "
    "is identical to the snapshot: files of the previous one are hard-linked, only new ones downloaded, then the "
    "previous one (its own, never another) is deleted.\n\n"
    "--metrics-port serves the replica's lag, offsets, records applied, re-seeds and follower_up on "
    "http://<--metrics-addr>:<port>/metrics (statectl_standby_*; a port that cannot be listened on: exit 2, "
    "before the replica is touched).\n\n"
    "Example:\n\n  statectl standby follow --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --metrics-port 9464\n\n"
    + exit_codes_epilog(0, 1, (2, "usage, or the --metrics-port cannot be listened on"),
                        (10, "no such changelog topic or partition, or no job model in ZooKeeper"),
                        (11, "another follower holds the replica, or a process holds its store"),
                        (14, "refused: --layout active-path where a container of the job starting on this host "
                             "clears the state dir"), 130)))
@state_command(*WHERE, "standby_root", "zookeeper", "blobstore", "s3_endpoint")
def follow(env: Env, changelog: CHANGELOG = None, partition: PARTITION = None, replica: REPLICA = 0,
           replica_dir: REPLICA_DIR = None, container: CONTAINER = None, layout: LAYOUT = "standby-root",
           to_checkpoint: Annotated[bool, typer.Option(
               "--to-checkpoint", help="Apply only up to the task's latest checkpointed changelog offset, as "
                                       "checkpoints come (for a promote under Samza's transactional restore).")
           ] = False,
           pre_restore: Annotated[bool, typer.Option(
               "--pre-restore", help="For a job restoring the store from the blob store: instead of the changelog, "
                                     "keep the snapshot of the task's latest checkpoint restored in the standby "
                                     "root, which promote renames to <state-dir>/<store>/<task>-<checkpointId>, "
                                     "the dir Samza's start reuses (only new files downloaded as snapshots land). "
                                     "Only on a host that runs no "
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

    if pre_restore and container is not None:
        _no_single_task_flags(env, "follow", changelog, partition, replica_dir)
        if to_checkpoint or layout != "standby-root":
            raise UsageError("--pre-restore keeps the latest snapshot restored, nothing else: --to-checkpoint and "
                             "--layout exclude it")
        return _follow_container(env, container, replica, layout, False, metrics_port, metrics_addr, None,
                                 pre_restore=True)
    if pre_restore:
        return _follow_pre_restored(env, to_checkpoint, layout, replica_dir, metrics_port, metrics_addr)
    session = env.session

    def seeder(rep: Replica) -> Any:
        def seed(index_id: str, target: Path) -> None:
            restore(RestoreOptions(rep.ref, target, target_dir=target, snapshot=index_id, force=True),
                    session.blobstore, session.catalog, env.progress)

        return seed

    if container is not None:
        _no_single_task_flags(env, "follow", changelog, partition, replica_dir)
        return _follow_container(env, container, replica, layout, to_checkpoint, metrics_port, metrics_addr, seeder)
    rep = _replica(env, changelog, partition, replica, replica_dir)
    rep, legacy = _layout(env, rep, layout, replica, replica_dir)
    seed = seeder(rep)

    settings = _follower_settings(env, changelog=f"{rep.system}.{rep.changelog}", partition=rep.partition,
                                  replica=replica, replica_dir=replica_dir, layout=layout, to_checkpoint=to_checkpoint,
                                  metrics_port=metrics_port, metrics_addr=metrics_addr)
    metrics = _serve_metrics(env, [rep], metrics_port, metrics_addr)
    r, interrupted = _following(env, metrics, lambda stop, on_status: run_follow(
        rep, env.settings.kafka, security=session.kafka_security, seed=seed, stop=stop, on_status=on_status,
        progress=env.progress, settings=settings,
        state_dir=Path(env.settings.state_dir) if env.settings.state_dir else None,
        legacy_dir=legacy[0] if legacy else None, legacy_files=legacy[1] if legacy else None,
        active_path=layout == "active-path", to_checkpoint=to_checkpoint,
        root=_standby_root(env) if replica_dir is None else None))
    _followed(env, r, f"stopped following {r.replica_dir}: applied {r.records_applied} records, now at changelog "
                      f"offset {r.applied_offset}", interrupted)


def _follower_settings(env: Env, *, container: str | None = None, changelog: str | None = None,
                       partition: int | None = None, replica: int = 0, replica_dir: Path | None = None,
                       layout: str = "standby-root", to_checkpoint: bool = False, pre_restore: bool = False,
                       metrics_port: int | None = None, metrics_addr: str | None = None) -> Any:
    """What this follower runs with, for its status file (engine.follower.FollowerSettings): the effective
    settings, wherever each came from (flags, STATECTL_*, a profile), and its options; never a secret (a
    URL's password is left out: the restarted follower reads secrets from its config file or environment)."""
    from statectl.config import KEYS
    from statectl.engine.follower import ENV_SETTINGS, FollowerSettings

    s = env.settings
    others = {name: str(KEYS[name].show(getattr(s, name))) for name in ENV_SETTINGS
              if getattr(s, name) is not None and s.source(name) != "default"}
    return FollowerSettings(
        s.kafka, s.job, s.job_id, state_dir=str(Path(s.state_dir).absolute()) if s.state_dir else None,
        standby_root=str(_root(env)) if _root(env) is not None else None, zookeeper=s.zookeeper,
        task=None if container is not None else s.task,
        store=getattr(env.flags, "store", None) if container is not None else s.store, container=container,
        changelog=changelog, partition=partition, replica=replica,
        replica_dir=str(Path(replica_dir).absolute()) if replica_dir is not None else None, layout=layout,
        to_checkpoint=to_checkpoint, pre_restore=pre_restore, blobstore=_without_password(s.blobstore),
        s3_endpoint=_without_password(s.s3_endpoint), metrics_port=metrics_port,
        metrics_addr=metrics_addr if metrics_port is not None else None,
        config_file=str(Path(s.config_file).absolute()) if s.config_file else None,
        profile=s.profile if s.config_file and s.profile != "default" else None, settings=others)


def _without_password(url: str | None) -> str | None:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url) if url else None
    if parts is None or parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}@{parts.netloc.rsplit('@', 1)[1]}"))


def _followed(env: Env, result: Any, text: str, interrupted: list[int]) -> None:
    if env.json:  # JSON lines throughout: the result is the last line
        from statectl.cli.common import to_jsonable

        sys.stdout.write(json.dumps(to_jsonable(result)) + "\n")
        sys.stdout.flush()
    else:
        env.emit(result, text)
    if interrupted and interrupted[0] == signal.SIGINT:
        raise typer.Exit(130)


def _no_single_task_flags(env: Env, command: str, changelog: str | None, partition: int | None,
                          replica_dir: Path | None) -> None:
    given = [name for name, value in (("task", env.flags.task), ("changelog", changelog),
                                      ("partition", partition), ("replica-dir", replica_dir)) if value is not None]
    if given:
        raise UsageError(f"{command} --container takes every task of the container: --{given[0]} excludes it",
                         hint="leave it out, or name one task with --task instead of --container")
    s = env.settings
    if not s.kafka or not s.job or not s.state_dir:
        raise UsageError(f"{command} --container needs --kafka, --job and --state-dir")


def _container(env: Env, container: str, replica: int, *, one_store: bool = False, mode: str = "changelog") -> Any:
    """The container's standby (engine.failover.resolve_container, ``mode``); ``one_store``: --store names the
    only store followed (follow); else --store is refused (a container moves whole)."""
    from statectl.engine.failover import resolve_container

    s = env.settings
    store = getattr(env.flags, "store", None)
    if store and not one_store:
        raise UsageError("a container moves whole: --store excludes --container here",
                         hint="leave --store out (every store of the container is promoted)")
    sc = resolve_container(s.kafka, s.job, s.job_id, container, replica=replica, stores=[store] if store else None,
                           mode=mode, zookeeper=s.zookeeper, state_dir=Path(s.state_dir),
                           security=env.session.kafka_security, root=_root(env))
    for note in sc.notes:
        env.progress.note(note)
    return sc


def _follow_container(env: Env, container: str, replica: int, layout: str, to_checkpoint: bool,
                      metrics_port: int | None, metrics_addr: str, seeder: Any, *, pre_restore: bool = False) -> None:
    from statectl.engine.failover import PRE_RESTORED, follow_container

    sc = _container(env, container, replica, one_store=True, mode=PRE_RESTORED if pre_restore else "changelog")
    legacy: dict[Path, tuple[Path, Path | None]] = {}
    if not pre_restore:
        reps = []
        for rep in sc.replicas:
            moved, old = _layout(env, rep, layout, sc.replica, None)
            reps.append(moved)
            if old is not None:
                legacy[moved.replica_dir] = old
        sc = dataclasses.replace(sc, replicas=tuple(reps))
    env.progress.note(f"following container {sc.container} as {sc.standby_container}: {len(sc.tasks)} task(s) x "
                      f"{len(sc.stores)} store(s) ({', '.join(sc.stores)})")
    metrics = _serve_metrics(env, list(sc.replicas), metrics_port, metrics_addr)
    s = env.settings
    r, interrupted = _following(env, metrics, lambda stop, on_status: follow_container(
        sc, s.kafka, security=env.session.kafka_security, seed_of=seeder, stop=stop, on_status=on_status,
        progress=env.progress, state_dir=Path(s.state_dir).absolute(), legacy_dirs=legacy,
        settings=_follower_settings(env, container=container, replica=replica, layout=layout,
                                    to_checkpoint=to_checkpoint, pre_restore=pre_restore, metrics_port=metrics_port,
                                    metrics_addr=metrics_addr), active_path=layout == "active-path",
        to_checkpoint=to_checkpoint, pre_restore=pre_restore,
        blobstore=env.session.blobstore if pre_restore else None,
        catalog=env.session.catalog if pre_restore else None))
    _followed(env, r, f"stopped following container {r.container} ({len(r.replicas)} replicas): applied "
                      f"{r.records_applied} records", interrupted)


class _Lag:
    """The follower's lag: a live line on a terminal, JSON lines with -o json, nothing otherwise."""

    def __init__(self, env: Env):
        import os

        self._json = env.json
        self._live: Any = None
        self._lines: dict[str, str] = {}  # replica dir -> its line (a container follower has many)
        self._guard = threading.Lock()  # a container's followers report from their threads
        if not env.json and sys.stderr.isatty() and not env.settings.quiet and not os.environ.get("CI"):
            from rich.console import Console
            from rich.live import Live

            self._live = Live("", console=Console(stderr=True, markup=False, highlight=False), transient=True)
            self._live.start()

    def update(self, st: Any) -> None:
        with self._guard:
            self._show(st)

    def _show(self, st: Any) -> None:
        if self._json:
            from statectl.cli.common import to_jsonable

            sys.stdout.write(json.dumps(to_jsonable(st)) + "\n")
            sys.stdout.flush()
        elif self._live is not None:
            lag_s = "?" if st.lag_s is None else f"{st.lag_s:.1f}s"
            self._lines[st.replica_dir] = (f"{st.replica_dir}: offset {st.applied_offset}, lag {st.lag_records} "
                                           f"records / {lag_s}, {st.records_applied} applied")
            self._live.update("\n".join(self._lines[d] for d in sorted(self._lines)))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


@app.command("status", epilog="Lists the replicas in the standby root (--standby-root, default "
             "<state-dir>.statectl-standby), those kept in their task's active store dir (--layout active-path), "
             "the pre-restores (--pre-restore), and those an older statectl kept in the state dir "
             "(<state-dir>/.statectl-standby, which a Samza container starting without a checkpoint clears, or "
             "<store>/Standby-<task>-<n>, which the task's restore deletes), layout old, with the command that "
             "moves them. --metrics-file writes each replica's lag, offsets, follower_up and promotable "
             "(statectl_standby_*) for node_exporter; run it from cron.\n\n"
             "Example:\n\n  statectl standby status --state-dir /var/samza/state -o json\n\n"
             + exit_codes_epilog(0, 2, (10, "no such state dir")))
@state_command("state_dir", "standby_root")
def status(env: Env, metrics_file: _metrics_file("each replica's lag, offsets and follower_up") = None) -> None:
    """The replicas under the state dir: lag, follower pid, whether they are promotable."""
    from statectl.engine.standby import replicas

    if not env.settings.state_dir:
        raise UsageError("standby status needs --state-dir")
    metrics_file = _metrics_path(metrics_file)
    rows = replicas(Path(env.settings.state_dir), _root(env))
    if metrics_file is not None:
        from statectl.metrics import status_families

        _write_metrics(env, metrics_file, lambda: status_families(rows))
    lines = []
    for r in rows:
        lines.append(f"{r.replica_dir}  offset {r.applied_offset}  lag {r.lag_records} records / "
                     f"{'?' if r.lag_s is None else f'{r.lag_s:.1f}s'}  "
                     f"{'following (pid ' + str(r.follower_pid) + ')' if r.following else 'not followed'}  "
                     f"{'promotable' if r.promotable else 'not promotable'}  {r.layout}"
                     + (f"  container {r.container}" if r.container is not None else ""))
        if r.move_command:
            lines.append(f"  old layout: in the state dir, where Samza deletes it; move it: {r.move_command}")
    env.emit(rows, "\n".join(lines or ["no replicas"]))


@app.command("promote", epilog=(
    "Reads how the job's next start restores the store (its config on the coordinator stream, the checkpoint that "
    "start reads for the task: the first of task.checkpoint.read.versions found, default 1, as Samza's "
    "KafkaCheckpointManager picks it) and produces what that start keeps, or refuses with exit 14 changing "
    "nothing. Non-transactional "
    "restore from the Kafka changelog (task.transactional.state.restore.enabled=false, "
    "job.standbytasks.replication.factor > 1, or task.async.commit=true): fences the follower, catches the replica "
    "up to the changelog's end (--to-checkpoint: to the active's last checkpointed changelog offset), writes the "
    "offset files Samza expects and swaps the replica into the active store dir atomically; the old active dir is "
    "kept aside until the swap is done. Transactional restore (Samza's default): catches the replica up exactly to "
    "the offset the job restores to (the task's checkpointed changelog offset; the newest once the checkpoint is "
    "older than 0.9 x min.compaction.lag.ms) and renames it to <active dir>-<checkpoint id> of that "
    "checkpoint, leaving the active dir as it is (the start deletes it); a replica already past that offset is "
    "refused (exit 14: follow with --to-checkpoint). The blob-store restore backend: fences the 'follow "
    "--pre-restore' follower and checks its pre-restored dir is that checkpoint's snapshot and identical to it "
    "(Samza's rule), bringing it there incrementally within --timeout when it is behind, and renames it to <active "
    "dir>-<checkpoint id>; the next start renames it into the store dir; without a pre-restored dir, exit 14. "
    "clean.on.container.start, or "
    "transactional restore without a checkpointed changelog offset: exit 14. Without the job's config (no "
    "coordinator stream, or no config on it) nothing says the start keeps the dir: exit 14, unless "
    "--non-transactional-restore says the job restores the store non-transactionally (restore_mode unchecked). "
    "JSON's restore_mode says which applied. A replica whose changelog was deleted and recreated since its follower "
    "recorded the topic id is refused (exit 1, nothing changed): 'standby follow' re-seeds it. One promote (or "
    "failover) of a replica at a time: another exits 11 naming it, and stops nothing. A promote that fails after "
    "stopping the follower starts it again from the settings it recorded (never a command line from a file), "
    "and its error says whether it came back, or the command that starts it. --active-dir must not exist, be "
    "empty, or be a RocksDB store (not another store's dir in the state "
    "dir, nor a versioned adstore): else exit 2, before the follower is fenced. Without --replica-dir it takes the "
    "task's replica wherever it is: in the standby root, in the active store dir (--layout active-path: caught up "
    "there, nothing moved under non-transactional restore), or where an older statectl kept it "
    "(<state-dir>/.statectl-standby, <store>/Standby-<task>-<n>). The changelog is read on its system's brokers "
    "(systems.<system>.consumer.bootstrap.servers in the job's config). Then, on every promote, points the task's "
    "container at this host on the job's "
    "coordinator stream (its set-container-host-assignment: where the job runs the task next), except when the "
    "stream assigns the task no container or that container runs other tasks too (a note says so: a container "
    "moves whole, promote --container moves it); --dry-run shows which.\n\n"
    "--metrics-file counts the promote in statectl_standby_failovers_total{samza_job, samza_job_id, task, store, "
    "result}: promoted, refused (exit 14) or failed (any other exit); the file is the counter's store, read back "
    "and rewritten by each promote under a lock beside it, so give all promotes on a host the same file.\n\n"
    "Examples:\n\n  statectl standby promote --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --timeout 30\n\n"
    "  statectl standby promote --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --dry-run\n\n"
    + exit_codes_epilog(0, (1, "could not catch up within --timeout (the replica and follower are as they were), "
                               "the changelog was recreated since the replica was followed, or the disk is full"),
                        2, (10, "no replica"),
                        (11, "the active store is held by a running process, another promote of the replica runs, or "
                             "its follower runs where this host cannot stop it"),
                        (14, "refused: the job's next start would delete the promoted dir, or its restore mode is "
                             "not known (nothing changed)"))))
@state_command(*WHERE, "standby_root", "zookeeper", "blobstore", "s3_endpoint")
@_counting_failovers
def promote(env: Env, changelog: CHANGELOG = None, partition: PARTITION = None, replica: REPLICA = 0,
            replica_dir: REPLICA_DIR = None, container: CONTAINER = None,
            timeout: Annotated[str, typer.Option("--timeout", help="Give up catching up after this long.")] = "60s",
            to_checkpoint: Annotated[bool, typer.Option("--to-checkpoint", help="Catch up only to the active's last "
                                                        "checkpointed changelog offset.")] = False,
            active_dir: Annotated[Optional[Path], typer.Option("--active-dir", help="The active store dir (default: "
                                                               "<state-dir>/<store>/<task>).", show_default=False)] = None,
            metrics_file: _metrics_file("the failover counters of the promotes run on this host") = None,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="Make the checks and print the plan: the "
                                                  "follower stopped, the offsets caught up to, where the replica goes "
                                                  "and the container placement written; change nothing. Exits as "
                                                  "the promote would.")] = False,
            non_transactional_restore: Annotated[bool, typer.Option(
                "--non-transactional-restore", help="The job restores the store non-transactionally "
                                                    "(task.transactional.state.restore.enabled=false, standby tasks or "
                                                    "async commit): needed only when its config cannot be read (no "
                                                    "coordinator stream, or no config on it), where promote otherwise "
                                                    "refuses (exit 14); with a config that says another restore, exit "
                                                    "2.")] = False,
            ) -> None:
    """Make a replica what the job's next start restores from: fence its follower, catch up, move it in; then
    point the task's container at this host on the job's coordinator stream (its placement), unless that
    container runs other tasks too."""
    from statectl.config import parse_seconds
    from statectl.engine.standby import plan_promote, update_locality
    from statectl.engine.standby import promote as run_promote
    from statectl.local.layout import store_dir

    seconds = parse_seconds(timeout, "--timeout")  # dry run or not: a bad value is the same usage error
    if container is not None:
        _no_single_task_flags(env, "promote", changelog, partition, replica_dir)
        if active_dir is not None:
            raise UsageError("promote --container puts each store in its task's store dir: --active-dir excludes it")
        if non_transactional_restore:
            raise UsageError("--non-transactional-restore excludes --container: a container's promote reads each "
                             "store's restore from the job's config")
        return _run_failover(env, container, replica, None, dry_run, timeout, to_checkpoint,
                             _metrics_path(metrics_file), locality=False)
    if _restores_from_blob_store(env, replica_dir, active_dir, changelog, partition, replica):
        from statectl.engine.prerestore import plan_promote_pre_restored

        if non_transactional_restore:
            raise UsageError("--non-transactional-restore: the job's config restores the store from the blob store",
                             hint="leave --non-transactional-restore out: the job's config decides")
        if not dry_run:
            return _promote_pre_restored(env, seconds)

        session = env.session
        p = plan_promote_pre_restored(session.ref(), Path(env.settings.state_dir).absolute(), env.settings.kafka,
                                      session.blobstore, security=session.kafka_security, root=_root(env))
        for note in p.notes:
            env.progress.note(note)
        env.emit(p, _promote_plan_text(p))
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
    if dry_run:
        p = plan_promote(rep, Path(active_dir).absolute(), s.kafka, security=security, to_checkpoint=to_checkpoint,
                         state_dir=Path(s.state_dir) if s.state_dir else None,
                         assume_non_transactional=non_transactional_restore)
        for note in p.notes:
            env.progress.note(note)
        env.emit(p, _promote_plan_text(p))
        return
    r = run_promote(rep, Path(active_dir).absolute(), s.kafka, security=security, timeout_s=seconds,
                    to_checkpoint=to_checkpoint,
                    on_locality=lambda: update_locality(s.kafka, rep.ref, security=security), progress=env.progress,
                    state_dir=Path(s.state_dir) if s.state_dir else None,
                    assume_non_transactional=non_transactional_restore)
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, f"promoted {rep.replica_dir} to {r.promoted_dir} at changelog offset {r.caught_up_offset} "
                f"({r.records_applied} records caught up, {r.restore_mode} restore) in {r.duration_s:.2f}s"
                + ("; pointed its container at this host on the coordinator stream" if r.locality_updated else ""))


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


def _restores_from_blob_store(env: Env, replica_dir: Path | None, active_dir: Path | None, changelog: str | None,
                              partition: int | None, replica: int) -> bool:
    """Whether promote would take the blob-store path (_promote_pre_restored's test, without promoting)."""
    s, session = env.settings, env.session
    if not s.kafka or not s.state_dir or replica_dir is not None or active_dir is not None:
        return False
    if replica < 0 or (partition is not None and partition < 0) or (changelog is not None and not changelog.strip()):
        return False
    from statectl.engine.prerestore import restores_from_blob_store

    return restores_from_blob_store(s.kafka, session.ref(), security=session.kafka_security)


@app.command("failover", epilog=(
    "The failover of a whole container onto the host of its standby container, run on that host, step by "
    "step: find-standby-host (the standby container's set-container-host-assignment), delete-standby-locality "
    "(its mapping deleted, as Samza's metadata store deletes: a null value; the job then places the standby "
    "anywhere else), point-active-locality (the active container's mapping set to the standby host, as "
    "LocalityManager writes it: the job starts the active there), stop-standby (the container's follower is "
    "stopped: nothing is promoted while it runs), promote (every store of every task, each where the job's next "
    "start keeps it, as 'standby promote' does), report. Before anything is written every store is checked: its "
    "replica is here, the job's next start keeps what promote makes (else exit 14) and no process holds the active "
    "state (else exit 11). A store the job restores from the blob store (its restore.factories) goes over on its "
    "pre-restore (follow --container <id> --pre-restore, with --blobstore): none kept here is exit 14, before "
    "anything is written. Each step is journaled in <standby-root>/failover/: a failover "
    "interrupted at any step is finished by running the same command again; steps done before say "
    "done-earlier. Another promote or failover of one of its replicas at the same time exits 11 naming it, "
    "stopping nothing; a changelog deleted and recreated since a replica's follower recorded its topic id is exit 1, "
    "before anything is written. --dry-run makes the same checks, the standby host's too, exits as the failover "
    "would, and shows each step and the messages it would write, changing nothing. --metrics-file counts each "
    "store's promote in statectl_standby_failovers_total.\n\n"
    "Example:\n\n  statectl standby failover --kafka broker:9092 --job page-views --container 0 "
    "--state-dir /var/samza/state --dry-run\n\n"
    + exit_codes_epilog(0, (1, "a store could not be caught up within --timeout, or the disk is full (the stores "
                               "promoted stay promoted: run again to finish); a changelog recreated since its replica "
                               "was followed (nothing written)"),
                        (2, "usage, or this host is not the standby container's host"),
                        (10, "no coordinator stream, no such container, no replica here, or no locality mapping of "
                             "the standby container (pass --host)"),
                        (11, "a process holds a task's active state, another promote or failover of a replica runs, "
                             "or a follower runs where this host cannot stop it"),
                        (14, "refused: the job's next start would delete a promoted dir (nothing changed)"))))
@state_command("kafka", "job", "job_id", "state_dir", "standby_root", "blobstore", "s3_endpoint")
def failover(env: Env,
             container: Annotated[Optional[str], typer.Option(
                 "--container", help="The active container to fail over (its id in the job model, such as 0; "
                                     "required).", show_default=False)] = None,
             replica: REPLICA = 0,
             host: Annotated[Optional[str], typer.Option(
                 "--host", help="This host's name as the job's locality names it (default: its hostname); also the "
                                "standby host when the standby container has no locality mapping.",
                 show_default=False)] = None,
             dry_run: Annotated[bool, typer.Option("--dry-run", help="Check everything and show each step; change "
                                                   "nothing.")] = False,
             timeout: Annotated[str, typer.Option("--timeout", help="Give up catching a store up after this long.")
                                ] = "60s",
             to_checkpoint: Annotated[bool, typer.Option("--to-checkpoint", help="Catch each store up only to its "
                                                         "task's last checkpointed changelog offset.")] = False,
             metrics_file: _metrics_file("the failover counters of the promotes run on this host") = None) -> None:
    """Fail a whole container over onto its standby host: locality, stop the standby, promote every store."""
    s = env.settings
    if container is None:
        raise UsageError("standby failover needs --container", hint="pass the active container's id, such as 0")
    if not s.kafka or not s.job or not s.state_dir:
        raise UsageError("standby failover needs --kafka, --job and --state-dir")
    _run_failover(env, container, replica, host, dry_run, timeout, to_checkpoint, _metrics_path(metrics_file),
                  locality=True)


def _run_failover(env: Env, container: str, replica: int, host: str | None, dry_run: bool, timeout: str,
                  to_checkpoint: bool, metrics_file: Path | None, *, locality: bool) -> None:
    from statectl.config import parse_seconds
    from statectl.engine.failover import failover as run_failover

    from statectl.engine.failover import ALL, blob_restored_stores

    seconds = parse_seconds(timeout, "--timeout")
    sc = _container(env, container, replica, mode=ALL)
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


@app.command("check", epilog="Also lists the standby containers with no host mapping (none, or Samza's empty "
             "ANY_HOST): after a failover Samza deletes the standby's mapping and asks for any host, so they are "
             "reported, not an error. For each of them and each standby container in violation (or sharing a host "
             "with another standby replica of the same active, a note) it proposes the hosts it can be placed on "
             "keeping invariant 1 as Samza's StandbyContainerManager checks it: not the host of its active "
             "container, nor of another standby replica of the same active; from the --host candidates, else every "
             "host the job's locality names; sorted. JSON: unmapped (container, active_container, tasks) and "
             "proposals (standby_container, active_container, reason, candidate_hosts: empty when none fits).\n\n"
             "--metrics-file writes the placement violations, one series for each, the job's active and standby "
             "task counts and its unmapped standby containers (statectl_standby_*), also when violations are found "
             "(exit 1).\n\n"
             "Example:\n\n  statectl standby check --kafka broker:9092 --job page-views --host node-7 --host node-8\n\n"
             + exit_codes_epilog((0, "no task shares a host with its standby (unmapped standby containers too)"),
                                 (1, "some task's active and standby share a host"), 2, (10, "no coordinator stream")))
@state_command("kafka", "job", "job_id")
def check(env: Env, metrics_file: _metrics_file("the placement violations and unmapped standby containers") = None,
          host: Annotated[Optional[list[str]], typer.Option(
              "--host", help="A candidate host for the standby containers' proposals (repeatable; default: every "
                             "host the job's locality names).", show_default=False)] = None) -> None:
    """Report any task whose active and standby containers are placed on the same host (they must never be),
    the standby containers with no host, and where they can be placed."""
    from statectl.engine.standby import check_placement
    from statectl.errors import StatectlError

    s = env.settings
    if not s.kafka or not s.job:
        raise UsageError("standby check needs --kafka and --job")
    metrics_file = _metrics_path(metrics_file)
    r = check_placement(s.kafka, s.job, s.job_id, hosts=host or None, security=env.session.kafka_security)
    if metrics_file is not None:
        from statectl.metrics import check_families

        _write_metrics(env, metrics_file, lambda: check_families(s.job, s.job_id, r))
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


def _layout(env: Env, rep: Replica, layout: str, replica: int,
            replica_dir: Path | None) -> tuple[Replica, tuple[Path, Path | None] | None]:
    """The replica in the layout asked for, and where an older statectl kept it, which follow moves it from
    (engine.standby.old_replica; None: nowhere)."""
    from statectl.engine.standby import active_path_replica, old_replica

    if layout not in ("standby-root", "active-path"):
        raise UsageError(f"--layout must be standby-root or active-path, not {layout!r}")
    if replica_dir is not None:
        if layout != "standby-root":
            raise UsageError("--layout active-path and --replica-dir exclude each other")
        return rep, None
    state = Path(env.settings.state_dir)
    if layout == "active-path":
        rep = active_path_replica(rep, state)
    return rep, old_replica(rep, state, replica)



# -- blob-store jobs: follow --pre-restore, and its promote (engine.prerestore) ------------------------------------


def _follow_pre_restored(env: Env, to_checkpoint: bool, layout: str, replica_dir: Path | None,
                         metrics_port: int | None, metrics_addr: str) -> None:
    from statectl.engine.prerestore import checkpoint_log_topic, follow_pre_restored, prerestore_replica

    for given, flag in ((to_checkpoint, "--to-checkpoint"), (layout != "standby-root", "--layout " + layout),
                        (replica_dir is not None, "--replica-dir")):
        if given:
            raise UsageError(f"--pre-restore and {flag} exclude each other",
                             hint="--pre-restore keeps <standby-root>/prerestore/<store>/<task>-<checkpointId>, "
                                  "nothing else")
    s, session = env.settings, env.session
    if not s.kafka or not s.state_dir:
        raise UsageError("standby follow --pre-restore needs --kafka (the job's checkpoints) and --state-dir")
    ref = session.ref()
    state = Path(s.state_dir).absolute()
    anchor = prerestore_replica(state, ref, _root(env))
    if metrics_port is not None:  # its series name the checkpoint topic followed, a BATCH job's run id included
        anchor = dataclasses.replace(anchor, changelog=checkpoint_log_topic(s.kafka, ref,
                                                                            security=session.kafka_security))
    metrics = _serve_metrics(env, [anchor], metrics_port, metrics_addr)
    r, interrupted = _following(env, metrics, lambda stop, on_status: follow_pre_restored(
        ref, state, s.kafka, session.blobstore, session.catalog, security=session.kafka_security, stop=stop,
        on_status=on_status, progress=env.progress, root=_root(env),
        settings=_follower_settings(env, pre_restore=True, metrics_port=metrics_port, metrics_addr=metrics_addr)))
    _followed(env, r, f"stopped pre-restoring: {r.replica_dir or 'no snapshot pre-restored'} ({r.records_applied} "
                      "files downloaded)", interrupted)


def _promote_pre_restored(env: Env, seconds: float) -> None:
    """promote of a store the job restores from the blob store (engine.prerestore; _restores_from_blob_store
    says which)."""
    s, session = env.settings, env.session
    from statectl.engine.prerestore import promote_pre_restored
    from statectl.engine.standby import update_locality

    ref = session.ref()
    security = session.kafka_security
    r = promote_pre_restored(ref, Path(s.state_dir).absolute(), s.kafka, session.blobstore, session.catalog,
                             security=security, timeout_s=seconds, progress=env.progress, root=_root(env),
                             on_locality=lambda: update_locality(s.kafka, ref, security=security))
    for note in r.notes:
        env.progress.note(note)
    env.emit(r, f"promoted the pre-restored {r.promoted_dir} (checkpoint {r.checkpoint_id}, blob-store restore: the "
                f"job's next start renames it into the store dir) in {r.duration_s:.2f}s")
