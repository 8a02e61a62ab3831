"""What a rescale reports: its sources, its targets and the figures of the run (RescaleResult), rendered
by the command as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SourceInfo:
    task: str
    snapshot_id: str
    checkpoint_id: str
    files: int
    bytes: int
    keys: int | None = None


@dataclass
class TargetInfo:
    task: str
    keys: int
    snapshot_id: str | None = None
    checkpoint_id: str | None = None
    files: int = 0
    bytes: int = 0
    files_copied: int = 0  # the key-group path: duplicated server-side from the sources, unread
    bytes_copied: int = 0
    files_read: int = 0  # ... and read by the executors, their keys in this target rewritten
    bytes_read: int = 0


@dataclass
class RescaleResult:
    store: str
    job: str
    to_job: str
    tasks_in: int
    tasks_out: int
    keys: int
    partitioner: str
    sources: list[SourceInfo]
    targets: list[TargetInfo]
    bytes_read: int = 0  # by the executors: the source snapshots' files, from the blob store
    bytes_written: int = 0  # by the executors: the targets' SST files
    bytes_uploaded: int = 0
    # The key-group path: the bytes of the files duplicated server-side into the targets, unread, and of
    # those the executors read and rewrote (the boundary files and what shares their key groups).
    key_groups: int | None = None
    bytes_copied: int = 0
    files_copied: int = 0
    files_rewritten: int = 0
    bytes_rewritten: int = 0
    content_hash: str = ""
    verified: bool = False
    committed: bool = False
    dry_run: bool = False
    # The new checkpoints point at no changelog offsets: those of the old partitioning mean nothing now.
    changelog_position: str | None = None
    duration_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    file_owner: str = ""  # USER:GROUP the targets' files are recorded with ("": the sources have no files)
    # This command run again (statectl.engine.rescale.rerun): "done" (nothing to do, nothing written) or
    # "finished" (it committed the targets a cut commit left); "" for a new rescale.
    rerun: str = ""

