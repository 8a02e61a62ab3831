"""What the standby commands share: their option aliases, the replica or container the flags name, and
--metrics-file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer

from statectl.cli.common import Env
from statectl.errors import UsageError

if TYPE_CHECKING:
    from statectl.engine.standby.replica import Replica

# The flags that name one task's store; docs/standby.md says how each is found when not given.
WHERE = ("kafka", "job", "job_id", "task", "store", "state_dir")
CHANGELOG = Annotated[Optional[str], typer.Option(
    "--changelog", help="The store's changelog, <system>.<topic> or <topic> (default: stores.<store>.changelog in "
                        "the job's config).", show_default=False)]
PARTITION = Annotated[Optional[int], typer.Option(
    "--partition", help="Its changelog partition (default: the task's, in the job's model).", show_default=False)]
REPLICA = Annotated[int, typer.Option("--replica", help="The n of standby task Standby-<task>-<n>.")]
REPLICA_DIR = Annotated[Optional[Path], typer.Option(
    "--replica-dir", help="The replica's dir (default: <standby-root>/<n>/<store>/<task>).", show_default=False)]
CONTAINER = Annotated[Optional[str], typer.Option(
    "--container", help="Every store of every task of this container (0, or standby container 0-1); not with "
                        "--task, --changelog, --partition, --replica-dir.", show_default=False)]
LAYOUT = Annotated[Literal["standby-root", "active-path"], typer.Option(
    "--layout", help="active-path: keep the replica in the task's active store dir, as Samza's standby does.")]
TIMEOUT = Annotated[str, typer.Option("--timeout", help="Give up catching a store up after this long.")]
TO_CHECKPOINT = Annotated[bool, typer.Option(
    "--to-checkpoint", help="Catch up only to the task's last checkpointed changelog offset.")]


def metrics_file_option(what: str) -> Any:
    """--metrics-file, writing ``what`` (a textfile for node_exporter; docs/standby.md)."""
    return Annotated[Optional[Path], typer.Option(
        "--metrics-file", help=f"Write {what} to this Prometheus textfile (for node_exporter).", show_default=False)]


def metrics_path(path: Path | None) -> Path | None:
    """--metrics-file checked before the command does anything (statectl.metrics.check_textfile)."""
    if path is None:
        return None
    from statectl.metrics import check_textfile

    return check_textfile(path)


def write_metrics(env: Env, path: Path, families: Any) -> None:
    """Write ``families()`` to --metrics-file; a failure is a warning, the exit code stays the command's."""
    from statectl.metrics import write_textfile

    try:
        write_textfile(path, families())
    except OSError as e:
        env.progress.note(f"warning: --metrics-file {path} not written: {e}")


def replica_of(env: Env, changelog: str | None, partition: int | None, replica: int, replica_dir: Path | None,
               *, need_dir: bool = True, stream: Any = None) -> Replica:
    """The replica the flags name: its changelog partition resolved (engine.standby.changelog; ``stream``: the
    coordinator stream as the command read it already), its dir the default one in the standby root unless
    --replica-dir."""
    from statectl.engine.standby.changelog import resolve_changelog
    from statectl.engine.standby.replica import standby_dir

    s, session = env.settings, env.session
    if not s.kafka:
        raise UsageError("standby needs --kafka: the replica follows the store's changelog there")
    ref = session.ref()
    if replica_dir is None:
        if not s.state_dir:
            raise UsageError("standby needs --state-dir (or --replica-dir)")
        replica_dir = standby_dir(Path(s.state_dir), ref.store, ref.task, replica, root_flag(env))
    where = resolve_changelog(s.kafka, ref, changelog=changelog, partition=partition,
                              security=session.kafka_security, zookeeper=s.zookeeper, stream=stream)
    for note in where.notes:
        env.progress.note(note)
    return where.replica(ref, Path(replica_dir).absolute())


def root_flag(env: Env) -> Path | None:
    """--standby-root as given (None: the default, beside the state dir)."""
    root = env.settings.standby_root
    return Path(root).absolute() if root else None


def no_single_task_flags(env: Env, command: str, changelog: str | None, partition: int | None,
                          replica_dir: Path | None) -> None:
    given = [name for name, value in (("task", env.flags.task), ("changelog", changelog),
                                      ("partition", partition), ("replica-dir", replica_dir)) if value is not None]
    if given:
        raise UsageError(f"{command} --container takes every task of the container: --{given[0]} excludes it",
                         hint="leave it out, or name one task with --task instead of --container")
    s = env.settings
    if not s.kafka or not s.job or not s.state_dir:
        raise UsageError(f"{command} --container needs --kafka, --job and --state-dir")


def container_of_flags(env: Env, container: str, replica: int, *, one_store: bool = False, mode: str = "changelog") -> Any:
    """The container's standby (engine.standby.container.resolve_container, ``mode``); ``one_store``: --store names the
    only store followed (follow); else --store is refused (a container moves whole)."""
    from statectl.engine.standby.container import resolve_container

    s = env.settings
    store = getattr(env.flags, "store", None)
    if store and not one_store:
        raise UsageError("a container moves whole: --store excludes --container here",
                         hint="leave --store out (every store of the container is promoted)")
    sc = resolve_container(s.kafka, s.job, s.job_id, container, replica=replica, stores=[store] if store else None,
                           mode=mode, zookeeper=s.zookeeper, state_dir=Path(s.state_dir),
                           security=env.session.kafka_security, root=root_flag(env))
    for note in sc.notes:
        env.progress.note(note)
    return sc

