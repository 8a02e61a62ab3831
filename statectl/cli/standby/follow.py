"""statectl standby follow: one task's replica, a container's, or a pre-restore, followed until stopped."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from statectl.cli.common import Env, exit_codes_epilog, state_command, stop_on_signals
from statectl.cli.standby.shared import (
    CHANGELOG,
    CONTAINER,
    LAYOUT,
    PARTITION,
    REPLICA,
    REPLICA_DIR,
    WHERE,
    container_of_flags,
    no_single_task_flags,
    replica_of,
    root_flag,
)
from statectl.errors import UsageError

if TYPE_CHECKING:
    from statectl.engine.standby.replica import Replica

EPILOG = (
    "Writes the replica (in the standby root, --standby-root; never in the state dir), its lock, status and offset "
    "files; reads the changelog on its system's brokers and the job's checkpoints and coordinator stream on "
    "--kafka. Runs until SIGTERM (exit 0) or Ctrl-C (exit 130). Seeding, --layout, --to-checkpoint, "
    "--pre-restore and the metrics: see docs/standby.md.\n\n"
    "Example:\n\n  statectl standby follow --kafka broker:9092 --job page-views --task 'Partition 0' --store counts "
    "--state-dir /var/samza/state --metrics-port 9464\n\n"
    + exit_codes_epilog(0, 1, (2, "usage, or the --metrics-port cannot be listened on"),
                        (10, "no such changelog topic or partition, or no job model in ZooKeeper"),
                        (11, "another follower holds the replica, or a process holds its store"),
                        (14, "refused: --layout active-path where the state dir is cleared"), 130))
FOLLOW_TO_CHECKPOINT = Annotated[bool, typer.Option(
    "--to-checkpoint", help="Apply only up to the task's latest checkpointed changelog offset.")]
PRE_RESTORE = Annotated[bool, typer.Option(
    "--pre-restore", help="A job restoring the store from the blob store: keep its latest snapshot restored "
                          "instead.")]
METRICS_PORT = Annotated[Optional[int], typer.Option(
    "--metrics-port", help="Serve Prometheus metrics of the replica on this port (0: any free port).",
    show_default=False)]
METRICS_ADDR = Annotated[str, typer.Option("--metrics-addr", help="The address --metrics-port listens on.")]


@state_command(*WHERE, "standby_root", "zookeeper", "blobstore", "s3_endpoint", "limit_rate")
def follow(env: Env, changelog: CHANGELOG = None, partition: PARTITION = None, replica: REPLICA = 0,
           replica_dir: REPLICA_DIR = None, container: CONTAINER = None, layout: LAYOUT = "standby-root",
           to_checkpoint: FOLLOW_TO_CHECKPOINT = False, pre_restore: PRE_RESTORE = False,
           metrics_port: METRICS_PORT = None, metrics_addr: METRICS_ADDR = "0.0.0.0") -> None:
    """Keep a hot replica of a task's store current from its changelog (runs until stopped)."""
    if pre_restore and container is not None:
        no_single_task_flags(env, "follow", changelog, partition, replica_dir)
        if to_checkpoint or layout != "standby-root":
            raise UsageError("--pre-restore keeps the latest snapshot restored, nothing else: --to-checkpoint and "
                             "--layout exclude it")
        return _follow_container(env, container, replica, layout, False, metrics_port, metrics_addr, None,
                                 pre_restore=True)
    if pre_restore:
        return _follow_pre_restored(env, to_checkpoint, layout, replica_dir, metrics_port, metrics_addr)
    if container is not None:
        no_single_task_flags(env, "follow", changelog, partition, replica_dir)
        return _follow_container(env, container, replica, layout, to_checkpoint, metrics_port, metrics_addr,
                                 _seeder(env))
    _follow_task(env, changelog, partition, replica, replica_dir, layout, to_checkpoint, metrics_port, metrics_addr)


def _seeder(env: Env) -> Any:
    """replica -> what seeds it from a snapshot (the restore engine, into a staged dir swapped in)."""
    from statectl.engine.restore import RestoreOptions, restore

    session = env.session

    def seeder(rep: Replica) -> Any:
        def seed(index_id: str, target: Path) -> None:
            restore(RestoreOptions(rep.ref, target, target_dir=target, snapshot=index_id, force=True,
                                   rate_limit=session.rate_limit), session.blobstore, session.catalog, env.progress)

        return seed

    return seeder


def _follow_task(env: Env, changelog: str | None, partition: int | None, replica: int, replica_dir: Path | None,
                 layout: str, to_checkpoint: bool, metrics_port: int | None, metrics_addr: str) -> None:
    from statectl.engine.standby.follow import follow as run_follow

    seeder = _seeder(env)
    rep = replica_of(env, changelog, partition, replica, replica_dir)
    rep, legacy = _layout(env, rep, layout, replica, replica_dir)
    seed = seeder(rep)
    settings = _follower_settings(env, changelog=f"{rep.system}.{rep.changelog}", partition=rep.partition,
                                  replica=replica, replica_dir=replica_dir, layout=layout, to_checkpoint=to_checkpoint,
                                  metrics_port=metrics_port, metrics_addr=metrics_addr)
    metrics = _serve_metrics(env, [rep], metrics_port, metrics_addr)
    r, interrupted = _following(env, metrics, lambda stop, on_status: run_follow(
        rep, env.settings.kafka, security=env.session.kafka_security, seed=seed, stop=stop, on_status=on_status,
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
    """What this follower runs with, for its status file (engine.standby.follower.FollowerSettings): the effective
    settings, wherever each came from (flags, STATECTL_*, a profile), and its options; never a secret (a
    URL's password is left out: the restarted follower reads secrets from its config file or environment)."""
    from statectl.config import KEYS
    from statectl.engine.standby.follower import ENV_SETTINGS, FollowerSettings

    s = env.settings
    others = {name: str(KEYS[name].show(getattr(s, name))) for name in ENV_SETTINGS
              if getattr(s, name) is not None and s.source(name) != "default"}
    return FollowerSettings(
        s.kafka, s.job, s.job_id, state_dir=str(Path(s.state_dir).absolute()) if s.state_dir else None,
        standby_root=str(root_flag(env)) if root_flag(env) is not None else None, zookeeper=s.zookeeper,
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


def _follow_container(env: Env, container: str, replica: int, layout: str, to_checkpoint: bool,
                      metrics_port: int | None, metrics_addr: str, seeder: Any, *, pre_restore: bool = False) -> None:
    from statectl.engine.standby.container import MODE_PRE_RESTORE, follow_container

    sc = container_of_flags(env, container, replica, one_store=True, mode=MODE_PRE_RESTORE if pre_restore else "changelog")
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
    """The follower's status lines with -o json (on a terminal the engine's progress shows the lag)."""

    def __init__(self, env: Env):
        self._json = env.json
        self._guard = threading.Lock()  # a container's followers report from their threads

    def update(self, st: Any) -> None:
        if self._json:
            from statectl.cli.common import to_jsonable

            with self._guard:
                sys.stdout.write(json.dumps(to_jsonable(st)) + "\n")
                sys.stdout.flush()


def _layout(env: Env, rep: Replica, layout: str, replica: int,
            replica_dir: Path | None) -> tuple[Replica, tuple[Path, Path | None] | None]:
    """The replica in the layout asked for, and where an older statectl kept it, which follow moves it from
    (engine.standby.dirs.old_replica; None: nowhere)."""
    from statectl.engine.standby.dirs import active_path_replica, old_replica

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


def _follow_pre_restored(env: Env, to_checkpoint: bool, layout: str, replica_dir: Path | None,
                         metrics_port: int | None, metrics_addr: str) -> None:
    from statectl.engine.standby.prerestore import checkpoint_log_topic, prerestore_replica
    from statectl.engine.standby.prerestore_follow import follow_pre_restored

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
    anchor = prerestore_replica(state, ref, root_flag(env))
    if metrics_port is not None:  # its series name the checkpoint topic followed, a BATCH job's run id included
        anchor = dataclasses.replace(anchor, changelog=checkpoint_log_topic(s.kafka, ref,
                                                                            security=session.kafka_security))
    metrics = _serve_metrics(env, [anchor], metrics_port, metrics_addr)
    r, interrupted = _following(env, metrics, lambda stop, on_status: follow_pre_restored(
        ref, state, s.kafka, session.blobstore, session.catalog, security=session.kafka_security, stop=stop,
        on_status=on_status, progress=env.progress, root=root_flag(env),
        settings=_follower_settings(env, pre_restore=True, metrics_port=metrics_port, metrics_addr=metrics_addr)))
    _followed(env, r, f"stopped pre-restoring: {r.replica_dir or 'no snapshot pre-restored'} ({r.records_applied} "
                      "files downloaded)", interrupted)


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
        if metrics is not None:
            metrics[0].stopped()
            metrics[1].close()
    return r, interrupted


def _standby_root(env: Env) -> Path | None:
    """The standby root in effect (local.layout.standby_root), None without a state dir."""
    from statectl.local.layout import standby_root

    s = env.settings
    return standby_root(Path(s.state_dir), root_flag(env)) if s.state_dir else None

