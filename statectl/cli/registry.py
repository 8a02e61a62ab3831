"""The commands of ``statectl``: each one's name, the module that holds it and its one-line summary.

A command's module (and through it typer's build of its options, and whatever the module imports) is
loaded when that command runs or its own help is asked for, never at start: ``statectl --version``,
``statectl --help`` and a restore then pay only for what they use. The summaries are what the root
``--help`` lists without importing anything; tests/unit/cli/test_registry.py checks each against the
command's own help text.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any, NamedTuple

__all__ = ["COMMANDS", "CommandSpec", "LazyCommands"]


class CommandSpec(NamedTuple):
    """``attr`` of ``statectl.cli.<module>``: a command function (``group`` False; its help is the
    function's docstring and its epilog the module's EPILOG) or a typer app of subcommands."""

    module: str
    attr: str
    group: bool
    summary: str


COMMANDS: dict[str, CommandSpec] = {
    "backup": CommandSpec("backup", "backup", False,
                          "Take an incremental snapshot of a RocksDB store: checkpoint it, upload only what changed, "
                          "commit."),
    "restore": CommandSpec("restore", "restore", False,
                           "Restore a store from its latest snapshot (or --snapshot), built aside and swapped in "
                           "atomically."),
    "diff": CommandSpec("diff", "diff", False,
                        "Show what differs between the local store and a snapshot, or between two snapshots."),
    "gc": CommandSpec("gc", "gc", False,
                      "Finish interrupted cleanups, apply retention, delete expired and unreferenced blobs (all "
                      "jobs)."),
    "doctor": CommandSpec("doctor", "doctor", False,
                          "Check what the operations need: the blob store (reachable, credentials, writable, TTL "
                          "tagging), the Kafka brokers and the job's checkpoint and coordinator topics, rocksdict, "
                          "Java and pyspark, the state dir. One line per check. See man statectl-doctor or "
                          "docs/backup.md."),
    "rescale": CommandSpec("rescale", "rescale", False,
                           "Re-partition a store's snapshots of N tasks into M tasks on Spark."),
    "version": CommandSpec("version", "version", False,
                           "Print statectl's version and those of rocksdict and its RocksDB, pyspark and Java found."),
    "snapshots": CommandSpec("snapshots", "app", True, "List, inspect and verify snapshots."),
    "config": CommandSpec("config", "app", True, "Inspect statectl's settings."),
    "lease": CommandSpec("lease", "app", True,
                         "Inspect or break the lease that keeps two backups of a store from running at once."),
    "drain": CommandSpec("drain", "app", True,
                         "Stop a job after it has processed everything in flight (Samza's drain)."),
    "standby": CommandSpec("standby", "app", True,
                           "Hot replicas of a store kept current from its changelog, promoted in seconds."),
    "adstore": CommandSpec("adstore", "app", True,
                           "Read-only (adjunct) stores filled from a topic or a file dataset, as Samza's side-input "
                           "stores."),
}


def build(name: str, spec: CommandSpec) -> Any:
    """The click command of ``name``, as typer builds it for a command (or sub-app) of the root app, every
    example in its help kept as written (common.literal_examples)."""
    import typer
    import typer.main

    from statectl.cli.common import literal_examples

    # __import__, not importlib.import_module: the import statement's path, which python -X importtime reports.
    module = __import__(f"statectl.cli.{spec.module}", fromlist=[spec.attr])
    target = getattr(module, spec.attr)
    holder = typer.Typer(rich_markup_mode=None, add_completion=False)
    if spec.group:
        holder.add_typer(target, name=name)
    else:
        holder.command(name, help=target.__doc__, epilog=getattr(module, "EPILOG", None))(target)
    cmd = typer.main.get_group(holder).commands[name]
    _literal_examples(cmd, literal_examples)
    return cmd


def _literal_examples(cmd: Any, fix: Any) -> None:
    cmd.epilog = fix(cmd.epilog)
    for sub in getattr(cmd, "commands", {}).values():
        _literal_examples(sub, fix)


class LazyCommands(MutableMapping):
    """A group's commands by name, in COMMANDS' order: the names are known at once, each command is
    built (its module imported) on first access. ``summary`` tells what the root help lists for a command
    without building it."""

    def __init__(self, specs: dict[str, CommandSpec]):
        self._specs = dict(specs)
        self._built: dict[str, Any] = {}

    def summary(self, name: str) -> str | None:
        """The spec's summary of a command not built yet; None once it is (its own help then says it)."""
        spec = self._specs.get(name)
        return spec.summary if spec is not None and name not in self._built else None

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            spec = self._specs.get(name)
            if spec is None:
                raise KeyError(name)
            self._built[name] = build(name, spec)
        return self._built[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._built[name] = cmd

    def __delitem__(self, name: str) -> None:
        if name not in self._specs and name not in self._built:
            raise KeyError(name)
        self._specs.pop(name, None)
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._specs
        yield from (n for n in self._built if n not in self._specs)

    def __len__(self) -> int:
        return len(self._specs) + sum(1 for n in self._built if n not in self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs or name in self._built
