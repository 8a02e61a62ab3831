"""What a rescale is asked to do (RescaleOptions, checked by ``validate``) and the two files the command reads
it from besides its flags: ``--task-map`` and ``--snapshots``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl import defaults
from statectl.errors import UsageError
from statectl.parallel import check_parallelism
from statectl.snapshot.model import parse_file_owner


@dataclass(frozen=True)
class RescaleOptions:
    """Re-partition ``store`` of ``job`` from ``from_tasks`` source tasks into ``to_tasks`` target tasks of
    ``to_job`` (default: ``job``). ``sources``/``targets``: the task names (default ``Partition k``);
    ``snapshots``: task -> snapshot id (checkpoint id or index blob id; default the latest).
    ``partitioner``: ``module:callable`` f(key: bytes, partitions: int) -> int, None (or ``murmur2``) for
    Kafka's default (toPositive(murmur2(key)) % partitions); ``from_partitioner``: the one that placed the
    sources' keys (default: ``partitioner``). ``key_groups``: the store's keys carry key-group prefixes
    (Flink's layout, statectl.formats.keygroups) of this many groups: the key-group path (module doc).
    ``ignore_other_tasks``: rescale although the store has snapshots of tasks besides the sources
    (statectl.engine.rescale.layout). ``again``: a new rescale whatever the blob store records of this one
    (statectl.engine.rescale.rerun). ``dry_run``: make every check that needs no Spark job and report the
    plan; write nothing. ``work_dir``: where the Spark job's files and the staged target stores go (a
    temporary dir in it, removed at the end; default the system's temp dir). ``file_owner``: ``USER:GROUP``
    the targets' files are recorded with (None: the sources', snapshot.model.files_owner): Samza's restore
    compares them with its restored files'."""

    store: str
    job: str
    job_id: str = "1"
    from_tasks: int = 0
    to_tasks: int = 0
    to_job: str | None = None
    sources: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    snapshots: dict[str, str] = field(default_factory=dict)
    partitioner: str | None = None
    from_partitioner: str | None = None
    key_groups: int | None = None
    ignore_other_tasks: bool = False
    again: bool = False
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    staging: str = "local"  # or the blob store URL the executors hand their SST files over through
    s3: Any = None
    dry_run: bool = False
    work_dir: Path | None = None
    parallelism: int = defaults.PARALLELISM
    chunk_size: int = defaults.CHUNK_SIZE
    ttl_seconds: int = defaults.TTL_SECONDS
    keep_last: int = defaults.KEEP_LAST
    grace_seconds: int = defaults.GRACE_SECONDS
    timeout_s: float | None = None
    file_owner: str | None = None

    @property
    def source_tasks(self) -> list[str]:
        return list(self.sources) or [f"Partition {k}" for k in range(self.from_tasks)]

    @property
    def target_tasks(self) -> list[str]:
        return list(self.targets) or [f"Partition {k}" for k in range(self.to_tasks)]

    @property
    def source_partitioner(self) -> str | None:
        """The partitioner that placed the sources' keys."""
        return self.from_partitioner or self.partitioner

    def validate(self) -> None:
        """UsageError for options that cannot be run."""
        if not self.store or not self.job:
            raise UsageError("rescale needs --store and --job")
        if self.from_tasks < 1 or self.to_tasks < 1:
            raise UsageError("--from and --to must be at least 1")
        if self.sources and len(self.sources) != self.from_tasks:
            raise UsageError(f"the task map names {len(self.sources)} source tasks, --from says {self.from_tasks}")
        if self.targets and len(self.targets) != self.to_tasks:
            raise UsageError(f"the task map names {len(self.targets)} target tasks, --to says {self.to_tasks}")
        self._validate_names()
        unknown = sorted(set(self.snapshots) - set(self.source_tasks))
        if unknown:
            raise UsageError(f"--snapshots names task {unknown[0]!r}, which is not a source task")
        if (self.to_job or self.job) == self.job and self.from_tasks == self.to_tasks and not self.targets:
            raise UsageError("--from equals --to within one job: nothing to rescale")
        self._validate_routing()
        if self.keep_last < 1:
            raise UsageError("--keep-last must be at least 1")
        if self.ttl_seconds < 60:
            raise UsageError("--ttl must be at least a minute")
        check_parallelism(self.parallelism)
        if self.file_owner is not None:
            parse_file_owner(self.file_owner)

    def _validate_names(self) -> None:
        """Every task name must name a store dir and a catalog key segment, as --task must (check_name)."""
        from statectl.local.layout import check_name

        if self.to_job is not None:
            check_name("to job", self.to_job)
        for what, names in (("source", self.source_tasks), ("target", self.target_tasks)):
            if len(set(names)) != len(names) or not all(names):
                raise UsageError(f"the {what} task names must be distinct and not empty")
            for name in names:
                try:
                    check_name("task", name)
                except UsageError as e:
                    raise UsageError(f"--task-map: {what} task: {e}") from None

    def _validate_routing(self) -> None:
        import re

        if self.key_groups is not None:
            from statectl.formats.keygroups import check_key_groups

            if self.partitioner is not None or self.from_partitioner is not None:
                raise UsageError("--key-groups and --partitioner exclude each other: a key-group store routes "
                                 "every key by its key-group prefix")
            try:
                check_key_groups(self.key_groups)
            except ValueError as e:
                raise UsageError(f"--key-groups: {e}") from None
        for flag, name in (("--partitioner", self.partitioner), ("--from-partitioner", self.from_partitioner)):
            if name is not None and name != "murmur2" and not re.fullmatch(r"[\w.]+:[\w.]+", name):
                raise UsageError(f"{flag} {name!r}: expected module:callable (or murmur2)")



def load_snapshots_file(path: Path) -> dict[str, str]:
    """``--snapshots FILE``: a JSON object task name -> snapshot id. UsageError when malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"--snapshots {path}: {e}") from None
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
        raise UsageError(f"--snapshots {path}: expected a JSON object of task name -> snapshot id")
    return doc


def load_task_map(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--task-map FILE``: JSON {"from": [source task names], "to": [target task names]} (either may be
    left out: ``Partition k``). UsageError when malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"--task-map {path}: {e}") from None
    if not isinstance(doc, dict) or set(doc) - {"from", "to"}:
        raise UsageError(f"--task-map {path}: expected a JSON object with \"from\" and/or \"to\" lists")
    out = []
    for key in ("from", "to"):
        names = doc.get(key) or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UsageError(f"--task-map {path}: {key!r} must be a list of task names")
        out.append(tuple(names))
    return out[0], out[1]
