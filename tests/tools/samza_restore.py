"""A small Python mirror of what a Samza job's start does with one logged, persistent store of an active
task under transactional state restore, written from Samza's sources (org.apache.samza.storage), to check in
tests what a start keeps of a state dir. Written apart from statectl (it imports only its offset-file
reader), so that a test does not check statectl against itself.

- StorageManagerUtil.getTaskStoreCheckpointDirs: every entry of ``<base>/<store>`` whose name contains
  ``<task dir>-``.
- StorageManagerUtil.isLoggedStoreValid: the offset file (``OFFSET-v2``, else ``OFFSET``) holds exactly the
  changelog SSP, and the store is not stale (isStaleStore: now - mtime of ``CHECKPOINT-V2``, else
  ``OFFSET-v2``, else ``OFFSET``, >= the changelog delete retention).
- TransactionalStateTaskRestoreManager.getStoreActions, the happy path (the checkpointed offset within the
  changelog's oldest and newest): the current dir is deleted; target = the checkpointed offset, or the newest
  when the checkpoint is older than 0.9 x min.compaction.lag.ms; of the valid checkpoint dirs whose offset lies
  in [oldest, target], the one with the highest offset is kept (the first one listed among equals), every
  other one deleted. Out of range, or no checkpointed offset: every dir deleted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

DAY_MS = 24 * 3600 * 1000
FOUR_HOURS_MS = 4 * 3600 * 1000


@dataclass
class StoreActions:
    retain: Path | None
    delete: list[Path] = field(default_factory=list)
    restore_from: int | None = None  # the local offset the restore starts after (None: from the oldest)
    restore_to: int | None = None


def checkpoint_dirs(base: Path, store: str, task: str) -> list[Path]:
    store_dir = base / store
    name = task.replace(" ", "_")
    return [p for p in store_dir.iterdir() if f"{name}-" in p.name] if store_dir.exists() else []


def read_offset(store_dir: Path, ssp_key: str) -> str | None | bool:
    """The offset the store dir's offset file names for ``ssp_key``; False when the file is missing or
    its SSPs are not exactly ``{ssp_key}`` (isOffsetFileValid)."""
    from statectl.formats.offsets import read_offset as read_bare
    from statectl.formats.offsets import read_offsets

    if (store_dir / "OFFSET-v2").exists():
        try:
            offsets = {ssp.key(): o for ssp, o in read_offsets(store_dir / "OFFSET-v2").items()}
        except Exception:  # noqa: BLE001 - Samza logs and takes it for invalid
            return False
        return offsets[ssp_key] if set(offsets) == {ssp_key} else False
    if (store_dir / "OFFSET").exists():
        return read_bare(store_dir / "OFFSET")
    return False


def is_stale(store_dir: Path, retention_ms: int, now_ms: int) -> bool:
    for name in ("CHECKPOINT-V2", "OFFSET-v2", "OFFSET"):
        if (store_dir / name).exists():
            return now_ms - int((store_dir / name).stat().st_mtime * 1000) >= retention_ms
    return now_ms >= retention_ms


def store_actions(base: Path, store: str, task: str, *, ssp_key: str, checkpoint_millis: int | None,
                  checkpointed_offset: int | None, oldest: int, newest: int, retention_ms: int = DAY_MS,
                  min_compaction_lag_ms: int = FOUR_HOURS_MS, now_ms: int | None = None) -> StoreActions:
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    current = base / store / task.replace(" ", "_")
    dirs = checkpoint_dirs(base, store, task)
    actions = StoreActions(None, [current])
    if checkpointed_offset is None or not oldest <= checkpointed_offset <= newest:
        actions.delete += dirs
        return actions
    since = now_ms - checkpoint_millis if checkpoint_millis is not None else float("inf")
    target = newest if since > 0.9 * min_compaction_lag_ms else checkpointed_offset
    for d in dirs:
        if not d.is_dir() or is_stale(d, retention_ms, now_ms):
            continue
        local = read_offset(d, ssp_key)
        if local is False or local is None:
            continue
        local = int(local)
        if oldest <= local <= target and (actions.retain is None or local > actions.restore_from):
            actions.retain, actions.restore_from = d, local
    actions.delete += [d for d in dirs if d != actions.retain]
    actions.restore_to = target
    return actions
