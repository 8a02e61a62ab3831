"""Naming the task of a store's task dir without guessing (backup --all, --all-tasks): local.layout's rule for
a dir name, then the sources that know the job's tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.errors import PartialError
from statectl.local.layout import TaskDir, task_named_by_dir, tasks_of_dir


class TaskNamer:
    """Names the task of each task dir of job ``ref.job``-``ref.job_id`` without guessing (local.layout's
    rule): a dir name without ``_`` is its task's name; any other is named by the first of these sources that
    knows a task with that dir, read when first needed: the job model on the job's coordinator stream and
    the job's checkpoint topic (both when the catalog commits to Kafka: --kafka), then the tasks the blob
    store's catalog holds snapshots of for the job (names an earlier --task, the job's own commits or --kafka
    gave)."""

    def __init__(self, ref: StoreRef, checkpoints: BlobCheckpointStore):
        from statectl.catalog.kafka_log import KafkaCheckpointLogs

        self.ref = ref
        log = checkpoints.commit_log
        self.kafka = isinstance(log, KafkaCheckpointLogs)
        self._sources: list[tuple[str, Callable[[], set[str]]]] = []
        if isinstance(log, KafkaCheckpointLogs):
            self._sources += [("the job model on its coordinator stream", lambda: _job_model_tasks(log, ref)),
                              ("its checkpoint topic", lambda: log.for_job(ref.job, ref.job_id).task_names())]
        self._sources.append(("the blob store's catalog",
                              lambda: {r.task for r in checkpoints.refs(ref.job) if r.job_id == ref.job_id}))
        self._known: dict[str, set[str]] = {}

    def name(self, task_dir: TaskDir) -> str:
        """The task of ``task_dir``. Raises PartialError (its message for ``failures``) when no source knows a
        task with that dir, or the first that does knows two (``a b`` and ``a_b``); errors of the sources as
        they raise them (unreachable brokers, a blob store that does not exist)."""
        named = task_named_by_dir(task_dir.name)
        if named is not None:
            return named
        job = f"job {self.ref.job}-{self.ref.job_id}"
        for what, read in self._sources:
            if what not in self._known:
                self._known[what] = read()
            found = tasks_of_dir(task_dir.name, self._known[what])
            if len(found) == 1:
                return found[0]
            if found:
                raise self._unnamed(task_dir, f"tasks {' and '.join(map(repr, found))} of {job} both have dir "
                                              f"{task_dir.name} in {what}")
        where = [what for what, _ in self._sources]
        where_text = ", ".join(where[:-1]) + " or " + where[-1] if len(where) > 1 else where[0]
        raise self._unnamed(task_dir, f"no task of {job} has dir {task_dir.name} in {where_text}")

    def _unnamed(self, task_dir: TaskDir, why: str) -> PartialError:
        kafka = "" if self.kafka else ", or pass --kafka (the job's coordinator stream names its tasks)"
        return PartialError(f"cannot name its task without guessing ('_' in a task dir stands for ' ' or '_'): "
                            f"{why}; back it up with --store {task_dir.store} --task NAME{kafka}")


def _job_model_tasks(log: Any, ref: StoreRef) -> set[str]:
    """The active tasks of the job model on the job's coordinator stream; none when there is no stream."""
    from statectl.kafka.coordinator import CoordinatorStream

    with CoordinatorStream(log.bootstrap, ref.job, ref.job_id, timeout_s=log.timeout_s, security=log.security) as cs:
        return cs.job_model().active_tasks() if cs.refresh() else set()
