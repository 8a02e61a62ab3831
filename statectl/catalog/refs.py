"""Which store a snapshot belongs to (StoreRef) and checkpoint ids (FORMATS.md "CheckpointId").

There is one checkpoint-id parser, Samza's (formats.checkpoint.parse_checkpoint_id); the functions here
wrap it for callers that report a bad id as a usage error."""

from __future__ import annotations

import time
from dataclasses import dataclass

from statectl import defaults
from statectl.errors import Command, UsageError, command
from statectl.local.layout import check_name
from statectl.formats.checkpoint_id import CheckpointFormatError
from statectl.formats.checkpoint_id import parse_checkpoint_id as _parse_checkpoint_id


@dataclass(frozen=True)
class StoreRef:
    """Which store of which task of which job: the key under which snapshots are recorded."""

    job: str
    job_id: str
    task: str
    store: str

    def __post_init__(self) -> None:
        for name in ("job", "job_id", "task", "store"):
            # Each part names a directory (store, task) or a blob key segment: keep it inside its parent.
            check_name(name.replace("_", " "), getattr(self, name))

    def __str__(self) -> str:
        return f"{self.job}-{self.job_id}/{self.task}/{self.store}"

    def args(self) -> tuple[str, ...]:
        """The flags that name this store on statectl's command line (--job-id only when not the default)."""
        job_id = () if self.job_id == defaults.JOB_ID else ("--job-id", self.job_id)
        return ("--job", self.job, *job_id, "--task", self.task, "--store", self.store)

    def command(self, words: str, *args: str) -> Command:
        """The statectl command ``words`` on this store (``ref.command("snapshots list")``), for a hint."""
        return command(words, *self.args(), *args, without=("job_id",))


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
