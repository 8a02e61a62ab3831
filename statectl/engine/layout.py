"""Where a store lives locally, and checkpoint ids (FORMATS.md: "Local store directory", "CheckpointId")."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from statectl.errors import UsageError
from statectl.formats.checkpoint import CheckpointFormatError, is_canonical_checkpoint_id
from statectl.formats.checkpoint import parse_checkpoint_id as _parse_checkpoint_id

# Offset files Samza writes into store dirs; not part of a snapshot's identity (FORMATS.md).
OFFSET_FILES = frozenset({"OFFSET", "OFFSET-v2", "OFFSET-V2", "SIDE-INPUT-OFFSETS", "CHECKPOINT-V2", "CHECKPOINT-V1"})
# Never uploaded: the LOCK file only means something to a running RocksDB.
NEVER_UPLOADED = frozenset({"LOCK"})
# In a live store dir but never in a RocksDB checkpoint: the info logs and the DB's identity file.
NOT_IN_CHECKPOINTS = frozenset({"LOCK", "LOG", "IDENTITY"})


def is_info_log(name: str) -> bool:
    """RocksDB's human-readable info logs (``LOG``, ``LOG.old.<ts>``), which checkpoints leave out."""
    return name == "LOG" or name.startswith("LOG.old.")


@dataclass(frozen=True)
class StoreRef:
    """Which store of which task of which job: the key under which snapshots are recorded."""

    job: str
    job_id: str
    task: str
    store: str

    def __post_init__(self) -> None:
        for name in ("job", "job_id", "task", "store"):
            value = getattr(self, name)
            if not value:
                raise UsageError(f"--{name.replace('_', '-')} is required")
            # Each part names a directory (store, task) or a blob key segment: keep it inside its parent.
            if "\x00" in value or "/" in value or value in (".", ".."):
                raise UsageError(f"invalid {name.replace('_', ' ')} {value!r}: '/', NUL, '.' and '..' are not allowed")

    def __str__(self) -> str:
        return f"{self.job}-{self.job_id}/{self.task}/{self.store}"


def task_dir_name(task: str) -> str:
    """Samza's store sub-dir name for a task: spaces replaced by underscores."""
    return task.replace(" ", "_")


def store_dir(state_dir: Path, store: str, task: str) -> Path:
    """``<state-dir>/<store>/<task with spaces -> _>``."""
    return Path(state_dir) / store / task_dir_name(task)


def new_checkpoint_id() -> str:
    """``<currentTimeMillis>-<nanoTime % 1000000>``, as Samza's CheckpointId.create()."""
    return f"{time.time_ns() // 1_000_000}-{time.monotonic_ns() % 1_000_000}"


def parse_checkpoint_id(value: str) -> tuple[int, int]:
    """Sort key of a checkpoint id, read as Samza reads it (formats.checkpoint.parse_checkpoint_id).
    Raises UsageError if malformed."""
    try:
        return _parse_checkpoint_id(value)
    except CheckpointFormatError as e:
        raise UsageError(str(e)) from None


def is_checkpoint_id(value: str) -> bool:
    """Whether Samza would read ``value`` as a checkpoint id."""
    try:
        _parse_checkpoint_id(value)
    except CheckpointFormatError:
        return False
    return True


def checkpoint_dir(store: Path, checkpoint_id: str) -> Path:
    """``<storeDir>-<checkpointId>``."""
    return store.with_name(f"{store.name}-{checkpoint_id}")


def local_checkpoint_dirs(store: Path) -> dict[str, Path]:
    """The checkpoint dirs beside a store dir, by checkpoint id."""
    out: dict[str, Path] = {}
    parent = store.parent
    if not parent.is_dir():
        return out
    prefix = store.name + "-"
    for p in parent.iterdir():
        if p.name.startswith(prefix) and is_canonical_checkpoint_id(p.name[len(prefix):]) and p.is_dir():
            out[p.name[len(prefix):]] = p
    return out
