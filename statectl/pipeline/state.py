"""A task as its container runs it, and its state: its inputs' positions, its end states (drain, end of
stream, watermarks) and its RocksDB stores.

Start: each store is restored from the snapshot the task's latest v2 checkpoint names (the restore
engine; a store the checkpoint names none of starts empty), and every write to it also goes to its
changelog partition. Commit, in Samza's TaskStorageCommitManager's order: the task's outputs flushed, its
end states saved, a RocksDB checkpoint of every store, each uploaded (the backup engine's backup_stores),
then ONE v2 checkpoint naming every store's snapshot and changelog position with the task's input
offsets, then each store's cleanup. A crash anywhere before that checkpoint leaves the previous one, of
every store and of the offsets, to restart from: no store holds what the offsets would have it replay.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.engine.backup import BackupOptions, backup_stores
from statectl.engine.restore import RestoreOptions, restore
from statectl.errors import StatectlError
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    CheckpointV2,
    KafkaChangelogMarker,
    encode_changelog_marker,
)
from statectl.kafka.coordinator import CoordinatorStream
from statectl.local.layout import checkpoint_dir, local_checkpoint_dirs, store_dir
from statectl.pipeline.control import DrainStates, EndOfStreamStates, WatermarkStates, save_drain_states
from statectl.pipeline.spec import SYSTEM
from statectl.rocks.live import LiveStore
from statectl.session import Session


@dataclass
class Runtime:
    """Where a container runs: brokers, the job's state dir, its blob store (a Session gives the blob
    store and catalog), its run id."""

    bootstrap: str
    state_dir: Path
    run_id: str
    session: Session  # its blob store and catalog (with the job's checkpoint topic as commit log)


@dataclass
class TaskStore:
    """One store of a task: its live RocksDB and its changelog topic."""

    name: str
    live: LiveStore
    changelog: str
    changelog_offset: int | None = None  # of the newest changelog record acknowledged

    def advance(self, offset: int) -> None:
        if self.changelog_offset is None or offset > self.changelog_offset:
            self.changelog_offset = offset


@dataclass
class RunningTask:
    """One task of a container: its input partitions, its user object, its stores, the last offset it
    processed of each input, and its end states."""

    name: str
    partition: int
    inputs: list[SSP]
    user: Any = None
    stores: list[TaskStore] = field(default_factory=list)
    processed: dict[str, str] = field(default_factory=dict)  # ssp key -> last processed offset
    drain: DrainStates | None = None
    eos: EndOfStreamStates | None = None
    watermarks: WatermarkStates | None = None
    watermark: int = -1
    stopped: bool = False
    saved_states: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})

    def ended(self, ssp: SSP) -> bool:
        """``ssp`` has ended, by a drain or by an end of stream."""
        return self.drain.is_ended(ssp) or self.eos.is_ended(ssp)

    def all_ended(self) -> bool:
        return all(self.ended(ssp) for ssp in self.inputs)


class CommitManager:
    """Restores and commits the state of the tasks of job ``job_name``-``job_id`` in one container (see the
    module doc): checkpoints on ``checkpoints``, end states on ``coordinator``."""

    def __init__(self, job_name: str, job_id: str, runtime: Runtime, coordinator: CoordinatorStream,
                 checkpoints: KafkaCheckpointLog):
        self.job_name = job_name
        self.job_id = job_id
        self.rt = runtime
        self.coordinator = coordinator
        self.checkpoints = checkpoints

    def latest_checkpoints(self) -> tuple[dict[str, CheckpointV2], list[str]]:
        """Each task's latest v2 checkpoint, and the problems met reading them; none on a first start."""
        try:
            return self.checkpoints.latest_checkpoints()
        except StatectlError as e:
            if getattr(e, "exit_code", None) == 10:  # no checkpoint topic yet: a first start
                return {}, []
            raise

    def open_store(self, task: RunningTask, name: str, changelog: str, cp: CheckpointV2 | None) -> TaskStore:
        """Store ``name`` of ``task``, restored from the snapshot ``cp`` names, or empty."""
        path = store_dir(self.rt.state_dir, name, task.name)
        ref = StoreRef(self.job_name, self.job_id, task.name, name)
        marker = cp.state_checkpoint_markers.get(BLOB_STORE_FACTORY, {}).get(name) if cp else None
        if marker:  # that very snapshot: the one the checkpoint's input offsets go with
            restore(RestoreOptions(ref, path, snapshot=marker, state_dir=self.rt.state_dir),
                    self.rt.session.blobstore, self.rt.session.catalog)
        elif path.exists():
            shutil.rmtree(path)  # no checkpoint covers it: it would hold effects of messages read again
        return TaskStore(name, LiveStore(path), changelog)

    @staticmethod
    def changelog_writer(producer: Any, task: RunningTask, store: TaskStore) -> Callable[[bytes, bytes | None], None]:
        """What a store write also does: send it to the store's changelog partition (the task's)."""
        def log_write(key: bytes, value: bytes | None) -> None:
            future = producer.send(store.changelog, key=key, value=value, partition=task.partition)
            future.add_callback(lambda meta: store.advance(meta.offset))
        return log_write

    def commit(self, task: RunningTask, producer: Any) -> None:
        """Flush what the task sent, then commit its input offsets with a snapshot of each store: one v2
        checkpoint (Samza's order: outputs and changelog durable before the offsets that produced them; every
        store uploaded before the one checkpoint that names them all)."""
        producer.flush()
        states = (task.drain.export(), task.eos.export())
        if states != task.saved_states:
            save_drain_states(self.coordinator, task.name, self.rt.run_id, *states)
            task.saved_states = states
        offsets = dict(task.processed)
        cid = new_checkpoint_id()
        if not task.stores:
            if offsets:
                self.checkpoints.commit_offsets(task.name, cid, offsets, exact_markers=True)
            return
        backup_stores([self._snapshot(task, store, cid, offsets) for store in task.stores],
                      self.rt.session.blobstore, self.rt.session.catalog, exact_markers=True)
        for store in task.stores:
            for old, old_dir in local_checkpoint_dirs(store_dir(self.rt.state_dir, store.name, task.name)).items():
                if old != cid:
                    shutil.rmtree(old_dir, ignore_errors=True)

    def _snapshot(self, task: RunningTask, store: TaskStore, cid: str, offsets: dict[str, str]) -> BackupOptions:
        """A RocksDB checkpoint ``cid`` of ``store``, and its backup: with the task's input ``offsets`` and the
        store's changelog position as marker."""
        path = store_dir(self.rt.state_dir, store.name, task.name)
        cp_dir = checkpoint_dir(path, cid)
        store.live.checkpoint(cp_dir)
        marker = encode_changelog_marker(KafkaChangelogMarker(
            SSP(SYSTEM, store.changelog, task.partition),
            None if store.changelog_offset is None else str(store.changelog_offset)))
        return BackupOptions(StoreRef(self.job_name, self.job_id, task.name, store.name), path,
                             checkpoint_dir=cp_dir, input_offsets=offsets,
                             markers={KAFKA_CHANGELOG_FACTORY: {store.name: marker}})
