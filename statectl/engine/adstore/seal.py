"""adstore seal-checkpoint: what makes Samza's first start of a job keep the adstores loaded for it.

A container that reads no checkpoint for any of its active tasks deletes every entry of its logged store base
dir, side-input stores included (ContainerStorageManager.restoreStores -> clearLoggedStores;
ContainerStorageManagerUtil.getStoreDirPath puts side-input stores there), so a store loaded before the job's
first start ("load, then deploy") is gone when it starts. One checkpoint for each of the job's tasks keeps the
dir; TaskSideInputStorageManager then keeps each side-input store that is not stale and whose offset file names
exactly its task's side-input SSPs (engine.adstore.status.predict), and reads on from those offsets.

The checkpoint written is empty: a v1 and a v2 record per task (KafkaCheckpointManager reads the versions of
task.checkpoint.read.versions, 1 by default), no input offsets (OffsetManager starts the inputs where it starts
them without a checkpoint), no state markers (the restore managers do what they do for a new store), keyed with
the job's SSP grouper factory (KafkaCheckpointManager fails the start on another one). A task with any record
in the topic is never written to (catalog.kafka_log.KafkaCheckpointLog.write_first). The topic and the grouper
are the checkpoint log's, from the job's config on its coordinator stream (read once, here, with the model).

The tasks: the job's active tasks on its coordinator stream; for a job that never started (no tasks there),
``tasks`` or the store dirs' ``Partition_N``. Refused (DiscardedError, exit 14,
nothing written) when the job's start would not keep the stores anyway: no task.checkpoint.factory,
checkpoints outside Kafka, a BATCH application with a run id (every run reads a new checkpoint topic:
engine.adstore.status.new_run_topic), or a store the start deletes as stale or mismatched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.engine.adstore.status import (
    CHECKPOINT_FACTORY,
    DELETE_MISMATCHED,
    DELETE_STALE,
    KAFKA_CHECKPOINT_FACTORY,
    StatusOptions,
    StoreStatus,
    job_tasks,
    new_run_topic,
    status,
)
from statectl.errors import DiscardedError, UsageError
from statectl.formats.sideinputs import GROUPER
from statectl.local.layout import check_name

KAFKA_FACTORY_HINT = f"set {CHECKPOINT_FACTORY}={KAFKA_CHECKPOINT_FACTORY} in the job's config"


@dataclass(frozen=True)
class SealOptions:
    """Seal ``job``-``job_id``'s checkpoint topic on ``bootstrap`` for the tasks holding ``store`` under
    ``state_dir``. ``tasks``: the job's tasks, for a job whose coordinator stream names none;
    ``grouper_factory``: its SSP grouper factory when its config is not on a coordinator stream."""

    bootstrap: str
    job: str
    store: str
    state_dir: Path
    job_id: str = "1"
    tasks: tuple[str, ...] = ()
    grouper_factory: str | None = None
    dry_run: bool = False
    security: Any = None
    timeout_s: float = 30.0

    def validate(self) -> None:
        if not (self.bootstrap and self.job):
            raise UsageError("adstore seal-checkpoint needs --kafka and --job (the job's checkpoint topic)")
        if not (self.store and self.state_dir):
            raise UsageError("adstore seal-checkpoint needs --store and --state-dir (the stores it is to keep)")
        check_name("job", self.job)
        check_name("store", self.store)
        for task in self.tasks:
            check_name("task", task)


@dataclass
class SealResult:
    """``sealed``: the tasks given a first checkpoint (``checkpoint_id``; with ``dry_run``: would be);
    ``skipped``: tasks with records in the topic already, untouched; ``tasks_from``: job, tasks or store dirs;
    ``stores``: what the job's next start does with each store dir (after the seal)."""

    job: str
    job_id: str
    topic: str
    grouper_factory: str
    tasks_from: str
    checkpoint_id: str | None = None
    sealed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stores: list[StoreStatus] = field(default_factory=list)
    dry_run: bool = False
    notes: list[str] = field(default_factory=list)


def seal_checkpoint(opts: SealOptions) -> SealResult:
    """Give each of the job's tasks without a checkpoint an empty first one (see the module doc). Idempotent:
    a task with records is skipped. Raises UsageError (bad options, a store dir whose task cannot be told),
    NotFoundError (no store dirs), DiscardedError (exit 14, nothing written: the job's start would not keep
    the stores), ConfigError, StatectlError (brokers, a write that failed)."""
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.catalog.refs import new_checkpoint_id

    opts.validate()
    model = _job_model(opts)
    config = model.config if model is not None else None
    with_job = model is not None and bool(job_tasks(model))
    status_opts = StatusOptions(store=opts.store, state_dir=opts.state_dir, bootstrap=opts.bootstrap if with_job
                                else None, job=opts.job if with_job else None, job_id=opts.job_id,
                                security=opts.security, timeout_s=opts.timeout_s)
    with KafkaCheckpointLog(opts.bootstrap, opts.job, opts.job_id, timeout_s=opts.timeout_s,
                            security=opts.security, config=config or {}) as log:
        if config is not None:
            _check_config(config, opts, log.topic)
        before = status(status_opts)
        _check_stores(before.stores)
        tasks, tasks_from = _tasks(opts, model, before.stores)
        grouper = _grouper(opts, config, log)
        result = SealResult(opts.job, opts.job_id, log.topic, grouper, tasks_from, dry_run=opts.dry_run)
        if opts.dry_run:
            known = log.task_key_types() or {}
            result.sealed = [t for t in tasks if t not in known]
            result.skipped = [t for t in tasks if t in known]
            result.stores = before.stores
        else:
            result.checkpoint_id = new_checkpoint_id()
            result.sealed, result.skipped = log.write_first(tasks, result.checkpoint_id, grouper)
            result.stores = status(status_opts).stores
    if config is None:
        result.notes.append(f"job {opts.job}-{opts.job_id} has no config on a coordinator stream: sealed for "
                            f"{GROUPER}={grouper} and Kafka checkpoints ({CHECKPOINT_FACTORY}="
                            f"{KAFKA_CHECKPOINT_FACTORY}), on the brokers the job checkpoints to")
    if tasks_from != "job":
        result.notes.append("a task not named here gets no checkpoint, and a container whose active tasks are all "
                            "such deletes the whole state dir at its start: name every task of the job (--tasks)")
    result.notes += [f"{t}: has records in {result.topic} already: left as it is" for t in result.skipped]
    return result


def _job_model(opts: SealOptions) -> Any:
    """The job model on the coordinator stream, or None for a job that has none (never started)."""
    from statectl.kafka.coordinator import CoordinatorStream

    with CoordinatorStream(opts.bootstrap, opts.job, opts.job_id, timeout_s=opts.timeout_s,
                           security=opts.security) as cs:
        return cs.job_model() if cs.refresh() else None


def _check_config(config: dict[str, str], opts: SealOptions, topic: str) -> None:
    """DiscardedError unless the job's start reads checkpoints from the Kafka topic this writes to."""
    factory = (config.get(CHECKPOINT_FACTORY) or "").strip()
    job = f"job {opts.job}-{opts.job_id}"
    if not factory:
        raise DiscardedError(f"{job} has no {CHECKPOINT_FACTORY}: it reads no checkpoint at any start and deletes "
                             "the whole state dir every time; a checkpoint cannot keep the stores",
                             hint=KAFKA_FACTORY_HINT)
    if factory != KAFKA_CHECKPOINT_FACTORY:
        raise DiscardedError(f"{job} keeps its checkpoints with {CHECKPOINT_FACTORY}={factory}, not in a Kafka "
                             "checkpoint topic: statectl cannot give its tasks a first checkpoint",
                             hint="give every task a checkpoint there before the job's first start")
    batch = new_run_topic(config)
    if batch:
        raise DiscardedError(f"{job}: {batch}, so a checkpoint written now (in {topic}, this run's) is not in the "
                             "topic the next run reads", hint="run it as a STREAM application")


def _check_stores(stores: list[StoreStatus]) -> None:
    """DiscardedError when the job's start deletes a store as stale or mismatched, checkpoint or not."""
    gone = [s for s in stores if s.action in (DELETE_STALE, DELETE_MISMATCHED)]
    if gone:
        s = gone[0]
        raise DiscardedError(f"{s.store_dir}: the job's next start deletes it with a checkpoint too ({s.action}: "
                             f"{s.reason})" + (f"; {len(gone) - 1} more" if len(gone) > 1 else ""),
                             hint="load it again (statectl adstore load) and seal within a day of the load")


def _tasks(opts: SealOptions, model: Any, stores: list[StoreStatus]) -> tuple[list[str], str]:
    """(the tasks to seal, where they come from: job, tasks or store dirs)."""
    named = job_tasks(model) if model is not None else []
    if named:
        if opts.tasks:
            raise UsageError(f"the coordinator stream of job {opts.job}-{opts.job_id} names its tasks: --tasks is "
                             "for a job that has never started")
        return named, "job"
    if opts.tasks:
        return list(opts.tasks), "tasks"
    tasks = []
    for s in stores:
        name = Path(s.store_dir).name
        m = re.fullmatch(r"Partition_(\d+)", name)
        if not m:
            raise UsageError(f"cannot tell the task of store dir {s.store_dir}", hint="pass --tasks with every task "
                                                                                      "of the job")
        tasks.append(f"Partition {m.group(1)}")
    return tasks, "store dirs"


def _grouper(opts: SealOptions, config: dict[str, str] | None, log: Any) -> str:
    """The SSP grouper factory the checkpoint keys must name: --grouper-factory for a job without a config on
    its coordinator stream, else the checkpoint log's (the config's; without one, the one the job's own keys
    in the topic name, else GroupByPartitionFactory). --grouper-factory may not contradict the job's config."""
    if config is None and opts.grouper_factory:
        return opts.grouper_factory
    grouper = log.grouper_factory()
    if opts.grouper_factory and opts.grouper_factory != grouper:
        raise UsageError(f"--grouper-factory {opts.grouper_factory}: the job's config says {GROUPER}={grouper}")
    return grouper
